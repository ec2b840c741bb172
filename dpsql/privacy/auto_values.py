"""Value bounds chosen from the data under differential privacy (issue 21, item 2, second half):
a column declared ``upper = { auto = true, max = U, share = s }`` (or ``lower = { auto = true,
min = L }``, :mod:`dpsql.metadata.auto`) gets, per query, a bound drawn from the data for the
SUM, AVG, VAR and STDDEV that read it; :func:`dpsql.privacy.auto_bounds.planned` splits the
epsilon, the engine histograms the units' values (:func:`dpsql.execution.rewrite.unit_values`),
:func:`draw` places each bound and :func:`with_values` calibrates the measurements to it.

**What the bound applies to.** Only aggregates whose sensitivity comes from the column's
bounds, SUM, AVG, VAR and STDDEV (:data:`VALUE_KINDS`): their argument reads the column as
``LEAST(GREATEST(x, lower'), upper')`` with the chosen bounds, and interval arithmetic
(:mod:`dpsql.query.bounds`) derives the smaller sensitivity. Everything else keeps the declared
bounds: WHERE, the group keys, MEDIAN/PERCENTILE/MIN/MAX (the exponential mechanism's domain),
COUNT. A side is chosen only when it changes some such aggregate's derived interval
(:func:`value_sides`): ``SUM(CASE WHEN x > 10 THEN 1 ELSE 0 END)`` spends nothing on it. An
argument the analyst clamps whole, ``SUM(LEAST(GREATEST(x, lo), hi))`` (BigQuery's
``contribution_bounds_per_row => (lo, hi)`` is rewritten so), keeps the analyst's bounds, at
no extra cost, within the declared ones (every column is read clamped to them).

**The choice.** Each privacy unit with a non-NULL value among the rows the query reads (its
WHERE, its unit not NULL; each row is its own unit on a table without bounding) contributes ONE
value: the largest of its values for the upper bound, the smallest for the lower bound, read
clamped to the declared bounds. The values are counted in :data:`BUCKETS` geometric buckets of
the distance from an origin ``o`` (0 clamped into the declared bounds, or the opposite declared
bound when 0 is the capped one): bucket ``i`` of the upper side holds distances in ``(span
r^-(B-i), span r^-(B-1-i)]``, ``r`` = :data:`RATIO`, ``span = upper - o``, the lowest bucket
everything below (the lower side mirrors it). Geometric because value distributions worth an
automatic bound are heavy-tailed: a ``r = 2^(1/32)`` grid places the bound within 2.2% of any
scale from ``span`` down to ``span 2^-15.97``, where a uniform grid of the same 512 buckets is
about 10 units of 5000 wide at the bottom (issue 39.4: the ``2^(1/4)`` grid of 64 buckets
placed a data maximum of 1,000 under a declared 100,000 at 1,105, noise sized 10% above
need; this one at 1,013, the bucket's edge above it; the finer grid costs the margin below
``2 ln(8) / epsilon_v`` units more). The exponential mechanism
(:func:`dpsql.privacy.quantiles.quantile_from_buckets`) draws a bucket; the bound is its outer
edge (rounded outwards to a whole number for an int column), so every unit of that bucket and
below is unclamped.

*Target.* The rank ``n - a`` (``a`` units beyond the bound, clipped at rank 0), by the argument
of k's (:mod:`dpsql.privacy.auto_bounds`): lowering the upper bound ``U`` by ``delta`` adds at
least ``delta`` of bias for each unit with a value above ``U`` (at least one row of it is
clamped), and lowers the noise standard deviation of each of the ``G`` released cells by
``sqrt(2) k delta / eps_m`` (Laplace, a sum's sensitivity ``k max(|L|, |U|)``, ``eps_m`` the
smallest sum's share), so ``|bias| + noise`` is smallest about where ``units_above(U) = G
sqrt(2) k / eps_m``, plus the exponential mechanism's margin ``2 ln(B / beta) / epsilon_v``
(``beta`` = :data:`~dpsql.privacy.auto_bounds.OVERSHOOT`) so that the bound rarely lands in the
empty buckets beyond every unit's value (:func:`value_above`). Counting units, not rows, errs
towards a lower bound (more bias, less noise) when a unit has several rows beyond it. ``k`` is
the released k when k is automatic too (drawn first), else the declared one: ``a`` is public.

*Sensitivity.* Neighbours differ by one unit, which is at most one value of the multiset: ``n``
and every rank move by at most 1 in the same direction, so does the target, so every utility
moves by at most 1 (``Delta = 1``, :data:`~dpsql.privacy.auto_bounds.AUTO_SENSITIVITY`) whatever
k: the step is ``epsilon_v``-DP. A histogram of rows instead of units would move by k.

*Composition.* The query's epsilon is split before anything runs: ``s_k epsilon`` for k (if
automatic), ``s_v epsilon`` for each automatic side, the rest for the measurements (the
declared shares sum to less than 1: :func:`dpsql.metadata.auto.check_shares`). The choices run
in order (k, then the bounds, each given the released k), then the measurements, calibrated to
the released k and bounds: by sequential adaptive composition the query is DP at its declared
epsilon, charged once, before the first step runs; nothing is charged for a query refused before
it runs. The released bounds are part of the answer (notes, ``Result.chosen_bounds``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
from sqlglot import exp

from dpsql.metadata.metadata import ColumnType, Table
from dpsql.privacy.aggregates import MeasurementKind
from dpsql.privacy.plan import AutoValue, Plan, plan
from dpsql.privacy.quantiles import quantile_from_buckets
from dpsql.privacy.randomness import Randomness
from dpsql.query.aggregate_calls import AggregateCall
from dpsql.query.bounds import bound
from dpsql.query.check import CheckedQuery

#: The aggregates whose sensitivity comes from their argument's value bounds.
VALUE_KINDS = frozenset({"sum", "avg", "var_samp", "var_pop", "stddev_samp", "stddev_pop"})
#: Geometric buckets of the distance from the origin, each ``RATIO`` times the one below.
BUCKETS = 512
RATIO = 2.0 ** (1 / 32)
#: The chance (about) that a bound lands beyond every unit's value (the margin of ``a``).
OVERSHOOT = 0.1
SENSITIVITY = 1.0  # one unit is one value of the histogram (module docstring)


def value_sides(query: CheckedQuery) -> list[tuple[str, str, float]]:
    """(column, side, share) of each automatic bound that changes the derived interval of some
    SUM/AVG/VAR/STDDEV argument not clamped whole by the analyst (module docstring)."""
    table = query.table
    sides = []
    for column in table.columns.values():
        for side, auto in (("lower", column.lower_auto), ("upper", column.upper_auto)):
            if auto is None:
                continue
            point = (replace(column, lower=column.upper) if side == "lower"
                     else replace(column, upper=column.lower))
            narrowed = replace(table, columns={**table.columns, column.name: point})
            if any(bound(arg, narrowed) != bound(arg, table) for arg in _valued_args(query)):
                sides.append((column.name, side, auto.share))
    return sides


def _valued_args(query: CheckedQuery) -> list[exp.Expression]:
    return [call.arg for call in query.aggregates if call.arg is not None and _takes_bound(call)]


def _takes_bound(call: AggregateCall) -> bool:
    return (call.kind in VALUE_KINDS and call.arg is not None and call.per_group is None
            and not _clamped_whole(call.arg))


def _clamped_whole(arg: exp.Expression) -> bool:
    """``LEAST(GREATEST(x, lo), hi)`` (or GREATEST(LEAST(...))) with constant bounds: the
    analyst's own bounds of the whole argument."""
    inner_type = exp.Greatest if isinstance(arg, exp.Least) else exp.Least
    if not isinstance(arg, exp.Least | exp.Greatest) or not isinstance(arg.this, inner_type):
        return False
    limits = [*arg.expressions, *arg.this.expressions]
    return len(limits) == 2 and not any(e.find(exp.Column) for e in limits)


