"""A query over a private aggregate's released rows: ``SELECT SUM(n) FROM (SELECT x, COUNT(*)
AS n FROM t GROUP BY x)``, and BigQuery's ``SELECT SUM(c) FROM (SELECT WITH DIFFERENTIAL_PRIVACY
... x, COUNT(*) c ... GROUP BY x)``.

The inner query is answered as any private query (one release: its noisy cells, its released
keys, its HAVING, ORDER BY and LIMIT over them); the outer query then runs over the inner's
answer alone, in the scratch DuckDB of :mod:`dpsql.execution.postprocess` whose only table is
the released cells: post-processing, which costs nothing. The whole query costs the inner's
epsilon and delta, charged once.

:func:`split` recognises the shape: one subquery in FROM that aggregates (an aggregate or a
GROUP BY; a row-level subquery is inlined by :mod:`dpsql.query.bind` instead), no join, no
other table or subquery anywhere in the outer query (it may read only the inner's columns), and
no function of the deny-list (:mod:`dpsql.query.denied`) or the engine's random numbers.
:func:`compose` puts the inner's post-processing query back in the outer's FROM.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.errors import ForbiddenFunction, UnsupportedQuery
from dpsql.query.denied import RANDOM, denied

#: The outer query's FROM while the inner is planned (a name no table may take).
RELEASED = "__released"


def split(select: exp.Select) -> tuple[exp.Select, exp.Select] | None:
    """``(inner, outer)`` for a query over an aggregating subquery (the outer's FROM is then
    :data:`RELEASED`, under the subquery's alias), else None."""
    source = select.args.get("from_")
    if not isinstance(source, exp.From) or not isinstance(source.this, exp.Subquery):
        return None
    subquery = source.this
    inner = subquery.this
    if not isinstance(inner, exp.Select) or not _aggregates(inner) or any(
            select.args.get(k) for k in ("joins", "laterals", "with_")):
        return None
    outer = select.copy()
    alias = subquery.alias or RELEASED
    outer.set("from_", exp.From(this=exp.Table(
        this=exp.to_identifier(RELEASED, quoted=True),
        alias=exp.TableAlias(this=exp.to_identifier(alias)))))
    for node in outer.walk():
        if isinstance(node, exp.Subquery | exp.Exists) or (
                isinstance(node, exp.Table) and node.name != RELEASED):
            raise UnsupportedQuery(
                "a query over a private aggregate's answer may read only that answer's "
                "columns (no other table or subquery); ask the other part separately")
        name = _function_name(node)
        if name is not None and (denied(name) or name in RANDOM):
            raise ForbiddenFunction(f"function {name}() is not allowed in dpsql queries")
    return inner.copy(), outer


def expand_star(post: exp.Select, released: list[str]) -> exp.Select:
    """``post`` with each ``*`` (or ``alias.*``) over the released answer written as its
    columns: the output names must be known when planned (a ``*`` was one column named
    ``*``, and the answer, computed and charged, then failed to fit it)."""
    expressions: list[exp.Expression] = []
    for e in post.expressions:
        star = e if isinstance(e, exp.Star) else e.this if isinstance(e, exp.Column) and \
            isinstance(e.this, exp.Star) else None
        if star is not None:
            if any(star.args.values()):
                raise UnsupportedQuery("* EXCLUDE, REPLACE or RENAME over a private "
                                       "aggregate's answer is not supported; name the "
                                       "columns you want")
            expressions.extend(exp.column(name, quoted=True) for name in released)
        else:
            expressions.append(e)
    post.set("expressions", expressions)
    return post


def compose(outer: exp.Select, inner: exp.Select) -> exp.Select:
    """``outer`` (from :func:`split`) reading ``inner`` (the inner's query over the cells, its
    output columns named) in place of :data:`RELEASED`."""
    composed = outer.copy()
    table = composed.args["from_"].this
    composed.set("from_", exp.From(this=exp.Subquery(this=inner, alias=table.args["alias"])))
    return composed


def _aggregates(select: exp.Select) -> bool:
    return bool(select.args.get("group")) or any(e.find(exp.AggFunc)
                                                   for e in select.expressions)


def _function_name(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.this).upper()
    if isinstance(node, exp.Func):
        return node.sql_name().upper()
    return None
