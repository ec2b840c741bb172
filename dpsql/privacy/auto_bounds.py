"""Bounds chosen from the data under differential privacy (issue 21.2): the first step of a
query whose table declares ``max_rows_per_unit`` as automatic with a cap (not yet wired into
the planner; see the module's callers).

**Automatic k.** Each privacy unit contributes one value, its number of rows ``c_u`` clamped to
``[1, cap]``; the step releases a private ``q``-quantile of these values (e.g. ``q = 0.9``: the
k that keeps every row of 90% of the units) with the exponential mechanism over one bucket per
value (:func:`dpsql.privacy.quantiles.quantile_from_buckets`).

*Sensitivity.* Neighbours differ by one unit, so the multiset of per-unit values gains or
loses exactly one element: every rank ``r_j`` and the target ``q * n`` move by at most 1, so
the rank utility's sensitivity is ``Delta = 1`` (whatever the unit's number of rows: its count
is one value, clamped to the public cap). The step is ``epsilon_auto``-DP.

*Composition.* The chosen k is released (explain shows it) and the query's measurements are
then calibrated to it with the rest of the query's epsilon: by sequential (adaptive)
composition the query costs ``epsilon_auto + epsilon_rest``, its declared epsilon, charged
once before the step runs. A neighbour test of the final measurement conditions on the
released k (both databases measured with the same k), as the composition theorem does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from dpsql.privacy.mechanisms import _check_positive_finite
from dpsql.privacy.quantiles import quantile_from_buckets
from dpsql.privacy.randomness import Randomness

#: The utility's sensitivity: one unit is one value of the per-unit counts.
AUTO_SENSITIVITY = 1.0


def auto_rows_per_unit(units_by_count: Mapping[int, int], cap: int, q: float, epsilon: float,
                       rng: Randomness) -> int:
    """A private ``q``-quantile of the units' row counts, an integer k in ``[1, cap]``.

    ``units_by_count[c]`` is the number of units with ``c`` rows (counts above ``cap`` are read
    as ``cap``, below 1 as 1). Bucket ``c - 1`` of ``cap`` per-value buckets holds them; the
    draw is floored to its value (see the module docstring for the sensitivity, 1)."""
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ValueError(f"cap must be a positive integer, got {cap!r}")
    _check_positive_finite(epsilon, "epsilon")
    counts = np.zeros(cap, dtype=np.float64)
    for rows, units in units_by_count.items():
        if units < 0 or not math.isfinite(units):
            raise ValueError(f"a number of units must be finite and >= 0, got {units!r}")
        counts[min(max(int(rows), 1), cap) - 1] += units
    nonempty = np.flatnonzero(counts)
    value = quantile_from_buckets(nonempty, counts[nonempty], cap, 1.0, float(cap + 1), q,
                                  epsilon, AUTO_SENSITIVITY, rng)
    return min(max(math.floor(value), 1), cap)
