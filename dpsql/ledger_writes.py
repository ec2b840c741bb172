"""The ledger's writes, applied in batches: one ``BEGIN IMMEDIATE`` transaction per batch.

:class:`dpsql.budget.Ledger` hands concurrent writes to :class:`dpsql.group_commit.GroupCommit`,
whose leader calls :func:`apply_batch` inside one write transaction. Why this keeps the
budget's guarantees:

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

from dpsql.accounting import (
    Accounting,
    Allowance,
    Cost,
    Spent,
    budget_status,
    exceeded_limits,
    refusal_message,
    rho_of,
)
from dpsql.errors import BudgetExhausted, InterfaceError, OperationalError, Remedy

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


def apply_batch(conn: sqlite3.Connection, batch: Sequence[Write],
                accounting: Accounting) -> list[int | BaseException]:
    """Apply ``batch`` in order inside the open write transaction: one outcome per request,
    the charge's (or the attached) entry id, or that request's own error."""
    spent_by: dict[str, Spent] = {}  # each analyst's spending so far in this transaction
    outcomes: list[int | BaseException] = []
    for request in batch:
        try:
            if isinstance(request, ChargeRequest):
                outcomes.append(_charge(conn, request, accounting, spent_by))
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
            spent_by: dict[str, Spent]) -> int:
    analyst, cost = request.analyst, request.cost
    before = spent_by.get(analyst)
    if before is None:
        before = spent(conn, analyst)
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
    spent_by[analyst] = Spent(before.epsilon + cost.epsilon, before.delta + cost.delta,
                              before.rho + rho_of(cost))
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
