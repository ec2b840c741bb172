"""A composite query (:mod:`dpsql.query.composite`: a UNION of private queries, a private
query in a scalar subquery): separate releases, one charge, the rows combined.

**Privacy.** Each part is prepared exactly as if it had been sent alone (its clause read, its
parameters, its path: :meth:`dpsql.planner.Planner.prepare_query`), so each part's release is
(eps_i, delta_i)-DP as that query's is (the neighbour harness checks each part's measurements
as any query's). The parts are answered one after the other on the same data; by sequential
composition the tuple of their answers is (sum eps_i, sum delta_i)-DP (zCDP: the rhos add),
and the cost of the whole is that sum (:func:`releases_cost`, the arithmetic of
:func:`dpsql.ledger.budget.query_cost` and :func:`dpsql.series.release_cost`), charged once,
before anything runs, as any query's. A part that reads public tables only, or whose answer
is fixed by public information, costs nothing, as alone. The rows are then combined by the
query around the parts over their answers alone (:mod:`dpsql.execution.combined`):
post-processing, free. Every refusal -- of any part, or of the whole -- happens while
preparing, so nothing is charged when any part is refused.

**Refused parts** (besides each part's own refusals, which name the part): BigQuery's exact
query of a private table (a part without the clause where another has it), randomized local
rows (their label would be lost in the combination), a composite inside a part.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NoReturn

from sqlglot import exp

from dpsql.engines import CursorCancel, Engine
from dpsql.errors import (
    EngineError,
    InvalidPrivacyParameter,
    QueryRefused,
    QueryTimeout,
    SQLSyntaxError,
    UnsupportedQuery,
)
from dpsql.execution.combined import combine
from dpsql.execution.free import FreeAnswer, answer_free, empty_probe
from dpsql.execution.local_rows import LocalRead
from dpsql.execution.postprocess import Result, made_up_answer
from dpsql.execution.public import PublicRead, PublicStore, answer_public, reads_only_public
from dpsql.execution.time_limits import Deadline
from dpsql.ledger.budget import Cost, query_cost
from dpsql.ledger.spending import LedgerRead, names_views
from dpsql.metadata.contribution import ContributionBounds
from dpsql.metadata.metadata import Metadata
from dpsql.metadata.owner_settings import QueryLimits
from dpsql.pipeline import Explanation, answer, explain
from dpsql.privacy.plan import Plan
from dpsql.privacy.randomness import Randomness
from dpsql.query.composite import Composite, Part, check_outer, outer_query, split
from dpsql.query.dates import fold_clock
from dpsql.query.dp_clause import DIALECT, resolve_tree
from dpsql.series import TwoReleases, answer_two, explain_two, release_cost

if TYPE_CHECKING:
    from dpsql.planner import Planner

#: What one part may be prepared as.
PartRoute = Plan | TwoReleases | PublicRead | FreeAnswer


@dataclass(frozen=True)
class PreparedPart:
    part: Part
    prepared: PartRoute


@dataclass(frozen=True)
class Releases:
    """The prepared composite: each part on its path; the whole's privacy parameters are the
    sums of the parts' (:func:`releases_cost` is what is charged)."""

    composite: Composite
    parts: tuple[PreparedPart, ...]
    mechanism: str
    #: the owner's statement_timeout, which bounds the query around the parts
    #: (:mod:`dpsql.execution.combined`)
    time_limit: float
    #: why the whole has no rows whatever the data (a ``LIMIT 0`` around the parts, as BI
    #: tools probe column types: :func:`dpsql.execution.free.empty_probe`), or None. Such a
    #: probe is answered with the columns only, its parts prepared (and refused) but never
    #: run: free, as any probe.
    probe: str | None = None

    @property
    def epsilon(self) -> float:
        return sum(_epsilon(p.prepared) for p in self.parts) if self.probe is None else 0.0

    @property
    def delta(self) -> float:
        return sum(_delta(p.prepared) for p in self.parts) if self.probe is None else 0.0

    @property
    def cost_epsilon(self) -> float:
        return self.epsilon

    @property
    def cost_delta(self) -> float:
        return self.delta

    @property
    def charged(self) -> tuple[Plan | TwoReleases, ...]:
        """The parts that read private data when the whole is answered (none for a probe)."""
        return tuple(p.prepared for p in self.parts if self.probe is None and
                     isinstance(p.prepared, Plan | TwoReleases))

    @property
    def output_names(self) -> list[str]:
        names = [p.prepared.output_names if not isinstance(p.prepared, Plan)
                 else p.prepared.query.output_names for p in self.parts]
        return list(outer_query(self.composite, names).named_selects)


def _epsilon(p: PartRoute) -> float:
    return p.cost_epsilon if isinstance(p, Plan | TwoReleases) else 0.0


