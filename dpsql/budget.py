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
  answer was already released. ``FULL`` fsyncs the WAL on every commit; a charge costs one fsync.
* triggers make the ``charges`` and ``resets`` tables append-only (the only update allowed is to
  attach an answer, once), as a second wall behind the API.

WAL needs a local file system (not NFS/SMB). ``":memory:"`` works but is neither durable nor
shared; use it in tests only.

Accounting. The ledger file remembers the mode it was created with and refuses another one,
because re-reading old charges under the other rule could undercount them.

``basic`` (default) -- sequential composition: spent epsilon and spent delta are the sums of the
charges' epsilon and delta since the latest reset, and a charge is admitted while both sums stay
within the total. This is sound even though analysts choose each cost adaptively, after seeing
earlier answers: basic composition is a valid privacy filter (Rogers, Roth, Ullman, Vadhan 2016,
"Privacy odometers and filters"). ``Cost.rho`` is recorded but not used; a cost must have
epsilon > 0 (a Gaussian query states its (epsilon, delta) guarantee here).

``zcdp`` (optional) -- approximate zero-concentrated DP (Bun and Steinke 2016). Each charge is read
as a delta-approximate rho-zCDP mechanism with

* rho = ``cost.rho`` when it is > 0 (Gaussian noise: ``rho = sensitivity^2 / (2 sigma^2)``),
  otherwise ``epsilon^2 / 2`` (pure epsilon-DP implies epsilon^2/2-zCDP);
* delta = ``cost.delta``: only the delta that rho does not cover, e.g. the failure probability
  of releasing thresholded group keys. It must be 0 for a plain Gaussian query, whose
  (epsilon, delta) equivalent is *not* to be put in the cost (it would be charged twice).

Approximate zCDP composes additively (sum of rho, sum of delta); with costs chosen adaptively,
a fixed-threshold filter on these sums is what OpenDP's fully adaptive composition admits for
(approximate) zCDP (for rho alone: Feldman and Zrnic 2021, Renyi filters). The total
(eps_T, delta_T), which must have delta_T > 0, is split once, up front: half of delta_T converts
rho into epsilon, half is for the queries' own deltas. The rho budget is the largest rho_T with
``rho_T + 2 sqrt(rho_T ln(2 / delta_T)) <= eps_T`` (Bun and Steinke, Prop. 1.3), so anything
admitted is (eps_T, delta_T)-DP. A charge is admitted while ``sum rho <= rho_T`` and
``sum delta <= delta_T / 2``. The thresholds are fixed, never a function of what was spent: a
min() of two accountants picked after the fact is not known to be a valid filter, so the ledger
never switches rule mid-way. zcdp pays off for many small (Gaussian) queries; a few
pure-epsilon queries cost more than under ``basic``.

