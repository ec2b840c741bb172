"""The privacy budget ledger: every analyst's spending, checked and charged atomically.

Each analyst has a total :class:`Allowance` (epsilon, delta) declared by the data owner. A query's
:class:`Cost` is known from its plan before it runs; :meth:`Ledger.charge` (or
:meth:`Ledger.reserve`) checks it against what is left and records it in one SQLite transaction,
*before* any result is released. A charge is never refunded and no API deletes one; the owner's
:meth:`Ledger.reset` only starts a new spending period and keeps the history.

Storage. One SQLite file, shared by every process and thread that serves queries:

* ``journal_mode=WAL`` lets readers (status, history) run while a charge is being written;
* every check-and-charge runs in one ``BEGIN IMMEDIATE`` transaction: the write lock is taken
  *before* the check, so two processes can never both pass the check on the same remainder;
* ``busy_timeout`` of 30 s makes a concurrent process wait for the lock instead of failing;
* ``synchronous=FULL``: with WAL, ``NORMAL`` already survives a killed *process*, but after a
  power loss or OS crash it may roll back the last commits -- that would refund a charge whose
  answer was already released. ``FULL`` fsyncs the WAL on every commit;
* group commit (:mod:`dpsql.ledger.group_commit`, :mod:`dpsql.ledger.writes`): the charges and
  answers that threads of one process submit at the same time share one transaction and one
  fsync, checked in order inside it, each caller returning only after that commit. One fsync
  per charge would cap a process at a few hundred charges per second; the batch keeps every
  guarantee above (see :mod:`dpsql.ledger.writes` for the argument);
* reads (reuse lookups, status, history) use a second connection, so that they never wait
  behind a commit's fsync (WAL readers see the last committed state).
* triggers make the ``charges`` and ``resets`` tables append-only (the only update allowed is to
  attach an answer, once), as a second wall behind the API.

Failing closed (:mod:`dpsql.ledger.identity`): a ledger has an identity, recorded next to it
when it is first opened; a missing, emptied or replaced ledger is refused
(:class:`~dpsql.errors.LedgerUnavailable`), never started afresh, and each charge and each read
of remaining budget first checks that the file is still the one opened. An error reaching an
analyst names no file: the ledger's path and the cause go to the data owner's log.

WAL needs a local file system (not NFS/SMB). ``":memory:"`` works but is neither durable nor
shared; use it in tests only.

Accounting (``basic`` or ``zcdp``, the costs, the allowances and the rule that admits a charge)
lives in :mod:`dpsql.privacy.accounting`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from dpsql.errors import (
    InterfaceError,
    InvalidPrivacyParameter,
    LedgerError,
    LedgerUnavailable,
)
from dpsql.ledger.group_commit import GroupCommit
from dpsql.ledger.identity import Identity, Watch, check_against_record, read_record
from dpsql.ledger.store import SCHEMA_VERSION, open_file, open_reader
from dpsql.ledger.writes import (
    AttachRequest,
    ChargeRequest,
    Known,
    SpentCache,
    Write,
    apply_batch,
    spent,
)
from dpsql.privacy.accounting import (
    Accounting,
    Allowance,
    BudgetStatus,
    Cost,
    UnknownAnalyst,
    budget_status,
    validate_allowance,
    validate_cost,
)

BUSY_TIMEOUT_SECONDS = 30.0
#: How often (seconds) a process that charges records how far the ledger got, so that an older
#: copy put back later is refused even if the process was killed (see dpsql.ledger.identity).
RECORD_EVERY_SECONDS = 30.0

_ENTRY_COLUMNS = "id, analyst, at, sql, epsilon, delta, rho, cache_key"


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded charge."""

    id: int
    analyst: str
    at: datetime
    sql: str
    cost: Cost
    cache_key: str | None


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _entry(row: tuple[int, str, str, str, float, float, float, str | None]) -> LedgerEntry:
    entry_id, analyst, at, sql, epsilon, delta, rho, cache_key = row
    return LedgerEntry(
        entry_id, analyst, datetime.fromisoformat(at), sql, Cost(epsilon, delta, rho), cache_key
    )


