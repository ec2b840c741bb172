"""The catalog that the proxy owns: pg_catalog and information_schema for PostgreSQL clients.

Drivers and BI tools learn what they can query from PostgreSQL's system catalogs. dpsql answers
those queries from a small in-memory DuckDB that holds catalog tables built from the metadata
only: the declared tables and their declared columns (types, nullability, and the declared
bounds and domains as column comments; the metadata is public by definition). It holds no row
of private data and cannot reach the database: it is a separate DuckDB instance with external
access disabled and its configuration locked. Row counts, sizes and statistics are never shown
(``reltuples = -1``, sizes NULL): they would be exact aggregates.

A catalog query is parsed with sqlglot's PostgreSQL dialect and rewritten for DuckDB:
``pg_catalog.X`` and ``information_schema.X`` name the tables and macros here; casts to
``regclass``/``regtype``/``oid``/``name`` become lookups or plain types; session functions
(``current_user``, ``current_setting('...')``, ``version()``, ...) become literals. What the
catalog cannot answer is decided from the rewritten tree before it runs (a function the
catalog DuckDB lacks) or by DuckDB refusing it, and is always an error the client shows
(SQLSTATE 0A000 naming what is unsupported), never an empty answer: an empty table list looks
like an empty database to the admin of a BI tool.

Modules: :mod:`.tables` (the tables' columns and fixed OIDs), :mod:`.build` (the catalog
DuckDB and its rows), :mod:`.keys` (keys from ``unique`` and ``unit_path``), :mod:`.keywords`,
:mod:`.rewrite` with :mod:`.casts` and :mod:`.functions` (the query rewrite), :mod:`.names`
(PostgreSQL's column names), :mod:`.model` (what a query depends on and answers).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

import duckdb
from sqlglot import exp
from sqlglot.errors import ErrorLevel, SqlglotError

from dpsql.cache import LRU
from dpsql.engines import locked
from dpsql.metadata.metadata import Metadata
from dpsql.server.catalog.build import _table_oids, build
from dpsql.server.catalog.model import CatalogError, CatalogQuery, CatalogResult, SessionInfo
from dpsql.server.catalog.names import function_name, pg_column_names, pg_name, remember_names
from dpsql.server.catalog.rewrite import rewrite
from dpsql.server.catalog.tables import INFO_TABLES, TABLES

__all__ = ["Catalog", "CatalogError", "CatalogQuery", "CatalogResult", "SessionInfo",
           "function_name", "pg_column_names", "pg_name", "remember_names"]

log = logging.getLogger(__name__)


class Catalog:
    """The in-memory catalog DuckDB, shared by all sessions (read by many threads)."""

    def __init__(self, metadata: Metadata, memory_limit: str = "256MB") -> None:
        self.metadata = metadata
        self.table_oids = _table_oids(metadata)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._cache: LRU[tuple[object, ...], CatalogQuery] = LRU(1024)
        def fill(con: duckdb.DuckDBPyConnection) -> None:
            build(con, metadata, self.table_oids)
            self._functions = _function_names(con)
            con.execute(f"SET memory_limit = '{memory_limit}'")
            con.execute("SET threads = 2")

        self._con = locked.in_memory(fill)
        self.catalog_tables = set(TABLES)
        self.info_tables = set(INFO_TABLES)

    # --- running

    def cursor(self) -> duckdb.DuckDBPyConnection:
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            with self._lock:
                cur = self._con.cursor()
            self._local.cursor = cur
        return cur

    def prepare(self, sql: str, tree: exp.Expression, info: SessionInfo) -> CatalogQuery:
        return self._cache.get_or_compute((sql, info.key()), lambda: self._prepare(tree, info))

    def _prepare(self, tree: exp.Expression, info: SessionInfo) -> CatalogQuery:
        names = pg_column_names(tree)
        try:
            rewritten = rewrite(tree.copy(), info)
            missing = self._unsupported(rewritten)
            if missing:
                raise CatalogError(f"dpsql's catalog has no function {missing}(): this "
                                   "catalog query is not supported")
            try:
                text = rewritten.sql(dialect="duckdb", unsupported_level=ErrorLevel.RAISE)
            except SqlglotError as e:
                raise CatalogError("dpsql's catalog cannot answer this query: "
                                   f"{_first_line(e)}") from None
        except CatalogError as e:
            log.info("catalog query not answered: %s", str(e)[:200])
            raise
        return CatalogQuery(text, names)

    def _unsupported(self, tree: exp.Expr) -> str | None:
        """The first function of the rewritten query that the catalog DuckDB lacks (sqlglot
        keeps a function it does not know as ``Anonymous``; the functions it knows have a
        DuckDB spelling)."""
        for node in tree.find_all(exp.Anonymous):
            name = node.name.lower()
            # ANY/ALL/SOME over a subquery or an array parse as calls; they are operators
            if name not in self._functions and name not in ("any", "all", "some"):
                return name
        return None

    def run(self, query: CatalogQuery, cursor: duckdb.DuckDBPyConnection,
            describe_only: bool = False) -> CatalogResult:
        """Run (or only describe) a prepared catalog query on ``cursor`` (a :meth:`cursor`).

        A query the catalog DuckDB cannot run is an error the client shows (SQLSTATE 0A000),
        never an empty answer: an empty table list looks like an empty database to an admin."""
        try:
            rel = cursor.sql(query.sql)
            if rel is None:
                raise CatalogError("not a query")
            names = list(rel.columns)
            types = [str(ty) for ty in rel.types]
            rows = [] if describe_only else _fetch(cursor, query.sql, types, rel)
        except duckdb.InterruptException:
            raise
        except duckdb.Error as e:
            log.info("catalog query not answered: %s", _first_line(e)[:200])
            raise CatalogError(f"dpsql's catalog cannot answer this query: {_first_line(e)}",
                               "0A000") from None
        if query.names is not None and len(query.names) == len(names):
            names = list(query.names)
        return CatalogResult(names, types, rows)

    def close(self) -> None:
        self._con.close()


_functions: frozenset[str] | None = None


def _function_names(con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """Every function the catalog DuckDB has (its own and the macros of PG_SCHEMA): a query
    calling another is refused before it runs (see Catalog._unsupported). The same for every
    catalog (the macros are dpsql's own, not the metadata's): read once per process (45 ms)."""
    global _functions
    if _functions is None:
        _functions = frozenset(row[0].lower() for row in con.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions()").fetchall())
    return _functions


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _fetch(cursor: duckdb.DuckDBPyConnection, sql: str, types: list[str],
           rel: duckdb.DuckDBPyRelation) -> list[tuple[Any, ...]]:
    """The rows; ``timestamptz`` values read as UTC instants (DuckDB converts them to Python
    with pytz, which dpsql does not depend on: without it, ``SELECT $1::timestamptz`` or
    ``now()`` answered empty)."""
    aware = {i for i, ty in enumerate(types) if ty == "TIMESTAMP WITH TIME ZONE"}
    if not aware:
        return rel.fetchall()
    columns = ", ".join(f"timezone('UTC', #{i + 1})" if i in aware else f"#{i + 1}"
                        for i in range(len(types)))
    rows = cursor.sql(f"SELECT {columns} FROM ({sql})").fetchall()
    return [tuple(v.replace(tzinfo=dt.UTC) if i in aware and v is not None else v
                  for i, v in enumerate(row)) for row in rows]