def origin(lower: float, upper: float, side: str) -> float:
    """Where the geometric buckets start: 0 within the declared bounds, or the opposite bound
    when 0 is the bound being chosen (or outside them on that side)."""
    o = min(max(0.0, lower), upper)
    if (side == "upper" and o >= upper) or (side == "lower" and o <= lower):
        return lower if side == "upper" else upper
    return o


def edge(v: AutoValue, index: int) -> float:
    """The outer edge of bucket ``index`` of ``v``'s side (module docstring)."""
    o = origin(v.lower, v.upper, v.side)
    span = (v.upper - o) if v.side == "upper" else (o - v.lower)
    distance = span * RATIO ** -(BUCKETS - 1 - index)
    return o + distance if v.side == "upper" else o - distance


def draw(v: AutoValue, units_by_bucket: Mapping[int, int], integer: bool,
         rng: Randomness) -> float:
    """A private bound for side ``v`` from the engine's units per bucket (module docstring:
    sensitivity 1, the rank ``n - v.above``)."""
    counts = np.zeros(BUCKETS, dtype=np.float64)
    for index, units in units_by_bucket.items():
        if units < 0 or not math.isfinite(units):
            raise ValueError(f"a number of units must be finite and >= 0, got {units!r}")
        counts[min(max(int(index), 0), BUCKETS - 1)] += units
    n = float(counts.sum())
    q = max(n - v.above, 0.0) / n if n > 0 else 1.0
    nonempty = np.flatnonzero(counts)
    drawn = quantile_from_buckets(nonempty, counts[nonempty], BUCKETS, 0.0, float(BUCKETS), q,
                                  v.epsilon, SENSITIVITY, rng)
    return placed(v, math.floor(drawn), integer)


