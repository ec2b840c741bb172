"""The exponential mechanism for quantiles, MIN and MAX over a fine histogram of clamped values.

Choose output ``r`` with probability proportional to ``exp(epsilon * u(r) / (2 D))`` where
``u`` has sensitivity ``D``; that is ``epsilon``-DP (McSherry and Talwar 2007).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import numpy.typing as npt

from dpsql.privacy.mechanisms import _check_positive_finite
from dpsql.privacy.randomness import Randomness
from dpsql.privacy.samplers import exponential, uniform


def quantile_from_histogram(
    counts: npt.ArrayLike,
    lower: float,
    upper: float,
    q: float,
    epsilon: float,
    sensitivity: float,
    rng: Randomness,
) -> float:
    """A private ``q``-quantile of clamped values from a dense histogram: ``counts[j]`` counts
    the values in bucket ``j`` of ``B = len(counts)`` equal-width buckets of ``[lower, upper]``.
    The same draw as :func:`quantile_from_buckets` over the non-empty buckets."""
    hist = _check_histogram(counts)
    nonempty = np.flatnonzero(hist)
    return quantile_from_buckets(nonempty, hist[nonempty], hist.size, lower, upper, q, epsilon,
                                 sensitivity, rng)


def quantile_from_buckets(
    buckets: npt.ArrayLike,
    counts: npt.ArrayLike,
    n_buckets: int,
    lower: float,
    upper: float,
    q: float,
    epsilon: float,
    sensitivity: float,
    rng: Randomness,
) -> float:
    """A private ``q``-quantile of clamped values by the exponential mechanism, in time linear
    in the number of *non-empty* buckets, so that ``B`` can be as fine as the data's unit.

    ``[lower, upper]`` is split into ``B = n_buckets`` equal-width buckets; bucket
    ``buckets[i]`` holds ``counts[i] > 0`` values (any order; every other bucket is empty).
    With ``r_j`` the number of values below bucket ``j``, bucket ``j`` covers the ranks
    ``[r_j, r_{j+1}]`` and its utility is

        u_j = -dist(q * n, [r_j, r_{j+1}])        (0 for the buckets that hold rank q * n)

    **Sensitivity.** Adding or removing one unit's (at most ``k``, contribution-bounded) rows
    moves every ``r_j`` and ``n`` by at most ``k``, so every ``u_j`` by at most ``Delta = k``
    (``sensitivity``): ``|u_j(D) - u_j(D')| <= k``. Bucket ``j`` is drawn with probability
    proportional to ``exp(epsilon * u_j / (2 k))``, which is ``epsilon``-DP (McSherry and
    Talwar 2007), and the answer is a uniform point inside it. With GROUP BY each group draws
    its own bucket; a unit's k rows move the utilities of all its groups by at most ``k`` in
    total, so the groups' privacy losses add up to at most ``epsilon`` (basic composition over
    the groups, in which a unit with ``g`` groups spends ``epsilon * k_i / k`` in group ``i``,
    ``sum_i k_i <= k``).

    **The continuous-interval method** (Smith 2011; OpenDP's and Tumult's quantile): empty
    buckets between two non-empty ones all have the same ranks, hence the same utility, so a
    run of ``L`` of them is one interval of weight ``L * exp(epsilon * u / (2 k))``; drawing
    the interval and then a uniform point in it is exactly the per-bucket draw above. So only
    the ``m <= min(n, B)`` non-empty buckets are ever touched (``2m + 1`` intervals), whatever
    ``B``. ``q = 0`` is MIN, ``q = 1`` is MAX. With no values every bucket ties.
    """
    index = np.asarray(buckets, dtype=np.int64)
    hist = np.asarray(counts, dtype=np.float64)
    _check_sparse(index, hist, n_buckets)
    _check_bounds(lower, upper)
    _check_draw(q, epsilon, sensitivity)
    order = np.argsort(index, kind="stable")
    start, length, low, high = _intervals(index[order], hist[order], n_buckets)
    offset = _draw(start, length, low, high, q * float(hist.sum()), epsilon, sensitivity, rng)
    width = (upper - lower) / n_buckets
    return float(min(max(lower + offset * width, lower), upper))


def quantile_from_intervals(
    lows: npt.ArrayLike,
    highs: npt.ArrayLike,
    counts: npt.ArrayLike,
    lower: float,
    upper: float,
    q: float,
    epsilon: float,
    sensitivity: float,
    rng: Randomness,
) -> float:
    """A private ``q``-quantile over a partition of ``[lower, upper]`` into intervals of any
    widths (the fine grid, :mod:`dpsql.privacy.quantile_grid`): interval ``[lows[i],
    highs[i]]`` holds ``counts[i] > 0`` values (real numbers: weighted rows), the rest of
    ``[lower, upper]`` none. The same draw as :func:`quantile_from_buckets`, each interval
    weighed by its length: a point ``x`` of ``[lower, upper]`` is drawn with density
    proportional to ``exp(epsilon * u(x) / (2 k))``, ``u(x) = -dist(q * n, [r, r'])`` for the
    ranks ``[r, r']`` of the interval holding ``x``, the ranks constant between two non-empty
    intervals (one interval of the draw). Adding or removing a unit moves every rank and
    ``q * n`` by at most ``k`` (its rows, or its weights, which sum to at most k) in one
    direction, so ``u`` by at most ``k = sensitivity``: ``epsilon``-DP (McSherry and Talwar
    2007; Smith 2011), whatever the widths, which are public."""
    low_edges = np.asarray(lows, dtype=np.float64)
    high_edges = np.asarray(highs, dtype=np.float64)
    hist = np.asarray(counts, dtype=np.float64)
    _check_bounds(lower, upper)
    if not (low_edges.shape == high_edges.shape == hist.shape and hist.ndim == 1):
        raise ValueError("lows, highs and counts must be 1-D arrays of one length")
    if not (np.all(np.isfinite(hist)) and np.all(hist > 0)):
        raise ValueError("counts of non-empty intervals must be finite and positive")
    if np.any(low_edges < lower) or np.any(high_edges > upper) or np.any(high_edges < low_edges):
        raise ValueError(f"intervals must lie within [{lower}, {upper}] with low <= high")
    _check_draw(q, epsilon, sensitivity)
    order = np.argsort(low_edges, kind="stable")
    low_edges, high_edges, hist = low_edges[order], high_edges[order], hist[order]
    below = np.cumsum(hist) - hist
    total = float(hist.sum())
    m = hist.size
    start, length = np.empty(2 * m + 1), np.empty(2 * m + 1)
    low, high = np.empty(2 * m + 1), np.empty(2 * m + 1)
    gap_start = np.concatenate(([lower], high_edges))
    gap_end = np.maximum(np.concatenate((low_edges, [upper])), gap_start)
    start[0::2], length[0::2] = gap_start, gap_end - gap_start
    low[0::2] = high[0::2] = np.concatenate((below, [total]))
    start[1::2], length[1::2] = low_edges, high_edges - low_edges
    low[1::2], high[1::2] = below, below + hist
    if not np.any(length > 0):  # lower == upper
        return float(lower)
    point = _draw(start, length, low, high, q * total, epsilon, sensitivity, rng)
    return float(min(max(point, lower), upper))


def _check_draw(q: float, epsilon: float, sensitivity: float) -> None:
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q!r}")
    _check_positive_finite(epsilon, "epsilon")
    _check_positive_finite(sensitivity, "sensitivity")


def _draw(start: npt.NDArray[np.float64], length: npt.NDArray[np.float64],
          low: npt.NDArray[np.float64], high: npt.NDArray[np.float64], target: float,
          epsilon: float, sensitivity: float, rng: Randomness) -> float:
    """A point of the intervals ``[start, start + length)`` (ranks ``[low, high]`` each),
    drawn with density proportional to ``exp(epsilon * u / (2 * sensitivity))``, ``u =
    -dist(target, [low, high])``: an interval by the exponential race over ``log(length) +
    epsilon * u / (2 * sensitivity)``, then a uniform point in it."""
    runs = length > 0  # an interval of no length (adjacent non-empty ones) is never drawn
    start, length, low, high = start[runs], length[runs], low[runs], high[runs]
    utility = -np.maximum(0.0, np.maximum(low - target, target - high))
    scores = epsilon * utility / (2.0 * sensitivity) + np.log(length)
    chosen = _sample_softmax(scores, rng)
    return float(start[chosen]) + float(uniform(1, rng)[0]) * float(length[chosen])


def _intervals(index: npt.NDArray[np.int64], hist: npt.NDArray[np.float64], n_buckets: int
               ) -> tuple[npt.NDArray[np.float64], ...]:
    """The ``2m + 1`` intervals of buckets with one utility each, in bucket order: the run of
    empty buckets before each non-empty bucket, the bucket itself, the run after the last.
    Returns (first bucket, number of buckets, lowest rank, highest rank) per interval."""
    m = index.size
    below = np.cumsum(hist) - hist  # r_j of each non-empty bucket
    total = float(hist.sum())
    gap_start = np.concatenate(([0], index + 1)).astype(np.float64)
    gap_end = np.concatenate((index, [n_buckets])).astype(np.float64)
    gap_rank = np.concatenate((below, [total]))
    start, length = np.empty(2 * m + 1), np.empty(2 * m + 1)
    low, high = np.empty(2 * m + 1), np.empty(2 * m + 1)
    start[0::2], length[0::2] = gap_start, gap_end - gap_start
    low[0::2] = high[0::2] = gap_rank
    start[1::2], length[1::2] = index, 1.0
    low[1::2], high[1::2] = below, below + hist
    return start, length, low, high


def _sample_softmax(scores: npt.NDArray[np.float64], rng: Randomness) -> int:
    """Index ``j`` with probability ``exp(scores[j]) / sum(exp(scores))``, by an exponential
    race: ``j = argmin(E_j / exp(scores[j]))`` for iid ``E_j ~ Exp(1)``
    (:func:`exponential`), computed as ``argmax(scores[j] - log(E_j))``.

    ``P(E_j / w_j < min_{i != j} E_i / w_i) = w_j / sum(w)``, since ``E_j / w_j`` is
    exponential with rate ``w_j``. In log space no weight underflows (an inverse CDF over
    float64 ``exp`` weights gives probability 0 to buckets below ``e**-745`` of the largest,
    and 53-bit resolution to the rest), and ``exponential`` has an exact tail, so every bucket
    keeps its probability up to float64 rounding of the scores: no ``B * 2**-52`` delta."""
    return int(np.argmax(scores - np.log(exponential(scores.size, rng))))


def quantile_rank_accuracy(
    n_buckets: int, epsilon: float, sensitivity: float, confidence: float = 0.95
) -> float:
    """Rank error of :func:`quantile_from_histogram` at the given confidence.

    The exponential mechanism's utility theorem: with probability ``>= confidence`` the chosen
    bucket has ``u >= -(2 D / epsilon) * (ln(B) + ln(1 / (1 - confidence)))`` (the best
    utility is 0). Returns that rank distance.
    """
    if isinstance(n_buckets, bool) or not isinstance(n_buckets, numbers.Integral) or n_buckets < 1:
        raise ValueError(f"n_buckets must be a positive integer, got {n_buckets!r}")
    _check_positive_finite(epsilon, "epsilon")
    _check_positive_finite(sensitivity, "sensitivity")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return (2.0 * sensitivity / epsilon) * (math.log(n_buckets) - math.log1p(-confidence))


def _check_histogram(counts: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """A non-empty 1-D array of finite non-negative counts."""
    hist = np.asarray(counts, dtype=np.float64)
    if hist.ndim != 1 or hist.size == 0:
        raise ValueError("counts must be a non-empty 1-D array")
    if not np.all(np.isfinite(hist)) or np.any(hist < 0):
        raise ValueError("counts must be finite and non-negative")
    return hist


def _check_sparse(index: npt.NDArray[np.int64], hist: npt.NDArray[np.float64],
                  n_buckets: int) -> None:
    """Distinct bucket numbers in ``[0, n_buckets)``, each with a finite positive count."""
    if isinstance(n_buckets, bool) or not isinstance(n_buckets, numbers.Integral) or n_buckets < 1:
        raise ValueError(f"n_buckets must be a positive integer, got {n_buckets!r}")
    if index.ndim != 1 or hist.shape != index.shape:
        raise ValueError("buckets and counts must be 1-D arrays of one length")
    ordered = np.sort(index)
    if index.size and (ordered[0] < 0 or ordered[-1] >= n_buckets
                       or np.any(ordered[1:] == ordered[:-1])):
        raise ValueError(f"buckets must be distinct numbers in [0, {n_buckets})")
    if not np.all(np.isfinite(hist)) or np.any(hist <= 0):
        raise ValueError("counts of non-empty buckets must be finite and positive")


def _check_bounds(lower: float, upper: float) -> None:
    """Finite bounds with ``lower <= upper``."""
    if not (math.isfinite(lower) and math.isfinite(upper) and lower <= upper):
        raise ValueError(f"bounds must be finite with lower <= upper, got [{lower}, {upper}]")
