"""The owner's budget report (``dpsql budget``): each analyst's total, spending and what is
left, and the latest charges."""

from __future__ import annotations

from typing import Any

from dpsql.ledger.budget import BudgetStatus, Ledger
from dpsql.metadata.metadata import Metadata
from dpsql.texttable import format_table

#: The share of a budget past which every answer carries a warning.
WARN_SHARE = 0.8
#: How the warning's sentence starts (a door may pick it out of an answer's notes).
BUDGET_NOTE = "Budget: "


def budget_report(md: Metadata, ledger: Ledger, statuses: list[BudgetStatus],
                   history: list[Any], limit: int) -> str:
    assert md.budget is not None
    declared = md.budget.analysts
    zcdp = ledger.accounting == "zcdp"
    lines = [f"Ledger: {ledger.path} ({ledger.accounting} accounting; repeated queries "
             f"{'reuse their stored answer' if md.budget.reuse_answers else 'are charged again'})"]
    if ledger.identity is not None:
        lines.append(f"Ledger id {ledger.identity.ledger_id}, created "
                     f"{ledger.identity.created_at} (recorded next to it; a missing, emptied or "
                     "replaced ledger is refused)")
    if md.budget.default is not None:
        lines.append(f'Every analyst not listed gets [analysts."*"]: '
                     f"epsilon={md.budget.default.epsilon:g}, delta={md.budget.default.delta:g}")
    lines.append("")
    header = ["analyst", "granted by", "epsilon total", "spent", "remaining", "delta total",
              "spent", "remaining"]
    if zcdp:
        header += ["rho spent", "rho remaining"]
    rows: list[list[object]] = []
    for st in statuses:
        source = f"[analysts.{st.analyst}]" if st.analyst in declared else '[analysts."*"]'
        row: list[object] = [st.analyst, source, f"{st.total.epsilon:g}", f"{st.spent.epsilon:.6g}",
                             f"{st.remaining.epsilon:.6g}", f"{st.total.delta:g}",
                             f"{st.spent.delta:.6g}", f"{st.remaining.delta:.6g}"]
        if zcdp:
            row += [f"{st.spent.rho:.6g}", f"{st.remaining.rho:.6g}"]
        rows.append(row)
    lines.append(format_table(header, rows) if rows else "(no analyst has queried yet)")
    lines += [said for said in map(budget_warning, statuses) if said is not None]
    lines.append("")
    if not history:
        lines.append("No queries charged yet.")
    else:
        lines.append(f"Recent queries (latest {limit}, most recent first):")
        rows = [[e.id, e.at.astimezone().strftime("%Y-%m-%d %H:%M:%S"), e.analyst,
                 f"{e.cost.epsilon:g}", f"{e.cost.delta:g}", shorten(e.sql)] for e in history]
        lines.append(format_table(["#", "at", "analyst", "epsilon", "delta", "sql"], rows))
    return "\n".join(lines)


def shorten(sql: str, width: int = 70) -> str:
    sql = " ".join(sql.split())
    return sql if len(sql) <= width else sql[:width - 3] + "..."


def spent_share(status: BudgetStatus) -> float:
    """The share of the budget spent: the largest over the limits a charge is checked against
    (epsilon and delta; under zCDP rho and delta), each as spent / (spent + remaining). A
    limit of 0 (epsilon = 0 locks an analyst out; delta 0 allows no delta) counts as spent."""
    pairs = [(status.spent.delta, status.remaining.delta)]
    pairs.append((status.spent.rho, status.remaining.rho) if status.remaining.rho > 0
                 or status.spent.rho > 0 else (status.spent.epsilon, status.remaining.epsilon))
    shares = [spent / (spent + left) for spent, left in pairs if spent + left > 0]
    if status.total.epsilon <= 0:
        return 1.0
    return max(shares, default=0.0)


def budget_warning(status: BudgetStatus) -> str | None:
    """The sentence every door shows once an analyst has spent :data:`WARN_SHARE` of their
    budget (a NOTICE over the wire, a note in the DB-API, a line on the command line), or
    None below it."""
    share = spent_share(status)
    if share < WARN_SHARE:
        return None
    return (f"{BUDGET_NOTE}{status.analyst} has spent {share:.0%} of their privacy budget "
            f"(epsilon {status.spent.epsilon:.6g} of {status.total.epsilon:g}, delta "
            f"{status.spent.delta:.6g} of {status.total.delta:g}); when it is spent, queries "
            "are refused until the data owner grants more (dpsql budget shows it)")
