"""Private queries inside a larger query: a ``UNION [ALL]`` whose arms are private queries, and
BigQuery's private query in a scalar subquery, answered as separate releases whose rows a
query over them alone combines (post-processing).

    SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6) COUNT(*) FROM a
    UNION ALL
    SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6) COUNT(*) FROM b

    SELECT ABS((SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6)
                AVG(x) FROM t) - 2) < 0.01

:func:`split` finds the *parts* (each arm of the UNION; each scalar subquery holding the clause)
and :func:`outer_query` writes the query that combines their answers: the UNION with each arm
replaced by ``SELECT ... FROM __release_i``, or the outer SELECT with each private subquery
replaced by ``(SELECT c0 FROM __release_i)``. Each part is planned, charged and answered as if
it had been sent alone (:mod:`dpsql.routes.releases`); the combining query runs over the released
rows alone, in a scratch DuckDB (:mod:`dpsql.execution.combined`): post-processing, free. The
whole costs the sum of the parts' costs (sequential composition), charged once.

**What stays refused** (:class:`~dpsql.errors.UnsupportedQuery`, before anything is charged):

* BigQuery's meaning: when a part holds the clause, a part without it is an *exact* query
  (BigQuery answers it exactly); over a private table it is refused, naming it (an arm hidden
  in parentheses or behind a CTE of the UNION is an arm as any other). Without any clause, each
  arm is a dpsql private query (noisy, as a query sent alone);
* an outer query around private subqueries that reads a table, a subquery without the clause,
  or a function of the deny-list (:mod:`dpsql.query.denied`) or the engine's random numbers;
* INTERSECT and EXCEPT, a UNION mixing ALL and DISTINCT, a private subquery of a part
  (nesting), and a part that is not a SELECT.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dpsql.errors import ForbiddenFunction, UnsupportedQuery
from dpsql.query.check import function_name
from dpsql.query.denied import RANDOM, denied
from dpsql.query.dp_clause import clause_tree, might_hold_clause, private_subqueries

#: The table that holds part i's released rows in the combining query.
RELEASE = "__release_{}"


@dataclass(frozen=True)
class Part:
    """One private query of a composite: its tree as written (the clause kept, the UNION's
    CTEs attached), whether it holds the clause, and how a message names it."""

    tree: exp.Query
    clause: bool
    label: str


@dataclass(frozen=True)
class Composite:
    """The parts and the query as written (its parts where :func:`outer_query` puts the
    released rows); ``union``: the parts are a UNION's arms (else scalar subqueries)."""

    parts: tuple[Part, ...]
    tree: exp.Query
    union: bool

    @property
    def clause(self) -> bool:
        """Whether BigQuery's clause appears (then a part without it is an exact query)."""
        return any(p.clause for p in self.parts)


def split(sql: str) -> Composite | None:
    """The composite ``sql`` is, or None for every other query (the common case, read cheaply:
    a text without ``UNION`` and without the clause is never parsed here)."""
    lowered = sql.lower()
    if "union" not in lowered and not might_hold_clause(sql):
        return None
    tree = clause_tree(sql)
    if isinstance(tree, exp.Union):
        return _union(tree)
    if isinstance(tree, exp.Select):
        return _scalars(tree)
    return None


def _has_clause(node: exp.Expr) -> bool:
    return isinstance(node, exp.Select) and bool(node.args.get("differential_privacy"))


def _union(tree: exp.Union) -> Composite:
    arms: list[exp.Expr] = []
    kinds: set[bool] = set()

    def walk(node: exp.Expr, top: bool) -> None:
        modifiers = any(node.args.get(k) for k in ("order", "limit", "offset"))
        if isinstance(node, exp.Union) and (top or not modifiers):
            kinds.add(bool(node.args.get("distinct")))
            walk(node.this, False)
            walk(node.expression, False)
        elif isinstance(node, exp.Intersect | exp.Except):
            raise UnsupportedQuery(f"{type(node).__name__.upper()} of private queries is not "
                                   "supported; ask each SELECT separately")
        else:
            arms.append(node)

    walk(tree, True)
    if len(kinds) > 1:
        raise UnsupportedQuery("a UNION that mixes UNION ALL and UNION DISTINCT is not "
                               "supported; use one of them throughout")
    ctes = tree.args.get("with_")
    parts = []
    for i, arm in enumerate(arms):
        body = arm
        while isinstance(body, exp.Subquery) and not body.alias:  # ((SELECT ...))
            body = body.this
        if not isinstance(body, exp.Select):
            raise UnsupportedQuery(f"arm {i + 1} of the UNION is not a SELECT; write each arm "
                                   "as one SELECT")
        body = body.copy()
        if ctes is not None:  # the arm alone reads the UNION's CTEs as the UNION did
            body.set("with_", _merged(ctes, body.args.get("with_")))
        parts.append(Part(body, _has_clause(body), f"arm {i + 1} of the UNION"))
    return Composite(tuple(parts), tree, union=True)


