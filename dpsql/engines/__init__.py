"""The engine: DuckDB, opened read-only with external access disabled, as a second wall behind
the checker.

A database is a DuckDB file, or a folder of CSV/Parquet files (one table per file, named after
the file). For a folder, dpsql writes a small private catalog file of views over those files,
then opens it read-only with ``enable_external_access = false``; only the folder itself stays
readable (``allowed_directories``) and the configuration is locked, so no query can reach any
other file, install or load an extension, attach a database or change a setting. The
process's engines on the same files share that catalog
(:mod:`dpsql.engines.duckdb_engine.folders`).

Post-processing runs on a separate *scratch* connection: in-memory, holding no private data,
with external access disabled as well.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

from dpsql.cache import LRU, REWRITTEN_CACHE_SIZE
from dpsql.engines import locked
from dpsql.engines.duckdb_engine import folders
from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.engines.histograms import duckdb_gather, joined_histograms
from dpsql.engines.physical import INTEGER_TYPES as INTEGER_TYPES
from dpsql.engines.physical import compatible as compatible
from dpsql.engines.physical import declared_type as declared_type
from dpsql.engines.physical import public_select
from dpsql.errors import EngineError, MetadataError
from dpsql.metadata.metadata import ColumnType

if TYPE_CHECKING:
    import numpy as np
    from sqlglot import exp
    from sqlglot.dialects.dialect import Dialect

    from dpsql.metadata.metadata import Metadata
    from dpsql.privacy.plan import Plan

_log = logging.getLogger(__name__)
#: Engine errors whose messages quote the query, never the data: raised before any row is
#: read, or on a cancel request.
_BEFORE_ROWS = (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException,
                duckdb.PermissionException, duckdb.NotImplementedException,
                duckdb.InterruptException)

# DuckDB turns the row_number() <= k of contribution bounding into a per-unit top-k aggregate,
# which measured 1.7x slower than the sorted window on 10M rows (benchmarks/bench_bounding.py).
_DISABLED_OPTIMIZERS = "top_n_window_elimination"


class CancelToken(Protocol):
    """Stops the execution that the calling thread is running (or will run next) on an
    engine: :meth:`Engine.cancel_token` makes one, the owner's deadline fires it."""

    def cancel(self) -> None: ...


class Engine(Protocol):
    """The seam between dpsql and a SQL engine: what :class:`~dpsql.database.Database` and the
    pipeline ask of it. The engine computes exact per-group measurements and nothing else;
    noise, thresholds, the budget and post-processing stay in dpsql.

    ``name`` is the engine's identity (``"duckdb"``, ``"postgres"``, ``"spark"``); ``dialect``
    is the sqlglot dialect that spells the rewritten query and its IR nodes
    (:mod:`dpsql.engines.ir`); ``raises_on_float_overflow`` says that DOUBLE arithmetic that
    overflows raises instead of giving Infinity, so the checker refuses what could
    (:func:`dpsql.query.check.refuse_float_overflow`); ``location`` names the database (a resolved
    path, or a URL without its password: the scope of stored answers). ``schema``
    maps each table to its columns' physical types (lower-case names), read once when the
    engine opens; ``rewritten`` caches the generated SQL per plan (:func:`dpsql.routes.pipeline.
    engine_sql`). ``execute`` runs one checked, rewritten query with its parameters and raises
    :class:`~dpsql.errors.EngineError` (``interrupted`` when a cancel token stopped it)."""

    @property
    def name(self) -> str: ...

    @property
    def dialect(self) -> type[Dialect]: ...

    @property
    def raises_on_float_overflow(self) -> bool: ...

    @property
    def location(self) -> str: ...

    @property
    def schema(self) -> Mapping[str, Mapping[str, str]]: ...

    @property
    def rewritten(self) -> LRU[int, tuple[object, str, bool]]: ...

    def execute(self, sql: str, parameters: Sequence[object] = ()
                ) -> tuple[list[str], list[tuple[object, ...]]]: ...

    def compile(self, tree: exp.Expression, plan: Plan, salted: bool) -> str:
        """The engine's SQL for the rewritten tree of ``plan`` (written for DuckDB's
        semantics), checked on empty tables of the engine's physical types: raises
        :class:`~dpsql.errors.UnsupportedQuery` for what the engine cannot run."""
        ...

    def read_public(self, table: str, columns: Mapping[str, str]
                    ) -> list[tuple[object, ...]]:
        """Every row of the public ``table``, the ``columns`` (name -> declared type: int,
        float, text, bool, date, timestamp) in that order, each read as its declared type
        (:data:`~dpsql.metadata.metadata.ENGINE_TYPES`; NULL where a value does not convert, never
        an error). The only plan-time read of data: :class:`~dpsql.execution.public.PublicStore`
        copies public tables with it, and joins and exact public reads run on that copy. Public
        tables protect no one, so reading them leaks nothing; the SQL is the engine's own
        (:func:`public_select` spells it for DuckDB's semantics)."""
        ...

    def cancel_token(self) -> CancelToken: ...

    def close(self) -> None: ...