def _delta(p: PartRoute) -> float:
    return p.cost_delta if isinstance(p, Plan | TwoReleases) else 0.0


def composite_of(sql: str, metadata: Metadata) -> Composite | None:
    """The composite ``sql`` is (:func:`dpsql.query.composite.split`), or None; a UNION that
    reads public tables only is none: it is read exactly (:mod:`dpsql.execution.public`); so is
    a query of the ledger views (:mod:`dpsql.ledger.spending`: read alone, or refused)."""
    composite = split(sql)
    if composite is None or names_views(composite.tree) or (
            composite.union and not composite.clause and
            reads_only_public(composite.tree, metadata)):
        return None
    return composite


def prepare_releases(composite: Composite, planner: Planner, epsilon: float, delta: float,
                     mechanism: str, bounds: ContributionBounds | None,
                     parameters: object = None) -> Releases:
    """Every part prepared by ``planner`` as if sent alone, with the front door's ``epsilon``,
    ``delta`` and ``bounds`` where its clause gives none; every refusal here (module
    docstring), naming the part. A composite takes no ``parameters``."""
    if parameters:
        raise UnsupportedQuery("a UNION of private queries, or a private subquery, takes no "
                               "parameters; write the values in the query")
    check_outer(composite)
    prepared = []
    for part in composite.parts:
        try:
            prepared.append(_prepare(part, composite, planner, epsilon, delta, mechanism,
                                     bounds))
        except QueryRefused as e:
            e.args = (f"{part.label}: {e.args[0] if e.args else ''}", *e.args[1:])
            if isinstance(e, SQLSyntaxError):
                e.position = None  # its offset is into the part, not into the query sent
            raise
    releases = Releases(composite, tuple(prepared), mechanism,
                        planner.metadata.server.statement_timeout, empty_probe(composite.tree))
    _check_limits(releases, planner.metadata.limits)
    if not composite.union:
        for one in prepared:
            _check_one_row(one)
    combine(composite, _empty_answers(releases), releases.time_limit, checking=True)
    return releases


def _check_limits(p: Releases, limits: QueryLimits) -> None:
    """The owner's per-query limits bound the whole: one query's parts are one query's
    release, charged as one (sequential composition), so their sum, not each part, is what
    ``[budget] max_query_epsilon`` and ``max_query_delta`` cap."""
    if p.epsilon > limits.max_epsilon or p.delta > limits.max_delta:
        raise InvalidPrivacyParameter(
            f"the parts of this query ask for epsilon {p.epsilon:g} and delta {p.delta:g} in "
            f"all, beyond the data owner's per-query limits ([budget] max_query_epsilon "
            f"{limits.max_epsilon:g}, max_query_delta {limits.max_delta:g}); lower the parts' "
            "epsilon and delta, or ask the parts in separate queries")


def _check_one_row(part: PreparedPart) -> None:
    """A private scalar subquery returns at most one row whatever the data: without GROUP BY,
    or with a LIMIT of 1. Grouped, its number of rows is the number of released keys (a
    thresholded count: known only after the charge), and a second row would fail the query
    after its charge."""
    q = part.prepared
    plan = q.outer if isinstance(q, TwoReleases) else q
    if not isinstance(plan, Plan) or not plan.keys:
        return
    limit = part.part.tree.args.get("limit")
    value = limit.expression if isinstance(limit, exp.Limit) else None
    if isinstance(value, exp.Literal) and value.is_int and int(value.this) <= 1:
        return
    raise UnsupportedQuery(
        f"{part.part.label} has a GROUP BY: it returns one row per released group, and a "
        "scalar subquery must return one row whatever the data; add LIMIT 1 "
        "(with an ORDER BY), remove the GROUP BY, or read the groups in FROM")


def _empty_answers(p: Releases) -> list[Result]:
    """Each part's answer with its columns and no rows (no data read): what the query around
    the parts is bound against before the charge, and the columns the server describes."""
    answers = []
    for part in p.parts:
        q = part.prepared
        plan = q.outer if isinstance(q, TwoReleases) else q
        columns = made_up_answer(plan).columns if isinstance(plan, Plan) else list(
            plan.columns)
        answers.append(Result(columns, [], []))
    return answers


