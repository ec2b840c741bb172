"""A private aggregate used by the outer query: two releases, one charge.

BI tools send it. Superset's series limit joins the main query to its own top-n groups::

    SELECT category, COUNT(*) AS count FROM visits
    JOIN (SELECT category AS category__, COUNT(*) AS mme_inner__ FROM visits
          GROUP BY category ORDER BY mme_inner__ DESC LIMIT 5) AS series_limit
      ON category = category__
    GROUP BY category ORDER BY count DESC LIMIT 10000

and ``WHERE category IN (SELECT category FROM visits GROUP BY category ORDER BY COUNT(*)
DESC LIMIT 5)`` says the same. Both are answered as two private releases:

1. the inner aggregate is answered as any query is (noisy cells; its keys released by the
   public domain or by thresholding; its ORDER BY and LIMIT run on the noisy values, so they
   are post-processing). Its answer is then public;
2. the outer query is answered with the subquery replaced by the keys the inner released, as
   constants: ``WHERE category IN ('lab', 'dental', ...)``. The inner result holds each of its
   GROUP BY key tuples once, and the join equates the outer rows with its *full* key tuple,
   so every outer row matches at most one inner row: the inner join is exactly this filter,
   with no multiplicity to account for. A filter by public constants changes no sensitivity.
   When an outer GROUP BY key is the joined expression, the outer answer keeps only the
   released keys (post-processing; the join would have no other groups).

**Privacy.** Release 1 is (eps_1, delta_1)-DP; release 2, for any fixed value of release 1,
is (eps_2, delta_2)-DP; adaptive sequential composition makes the pair (eps_1 + eps_2,
delta_1 + delta_2)-DP (zCDP: the rhos add). The analyst's (epsilon, delta) is the query's
total: each release gets half. Both plans, and so the total cost, are fixed before anything
runs; the ledger is charged once, for the total, before the inner query runs
(:meth:`dpsql.Database.run`); a repeat of the same text reuses the stored final answer.

**Refused** (:class:`~dpsql.errors.UnsupportedQuery`, before any charge): joins on some of the
inner keys only or on its aggregates, LEFT/RIGHT/FULL/CROSS joins with an aggregate, more than
one aggregate subquery, subqueries that read the outer query's columns (correlated), and
outer queries that read the subquery's columns anywhere but in ON.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import cast

from sqlglot import exp

from dpsql.engines import Engine
from dpsql.errors import InternalError, UnsupportedQuery
from dpsql.execution.caveats import attach_caveats
from dpsql.execution.postprocess import Result, made_up_answer
from dpsql.execution.public import reads_only_public
from dpsql.execution.retention import Retention
from dpsql.explanation.explanation import Explanation
from dpsql.ledger.budget import Ledger
from dpsql.metadata.contribution import ContributionBounds
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.accounting import Cost, query_cost, total_cost
from dpsql.privacy.plan import Plan
from dpsql.query.joins import PublicRows
from dpsql.query.parse import parse
from dpsql.routes.pipeline import answer, engine_sql, explain, prepare_plan
from dpsql.routes.route import Answering, Measured, Route

#: Prepares one release (:meth:`dpsql.routes.planner.Planner.prepare`, cached).
Prepare = Callable[..., Plan]

_ALIAS = "__dpsql_series"
MAX_KEYS = 1000  # released keys the outer filter may list


@dataclass(frozen=True)
class Link:
    """One equality of the join: an outer expression (SQL text over the outer table) and the
    inner output column it equals."""

    outer: str
    column: int  # index of the inner answer's column


@dataclass(frozen=True)
class TwoReleases(Route):
    """The plan of a query that uses a private aggregate: the inner plan, the outer query with
    a marker where the keys go, and the outer plan for a stand-in list (cost and columns)."""

    inner: Plan
    outer: Plan  # planned with stand-in keys: the cost and the columns, never answered
    template: str  # the outer SQL; the predicate ``__dpsql_series`` is replaced by the keys
    links: tuple[Link, ...]
    in_list: bool  # WHERE x IN (subquery): NULL keys are kept (IN semantics)
    epsilon: float
    delta: float
    mechanism: str
    bounds: ContributionBounds | None = None  # the query's own contribution bounds

    as_written = False  # the outer query is answered as filtered by release 1's keys

    @property
    def cost_epsilon(self) -> float:
        return self.inner.cost_epsilon + self.outer.cost_epsilon

    @property
    def cost_delta(self) -> float:
        return self.inner.cost_delta + self.outer.cost_delta

    @property
    def output_names(self) -> list[str]:
        return self.outer.query.output_names

    @property
    def measured(self) -> tuple[Measured, ...]:
        """Release 1, followed by release 2 planned for the keys it gave (at most as many as
        it can release: :func:`_max_keys`), as :func:`answer_two` plans it."""
        def then(rows: Sequence[tuple[object, ...]], metadata: Metadata,
                 public: PublicRows | None) -> Measured:
            return Measured(self.second(rows[:_max_keys(self.inner)], metadata, public),
                            "release 2: ")
        return (Measured(self.inner, "release 1: ", then),)

    def second(self, rows: Sequence[tuple[object, ...]], metadata: Metadata,
               public: PublicRows | None) -> Plan:
        """The plan of release 2 when release 1 gave ``rows``: the outer query filtered by
        their keys (planned after the charge: :func:`_prepare_filled`), only the released
        groups kept (:func:`_released_groups_only`)."""
        keys = [tuple(row[link.column] for link in self.links) for row in rows]
        outer = _prepare_filled(_fill(self.template, self.links, keys, self.in_list),
                                metadata, public, self)
        return _released_groups_only(outer, self, keys)

    def cost(self, accounting: str) -> Cost:
        """The total of both releases (sequential composition; rhos add under zCDP)."""
        return total_cost([query_cost(self.inner, accounting),
                           query_cost(self.outer, accounting)])

    def check(self, engine: Engine, ledger: Ledger | None, analyst: str | None) -> None:
        for p in (self.inner, self.outer):
            engine_sql(p, engine)  # bound by the engine before any charge (cached)

    def answer(self, context: Answering) -> Result:
        return answer_two(self, context)

    def explain(self, engine: Engine | None) -> Explanation:
        return explain_two(self, engine)

    def columns(self) -> list[tuple[str, str]]:
        """Those of the outer query's answer."""
        return [(c.name, c.type) for c in made_up_answer(self.outer).columns]

    def caveats(self, result: Result, retention: Retention | None) -> None:
        attach_caveats(self.outer, result, retention)


