"""The privacy argument of every aggregate, in one place.

Notation. After contribution bounding, one privacy unit contributes at most ``k`` rows to a query
(``Table.rows_per_unit``), and with GROUP BY those rows fall into at most ``g' = min(g, k)``
groups (``Table.groups_per_unit``). Neighbouring databases differ by all rows of one unit. Every
value entering an aggregate is clamped in SQL to an interval ``[L, U]`` derived by interval
arithmetic from the declared bounds (:mod:`dpsql.query.bounds`); ``M = max(|L|, |U|)``, the midpoint
``c = (L + U) / 2`` and the half-width ``h = (U - L) / 2``.

**Joins** (:mod:`dpsql.query.joins`). A joined query is planned over one *joined table* whose k and
g are enforced on the joined rows, after the join and before aggregation, exactly as on one
table's rows; removing a unit removes exactly its joined rows. So every formula below holds for
joins with the joined table's k and g, whatever the join multiplied.

Each aggregate is answered from one or more *measurements*: exact aggregates that the engine
computes per group and that are perturbed exactly once (:mod:`dpsql.privacy.mechanisms`). The
sensitivity below is over the whole vector of groups (parallel composition: a unit's k rows can
change the groups' values by at most this much in total), so the noise for each group is calibrated
to it and the query is charged once, not once per group.

==========================  =======================================  ================  ===========
aggregate                   measurements                             L1 sensitivity    L2
==========================  =======================================  ================  ===========
COUNT(*), COUNT(x)          number of (non-NULL) rows (*)            k                 k
COUNT(DISTINCT unit)        number of distinct units                 g'                sqrt(g')
COUNT(DISTINCT x)           number of distinct values                k                 k
SUM(x)                      sum of clamp(x)                          k * M             k * M
SUM(x, per-group (lo, hi))  sum over units of clamp(unit's total)    g' * P            sqrt(g') P
AVG(x, per-group (lo, hi))  units with a value; sum over units of     g'; g' * h        sqrt(g'),
                            (clamp(unit's average) - c)                                 sqrt(g') h
AVG(x)                      n = COUNT(x); S = sum of (clamp(x) - c)  k; k * h          same
VAR/STDDEV(x)               n; S1 = sum(y); S2 = sum(y^2), y=x-c     k; k*h; k*h^2     same
MEDIAN/QUANTILE/MIN/MAX     histogram of clamp(x) over B buckets,    utility: k        -
                            exponential mechanism (one per group)
==========================  =======================================  ================  ===========

In the per-group row (BigQuery's ``contribution_bounds_per_group``, :func:`_per_group_sum`),
``P = max(|lo|, |hi|)``: a unit adds its clamped total, at most P, to each of the at most g'
groups it keeps; no row cap k enters (the groups cap is always applied, :func:`groups_cap`).
In the per-group AVG row (ZetaSQL's AVG, :func:`_per_person_avg`) a unit adds 1 to the count
of units and its clamped average minus ``c``, at most ``h``, to the sum, in each of at most g'
groups.

(*) COUNT(x), and the count inside AVG(x) and VAR(x), of a column declared NOT NULL is COUNT(*):
one measurement for all of them (:func:`counted`).

The L2 column is the worst case of k rows all in one group (then L2 = L1); for distinct units a
unit adds 1 to each of at most g' groups. Everything computed from the noisy measurements is
post-processing: AVG = c + S~/max(n~, 1), clamped to [L, U]; VAR_POP = S2~/n - (S1~/n)^2, clamped
to [0, h^2]; VAR_SAMP = VAR_POP * n/(n-1); STDDEV = sqrt(VAR). For quantiles, bucket j covers the
ranks [r_j, r_{j+1}] and has utility -dist(q*n, [r_j, r_{j+1}]); adding or removing a unit moves
every r_j and q*n by at most k, so the utility's sensitivity is k, and in each group the bucket is
drawn with probability proportional to exp(eps * u / (2k)). Across groups the unit's k rows change
the utilities by at most k in total, which bounds the privacy loss of all groups together by eps.
B = HISTOGRAM_BUCKETS (2**16) equal buckets for dates, timestamps and integers of a narrow range
(one per value); real values (and wider integers) on the fine grid of
:mod:`dpsql.privacy.quantile_grid`, those buckets refined by geometric ones 0.1% of the value
wide around 0, any fixed partition of [L, U] being as private. Runs of empty buckets are drawn
as one interval (the continuous-interval method, :func:`dpsql.privacy.quantiles.
quantile_from_buckets`, :func:`~dpsql.privacy.quantiles.quantile_from_intervals`).

**Two forms of bounding, the same sensitivities.** A unit's "k rows in g' groups" is enforced
either by a sample of its rows or, for counts and sums, on its per-(unit, group) aggregates:
``min(n, k)`` rows allocated over its g' kept groups, each group's aggregates scaled to its
share and clamped to that many rows' range. Either way a unit changes the counts by at most k
in total, each sum by at most k times one row's bound, and COUNT(DISTINCT unit) in at most g'
groups: the table above holds for both (the argument, kind by kind, is in
:mod:`dpsql.execution.rewrite`).

**Bounding by weights** (:func:`weight_bits`; issue 23: counts and sums over public keys
without a groups cap, the GROUP BY every chart sends). Instead of choosing which rows or how
many of them a unit keeps in each group, every row of a unit with ``t`` rows (in all its
groups, after WHERE) enters with the same weight ``w = W / 2**F``, ``W = min(2**F, floor(k
2**F / t))`` an integer (``F = WEIGHT_BITS``): the unit contributes ``n_j W`` (in units of
``2**-F`` rows) to group j's count and ``q_j W`` to a sum, ``q_j`` the exact integer sum of
its quantised row terms in group j. All integers, summed exactly (HUGEINT). Per kind, ``T``
one row's term bound:

- counts: ``sum_j n_j W = t W <= k 2**F``: at most k rows in total, L1 <= k, L2 <= L1;
- sums: ``|sum_j q_j W| <= t T W <= k T 2**F``: L1 <= k T in value units, L2 <= L1;
- a quantile's histogram (issue 39.4: MEDIAN, quantiles, MIN, MAX, with no GROUP BY or one
  over public keys, beside counts and sums only): bucket b of group j holds ``sum W`` over
  the rows in it, ``n_jb W`` from unit u; in units of ``2**-F`` rows (``step``) every rank
  ``r_b`` of group j and its ``n`` move by at most ``n_j W / 2**F``, in one direction, so its
  utilities by at most that, and over all groups by ``t W / 2**F <= k``: the utility's
  sensitivity k in each group and in total, group j's draw costing ``eps n_j W / (k 2**F)``,
  all of them ``eps`` (the quantile row of the table, the weights in place of the k-row
  sample's rows);

exactly the table's sensitivities. ``W`` depends on the unit's own rows only, so adding or
removing a unit moves each measurement by exactly its own contribution (no salt is needed:
nothing is sampled). The measurements are real-valued fixed-point sums (:func:`weighted`:
``step = row_step 2**-F``, a count's row step being 1 row), noised on their grid like every
real sum; a unit reaches every group it has rows in (up to the whole public domain), and the
noise grid pays one step per such cell (:func:`Plan.groups_per_unit`), a relative cost of
about ``|domain| 2**-40``. A released count is the noisy real count rounded. The expected
contribution of a unit to group j is ``k n_j / t`` rows when ``t > k``, the same as the k-row
sample's and the allocation's (the bias is unchanged, ``benchmarks/README.md`` measures it);
the weights have no sampling variance at all.

**When the groups cap buys something** (:func:`groups_cap`; issue 21). The cap of ``g`` groups
per unit costs bias (a unit's rows in its other groups are dropped), so the plan applies it
only where it lowers what is released. Let a unit keep ``k`` rows, ``n_j`` of them in group
``j``, ``sum_j n_j <= k``, and ``T`` bound one row's term:

- *Laplace over public keys* (COUNT, COUNT(x), SUM, the sums of AVG and VAR/STDDEV, COUNT
  (DISTINCT x)): L1 = ``sum_j n_j T <= k T`` whatever the number of groups: the cap changes
  nothing in the noise, so it is **not applied**; the unit keeps its k rows across all its
  groups (with per-unit aggregates: ``min(n, k)`` rows allocated over all its groups).
- *Gaussian* over public keys, the same measurements: L2 = ``sqrt(sum_j (n_j T)^2) <= k T``,
  reached by k rows in one group; a cap of g groups lowers it only together with a per-group
  row cap ``k_g`` (then L2 <= ``min(k, sqrt(g) k_g) T``). dpsql has no per-group row cap, so the
  groups cap is **not applied** either (a per-query per-group cap, when it comes with the
  bounds in force, is the place to apply it: ``sqrt(g) k_g < k`` is the test).
- *Quantiles, MIN, MAX* (the exponential mechanism, one draw per group): adding a unit moves
  group j's utilities by at most ``n_j``, so group j's draw costs ``eps n_j / k`` and all
  groups together ``eps sum_j n_j / k <= eps``: no cap needed, **not applied**.
- *COUNT(DISTINCT unit)*: one unit adds 1 in each group it reaches: L1 = ``g'``, L2 =
  ``sqrt(g')`` with the cap, ``min(k, groups)`` without; the cap **is applied** when the query
  has this measurement (it is what lowers the noise; COUNT(*) beside it then keeps the capped
  rows as well, one bounding for the whole query).
- *SUM with per-group bounds* (:func:`_per_group_sum`): L1 = ``g' P`` needs the cap: it
  **is applied**.
- *Keys released by thresholding*: tau is computed from g (one unit can push at most g' groups
  over it, :mod:`dpsql.privacy.thresholds`), so the cap **is applied**.

The noise grid of real cells pays one grid step per group a unit reaches
(:func:`Plan.groups_per_unit`): g' with the cap, ``min(k, |domain|)`` without, ``|domain|``
with weighted rows.

**Exact sums** (Casacuberta, Shoemate, Vadhan and Wagaman, CCS 2022). The sensitivities above
hold for sums in real arithmetic. A floating-point SUM is not one: each addition rounds, and the
engine adds in an order of its own (threads, hash tables), so adding one row can change a
double sum by far more than the row (1e16 + 1.0 + 1.0 - 1e16 is 0 or 2 depending on the order),
and an attacker who places such values can read a row's presence off the rounding. So every
real-valued sum (SUM of a non-integer input, the centred sums of AVG and VAR/STDDEV) is a sum
of *integers*. Its measurement carries a fixed-point grid ``step = 2**(e - SUM_BITS)``, a power
of two with ``2**e > T``, ``T = max(|t_lo|, |t_hi|)`` the bound of one row's term ``t``
(``[L, U]`` for SUM, ``[-h, h]`` for the centred sum, ``[0, h^2]`` for the squared one: exactly
the per-row bounds of the table, so ``l1 = k T``). The engine computes
``q = clamp(CAST(ROUND(t / step) AS BIGINT), ceil(t_lo / step), floor(t_hi / step))``: dividing
by a power of two is exact, ``|q| < 2**SUM_BITS`` fits BIGINT, and the integer clamp (bounds
computed exactly with fractions at plan time) guarantees ``q * step`` in ``[t_lo, t_hi]``
whatever rounding ``t`` itself went through (``x - c`` can exceed ``h`` by an ulp). It then sums
``q`` in HUGEINT, exact and order-independent, so the measurement is a *function* of the
multiset of rows, and a unit's k rows change it by at most ``k * T / step`` integer units:
``k T = l1`` in value units, exactly the sensitivity above. :mod:`dpsql.execution.perturb` rescales
the integer sum to the noise grid with integer arithmetic
(:func:`dpsql.privacy.mechanisms.perturb_fixed`), so no float rounding happens before the noise
either. The cost in accuracy is the quantisation of each row by at most ``step / 2 <= T *
2**-SUM_BITS``, the order of float64's own rounding of one value. Integer inputs (integer SUM, every
COUNT) are summed in HUGEINT as they are: exact.

**The registry.** Each aggregate is one :class:`Aggregate` in :data:`AGGREGATES` (its SQL names,
which :mod:`dpsql.query.check` recognises, are its kind's entry of
:data:`dpsql.query.aggregate_calls.FUNCTIONS`): how it is measured (the measurement specs and their
sensitivities, with the formula of the table above in the builder's docstring), how the noisy
measurements combine into the cell (post-processing), and the cell's accuracy. Every pass asks
the registry; adding an aggregate is adding one entry (see ``docs/architecture.md``).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from fractions import Fraction
from functools import cached_property

import numpy as np
from sqlglot import exp

from dpsql.errors import UnboundedExpression, UnsupportedQuery
from dpsql.metadata.metadata import Table
from dpsql.privacy.mechanisms import Mechanism, NoiseSpec
from dpsql.privacy.quantile_grid import Grid
from dpsql.query.aggregate_calls import AggregateCall
from dpsql.query.bounds import Bound, bound, numeric_bound
from dpsql.query.dates import written
from dpsql.query.dp_clause import row_clamp
from dpsql.query.total_expressions import clamped_column

#: Buckets of a quantile's histogram (one per value for integer inputs with at most this many
#: values): 2**16 equal buckets of [L, U], so a median over [0, 200000] is drawn to within
#: about 3 (1000 buckets gave errors of about 50, issue 21.5). The engine returns only the
#: non-empty buckets and the mechanism reads only those (dpsql.privacy.quantiles), so the cost
#: is at most one entry per row, whatever B; benchmarks/bench_median.py measures it.
HISTOGRAM_BUCKETS = 2**16
#: Bits of the fixed-point grid of real sums: one row's term is at most 2**SUM_BITS grid steps.
SUM_BITS = 52


class MeasurementKind(StrEnum):
    """What the engine computes per group for one measurement (see ``rewrite.MEASURES``)."""

    COUNT = "count"  # rows (of a non-NULL argument)
    UNITS = "units"  # distinct privacy units
    DISTINCT = "distinct"  # distinct non-NULL values
    SUM = "sum"  # a clamped sum (or of (x - center) ** power)
    HISTOGRAM = "histogram"  # bucket counts, for the exponential mechanism


@dataclass(frozen=True)
class MeasurementSpec:
    """One exact per-group aggregate that the engine computes and the perturb pass noises, as
    an aggregate asks for it: what to compute, and its sensitivity."""

    kind: MeasurementKind
    arg: exp.Expression | None  # row-level input over base columns (None: every row)
    lo: float = 0.0  # clamp interval of the input (sum, histogram)
    hi: float = 0.0
    center: float = 0.0  # sum of (x - center)
    power: int = 1  # sum of (x - center) ** power
    integer: bool = True
    l1: float = 1.0
    l2: float = 1.0
    buckets: int = 0  # histogram only
    # histogram only: each quantile is its own exponential-mechanism draw, so its own
    # measurement (and its own share of epsilon), even over the same histogram
    quantile: float | None = None
    mechanism: Mechanism = Mechanism.LAPLACE
    # Real-valued sums only (see "Exact sums" above): the fixed-point grid (a power of two,
    # 0.0 when the sum is not quantised) and the integer range of one row's quantised term.
    step: float = 0.0
    units: tuple[int, int] = (0, 0)
    # histogram only: the input is a date, measured as its day number since EPOCH_DAY
    dates: bool = False
    # histogram only: the input is a timestamp, measured as its seconds since EPOCH_DAY (EPOCH)
    instants: bool = False
    # Weighted rows only (see "Bounding by weights" above): F > 0 when each unit's rows enter
    # with the weight floor(k 2**F / t) / 2**F, t its rows; the engine's integer is then in
    # units of ``step``, one row's term on the grid ``row_step`` (0.0: the integer term itself)
    weight_bits: int = 0
    row_step: float = 0.0
    # Sums with BigQuery's per-group bounds only (:func:`_per_group_sum`): the clamp of each
    # unit's total in a group, in the integers the engine sums (None: no such clamp)
    per_group: tuple[int, int] | None = None
    #: ZetaSQL's per-person AVG only (:func:`_per_person_avg`): "present", a count of the units
    #: with a non-NULL value; "mean", a sum of each unit's clamped, centred average (its row
    #: terms on the grid ``row_grid``: (step, lowest, highest), None for integer rows)
    person: str = ""
    row_grid: tuple[float, int, int] | None = None
    #: histogram only: keys of the fine grid (:mod:`dpsql.privacy.quantile_grid`), not of
    #: ``buckets`` equal buckets
    fine: bool = False

    @property
    def histogram_range(self) -> tuple[float, float]:
        """[lo, hi) split into ``buckets`` equal buckets; integer inputs get one per value."""
        return (self.lo, self.hi + 1) if self.integer else (self.lo, self.hi)

    @cached_property
    def key(self) -> tuple[object, ...]:
        """Two specs with the same key are one measurement (computed and noised once)."""
        arg = self.arg.sql(dialect="duckdb") if self.arg is not None else None
        return (self.kind, arg, self.lo, self.hi, self.center, self.power, self.buckets,
                self.quantile, self.mechanism, self.step, self.units, self.dates, self.instants,
                self.weight_bits, self.row_step, self.per_group, self.person, self.row_grid,
                self.fine)


@dataclass(frozen=True, kw_only=True)
class Measurement(MeasurementSpec):
    """A measurement calibrated by the plan: its column in the engine's rows (``index``, and
    ``name`` in the rewritten SQL), its share of epsilon and its noise (None for the
    exponential mechanism, which draws its own)."""

    name: str
    index: int
    epsilon: float
    noise: NoiseSpec | None


@dataclass(frozen=True)
class Cell:
    """One output aggregate: its definition, its measurements (specs from the aggregate, then
    calibrated measurements in the plan) and the bound of its input."""

    call: AggregateCall
    aggregate: Aggregate
    measurements: tuple[MeasurementSpec, ...]
    type: str  # "BIGINT", "DOUBLE", "DATE" or "TIMESTAMP" (a date or timestamp quantile)
    bound: Bound | None = None

    @property
    def accuracy_unit(self) -> str:
        return self.aggregate.accuracy_unit

    def combine(self, parts: Sequence[np.ndarray]) -> np.ndarray:
        """The cell's noisy values from its noisy measurements (post-processing)."""
        return self.aggregate.combine(self, parts)

    def accuracy(self, parts: Sequence[np.ndarray], widths: Sequence[float]) -> np.ndarray:
        """95% half-widths per group from the measurements' half-widths ``widths``."""
        return self.aggregate.accuracy(self, parts, widths)