def _merged(outer: exp.With, own: exp.With | None) -> exp.With:
    ctes = [c.copy() for c in outer.expressions]
    if own is not None:  # the arm's own CTE of a name hides the UNION's
        names = {c.alias.lower() for c in own.expressions}
        ctes = [c for c in ctes if c.alias.lower() not in names] + \
            [c.copy() for c in own.expressions]
    return exp.With(expressions=ctes, recursive=outer.args.get("recursive"))


def _scalars(tree: exp.Select) -> Composite | None:
    """A SELECT whose scalar subqueries hold the clause (not in FROM: a query over a private
    query's answer is :mod:`dpsql.query.over_released`'s), or None."""
    if _has_clause(tree):
        return None
    found = private_subqueries(tree)
    if not found:
        return None
    parts = []
    for i, subquery in enumerate(found):
        if any(_has_clause(s) for s in subquery.this.find_all(exp.Select)
               if s is not subquery.this):
            raise UnsupportedQuery("a private subquery holds another private query; ask them "
                                   "separately")
        parts.append(Part(subquery.this.copy(), True, f"scalar subquery {i + 1}"))
    return Composite(tuple(parts), tree, union=False)


def outer_query(composite: Composite, names: list[list[str]]) -> exp.Query:
    """The query that combines the parts' released rows, over tables ``__release_i`` whose
    columns are ``c0, c1, ...`` (``names[i]``: part i's output names, each arm's columns named
    as its own answer's). Refused here, before anything runs (:func:`check_outer`), if it
    reads anything else."""
    tree = composite.tree.copy()
    tree.set("with_", None)
    if composite.union:
        _replace_arms(tree, names)
        return tree
    for i, subquery in enumerate(private_subqueries(tree)):
        subquery.replace(exp.Subquery(this=exp.select(exp.column("c0")).from_(_release(i))))
    return tree


def _release(i: int) -> exp.Table:
    return exp.Table(this=exp.to_identifier(RELEASE.format(i), quoted=True))


def _replace_arms(tree: exp.Query, names: list[list[str]]) -> None:
    counter = iter(range(len(names)))

    def walk(node: exp.Expr, top: bool) -> None:
        modifiers = any(node.args.get(k) for k in ("order", "limit", "offset"))
        if isinstance(node, exp.Union) and (top or not modifiers):
            walk(node.this, False)
            walk(node.expression, False)
            return
        i = next(counter)
        columns = [exp.alias_(exp.column(f"c{j}"), name, quoted=True)
                   for j, name in enumerate(names[i])]
        node.replace(exp.select(*columns).from_(_release(i)).subquery())

    walk(tree, True)


def check_outer(composite: Composite) -> None:
    """Refuse a query around the parts (the UNION's ORDER BY and LIMIT, the SELECT around
    private subqueries) that reads anything but their answers: a table, another subquery, a
    denied function (module docstring). Before anything is charged: a table named there (an
    ORDER BY over a private table's subquery) would otherwise fail after the charge."""
    tree = outer_query(composite, [["c0"]] * len(composite.parts))
    where = "a UNION of private queries" if composite.union else "a private subquery"
    for node in tree.walk():
        if isinstance(node, exp.Table) and not node.name.startswith("__release_"):
            raise UnsupportedQuery(
                f"the query around {where} reads {node.sql(dialect='duckdb')}: "
                "it may read only the private queries' answers; ask the other part "
                "separately")
        if isinstance(node, exp.Subquery) and not _reads_release(node):
            raise UnsupportedQuery(
                f"{node.sql(dialect='duckdb')[:80]} is a subquery without WITH "
                "DIFFERENTIAL_PRIVACY beside a private one: an exact query, which dpsql does "
                "not answer here; make it private (the clause) or ask it separately")
        name = function_name(node)
        if name is not None and (denied(name) or name in RANDOM):
            raise ForbiddenFunction(f"function {name}() is not allowed in dpsql queries")


def _reads_release(node: exp.Subquery) -> bool:
    source = node.this.args.get("from_") if isinstance(node.this, exp.Select) else None
    table = source.this if isinstance(source, exp.From) else None
    return isinstance(table, exp.Table) and table.name.startswith("__release_")