def two_releases(tree: exp.Expression, metadata: Metadata, prepare: Prepare, epsilon: float,
                 delta: float, mechanism: str, bounds: ContributionBounds | None = None
                 ) -> TwoReleases | None:
    """The two-release plan of ``tree`` (the parsed query, which this mutates), or None when
    it holds no aggregate subquery in a JOIN or an IN (the private pipeline then answers or
    refuses it); both releases are prepared by ``prepare``."""
    if not isinstance(tree, exp.Select):
        return None  # the private pipeline's parse refuses it
    found = _find(tree, metadata)
    if found is None:
        return None
    inner_tree, links, in_list = _split(tree, *found)
    inner = prepare(inner_tree.sql(dialect="duckdb"), epsilon / 2, delta / 2, mechanism,
                    tree=inner_tree, bounds=bounds)
    names = [n.lower() for n in inner.query.output_names]
    resolved = tuple(_link(outer, column, names) for outer, column in links)
    _full_key_set(inner, resolved)
    template = tree.sql(dialect="duckdb")
    # As many stand-in keys as the inner can release: the cost model (dpsql.query.cost) sees the
    # longest filter the outer query can get, before anything is charged.
    stand_in = _fill(template, resolved, _stand_in(inner, resolved) * _max_keys(inner),
                     in_list, dedupe=False)
    outer = prepare(stand_in, epsilon / 2, delta / 2, mechanism, bounds=bounds)
    return TwoReleases(inner, outer, template, resolved, in_list, epsilon, delta, mechanism,
                       bounds)


def splits_in_two(tree: exp.Expression, metadata: Metadata) -> bool:
    """Whether :func:`two_releases` splits ``tree``: asked first on the planner's shared
    parsed tree, which this only reads (refuses as :func:`two_releases` would), so that the
    tree is copied only for a query that splits."""
    return isinstance(tree, exp.Select) and _find(tree, metadata) is not None


