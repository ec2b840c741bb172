"""The planner of one database: where every query is prepared, and its plans are cached.

A plan depends on the SQL, the privacy parameters, the metadata and, for a join with a public
table, on that table's data: its multiplicities, key domains and bounds (:mod:`dpsql.query.joins`),
read from the database's :class:`~dpsql.execution.public.PublicStore`. So a plan cache belongs to
one (metadata, public store) pair, and that pair is a :class:`Planner`: each
:class:`~dpsql.database.Database` owns one, and two databases sharing one
:class:`~dpsql.metadata.metadata.Metadata` over different data plan apart. The metadata stays a
plain value.

:meth:`Planner.route` picks the route of a query (:class:`~dpsql.routes.route.Route`), the
one place that chooses:

* :class:`~dpsql.routes.exact.LedgerRoute`: the query reads the ledger views
  (``dpsql.spending``, ...) only: exact and free, answered with the asking analyst's own ledger
  rows (no private data);
* :class:`~dpsql.routes.exact.PublicRoute`: the query reads public tables only (exact, free);
* :class:`~dpsql.routes.exact.FreeRoute`: the answer is fixed by public information (an empty
  probe: ``LIMIT 0`` or a constant-false WHERE; or a public domain with no aggregate): exact,
  free;
* :class:`~dpsql.routes.local.LocalRoute`: a row-level SELECT of a table the owner opted in to
  local DP (randomized rows, charged once per analyst and table for their stored copy:
  :mod:`dpsql.privacy.local`, :func:`dpsql.routes.local.answer_from_stored_copy`);
* :class:`~dpsql.routes.series.TwoReleases`: the query uses a private aggregate subquery (a
  series limit): two private releases, one charge;
* :class:`~dpsql.routes.releases.Releases`: a UNION of private queries or a private scalar
  subquery (:mod:`dpsql.query.composite`): each part routed here as if sent alone, one charge
  (the caller finds the composite, before it reads the clause:
  :func:`~dpsql.routes.releases.composite_of`);
* :class:`~dpsql.routes.private.PrivatePlan`: everything else, the private passes
  (:meth:`Planner.prepare`, :func:`dpsql.routes.pipeline.prepare_plan`).

The query is parsed once (by the caller, or here on a cache miss); each path reads that tree,
and only one that changes a tree (the private passes, a split into two releases) copies it.
The clock is read first, by the caller (:func:`dpsql.query.dates.fold_clock`): every cache
below is keyed by the folded text, so a plan made at one instant is never reused at another.
Plans and routes depend only on the SQL text, the privacy parameters and this planner's
metadata and public data, never on private data, so they are cached in a locked LRU
(:mod:`dpsql.cache`; BI tools repeat their queries: a repeated query's route is one lookup)
and never mutated: randomness enters only when a route is answered. Refusals are not cached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from sqlglot import exp

from dpsql.cache import LRU
from dpsql.errors import QueryRefused
from dpsql.execution.free import FreeAnswer, empty_probe, probe, public_domain
from dpsql.execution.local_rows import LocalRead, local_read
from dpsql.execution.public import PublicRead, public_read
from dpsql.ledger.spending import SCHEMA, LedgerRead, ledger_read
from dpsql.metadata.contribution import ContributionBounds
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.mechanisms import validate_privacy_parameters
from dpsql.privacy.plan import Plan
from dpsql.query.dates import fold_clock
from dpsql.query.dp_clause import REPORT, resolve_query
from dpsql.query.joins import PublicRows
from dpsql.query.parse import parse_query
from dpsql.routes.exact import free_route, ledger_route, public_route
from dpsql.routes.local import local_route
from dpsql.routes.pipeline import prepare_plan
from dpsql.routes.private import PrivatePlan
from dpsql.routes.releases import (
    Releases,
    check_report_route,
    composite_of,
    prepare_releases,
    refuse_report_route,
)
from dpsql.routes.route import Route
from dpsql.routes.series import TwoReleases, splits_in_two, two_releases
from dpsql.routes.templates import Reused, Templates

PLAN_CACHE_SIZE = 512  # prepared plans (and routes) kept per planner

Prepared = Plan | PublicRead | TwoReleases | FreeAnswer | LocalRead | LedgerRead




class Planner:
    """Prepares queries against ``metadata``, reading public tables from ``public_store`` (None:
    no data opened; a join with a public table is then refused), and caches what it prepared.
    Shared by threads."""

    def __init__(self, metadata: Metadata, public_store: PublicRows | None = None,
                 cache_size: int | None = None) -> None:
        self.metadata = metadata
        self.public_store = public_store
        self.plans: LRU[tuple[object, ...], Any] = LRU(
            PLAN_CACHE_SIZE if cache_size is None else cache_size)
        # Plans reused for texts that differ in opaque constants only (dpsql.routes.templates)
        self.templates = Templates(metadata, public_store)

    def prepare_query(self, sql: str, epsilon: float = 1.0, delta: float = 0.0,
                      mechanism: str = "laplace", *, tree: exp.Expression | None = None,
                      bounds: ContributionBounds | None = None) -> Prepared | Releases:
        """What :meth:`route` prepares for the SQL text as sent (BigQuery's clause and the
        clock not yet read): the planner's own object (a :class:`~dpsql.privacy.plan.Plan`,
        a public read, ...). ``tree``, when the caller has it, is ``sql`` parsed
        (:func:`dpsql.query.parse.parse_query`): it is then not parsed again, and never mutated.
        ``bounds``: the query's own contribution bounds; BigQuery's ``WITH
        DIFFERENTIAL_PRIVACY OPTIONS`` in ``sql`` overrides them and the privacy parameters
        (:mod:`dpsql.query.dp_clause`). :class:`~dpsql.database.Database` reads the clause and
        the clock itself, before it parses the text, and asks :meth:`route`."""
        return cast("Prepared | Releases", self.route_query(
            sql, epsilon, delta, mechanism, tree=tree, bounds=bounds).prepared)

    def route_query(self, sql: str, epsilon: float = 1.0, delta: float = 0.0,
                    mechanism: str = "laplace", *, tree: exp.Expression | None = None,
                    bounds: ContributionBounds | None = None) -> Route:
        """The route of the SQL text as sent, as for :meth:`prepare_query` (which returns
        what it prepared)."""
        composite = composite_of(sql, self.metadata)  # a UNION of private queries, ...
        if composite is not None:
            return prepare_releases(composite, self.route, self.metadata, epsilon, delta,
                                    mechanism, bounds)
        clause = resolve_query(sql, epsilon, delta, bounds)
        folded = fold_clock(clause.sql)
        return self.route(folded, epsilon if clause.epsilon is None else clause.epsilon,
                          clause.delta, mechanism, tree=tree if folded == sql else None,
                          bounds=clause.bounds, report=clause.report)

    def route(self, sql: str, epsilon: float, delta: float, mechanism: str, *,
              tree: exp.Expression | None = None, bounds: ContributionBounds | None = None,
              report: bool = False) -> Route:
        """The route of ``sql`` (module docstring): its clause already read and its clock
        folded (:func:`dpsql.query.dates.fold_clock`), ``tree`` its parse if the caller has
        one. Every refusal happens here, nothing read or charged; a ``report_format`` report
        (``report``) is refused on a route that is not one private release."""
        validate_privacy_parameters(epsilon, delta, mechanism, self.metadata.limits)
        route = self._route(sql, epsilon, delta, mechanism, tree, bounds)
        check_report_route(route, report)
        return route

    def reuse(self, sql: str, epsilon: float, delta: float, mechanism: str,
              bounds: ContributionBounds | None, report: bool) -> Reused | None:
        """The route of a text never planned (its clause read, its clock folded) that differs
        from one planned before in opaque constants only, by reusing that one's plan
        (:mod:`dpsql.routes.templates`), or None: :meth:`route` it. Cached as :meth:`route`
        caches, so the same text again is one lookup."""
        # Before the cache, as in route: True == 1, so an invalid epsilon would find a key.
        validate_privacy_parameters(epsilon, delta, mechanism, self.metadata.limits)
        reused = self.templates.reuse(sql, (epsilon, delta, mechanism, bounds, report))
        if reused is not None:
            self.plans.put(("route", reused.normalised, epsilon, delta, mechanism, bounds),
                           reused.route)
        return reused

    def learn(self, sql: str, tree: exp.Expression, normalised: str, key_text: str,
              route: Route, epsilon: float, delta: float, mechanism: str,
              bounds: ContributionBounds | None, report: bool) -> None:
        """Keep ``route``, routed from scratch for the new text ``sql``, for :meth:`reuse`."""
        self.templates.learn(sql, tree, normalised, key_text, route, bounds,
                             (epsilon, delta, mechanism, bounds, report))

    def _route(self, sql: str, epsilon: float, delta: float, mechanism: str,
               tree: exp.Expression | None, bounds: ContributionBounds | None) -> Route:
        """The route of ``sql``, chosen once per text and privacy parameters and cached: a
        repeated query is one lookup."""
        return cast(Route, self.plans.get_or_compute(
            ("route", sql, epsilon, delta, mechanism, bounds),
            lambda: self._choose(sql, epsilon, delta, mechanism, tree, bounds)))

    def _choose(self, sql: str, epsilon: float, delta: float, mechanism: str,
                tree: exp.Expression | None, bounds: ContributionBounds | None) -> Route:
        parsed: list[exp.Expression] = [] if tree is None else [tree]

        def shared() -> exp.Expression:
            """The parsed query, read by the routes below, never mutated (a copy of a tree
            costs about as much as its parse: only a path that mutates one takes one)."""
            if not parsed:
                parsed.append(parse_query(sql))
            return parsed[0]

        tries: list[Callable[[], Route | None]] = [
            lambda: public_route(self._public(shared)),
            lambda: free_route(self._probe(sql, shared, epsilon, delta, mechanism, bounds)),
            lambda: local_route(self._local(shared)),
            lambda: self._series(shared, epsilon, delta, mechanism, bounds)]
        if SCHEMA in sql.lower():  # a ledger view is named dpsql.NAME: else nothing to parse
            tries.insert(0, lambda: ledger_route(ledger_read(
                shared(), self.metadata.server.statement_timeout)))
        for attempt in tries:  # the first route that takes the query
            found = attempt()
            if found is not None:
                return found
        p = self.prepare(sql, epsilon, delta, mechanism, tree=parsed[0] if parsed else None,
                         bounds=bounds)
        domain = None if p.measurements else free_route(public_domain(sql, p))
        return PrivatePlan(p) if domain is None else domain

    def _probe(self, sql: str, parsed: Callable[[], exp.Expression], epsilon: float,
               delta: float, mechanism: str, bounds: ContributionBounds | None
               ) -> FreeAnswer | None:
        """An empty probe's free answer (:func:`dpsql.execution.free.probe`), or None for any other
        query. A text that does not parse is refused here as the private parse pass would."""
        why = empty_probe(parsed())  # reads the shared tree
        if why is None:
            return None
        tree = parsed().copy()
        try:
            planned = self.prepare(sql, epsilon, delta, mechanism, tree=tree, bounds=bounds)
        except QueryRefused as refused:
            return probe(sql, tree, why, self.metadata, None, refused)  # type: ignore[arg-type]
        return probe(sql, tree, why, self.metadata, planned, None)  # type: ignore[arg-type]

    def _series(self, parsed: Callable[[], exp.Expression], epsilon: float, delta: float,
                mechanism: str, bounds: ContributionBounds | None) -> TwoReleases | None:
        if not splits_in_two(parsed(), self.metadata):  # reads the shared tree
            return None
        return two_releases(parsed().copy(), self.metadata, self.prepare, epsilon, delta,
                            mechanism, bounds)

    def _local(self, parsed: Callable[[], exp.Expression]) -> LocalRead | None:
        if not any(t.local is not None for t in self.metadata.tables.values()):
            return None  # no table opted in to local rows: nothing to parse for this route
        return local_read(parsed(), self.metadata)  # reads it, copies what it keeps

    def _public(self, parsed: Callable[[], exp.Expression]) -> PublicRead | None:
        if not any(t.public for t in self.metadata.tables.values()):
            return None  # no public table: nothing to parse for this route
        # A text that does not parse is refused here as the private parse pass would.
        try:
            return public_read(parsed(), self.metadata)  # reads the tree, keeps its text
        except QueryRefused:
            if any(str(n.this).upper() == REPORT for n in parsed().find_all(exp.Anonymous)):
                refuse_report_route()  # its dry run fails on the report (a private query's)
            raise

    def prepare(self, sql: str, epsilon: float = 1.0, delta: float = 0.0,
                mechanism: str = "laplace", dialect: str = "duckdb", *,
                tree: exp.Expression | None = None,
                bounds: ContributionBounds | None = None) -> Plan:
        """The private passes, parse to plan (:func:`dpsql.routes.pipeline.prepare_plan`): every
        refusal, no private data read. ``tree`` as for :meth:`prepare_query`."""
        # Before the cache: True == 1 and Decimal(1) == 1.0, so an invalid parameter would
        # otherwise find the plan cached for a valid one.
        validate_privacy_parameters(epsilon, delta, mechanism, self.metadata.limits)
        key = ("plan", sql, epsilon, delta, mechanism, dialect, bounds)
        result: Plan = self.plans.get_or_compute(key, lambda: prepare_plan(
            sql if tree is None else tree.copy(), self.metadata, self.public_store, epsilon,
            delta, mechanism, dialect, bounds))
        return result