Floating-point sums are compared with a relative tolerance of 1e-9, so that ten charges of 0.1
fit in a total of 1.0; the overspend this allows is at most a billionth of the total.
"""

from __future__ import annotations

import math
import numbers
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from dpsql.errors import (
    BudgetExhausted,
    InterfaceError,
    InvalidPrivacyParameter,
    MetadataError,
    OperationalError,
)

Accounting = Literal["basic", "zcdp"]

SCHEMA_VERSION = 1
BUSY_TIMEOUT_SECONDS = 30.0
RELATIVE_TOLERANCE = 1e-9

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # AUTOINCREMENT: ids are never reused, so "after the latest reset" is "id > a marker".
    """CREATE TABLE IF NOT EXISTS charges (
        id        INTEGER PRIMARY KEY AUTOINCREMENT,
        analyst   TEXT NOT NULL,
        at        TEXT NOT NULL,
        sql       TEXT NOT NULL,
        epsilon   REAL NOT NULL CHECK (epsilon >= 0),
        delta     REAL NOT NULL CHECK (delta >= 0 AND delta < 1),
        rho       REAL NOT NULL CHECK (rho >= 0),
        cache_key TEXT,
        answer    BLOB
    )""",
    "CREATE INDEX IF NOT EXISTS charges_by_analyst ON charges (analyst, id)",
    "CREATE INDEX IF NOT EXISTS charges_by_cache_key ON charges (analyst, cache_key, id)",
    """CREATE TABLE IF NOT EXISTS resets (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        analyst      TEXT NOT NULL,
        at           TEXT NOT NULL,
        after_charge INTEGER NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS resets_by_analyst ON resets (analyst, after_charge)",
    """CREATE TRIGGER IF NOT EXISTS charges_are_never_deleted BEFORE DELETE ON charges
       BEGIN SELECT RAISE(ABORT, 'dpsql ledger: charges are never deleted'); END""",
    """CREATE TRIGGER IF NOT EXISTS charges_are_never_changed BEFORE UPDATE ON charges
       WHEN OLD.answer IS NOT NULL OR NEW.id IS NOT OLD.id OR NEW.analyst IS NOT OLD.analyst
         OR NEW.at IS NOT OLD.at OR NEW.sql IS NOT OLD.sql OR NEW.epsilon IS NOT OLD.epsilon
         OR NEW.delta IS NOT OLD.delta OR NEW.rho IS NOT OLD.rho
         OR NEW.cache_key IS NOT OLD.cache_key
       BEGIN SELECT RAISE(ABORT, 'dpsql ledger: only an answer may be attached, once'); END""",
    """CREATE TRIGGER IF NOT EXISTS resets_are_never_deleted BEFORE DELETE ON resets
       BEGIN SELECT RAISE(ABORT, 'dpsql ledger: resets are never deleted'); END""",
    """CREATE TRIGGER IF NOT EXISTS resets_are_never_changed BEFORE UPDATE ON resets
       BEGIN SELECT RAISE(ABORT, 'dpsql ledger: resets are never changed'); END""",
)

# One statement, hence one consistent snapshot: sums over the charges after the latest reset.
# The third sum is the zCDP rho of each charge, mirroring _rho_of().
_SPENT_SQL = """
SELECT COALESCE(SUM(epsilon), 0.0),
       COALESCE(SUM(delta), 0.0),
       COALESCE(SUM(CASE WHEN rho > 0 THEN rho ELSE epsilon * epsilon / 2.0 END), 0.0)
FROM charges
WHERE analyst = ?
  AND id > (SELECT COALESCE(MAX(after_charge), 0) FROM resets WHERE analyst = ?)
"""

_ENTRY_COLUMNS = "id, analyst, at, sql, epsilon, delta, rho, cache_key"


class UnknownAnalyst(BudgetExhausted):
    """An analyst to whom the data owner has granted no budget. Nothing was charged."""

    sqlstate = "28000"


@dataclass(frozen=True)
class Cost:
    """The privacy cost of one query (see the module docstring for how ``rho`` is used)."""

    epsilon: float
    delta: float
    rho: float = 0.0


@dataclass(frozen=True)
class Allowance:
    """An analyst's total budget, declared by the data owner."""

    epsilon: float
    delta: float


@dataclass(frozen=True)
class BudgetStatus:
    """What an analyst has spent since the latest reset, and what is left.

    Under ``basic`` accounting ``spent`` holds the sums of epsilon and delta, ``remaining`` is
    ``total - spent`` (never below 0) and both ``rho`` fields are 0.

    Under ``zcdp`` accounting ``spent`` is an (epsilon, delta)-DP guarantee of everything
    charged: epsilon is the conversion of the spent rho with delta_T / 2, delta is the queries'
    deltas plus that delta_T / 2 (once anything is spent); ``spent.rho`` is the spent rho.
    ``remaining.rho`` and ``remaining.delta`` are what further queries may still use (the
    checked limits); ``remaining.epsilon`` is ``total.epsilon - spent.epsilon``.
    """

    analyst: str
    total: Allowance
    spent: Cost
    remaining: Cost


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded charge."""

    id: int
    analyst: str
    at: datetime
    sql: str
    cost: Cost
    cache_key: str | None


@dataclass(frozen=True)
class _Spent:
    """Raw sums over an analyst's charges since the latest reset."""

    epsilon: float
    delta: float
    rho: float


# --- validation -------------------------------------------------------------------------------


def _check_parameter(value: object, name: str, owner: str) -> None:
    # bool is an int to Python, but epsilon=True is a bug, not a budget.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidPrivacyParameter(f"{owner}: {name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise InvalidPrivacyParameter(
            f"{owner}: {name} must be a finite number >= 0, got {value!r}"
        )
    if name == "delta" and number >= 1:
        raise InvalidPrivacyParameter(f"{owner}: delta must be < 1, got {value!r}")


