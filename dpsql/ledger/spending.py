"""The ledger as something to chart: daily totals, the 80% warning, and the read-only views of
the ``dpsql`` schema (``dpsql.spending``, ``dpsql.queries``, ``dpsql.budgets``).

**Why a ledger view is answered exactly and for free.** The ledger records what each analyst
*asked* and what it *cost*: the SQL text, the epsilon and delta, the time. None of it depends on
the private data (a query's cost is fixed by its plan before anything is read: see
:mod:`dpsql.planner`), so reading it releases nothing about any person (0-DP) and is never
charged. What it does reveal is one analyst's questions to another, so each analyst sees only
their own rows; the data owner's logins (``[budget] owners``) see everyone's.

**Why a view can never read a private table.** Two walls, as for public reads
(:mod:`dpsql.execution.public`):

1. the decision (:func:`ledger_read`): every table reference of the query names one of
   :data:`VIEWS` as ``dpsql.NAME``, or a CTE of the query; a query that names a ``dpsql.``
   view *and* anything else (a private or public table, a table function) is refused, never
   split; a query naming no ``dpsql.`` view is not a ledger read;
2. the place it runs (:func:`answer_ledger`): a separate in-memory DuckDB holding only the
   rows of the views that this analyst may see, filled from the ledger by its Python API, with
   external access off and the configuration locked (:mod:`dpsql.engines.locked`). It has no
   connection to the engine, so even a function that runs SQL text finds nothing else there.

Days are UTC days: a charge's instant is recorded in UTC (:mod:`dpsql.ledger.budget`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date

import duckdb
from sqlglot import exp

from dpsql.engines import locked
from dpsql.errors import UnknownTable, UnsupportedQuery
from dpsql.execution.postprocess import Result, ResultColumn
from dpsql.execution.public import check_functions
from dpsql.ledger.budget import Ledger, LedgerEntry
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.accounting import BudgetStatus

#: The schema of the views, as analysts and BI tools name it.
SCHEMA = "dpsql"
#: The share of a budget past which every answer carries a warning.
WARN_SHARE = 0.8
#: How the warning's sentence starts (a door may pick it out of an answer's notes).
BUDGET_NOTE = "Budget: "
_MEMORY_LIMIT = "256MB"

#: Each view's columns (name, DuckDB type) and what a row is.
VIEWS: dict[str, tuple[tuple[tuple[str, str], ...], str]] = {
    "spending": ((("analyst", "VARCHAR"), ("day", "DATE"), ("queries", "BIGINT"),
                  ("epsilon", "DOUBLE"), ("delta", "DOUBLE")),
                 "one row per analyst and UTC day with a charge: how many charges and their "
                 "summed epsilon and delta"),
    "queries": ((("id", "BIGINT"), ("analyst", "VARCHAR"), ("charged_at", "TIMESTAMP"),
                 ("sql", "VARCHAR"), ("epsilon", "DOUBLE"), ("delta", "DOUBLE")),
                "one row per charge: its instant (UTC), the SQL charged, its epsilon and delta"),
    "budgets": ((("analyst", "VARCHAR"), ("epsilon_total", "DOUBLE"),
                 ("epsilon_spent", "DOUBLE"), ("epsilon_remaining", "DOUBLE"),
                 ("delta_total", "DOUBLE"), ("delta_spent", "DOUBLE"),
                 ("delta_remaining", "DOUBLE"), ("share_spent", "DOUBLE")),
                "one row per analyst: the budget since the latest reset, and the share spent "
                "(the largest of the limits the ledger checks)"),
}


@dataclass(frozen=True)
class DaySpending:
    """One analyst's charges on one UTC day."""

    analyst: str
    day: date
    queries: int
    epsilon: float
    delta: float


def daily(entries: Iterable[LedgerEntry]) -> list[DaySpending]:
    """The charges summed per (UTC day, analyst), by day then analyst."""
    sums: dict[tuple[date, str], list[float]] = {}
    for e in entries:
        total = sums.setdefault((e.at.astimezone(UTC).date(), e.analyst), [0, 0.0, 0.0])
        total[0] += 1
        total[1] += e.cost.epsilon
        total[2] += e.cost.delta
    return [DaySpending(analyst, day, int(n), eps, delta)
            for (day, analyst), (n, eps, delta) in sorted(sums.items())]


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


# --- the views over the wire and the DB-API


@dataclass(frozen=True)
class LedgerRead:
    """A query over the ledger views only: its DuckDB text, the views it reads, its columns."""

    sql: str
    views: tuple[str, ...]
    columns: tuple[ResultColumn, ...]

    @property
    def output_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def reason(self) -> str:
        """What EXPLAIN says of it."""
        return (f"exact read of the ledger view(s) {', '.join(self.views)} (your own "
                "spending, no private data): no noise, no privacy cost")


def ledger_read(tree: exp.Expression) -> LedgerRead | None:
    """The ledger read of ``tree`` (a parsed query; read, not kept), or None when it names no
    ``dpsql.`` view. Refuses a query that names one and anything else (module docstring)."""
    if not isinstance(tree, exp.Select | exp.SetOperation):
        return None
    views = _views(tree)
    if views is None:
        return None
    check_functions(tree)
    text = tree.sql(dialect="duckdb")
    return LedgerRead(text, views, _dry_run(text))