Combine = Callable[[Cell, Sequence[np.ndarray]], np.ndarray]
Accuracy = Callable[[Cell, Sequence[np.ndarray], Sequence[float]], np.ndarray]
Measure = Callable[[AggregateCall, Table, bool, Mechanism], Cell]


@dataclass(frozen=True)
class Aggregate:
    """Everything every pass asks of one aggregate."""

    kind: str  # its SQL names: dpsql.query.aggregate_calls.FUNCTIONS[kind]
    measure: Measure  # the cell: measurement specs and their sensitivities
    combine: Combine
    accuracy: Accuracy
    accuracy_unit: str = "value"  # or "rank" for the exponential mechanism
    #: per measurement of the cell, the square of its worst-case coefficient in the cell's
    #: first-order error, each in units of its per-row bound (the budget split weighs each
    #: measurement by the sum over the cells that use it: dpsql.privacy.plan); () is all 1
    weights: tuple[float, ...] = ()

    def weight(self, position: int) -> float:
        return self.weights[position] if self.weights else 1.0


def cell_for(call: AggregateCall, table: Table, grouped: bool, mechanism: Mechanism) -> Cell:
    """The measurements of one aggregate call, from its definition in :data:`AGGREGATES`."""
    return AGGREGATES[call.kind].measure(call, table, grouped, mechanism)


