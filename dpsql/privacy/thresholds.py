"""Key release by thresholding: which groups of a GROUP BY without a public domain exist.

A group is released when its noisy number of distinct units reaches ``tau``; the noise is the
calibrated discrete Laplace of that count's measurement (:mod:`dpsql.privacy.plan`), and ``tau`` is
derived from that very noise (:func:`tau_for`), with the argument in its docstring.
"""

from __future__ import annotations

import math
import numbers

from dpsql.privacy.mechanisms import Mechanism, NoiseSpec, _check_open_delta, calibrate_laplace


def threshold(epsilon: float, delta: float, max_groups: int) -> tuple[float, int]:
    """Scale and threshold for releasing group keys by a noisy count of distinct units with
    an ``epsilon`` share: the noise :func:`calibrate_laplace` gives that count (sensitivity
    ``max_groups``), and :func:`tau_for` of it."""
    if isinstance(max_groups, bool) or not isinstance(max_groups, numbers.Integral):
        raise ValueError(f"max_groups must be an integer, got {max_groups!r}")
    if max_groups < 1:
        raise ValueError(f"max_groups must be >= 1, got {max_groups}")
    noise = calibrate_laplace(float(max_groups), epsilon, True)
    return noise.grid_scale, tau_for(noise, delta, max_groups)


def tau_for(noise: NoiseSpec, delta: float, max_groups: int) -> int:
    """The threshold of key release for a count of distinct units perturbed with ``noise``.

    The noisy count is ``count + Z``, ``Z ~ discrete_laplace(s)`` with ``s`` the calibrated
    noise's scale (``max_groups / epsilon``: one unit changes at most ``max_groups`` counts by
    one). A group is released when the noisy count is ``>= tau``. ``tau >= 2`` is the smallest
    integer with ``P(1 + Z >= tau) = exp(-(tau-1)/s) / (1 + exp(-1/s)) <= delta / max_groups``:
    a group that exists only because of one unit escapes with probability at most
    ``delta / max_groups``, and by the union bound over its at most ``max_groups`` groups, at
    most ``delta``. Derived from the noise the count really gets, never recomputed apart.
    """
    _check_open_delta(delta)
    if noise.mechanism != Mechanism.LAPLACE or not noise.integer or noise.granularity != 1.0:
        raise ValueError("key release needs integer discrete-Laplace noise on the unit grid")
    return _tau(noise.grid_scale, math.log(delta / max_groups))


def _tau(scale: float, log_target: float) -> int:
    """The smallest ``tau >= 2`` with ``log P(Z >= tau - 1) <= log_target``."""
    log_norm = math.log1p(math.exp(-1.0 / scale))

    def log_escape(tau: int) -> float:
        return -(tau - 1) / scale - log_norm

    tau = max(2, 1 + math.ceil(scale * (-log_target - log_norm)))
    # The closed form can be one off after floating-point rounding; settle it exactly.
    while tau > 2 and log_escape(tau - 1) <= log_target:
        tau -= 1
    while log_escape(tau) > log_target:
        tau += 1
    return tau