def _validate_allowance(analyst: str, allowance: Allowance, accounting: Accounting) -> None:
    owner = f"the budget of analyst {analyst!r}"
    _check_parameter(allowance.epsilon, "epsilon", owner)
    _check_parameter(allowance.delta, "delta", owner)
    if accounting == "zcdp" and allowance.delta == 0:
        # rho-zCDP implies no pure epsilon-DP bound: the conversion needs some delta.
        raise InvalidPrivacyParameter(
            f"{owner}: zcdp accounting needs a delta > 0; give a delta or use basic accounting"
        )


def _validate_cost(cost: Cost, accounting: Accounting) -> None:
    owner = "the query's privacy cost"
    for name in ("epsilon", "delta", "rho"):
        _check_parameter(getattr(cost, name), name, owner)
    if accounting == "basic" and cost.epsilon == 0:
        raise InvalidPrivacyParameter(
            f"{owner}: epsilon must be > 0 (basic accounting charges epsilon and delta, "
            "not rho alone)"
        )
    if accounting == "zcdp" and cost.epsilon == 0 and cost.rho == 0:
        raise InvalidPrivacyParameter(f"{owner}: epsilon or rho must be > 0")


# --- accounting -------------------------------------------------------------------------------


def _within(used: float, limit: float) -> bool:
    return used <= limit * (1.0 + RELATIVE_TOLERANCE)