# ------------------------------------------------------------------------- measurements


def fixed_point(term_lo: float, term_hi: float) -> tuple[float, tuple[int, int]]:
    """The grid of a real sum whose per-row term lies in ``[term_lo, term_hi]``: ``step`` (a
    power of two, ``T / step < 2**SUM_BITS`` for ``T = max(|term_lo|, |term_hi|)``) and the
    integer range ``[ceil(term_lo / step), floor(term_hi / step)]``, computed exactly."""
    bound = max(abs(term_lo), abs(term_hi))
    if bound == 0.0:
        return 1.0, (0, 0)
    exponent = math.frexp(bound)[1]  # bound < 2**exponent
    step = math.ldexp(1.0, max(exponent - SUM_BITS, -1074))
    grid = Fraction(step)
    return step, (math.ceil(Fraction(term_lo) / grid), math.floor(Fraction(term_hi) / grid))


def _real_sum(arg: exp.Expression, b: Bound, term: tuple[float, float], k: int,
              mechanism: Mechanism, center: float = 0.0, power: int = 1) -> MeasurementSpec:
    """An exactly summed real-valued measurement whose per-row term lies in ``term``: its
    sensitivity is ``k * max(|term|)`` (L1 and L2), its grid from :func:`fixed_point`."""
    sens = k * max(abs(term[0]), abs(term[1]))
    step, units = fixed_point(*term)
    return MeasurementSpec(MeasurementKind.SUM, arg, b.lo, b.hi, center=center, power=power,
                           integer=False, l1=sens, l2=sens, mechanism=mechanism, step=step,
                           units=units)


