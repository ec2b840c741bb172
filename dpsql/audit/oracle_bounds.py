"""The reference model of the semantic oracle where a contribution bound bites: a unit with
more than k rows (``max_rows_per_unit``, or the query's ``max_rows_contributed``), or rows in
more than g' groups (the plan's groups cap).

**The meaning.** A bounded query estimates the query over a uniform sample of at most k of
each unit's rows in at most g' of its groups (:mod:`dpsql.execution.rewrite`: "the same answer
in expectation as the sample of rows"). Its expected value is plain SQL over the rows, each row
of unit u weighted by

    w_u = gf_u * min(1, k / (t_u * gf_u)),    gf_u = min(1, g' / G_u)

(``t_u`` the unit's rows after WHERE, ``G_u`` its groups, ``gf_u`` the chance that a group of
its is kept): COUNT is ``SUM(w)``, SUM ``SUM(w x)``, AVG ``SUM(w x) / SUM(w [x IS NOT NULL])``,
``COUNT(DISTINCT unit)`` ``SUM(gf)`` (rule :func:`weighted`). dpsql's noise-free answer is one
draw of the secret salted sample, not its expectation: each biting unit may move a cell by a
*slack* (rule :func:`rows_that_vary`), by the bounding form the plan chose:

* by weights (``Plan.weight_bits = F``): ``W = floor(k 2^F / t) / 2^F`` per row: below
  ``2^-F`` a row;
* by per-unit aggregates: without GROUP BY ``c = min(n, k)`` exactly (the scaled sum rounded
  on its grid: a thousandth of a row); with keys the systematic rounding of ``c_j``: one row
  a group;
* by a sample of rows (and wherever the groups cap bites): any ``min(n_j, k)`` rows of a
  group.

A cell's slack is the sum, over its biting units, of those rows times the largest term the
unit has in the group (1 for a count). A cell within its slack agrees. An AVG whose values may
weigh less than one row is not compared: dpsql divides by at least one row. Where the slack is
not 0, what HAVING, ORDER BY, QUALIFY, DISTINCT or thresholding read is one draw too: such a
query is not compared (:class:`~dpsql.audit.oracle_reference.NotModelled`), nor are bounds
chosen from the data (``auto``), nor aggregates that are not sums of row terms (a sample
VAR, COUNT(DISTINCT x)).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from dpsql.audit.oracle_reference import (
    APPROXIMATE,
    NotModelled,
    PersonAvg,
    PersonSum,
    Release,
    _aggregates,
    _keys,
    _parse,
    _semi_joins,
    clamped,
    grouped_rows,
    outer_sql,
    read_arguments,
    total,
    unit_expression,
)
from dpsql.execution.rewrite import aggregated
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.plan import Plan

#: A slack that no difference reaches: a column that reads a biting cell through arithmetic.
UNBOUNDED = 1e300


@dataclass(frozen=True)
class Bounds:
    """The plan's contribution bounds and the form that enforces them."""

    k: int
    cap: int | None  # g', when the plan caps the groups
    form: str  # "weights", "per_unit" or "sample"
    bits: int  # F of the weights form
    auto: bool  # k or a value bound chosen from the data
    keys: bool


def bounds_of(plan: Plan) -> Bounds | None:
    """The bounds of ``plan``'s relation (None: each row is its own unit)."""
    if not plan.table.needs_bounding:
        return None
    form = "weights" if plan.weight_bits else "per_unit" if aggregated(plan) else "sample"
    return Bounds(plan.table.max_rows_per_unit, plan.group_cap, form, plan.weight_bits,
                  plan.auto is not None or bool(plan.values), bool(plan.keys))


@dataclass(frozen=True)
class BoundedReference:
    """Whether a bound bites (``bites``: one row, 1 or 0), and the reference where it does:
    the query's columns, then one slack column per output column."""

    bites: str
    sql: str
    columns: int  # the query's own columns (the slack columns follow)
    totals: str | None = None  # column_totals
    checked: list[tuple[int, float]] = field(default_factory=list)


