"""The rewrite's histogram columns (:class:`~dpsql.engines.ir.Histogram`, an aggregate of the
final SELECT) computed as their own ``GROUP BY keys, bucket`` and joined back on the keys.

Spark has no histogram aggregate; DuckDB has one (``histogram``, a MAP), but it is slow with
many distinct buckets and its MAP is slow to read into Python: with 2**16 buckets
(issue 21.5) a hash aggregate of (keys, bucket) gathered into two lists is several times
faster (``benchmarks/bench_median.py``). The measurement is the same function of the bounded
rows: per group, the number of rows in each non-NULL bucket; a group with no bucket is NULL
(LEFT JOIN), read as the empty histogram.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from dpsql.engines import ir

#: Per group, the gathered (bucket ``__b``, count ``__n``) pairs: an engine's aggregate.
Gather = Callable[[], exp.Expression]


def _histogram_arg(projection: exp.Expression) -> exp.Expression | None:
    value = projection.this if isinstance(projection, exp.Alias) else None
    if isinstance(value, ir.Histogram):
        arg: exp.Expression = value.this
        return arg
    return None


def joined_histograms(query: exp.Select, gather: Gather) -> exp.Select:
    """Each ``histogram(bucket) AS m`` of the final SELECT as its own GROUP BY keys, bucket,
    gathered per group by ``gather`` and joined back on the keys with NULL-safe equality."""
    buckets = {p.alias: arg for p in query.expressions if (arg := _histogram_arg(p)) is not None}
    if not buckets:
        return query
    with_ = query.args.pop("with_", None)
    keys = [g.name for g in (query.args.get("group") or exp.Group()).expressions]
    source = query.args["from_"].this
    names = [p.alias_or_name for p in query.expressions]
    main = query.copy()
    main.set("expressions", [p for p in main.expressions if p.alias not in buckets] or
             [exp.alias_(exp.Count(this=exp.Star()), "__c")])
    ctes: list[tuple[str, exp.Expression]] = [("__main", main)]
    joined = exp.select(*[exp.column(n, table="__main" if n not in buckets else
                                     f"__h{list(buckets).index(n)}") for n in names])
    joined = joined.from_("__main")
    for i, (name, bucket) in enumerate(buckets.items()):
        counts = exp.select(*[exp.column(k) for k in keys], exp.alias_(bucket.copy(), "__b"),
                            exp.alias_(exp.Count(this=exp.Star()), "__n")).from_(
            source.copy()).where(exp.Not(this=exp.Is(this=bucket.copy(), expression=exp.Null())))
        counts = counts.group_by(*[exp.column(k) for k in keys], exp.column("__b"))
        gathered = exp.select(*[exp.column(k) for k in keys], exp.alias_(gather(), name)).from_(
            exp.Subquery(this=counts, alias=exp.TableAlias(this=exp.to_identifier("__c"))))
        if keys:
            gathered = gathered.group_by(*[exp.column(k) for k in keys])
        ctes.append((f"__h{i}", gathered))
        on: exp.Expr = exp.and_(*[exp.NullSafeEQ(
            this=exp.column(k, table="__main"), expression=exp.column(k, table=f"__h{i}"))
            for k in keys]) if keys else exp.EQ(this=exp.Literal.number(1),
                                                expression=exp.Literal.number(1))
        joined = joined.join(f"__h{i}", on=on, join_type="LEFT")
    for alias, cte in ctes:
        joined = joined.with_(alias, as_=cte)
    if with_ is not None:  # the rewrite's CTEs first: the new ones read them
        with_.set("expressions", [*with_.expressions, *joined.args["with_"].expressions])
        joined.set("with_", with_)
    return joined


def spark_gather() -> exp.Expression:
    """``map_from_entries(collect_list(struct(__b, __n)))``: a MAP bucket -> count."""
    return exp.Anonymous(this="map_from_entries", expressions=[exp.Anonymous(
        this="collect_list", expressions=[exp.Anonymous(this="struct", expressions=[
            exp.column("__b"), exp.column("__n")])])])


def duckdb_gather() -> exp.Expression:
    """``[list(__b), list(__n)]``: the buckets and their counts as two parallel lists (read
    by :func:`dpsql.execution.perturb.histogram_arrays`), far cheaper to read than a MAP."""
    return exp.Array(expressions=[exp.Anonymous(this="list", expressions=[exp.column("__b")]),
                                  exp.Anonymous(this="list", expressions=[exp.column("__n")])])