def units_measurement(table: Table, groups: int, mechanism: Mechanism) -> MeasurementSpec:
    """The number of distinct units per group: sensitivity g' in L1, sqrt(g') in L2.

    Without contribution bounding each row is a unit, so this is COUNT(*) with sensitivity 1.
    """
    if not table.needs_bounding:
        return MeasurementSpec(MeasurementKind.COUNT, None, l1=1, l2=1, mechanism=mechanism)
    return MeasurementSpec(MeasurementKind.UNITS, None, l1=groups, l2=math.sqrt(groups),
                           mechanism=mechanism)


#: F, the bits of the weights' fixed-point grid: a unit's weight is ``floor(k 2**F / t)`` in
#: units of 2**-F rows, so a unit over k rows loses less than 2**-F of a row to the rounding.
WEIGHT_BITS = 20
#: The largest row term (in its grid's units) that weighted sums accept: 2**52 units times the
#: weight 2**F over 2**40 rows stays far inside HUGEINT (2**127).
_WEIGHTED_TERM = 2**52


def weight_bits(table: Table, grouped: bool, public: bool, cap: int | None,
                specs: Sequence[MeasurementSpec]) -> int:
    """F when the rewrite bounds contributions by weighting each unit's rows (module docstring,
    "Bounding by weights"), else 0: every measurement a count, a sum or a quantile's
    histogram, public keys or none (a histogram's: without GROUP BY counts and sums alone are
    bounded on per-unit aggregates), no groups cap (Laplace or Gaussian over public keys; the
    exponential mechanism), and terms small enough for exact sums."""
    histogram = any(s.kind == MeasurementKind.HISTOGRAM for s in specs)
    if not (table.needs_bounding and (public if grouped else histogram) and cap is None):
        return 0
    for s in specs:
        if s.kind == MeasurementKind.SUM:
            terms = s.units if s.step else (int(s.lo), int(s.hi))
            if max(abs(terms[0]), abs(terms[1])) > _WEIGHTED_TERM:
                return 0
        elif s.kind not in (MeasurementKind.COUNT, MeasurementKind.HISTOGRAM):
            return 0
    return WEIGHT_BITS


def weighted(spec: MeasurementSpec, bits: int) -> MeasurementSpec:
    """``spec`` measured on weighted rows: a real-valued fixed-point sum whose engine integer is
    in units of ``step = row_step 2**-F`` (``2**-F`` rows for a count, whose row term is 1);
    its sensitivity is unchanged (module docstring, "Bounding by weights"). A histogram's
    counts are sums of weights in units of ``step = 2**-F`` rows (its buckets unchanged)."""
    if spec.kind == MeasurementKind.HISTOGRAM:
        return replace(spec, step=math.ldexp(1.0, -bits), weight_bits=bits)
    if spec.kind == MeasurementKind.COUNT:
        row_step, terms = 0.0, (0, 1)
    else:
        row_step = spec.step
        terms = spec.units if spec.step else (int(spec.lo), int(spec.hi))
    return replace(spec, integer=False, step=math.ldexp(row_step or 1.0, -bits),
                   units=(terms[0] << bits, terms[1] << bits), weight_bits=bits,
                   row_step=row_step)