class Ledger:
    """A file-backed, append-only privacy budget ledger (see the module docstring).

    A ``Ledger`` may be shared by threads: one connection writes (its transactions batched by
    group commit and serialised by a lock), another reads. Each process opens its own: a
    ``Ledger`` does not survive ``fork()``.
    """

    def __init__(
        self,
        path: str | Path,
        allowances: Mapping[str, Allowance],
        *,
        accounting: Accounting = "basic",
        default: Allowance | None = None,
        create: bool = True,
    ) -> None:
        """``allowances`` maps analysts to their totals; ``default``, if given, is the total of
        every analyst not listed there (each gets their own budget of that size). ``create``:
        whether a ledger that never existed at ``path`` (no identity record) may be created;
        one that existed is never created again (see :mod:`dpsql.ledger.identity`)."""
        if accounting not in ("basic", "zcdp"):
            raise InvalidPrivacyParameter(
                f"unknown accounting {accounting!r}; use 'basic' or 'zcdp'"
            )
        for analyst, allowance in allowances.items():
            validate_allowance(analyst, allowance, accounting)
        if default is not None:
            validate_allowance("* (every analyst not listed)", default, accounting)
        self._path = str(path)
        self._allowances = dict(allowances)
        self._default = default
        self._accounting: Accounting = accounting
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._recorded_at = time.monotonic()
        self._watch: Watch | None = None  # set by _open, for a file
        self._conn: sqlite3.Connection | None = self._open(create)
        self._commits: GroupCommit[Write, int | BaseException] = GroupCommit(self._apply)
        self._spent = SpentCache()  # used by one group-commit leader at a time
        # ":memory:" is one database per connection: there the writer reads too.
        self._read_lock = self._lock if self._path == ":memory:" else threading.Lock()
        self._reader: sqlite3.Connection | None = (
            self._conn if self._path == ":memory:" else self._open_reader())

    @property
    def path(self) -> str:
        return self._path

    @property
    def identity(self) -> Identity | None:
        """The ledger's identity (None for ":memory:"): see :mod:`dpsql.ledger.identity`."""
        return self._watch.identity if self._watch is not None else None

    @property
    def commits(self) -> GroupCommit[Write, int | BaseException]:
        """The group commit of this ledger's writes (its ``batches`` count transactions)."""
        return self._commits

    @property
    def accounting(self) -> Accounting:
        return self._accounting

    # -- opening

    def _open(self, create: bool) -> sqlite3.Connection:
        conn, self._watch = open_file(self._path, self._accounting, create,
                                      BUSY_TIMEOUT_SECONDS)
        return conn

    def _open_reader(self) -> sqlite3.Connection:
        try:
            return open_reader(self._path, BUSY_TIMEOUT_SECONDS)
        except BaseException:
            if self._conn is not None:
                self._conn.close()
            raise

    # -- connection and transactions

    def _connection(self, conn: sqlite3.Connection | None = None) -> sqlite3.Connection:
        conn = self._conn if conn is None else conn
        if conn is None or self._conn is None:
            raise InterfaceError("the budget ledger is closed")
        if os.getpid() != self._pid:
            # SQLite connections must not cross fork(); the child must open its own Ledger.
            raise InterfaceError("a Ledger cannot be used across fork(); open one per process")
        return conn

    @contextmanager
    def _write(self, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One BEGIN IMMEDIATE transaction: the write lock is held from the check to the commit.

        ``durable=False`` commits without waiting for the disk (WAL with synchronous=NORMAL:
        still atomic and safe against a killed process, but a power loss may drop it). Only
        a batch of answers stored for reuse, without a charge, uses it: losing one costs a
        repeated query its reuse, never a charge.
        """
        with self._lock:
            conn = self._connection()
            if not durable:
                conn.execute("PRAGMA synchronous = NORMAL")
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                finally:
                    if conn.in_transaction:  # an exception, or a failed COMMIT
                        conn.execute("ROLLBACK")
            except sqlite3.Error as exc:
                raise LedgerError(owner_detail=f"budget ledger {self._path}: {exc}") from exc
            finally:
                if not durable:
                    conn.execute("PRAGMA synchronous = FULL")

    def _read(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        with self._read_lock:
            conn = self._connection(self._reader)
            try:
                self._check(conn)
                return conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise LedgerError(owner_detail=f"budget ledger {self._path}: {exc}") from exc

    def _check(self, conn: sqlite3.Connection) -> None:
        """Before a charge or a read: the ledger is still the one opened (a deleted or replaced
        file is refused, never charged into or read as a reset)."""
        if self._watch is not None:
            self._watch.check(conn)

    def _allowance(self, analyst: str) -> Allowance:
        try:
            return self._allowances[analyst]
        except KeyError:
            if self._default is not None:
                return self._default
            raise UnknownAnalyst(
                f"analyst {analyst!r} has no privacy budget here; ask the data owner to grant one"
            ) from None

    def _apply(self, batch: Sequence[Write]) -> list[int | BaseException]:
        """One group-commit batch in one transaction (see :mod:`dpsql.ledger.writes`); durable
        (fsync) when it holds a charge: an answer alone costs a repeated query its reuse if a
        power loss drops it, never a charge."""
        durable = any(isinstance(request, ChargeRequest) for request in batch)
        seen: dict[str, Known] = {}
        with self._write(durable) as conn:
            self._check(conn)
            outcomes = apply_batch(conn, batch, self._accounting, self._spent, seen)
        self._spent.keep(seen)  # committed
        if durable and time.monotonic() - self._recorded_at >= RECORD_EVERY_SECONDS:
            self._recorded_at = time.monotonic()
            with self._read_lock:
                self._remember()
        return outcomes

    # -- charging

    def charge(
        self,
        analyst: str,
        cost: Cost,
        *,
        sql: str,
        cache_key: str | None = None,
        answer: bytes | None = None,
    ) -> LedgerEntry:
        """Check that ``cost`` fits in what ``analyst`` has left and record it, atomically and
        durably: this returns only after the commit holding the charge reached the disk.

        ``answer`` (the serialized released answer) is stored with the charge so that
        :meth:`lookup` can return it again for free. Raises :class:`BudgetExhausted` (nothing is
        charged) or :class:`UnknownAnalyst`.
        """
        total = self._allowance(analyst)
        validate_cost(cost, self._accounting)
        self._connection()  # a closed ledger refuses before queueing
        at = _now()
        entry_id = self._commits.submit(
            ChargeRequest(analyst, total, cost, at, sql, cache_key, answer))
        assert isinstance(entry_id, int)  # errors are raised by submit
        return _entry((entry_id, analyst, at, sql, float(cost.epsilon), float(cost.delta),
                       float(cost.rho), cache_key))

    def reserve(
        self, analyst: str, cost: Cost, *, sql: str, cache_key: str | None = None
    ) -> LedgerEntry:
        """Charge before the answer exists; attach it later with :meth:`store_answer`.

        The charge stands even if the query then fails: the cost is the mechanism's, not the
        answer's, and refunding on failure would let failures leak information.
        """
        return self.charge(analyst, cost, sql=sql, cache_key=cache_key)

    def store_answer(self, entry_id: int, answer: bytes) -> None:
        """Attach the released answer to a charge, once (a second, different answer would be a
        second release that nobody paid for)."""
        self._connection()
        self._commits.submit(AttachRequest(entry_id, answer))

    def lookup(self, analyst: str, cache_key: str) -> bytes | None:
        """The latest answer stored for this analyst and cache key, or None.

        Releasing it again is post-processing of a paid-for answer, so it costs nothing.
        """
        self._allowance(analyst)
        rows = self._read(
            "SELECT answer FROM charges WHERE analyst = ? AND cache_key = ? "
            "AND answer IS NOT NULL ORDER BY id DESC LIMIT 1",
            (analyst, cache_key),
        )
        return bytes(rows[0][0]) if rows else None

    # -- reporting and the owner's actions

    def status(self, analyst: str) -> BudgetStatus:
        total = self._allowance(analyst)
        with self._read_lock:
            try:
                conn = self._connection(self._reader)
                self._check(conn)
                used = spent(conn, analyst)
            except sqlite3.Error as exc:
                raise LedgerError(owner_detail=f"budget ledger {self._path}: {exc}") from exc
        return budget_status(analyst, total, used, self._accounting)

    def all_status(self) -> list[BudgetStatus]:
        """The status of every analyst with an allowance, sorted by name: those listed, and
        with a ``default`` allowance also everyone who appears in the ledger."""
        names = set(self._allowances)
        if self._default is not None:
            names.update(self.analysts())
        return [self.status(analyst) for analyst in sorted(names)]

    def analysts(self) -> list[str]:
        """Every analyst who appears in the ledger (charged or reset), sorted."""
        rows = self._read(
            "SELECT analyst FROM charges UNION SELECT analyst FROM resets ORDER BY 1", ()
        )
        return [row[0] for row in rows]

    def history(self, analyst: str | None = None, limit: int = 20) -> list[LedgerEntry]:
        """The latest ``limit`` charges (of one analyst, or of all), most recent first.

        Charges before a reset are included: a reset starts a new period, it erases nothing.
        """
        if limit < 0:
            raise InterfaceError(f"history limit must be >= 0, got {limit}")
        where, params = ("WHERE analyst = ?", (analyst,)) if analyst is not None else ("", ())
        rows = self._read(
            f"SELECT {_ENTRY_COLUMNS} FROM charges {where} ORDER BY id DESC LIMIT ?",
            (*params, limit),
        )
        return [_entry(row) for row in rows]

    def charges(self, analyst: str | None = None, since: datetime | None = None
                ) -> list[LedgerEntry]:
        """Every charge (of one analyst, or of all) recorded at or after ``since`` (an aware
        instant), oldest first: what the spending views and ``dpsql budget --by day`` sum. Charges
        before a reset are included, as in :meth:`history`."""
        clauses, params = [], []
        if analyst is not None:
            clauses.append("analyst = ?")
            params.append(analyst)
        rows = self._read(f"SELECT {_ENTRY_COLUMNS} FROM charges"
                          + (f" WHERE {' AND '.join(clauses)}" if clauses else "")
                          + " ORDER BY id", tuple(params))
        entries = [_entry(row) for row in rows]
        # ISO texts of mixed offsets do not sort as instants: compare them as datetimes
        return entries if since is None else [e for e in entries if e.at >= since]

    def reset(self, analyst: str) -> None:
        """The data owner's explicit action: the analyst's spending starts again from zero.

        Only charges recorded after the latest reset count; the history is kept.
        """
        self._allowance(analyst)
        with self._write() as conn:
            self._check(conn)
            conn.execute(
                "INSERT INTO resets (analyst, at, after_charge) "
                "VALUES (?, ?, (SELECT COALESCE(MAX(id), 0) FROM charges))",
                (analyst, _now()),
            )

    def close(self) -> None:
        with self._lock, self._read_lock:
            self._remember()
            for conn in {id(c): c for c in (self._conn, self._reader) if c is not None}.values():
                if os.getpid() == self._pid:
                    conn.close()
            self._conn = self._reader = None

    def _remember(self) -> None:
        """Record how far this ledger got, so that an older copy put back later is refused."""
        if self._watch is None or self._reader is None or os.getpid() != self._pid:
            return
        try:
            recorded = read_record(self._watch.path)
            self._watch.check(self._reader)
            check_against_record(self._watch.path, self._watch.identity, recorded)
        except (LedgerUnavailable, OSError, sqlite3.Error):
            pass  # the next open or charge reports it; closing must not fail

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


__all__ = [
    "SCHEMA_VERSION",
    "Accounting",
    "Allowance",
    "BudgetStatus",
    "Cost",
    "Ledger",
    "LedgerEntry",
    "UnknownAnalyst",
]
