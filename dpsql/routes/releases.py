"""A composite query (:mod:`dpsql.query.composite`: a UNION of private queries, a private
query in a scalar subquery): separate releases, one charge, the rows combined.

**Privacy.** Each part is prepared exactly as if it had been sent alone (its clause read, its
parameters, its route: :meth:`dpsql.routes.planner.Planner.route`), so each part's release
is (eps_i, delta_i)-DP as that query's is (the neighbour harness checks each part's
measurements as any query's). The parts are answered one after the other on the same data; by
sequential composition the tuple of their answers is (sum eps_i, sum delta_i)-DP (zCDP: the
rhos add), and the cost of the whole is that sum (:meth:`Releases.cost`, by
:func:`dpsql.privacy.accounting.total_cost`), charged once, before anything runs, as any query's. A
part that reads public tables only, or whose answer is fixed by public information, costs nothing,
as alone. The rows are then combined by the query around the parts over their answers alone
(:mod:`dpsql.execution.combined`): post-processing, free. Every refusal -- of any part, or of the
whole -- happens while preparing, so nothing is charged when any part is refused.

**Refused parts** (besides each part's own refusals, which name the part): BigQuery's exact
query of a private table (a part without the clause where another has it), randomized local
rows (their label would be lost in the combination), a composite inside a part.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NoReturn

from sqlglot import exp

from dpsql.engines import Engine
from dpsql.errors import (
    EngineError,
    InvalidPrivacyParameter,
    QueryRefused,
    QueryTimeout,
    SQLSyntaxError,
    UnsupportedQuery,
)
from dpsql.execution.combined import combine
from dpsql.execution.free import empty_probe
from dpsql.execution.postprocess import Result, made_up_answer
from dpsql.execution.public import reads_only_public
from dpsql.execution.time_limits import Deadline
from dpsql.explanation.explanation import Explanation
from dpsql.ledger.budget import Ledger
from dpsql.ledger.spending import names_views
from dpsql.metadata.contribution import ContributionBounds
from dpsql.metadata.metadata import Metadata
from dpsql.metadata.owner_settings import QueryLimits
from dpsql.privacy.accounting import Cost, total_cost
from dpsql.privacy.plan import Plan
from dpsql.query.composite import Composite, Part, check_outer, outer_query, split
from dpsql.query.dates import fold_clock
from dpsql.query.dp_clause import DIALECT, resolve_tree
from dpsql.routes.exact import ExactRoute
from dpsql.routes.route import Answering, Measured, Route
from dpsql.routes.series import TwoReleases

#: Routes one resolved query (:meth:`dpsql.routes.planner.Planner.route`).
RouteOf = Callable[..., Route]


@dataclass(frozen=True)
class PreparedPart:
    part: Part
    route: Route  # public, free, one private plan or two releases: never local rows
    sql: str  # the part's text as routed: its clock read (fold_clock)

    @property
    def prepared(self) -> object:
        return self.route.prepared


@dataclass(frozen=True)
class Releases(Route):
    """The prepared composite: each part on its route; the whole's privacy parameters are the
    sums of the parts' (:meth:`cost` is what is charged)."""

    as_written = False  # each part released on its own, then combined

    composite: Composite
    parts: tuple[PreparedPart, ...]
    #: the owner's statement_timeout, which bounds the query around the parts
    #: (:mod:`dpsql.execution.combined`) and a part that reads public tables
    time_limit: float
    mechanism: str
    #: why the whole has no rows whatever the data (a ``LIMIT 0`` around the parts, as BI
    #: tools probe column types: :func:`dpsql.execution.free.empty_probe`), or None. Such a
    #: probe is answered with the columns only, its parts prepared (and refused) but never
    #: run: free, as any probe.
    probe: str | None = None

    def key_text(self, sql: str) -> str:
        """The stored answers' key of the composite ``sql``: its text and each part's text as
        routed, so that a part naming the clock (``CURRENT_DATE``) read on another day is
        another answer, as a single query's folded text is. A JSON list, so that no two
        different lists of texts (a text may hold any character) make the same key."""
        return json.dumps(["composite", sql, *(p.sql for p in self.parts)])

    @property
    def _private(self) -> tuple[PreparedPart, ...]:
        """The parts that read private data when the whole is answered (none for a probe)."""
        return () if self.probe is not None else tuple(p for p in self.parts
                                                       if p.route.charged)

    @property
    def charged(self) -> bool:  # type: ignore[override]
        return bool(self._private)  # else every part is free, or a probe

    @property
    def epsilon(self) -> float:  # type: ignore[override]
        return sum(p.route.cost_epsilon for p in self._private)

    @property
    def delta(self) -> float:  # type: ignore[override]
        return sum(p.route.cost_delta for p in self._private)

    @property
    def cost_epsilon(self) -> float:
        return self.epsilon

    @property
    def cost_delta(self) -> float:
        return self.delta

    @property
    def measured(self) -> tuple[Measured, ...]:
        """Each charged part's releases, as alone (what combines them is post-processing)."""
        return tuple(m for p in self._private for m in p.route.measured)

    @property
    def output_names(self) -> list[str]:
        names = [p.route.output_names for p in self.parts]
        return list(outer_query(self.composite, names).named_selects)

    def cost(self, accounting: str) -> Cost:
        """The sum of the parts' costs (sequential composition; rhos add under zCDP)."""
        return total_cost(p.route.cost(accounting) for p in self._private)

    def check(self, engine: Engine, ledger: Ledger | None, analyst: str | None) -> None:
        for part in self._private:  # a free part's check is its analyst's, below
            part.route.check(engine, ledger, analyst)
        if not self.charged and ledger is not None and analyst is not None:
            ledger.status(analyst)  # every part free: an analyst without a budget refused

    def answer(self, context: Answering) -> Result:
        """Each part's answer, as alone (its reports in its post-processing), then the rows
        combined; a probe's columns only, no part run."""
        if self.probe is not None:
            return combine(self.composite, _empty_answers(self), self.time_limit)
        limit = self._limit(context)
        return combine(self.composite, [_answer_part(p.route, context, limit, self.charged)
                                        for p in self.parts], limit)

    def _limit(self, context: Answering) -> float:
        """The owner's statement_timeout, lowered by a front door's own cap (the server's
        ``--statement-timeout``: ``context.limit``, :meth:`dpsql.database.Database._limit`),
        as for the parts that run on the engine."""
        return min(self.time_limit, context.limit) if context.limit > 0 else self.time_limit

    def explain(self, engine: Engine | None) -> Explanation:
        return explain_releases(self, engine)

    def columns(self) -> list[tuple[str, str]]:
        """From the parts' typed columns (no data read:
        :func:`dpsql.execution.postprocess.made_up_answer`), combined."""
        return [(c.name, c.type) for c in combine(self.composite, _empty_answers(self),
                                                  self.time_limit, checking=True).columns]