def groups_cap(table: Table, specs: Sequence[MeasurementSpec], thresholded: bool) -> int | None:
    """g' = min(g, k) when the groups cap lowers what the query releases, else None (no cap:
    a unit keeps its k rows across all its groups). The cases and their sensitivities are in
    the module docstring, "When the groups cap buys something": the cap is applied for keys
    released by thresholding and for a count of distinct units, and nowhere else -- but
    always when the query's BigQuery clause wrote ``max_groups_contributed``
    (``Table.groups_bound``): BigQuery's meaning, each unit keeps at most g groups."""
    if not table.needs_bounding:
        return None
    if thresholded or table.groups_bound or any(
            s.kind == MeasurementKind.UNITS or s.per_group is not None for s in specs):
        return table.groups_per_unit
    return None


def check_per_group_sums(table: Table, specs: Sequence[MeasurementSpec]) -> None:
    """A SUM with per-group bounds is answered on per-(unit, group) totals
    (:func:`_per_group_sum`): with counts and sums only, which the same path bounds; refused
    beside the aggregates that need a sample of rows (quantiles, MIN, MAX, COUNT(DISTINCT x))."""
    if not (table.needs_bounding and any(s.per_group is not None for s in specs)):
        return
    if any(s.kind not in _PER_UNIT for s in specs):
        raise UnsupportedQuery(
            "SUM(...) or COUNT(...) with contribution_bounds_per_group => ... is answered on "
            "each unit's totals, with counts and sums only; ask for the quantiles, MIN, MAX or "
            "COUNT(DISTINCT x) in another query, or write contribution_bounds_per_row => "
            "(lower, upper) on the SUM")


_PER_UNIT = (MeasurementKind.COUNT, MeasurementKind.UNITS, MeasurementKind.SUM)


def counted(arg: exp.Expression | None, table: Table) -> exp.Expression | None:
    """What a count of rows of ``arg`` counts: None (every row, the measurement of COUNT(*))
    when ``arg`` is a column the metadata declares NOT NULL (``nullable = false`` written out,
    ``Column.not_null``; a column an outer join may NULL-fill is nullable in the joined
    table), so that COUNT(*), COUNT(x) and
    the count inside AVG(x) and VAR(x) are one measurement, noised once, with the budget of
    one (issue 21). The sensitivity is k either way; a declaration the data breaks costs
    accuracy (x's NULL rows counted), never privacy. ``LEAST(GREATEST(x, lo), hi)`` of such
    a column (:func:`~dpsql.query.total_expressions.clamped_column`: read NULL exactly where x
    is) counts the same rows: an automatic value bound (:mod:`dpsql.privacy.auto_values`)
    wraps x so after the charge, and must keep the measurements compiled before it."""
    narrowed = clamped_column(arg, table) if arg is not None else None
    read = narrowed[0] if narrowed is not None else arg
    if isinstance(read, exp.Column):
        column = table.column(read.name)
        if column is not None and column.not_null and not column.nullable:
            return None
    return arg


def _is_unit(arg: exp.Expression | None, table: Table) -> bool:
    return (isinstance(arg, exp.Column) and table.privacy_unit is not None
            and arg.name.lower() == table.privacy_unit)


def _bound(call: AggregateCall, table: Table) -> Bound:
    assert call.arg is not None  # check refuses SUM(*), AVG(*), ...: only COUNT takes *
    return numeric_bound(call.arg, table, call.text)


# ------------------------------------------------------------------------- the aggregates


def _count(call: AggregateCall, table: Table, grouped: bool, mechanism: Mechanism) -> Cell:
    """COUNT(*), COUNT(x), COUNT_IF: rows, L1 = L2 = k. COUNT(DISTINCT unit): units per group,
    L1 = g', L2 = sqrt(g'). COUNT(DISTINCT x): L1 = L2 = k (k rows add at most k values)."""
    k = table.rows_per_unit
    if call.distinct and _is_unit(call.arg, table):
        m = units_measurement(table, table.groups_per_unit if grouped else 1, mechanism)
    else:
        m = MeasurementSpec(MeasurementKind.DISTINCT if call.distinct else MeasurementKind.COUNT,
                            call.arg if call.distinct else counted(call.arg, table), l1=k,
                            l2=k, mechanism=mechanism)
    return Cell(call, COUNT, (m,), "BIGINT")


def _sum(call: AggregateCall, table: Table, grouped: bool, mechanism: Mechanism) -> Cell:
    """SUM(x): the sum of clamp(x) to [L, U], L1 = L2 = k * M. Integer inputs are summed as
    they are (HUGEINT, exact); real ones on a fixed-point grid (see Exact sums)."""
    if call.per_group is not None:
        return _per_group_sum(call, table, grouped, mechanism)
    b, k = _bound(call, table), table.rows_per_unit
    assert call.arg is not None
    integer = b.kind in ("int", "bool") and float(b.lo).is_integer() and float(b.hi).is_integer()
    if integer:
        sens = k * b.magnitude
        m = MeasurementSpec(MeasurementKind.SUM, call.arg, b.lo, b.hi, integer=True, l1=sens,
                            l2=sens, mechanism=mechanism)
    else:
        m = _real_sum(call.arg, b, (b.lo, b.hi), k, mechanism)
    return Cell(call, SUM, (m,), "BIGINT" if integer else "DOUBLE", bound=b)


