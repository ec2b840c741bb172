"""The ledger as something to chart: daily totals, the 80% warning, and the read-only views of
the ``dpsql`` schema (``dpsql.spending``, ``dpsql.queries``, ``dpsql.budgets``).

**Why a ledger view is answered exactly and for free.** The ledger records what each analyst
*asked* and what it *cost*: the SQL text, the epsilon and delta, the time. None of it depends on
the private data (a query's cost is fixed by its plan before anything is read: see
:mod:`dpsql.routes.planner`), so reading it releases nothing about any person (0-DP) and is never
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

A ledger read runs under the owner's ``statement_timeout``, as a public read does (its time
depends on the reader's own rows and the SQL only, so it needs no grid): a query whose work no
table bounds (a cross join of ``VALUES``) must not hold a server thread for as long as it likes.

Days are UTC days: a charge's instant is recorded in UTC (:mod:`dpsql.ledger.budget`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date

import duckdb
from sqlglot import exp

from dpsql.engines import CursorCancel, locked
from dpsql.errors import QueryTimeout, UnknownTable, UnsupportedQuery, did_you_mean
from dpsql.execution.postprocess import Result, ResultColumn
from dpsql.execution.public import check_functions
from dpsql.execution.result import renamed
from dpsql.execution.time_limits import Deadline
from dpsql.ledger.budget import Ledger, LedgerEntry
from dpsql.ledger.report import BUDGET_NOTE as BUDGET_NOTE  # their home: report.py
from dpsql.ledger.report import WARN_SHARE as WARN_SHARE
from dpsql.ledger.report import budget_warning as budget_warning
from dpsql.ledger.report import spent_share as spent_share
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.accounting import BudgetStatus
from dpsql.query.names import readable_names

#: The schema of the views, as analysts and BI tools name it.
SCHEMA = "dpsql"
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


def ledger_read(tree: exp.Expression, limit: float) -> LedgerRead | None:
    """The ledger read of ``tree`` (a parsed query; read, not kept), or None when it names no
    ``dpsql.`` view. Refuses a query that names one and anything else (module docstring);
    its dry run stops after ``limit`` seconds (the owner's statement_timeout)."""
    if not isinstance(tree, exp.Select | exp.SetOperation):
        return None
    views = _views(tree)
    if views is None:
        return None
    check_functions(tree)
    text = tree.sql(dialect="duckdb")
    columns = _dry_run(text, limit)  # named as every answer is (dpsql.query.names)
    return LedgerRead(text, views, renamed(columns, readable_names(
        tree, [c.name for c in columns])))


def names_views(tree: exp.Query) -> bool:
    """Whether ``tree`` reads the ledger views (then it is a ledger read, :func:`ledger_read`,
    or refused: a view beside anything else)."""
    return _views(tree) is not None


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
                named = [f"{SCHEMA}.{v}" for v in VIEWS]
                raise UnknownTable(f"there is no ledger view {SCHEMA}.{table.name}"
                                   f"{did_you_mean(f'{SCHEMA}.{table.name}', named)}; the "
                                   f"views are {', '.join(named)}")
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


def _run(con: duckdb.DuckDBPyConnection, sql: str, limit: float
         ) -> tuple[list[tuple[str, str]], list[tuple[object, ...]]]:
    """``sql``'s columns (name, type) and rows on ``con``, stopped after ``limit`` seconds."""
    deadline = Deadline(CursorCancel(con), limit)
    try:
        result = con.execute(sql)
        description = [(d[0], str(d[1])) for d in result.description or []]
        return description, result.fetchall()
    except duckdb.Error:
        if deadline.fired:
            raise QueryTimeout(limit, charged=False) from None
        raise
    finally:
        deadline.stop()


def _dry_run(sql: str, limit: float) -> tuple[ResultColumn, ...]:
    """Bind and run ``sql`` on the empty views: a name or type error is a refusal, nothing
    read; the columns are the answer's."""
    con = locked.in_memory(_create, memory_limit=_MEMORY_LIMIT, threads=1)
    try:
        description, _ = _run(con, sql, limit)
        return tuple(ResultColumn(name, ty) for name, ty in description)
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


def answer_ledger(read: LedgerRead, rows: Mapping[str, Sequence[tuple[object, ...]]],
                  limit: float) -> Result:
    """Run ``read`` exactly on a locked DuckDB holding only ``rows`` (:func:`view_rows`),
    stopped after ``limit`` seconds (the owner's statement_timeout)."""
    def fill(con: duckdb.DuckDBPyConnection) -> None:
        _create(con)
        for name in read.views:
            locked.insert_rows(con, f"{SCHEMA}.{name}", [ty for _, ty in VIEWS[name][0]],
                               rows.get(name, []))

    con = locked.in_memory(fill, memory_limit=_MEMORY_LIMIT, threads=1)
    try:
        _, answered = _run(con, read.sql, limit)
    except duckdb.Error as e:  # the reader's own ledger rows: the message may be shown
        raise UnsupportedQuery(f"the query over the ledger views failed: "
                               f"{str(e).splitlines()[0]}") from None
    finally:
        con.close()
    width = len(read.columns)
    return Result(list(read.columns), answered, [(None,) * width for _ in answered])


def read_views(read: LedgerRead, ledger: Ledger | None, metadata: Metadata, who: str,
               limit: float) -> Result:
    """The answer to ``read`` over the rows ``who`` may see: their own, or everyone's for a
    login of ``[budget] owners``. An analyst without a budget is refused, as for any query.
    ``limit``: the owner's time limit in seconds."""
    if ledger is None or metadata.budget is None:
        raise UnsupportedQuery(f"no privacy budget is declared in {metadata.source}: there is "
                               "no ledger to read (add [analysts.NAME])")
    if who in metadata.budget.owners:
        rows = view_rows(ledger.charges(), ledger.all_status())
    else:
        rows = view_rows(ledger.charges(who), [ledger.status(who)])  # unknown: refused
    return answer_ledger(read, rows, limit)


def warn(result: Result, status: BudgetStatus) -> None:
    """Add :func:`budget_warning` to a charged answer's notes when it applies."""
    warning = budget_warning(status)
    if warning is not None:
        result.notes.append(warning)