def _prepare(part: Part, composite: Composite, planner: Planner, epsilon: float, delta: float,
             mechanism: str, bounds: ContributionBounds | None) -> PreparedPart:
    clause = resolve_tree(part.tree.copy(), epsilon, delta, bounds)
    sql = fold_clock(clause.sql)
    p = planner.prepare_query(sql, epsilon if clause.epsilon is None else clause.epsilon,
                              clause.delta, mechanism, bounds=clause.bounds)
    check_report_route(p, clause.report)  # a report: answered by the part's post-processing
    shown = part.tree.sql(dialect=DIALECT)[:160]
    if isinstance(p, Releases):  # split already refuses nesting; never charged as free
        raise UnsupportedQuery(f"{shown} holds private queries of its own; ask it alone")
    if isinstance(p, LocalRead):
        raise UnsupportedQuery(f"{shown} reads randomized local rows, which are not combined "
                               "with other answers; ask it alone")
    if isinstance(p, Plan | TwoReleases) and composite.clause and not part.clause:
        raise UnsupportedQuery(
            f"{shown} has no WITH DIFFERENTIAL_PRIVACY: beside a private query it is, as in "
            "BigQuery, an exact query of a private table, which dpsql never releases; write "
            "the clause in it too (it is then a private query of its own, charged as one), or "
            "ask it separately")
    assert not isinstance(p, LocalRead | LedgerRead)  # a ledger view: composite_of said none
    return PreparedPart(part, p)


def check_report_route(p: object, report: bool) -> None:
    """Refuse ``report_format => 'JSON'`` in a query that is not one private release: a report
    shows the noise of an aggregate's released value (:mod:`dpsql.execution.reports`); a free
    answer (its columns only) passes."""
    if report and not isinstance(p, Plan | FreeAnswer):
        refuse_report_route()


def refuse_report_route() -> NoReturn:
    raise UnsupportedQuery("report_format => 'JSON' reports a noisy aggregate of one "
                           "private query; this query is answered otherwise (public "
                           "tables, local rows, two releases): remove report_format")


def releases_cost(p: Releases, accounting: str) -> Cost:
    """The sum of the parts' costs (sequential composition; rhos add under zCDP)."""
    costs = [release_cost(q, accounting) if isinstance(q, TwoReleases)
             else query_cost(q, accounting) for q in p.charged]
    return Cost(sum(c.epsilon for c in costs), sum(c.delta for c in costs),
                sum(c.rho for c in costs))


def answer_releases(p: Releases, engine: Engine, planner: Planner, rng: Randomness) -> Result:
    """Each part's answer, as alone (its reports in its post-processing), then the rows
    combined; a probe's columns only, no part run."""
    if p.probe is not None:
        return combine(p.composite, _empty_answers(p), p.time_limit)
    answers = []
    for part in p.parts:
        q = part.prepared
        if isinstance(q, TwoReleases):
            result = answer_two(q, engine, planner, rng)
        elif isinstance(q, PublicRead):
            store = planner.public_store
            assert isinstance(store, PublicStore)  # a public read was prepared with one
            result = _public_part(q, store, p.time_limit, bool(p.charged))
        elif isinstance(q, FreeAnswer):
            result = answer_free(q, rng)
        else:
            result = answer(q, engine, rng)
        answers.append(result)
    return combine(p.composite, answers, p.time_limit)


def _public_part(q: PublicRead, store: PublicStore, limit: float, charged: bool) -> Result:
    """A part that reads public tables, exactly, under the owner's time limit (as a public
    read sent alone: its work is not bounded otherwise, and the engine's deadline does not
    reach the public store)."""
    cursor = store.cursor()
    deadline = Deadline(CursorCancel(cursor), limit)
    try:
        return answer_public(q, cursor)
    except EngineError as e:
        if e.interrupted and deadline.fired:
            raise QueryTimeout(limit, charged=charged) from None
        raise
    finally:
        deadline.stop()


def made_up_columns(p: Releases) -> list[tuple[str, str]]:
    """(name, DuckDB type) of each column of the answer, from the parts' typed columns (no
    data read: :func:`dpsql.execution.postprocess.made_up_answer`): the server's Describe."""
    return [(c.name, c.type) for c in combine(p.composite, _empty_answers(p), p.time_limit,
                                              checking=True).columns]


def explain_releases(p: Releases, engine: Engine | None = None) -> Explanation:
    """Each charged part's explanation, in order, and the total cost."""
    shown = [(part, explain_two(q, engine) if isinstance(q, TwoReleases) else explain(q, engine))
             for part in p.parts if isinstance(q := part.prepared, Plan | TwoReleases)]
    cells = [replace(c, output=f"{part.part.label}: {c.output}")
             for part, e in shown for c in e.cells]
    sql = "\n".join(f"-- {part.part.label}:\n{e.sql}" for part, e in shown)
    return Explanation(
        sql=sql, cells=cells, key_release="; ".join(f"{part.part.label}: {e.key_release}"
                                                    for part, e in shown) +
        "; then the rows combined by the query around them (post-processing)",
        epsilon=p.epsilon, delta=p.delta,
        rows_per_unit=max((e.rows_per_unit for _, e in shown), default=0),
        groups_per_unit=max((e.groups_per_unit for _, e in shown), default=0))
