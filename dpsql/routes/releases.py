"""A composite query (:mod:`dpsql.query.composite`: a UNION of private queries, a private
query in a scalar subquery): separate releases, one charge, the rows combined.

**Privacy.** Each part is prepared exactly as if it had been sent alone (its clause read, its
parameters, its path: :meth:`dpsql.routes.planner.Planner.prepare_query`), so each part's release is
(eps_i, delta_i)-DP as that query's is (the neighbour harness checks each part's measurements
as any query's). The parts are answered one after the other on the same data; by sequential
composition the tuple of their answers is (sum eps_i, sum delta_i)-DP (zCDP: the rhos add),
and the cost of the whole is that sum (:func:`releases_cost`, the arithmetic of
:func:`dpsql.ledger.budget.query_cost` and :func:`dpsql.routes.series.release_cost`), charged once,
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

from dpsql.engines import Engine
from dpsql.errors import QueryRefused, SQLSyntaxError, UnsupportedQuery
from dpsql.execution.combined import combine
from dpsql.execution.free import FreeAnswer, answer_free
from dpsql.execution.local_rows import LocalRead
from dpsql.execution.postprocess import Result, made_up_answer
from dpsql.execution.public import PublicRead, PublicStore, answer_public, reads_only_public
from dpsql.ledger.budget import Cost, query_cost
from dpsql.ledger.spending import names_views
from dpsql.metadata.contribution import ContributionBounds
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.plan import Plan
from dpsql.privacy.randomness import Randomness
from dpsql.query.composite import Composite, Part, check_outer, outer_query, split
from dpsql.query.dates import fold_clock
from dpsql.query.dp_clause import DIALECT, resolve_tree
from dpsql.routes.pipeline import Explanation, answer, explain
from dpsql.routes.series import TwoReleases, answer_two, explain_two, release_cost

if TYPE_CHECKING:
    from dpsql.routes.planner import Planner

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

    @property
    def epsilon(self) -> float:
        return sum(_epsilon(p.prepared) for p in self.parts)

    @property
    def delta(self) -> float:
        return sum(_delta(p.prepared) for p in self.parts)

    @property
    def cost_epsilon(self) -> float:
        return self.epsilon

    @property
    def cost_delta(self) -> float:
        return self.delta

    @property
    def charged(self) -> tuple[Plan | TwoReleases, ...]:
        return tuple(p.prepared for p in self.parts
                     if isinstance(p.prepared, Plan | TwoReleases))

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
    return Releases(composite, tuple(prepared), mechanism)


def _prepare(part: Part, composite: Composite, planner: Planner, epsilon: float, delta: float,
             mechanism: str, bounds: ContributionBounds | None) -> PreparedPart:
    clause = resolve_tree(part.tree.copy(), epsilon, delta, bounds)
    sql = fold_clock(clause.sql)
    p = planner.prepare_query(sql, epsilon if clause.epsilon is None else clause.epsilon,
                              clause.delta, mechanism, bounds=clause.bounds)
    check_report_route(p, clause.report)  # a report: answered by the part's post-processing
    shown = part.tree.sql(dialect=DIALECT)[:160]
    if isinstance(p, LocalRead):
        raise UnsupportedQuery(f"{shown} reads randomized local rows, which are not combined "
                               "with other answers; ask it alone")
    if isinstance(p, Plan | TwoReleases) and composite.clause and not part.clause:
        raise UnsupportedQuery(
            f"{shown} has no WITH DIFFERENTIAL_PRIVACY: beside a private query it is, as in "
            "BigQuery, an exact query of a private table, which dpsql never releases; write "
            "the clause in it too (it is then a private query of its own, charged as one), or "
            "ask it separately")
    assert not isinstance(p, LocalRead)
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
    combined."""
    answers = []
    for part in p.parts:
        q = part.prepared
        if isinstance(q, TwoReleases):
            result = answer_two(q, engine, planner, rng)
        elif isinstance(q, PublicRead):
            store = planner.public_store
            assert isinstance(store, PublicStore)  # a public read was prepared with one
            result = answer_public(q, store.cursor())
        elif isinstance(q, FreeAnswer):
            result = answer_free(q, rng)
        else:
            result = answer(q, engine, rng)
        answers.append(result)
    return combine(p.composite, answers)


def made_up_columns(p: Releases) -> list[tuple[str, str]]:
    """(name, DuckDB type) of each column of the answer, from made-up part answers (no data
    read: :func:`dpsql.execution.postprocess.made_up_answer`): the server's Describe."""
    answers = []
    for part in p.parts:
        q = part.prepared
        plan = q.outer if isinstance(q, TwoReleases) else q
        made = made_up_answer(plan) if isinstance(plan, Plan) else \
            Result(list(plan.columns), [], [])
        answers.append(made)
    return [(c.name, c.type) for c in combine(p.composite, answers).columns]


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
