"""A DB-API 2.0 (PEP 249) connection to a private view of a database.

    >>> import dpsql
    >>> with dpsql.connect(database="data/", metadata="data/metadata.toml",
    ...                    analyst="alice", epsilon=0.5) as conn:
    ...     cur = conn.cursor()
    ...     cur.execute("SELECT sex, COUNT(*) AS n FROM people WHERE age >= ? GROUP BY sex", (30,))
    ...     rows = cur.fetchall()          # noisy counts
    ...     cur.accuracy                   # per row, each cell's 95% accuracy (None for keys)
    ...     cur.execute("SELECT AVG(income) FROM people", epsilon=0.1)   # per-query budget

Every ``execute`` is one differentially private query, charged to the connection's analyst in
the budget ledger before it runs (see :mod:`dpsql.database`); asking the same query again (same
parameters, epsilon, delta and mechanism) returns the stored answer at no cost. Nothing here
holds privacy logic: a cursor calls :meth:`dpsql.Database.run`.

Module globals: ``apilevel = "2.0"``; ``threadsafety = 2`` (threads may share the module and
connections, not cursors); ``paramstyle = "qmark"`` (``WHERE age > ?``). Numeric (``$1``) and
named (``:name`` with a dict) placeholders are accepted as well. Parameters are bound into the
parsed query as literals, never pasted into its text, and before the privacy check.
JSON values (BigQuery's ``report_format => 'JSON'`` reports and the fields read from them,
:mod:`dpsql.execution.reports`) are JSON text (a ``str``; ``description`` type code ``JSON``,
``accuracy`` None: the interval is in the report).

Cursor extensions: ``accuracy`` (one tuple per result row: each cell's 95% accuracy half-width, in
the column's unit -- ranks for quantiles -- or None for group keys and for values computed from
several noisy cells), ``notes`` (what ``accuracy`` does not cover: the contribution bounds in force,
the rows beyond them left out, the columns clamped; :mod:`dpsql.explanation.bias`), ``result`` (the
:class:`~dpsql.execution.postprocess.Result`), ``cost`` (the :class:`~dpsql.ledger.budget.Cost`
charged by the last ``execute``, a retention estimate's included; None when it was served from a
stored answer or the database is unmetered), ``reused``, ``randomized`` (True when the rows are
randomized local DP rows, not real ones: a row-level SELECT of a table the owner opted in to local
DP; ``notes`` then starts with the sentence that says so, and with what was charged) and
``retention`` (the
:class:`~dpsql.execution.retention.Retention` estimate, when asked for with ``retention=EPSILON``
on ``connect`` or ``execute``: a noisy estimate of the share of a unit's rows the bounds
keep, charged at that epsilon; its sentence is in ``notes``), ``caveats`` (the notes that
say when the answer is not worth reading -- the noise exceeding the value in some cells, an
AVG or quantile at a bound, a large share of rows dropped -- each with its cause and fix;
also in ``notes``; :mod:`dpsql.execution.caveats`; ``caveats=False`` on ``connect`` or
``execute`` leaves them out). Connection extensions:
``epsilon``, ``delta``, ``mechanism`` and ``caveats`` (the defaults of ``execute``, settable),
``analyst``,
``metered``, ``budget()`` (what the analyst has spent and has left) and ``database``.

Transactions: dpsql never writes data, so ``commit()`` does nothing, and ``rollback()`` does
nothing either: in particular it refunds no privacy budget, which is never given back.

``executemany(sql, seq_of_parameters)`` answers the query once per parameter set, each charged
separately, and concatenates the results (all share the first one's ``description``).

``cursor.fetch_df()`` returns a pandas DataFrame with the ± columns and the notes in its
``attrs`` (``pip install 'dpsql[pandas]'``). ``pandas.read_sql(sql, conn, params=...)`` works
too, without pandas' UserWarning for a DB-API connection that is not sqlite3's (opening a
connection turns that one warning off: :func:`dpsql.integrations.pandas.quiet_read_sql`), but
gives the values only (docs/budget_and_dbapi.md).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from dpsql.database import Answer, Database
from dpsql.errors import (
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    Warning,
    guarded,
)
from dpsql.execution.postprocess import Result
from dpsql.execution.retention import Retention
from dpsql.execution.watch import Watch, call_watched, watching
from dpsql.integrations.pandas import quiet_read_sql
from dpsql.ledger.budget import BudgetStatus, Cost
from dpsql.ledger.opening import resolve_analyst
from dpsql.metadata.contribution import ContributionBounds
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.accounting import total_cost
from dpsql.privacy.mechanisms import WELL_FORMED, validate_privacy_parameters
from dpsql.query.parameters import Parameters

apilevel = "2.0"
threadsafety = 2
paramstyle = "qmark"


# --- type objects and constructors ------------------------------------------------------------


class DBAPITypeObject:
    """A PEP 249 type object: equal to every DuckDB type name of its kind.

    ``cursor.description[i][1]`` (the type code) is the DuckDB type name, such as ``"BIGINT"``
    or ``"DECIMAL(18,3)"``, so ``description[i][1] == dpsql.NUMBER`` tells a numeric column.
    """

    def __init__(self, name: str, *types: str) -> None:
        self.name = name
        self.types = frozenset(types)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DBAPITypeObject):
            return self is other
        if isinstance(other, str):
            return _base_type(other) in self.types
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"dpsql.{self.name}"


def _base_type(type_name: str) -> str:
    """``DECIMAL(18,3)`` -> ``DECIMAL``; names are compared in upper case."""
    return type_name.split("(", 1)[0].strip().upper()


STRING = DBAPITypeObject("STRING", "VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR", "UUID",
                         "JSON")
BINARY = DBAPITypeObject("BINARY", "BLOB", "BYTEA", "VARBINARY", "BIT")
NUMBER = DBAPITypeObject("NUMBER", "TINYINT", "SMALLINT", "INTEGER", "INT", "BIGINT",
                         "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT",
                         "FLOAT", "REAL", "DOUBLE", "DECIMAL", "NUMERIC")
DATETIME = DBAPITypeObject("DATETIME", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_S",
                           "TIMESTAMP_MS", "TIMESTAMP_NS", "TIMESTAMP WITH TIME ZONE",
                           "TIMESTAMPTZ", "TIME WITH TIME ZONE", "TIMETZ", "INTERVAL")
ROWID = DBAPITypeObject("ROWID")  # dpsql never releases row identifiers
BOOLEAN = DBAPITypeObject("BOOLEAN", "BOOLEAN", "BOOL")  # an extension of PEP 249

Date = dt.date
Time = dt.time
Timestamp = dt.datetime
Binary = bytes


def DateFromTicks(ticks: float) -> dt.date:  # names fixed by PEP 249
    return Date(*time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> dt.time:
    return Time(*time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> dt.datetime:
    return Timestamp(*time.localtime(ticks)[:6])


# --- connection -------------------------------------------------------------------------------


def connect(database: str | Path | None = None, metadata: str | Path | Metadata | None = None,
            analyst: str | None = None, epsilon: float | None = None, delta: float = 0.0,
            mechanism: str = "laplace", *, max_rows: int | None = None,
            max_groups: int | None = None, retention: float | None = None,
            caveats: bool = True) -> Connection:
    """Open a connection: ``database`` (a DuckDB file, a folder of CSV/Parquet files or a
    ``postgresql://`` URL) seen
    through ``metadata`` (neither: the bundled sample data), charged to ``analyst`` (default:
    ``DPSQL_ANALYST``, else the operating-system user), with default ``epsilon``, ``delta`` and
    ``mechanism`` for each query (no ``epsilon``: the analyst's ``query_epsilon`` in the
    metadata, else 1.0). ``max_rows`` and ``max_groups``: each query's contribution bounds k
    and g (default: the metadata's; at most the owner's caps;
    :mod:`dpsql.metadata.contribution`). ``retention``: an epsilon at which each query also
    estimates, charged, what its bounds keep (:mod:`dpsql.execution.retention`). ``caveats``:
    False to leave out the notes that say when an answer is not worth reading."""
    if (database is None) != (metadata is None):
        raise InterfaceError("pass both database and metadata, or neither for the bundled "
                             "sample data")
    # The form only: the owner's limits (the metadata's [budget]) are checked once it is open.
    validate_privacy_parameters(1.0 if epsilon is None else epsilon, delta, mechanism,
                                WELL_FORMED)
    bounds = ContributionBounds(max_rows, max_groups)  # refuses what is not a whole number >= 1
    if retention is not None:
        validate_privacy_parameters(retention, 0.0, "laplace", WELL_FORMED)
    connection = Connection(Database(database, metadata, analyst=analyst), epsilon=epsilon,
                            delta=delta, mechanism=mechanism, bounds=bounds)
    connection.retention = retention
    connection.caveats = caveats
    return connection


class Connection:
    """A PEP 249 connection. ``close()`` (or leaving a ``with`` block) closes it."""

    Warning = Warning
    Error = Error
    InterfaceError = InterfaceError
    DatabaseError = DatabaseError
    DataError = DataError
    OperationalError = OperationalError
    IntegrityError = IntegrityError
    InternalError = InternalError
    ProgrammingError = ProgrammingError
    NotSupportedError = NotSupportedError

    def __init__(self, database: Database, epsilon: float | None = None, delta: float = 0.0,
                 mechanism: str = "laplace", bounds: ContributionBounds | None = None) -> None:
        try:
            if epsilon is None:
                epsilon = database.query_epsilon()
            database.check_parameters(epsilon, delta, mechanism)
        except BaseException:
            database.close()
            raise
        self.database = database
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.bounds = bounds  # the default contribution bounds of execute
        self.retention: float | None = None  # the default retention epsilon of execute
        self.caveats = True  # whether execute's answers carry their caveats, by default
        self._closed = False
        self._running: set[Watch] = set()  # the executes under way (interrupt())
        self._worker: ThreadPoolExecutor | None = None  # runs the main thread's executes
        quiet_read_sql()  # pandas.read_sql(sql, conn) without its UserWarning

    def interrupt(self) -> None:
        """Cancel every query this connection is answering (from another thread, as
        sqlite3's ``interrupt``): each raises :class:`~dpsql.errors.QueryCancelled`, which says
        whether its charge stands (:mod:`dpsql.execution.watch`)."""
        for watch in list(self._running):
            watch.cancel()

    def _call(self, fn: Callable[[], Answer], watch: Watch) -> Answer:
        """``fn`` under ``watch``. On the main thread it runs on this connection's worker
        thread, so that Ctrl-C (a KeyboardInterrupt) cancels the query cleanly
        (:func:`~dpsql.execution.watch.call_watched`) instead of striking inside the library."""
        self._running.add(watch)
        try:
            if threading.current_thread() is not threading.main_thread():
                with watching(watch):
                    return fn()
            if self._worker is None:
                self._worker = ThreadPoolExecutor(1, thread_name_prefix="dpsql-connection")
            return call_watched(fn, watch, submit=self._worker.submit)
        finally:
            self._running.discard(watch)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def analyst(self) -> str | None:
        """Who is charged: None when the database is unmetered."""
        return resolve_analyst(self.database.analyst) if self.database.metered else None

    @property
    def metered(self) -> bool:
        return self.database.metered

    def _check_open(self) -> None:
        if self._closed:
            raise InterfaceError("the connection is closed")

    def cursor(self) -> Cursor:
        self._check_open()
        return Cursor(self)

    def execute(self, operation: str, parameters: Parameters = None, **options: Any) -> Cursor:
        """A shortcut (as in sqlite3): a new cursor that has executed ``operation``."""
        cursor = self.cursor()
        cursor.execute(operation, parameters, **options)
        return cursor

    def budget(self) -> BudgetStatus | None:
        """What the analyst has spent and has left; None when the database is unmetered."""
        self._check_open()
        return self.database.budget()

    def commit(self) -> None:
        """Nothing to commit: dpsql never writes data, and every charge is already durable."""
        self._check_open()

    def rollback(self) -> None:
        """Nothing to roll back. Privacy budget spent is never refunded."""
        self._check_open()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._worker is not None:
                self._worker.shutdown(wait=True)
            self.database.close()

    def __enter__(self) -> Connection:
        self._check_open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


# --- cursor -----------------------------------------------------------------------------------

Description = tuple[str, str, None, None, int | None, int | None, None]


class Cursor:
    """A PEP 249 cursor over one noisy result at a time."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.arraysize = 1
        self._closed = False
        self._reset()

    def _reset(self) -> None:
        self.description: tuple[Description, ...] | None = None
        self.rowcount = -1
        self.result: Result | None = None
        self.accuracy: list[tuple[float | None, ...]] = []
        self.notes: list[str] = []
        self.cost: Cost | None = None
        self.reused = False
        self.randomized = False
        self.retention: Retention | None = None
        self._watch: Watch | None = None  # the execute under way (cancel())
        self.caveats: list[str] = []
        self._rows: list[tuple[Any, ...]] = []
        self._position = 0

    @property
    def lastrowid(self) -> None:
        return None

    @property
    def rownumber(self) -> int | None:
        """The index of the next row in the result set (a PEP 249 extension)."""
        return self._position if self.description is not None else None

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise InterfaceError("the cursor is closed")
        if self.connection.closed:
            raise InterfaceError("the cursor's connection is closed")

    def execute(self, operation: str, parameters: Parameters = None, *,
                epsilon: float | None = None, delta: float | None = None,
                mechanism: str | None = None, max_rows: int | None = None,
                max_groups: int | None = None, retention: float | None = None,
                caveats: bool | None = None) -> Cursor:
        """Answer one query; ``epsilon``, ``delta``, ``mechanism``, ``max_rows``,
        ``max_groups``, ``retention`` and ``caveats`` override the connection's defaults for
        this query only."""
        self._check_open()
        self._reset()
        answer = self._run(operation, parameters, epsilon, delta, mechanism,
                           ContributionBounds(max_rows, max_groups), retention, caveats)
        self._show([answer])
        return self

    def executemany(self, operation: str, seq_of_parameters: Sequence[Parameters], *,
                    epsilon: float | None = None, delta: float | None = None,
                    mechanism: str | None = None, max_rows: int | None = None,
                    max_groups: int | None = None) -> Cursor:
        """Answer ``operation`` once per parameter set (each charged) and concatenate the
        results. If one fails, the ones before it stay charged and the error is raised."""
        self._check_open()
        self._reset()
        bounds = ContributionBounds(max_rows, max_groups)
        answers = [self._run(operation, parameters, epsilon, delta, mechanism, bounds)
                   for parameters in seq_of_parameters]
        if answers:
            self._show(answers)
        else:
            self.rowcount = 0
        return self

    def _run(self, operation: str, parameters: Parameters, epsilon: float | None,
             delta: float | None, mechanism: str | None, bounds: ContributionBounds,
             retention: float | None = None, caveats: bool | None = None) -> Answer:
        conn = self.connection
        in_force = (conn.bounds or ContributionBounds()).merged(bounds)

        def run() -> Answer:
            return conn.database.run(
                operation,
                epsilon=conn.epsilon if epsilon is None else epsilon,
                delta=conn.delta if delta is None else delta,
                mechanism=conn.mechanism if mechanism is None else mechanism,
                parameters=parameters,
                bounds=None if in_force == ContributionBounds() else in_force,
                retention=conn.retention if retention is None else retention,
                caveats=conn.caveats if caveats is None else caveats,
            )

        self._watch = watch = Watch()
        with guarded(operation[:200]):  # a bug: still a DB-API error for the caller
            try:
                return conn._call(run, watch)
            except Error as e:
                _add_remedy(e)
                raise
            finally:
                self._watch = None

    def fetch_df(self) -> Any:
        """The result's remaining rows as a pandas DataFrame: each noisy column followed by
        its accuracy ``"NAME ±95%"``; ``attrs`` holds ``notes``, ``epsilon``, ``delta``,
        ``reused`` and ``randomized`` (:mod:`dpsql.integrations.pandas`; ``pip install
        'dpsql[pandas]'``). No pandas warning: this is the recommended way."""
        from dpsql.integrations.pandas import frame

        self._check_result()
        if self.result is None:  # executemany: its first answer's columns and cost
            raise NotSupportedError("fetch_df() reads one execute()'s result")
        start, self._position = self._position, len(self._rows)
        return frame(self.result, self._rows[start:], self.accuracy[start:], self.notes,
                     self.reused)

    def cancel(self) -> None:
        """Cancel this cursor's query under way, from another thread: its ``execute`` raises
        :class:`~dpsql.errors.QueryCancelled` (SQLSTATE 57014), saying whether the charge
        stands. (Ctrl-C during ``execute`` on the main thread does the same.)"""
        watch = self._watch
        if watch is not None:
            watch.cancel()

    def _show(self, answers: list[Answer]) -> None:
        first = answers[0].result
        self.description = tuple(
            (c.name, c.type, None, None, *_precision_scale(c.type), None) for c in first.columns)
        self._rows = [row for a in answers for row in a.result.rows]
        self.accuracy = [acc for a in answers for acc in a.result.accuracy]
        self.notes = list(dict.fromkeys(n for a in answers for n in a.result.notes))
        self.caveats = list(dict.fromkeys(n for a in answers for n in a.result.caveats))
        self.rowcount = len(self._rows)
        self.result = first if len(answers) == 1 else None
        costs = [c for a in answers for c in (a.cost, a.retention_cost) if c is not None]
        self.retention = answers[0].retention if len(answers) == 1 else None
        self.cost = total_cost(costs) if costs else None
        self.reused = all(a.reused for a in answers)
        self.randomized = any(a.result.randomized for a in answers)

    def _check_result(self) -> None:
        self._check_open()
        if self.description is None:
            raise ProgrammingError("no result set: call execute() first")

    def fetchone(self) -> tuple[Any, ...] | None:
        self._check_result()
        if self._position >= len(self._rows):
            return None
        row = self._rows[self._position]
        self._position += 1
        return row

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        self._check_result()
        size = self.arraysize if size is None else size
        if size < 0:
            raise ProgrammingError(f"fetchmany size must be >= 0, got {size}")
        rows = self._rows[self._position:self._position + size]
        self._position += len(rows)
        return rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        self._check_result()
        rows = self._rows[self._position:]
        self._position = len(self._rows)
        return rows

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return self

    def __next__(self) -> tuple[Any, ...]:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def nextset(self) -> None:
        """dpsql answers one result set per query: there is never a next one."""
        self._check_result()
        return None

    def callproc(self, procname: str, parameters: Sequence[Any] = ()) -> None:
        raise NotSupportedError("dpsql has no stored procedures; send one SELECT")

    def setinputsizes(self, sizes: Sequence[Any] | Mapping[str, Any]) -> None:
        self._check_open()

    def setoutputsize(self, size: int, column: int | None = None) -> None:
        self._check_open()

    def close(self) -> None:
        self._closed = True
        self._rows = []

    def __enter__(self) -> Cursor:
        self._check_open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def _precision_scale(type_name: str) -> tuple[int | None, int | None]:
    """(precision, scale) of ``DECIMAL(p,s)``; (None, None) otherwise."""
    if _base_type(type_name) in ("DECIMAL", "NUMERIC") and "(" in type_name:
        try:
            p, s = type_name[type_name.index("(") + 1:type_name.rindex(")")].split(",")
            return int(p), int(s)
        except ValueError:
            return None, None
    return None, None


__all__ = [
    "BINARY",
    "BOOLEAN",
    "DATETIME",
    "NUMBER",
    "ROWID",
    "STRING",
    "Binary",
    "Connection",
    "Cursor",
    "DBAPITypeObject",
    "Date",
    "DateFromTicks",
    "Time",
    "TimeFromTicks",
    "Timestamp",
    "TimestampFromTicks",
    "apilevel",
    "connect",
    "paramstyle",
    "threadsafety",
]


def _add_remedy(e: Error) -> None:
    """Append the DB-API's words for what the analyst can change (see errors.Remedy)."""
    said = [f"pass {r.parameter}={r.example:g} to execute() or connect()"
            if r.example is not None else f"pass a smaller {r.parameter}= to execute()"
            for r in e.remedies]
    if said and e.args and isinstance(e.args[0], str):
        e.args = (f"{e.args[0]} ({'; '.join(said)})", *e.args[1:])