def _find(tree: exp.Select, metadata: Metadata) -> tuple[exp.Expression, exp.Select] | None:
    """The node holding a private aggregate subquery (a Join or an In) and that subquery. An
    aggregate of public tables only is public data, not a release: it is left to the passes."""
    found: list[tuple[exp.Expression, exp.Select]] = []
    for join in tree.args.get("joins") or []:
        body = join.this.this if isinstance(join.this, exp.Subquery) else None
        if isinstance(body, exp.Select) and _aggregates(body) and \
                not reads_only_public(body, metadata):
            found.append((join, body))
    for node in tree.find_all(exp.In):
        query = node.args.get("query")
        body = query.this if isinstance(query, exp.Subquery) else query
        if isinstance(body, exp.Select):
            inner = _from_subquery(body)
            if _aggregates(inner if inner is not None else body) and \
                    not reads_only_public(body, metadata):
                found.append((node, body))
    if len(found) > 1:
        raise UnsupportedQuery("the query uses more than one aggregate subquery; use one (as "
                               "a series limit does) or ask them separately")
    return found[0] if found else None


def _aggregates(select: exp.Select) -> bool:
    return bool(select.args.get("group")) or any(e.find(exp.AggFunc)
                                                 for e in select.expressions)


def _from_subquery(select: exp.Select) -> exp.Select | None:
    """``SELECT c FROM (inner) AS s``: the inner SELECT, when that is all the query does."""
    item = select.args.get("from_")
    item = item.this if item is not None else None
    plain = not any(select.args.get(k) for k in ("where", "group", "having", "joins",
                                                 "limit", "order", "with_"))
    if plain and isinstance(item, exp.Subquery) and isinstance(item.this, exp.Select):
        return item.this
    return None


def _split(tree: exp.Select, node: exp.Expression, body: exp.Select
           ) -> tuple[exp.Select, list[tuple[exp.Expression, str]], bool]:
    """Cut the subquery out of ``tree`` (replaced by the marker predicate), returning the
    inner SELECT and the (outer expression, inner column name) pairs."""
    if isinstance(node, exp.Join):
        links = _join_links(tree, node, body)
        node.pop()
        tree.where(exp.column(_ALIAS), copy=False)
        return body, links, False
    assert isinstance(node, exp.In)
    inner = _from_subquery(body)
    if len(body.expressions) != 1:
        raise UnsupportedQuery("x IN (SELECT ...) must select exactly one column")
    name = body.expressions[0].alias_or_name
    if inner is None:
        inner = body
    outer = node.this.copy()
    _not_correlated(inner, tree)
    node.replace(exp.column(_ALIAS))
    return inner, [(outer, name)], True


def _join_links(tree: exp.Select, join: exp.Join, body: exp.Select
                ) -> list[tuple[exp.Expression, str]]:
    if join.args.get("side") or join.args.get("kind") not in (None, "", "INNER") or \
            join.args.get("using") or join.args.get("method"):
        raise UnsupportedQuery(
            f"{join.sql(dialect='duckdb')[:60]}...: an aggregate subquery can only be INNER "
            "JOINed ON equalities with its GROUP BY keys (a series limit)")
    alias = join.this.alias.lower()
    inner_names = {e.alias_or_name.lower() for e in body.expressions}
    outer_names = _outer_names(tree)
    links = []
    for part in _conjuncts(join.args.get("on")):
        if not isinstance(part, exp.EQ):
            raise UnsupportedQuery(f"ON {part.sql(dialect='duckdb')}: join an aggregate "
                                   "subquery with equalities (outer column = subquery key)")
        sides = [_inner_column(s, alias, inner_names, outer_names) for s in (part.this,
                                                                             part.expression)]
        if (sides[0] is None) == (sides[1] is None):
            raise UnsupportedQuery(f"ON {part.sql(dialect='duckdb')}: each equality must "
                                   f"compare an outer column with a column of {alias!r}")
        outer = part.expression if sides[0] is not None else part.this
        name = sides[0] if sides[0] is not None else sides[1]
        assert name is not None
        links.append((outer.copy(), name))
    _not_correlated(body, tree)
    return links


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        raise UnsupportedQuery("a join with an aggregate subquery needs ON equalities")
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _outer_names(tree: exp.Select) -> set[str]:
    item = tree.args.get("from_")
    table = item.this if item is not None else None
    return {table.alias_or_name.lower(), table.name.lower()} if isinstance(table, exp.Table) \
        else set()


def _inner_column(node: exp.Expression, alias: str, inner: set[str],
                  outer: set[str]) -> str | None:
    """The subquery column ``node`` names, or None if it is an outer expression."""
    if not isinstance(node, exp.Column):
        return None
    qualifier = node.table.lower()
    if qualifier == alias or (not qualifier and node.name.lower() in inner):
        return node.name.lower()
    if qualifier and qualifier not in outer:
        raise UnsupportedQuery(f"{node.sql(dialect='duckdb')}: {node.table!r} is neither the "
                               f"table in FROM nor the subquery {alias!r}")
    return None


