"""The exponential mechanism for quantiles, MIN and MAX over a histogram of clamped values.

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
    """A private ``q``-quantile of clamped values by the exponential mechanism.

    ``counts[j]`` counts the values in bucket ``j`` of ``B`` equal-width buckets of
    ``[lower, upper]``. With ``r_j = counts[:j].sum()`` bucket ``j`` covers ranks
    ``[r_j, r_{j+1}]``; its utility is ``u_j = -dist(q * n, [r_j, r_{j+1}])`` (sensitivity
    ``sensitivity``, the rows one unit can contribute). Bucket ``j`` is chosen with probability
    proportional to ``exp(epsilon * u_j / (2 * sensitivity))`` and the answer is a uniform
    point inside it (both drawn from ``rng``). ``q = 0`` is MIN, ``q = 1`` is MAX. With no
    values all buckets tie.
    """
    hist = _check_histogram(counts)
    _check_bounds(lower, upper)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q!r}")
    _check_positive_finite(epsilon, "epsilon")
    _check_positive_finite(sensitivity, "sensitivity")
    scores = epsilon * _rank_utility(hist, q) / (2.0 * sensitivity)
    bucket = _sample_softmax(scores, rng)
    width = (upper - lower) / hist.size
    point = lower + (bucket + float(uniform(1, rng)[0])) * width
    return float(min(max(point, lower), upper))


def _rank_utility(hist: npt.NDArray[np.float64], q: float) -> npt.NDArray[np.float64]:
    """``u_j = -dist(q * n, [r_j, r_{j+1}])`` for each bucket."""
    right = np.cumsum(hist)
    left = right - hist
    target = q * float(right[-1])
    return -np.maximum(0.0, np.maximum(left - target, target - right))


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


def _check_bounds(lower: float, upper: float) -> None:
    """Finite bounds with ``lower <= upper``."""
    if not (math.isfinite(lower) and math.isfinite(upper) and lower <= upper):
        raise ValueError(f"bounds must be finite with lower <= upper, got [{lower}, {upper}]")