def _units_part(select: exp.Select, metadata: Metadata, keys: Sequence[exp.Expression],
                unit: exp.Expression, partials: Sequence[exp.Expression]) -> exp.Select:
    """One row per (group, unit): ``__k{i}``, ``__u``, ``__n`` rows, then ``partials``."""
    read_keys = [clamped(k.copy(), metadata) for k in keys]
    inner = grouped_rows(select, keys, unit, metadata)
    inner.set("expressions", [*(k.as_(f"__k{i}") for i, k in enumerate(read_keys)),
                              unit.copy().as_("__u"), exp.Count(this=exp.Star()).as_("__n"),
                              *partials])
    inner.set("group", exp.Group(expressions=[*(k.copy() for k in read_keys), unit.copy()]))
    return inner.transform(_semi_joins).transform(total)


def _weighted_units(units: exp.Select, bounds: Bounds) -> exp.Select:
    """``units`` with ``__t``, ``__G``, the keep factor ``__gf``, the weight ``__w``, whether
    the unit bites (``__bite``) and the rows that vary ``__r``."""
    ranked = exp.select("*", "SUM(__n) OVER (PARTITION BY __u) AS __t",
                        "COUNT(*) OVER (PARTITION BY __u) AS __G").from_(
        exp.Subquery(this=units, alias=exp.TableAlias(this=exp.to_identifier("__s1"))))
    cap = bounds.cap
    gf = f"CASE WHEN __G > {cap} THEN {cap} / __G ELSE 1.0 END" if cap else "1.0"
    g_bites = f"__G > {cap}" if cap else "FALSE"
    bite = f"(__t > {bounds.k} OR {g_bites})"
    return exp.select(
        "*", f"{gf} AS __gf", f"({gf}) * LEAST(1.0, {bounds.k} / (__t * ({gf}))) AS __w",
        f"{bite} AS __bite", f"{g_bites} AS __gbite",
        f"CASE WHEN NOT {bite} THEN 0 WHEN {g_bites} THEN LEAST(__n, {bounds.k}) "
        f"ELSE {rows_that_vary(bounds)} END AS __r").from_(
        exp.Subquery(this=ranked, alias=exp.TableAlias(this=exp.to_identifier("__s2"))))


def rows_that_vary(bounds: Bounds) -> str:
    """The rows of a biting unit's group that one draw of the bounding may move away from
    their expected share (the module docstring), by the bounding form."""
    if bounds.form == "weights":
        return f"__n / {2 ** bounds.bits}.0"
    if bounds.form == "per_unit":
        return "1"  # the allocation's rounding, or the scaled sum's on its grid
    return f"LEAST(__n, {bounds.k})"