def _empty_answers(p: Releases) -> list[Result]:
    """Each part's answer with its columns and no rows (no data read): what the query around
    the parts is bound against before the charge, and the columns the server describes."""
    answers = []
    for part in p.parts:
        route = part.route
        plan = route.outer if isinstance(route, TwoReleases) else route.prepared
        if isinstance(plan, Plan):
            columns = made_up_answer(plan).columns
        else:
            assert isinstance(route, ExactRoute)  # a part is a plan, two releases or exact
            columns = list(route.result_columns)
        answers.append(Result(columns, [], []))
    return answers


def _answer_part(route: Route, context: Answering, limit: float, charged: bool) -> Result:
    """A part's answer, as alone. A part that reads public tables runs under the owner's time
    limit (as a public read sent alone: its work is not bounded otherwise, and the engine's
    deadline does not reach the public store)."""
    token = route.interrupts(context) if route.exact else None
    if token is None:
        return route.answer(context)
    deadline = Deadline(token, limit)
    try:
        return route.answer(context)
    except EngineError as e:
        if e.interrupted and deadline.fired:
            raise QueryTimeout(limit, charged=charged) from None
        raise
    finally:
        deadline.stop()


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


def prepare_releases(composite: Composite, route_of: RouteOf, metadata: Metadata,
                     epsilon: float, delta: float, mechanism: str,
                     bounds: ContributionBounds | None, parameters: object = None) -> Releases:
    """Every part routed by ``route_of`` as if sent alone, with the front door's ``epsilon``,
    ``delta`` and ``bounds`` where its clause gives none; every refusal here (module
    docstring), naming the part. A composite takes no ``parameters``."""
    if parameters:
        raise UnsupportedQuery("a UNION of private queries, or a private subquery, takes no "
                               "parameters; write the values in the query")
    check_outer(composite)
    prepared = []
    for part in composite.parts:
        try:
            prepared.append(_prepare(part, composite, route_of, metadata, epsilon, delta,
                                     mechanism, bounds))
        except QueryRefused as e:
            e.args = (f"{part.label}: {e.args[0] if e.args else ''}", *e.args[1:])
            if isinstance(e, SQLSyntaxError):
                e.position = None  # its offset is into the part, not into the query sent
            raise
    releases = Releases(composite, tuple(prepared), metadata.server.statement_timeout,
                        mechanism, empty_probe(composite.tree))
    _check_limits(releases, metadata.limits)
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
    route = part.route
    plan = route.outer if isinstance(route, TwoReleases) else route.prepared
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


