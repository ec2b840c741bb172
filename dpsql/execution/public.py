"""Exact reads of public tables: a query that reads only tables the owner declared public.

A public table (``public = true`` in the metadata: regions, category names, calendars) protects
no one, so a query that reads nothing else is answered exactly, with no noise and no charge:
any single SELECT (joins, window functions, ORDER BY, LIMIT, plain columns, subqueries, CTEs,
set operations). :func:`public_read` decides whether a query takes this path; the private
pipeline (:mod:`dpsql.routes.pipeline`) answers everything else.

**Why a query that also reads a private table can never be answered here.** Two walls:

1. the decision: every table reference anywhere in the tree (FROM, JOIN, LATERAL, subqueries,
   CTE bodies, set operations) must name a declared public table, by its plain or ``main.``
   name, or a CTE of the query; a CTE may not be named like any declared table (so no CTE can
   hide a private table's name in another scope), and a table function (``read_csv(...)``,
   ``query(...)``) in FROM is never a table. Any other reference sends the query to the
   private pipeline, which answers or refuses it as always;
2. the place it runs: not the engine's connection but a separate in-memory DuckDB
   (:class:`PublicStore`) holding only the public tables, only their declared columns, read
   with their declared types; external access disabled and its configuration locked. Even a
   function that runs SQL text (``query_table``, ``json_execute_serialized_sql``) finds
   nothing private there.

**The rest of the gate.** The text is one SELECT (set operations allowed), checked at plan
time on empty tables of the declared types, so a name or type error is a refusal with nothing
read; recursive CTEs, ``SELECT ... INTO`` and the functions of :mod:`dpsql.query.denied` are
refused. The run is bounded by the owner's ``statement_timeout`` (:meth:`dpsql.Database.run`). An
error while reading public rows (say, a division by zero) is an ordinary error: it depends on public
data only.

**Cost.** None, and no ledger entry: the answer is a function of public data only, so it is
the same on every pair of neighbouring databases (0-DP). A metered database still refuses an
analyst it does not know.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import duckdb
from sqlglot import exp

from dpsql.engines import Engine, locked
from dpsql.errors import (
    DataError,
    EngineError,
    ForbiddenFunction,
    NotASingleSelect,
    UnknownColumn,
    UnsupportedQuery,
)
from dpsql.execution.postprocess import Result, ResultColumn
from dpsql.execution.result import renamed
from dpsql.metadata.metadata import ENGINE_TYPES, Metadata, Table
from dpsql.query.check import function_name
from dpsql.query.denied import denied
from dpsql.query.names import readable_names

_DEFAULT_SCHEMAS = {"", "main"}
_MEMORY_LIMIT = "512MB"


@dataclass(frozen=True)
class PublicRead:
    """A query answered exactly from public tables: its DuckDB text and its typed columns."""

    sql: str
    tables: tuple[str, ...]  # the public tables it reads
    columns: tuple[ResultColumn, ...]

    @property
    def output_names(self) -> list[str]:
        return [c.name for c in self.columns]


def public_read(tree: exp.Expression, metadata: Metadata) -> PublicRead | None:
    """The exact public read of ``tree`` (the parsed query, :func:`dpsql.query.parse.parse_query`;
    read, not kept), or None when it reads anything but public tables (the private pipeline
    then answers or refuses it). Refuses, before anything runs, a query over public tables
    only that the gate does not allow (module docstring)."""
    if not isinstance(tree, exp.Select | exp.SetOperation):
        return None
    tables = _public_tables(tree, metadata)
    if tables is None:
        return None
    check_functions(tree)
    text = tree.sql(dialect="duckdb")
    columns = dry_run(text, [metadata.tables[t] for t in _all_public(metadata)])
    return PublicRead(text, tables, renamed(columns, readable_names(
        tree, [c.name for c in columns])))  # count, not DuckDB's count_star()


def _all_public(metadata: Metadata) -> list[str]:
    return [name for name, t in metadata.tables.items() if t.public]


def reads_only_public(tree: exp.Query, metadata: Metadata) -> bool:
    """Whether ``tree`` reads public tables and nothing else (see :func:`public_read`)."""
    return _public_tables(tree, metadata) is not None


def _public_tables(tree: exp.Query, metadata: Metadata) -> tuple[str, ...] | None:
    """The public tables ``tree`` reads, or None if it reads anything else (or nothing)."""
    return declared_tables(tree, metadata, public_only=True)


def declared_tables(tree: exp.Query, metadata: Metadata, public_only: bool = False
                    ) -> tuple[str, ...] | None:
    """The declared tables ``tree`` reads (only public ones with ``public_only``), or None if
    it reads anything else (a table function, another schema, an undeclared name) or
    nothing."""
    ctes = {cte.alias.lower() for cte in tree.find_all(exp.CTE)}
    if ctes & set(metadata.tables):
        return None  # a CTE named like a declared table: never guess which one is meant
    read: dict[str, None] = {}
    for table in tree.find_all(exp.Table):
        if isinstance(table.parent, exp.Into):
            continue  # refused by check_functions
        if not isinstance(table.this, exp.Identifier):
            return None  # a table function: the private pipeline refuses it
        name, schema = table.name.lower(), (table.db or "").lower()
        if not table.catalog and not schema and name in ctes:
            continue
        declared = metadata.table(name)
        if table.catalog or schema not in _DEFAULT_SCHEMAS or declared is None or \
                (public_only and not declared.public):
            return None
        read[declared.name.lower()] = None
    return tuple(read) or None


def check_functions(tree: exp.Query) -> None:
    """Refuse recursive CTEs, ``SELECT ... INTO`` and the functions of :data:`_FORBIDDEN`."""
    for with_ in tree.find_all(exp.With):
        if with_.args.get("recursive"):
            raise UnsupportedQuery("recursive CTEs are not supported; use a plain WITH")
    if tree.find(exp.Into) is not None:
        raise NotASingleSelect("SELECT ... INTO would create a table; only SELECT queries are "
                               "answered, and dpsql never changes data")
    for node in tree.walk():
        name = function_name(node)
        if denied(name):  # the store holds nothing else, but a refusal beats an engine error
            raise ForbiddenFunction(f"function {name}() is not allowed in dpsql queries")



def dry_run(sql: str, tables: list[Table]) -> tuple[ResultColumn, ...]:
    """Bind and run ``sql`` on empty tables of the declared types: a name or type error is a
    refusal, nothing read; the result's column names and types are the answer's. On a DuckDB
    of its own, not the shared dry runs' database (:mod:`dpsql.engines.duckdb_engine.dry`):
    ``sql`` is the analyst's, and neither its memory nor what it can name (the database's own
    name, say) may depend on other queries of the process."""
    def empty_tables(con: duckdb.DuckDBPyConnection) -> None:
        for table in tables:
            con.execute(f"CREATE TABLE {_name(table.name)} ({_column_list(table)})")

    con = locked.in_memory(empty_tables, memory_limit=_MEMORY_LIMIT, threads=1)
    try:
        result = con.execute(sql)
        description = result.description or []
        result.fetchall()
        return tuple(ResultColumn(d[0], str(d[1])) for d in description)
    except duckdb.BinderException as e:
        first = str(e).splitlines()[0]
        kind = UnknownColumn if "column" in first.lower() else UnsupportedQuery
        raise kind(f"the query over public tables is not valid: {first}") from None
    except duckdb.Error as e:
        raise UnsupportedQuery(f"the query over public tables is not valid: "
                               f"{str(e).splitlines()[0]}") from None
    finally:
        con.close()


def _name(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


def _column_list(table: Table) -> str:
    return ", ".join(f"{_name(c.name)} {ENGINE_TYPES[c.type]}" for c in table.columns.values())


class PublicStore:
    """The public tables, copied from the engine into a locked in-memory DuckDB on first use:
    only their declared columns, read as the declared types (a value that does not convert is
    NULL). Shared by threads; each thread reads through its own cursor."""

    def __init__(self, metadata: Metadata, engine: Engine) -> None:
        self._metadata, self._engine = metadata, engine
        self._lock = threading.Lock()
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._local = threading.local()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        cur: duckdb.DuckDBPyConnection | None = getattr(self._local, "cursor", None)
        if cur is not None:
            return cur
        with self._lock:
            if self._connection is None:
                self._connection = self._load()
            cur = self._connection.cursor()
        self._local.cursor = cur
        return cur

    def _load(self) -> duckdb.DuckDBPyConnection:
        return locked.in_memory(self._copy, memory_limit=_MEMORY_LIMIT, threads=1)

    def _copy(self, con: duckdb.DuckDBPyConnection) -> None:
        for name in _all_public(self._metadata):
            table = self._metadata.tables[name]
            con.execute(f"CREATE TABLE {_name(table.name)} ({_column_list(table)})")
            # The engine spells its own SQL (Engine.read_public): never DuckDB's text.
            rows = self._engine.read_public(
                table.name, {c.name: c.type for c in table.columns.values()})
            locked.insert_rows(con, _name(table.name),
                               [ENGINE_TYPES[c.type] for c in table.columns.values()], rows)

    def read(self, sql: str) -> list[tuple[object, ...]]:
        """Rows of ``sql`` (DuckDB's SQL over the public tables, typed as declared) on this
        copy: how plans read public data (:mod:`dpsql.query.joins`: multiplicities, key domains,
        bounds), the same values on every engine."""
        try:
            return self.cursor().execute(sql).fetchall()
        except duckdb.Error as e:  # public data only: the message may be shown as it is
            raise DataError(f"reading public tables failed: {str(e).splitlines()[0]}") from None

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def answer_public(read: PublicRead, cursor: duckdb.DuckDBPyConnection) -> Result:
    """Run ``read`` exactly on a cursor of the :class:`PublicStore` (the caller arms the
    owner's time limit on it)."""
    try:
        rows = cursor.execute(read.sql).fetchall()
    except duckdb.InterruptException:
        raise EngineError("interrupted", interrupted=True) from None
    except duckdb.Error as e:  # public data only: the message may be shown as it is
        raise DataError(f"the query over public tables failed: "
                        f"{str(e).splitlines()[0]}") from None
    width = len(read.columns)
    return Result(list(read.columns), rows, [(None,) * width for _ in rows])