def weighted(aggregate: exp.Expression, j: int, unit: exp.Expression, metadata: Metadata
             ) -> tuple[list[exp.Expression], exp.Expression, exp.Expression]:
    """Aggregate ``j`` as per-(group, unit) partials, its expected value over the weighted
    units and its slack (the module docstring)."""
    read = read_arguments(aggregate, metadata)
    inner = read.this if isinstance(read, exp.Filter) else read
    where = read.expression if isinstance(read, exp.Filter) else None

    def part(node: exp.Expression, name: str) -> exp.Expression:
        node = exp.Filter(this=node, expression=where.copy()) if where is not None else node
        return node.as_(f"__p{j}{name}")

    def col(name: str) -> exp.Column:
        return exp.column(f"__p{j}{name}")

    def total_of(value: exp.Expression) -> exp.Expression:
        return exp.Coalesce(this=exp.Sum(this=value), expressions=[exp.Literal.number(0)])

    w, r, gf = exp.column("__w"), exp.column("__r"), exp.column("__gf")
    if type(inner) in PER_PERSON_RULES:
        return PER_PERSON_RULES[type(inner)](inner, part, col, total_of)
    if isinstance(inner, APPROXIMATE):
        return [], exp.Null(), exp.Literal.number(0)  # not compared (the approximate class)
    if isinstance(inner, exp.Count) and isinstance(inner.this, exp.Distinct):
        args = inner.this.expressions
        if len(args) != 1 or not isinstance(args[0], exp.Column) or \
                args[0].name != _unit_name(unit):
            raise NotModelled("COUNT(DISTINCT x) where a bound bites")
        bite = exp.Case(ifs=[exp.If(this=exp.column("__bite"), true=exp.Literal.number(1))],
                        default=exp.Literal.number(0))
        return [], total_of(gf), total_of(bite)
    if isinstance(inner, exp.Count | exp.CountIf | exp.Sum):
        term = exp.Literal.number(1) if not isinstance(inner, exp.Sum) else \
            exp.Max(this=exp.Abs(this=inner.this.copy()))
        value = total_of(w * col(""))  # 0 over no rows (empty_aggregate)
        # A count, and a sum of whole numbers, are released as integers: half a row more.
        rounding = exp.Coalesce(this=exp.Max(this=exp.Case(
            ifs=[exp.If(this=exp.column("__bite"), true=exp.Literal.number(0.5))],
            default=exp.Literal.number(0))), expressions=[exp.Literal.number(0)])
        slack = total_of(r * exp.Coalesce(this=col("t"), expressions=[exp.Literal.number(0)]))
        return [part(inner, ""), part(term, "t")], value, exp.Add(this=slack,
                                                                  expression=rounding)
    if isinstance(inner, exp.Avg):
        x = inner.this
        parts = [part(exp.Sum(this=x.copy()), "s"), part(exp.Count(this=x.copy()), "c"),
                 part(exp.Max(this=exp.Abs(this=x.copy())), "t")]
        s, c = total_of(w * col("s")), total_of(w * col("c"))
        ss = total_of(r * exp.Coalesce(this=col("t"), expressions=[exp.Literal.number(0)]))
        sc = total_of(r * exp.Case(ifs=[exp.If(this=col("c") > 0, true=exp.Literal.number(1))],
                                   default=exp.Literal.number(0)))
        value = exp.Div(this=s, expression=exp.Nullif(this=c.copy(),
                                                      expression=exp.Literal.number(0)))
        # dpsql divides by max(count, 1) (dpsql.privacy.aggregates._combine_avg, as Google's
        # BoundedMean): where the group's values may weigh less than one row (weights, a
        # sample), the mean is pulled toward its bounds' midpoint, which this model does not
        # know: not compared.
        slack = exp.Case(ifs=[exp.If(this=exp.and_(ss.copy().eq(0), sc.copy().eq(0)),
                                     true=exp.Literal.number(0)),
                              exp.If(this=exp.Sub(this=c.copy(), expression=sc.copy()) < 1,
                                     true=exp.Literal.number(UNBOUNDED)),
                              exp.If(this=c.copy() > sc.copy(), true=exp.Div(
                                  this=exp.Add(this=ss, expression=exp.Mul(
                                      this=exp.Abs(this=value.copy()), expression=sc.copy())),
                                  expression=exp.Sub(this=c.copy(), expression=sc.copy())))],
                         default=exp.Literal.number(UNBOUNDED))
        return parts, value, slack
    raise NotModelled(f"{inner.key.upper()} where a bound bites")


Part = Callable[[exp.Expression, str], exp.Expression]
Col = Callable[[str], exp.Column]
Total = Callable[[exp.Expression], exp.Expression]


def _clamp(value: exp.Expression, bounds: Sequence[exp.Expression]) -> exp.Expression:
    if not bounds:
        return value
    lo, hi = bounds
    return exp.Case(ifs=[exp.If(this=value.copy() < lo.copy(), true=lo.copy()),
                         exp.If(this=value.copy() > hi.copy(), true=hi.copy())],
                    default=value.copy())


def _gbite_of(value: exp.Expression) -> exp.Expression:
    """``value`` where the groups cap bites on the unit (its kept groups are one draw), 0
    elsewhere."""
    return exp.Case(ifs=[exp.If(this=exp.column("__gbite"), true=value)],
                    default=exp.Literal.number(0))


def person_sum(inner: exp.Expression, part: Part, col: Col, total_of: Total
               ) -> tuple[list[exp.Expression], exp.Expression, exp.Expression]:
    """ZetaSQL's per-group SUM: each unit's total in the group clamped, a unit without a
    non-NULL value adding nothing; no row cap (only the groups cap) applies."""
    term = _clamp(col("s"), inner.expressions)
    present = exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=col("s"),
                                                               expression=exp.Null())),
                                   true=term)])
    value = total_of(exp.column("__gf") * present)
    slack = total_of(_gbite_of(exp.Abs(this=present.copy())))
    return [part(exp.Sum(this=inner.this.copy()), "s")], value, slack


