"""The DuckDB engine, opened read-only with external access disabled, as a second wall behind
the checker.

A database is a DuckDB file, or a folder of CSV/Parquet files (one table per file, named after
the file). For a folder, dpsql writes a small private catalog file of views over those files,
then opens it read-only with ``enable_external_access = false``; only the folder itself stays
readable (``allowed_directories``) and the configuration is locked, so no query can reach any
other file, install or load an extension, attach a database or change a setting. The
process's engines on the same files share that catalog
(:mod:`dpsql.engines.duckdb_engine.folders`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from dpsql.cache import LRU, REWRITTEN_CACHE_SIZE
from dpsql.engines import locked
from dpsql.engines.duckdb_engine import folders, grouping
from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.engines.histograms import duckdb_gather, joined_histograms
from dpsql.engines.physical import public_select
from dpsql.errors import EngineError

if TYPE_CHECKING:
    import numpy.typing as npt
    from sqlglot import exp

    from dpsql.engines.protocol import CancelToken

#: Engine errors whose messages quote the query, never the data: raised before any row is
#: read, or on a cancel request.
_BEFORE_ROWS = (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException,
                duckdb.PermissionException, duckdb.NotImplementedException,
                duckdb.InterruptException)

# DuckDB turns the row_number() <= k of contribution bounding into a per-unit top-k aggregate,
# which measured 1.7x slower than the sorted window on 10M rows (benchmarks/bench_bounding.py).
_DISABLED_OPTIMIZERS = "top_n_window_elimination"
#: Every connection's settings: the optimizers above (DuckDB's default perfect-hash threshold:
#: the units never take it, dpsql.engines.duckdb_engine.grouping).
_SETTINGS = {"disabled_optimizers": _DISABLED_OPTIMIZERS}


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
    default :class:`~dpsql.engines.protocol.Engine`."""

    name = "duckdb"
    dialect = DuckDBDialect
    raises_on_float_overflow = False  # a double overflows to Infinity
    # The tables of fixed(), read on first use; the empty set in a subclass that skips
    # __init__ (the neighbour harness's engine switches its schema: its data changes).
    _fixed: frozenset[str] | None = frozenset()

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.location = str(self.path.resolve())
        if not self.path.exists():
            raise EngineError(f"database {self.path} does not exist; pass a DuckDB file or a "
                              "folder of CSV/Parquet files")
        self._folder: folders.Catalog | None = None
        self._fixed = None
        try:
            if self.path.is_dir():
                self._folder = folders.acquire(self.path, **_SETTINGS)
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
        return locked.read_only(path, allowed, **_SETTINGS)

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

    def compile(self, tree: exp.Expression, salted: bool,
                empty_tables: Sequence[tuple[str, exp.Select]]) -> str:
        """DuckDB's text of the tree: the pipeline checks this very text on its database of
        empty tables (:func:`dpsql.routes.pipeline.check_engine_query`), so ``empty_tables`` goes
        unread here."""
        # Histograms as GROUP BY keys, bucket, gathered into lists (dpsql.engines.histograms).
        from sqlglot import exp

        tree = tree.copy()  # a fresh copy: changed and generated in place
        grouping.opaque_units(tree, self.schema)
        if isinstance(tree, exp.Select):
            tree = joined_histograms(tree, duckdb_gather)
        return tree.sql(dialect=DuckDBDialect, copy=False)

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
        result = self._run(sql, parameters, lambda r: r.fetchall())
        return result[0], result[1]

    def execute_arrays(self, sql: str, parameters: Sequence[object] = ()
                       ) -> dict[str, npt.NDArray[Any]]:
        """:meth:`execute`, one NumPy array per column (DuckDB's ``fetchnumpy``: no Python
        tuple a row; 1M rows in about half the time)."""
        return self._run(sql, parameters, lambda r: r.fetchnumpy())[1]  # type: ignore[no-any-return]

    def _run(self, sql: str, parameters: Sequence[object],
             fetch: Callable[[duckdb.DuckDBPyConnection], Any]) -> tuple[list[str], Any]:
        try:
            result = self.cursor().execute(sql, list(parameters) or None)
            names = [d[0] for d in result.description or []]
            return names, fetch(result)
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

    def fixed(self, table: str) -> bool:
        """Whether ``table`` is a base table of a DuckDB file (:meth:`dpsql.engines.Engine.
        fixed`): its rows cannot change while this engine is open. The file is open read-only
        (:func:`~dpsql.engines.locked.read_only`), which holds DuckDB's shared lock on it: a
        DuckDB connection that would write it is refused, in another process (the lock) as in
        this one (one DuckDB instance per file, its configuration read-only); no dpsql query
        writes (each is a checked SELECT). A view may read ``random()`` or the clock, and a
        folder's views read files that anyone may rewrite: neither is fixed. (A program that
        writes the file's bytes past DuckDB's lock corrupts it for DuckDB as well.)"""
        if self._fixed is None:
            self._fixed = frozenset() if self._folder is not None else frozenset(
                name.lower() for (name,) in self.cursor().execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_catalog = "
                    "current_database() AND table_schema = current_schema() AND table_type = "
                    "'BASE TABLE'").fetchall())
        return table.lower() in self._fixed

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