def _views(tree: exp.Query) -> tuple[str, ...] | None:
    ctes = {cte.alias.lower() for cte in tree.find_all(exp.CTE)}
    views: dict[str, None] = {}
    other: str | None = None
    for table in tree.find_all(exp.Table):
        if isinstance(table.parent, exp.Into):
            continue  # refused by check_functions
        schema = (table.db or "").lower()
        if isinstance(table.this, exp.Identifier) and schema == SCHEMA and not table.catalog:
            if table.name.lower() not in VIEWS:
                raise UnknownTable(f"there is no ledger view {SCHEMA}.{table.name}; the views "
                                   f"are {', '.join(f'{SCHEMA}.{v}' for v in VIEWS)}")
            views[table.name.lower()] = None
        elif not (isinstance(table.this, exp.Identifier) and not schema and
                  not table.catalog and table.name.lower() in ctes):
            other = table.sql(dialect="duckdb")
    if not views:
        return None
    if other is not None:
        raise UnsupportedQuery(f"the ledger views ({SCHEMA}.*) are read on their own: this "
                               f"query also reads {other}; ask the two in separate queries")
    return tuple(views)


def _create(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"CREATE SCHEMA {SCHEMA}")
    for name, (columns, _) in VIEWS.items():
        listed = ", ".join(f'"{column}" {ty}' for column, ty in columns)
        con.execute(f"CREATE TABLE {SCHEMA}.{name} ({listed})")


def _dry_run(sql: str) -> tuple[ResultColumn, ...]:
    """Bind and run ``sql`` on the empty views: a name or type error is a refusal, nothing
    read; the columns are the answer's."""
    con = locked.in_memory(_create, memory_limit=_MEMORY_LIMIT, threads=1)
    try:
        result = con.execute(sql)
        description = result.description or []
        result.fetchall()
        return tuple(ResultColumn(d[0], str(d[1])) for d in description)
    except duckdb.Error as e:
        raise UnsupportedQuery(f"the query over the ledger views is not valid: "
                               f"{str(e).splitlines()[0]}") from None
    finally:
        con.close()


def view_rows(entries: Sequence[LedgerEntry], statuses: Sequence[BudgetStatus]
              ) -> dict[str, list[tuple[object, ...]]]:
    """The rows of each view from the charges and statuses the reader may see (the caller
    picks them: one analyst's, or every analyst's for the owner)."""
    return {
        "spending": [(d.analyst, d.day, d.queries, d.epsilon, d.delta) for d in daily(entries)],
        "queries": [(e.id, e.analyst, e.at.astimezone(UTC).replace(tzinfo=None), e.sql,
                     e.cost.epsilon, e.cost.delta) for e in entries],
        "budgets": [(s.analyst, s.total.epsilon, s.spent.epsilon, s.remaining.epsilon,
                     s.total.delta, s.spent.delta, s.remaining.delta, spent_share(s))
                    for s in statuses],
    }


def answer_ledger(read: LedgerRead, rows: Mapping[str, Sequence[tuple[object, ...]]]) -> Result:
    """Run ``read`` exactly on a locked DuckDB holding only ``rows`` (:func:`view_rows`)."""
    def fill(con: duckdb.DuckDBPyConnection) -> None:
        _create(con)
        for name in read.views:
            locked.insert_rows(con, f"{SCHEMA}.{name}", [ty for _, ty in VIEWS[name][0]],
                               rows.get(name, []))

    con = locked.in_memory(fill, memory_limit=_MEMORY_LIMIT, threads=1)
    try:
        answered = con.execute(read.sql).fetchall()
    except duckdb.Error as e:  # the reader's own ledger rows: the message may be shown
        raise UnsupportedQuery(f"the query over the ledger views failed: "
                               f"{str(e).splitlines()[0]}") from None
    finally:
        con.close()
    width = len(read.columns)
    return Result(list(read.columns), answered, [(None,) * width for _ in answered])


def read_views(read: LedgerRead, ledger: Ledger | None, metadata: Metadata, who: str) -> Result:
    """The answer to ``read`` over the rows ``who`` may see: their own, or everyone's for a
    login of ``[budget] owners``. An analyst without a budget is refused, as for any query."""
    if ledger is None or metadata.budget is None:
        raise UnsupportedQuery(f"no privacy budget is declared in {metadata.source}: there is "
                               "no ledger to read (add [analysts.NAME])")
    if who in metadata.budget.owners:
        rows = view_rows(ledger.charges(), ledger.all_status())
    else:
        rows = view_rows(ledger.charges(who), [ledger.status(who)])  # unknown: refused
    return answer_ledger(read, rows)


def warn(result: Result, status: BudgetStatus) -> None:
    """Add :func:`budget_warning` to a charged answer's notes when it applies."""
    warning = budget_warning(status)
    if warning is not None:
        result.notes.append(warning)