def person_avg(inner: exp.Expression, part: Part, col: Col, total_of: Total
               ) -> tuple[list[exp.Expression], exp.Expression, exp.Expression]:
    """ZetaSQL's AVG: the average over the units with a non-NULL value of each unit's
    (clamped) average; no row cap (only the groups cap) applies."""
    mean = exp.Case(ifs=[exp.If(this=col("c") > 0, true=_clamp(exp.Div(
        this=col("s"), expression=col("c")), inner.expressions))])
    units = exp.Case(ifs=[exp.If(this=col("c") > 0, true=exp.Literal.number(1))],
                     default=exp.Literal.number(0))
    gf = exp.column("__gf")
    s, c = total_of(gf * mean), total_of(gf * units)
    value = exp.Div(this=s, expression=exp.Nullif(this=c.copy(),
                                                  expression=exp.Literal.number(0)))
    ss, sc = total_of(_gbite_of(exp.Abs(this=mean.copy()))), total_of(_gbite_of(units.copy()))
    slack = exp.Case(ifs=[exp.If(this=exp.and_(ss.copy().eq(0), sc.copy().eq(0)),
                                 true=exp.Literal.number(0)),
                          exp.If(this=c.copy() > sc.copy(), true=exp.Div(
                              this=exp.Add(this=ss, expression=exp.Mul(
                                  this=exp.Abs(this=value.copy()), expression=sc.copy())),
                              expression=exp.Sub(this=c.copy(), expression=sc.copy())))],
                     default=exp.Literal.number(UNBOUNDED))
    x = inner.this
    return ([part(exp.Sum(this=x.copy()), "s"), part(exp.Count(this=x.copy()), "c")], value,
            slack)


#: The per-person aggregates of the reference (:data:`dpsql.audit.oracle_reference.
#: PER_PERSON`, from BigQuery's clause: :mod:`dpsql.audit.oracle_clause`): class -> its
#: partials per (group, unit), expected value and slack.
PER_PERSON_RULES: dict[type[exp.Expression], Callable[
        [exp.Expression, Part, Col, Total],
        tuple[list[exp.Expression], exp.Expression, exp.Expression]]] = {
    PersonSum: person_sum, PersonAvg: person_avg}


def _unit_name(unit: exp.Expression) -> str | None:
    return unit.name if isinstance(unit, exp.Column) else None


def bounded_reference(sql: str, metadata: Metadata, release: Release, bounds: Bounds
                      ) -> BoundedReference:
    """The reference of ``sql`` with ``bounds`` (the module docstring); its ``sql`` raises
    NotModelled when built for what the model does not read."""
    select = _parse(sql)
    keys = _keys(select)
    unit = unit_expression(select, metadata)
    if unit is None:
        raise NotModelled("no unit")
    units = _weighted_units(_units_part(select, metadata, keys, unit, []), bounds)
    bites = exp.select("COALESCE(MAX(CASE WHEN __bite THEN 1 ELSE 0 END), 0)",
                       prebound_bites(select, metadata)).from_(
        exp.Subquery(this=units, alias=exp.TableAlias(this=exp.to_identifier("__s3"))))
    return BoundedReference(bites.sql("duckdb"), _reference(select, keys, unit, metadata,
                                                            release, bounds),
                            len(select.expressions), *column_totals(select, units, unit, bounds))


def prebound_bites(select: exp.Select, metadata: Metadata) -> exp.Expression:
    """Whether a private table joined to another that needs bounding has a unit with more
    rows than its own k: :func:`dpsql.query.joins.prebound` then keeps k of them *before* the
    join and before WHERE (not modelled: a filter on that table reads a sample of its rows).
    """
    bounded = []
    for source in [select.args.get("from_"), *select.args.get("joins", [])]:
        node = source.this if source is not None else None
        table = metadata.table(node.name) if isinstance(node, exp.Table) else None
        if table is not None and table.needs_bounding and table.privacy_unit is not None:
            bounded.append(table)
    if len(bounded) < 2:
        return exp.Literal.number(0).as_("__prebound")
    tests = [exp.Exists(this=exp.select("1").from_(t.name).group_by(t.privacy_unit).having(
        f"COUNT(*) > {t.max_rows_per_unit}")) for t in bounded]
    return exp.Case(ifs=[exp.If(this=exp.or_(*tests), true=exp.Literal.number(1))],
                    default=exp.Literal.number(0)).as_("__prebound")