class CursorCancel:
    """A DuckDB cancel token: the calling thread's cursor, interrupted."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def cancel(self) -> None:
        self._cursor.interrupt()

    def progress(self) -> float | None:
        """DuckDB's progress of the running query in percent; None where it reports none (it
        reports only with ``enable_progress_bar``, which the locked connections do not set)."""
        try:
            value = float(self._cursor.query_progress())
        except duckdb.Error:
            return None
        return value if value >= 0 else None


class DuckDBEngine:
    """A read-only DuckDB database shared by threads; each call uses its own cursor. The
    default :class:`Engine`."""

    name = "duckdb"
    dialect = DuckDBDialect
    raises_on_float_overflow = False  # a double overflows to Infinity

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.location = str(self.path.resolve())
        if not self.path.exists():
            raise EngineError(f"database {self.path} does not exist; pass a DuckDB file or a "
                              "folder of CSV/Parquet files")
        self._folder: folders.Catalog | None = None
        try:
            if self.path.is_dir():
                self._folder = folders.acquire(self.path, disabled_optimizers=_DISABLED_OPTIMIZERS)
                self._connection = self._folder.connection.cursor()
            else:
                self._connection = self._open_file(self.path, allowed=None)
            self._local = threading.local()
            if self._folder is not None and not self._folder.schema:
                self._folder.schema = self.tables()  # read once per catalog
            self.schema = self._schema()
        except BaseException as e:
            if self._folder is not None:  # never left in use: it could not be closed
                folders.release(self._folder)
            if isinstance(e, duckdb.Error):
                raise EngineError(f"cannot open database {self.path}: {e}") from None
            raise
        # Plan identity -> (plan, rewritten SQL, salted): see dpsql.routes.pipeline.engine_sql.
        self.rewritten: LRU[int, tuple[object, str, bool]] = LRU(REWRITTEN_CACHE_SIZE)

    @staticmethod
    def _open_file(path: Path, allowed: Path | None) -> duckdb.DuckDBPyConnection:
        return locked.read_only(path, allowed, disabled_optimizers=_DISABLED_OPTIMIZERS)

    def _schema(self) -> dict[str, dict[str, str]]:
        """Table -> column -> physical DuckDB type, lower-case names (for the rewrite)."""
        tables = self._folder.schema if self._folder is not None else self.tables()
        return {table.lower(): {c.lower(): t.upper() for c, t in columns}
                for table, columns in tables.items()}

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for the calling thread (DuckDB connections are not shared across threads)."""
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._connection.cursor()
            self._local.cursor = cur
        return cur

    def compile(self, tree: exp.Expression, plan: Plan, salted: bool) -> str:
        """DuckDB's text of the tree: the pipeline checks this very text on empty tables
        (:func:`dpsql.routes.pipeline.check_engine_query`)."""
        # Histograms as GROUP BY keys, bucket, gathered into lists (dpsql.engines.histograms).
        from sqlglot import exp

        if isinstance(tree, exp.Select):  # a fresh copy: generated in place
            return joined_histograms(tree.copy(), duckdb_gather).sql(dialect=DuckDBDialect,
                                                                      copy=False)
        return tree.sql(dialect=DuckDBDialect)

    def cancel_token(self) -> CancelToken:
        """A token that interrupts what this thread runs on the engine (its own cursor)."""
        return CursorCancel(self.cursor())

    def read_public(self, table: str, columns: Mapping[str, str]
                    ) -> list[tuple[object, ...]]:
        """Every row of a public table, as the declared types (:meth:`Engine.read_public`)."""
        select = public_select(table, columns, self.schema.get(table.lower(), {}))
        return self.execute(select.sql(dialect=DuckDBDialect))[1]

    def execute(self, sql: str, parameters: Sequence[object] = ()
                ) -> tuple[list[str], list[tuple[object, ...]]]:
        """Run one checked, rewritten query and return its column names and rows."""
        try:
            result = self.cursor().execute(sql, list(parameters) or None)
            names = [d[0] for d in result.description or []]
            return names, result.fetchall()
        except _BEFORE_ROWS as e:  # raised while binding, before any row is read
            raise EngineError(f"the engine failed on the rewritten query: {e}",
                              owner_detail=str(e),
                              interrupted=isinstance(e, duckdb.InterruptException)) from None
        except duckdb.Error as e:
            # Raised while reading rows: its message may quote a private value ("Overflow in
            # addition of INT8 (100 + 100)"). The rewrite makes every row-level expression
            # total, so this is a dpsql bug; the analyst gets no detail, the owner's log does
            # (dpsql.database logs owner_detail to the "dpsql.owner" logger).
            raise EngineError("the engine failed on the rewritten query (a dpsql bug: the "
                              "data owner's log has the details)",
                              owner_detail=str(e)) from None

    def tables(self) -> dict[str, list[tuple[str, str]]]:
        """Table name -> [(column, DuckDB type)], from the engine's schema (no data read):
        the schema that unqualified names resolve to, where queries read; a table of the same
        name in another schema would otherwise lend it its columns and types."""
        rows = self.cursor().execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_catalog = current_database() AND table_schema = current_schema() "
            "ORDER BY table_name, ordinal_position").fetchall()
        out: dict[str, list[tuple[str, str]]] = {}
        for table, column, dtype in rows:
            out.setdefault(table, []).append((column, dtype))
        return out

    def close(self) -> None:
        self._connection.close()
        if self._folder is not None:
            folders.release(self._folder)
            self._folder = None