def _per_group_sum(call: AggregateCall, table: Table, grouped: bool, mechanism: Mechanism
                   ) -> Cell:
    """BigQuery's ``SUM(x, contribution_bounds_per_group => (lo, hi))``: per group, the sum over
    units of ``clamp(t_u, lo, hi)``, ``t_u`` the sum of unit u's rows in the group. ``M = max(
    |lo|, |hi|)``. The rewrite (:mod:`dpsql.execution.rewrite`, per-unit aggregates) computes
    ``t_u`` exactly (every row of the unit in the group, no row cap: the clamp bounds the total
    whatever the rows) and clamps it, and a unit keeps at most ``g' = min(g, k)`` groups (the
    cap is always applied: :func:`groups_cap`). A unit's contribution is a function of its own
    rows and the salt, at most ``M`` in each of at most ``g'`` groups: L1 = ``g' M``, L2 =
    ``sqrt(g') M`` (one group without GROUP BY). Where each row is its own unit (no bounding)
    the unit's total is its row: the row is clamped, SUM's own case with k = 1 (L1 = L2 = M).

    The rows are read clamped to their declared bounds ``[L, U]`` (every column is), so ``x``
    must be bounded; real totals are exact sums on the grid of one row's term (``Exact
    sums``), clamped on that grid to ``[ceil(lo / step), floor(hi / step)]``, inside
    ``[lo, hi]``; integer totals to ``[ceil(lo), floor(hi)]``."""
    assert call.arg is not None and call.per_group is not None
    lo, hi = call.per_group
    if not table.needs_bounding:  # each row is its unit: its total is the row
        clamped = exp.Least(this=exp.Greatest(this=call.arg.copy(), expressions=[_literal(lo)]),
                            expressions=[_literal(hi)])
        return _sum(replace(call, arg=clamped, per_group=None), table, grouped, mechanism)
    b, g = _bound(call, table), table.groups_per_unit if grouped else 1
    magnitude = max(abs(lo), abs(hi))
    integer = b.kind in ("int", "bool") and float(b.lo).is_integer() and float(b.hi).is_integer()
    # One grid for the rows and the clamp (fine enough for the larger of the two), so both
    # fit: a row's term and the clamp at most 2**SUM_BITS steps, sums of them far from HUGEINT's.
    step = 0.0 if integer else fixed_point(min(b.lo, lo), max(b.hi, hi))[0]
    grid = Fraction(step) if step else Fraction(1)
    units = (0, 0) if integer else (math.ceil(Fraction(b.lo) / grid),
                                    math.floor(Fraction(b.hi) / grid))
    clamp = (math.ceil(Fraction(lo) / grid), math.floor(Fraction(hi) / grid))
    if max(abs(clamp[0]), abs(clamp[1])) >= 2**_PER_GROUP_BITS:
        raise UnsupportedQuery(f"{call.text}: contribution_bounds_per_group => ({lo:g}, {hi:g}) "
                               f"is beyond 2**{_PER_GROUP_BITS}, more than dpsql sums exactly; "
                               "give bounds of the size of the totals")
    m = MeasurementSpec(MeasurementKind.SUM, call.arg, b.lo, b.hi, integer=integer,
                        l1=g * magnitude, l2=math.sqrt(g) * magnitude, mechanism=mechanism,
                        step=step, units=units, per_group=clamp)
    return Cell(call, SUM, (m,), "BIGINT" if integer else "DOUBLE", bound=b)


#: The largest clamp of a unit's total (in its grid's units) summed exactly: 2**40 units' totals
#: stay inside HUGEINT.
_PER_GROUP_BITS = 80


def _literal(value: float) -> exp.Expression:
    number = exp.Literal.number(str(int(abs(value))) if value.is_integer() else repr(abs(value)))
    return exp.Neg(this=number) if value < 0 else number


def _avg(call: AggregateCall, table: Table, grouped: bool, mechanism: Mechanism) -> Cell:
    """AVG(x) = c + S / max(n, 1), clamped to [L, U]: n = COUNT(x) (L1 = k) and the centred sum
    S = sum(clamp(x) - c) (L1 = k * h), so a unit's rows move S by h each, not M."""
    if call.per_person:
        return _per_person_avg(call, table, grouped, mechanism)
    b, k = _bound(call, table), table.rows_per_unit
    assert call.arg is not None
    c, h = (b.lo + b.hi) / 2, (b.hi - b.lo) / 2
    n = MeasurementSpec(MeasurementKind.COUNT, counted(call.arg, table), l1=k, l2=k,
                        mechanism=mechanism)
    s = _real_sum(call.arg, b, (-h, h), k, mechanism, center=c)
    return Cell(call, AVG, (n, s), "DOUBLE", bound=b)


def _per_person_avg(call: AggregateCall, table: Table, grouped: bool, mechanism: Mechanism
                    ) -> Cell:
    """ZetaSQL's AVG (``AVG(x, contribution_bounds_per_group => (lo, hi))``, and AVG inside
    ``SELECT WITH DIFFERENTIAL_PRIVACY`` with ``[lo, hi]`` the bounds ``[L, U]`` of x): per
    group, the average over units of ``clamp(a_u, lo, hi)``, ``a_u`` the average of unit u's
    non-NULL values in the group; a unit without one contributes nothing. With ``c = (lo + hi)
    / 2`` and ``h = (hi - lo) / 2`` it is ``c + S / max(n, 1)`` clamped to ``[lo, hi]`` (AVG's
    own post-processing), from two measurements on each unit's per-group aggregates
    (:mod:`dpsql.execution.rewrite`, the per-unit path, the groups cap always applied, no row
    cap: the clamp bounds the average whatever the rows):

    - n, the units with a non-NULL value: a unit adds 1 to each of at most ``g'`` groups:
      L1 = ``g'``, L2 = ``sqrt(g')``;
    - S, the sum over units of ``clamp(a_u, lo, hi) - c``: at most ``h`` in each of at most
      ``g'`` groups: L1 = ``g' h``, L2 = ``sqrt(g') h``.

    ``a_u = p_u / n_u`` from the unit's exact integer sum ``p_u`` of its row terms (on the
    rows' grid, "Exact sums") and its count ``n_u``: a function of its own rows; the centred
    term is rounded onto S's grid and clamped there to ``[ceil(-h / step), floor(h / step)]``,
    so S is an exact integer sum whatever the rounding of the division. Where each row is its
    own unit (no bounding) ``a_u`` is the row: AVG of the rows clamped to ``[lo, hi]``, NULL
    kept (``_avg`` with k = 1)."""
    assert call.arg is not None
    if not table.needs_bounding:  # each row is its unit: its average is the row
        arg = call.arg if call.per_group is None else row_clamp(
            call.arg.copy(), _literal(call.per_group[0]), _literal(call.per_group[1]))
        return _avg(replace(call, arg=arg, per_group=None, per_person=False), table, grouped,
                    mechanism)
    b, g = _bound(call, table), table.groups_per_unit if grouped else 1
    lo, hi = call.per_group if call.per_group is not None else (b.lo, b.hi)
    # halves first: (hi - lo) overflows for bounds near the largest double (the same
    # correctly rounded values otherwise)
    c, h = lo / 2 + hi / 2, hi / 2 - lo / 2
    integer = b.kind in ("int", "bool") and float(b.lo).is_integer() and float(b.hi).is_integer()
    row_grid = None
    if not integer:
        row_step, row_units = fixed_point(b.lo, b.hi)
        row_grid = (row_step, *row_units)
    step, units = fixed_point(-h, h)
    n = MeasurementSpec(MeasurementKind.COUNT, call.arg, l1=g, l2=math.sqrt(g),
                        mechanism=mechanism, per_group=(0, 1), person="present")
    s = MeasurementSpec(MeasurementKind.SUM, call.arg, lo, hi, center=c, integer=False,
                        l1=g * h, l2=math.sqrt(g) * h, mechanism=mechanism, step=step,
                        units=units, per_group=units, person="mean", row_grid=row_grid)
    return Cell(call, AVG, (n, s), "DOUBLE", bound=Bound("float", lo, hi))