def column_totals(select: exp.Select, units: exp.Select, unit: exp.Expression, bounds: Bounds
                  ) -> tuple[str | None, list[tuple[int, float]]]:
    """The totals over all groups that the bounding keeps exact, whatever its draw (rule
    ``exact_totals``): a unit's ``COUNT(*)`` rows sum to ``min(t, k)`` over its groups (by
    per-unit aggregates or a sample; by weights, up to each group's rounding to an integer),
    unless the groups cap bites; its ``COUNT(DISTINCT unit)`` to ``min(G, g')`` by per-unit
    aggregates. The query of the expected totals (one row: the total and whether the groups
    cap bites, per column) and the columns checked, each with its rounding per released row."""
    checked: list[tuple[int, float]] = []
    parts: list[str] = []
    for i, item in enumerate(select.expressions):
        value = item.unalias()
        if isinstance(value, exp.Count) and isinstance(value.this, exp.Star):
            checked.append((i, 0.5 if bounds.form == "weights" else 0.0))
            parts += ["SUM(__w * __n)", "MAX(CASE WHEN __gbite THEN 1 ELSE 0 END)"]
        elif isinstance(value, exp.Count) and isinstance(value.this, exp.Distinct) and \
                bounds.form == "per_unit" and len(value.this.expressions) == 1 and \
                value.this.expressions[0].name == _unit_name(unit):
            checked.append((i, 0.0))
            parts += ["SUM(__gf)", "0"]
    if not checked:
        return None, []
    query = exp.select(*parts).from_(exp.Subquery(
        this=units.copy(), alias=exp.TableAlias(this=exp.to_identifier("__s3"))))
    return query.sql("duckdb"), checked


def _reference(select: exp.Select, keys: Sequence[exp.Expression], unit: exp.Expression,
               metadata: Metadata, release: Release, bounds: Bounds) -> str:
    aggregates = _aggregates(select)
    partials: list[exp.Expression] = []
    values, slacks = [], []
    try:
        for j, a in enumerate(aggregates):
            p, value, slack = weighted(a, j, unit, metadata)
            partials.extend(p)
            values.append(value.as_(f"__a{j}"))
            slacks.append(slack.as_(f"__s{j}"))
    except NotModelled as e:
        return f"-- not modelled: {e}"
    units = _weighted_units(_units_part(select, metadata, keys, unit, partials), bounds)
    grouped = exp.select(*(exp.column(f"__k{i}") for i in range(len(keys))), *values, *slacks,
                         "SUM(__gf) AS __units").from_(
        exp.Subquery(this=units, alias=exp.TableAlias(this=exp.to_identifier("__s3"))))
    if keys:
        grouped = grouped.group_by(*(exp.column(f"__k{i}") for i in range(len(keys))))
    extra = [_column_slack(e, aggregates, i) for i, e in enumerate(select.expressions)]
    return outer_sql(select, keys, aggregates, True, release, grouped, extra).sql("duckdb")


def _column_slack(item: exp.Expression, aggregates: Sequence[exp.Expression], i: int
                  ) -> exp.Expression:
    """Output column ``i``'s slack: its aggregate's, 0 for a key, UNBOUNDED where arithmetic
    reads a cell with slack."""
    def slack(j: int) -> exp.Expression:
        return exp.Coalesce(this=exp.column(f"__s{j}", table="__g"),
                            expressions=[exp.Literal.number(0)])

    value = item.unalias()
    read = [j for j, a in enumerate(aggregates) if any(n == a for n in value.walk())]
    if not read:
        out: exp.Expression = exp.Literal.number(0)
    elif any(value == a for a in aggregates):
        out = slack(read[0])
    else:
        out = exp.Case(ifs=[exp.If(this=exp.or_(*(slack(j) > 0 for j in read)),
                                   true=exp.Literal.number(UNBOUNDED))],
                       default=exp.Literal.number(0))
    return out.as_(f"__slack{i}")


def reads_released_cells(sql: str, release: Release) -> bool:
    """Whether which rows are released, or their order, depends on the cells' values (HAVING,
    ORDER BY, QUALIFY, a window, DISTINCT, LIMIT) or on the units of a group (thresholding):
    with slack, one draw of the bounding decides it."""
    select = _parse(sql)
    return release.tau is not None or any(select.args.get(a) is not None for a in (
        "having", "order", "qualify", "distinct", "limit", "offset")) or any(
        True for e in select.expressions for _ in e.find_all(exp.Window))