# --- which engine a database argument names ----------------------------------------------


def _postgres(url: str, metadata: Metadata | None) -> Engine:
    from dpsql.engines.postgres.engine import PostgresEngine

    tables = None if metadata is None else [t.lower() for t in metadata.tables]
    timeout = None if metadata is None else metadata.server.statement_timeout
    return PostgresEngine(url, tables=tables, statement_timeout=timeout)


def _spark(url: str, metadata: Metadata | None) -> Engine:
    from dpsql.engines.spark.engine import SparkEngine

    return SparkEngine(url)


#: URL scheme -> how to open that engine (the URL, the metadata); anything else is a DuckDB
#: file or folder. One line per engine.
ENGINES: dict[str, Callable[[str, Metadata | None], Engine]] = {
    "postgresql": _postgres,
    "postgres": _postgres,
    "sc": _spark,  # Spark Connect
    "spark": _spark,  # a Spark cluster's master (spark://host), or spark:local[N]
}
#: Schemes written without "//" (``spark:local``).
_BARE = ("spark",)


def url_scheme(database: str | Path) -> str | None:
    """The scheme of a database URL (``postgresql://...``, ``sc://...``, ``spark:local``),
    lower-case; None for a path. A :class:`~pathlib.Path` is always a path, so a folder may
    be named ``local`` or ``spark:x``; a text is a URL only when it starts with a scheme and
    ``://``, or with ``spark:``."""
    if not isinstance(database, str):
        return None
    found = re.match(r"^([a-z][a-z0-9+.-]*):(//)?", database, re.I)
    if found is None or (found.group(2) is None and found.group(1).lower() not in _BARE):
        return None
    return found.group(1).lower()


def is_url(database: str | Path) -> bool:
    """Whether ``database`` names a server by URL rather than a path (:func:`url_scheme`)."""
    return url_scheme(database) is not None


def open_engine(database: str | Path, metadata: Metadata | None = None) -> Engine:
    """The engine ``database`` names: a URL of :data:`ENGINES` (kept as text, never made a
    :class:`~pathlib.Path`), else a DuckDB file or folder of CSV/Parquet files. ``metadata``
    gives a server engine the declared tables and the owner's statement timeout."""
    scheme = url_scheme(database)
    if scheme is None:
        return DuckDBEngine(database)
    opener = ENGINES.get(scheme)
    if opener is None:
        raise EngineError(f"unknown database URL scheme {scheme!r}: use a DuckDB file or "
                          f"folder, or one of {', '.join(s + '://' for s in ENGINES)}")
    return opener(str(database), metadata)


# --- declared types against physical types ---------------------------------------------------

#: What each declared type may be stored as, and what the owner reads in the error message.
_STORED_AS = {
    "int": "an integer type, DECIMAL(p, 0) or VARCHAR",
    "float": "FLOAT, DOUBLE, DECIMAL, an integer type or VARCHAR",
    "text": "VARCHAR",
    "bool": "BOOLEAN or VARCHAR",
    "date": "DATE, TIMESTAMP (without time zone) or VARCHAR",
    "timestamp": "TIMESTAMP, TIMESTAMP WITH TIME ZONE (read in UTC), DATE or VARCHAR",
}


