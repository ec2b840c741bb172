"""The ledger's writes, applied in batches: one ``BEGIN IMMEDIATE`` transaction per batch.

:class:`dpsql.ledger.budget.Ledger` hands concurrent writes to
:class:`dpsql.ledger.group_commit.GroupCommit`, whose leader calls :func:`apply_batch` inside one
write transaction. Why this keeps the budget's guarantees:

* **Never overspent.** The transaction holds SQLite's write lock from the first read to the
  commit, so no other process or thread writes in between. Each charge is checked against
  what the analyst had spent when the transaction began (read inside it) plus the charges this
  batch admitted before it, in order -- exactly what checking the charges one transaction
  each, in the same order, would decide.
* **A refusal is its own.** A refused charge writes nothing and becomes its submitter's
  :class:`~dpsql.errors.BudgetExhausted`; the other charges of the batch go on. A statement
  that fails (a trigger, a constraint) is undone alone by SQLite (statement-level atomicity)
  and fails only its own request; if SQLite rolled back the whole transaction, the batch fails
  and every submitter gets the error, with nothing written.
* **Durable before released.** The batch's commit is one fsync (``synchronous=FULL``) when it
  holds a charge; every submitter returns only after it. A process killed before the commit
  leaves none of the batch, and none of its queries ran.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from dpsql.errors import BudgetExhausted, InterfaceError, OperationalError, Remedy
from dpsql.privacy.accounting import (
    Accounting,
    Allowance,
    Cost,
    Spent,
    budget_status,
    exceeded_limits,
    refusal_message,
    rho_of,
)

# One statement, hence one consistent snapshot: sums over the charges after the latest reset.
# The third sum is the zCDP rho of each charge, mirroring rho_of().
SPENT_SQL = """
SELECT COALESCE(SUM(epsilon), 0.0),
       COALESCE(SUM(delta), 0.0),
       COALESCE(SUM(CASE WHEN rho > 0 THEN rho ELSE epsilon * epsilon / 2.0 END), 0.0)
FROM charges
WHERE analyst = ?
  AND id > (SELECT COALESCE(MAX(after_charge), 0) FROM resets WHERE analyst = ?)
"""


@dataclass(frozen=True)
class ChargeRequest:
    """Check ``cost`` against ``total`` and record it (with the answer, if already known)."""

    analyst: str
    total: Allowance
    cost: Cost
    at: str
    sql: str
    cache_key: str | None
    answer: bytes | None


@dataclass(frozen=True)
class AttachRequest:
    """Attach the released answer to charge ``entry_id``, once."""

    entry_id: int
    answer: bytes


Write = ChargeRequest | AttachRequest


def spent(conn: sqlite3.Connection, analyst: str) -> Spent:
    epsilon, delta, rho = conn.execute(SPENT_SQL, (analyst, analyst)).fetchone()
    return Spent(epsilon, delta, rho)


_MARKER_SQL = "SELECT COALESCE(MAX(after_charge), 0) FROM resets WHERE analyst = ?"
_SINCE_SQL = """
SELECT COALESCE(SUM(epsilon), 0.0),
       COALESCE(SUM(delta), 0.0),
       COALESCE(SUM(CASE WHEN rho > 0 THEN rho ELSE epsilon * epsilon / 2.0 END), 0.0),
       MAX(id)
FROM charges WHERE analyst = ? AND id > ?
"""


@dataclass(frozen=True)
class Known:
    """An analyst's spending over the charges after reset marker ``marker`` up to id ``last``."""

    marker: int
    last: int
    spent: Spent