def _prepare(part: Part, composite: Composite, route_of: RouteOf, metadata: Metadata,
             epsilon: float, delta: float, mechanism: str, bounds: ContributionBounds | None
             ) -> PreparedPart:
    clause = resolve_tree(part.tree.copy(), epsilon, delta, bounds)
    sql = fold_clock(clause.sql)
    epsilon = epsilon if clause.epsilon is None else clause.epsilon
    shown = part.tree.sql(dialect=DIALECT)[:160]
    if composite_of(sql, metadata) is not None:
        raise UnsupportedQuery(f"{shown} is itself a UNION of private queries or holds a "
                               "private subquery; ask it separately")
    # a report: answered by the part's post-processing
    route = route_of(sql, epsilon, clause.delta, mechanism, bounds=clause.bounds,
                     report=clause.report)
    if route.copy_table is not None:
        raise UnsupportedQuery(f"{shown} reads randomized local rows, which are not combined "
                               "with other answers; ask it alone")
    if route.charged and composite.clause and not part.clause:
        raise UnsupportedQuery(
            f"{shown} has no WITH DIFFERENTIAL_PRIVACY: beside a private query it is, as in "
            "BigQuery, an exact query of a private table, which dpsql never releases; write "
            "the clause in it too (it is then a private query of its own, charged as one), or "
            "ask it separately")
    return PreparedPart(part, route, sql)


def check_report_route(route: Route, report: bool) -> None:
    """Refuse ``report_format => 'JSON'`` in a query that is not one private release: a report
    shows the noise of an aggregate's released value (:mod:`dpsql.execution.reports`); a free
    answer (its columns only) passes."""
    if report and not route.reports:
        refuse_report_route()


def refuse_report_route() -> NoReturn:
    raise UnsupportedQuery("report_format => 'JSON' reports a noisy aggregate of one "
                           "private query; this query is answered otherwise (public "
                           "tables, local rows, two releases): remove report_format")


def explain_releases(p: Releases, engine: Engine | None = None) -> Explanation:
    """Each charged part's explanation, in order, and the total cost."""
    shown = [(part, part.route.explain(engine)) for part in p.parts if part.route.charged]
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