def _combine_avg(cell: Cell, v: Sequence[np.ndarray]) -> np.ndarray:
    b = cell.bound
    assert b is not None
    count = np.maximum(v[0].astype(float), 1.0)
    mean: np.ndarray = np.clip((b.lo + b.hi) / 2 + v[1] / count, b.lo, b.hi)
    return mean


def _accuracy_avg(cell: Cell, parts: Sequence[np.ndarray], widths: Sequence[float]
                  ) -> np.ndarray:
    """First-order propagation of the parts' half-widths through c + S/n (noisy values only)."""
    count = np.maximum(np.asarray(parts[0], dtype=np.float64), 1.0)
    centered = np.asarray(parts[1], dtype=np.float64) / count
    return (widths[1] + np.abs(centered) * widths[0]) / count


def _variance(call: AggregateCall, table: Table, grouped: bool, mechanism: Mechanism) -> Cell:
    """VAR_POP = S2/n - (S1/n)^2 clamped to [0, h^2], VAR_SAMP = VAR_POP * n/(n-1), STDDEV =
    sqrt(VAR): n (L1 = k), S1 = sum(y) (L1 = k * h) and S2 = sum(y^2) (L1 = k * h^2) for the
    centred y = clamp(x) - c."""
    b, k = _bound(call, table), table.rows_per_unit
    assert call.arg is not None
    c, h = (b.lo + b.hi) / 2, (b.hi - b.lo) / 2
    n = MeasurementSpec(MeasurementKind.COUNT, counted(call.arg, table), l1=k, l2=k,
                        mechanism=mechanism)
    s1 = _real_sum(call.arg, b, (-h, h), k, mechanism, center=c)
    s2 = _real_sum(call.arg, b, (0.0, h * h), k, mechanism, center=c, power=2)
    return Cell(call, AGGREGATES[call.kind], (n, s1, s2), "DOUBLE", bound=b)


def _combine_variance(cell: Cell, v: Sequence[np.ndarray]) -> np.ndarray:
    b = cell.bound
    assert b is not None
    h = (b.hi - b.lo) / 2
    count = np.maximum(v[0].astype(float), 1.0)
    mean = v[1] / count
    var = np.clip(v[2] / count - mean * mean, 0.0, h * h)
    if cell.call.kind.endswith("samp"):
        var = np.clip(var * count / np.maximum(count - 1.0, 1.0), 0.0, 2 * h * h)
    out: np.ndarray = np.sqrt(var) if cell.call.kind.startswith("stddev") else var
    return out


def _accuracy_variance(cell: Cell, parts: Sequence[np.ndarray], widths: Sequence[float]
                       ) -> np.ndarray:
    """First-order propagation through S2/n - (S1/n)^2, then through the square root."""
    count = np.maximum(np.asarray(parts[0], dtype=np.float64), 1.0)
    mean = np.asarray(parts[1], dtype=np.float64) / count
    second = np.asarray(parts[2], dtype=np.float64) / count
    var_width = (widths[2] + 2 * np.abs(mean) * widths[1] + np.abs(second) * widths[0]) / count
    if cell.call.kind.startswith("stddev"):
        var = np.maximum(second - mean * mean, 0.0)
        return (np.sqrt(var + var_width) - np.sqrt(np.maximum(var - var_width, 0.0))) / 2
    return var_width


def quantile_sensitivity(table: Table) -> float:
    """The rank utility's sensitivity ``Delta = k`` (``table.rows_per_unit``): a unit's k rows
    move every bucket's ranks ``[r_j, r_{j+1}]`` and the target ``q * n`` by at most k, so
    ``|u_j(D) - u_j(D')| <= k`` in each group and in total over all groups (see the table
    above and :func:`dpsql.privacy.quantiles.quantile_from_buckets`)."""
    return float(table.rows_per_unit)