def _not_correlated(inner: exp.Select, outer: exp.Select) -> None:
    names = _outer_names(outer)
    inner_names = {t.alias_or_name.lower() for t in inner.find_all(exp.Table)}
    for column in inner.find_all(exp.Column):
        if column.table and column.table.lower() in names - inner_names:
            raise UnsupportedQuery(f"the subquery reads {column.sql(dialect='duckdb')} of the "
                                   "outer query (a correlated subquery), which is not "
                                   "supported; make the subquery stand on its own")


def _link(outer: exp.Expression, name: str, names: list[str]) -> Link:
    if name not in names:
        raise UnsupportedQuery(f"the subquery has no column {name!r}")
    return Link(outer.sql(dialect="duckdb"), names.index(name))


def _full_key_set(inner: Plan, links: tuple[Link, ...]) -> None:
    """Every link reads a released key of the inner query, and together they read all of
    them: the inner answer holds each key tuple once, so the join is a filter."""
    direct = []
    for link in links:
        item = inner.query.outer.expressions[link.column]
        node = item.this if isinstance(item, exp.Alias) else item
        if not (isinstance(node, exp.Column) and node.name.startswith("__k")):
            raise UnsupportedQuery(
                f"the join reads column {inner.query.output_names[link.column]!r} of the "
                "subquery, which is not one of its GROUP BY keys; join on its GROUP BY keys "
                "only")
        direct.append(node.name)
    if sorted(set(direct)) != sorted(k.name for k in inner.keys):
        raise UnsupportedQuery("the join must equate every GROUP BY key of the subquery (then "
                               "each outer row matches at most one of its rows); join on all "
                               "of them")
    if inner.query.outer.find(exp.Unnest, exp.Explode):
        raise UnsupportedQuery("the subquery's outer part must not produce several rows per "
                               "group")


def _stand_in(inner: Plan, links: tuple[Link, ...]) -> list[tuple[object, ...]]:
    """One made-up key tuple of the inner's types (no data): plans the outer query's shape."""
    rows = made_up_answer(inner).rows
    if rows:
        return [tuple(rows[0][link.column] for link in links)]
    return [tuple(_made_up(inner, link) for link in links)]


def _made_up(inner: Plan, link: Link) -> object:
    item = inner.query.outer.expressions[link.column]
    name = (item.this if isinstance(item, exp.Alias) else item).name
    key = next(k for k in inner.keys if k.name == name)
    values = [v for v in key.domain or () if v is not None]
    if values:
        return values[0]
    return {"int": 1, "float": 1.0, "bool": True, "date": dt.date(2000, 1, 1)}.get(
        key.bound.kind, "a")


def _max_keys(inner: Plan) -> int:
    """The most keys the inner can release: its LIMIT, or its public domain's size."""
    limit = inner.query.outer.args.get("limit")
    count = limit.expression if isinstance(limit, exp.Limit) else None
    bounds = [len(inner.domain)] if inner.domain is not None else []
    if isinstance(count, exp.Literal) and count.is_int:
        bounds.append(int(count.this))
    if not bounds or min(bounds) > MAX_KEYS:
        raise UnsupportedQuery(f"the subquery may release more than {MAX_KEYS} keys; give it "
                               f"a LIMIT of at most {MAX_KEYS} (a series limit has one)")
    return max(min(bounds), 1)


def _fill(template: str, links: tuple[Link, ...], keys: list[tuple[object, ...]],
          in_list: bool, dedupe: bool = True) -> str:
    """The outer SQL with the marker replaced by the filter on ``keys``."""
    if dedupe:
        keys = list(dict.fromkeys(keys))
    tree = parse(template)
    outers: list[exp.Expression] = [exp.maybe_parse(link.outer, dialect="duckdb")
                                    for link in links]
    if in_list:
        values = [_literal(k[0]) for k in keys]
        predicate: exp.Expression = exp.In(this=outers[0], expressions=values) if values \
            else exp.false()
    else:
        rows = [k for k in keys if all(v is not None for v in k)]
        predicate = cast(exp.Expression, exp.or_(
            *[exp.and_(*[exp.EQ(this=o.copy(), expression=_literal(v))
                         for o, v in zip(outers, row, strict=True)]) for row in rows])) \
            if rows else exp.false()
    for marker in list(tree.find_all(exp.Column)):
        if marker.name == _ALIAS and not marker.table:
            marker.replace(exp.Paren(this=predicate.copy()))
    return tree.sql(dialect="duckdb")


