"""The rewrite's histogram columns (:class:`~dpsql.engines.ir.Histogram`, an aggregate of the
final SELECT) computed as their own ``GROUP BY keys, bucket`` and joined back on the keys.

Spark has no histogram aggregate; DuckDB has one (``histogram``, a MAP), but it is slow with
many distinct buckets and its MAP is slow to read into Python: with 2**16 buckets
(issue 21.5) a hash aggregate of (keys, bucket) gathered into two lists is several times
faster (``benchmarks/bench_median.py``). The measurement is the same function of the bounded
rows: per group, the number of rows (or the sum of their weights) in each non-NULL bucket; a
group with no bucket is NULL (LEFT JOIN), read as the empty histogram, and a group whose
buckets are all NULL has empty lists.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from dpsql.engines import ir

#: Per group, the gathered (bucket ``__b``, count ``__n``) pairs: an engine's aggregate.
Gather = Callable[[], exp.Expression]


def _histogram_arg(projection: exp.Expression) -> ir.Histogram | None:
    value = projection.this if isinstance(projection, exp.Alias) else None
    return value if isinstance(value, ir.Histogram) else None


def counted(histogram: ir.Histogram) -> exp.Expression:
    """What one bucket holds: its rows, or the sum of their weights (a weighted histogram)."""
    weight = histogram.args.get("weight")
    return exp.Count(this=exp.Star()) if weight is None else ir.ExactSum(this=weight.copy())


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
    if not keys and len(main.expressions) == 1 and main.expressions[0].alias == "__c":
        # Histograms alone, one group: the one row needs no scan of the source (which would
        # be read twice, a CTE then materialised)
        main = exp.select(exp.alias_(exp.Literal.number(1), "__c"))
    ctes: list[tuple[str, exp.Expression]] = [("__main", main)]
    joined = exp.select(*[exp.column(n, table="__main" if n not in buckets else
                                     f"__h{list(buckets).index(n)}") for n in names])
    joined = joined.from_("__main")
    for i, (name, histogram) in enumerate(buckets.items()):
        # The bucket computed once a row, in a subquery, then filtered and grouped on
        weight = histogram.args.get("weight")
        rows = exp.select(*[exp.column(k) for k in keys], exp.alias_(histogram.this.copy(),
                                                                    "__b"),
                          *([exp.alias_(weight.copy(), "__w")] if weight is not None else [])
                          ).from_(source.copy())
        counted_rows = ir.Histogram(this=exp.column("__b"), weight=exp.column("__w")) \
            if weight is not None else ir.Histogram(this=exp.column("__b"))
        # NULL buckets are grouped too, and dropped by the gather: a filter on __b here would
        # be pushed below the projection, computing every bucket twice
        counts = exp.select(*[exp.column(k) for k in keys], exp.column("__b"), exp.alias_(
            counted(counted_rows), "__n")).from_(exp.Subquery(
                this=rows, alias=exp.TableAlias(this=exp.to_identifier("__r"))))
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


def _present() -> exp.Expression:
    return exp.Not(this=exp.Is(this=exp.column("__b"), expression=exp.Null()))


def spark_gather() -> exp.Expression:
    """``map_from_entries(collect_list(CASE WHEN __b IS NOT NULL THEN struct(__b, __n)
    END))``: a MAP bucket -> count (collect_list skips the NULL bucket's NULL)."""
    entry = exp.Case(ifs=[exp.If(this=_present(), true=exp.Anonymous(
        this="struct", expressions=[exp.column("__b"), exp.column("__n")]))])
    return exp.Anonymous(this="map_from_entries", expressions=[exp.Anonymous(
        this="collect_list", expressions=[entry])])


def duckdb_gather() -> exp.Expression:
    """``[list(__b), list(__n)]`` over the non-NULL buckets: the buckets and their counts as
    two parallel lists (read by :func:`dpsql.execution.perturb.histogram_arrays`), far
    cheaper to read than a MAP."""
    return exp.Array(expressions=[exp.Filter(this=exp.Anonymous(
        this="list", expressions=[exp.column(c)]), expression=exp.Where(this=_present()))
        for c in ("__b", "__n")])
