"""The fine grid of a real-valued quantile's histogram (issue 39.4): finer where the data is
dense, so that a MEDIAN's answer is limited by the exponential mechanism's rank error and not
by the width of its buckets.

**The grid.** The equal grid of ``EQUAL = 2**16`` buckets of the clamp interval ``[L, U]``
(issue 21.5) is ``(U - L) / 2**16`` wide everywhere: 1.5 for ``[0, 100000]``, coarser than the
rank error of a median of a million amounts around 40. Real data worth a wide declared interval
are dense near the origin ``o`` (0 clamped into ``[L, U]``) and sparse in the tail, so the grid
is refined by a geometric one around ``o``: on each side, distances ``|x - o|`` in ``[0, tau
r)`` and ``[tau r**s, tau r**(s + 1))`` for ``s = 1 .. S - 1`` (``r = 1 + 2**-RATIO_BITS``: a
relative width of 0.1%; ``tau = span 2**-DEPTH``, ``span = max(U - o, o - L)``), the outermost
open-ended. A value's bucket is the pair (equal bucket ``e``, geometric bucket ``g``), keyed
``e * G + g`` (``G = 2 S`` geometric buckets, the side below ``o`` first): both are
non-decreasing in the value, so keys sort as the values do, and each key is the intersection
of its two buckets (:func:`Grid.intervals`), at most as wide as either. The widths are those of
the finer grid at each point: 0.04 at 40, never coarser than the equal grid.

**Privacy.** The grid is a fixed function of the public bounds, each row's key a function of
its own value (computed in SQL, :func:`dpsql.execution.quantile_sql.fine_bucket`): the
histogram's sensitivity and the draw's argument are those of any partition of ``[L, U]`` into
intervals (:func:`dpsql.privacy.quantiles.quantile_from_intervals`): ``u`` moves by at most
``k``, the point is drawn with density proportional to ``exp(epsilon u / (2 k))`` over ``[L,
U]`` (the continuous-interval method, with each interval weighed by its length). How the
engine's floating-point LN places a value lying on an edge between two buckets changes its
accuracy by at most one bucket width, never what one unit can change.

**Cost.** At most ``EQUAL + G`` keys are non-empty (about 108,000), whatever the rows: the
engine returns at most that many (bucket, count) pairs per group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: The equal buckets of [L, U] (dpsql.privacy.aggregates.HISTOGRAM_BUCKETS)
EQUAL = 2**16
#: The geometric buckets' ratio is 1 + 2**-RATIO_BITS
RATIO_BITS = 10
#: The geometric buckets reach down to a distance of span * 2**-DEPTH from the origin
DEPTH = 30


@dataclass(frozen=True)
class Grid:
    """The fine grid of ``[lo, hi]`` (module docstring), ``lo < hi``."""

    lo: float
    hi: float

    @property
    def origin(self) -> float:
        return min(max(0.0, self.lo), self.hi)

    @property
    def tau(self) -> float:
        """The core bucket's half-width: the span times 2**-DEPTH."""
        span = max(self.hi - self.origin, self.origin - self.lo)
        return math.ldexp(span, -DEPTH)

    @property
    def ln_ratio(self) -> float:
        return math.log1p(math.ldexp(1.0, -RATIO_BITS))

    @property
    def side(self) -> int:
        """S, the geometric buckets on each side: ``tau r**(S - 1) >= span``."""
        return math.ceil(DEPTH * math.log(2.0) / self.ln_ratio) + 1

    @property
    def geometric(self) -> int:
        """G = 2 S."""
        return 2 * self.side

    @property
    def keys(self) -> int:
        """Every key is below this: EQUAL * G."""
        return EQUAL * self.geometric

    @property
    def cells(self) -> int:
        """At most this many keys are non-empty (the refinement of two partitions of one
        interval has at most the sum of their parts)."""
        return EQUAL + self.geometric

    def intervals(self, keys: npt.NDArray[np.int64]
                  ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """[low, high] of each key: its equal bucket intersected with its geometric one, in
        [lo, hi]; an empty intersection (an edge rounded differently by the engine) has
        ``low == high``."""
        e, g = np.divmod(np.asarray(keys, dtype=np.int64), self.geometric)
        width = (self.hi - self.lo) / EQUAL
        eq_low = self.lo + e * width
        eq_high = np.where(e == EQUAL - 1, self.hi, self.lo + (e + 1) * width)
        s, tau, ratio, o = self.side, self.tau, math.exp(self.ln_ratio), self.origin
        above = g >= s
        step = np.where(above, g - s, s - 1 - g).astype(np.float64)
        inner = np.where(step == 0, 0.0, tau * ratio ** step)
        outer = np.where(step >= s - 1, np.inf, tau * ratio ** (step + 1))
        geo_low = np.where(above, o + inner, o - outer)
        geo_high = np.where(above, o + outer, o - inner)
        low = np.maximum(np.maximum(eq_low, geo_low), self.lo)
        high = np.minimum(np.minimum(eq_high, geo_high), self.hi)
        return low, np.maximum(high, low)
