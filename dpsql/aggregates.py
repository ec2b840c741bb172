"""The privacy argument of every aggregate, in one place.

Notation. After contribution bounding, one privacy unit contributes at most ``k`` rows to a query
(``Table.rows_per_unit``), and with GROUP BY those rows fall into at most ``g' = min(g, k)``
groups (``Table.groups_per_unit``). Neighbouring databases differ by all rows of one unit. Every
value entering an aggregate is clamped in SQL to an interval ``[L, U]`` derived by interval
arithmetic from the declared bounds (:mod:`dpsql.bounds`); ``M = max(|L|, |U|)``, the midpoint
``c = (L + U) / 2`` and the half-width ``h = (U - L) / 2``.

Each aggregate is answered from one or more *measurements*: exact aggregates that the engine
computes per group and that are perturbed exactly once (:mod:`dpsql.mechanisms`). The sensitivity
below is over the whole vector of groups (parallel composition: a unit's k rows can change the
groups' values by at most this much in total), so the noise for each group is calibrated to it
and the query is charged once, not once per group.

==========================  =======================================  ================  ===========
aggregate                   measurements                             L1 sensitivity    L2
==========================  =======================================  ================  ===========
COUNT(*), COUNT(x)          number of (non-NULL) rows                k                 k
COUNT(DISTINCT unit)        number of distinct units                 g'                sqrt(g')
COUNT(DISTINCT x)           number of distinct values                k                 k
SUM(x)                      sum of clamp(x)                          k * M             k * M
AVG(x)                      n = COUNT(x); S = sum of (clamp(x) - c)  k; k * h          same
VAR/STDDEV(x)               n; S1 = sum(y); S2 = sum(y^2), y=x-c     k; k*h; k*h^2     same
MEDIAN/QUANTILE/MIN/MAX     histogram of clamp(x) over B buckets,    utility: k        -
                            exponential mechanism (one per group)
==========================  =======================================  ================  ===========

The L2 column is the worst case of k rows all in one group (then L2 = L1); for distinct units a
unit adds 1 to each of at most g' groups. Everything computed from the noisy measurements is
post-processing: AVG = c + S~/max(n~, 1), clamped to [L, U]; VAR_POP = S2~/n - (S1~/n)^2, clamped
to [0, h^2]; VAR_SAMP = VAR_POP * n/(n-1); STDDEV = sqrt(VAR). For quantiles, bucket j covers the
ranks [r_j, r_{j+1}] and has utility -dist(q*n, [r_j, r_{j+1}]); adding or removing a unit moves
every r_j and q*n by at most k, so the utility's sensitivity is k, and in each group the bucket is
drawn with probability proportional to exp(eps * u / (2k)). Across groups the unit's k rows change
the utilities by at most k in total, which bounds the privacy loss of all groups together by eps.

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
``k T = l1`` in value units, exactly the sensitivity above. :mod:`dpsql.perturb` rescales the
integer sum to the noise grid with integer arithmetic (:func:`dpsql.mechanisms.perturb_fixed`),
so no float rounding happens before the noise either. The cost in accuracy is the quantisation
of each row by at most ``step / 2 <= T * 2**-SUM_BITS``, the order of float64's own rounding of
one value. Integer inputs (integer SUM, every COUNT) are summed in HUGEINT as they are: exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from sqlglot import exp

from dpsql.bounds import Bound, numeric_bound
from dpsql.check import AggregateCall
from dpsql.mechanisms import NoiseSpec
from dpsql.metadata import Table

HISTOGRAM_BUCKETS = 1000
#: Bits of the fixed-point grid of real sums: one row's term is at most 2**SUM_BITS grid steps.
SUM_BITS = 52


@dataclass
class Measurement:
    """One exact per-group aggregate that the engine computes and the perturb pass noises."""

    kind: str  # "count", "units", "distinct", "sum", "histogram"
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
    name: str = ""  # the column alias in the rewritten SQL, set by the plan
    epsilon: float = 0.0  # set by the plan's budget split
    mechanism: str = "laplace"
    noise: NoiseSpec | None = None  # set by the plan; None for the exponential mechanism
    # Real-valued sums only (see "Exact sums" above): the fixed-point grid (a power of two,
    # 0.0 when the sum is not quantised) and the integer range of one row's quantised term.
    step: float = 0.0
    units: tuple[int, int] = (0, 0)

    @property
    def histogram_range(self) -> tuple[float, float]:
        """[lo, hi) split into ``buckets`` equal buckets; integer inputs get one per value."""
        return (self.lo, self.hi + 1) if self.integer else (self.lo, self.hi)

    @property
    def key(self) -> tuple[object, ...]:
        arg = self.arg.sql(dialect="duckdb") if self.arg is not None else None
        return (self.kind, arg, self.lo, self.hi, self.center, self.power, self.buckets,
                self.quantile, self.mechanism, self.step, self.units)


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
              mechanism: str, center: float = 0.0, power: int = 1) -> Measurement:
    """An exactly summed real-valued measurement whose per-row term lies in ``term``: its
    sensitivity is ``k * max(|term|)`` (L1 and L2), its grid from :func:`fixed_point`."""
    sens = k * max(abs(term[0]), abs(term[1]))
    step, units = fixed_point(*term)
    return Measurement("sum", arg, b.lo, b.hi, center=center, power=power, integer=False,
                       l1=sens, l2=sens, mechanism=mechanism, step=step, units=units)


@dataclass
class Cell:
    """One output aggregate: its measurements and how they combine (post-processing)."""

    call: AggregateCall
    measurements: list[Measurement]
    combine: Callable[[Sequence[np.ndarray]], np.ndarray]
    type: str  # "BIGINT" or "DOUBLE"
    bound: Bound | None = None
    quantile: float | None = None
    accuracy_unit: str = "value"  # or "rank" for the exponential mechanism
    notes: list[str] = field(default_factory=list)


def cell_for(call: AggregateCall, table: Table, grouped: bool, mechanism: str) -> Cell:
    """The measurements and the combination rule of one aggregate call."""
    k = table.rows_per_unit
    if call.kind == "count":
        return _count(call, table, grouped, k, mechanism)
    assert call.arg is not None  # check refuses SUM(*), AVG(*), ...: only COUNT takes *
    b = numeric_bound(call.arg, table, call.text)
    if call.kind == "sum":
        return _sum(call, b, k, mechanism)
    if call.kind == "avg":
        return _avg(call, b, k, mechanism)
    if call.kind == "quantile":
        return _quantile(call, b, k)
    return _variance(call, b, k, mechanism)


def _count(call: AggregateCall, table: Table, grouped: bool, k: int, mechanism: str) -> Cell:
    arg = call.arg
    if call.distinct and _is_unit(arg, table):
        g = table.groups_per_unit if grouped else 1
        m = units_measurement(table, g, mechanism)
    elif call.distinct:
        m = Measurement("distinct", arg, l1=k, l2=k, mechanism=mechanism)
    else:
        m = Measurement("count", arg, l1=k, l2=k, mechanism=mechanism)
    return Cell(call, [m], lambda v: v[0], "BIGINT")


def units_measurement(table: Table, groups: int, mechanism: str) -> Measurement:
    """The number of distinct units per group: sensitivity g' in L1, sqrt(g') in L2.

    Without contribution bounding each row is a unit, so this is COUNT(*) with sensitivity 1.
    """
    if not table.needs_bounding:
        return Measurement("count", None, l1=1, l2=1, mechanism=mechanism)
    return Measurement("units", None, l1=groups, l2=math.sqrt(groups), mechanism=mechanism)


def _is_unit(arg: exp.Expression | None, table: Table) -> bool:
    return (isinstance(arg, exp.Column) and table.privacy_unit is not None
            and arg.name.lower() == table.privacy_unit)


def _sum(call: AggregateCall, b: Bound, k: int, mechanism: str) -> Cell:
    integer = b.kind in ("int", "bool") and float(b.lo).is_integer() and float(b.hi).is_integer()
    assert call.arg is not None  # cell_for only builds sums of an argument
    if integer:  # summed in HUGEINT by the engine as they are: already exact
        sens = k * b.magnitude
        m = Measurement("sum", call.arg, b.lo, b.hi, integer=True, l1=sens, l2=sens,
                        mechanism=mechanism)
    else:
        m = _real_sum(call.arg, b, (b.lo, b.hi), k, mechanism)
    return Cell(call, [m], lambda v: v[0], "BIGINT" if integer else "DOUBLE", bound=b)


def _avg(call: AggregateCall, b: Bound, k: int, mechanism: str) -> Cell:
    c, h = (b.lo + b.hi) / 2, (b.hi - b.lo) / 2
    assert call.arg is not None  # cell_for only builds averages of an argument
    n = Measurement("count", call.arg, l1=k, l2=k, mechanism=mechanism)
    s = _real_sum(call.arg, b, (-h, h), k, mechanism, center=c)

    def combine(v: Sequence[np.ndarray]) -> np.ndarray:
        count = np.maximum(v[0].astype(float), 1.0)
        return np.clip(c + v[1] / count, b.lo, b.hi)

    return Cell(call, [n, s], combine, "DOUBLE", bound=b)


def _variance(call: AggregateCall, b: Bound, k: int, mechanism: str) -> Cell:
    c, h = (b.lo + b.hi) / 2, (b.hi - b.lo) / 2
    assert call.arg is not None  # cell_for only builds variances of an argument
    n = Measurement("count", call.arg, l1=k, l2=k, mechanism=mechanism)
    s1 = _real_sum(call.arg, b, (-h, h), k, mechanism, center=c)
    s2 = _real_sum(call.arg, b, (0.0, h * h), k, mechanism, center=c, power=2)
    sample = call.kind.endswith("samp")
    root = call.kind.startswith("stddev")

    def combine(v: Sequence[np.ndarray]) -> np.ndarray:
        count = np.maximum(v[0].astype(float), 1.0)
        mean = v[1] / count
        var = np.clip(v[2] / count - mean * mean, 0.0, h * h)
        if sample:
            var = np.clip(var * count / np.maximum(count - 1.0, 1.0), 0.0, 2 * h * h)
        return np.sqrt(var) if root else var

    return Cell(call, [n, s1, s2], combine, "DOUBLE", bound=b)


def _quantile(call: AggregateCall, b: Bound, k: int) -> Cell:
    per_value = b.kind == "int" and b.hi - b.lo + 1 <= HISTOGRAM_BUCKETS
    buckets = int(b.hi - b.lo + 1) if per_value else HISTOGRAM_BUCKETS
    m = Measurement("histogram", call.arg, b.lo, b.hi, integer=per_value, l1=k, l2=k,
                    buckets=buckets, quantile=call.quantile, mechanism="exponential")
    # The exponential mechanism draws the value itself; `combine` receives it.
    return Cell(call, [m], lambda v: v[0], "DOUBLE", bound=b, quantile=call.quantile,
                accuracy_unit="rank")