def _rho_of(cost: Cost) -> float:
    """The zCDP rho charged for a cost (mirrored in _SPENT_SQL)."""
    return cost.rho if cost.rho > 0 else cost.epsilon * cost.epsilon / 2.0


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The epsilon of (epsilon, delta)-DP implied by rho-zCDP (Bun and Steinke, Prop. 1.3)."""
    if rho == 0:
        return 0.0
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def zcdp_limits(total: Allowance) -> tuple[float, float]:
    """(rho budget, delta budget for the queries' own deltas) of a total under zcdp accounting.

    Solves rho + 2 sqrt(rho L) = eps with L = ln(2 / delta): sqrt(rho) = sqrt(eps + L) - sqrt(L),
    written as eps / (sqrt(eps + L) + sqrt(L)) to avoid cancellation for small eps.
    """
    half_delta = total.delta / 2.0
    log_term = math.log(1.0 / half_delta)
    root = total.epsilon / (math.sqrt(total.epsilon + log_term) + math.sqrt(log_term))
    return root * root, half_delta


def _exceeded(total: Allowance, spent: _Spent, cost: Cost, accounting: Accounting) -> list[str]:
    """The budget dimensions that this cost would overrun (empty: the charge fits)."""
    if accounting == "basic":
        checks = {
            "epsilon": (spent.epsilon + cost.epsilon, total.epsilon),
            "delta": (spent.delta + cost.delta, total.delta),
        }
    else:
        rho_limit, delta_limit = zcdp_limits(total)
        checks = {
            "rho": (spent.rho + _rho_of(cost), rho_limit),
            "delta": (spent.delta + cost.delta, delta_limit),
        }
    return [name for name, (used, limit) in checks.items() if not _within(used, limit)]


def _status(analyst: str, total: Allowance, spent: _Spent, accounting: Accounting) -> BudgetStatus:
    if accounting == "basic":
        used = Cost(spent.epsilon, spent.delta)
        left = Cost(max(0.0, total.epsilon - spent.epsilon), max(0.0, total.delta - spent.delta))
        return BudgetStatus(analyst, total, used, left)
    rho_limit, delta_limit = zcdp_limits(total)
    conversion_delta = delta_limit if spent.rho > 0 else 0.0
    used = Cost(
        zcdp_epsilon(spent.rho, delta_limit), spent.delta + conversion_delta, spent.rho
    )
    left = Cost(
        max(0.0, total.epsilon - used.epsilon),
        max(0.0, delta_limit - spent.delta),
        max(0.0, rho_limit - spent.rho),
    )
    return BudgetStatus(analyst, total, used, left)


def _refusal(status: BudgetStatus, cost: Cost, exceeded: list[str], zcdp: bool) -> str:
    left, total = status.remaining, status.total
    if zcdp:
        costs = f"rho={_rho_of(cost):.6g}, delta={cost.delta:.6g} (zCDP accounting)"
        remains = f"rho={left.rho:.6g}, delta={left.delta:.6g}"
    else:
        costs = f"epsilon={cost.epsilon:.6g}, delta={cost.delta:.6g}"
        remains = f"epsilon={left.epsilon:.6g}, delta={left.delta:.6g}"
    knobs = " and ".join("--delta" if name == "delta" else "--epsilon" for name in exceeded)
    return (
        f"privacy budget exhausted for analyst {status.analyst!r}: this query costs {costs}; "
        f"remaining {remains} of a total epsilon={total.epsilon:.6g}, "
        f"delta={total.delta:.6g}. Nothing was charged; ask the data owner for more budget "
        f"or lower {knobs}."
    )


# --- the ledger -------------------------------------------------------------------------------


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _entry(row: tuple[int, str, str, str, float, float, float, str | None]) -> LedgerEntry:
    entry_id, analyst, at, sql, epsilon, delta, rho, cache_key = row
    return LedgerEntry(
        entry_id, analyst, datetime.fromisoformat(at), sql, Cost(epsilon, delta, rho), cache_key
    )


class Ledger:
    """A file-backed, append-only privacy budget ledger (see the module docstring).

    A ``Ledger`` may be shared by threads (one connection, serialised by a lock; charges are
    serialised by SQLite's write lock anyway). Each process opens its own: a ``Ledger`` does not
    survive ``fork()``.
    """

    def __init__(
        self,
        path: str | Path,
        allowances: Mapping[str, Allowance],
        *,
        accounting: Accounting = "basic",
        default: Allowance | None = None,
    ) -> None:
        """``allowances`` maps analysts to their totals; ``default``, if given, is the total of
        every analyst not listed there (each gets their own budget of that size)."""
        if accounting not in ("basic", "zcdp"):
            raise InvalidPrivacyParameter(
                f"unknown accounting {accounting!r}; use 'basic' or 'zcdp'"
            )
        for analyst, allowance in allowances.items():
            _validate_allowance(analyst, allowance, accounting)
        if default is not None:
            _validate_allowance("* (every analyst not listed)", default, accounting)
        self._path = str(path)
        self._allowances = dict(allowances)
        self._default = default
        self._accounting: Accounting = accounting
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._conn: sqlite3.Connection | None = self._open()

    @property
    def path(self) -> str:
        return self._path

    @property
    def accounting(self) -> Accounting:
        return self._accounting

    # -- opening

    def _open(self) -> sqlite3.Connection:
        try:
            # isolation_level=None: we issue BEGIN IMMEDIATE ourselves; check_same_thread=False
            # because threads share this connection under self._lock.
            conn = sqlite3.connect(
                self._path,
                timeout=BUSY_TIMEOUT_SECONDS,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise MetadataError(f"cannot open the budget ledger {self._path}: {exc}") from exc
        try:
            self._prepare(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise MetadataError(
                f"{self._path} is not a usable dpsql budget ledger: {exc}"
            ) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("BEGIN IMMEDIATE")  # two processes creating the schema must not interleave
        try:
            for statement in _SCHEMA:
                conn.execute(statement)
            self._check_settings(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _check_settings(self, conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT INTO schema_version (version) SELECT ? "
            "WHERE NOT EXISTS (SELECT 1 FROM schema_version)",
            (SCHEMA_VERSION,),
        )
        conn.execute(
            "INSERT OR IGNORE INTO settings (key, value) VALUES ('accounting', ?)",
            (self._accounting,),
        )
        (version,) = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        if version != SCHEMA_VERSION:
            raise MetadataError(
                f"the budget ledger {self._path} has schema version {version}; this dpsql "
                f"reads version {SCHEMA_VERSION}"
            )
        (stored,) = conn.execute("SELECT value FROM settings WHERE key = 'accounting'").fetchone()
        if stored != self._accounting:
            raise MetadataError(
                f"the budget ledger {self._path} uses {stored} accounting, not "
                f"{self._accounting}; open it with accounting={stored!r} or start a new ledger"
            )

    # -- connection and transactions

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise InterfaceError(f"the budget ledger {self._path} is closed")
        if os.getpid() != self._pid:
            # SQLite connections must not cross fork(); the child must open its own Ledger.
            raise InterfaceError("a Ledger cannot be used across fork(); open one per process")
        return self._conn

    @contextmanager
    def _write(self, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One BEGIN IMMEDIATE transaction: the write lock is held from the check to the commit.

        ``durable=False`` commits without waiting for the disk (WAL with synchronous=NORMAL:
        still atomic and safe against a killed process, but a power loss may drop it). Only
        the storing of an answer for reuse uses it: losing one costs a repeated query its
        reuse, never a charge.
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
                raise OperationalError(f"budget ledger {self._path}: {exc}") from exc
            finally:
                if not durable:
                    conn.execute("PRAGMA synchronous = FULL")

    def _read(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            conn = self._connection()
            try:
                return conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise OperationalError(f"budget ledger {self._path}: {exc}") from exc

    def _allowance(self, analyst: str) -> Allowance:
        try:
            return self._allowances[analyst]
        except KeyError:
            if self._default is not None:
                return self._default
            raise UnknownAnalyst(
                f"analyst {analyst!r} has no privacy budget here; ask the data owner to grant one"
            ) from None

    @staticmethod
    def _spent(conn: sqlite3.Connection, analyst: str) -> _Spent:
        epsilon, delta, rho = conn.execute(_SPENT_SQL, (analyst, analyst)).fetchone()
        return _Spent(epsilon, delta, rho)

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
        """Check that ``cost`` fits in what ``analyst`` has left and record it, atomically.

        ``answer`` (the serialized released answer) is stored with the charge so that
        :meth:`lookup` can return it again for free. Raises :class:`BudgetExhausted` (nothing is
        charged) or :class:`UnknownAnalyst`.
        """
        total = self._allowance(analyst)
        _validate_cost(cost, self._accounting)
        at = _now()
        with self._write() as conn:
            spent = self._spent(conn, analyst)
            exceeded = _exceeded(total, spent, cost, self._accounting)
            if exceeded:
                status = _status(analyst, total, spent, self._accounting)
                zcdp = self._accounting == "zcdp"
                raise BudgetExhausted(_refusal(status, cost, exceeded, zcdp))
            cursor = conn.execute(
                "INSERT INTO charges (analyst, at, sql, epsilon, delta, rho, cache_key, answer) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (analyst, at, sql, float(cost.epsilon), float(cost.delta), float(cost.rho),
                 cache_key, answer),
            )
            entry_id = cursor.lastrowid
        assert entry_id is not None  # an INSERT always sets it
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
        with self._write(durable=False) as conn:
            row = conn.execute(
                "SELECT answer IS NOT NULL FROM charges WHERE id = ?", (entry_id,)
            ).fetchone()
            if row is None:
                raise InterfaceError(f"the budget ledger has no entry {entry_id}")
            if row[0]:
                raise InterfaceError(f"ledger entry {entry_id} already has an answer")
            conn.execute("UPDATE charges SET answer = ? WHERE id = ?", (answer, entry_id))

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
        with self._lock:
            try:
                spent = self._spent(self._connection(), analyst)
            except sqlite3.Error as exc:
                raise OperationalError(f"budget ledger {self._path}: {exc}") from exc
        return _status(analyst, total, spent, self._accounting)

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

    def reset(self, analyst: str) -> None:
        """The data owner's explicit action: the analyst's spending starts again from zero.

        Only charges recorded after the latest reset count; the history is kept.
        """
        self._allowance(analyst)
        with self._write() as conn:
            conn.execute(
                "INSERT INTO resets (analyst, at, after_charge) "
                "VALUES (?, ?, (SELECT COALESCE(MAX(id), 0) FROM charges))",
                (analyst, _now()),
            )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and os.getpid() == self._pid:
                self._conn.close()
            self._conn = None

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
    "Accounting",
    "Allowance",
    "BudgetStatus",
    "Cost",
    "Ledger",
    "LedgerEntry",
    "UnknownAnalyst",
    "zcdp_epsilon",
    "zcdp_limits",
]
