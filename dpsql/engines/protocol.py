"""The seam between dpsql and a SQL engine: the :class:`Engine` protocol every engine
satisfies (DuckDB's, PostgreSQL's, Spark's, each in ``engines/<name>/engine.py``), and the
:class:`CancelToken` the owner's deadline fires. Engines know the rewritten tree, never the
plan it came from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy.typing as npt
    from sqlglot import exp
    from sqlglot.dialects.dialect import Dialect

    from dpsql.cache import LRU


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

    def execute_arrays(self, sql: str, parameters: Sequence[object] = ()
                       ) -> dict[str, npt.NDArray[Any]]:
        """:meth:`execute`, its result as one array per column (in order, by name): for a
        result of many rows, which an engine may hand over without a Python tuple a row."""
        ...

    def fixed(self, table: str) -> bool:
        """Whether the rows of ``table`` cannot change while this engine is open, so that
        what is computed from them may be kept for the engine's life
        (:func:`dpsql.execution.local_rows.released_rows`). True only where no one can write
        them: a base table of a DuckDB file, which the engine holds open read-only (see
        :meth:`~dpsql.engines.duckdb_engine.engine.DuckDBEngine.fixed`); never a view, a
        folder's files, PostgreSQL or Spark, whose data others may change at any time."""
        ...

    def compile(self, tree: exp.Expression, salted: bool,
                empty_tables: Sequence[tuple[str, exp.Select]]) -> str:
        """The engine's SQL for the rewritten ``tree`` (written for DuckDB's semantics; it
        takes the secret salt as its one parameter when ``salted``), checked on empty tables
        of the engine's physical types: ``empty_tables`` holds each table the query reads as
        a typed ``SELECT`` of no row (:func:`dpsql.query.dry_runs.empty_tables`), for an
        engine that dry-runs by reading them instead. Raises
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


def column_arrays(names: Sequence[str], rows: Sequence[tuple[object, ...]]
                  ) -> dict[str, npt.NDArray[Any]]:
    """Rows as one object array per column: :meth:`Engine.execute_arrays` for an engine
    without a columnar fetch of its own."""
    import numpy as np

    return {name: np.array([row[i] for row in rows], dtype=object)
            for i, name in enumerate(names)}