class SpentCache:
    """Each analyst's spending, read incrementally inside write transactions.

    Summing every charge of an analyst on each check costs time in proportion to the history
    (7 ms at 10,000 charges). Charges are append-only (triggers) and their ids grow
    (``AUTOINCREMENT``: a new id exceeds every id the table ever held), and inside a write
    transaction no other writer runs; so every charge committed since this process last looked
    has an id above the last one it saw, and the spending is what it knew plus the sum of those.
    A reset moves the analyst's marker (``MAX(after_charge)``): then the sum starts over from
    the new marker. Only what a committed transaction read or wrote is kept (:meth:`keep`
    after the commit): a rolled-back insert's id may be given again to another charge.
    """

    def __init__(self) -> None:
        self._known: dict[str, Known] = {}

    def read(self, conn: sqlite3.Connection, analyst: str) -> Known:
        (marker,) = conn.execute(_MARKER_SQL, (analyst,)).fetchone()
        known = self._known.get(analyst)
        if known is None or known.marker != marker:
            known = Known(marker, marker, Spent(0.0, 0.0, 0.0))
        epsilon, delta, rho, last = conn.execute(_SINCE_SQL, (analyst, known.last)).fetchone()
        if last is None:
            return known
        return Known(marker, last, Spent(known.spent.epsilon + epsilon,
                                         known.spent.delta + delta, known.spent.rho + rho))

    def keep(self, committed: dict[str, Known]) -> None:
        self._known.update(committed)


def apply_batch(conn: sqlite3.Connection, batch: Sequence[Write], accounting: Accounting,
                cache: SpentCache | None = None,
                seen: dict[str, Known] | None = None) -> list[int | BaseException]:
    """Apply ``batch`` in order inside the open write transaction: one outcome per request,
    the charge's (or the attached) entry id, or that request's own error. ``seen`` receives
    each charged analyst's spending at the end of the batch, for ``cache`` once committed."""
    cache = SpentCache() if cache is None else cache
    seen = {} if seen is None else seen  # each analyst's spending so far in this transaction
    outcomes: list[int | BaseException] = []
    for request in batch:
        try:
            if isinstance(request, ChargeRequest):
                outcomes.append(_charge(conn, request, accounting, cache, seen))
            else:
                outcomes.append(_attach(conn, request))
        except (BudgetExhausted, InterfaceError) as refused:
            outcomes.append(refused)
        except sqlite3.Error as exc:
            if not conn.in_transaction:  # SQLite rolled back the whole batch
                raise
            outcomes.append(OperationalError(f"budget ledger: {exc}"))
    return outcomes


def _charge(conn: sqlite3.Connection, request: ChargeRequest, accounting: Accounting,
            cache: SpentCache, seen: dict[str, Known]) -> int:
    analyst, cost = request.analyst, request.cost
    known = seen.get(analyst)
    if known is None:
        known = seen[analyst] = cache.read(conn, analyst)
    before = known.spent
    exceeded = exceeded_limits(request.total, before, cost, accounting)
    if exceeded:
        status = budget_status(analyst, request.total, before, accounting)
        refused = BudgetExhausted(refusal_message(status, cost, exceeded, accounting == "zcdp"))
        refused.remedies = tuple(Remedy("delta" if name == "delta" else "epsilon")
                                 for name in exceeded)
        raise refused
    cursor = conn.execute(
        "INSERT INTO charges (analyst, at, sql, epsilon, delta, rho, cache_key, answer) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (analyst, request.at, request.sql, float(cost.epsilon), float(cost.delta),
         float(cost.rho), request.cache_key, request.answer),
    )
    entry_id = cursor.lastrowid
    assert entry_id is not None  # an INSERT always sets it
    seen[analyst] = Known(known.marker, entry_id, Spent(
        before.epsilon + cost.epsilon, before.delta + cost.delta, before.rho + rho_of(cost)))
    return entry_id


def _attach(conn: sqlite3.Connection, request: AttachRequest) -> int:
    row = conn.execute("SELECT answer IS NOT NULL FROM charges WHERE id = ?",
                       (request.entry_id,)).fetchone()
    if row is None:
        raise InterfaceError(f"the budget ledger has no entry {request.entry_id}")
    if row[0]:
        raise InterfaceError(f"ledger entry {request.entry_id} already has an answer")
    conn.execute("UPDATE charges SET answer = ? WHERE id = ?", (request.answer, request.entry_id))
    return request.entry_id