def _quantile(call: AggregateCall, table: Table, grouped: bool, mechanism: Mechanism) -> Cell:
    """MEDIAN, QUANTILE_CONT, PERCENTILE_CONT, MIN, MAX: a histogram of clamp(x) over B buckets
    and the exponential mechanism, utility sensitivity k (see the table above). The Laplace or
    Gaussian choice does not apply: the mechanism draws the value itself."""
    kind = bound(call.arg, table).kind if call.arg is not None else None
    if kind == "date":
        return _date_quantile(call, table)
    if kind == "timestamp":
        return _instant_quantile(call, table)
    b, k = _bound(call, table), quantile_sensitivity(table)
    per_value = b.kind == "int" and b.hi - b.lo + 1 <= HISTOGRAM_BUCKETS
    # Real values (and integers of a wider range) on the fine grid (quantile_grid)
    fine = not per_value and b.hi > b.lo
    buckets = (int(b.hi - b.lo + 1) if per_value else Grid(b.lo, b.hi).cells if fine
               else HISTOGRAM_BUCKETS)
    m = MeasurementSpec(MeasurementKind.HISTOGRAM, call.arg, b.lo, b.hi, integer=per_value,
                        l1=k, l2=k, buckets=buckets, quantile=call.quantile,
                        mechanism=Mechanism.EXPONENTIAL, fine=fine)
    return Cell(call, QUANTILE, (m,), "DOUBLE", bound=b)


#: Dates are measured as their day numbers since this day (DuckDB: ``d - DATE '1970-01-01'``).
EPOCH_DAY = dt.date(1970, 1, 1)


def _date_quantile(call: AggregateCall, table: Table) -> Cell:
    """MIN / MAX / MEDIAN / a quantile of a date column: the same exponential mechanism over
    the day numbers of the column's declared bounds (one bucket per day when there are at most
    HISTOGRAM_BUCKETS days), the value released as a date (:func:`dpsql.execution.perturb.dated`).
    The bounds are public, so the candidate days are too; without them there is nothing public to
    draw from, and the query is refused."""
    assert call.arg is not None
    column = table.column(call.arg.name) if isinstance(call.arg, exp.Column) else None
    if column is None or not column.bounded:
        what = written(call.arg)
        raise UnboundedExpression(
            f"{call.text}: {what} needs declared date bounds (lower and upper in the metadata, "
            "the days a date quantile is drawn from); aggregate a date column that has them")
    assert isinstance(column.lower, dt.date) and isinstance(column.upper, dt.date)
    lo, hi = ((d - EPOCH_DAY).days for d in (column.lower, column.upper))
    per_value = hi - lo + 1 <= HISTOGRAM_BUCKETS
    k = quantile_sensitivity(table)
    m = MeasurementSpec(MeasurementKind.HISTOGRAM, call.arg, float(lo), float(hi),
                        integer=per_value, l1=k, l2=k,
                        buckets=hi - lo + 1 if per_value else HISTOGRAM_BUCKETS,
                        quantile=call.quantile, mechanism=Mechanism.EXPONENTIAL, dates=True)
    return Cell(call, QUANTILE, (m,), "DATE", bound=bound(call.arg, table))


def _instant_quantile(call: AggregateCall, table: Table) -> Cell:
    """MIN / MAX / MEDIAN / a quantile of a timestamp column: the exponential mechanism over
    the seconds since EPOCH_DAY between the column's declared bounds (public, so the candidate
    instants are too), in HISTOGRAM_BUCKETS equal buckets, the value released as a timestamp
    to the second (:func:`dpsql.execution.perturb.instants`). The utility's sensitivity is k, as for
    numbers: the input is a number of seconds clamped to public bounds. Without bounds there
    is nothing public to draw from, and the query is refused."""
    assert call.arg is not None
    column = table.column(call.arg.name) if isinstance(call.arg, exp.Column) else None
    if column is None or not column.bounded:
        what = written(call.arg)
        raise UnboundedExpression(
            f"{call.text}: {what} needs declared timestamp bounds (lower and upper in the "
            "metadata, the instants a quantile is drawn from); aggregate a timestamp column "
            "that has them")
    assert isinstance(column.lower, dt.datetime) and isinstance(column.upper, dt.datetime)
    epoch = dt.datetime.combine(EPOCH_DAY, dt.time())
    lo, hi = ((d - epoch).total_seconds() for d in (column.lower, column.upper))
    k = quantile_sensitivity(table)
    m = MeasurementSpec(MeasurementKind.HISTOGRAM, call.arg, lo, hi, integer=False, l1=k, l2=k,
                        buckets=HISTOGRAM_BUCKETS, quantile=call.quantile,
                        mechanism=Mechanism.EXPONENTIAL, instants=True)
    return Cell(call, QUANTILE, (m,), "TIMESTAMP", bound=bound(call.arg, table))


def _first(cell: Cell, v: Sequence[np.ndarray]) -> np.ndarray:
    return v[0]


def _accuracy_first(cell: Cell, parts: Sequence[np.ndarray], widths: Sequence[float]
                    ) -> np.ndarray:
    """One measurement: the cell's accuracy is its measurement's, the same in every group."""
    return np.full(len(parts[0]), widths[0])


COUNT = Aggregate("count", _count, _first, _accuracy_first)
SUM = Aggregate("sum", _sum, _first, _accuracy_first)
AVG = Aggregate("avg", _avg, _combine_avg, _accuracy_avg)
QUANTILE = Aggregate("quantile", _quantile, _first, _accuracy_first, accuracy_unit="rank")

#: VAR = S2/n - (S1/n)^2 in units of k h^2 / (eps n): S2's noise enters with coefficient 1,
#: S1's with 2|S1/n|/h <= 2, n's with |S2/n - 2 (S1/n)^2| / h^2 <= 1 (module docstring of
#: dpsql.privacy.plan, "Budget split"). AVG's are (1, 1): |S/n| <= h.
_VAR_WEIGHTS = (1.0, 4.0, 1.0)

#: Every aggregate dpsql answers, by kind (the kinds ``check`` recognises by their SQL names:
#: :data:`dpsql.query.aggregate_calls.FUNCTIONS`).
AGGREGATES: dict[str, Aggregate] = {a.kind: a for a in (
    COUNT, SUM, AVG, QUANTILE,
    Aggregate("var_samp", _variance, _combine_variance, _accuracy_variance,
              weights=_VAR_WEIGHTS),
    Aggregate("var_pop", _variance, _combine_variance, _accuracy_variance,
              weights=_VAR_WEIGHTS),
    Aggregate("stddev_samp", _variance, _combine_variance, _accuracy_variance,
              weights=_VAR_WEIGHTS),
    Aggregate("stddev_pop", _variance, _combine_variance, _accuracy_variance,
              weights=_VAR_WEIGHTS),
)}
