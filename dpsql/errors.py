"""The exception hierarchy of dpsql.

It is the PEP 249 (DB-API 2.0) hierarchy, so that every front door raises the same classes:
the command line prints them, the DB-API raises them, and the wire-protocol server sends their
``sqlstate`` in an ErrorResponse. Every refusal of a query is a :class:`QueryRefused`; a refusal
is raised before anything runs on the data and before anything is charged.

Stable SQLSTATE codes (documented in docs/errors.md):

* ``42501`` -- a query refused for privacy reasons (generic :class:`QueryRefused`)
* ``42601`` -- SQL that cannot be parsed
* ``42P01`` / ``42703`` -- undeclared table / column
* ``42803`` -- aggregation errors: private column outside an aggregate, nested aggregates
* ``0A000`` -- SQL that dpsql does not support (joins, set operations, ...)
* ``22023`` -- an invalid privacy parameter (epsilon, delta, mechanism)
* ``22P02`` -- a constant that cannot be converted or evaluated (refused at plan time)
* ``54001`` -- row-level work beyond the cost model (long literals or patterns, deep nesting)
* ``53400`` -- the analyst's privacy budget is exhausted
* ``55000`` -- the budget ledger is missing, emptied or replaced (:class:`LedgerUnavailable`):
  nothing is answered until the data owner restores it
* ``58030`` -- the budget ledger could not be read or written (:class:`LedgerError`: disk full,
  read-only); the query was not run
* ``57014`` -- the query ran into the data owner's ``statement_timeout`` (:class:`QueryTimeout`),
  or the analyst cancelled it (:class:`QueryCancelled`, which says what was charged)
* ``XX000`` -- the engine failed on a checked query, a dpsql bug (:class:`EngineFailure`)

A query that was charged and then failed (timeout, engine failure) raises one fixed error whose
class and text do not depend on the data; the engine's own message, which may quote a private
value, goes only to the data owner's log (logger ``dpsql.owner``, see :mod:`dpsql.database`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Remedy:
    """A privacy parameter the analyst can change to have a refused query answered: set
    ``parameter`` (``"epsilon"`` or ``"delta"``) to ``example`` if given, else lower it.

    The library's messages stay door-neutral ("needs delta > 0"); each front door words the
    remedy in its own terms (the CLI's ``--delta``, the server's ``SET dpsql.delta``, the
    DB-API's ``delta=``) from these, so no door tells the analyst to use another door's knob.
    """

    parameter: str
    example: float | None = None


class Warning(Exception):
    """Important warnings (PEP 249)."""


class Error(Exception):
    """Base class of every dpsql error (PEP 249)."""

    sqlstate: str = "XX000"
    remedies: tuple[Remedy, ...] = ()  # what the analyst can change (see Remedy)


class InterfaceError(Error):
    """Misuse of the programming interface itself, e.g. a closed cursor (PEP 249)."""

    sqlstate = "08000"


class DatabaseError(Error):
    """Errors related to the database (PEP 249)."""


class DataError(DatabaseError):
    """Problems with the processed data (PEP 249)."""

    sqlstate = "22000"


class OperationalError(DatabaseError):
    """Errors in the operation of the database, not under the analyst's control (PEP 249)."""

    sqlstate = "58000"


class IntegrityError(DatabaseError):
    """Relational integrity errors (PEP 249); dpsql is read-only and never raises it."""

    sqlstate = "23000"


class InternalError(DatabaseError):
    """An internal error of dpsql: a bug, never the analyst's fault (PEP 249)."""

    sqlstate = "XX000"
    MESSAGE = ("internal error in dpsql (a bug, not the query's fault; the details are in the "
               "log of the process that ran it, logger 'dpsql.owner')")


def did_you_mean(name: str, declared: Iterable[str]) -> str:
    """``" (did you mean 'people'?)"`` for the declared name closest to a misspelt ``name``
    (difflib), else ``""``. Only over names a refusal may list: the metadata's declared tables
    and columns and the query's own names, public or the analyst's, never data."""
    import difflib  # here: `import dpsql` stays light

    by_lower = {d.lower(): d for d in declared}
    close = difflib.get_close_matches(name.lower(), sorted(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""


def internal_error(e: BaseException, context: str = "") -> InternalError:
    """The one policy of every front door (CLI, DB-API, server) for an unexpected exception:
    its traceback goes to the owner's log (logger ``dpsql.owner``), and the analyst gets a
    fixed message. An exception's text can carry data (an engine's "could not convert
    'Alice'", a value in a traceback), and what text a bug shows could then depend on one
    person's rows: a side channel the noise does not cover."""
    logging.getLogger("dpsql.owner").error("internal error%s", f" on {context}" if context else "",
                                     exc_info=e)
    return InternalError(InternalError.MESSAGE)


@contextmanager
def guarded(context: str = "", *, passing: tuple[type[BaseException], ...] = (Error,),
            on_bug: Callable[[InternalError], None] | None = None,
            debug: bool = False) -> Iterator[None]:
    """The one error guard of every front door (CLI, DB-API, server): ``passing`` leaves
    unchanged (dpsql's own errors by default; a door adds what it handles itself, such as its
    protocol's errors or click's exits); any other exception is a bug, turned into
    :func:`internal_error` (traceback to the owner's log, the fixed message to the analyst),
    handed to ``on_bug`` if given, and raised. ``debug`` (the CLI's ``DPSQL_DEBUG=1``)
    re-raises a bug as it is instead."""
    try:
        yield
    except passing:
        raise
    except Exception as e:
        if debug:
            raise
        error = internal_error(e, context)
        if on_bug is not None:
            on_bug(error)
        raise error from None


class ProgrammingError(DatabaseError):
    """Errors in the SQL or its parameters (PEP 249)."""

    sqlstate = "42000"


class NotSupportedError(DatabaseError):
    """A feature that dpsql does not offer (PEP 249)."""

    sqlstate = "0A000"


class MetadataError(OperationalError):
    """The data owner's metadata file is missing or invalid. The message names the file, the
    table, the column and what is wrong."""

    sqlstate = "F0000"


class EngineError(OperationalError):
    """The database engine could not be opened or failed while running a checked query.

    ``owner_detail`` is the engine's own message, for the data owner's log only: it may quote a
    private value. ``interrupted`` says the engine stopped on an interrupt (a time limit).
    """

    sqlstate = "58000"

    def __init__(self, message: str = "", *, owner_detail: str | None = None,
                 interrupted: bool = False) -> None:
        super().__init__(message)
        self.owner_detail = owner_detail
        self.interrupted = interrupted


class EngineFailure(EngineError):
    """The engine failed on a query that the checker accepted: a dpsql bug (the checker should
    have refused it). The query was charged; its failure is its answer (asking again returns
    this error, at no new charge, while answers are reused). The text is always the same."""

    sqlstate = "XX000"
    MESSAGE = ("the engine failed on this query (a dpsql bug: the checker should have refused "
               "it); it was charged, and asking it again returns this error at no new charge. "
               "The data owner's log has the details")

    def __init__(self) -> None:
        super().__init__(self.MESSAGE)


class QueryTimeout(OperationalError):
    """The query ran longer than the data owner's ``statement_timeout`` and was stopped. It was
    charged (before it ran). The text names only the owner's limit, never anything about the
    data; an analyst's own ``SET statement_timeout`` never shortens a private query."""

    sqlstate = "57014"

    def __init__(self, seconds: float, charged: bool = True) -> None:
        # a free read (public tables, the ledger views) is stopped too, and charged nothing
        super().__init__(f"canceling statement due to statement timeout: the query ran longer "
                         f"than the data owner's limit of {seconds:g} s and was "
                         f"{'charged' if charged else 'not charged (a free read)'}; ask "
                         "a cheaper query (fewer groups, a smaller table) or ask the owner for "
                         "a longer statement_timeout")
        self.seconds = seconds


class QueryCancelled(OperationalError):
    """The analyst cancelled the query (Ctrl-C, ``cursor.cancel()``, a CancelRequest), and its
    answer was not shown. ``charged`` is the (epsilon, delta) that was charged and stands --
    the query was cancelled after its charge, and never refunded -- or None: it was cancelled
    before its charge and the engine never read its private data, so nothing was charged
    (:mod:`dpsql.execution.watch` has the argument). ``seconds``: from the call to the cancel.
    """

    sqlstate = "57014"

    def __init__(self, seconds: float, charged: tuple[float, float] | None) -> None:
        self.seconds, self.charged = seconds, charged
        super().__init__(f"canceling statement due to user request after {seconds:.0f} s; "
                         + self.charge_words())

    def charge_words(self) -> str:
        """What the cancel cost, in words every door shows."""
        if self.charged is None:
            return "nothing was charged"
        epsilon, delta = self.charged
        cost = f"epsilon {epsilon:g}" + (f", delta {delta:g}" if delta else "")
        return f"the charge of {cost} stands: the answer was not shown"


class LedgerError(OperationalError):
    """The budget ledger could not be read or written (disk full, read-only file, I/O error).
    Nothing was answered. The text is the analyst's and names no file; ``owner_detail`` (the
    ledger's path and the cause) goes to the data owner's log (logger ``dpsql.owner``) when
    the error is raised."""

    sqlstate = "58030"
    MESSAGE = ("the privacy budget ledger could not be read or written, so the query was not "
               "run and nothing was charged; the data owner's log has the details")

    def __init__(self, message: str = "", *, owner_detail: str | None = None) -> None:
        super().__init__(message or self.MESSAGE)
        self.owner_detail = owner_detail
        if owner_detail is not None:
            logging.getLogger("dpsql.owner").error("%s", owner_detail)


class LedgerUnavailable(LedgerError):
    """The budget ledger is missing, empty, or not the one this deployment created (replaced by
    another or by an older copy). dpsql never starts a fresh ledger in its place: that would
    reset every analyst's spending. ``owner_detail`` says what was found and how to restore
    it."""

    sqlstate = "55000"
    MESSAGE = ("the privacy budget ledger is unavailable (missing, emptied or replaced), so no "
               "query is answered until the data owner restores it; the data owner's log has "
               "the details")


class BudgetExhausted(OperationalError):
    """The query costs more privacy budget than the analyst has left. Nothing was charged."""

    sqlstate = "53400"


class QueryRefused(ProgrammingError):
    """A query that dpsql will not answer. Nothing ran on the data and nothing was charged."""

    sqlstate = "42501"


class SQLSyntaxError(QueryRefused):
    """The SQL text could not be parsed. ``position`` is where, when the parser says: the
    1-based character offset into the query (PostgreSQL's error position), for a caret."""

    sqlstate = "42601"

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class NotASingleSelect(QueryRefused):
    """The text is not exactly one SELECT statement (DDL, DML, PRAGMA, SET, several statements)."""


class UnknownTable(QueryRefused):
    """A table that the metadata does not declare."""

    sqlstate = "42P01"


class UnknownColumn(QueryRefused):
    """A column that the metadata does not declare for its table."""

    sqlstate = "42703"


class ForbiddenFunction(QueryRefused):
    """A table function, file access, engine catalog or a function that is not on the allow list."""


class UnsupportedQuery(QueryRefused, NotSupportedError):
    """SQL that dpsql does not answer yet (joins, set operations, ...)."""

    sqlstate = "0A000"


class UnsupportedAggregate(UnsupportedQuery):
    """An aggregate function that has no differentially private implementation here."""


class NonAggregatedColumn(QueryRefused):
    """A private column reaches the output without an aggregate (and is not a group key)."""

    sqlstate = "42803"


class NestedAggregate(QueryRefused):
    """An aggregate inside another aggregate."""

    sqlstate = "42803"


class WindowOverPrivateRows(QueryRefused):
    """A window function over the private rows (a window over aggregated cells is fine)."""

    sqlstate = "42P20"


class UnboundedExpression(QueryRefused):
    """An aggregated expression whose range cannot be derived from the declared bounds."""


class InvalidConstant(QueryRefused):
    """A constant (a literal, a parameter or an expression of constants) that the engine cannot
    convert or evaluate. Constants are evaluated when the query is planned, so this is a
    refusal before anything runs, never an error that some rows cause."""

    sqlstate = "22P02"


class QueryTooComplex(QueryRefused):
    """A query whose row-level work exceeds the cost model (see :mod:`dpsql.query.cost`): long
    literals or patterns, too many nodes, too deep nesting."""

    sqlstate = "54001"


class JoinRefused(UnsupportedQuery):
    """A join whose sensitivity cannot be bounded: private tables joined on anything but the
    privacy unit (or a declared unit_path), across different units, as a cross product, or a
    semi-join whose subquery is not a row-level filter of one table of the same unit."""


class KeyReleaseRefused(QueryRefused):
    """GROUP BY keys that have no public domain while delta is zero, or grouping by the
    privacy unit itself."""


class InvalidPrivacyParameter(QueryRefused):
    """An invalid epsilon, delta or mechanism (negative, zero, NaN, infinite, absurd)."""

    sqlstate = "22023"


class BoundsAboveCap(InvalidPrivacyParameter):
    """Per-query contribution bounds (max rows or groups per unit) that are not whole numbers
    >= 1, above the data owner's cap, or for a privacy unit the table does not have."""


__all__ = [
    "BoundsAboveCap",
    "BudgetExhausted",
    "DataError",
    "DatabaseError",
    "EngineError",
    "EngineFailure",
    "Error",
    "ForbiddenFunction",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "InvalidConstant",
    "InvalidPrivacyParameter",
    "KeyReleaseRefused",
    "LedgerError",
    "LedgerUnavailable",
    "MetadataError",
    "NestedAggregate",
    "NonAggregatedColumn",
    "NotASingleSelect",
    "NotSupportedError",
    "OperationalError",
    "ProgrammingError",
    "QueryCancelled",
    "QueryRefused",
    "QueryTimeout",
    "QueryTooComplex",
    "SQLSyntaxError",
    "UnboundedExpression",
    "UnknownColumn",
    "UnknownTable",
    "UnsupportedAggregate",
    "UnsupportedQuery",
    "Warning",
    "WindowOverPrivateRows",
]