def placed(v: AutoValue, index: int, integer: bool) -> float:
    """The bound of side ``v`` when bucket ``index`` is drawn: its outer edge, rounded
    outwards to a whole number for an int column, within the declared bounds."""
    value = edge(v, min(max(index, 0), BUCKETS - 1))
    if integer:
        value = float(math.ceil(value) if v.side == "upper" else math.floor(value))
    return min(max(value, v.lower), v.upper)


def sides_for(query: CheckedQuery, p: Plan, epsilon: float, rest: float) -> tuple[AutoValue, ...]:
    """The automatic sides of ``query`` at ``epsilon`` (the query's), planned as ``p`` (the
    measurements at ``rest``)."""
    sides = []
    for column, side, share in value_sides(query):
        meta = query.table.columns[column]
        assert meta.lower is not None and meta.upper is not None  # automatic: declared both
        v = AutoValue(column, side, epsilon * share, rest, share, float(meta.lower),  # type: ignore[arg-type]
                      float(meta.upper), 0)  # type: ignore[arg-type]
        sides.append(replace(v, above=value_above(p, v)))
    return tuple(sides)


def value_above(p: Plan, v: AutoValue) -> int:
    """``a = G sqrt(2) k / eps_m + 2 ln(B / beta) / epsilon_v``, rounded up (module
    docstring), with ``p``'s k and cells."""
    cells = len(p.domain) if p.domain is not None else p.groups_per_unit
    sums = [m.epsilon for m in p.measurements if m.kind == MeasurementKind.SUM]
    smallest = min(sums or [m.epsilon for m in p.measurements])
    margin = 2.0 * math.log(BUCKETS / OVERSHOOT) / v.epsilon
    return math.ceil(cells * math.sqrt(2.0) * p.table.rows_per_unit / smallest + margin)


def with_values(p: Plan, chosen: Sequence[float]) -> Plan:
    """``p`` with its value-bounded aggregates reading the released bounds, its measurements
    calibrated to them at ``rest``; the cost is unchanged (module docstring, composition)."""
    values = _ordered(tuple(replace(v, value=c) for v, c in zip(p.values, chosen, strict=True)))
    query = clamped(p.query, values)
    done = plan(replace(query, table=p.table), values[0].rest, p.delta, p.mechanism)
    return replace(done, epsilon=p.epsilon, cost_epsilon=p.cost_epsilon, auto=p.auto,
                   values=values)


def _ordered(values: tuple[AutoValue, ...]) -> tuple[AutoValue, ...]:
    """A column's two chosen bounds in order. Drawn independently, each finest near its own
    origin (0, or the opposite declared bound on a column that does not straddle 0), the
    lower can land above the upper; the column is then read between them, swapped
    (post-processing of the released pair), rather than as the constant that LEAST(GREATEST(x,
    lo), hi) with lo > hi is, in SQL of another shape than the one compiled before the
    charge."""
    drawn = {(v.column, v.side): v.value for v in values}
    out = []
    for v in values:
        lo, hi = drawn.get((v.column, "lower")), drawn.get((v.column, "upper"))
        if lo is not None and hi is not None and lo > hi:
            v = replace(v, value=lo if v.side == "upper" else hi)
        out.append(v)
    return tuple(out)


def clamped(query: CheckedQuery, values: Sequence[AutoValue]) -> CheckedQuery:
    """``query`` with each value-bounded argument reading its columns clamped to ``values``."""
    limits: dict[str, list[float]] = {}
    for v in values:
        assert v.value is not None
        limits.setdefault(v.column, [v.lower, v.upper])[v.side == "upper"] = v.value
    table = query.table

    def clamp(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Column) or node.name.lower() not in limits:
            return node
        lo, hi = (_literal(x, table, node.name) for x in limits[node.name.lower()])
        return exp.Least(this=exp.Greatest(this=node.copy(), expressions=[lo]),
                         expressions=[hi])

    calls = [replace(c, arg=c.arg.copy().transform(clamp)) if _takes_bound(c) and c.arg
             else c for c in query.aggregates]
    return replace(query, aggregates=calls)


def _literal(value: float, table: Table, column: str) -> exp.Expression:
    meta = table.column(column)
    number = int(value) if meta is not None and meta.type == ColumnType.INT else value
    literal = exp.Literal.number(abs(number))
    return exp.Neg(this=literal) if number < 0 else literal


def with_rows_above(p: Plan) -> Plan:
    """``p`` (calibrated to a released k) with each side's ``above`` for that k."""
    return replace(p, values=tuple(replace(v, above=value_above(p, v)) for v in p.values))


def chosen_bounds(p: Plan) -> dict[str, tuple[float, float]] | None:
    """Per column with a bound chosen from the data, the (lower, upper) its sums read."""
    if not p.values:
        return None
    out: dict[str, tuple[float, float]] = {}
    for v in p.values:
        assert v.value is not None
        lo, hi = out.get(v.column, (v.lower, v.upper))
        out[v.column] = (v.value, hi) if v.side == "lower" else (lo, v.value)
    return out