def check_metadata(metadata: Metadata, schema: Mapping[str, Mapping[str, str]],
                   database: str | Path) -> list[str]:
    """Refuse, with a :class:`~dpsql.errors.MetadataError`, a declared table or column that
    the database does not hold, or a declared type its physical type does not match.

    Run when a database is opened, so that no such mismatch ever surfaces as an engine error
    after a charge, or as a silently wrong answer. A declared type accepts these physical
    types, each read exactly (widened to BIGINT or DOUBLE by the rewrite):

    * int: any integer type (TINYINT ... HUGEINT, unsigned too) and DECIMAL(p, 0); a value
      beyond BIGINT reads as NULL;
    * float: FLOAT, DOUBLE, any DECIMAL, any integer type;
    * text: VARCHAR;
    * bool: BOOLEAN;
    * date: DATE, and TIMESTAMP without time zone (TIMESTAMP_S/_MS/_NS too), read as its
      date. TIMESTAMP WITH TIME ZONE is refused: its date depends on the session time zone;
    * timestamp: TIMESTAMP (TIMESTAMP_S/_MS/_NS too), DATE (its midnight) and TIMESTAMP WITH
      TIME ZONE, read as its UTC instant (``AT TIME ZONE 'UTC'``, whatever the session zone).

    VARCHAR is accepted for every type (a CSV column with one malformed value is read as
    text): it is read with TRY_CAST, so a value that does not convert is NULL, never an error,
    and counts as a missing value. Those columns are returned, one message each, for a warning.
    Anything else (DOUBLE declared int, INTEGER declared text, UUID, lists, ...) is refused.
    """
    warnings = []
    for table in metadata.tables.values():
        stored_columns = schema.get(table.name.lower())
        if stored_columns is None:
            raise MetadataError(
                f"{metadata.source}: table {table.name!r} is declared but the database "
                f"{database} has no such table (it has {_names(schema)}); fix the name in the "
                "metadata or remove the table's section")
        for column in table.columns.values():
            stored = stored_columns.get(column.name.lower())
            where = f"{metadata.source}: table {table.name!r}, column {column.name!r}"
            if stored is None:
                raise MetadataError(
                    f"{where} is declared but the database's table has no such column (it has "
                    f"{_names(stored_columns)}); fix the name or remove the column")
            if not compatible(column.type, stored):
                raise MetadataError(f"{where} is declared {column.type} but the database "
                                    f"stores it as {stored}; {_remedy(column.type, stored)}")
            if column.type != ColumnType.TEXT and stored.upper() == "VARCHAR":
                warnings.append(f"{where} is declared {column.type} but stored as VARCHAR: "
                                "a value that does not convert is read as NULL")
    return warnings


def _remedy(declared: str, stored: str) -> str:
    kind = declared_type(stored.upper())
    store = (f"or store it as {_STORED_AS[declared]} (for a DuckDB file, a view with a "
             "CAST does)")
    if kind is None:
        return f"{declared} columns must be stored as {_STORED_AS[declared]}: " + store[3:]
    return f"declare it as type \"{kind}\" {store}"


def _names(names: Mapping[str, object]) -> str:
    shown = sorted(names)[:20]
    more = f" and {len(names) - len(shown)} more" if len(names) > len(shown) else ""
    return (", ".join(shown) + more) if shown else "none"


_scratch_lock = threading.Lock()
_scratch: duckdb.DuckDBPyConnection | None = None
_scratch_local = threading.local()


def scratch() -> duckdb.DuckDBPyConnection:
    """A per-thread cursor on an in-memory DuckDB that holds no private data."""
    global _scratch
    cur: duckdb.DuckDBPyConnection | None = getattr(_scratch_local, "cursor", None)
    if cur is not None:
        return cur
    with _scratch_lock:
        if _scratch is None:
            _scratch = locked.in_memory()
        cur = _scratch.cursor()
    _scratch_local.cursor = cur
    return cur


def run_on_cells(sql: str, name: str, columns: Mapping[str, np.ndarray]
                 ) -> tuple[list[str], list[str], list[tuple[object, ...]]]:
    """Run post-processing ``sql`` over a table ``name`` of noisy cells (numpy arrays)."""
    cur = scratch()
    cur.register(name, columns)
    try:
        result = cur.execute(sql)
        description = result.description or []
        return ([d[0] for d in description], [str(d[1]) for d in description],
                result.fetchall())
    except duckdb.Error as e:  # reads noisy cells or public domains only, never private rows
        raise EngineError(f"the engine failed on the query over the noisy cells: {e}") from None
    finally:
        cur.unregister(name)