def _literal(value: object) -> exp.Expression:
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        return exp.Literal.number(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return exp.cast(exp.Literal.string(repr(value)), "DOUBLE")
        return exp.Literal.number(repr(value))
    if isinstance(value, dt.datetime):
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), "TIMESTAMP")
    if isinstance(value, dt.date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    return exp.Literal.string(str(value))


def answer_two(p: TwoReleases, context: Answering) -> Result:
    """Release the inner aggregate, then answer the outer query filtered by its keys (both
    drawing from the context's randomness)."""
    engine, rng = context.engine, context.rng
    released = answer(p.inner, engine, rng)
    outer = p.second(released.rows, context.metadata, context.public)
    if (outer.cost_epsilon, outer.cost_delta, outer.rho) != (
            p.outer.cost_epsilon, p.outer.cost_delta, p.outer.rho):
        raise InternalError("the outer query's cost changed with the released keys (a bug)")
    result = answer(outer, engine, rng)
    result.epsilon, result.delta = p.cost_epsilon, p.cost_delta
    return result


def _prepare_filled(sql: str, metadata: Metadata, public: PublicRows | None, p: TwoReleases
                    ) -> Plan:
    """The passes of :func:`dpsql.routes.pipeline.prepare_plan` (not cached) for the outer
    query with the released keys, after the charge, so nothing here may refuse for a reason the
    plan did not check: the cost model already saw :func:`_max_keys` stand-in keys, and the
    released keys' own text lengths are the owner's data, which the model leaves out by design
    (:mod:`dpsql.query.cost`)."""
    return prepare_plan(sql, metadata, public, p.epsilon / 2, p.delta / 2, p.mechanism,
                        bounds=p.bounds)


def _released_groups_only(outer: Plan, p: TwoReleases, keys: list[tuple[object, ...]]
                          ) -> Plan:
    """With one link whose outer expression is an outer GROUP BY key, keep only the groups
    the inner released (a public domain would list the others too, with noise alone)."""
    name = narrowed_key(outer, p)
    if name is None:
        return outer
    values = [_literal(k[0]) for k in dict.fromkeys(keys) if k[0] is not None]
    keep = exp.In(this=exp.column(name), expressions=values) if values else exp.false()
    query = outer.query.outer.copy().where(keep, copy=False)
    return replace(outer, query=replace(outer.query, outer=query))


def narrowed_key(outer: Plan, p: TwoReleases) -> str | None:
    """The outer GROUP BY key (``__k{i}``) that is the one joined column, if any."""
    if len(p.links) != 1:
        return None
    target = parse(f"SELECT {p.links[0].outer} FROM {_ALIAS}").expressions[0]
    return next((k.name for k in outer.keys if _same_column(k.expression, target)), None)


def _same_column(bound: exp.Expression, written: exp.Expression) -> bool:
    return isinstance(bound, exp.Column) and isinstance(written, exp.Column) and \
        bound.name.lower() == written.name.lower()


def explain_two(p: TwoReleases, engine: Engine | None = None) -> Explanation:
    """Both releases: the inner's cells, then the outer's (planned with a stand-in key, the
    same cost whatever keys the inner releases), and their total cost."""
    first, second = explain(p.inner, engine), explain(p.outer, engine)
    cells = [*(replace(c, output=f"release 1 (subquery): {c.output}") for c in first.cells),
             *(replace(c, output=f"release 2 (outer): {c.output}") for c in second.cells)]
    sql = (f"-- release 1, the subquery:\n{first.sql}\n-- release 2, the outer query, filtered "
           f"by the keys release 1 gives (shown with a stand-in key):\n{second.sql}")
    return Explanation(sql=sql, cells=cells,
                       key_release=f"release 1: {first.key_release}; release 2: "
                                   f"{second.key_release}" + (
                                       ", then only the keys release 1 gave are kept"
                                       if narrowed_key(p.outer, p) else ""),
                       epsilon=p.cost_epsilon, delta=p.cost_delta,
                       rows_per_unit=max(first.rows_per_unit, second.rows_per_unit),
                       groups_per_unit=max(first.groups_per_unit, second.groups_per_unit),
                       outputs=[*(replace(o, output=f"release 1 (subquery): {o.output}")
                                  for o in first.outputs),
                                *(replace(o, output=f"release 2 (outer): {o.output}")
                                  for o in second.outputs)])
