"""Samplers: the only place where dpsql draws random numbers.

Every other module decides *how much* noise a cell needs (:mod:`dpsql.privacy.mechanisms`); this one
draws it. All functions are vectorised over cells with numpy.

Randomness
    Every bit comes from the :class:`~dpsql.privacy.randomness.Randomness` passed in (``rng``): the
    operating system's CSPRNG in production, never numpy's default generator or the
    ``random`` module, seeded and predictable PRNGs whose state would let an analyst subtract
    the noise exactly. :func:`exponential` draws Exp(1)
    variables with unbounded support: a 53-bit cell index ``k`` for ``U``, 52 more bits for
    ``U``'s position inside the cell, and, when ``k = 0`` (``U < 2**-53``), memorylessness:
    ``E = 53 ln 2 + E'`` with a fresh ``E'``. :func:`uniform` (``k / 2**53``, ``k >= 1``) is
    only used where 53 bits suffice.

Discrete Laplace (two-sided geometric), :func:`discrete_laplace`
    ``P(Z = z) = (1 - a) / (1 + a) * a**|z|`` with ``a = exp(-1/s)``, i.e. proportional to
    ``exp(-|z| / s)``. Adding it to an integer query of L1 sensitivity ``D`` is ``(D/s)``-DP, so
    ``s = D / epsilon``. Sampled as ``G1 - G2`` of two iid geometric variables with success
    probability ``p = 1 - a``, each by inverse transform ``G = floor(E * s)`` with
    ``E ~ Exp(1)`` (``log(1 - p) = -1/s`` exactly: no ``log1p(-p)`` round trip). Past
    ``2**52``, where doubles stop being exact integers, memorylessness again: the variable
    carries ``2**52`` and draws afresh. Variance ``2a / (1 - a)**2``.

Discrete Gaussian, :func:`discrete_gaussian`
    ``P(Z = z)`` proportional to ``exp(-z**2 / (2 sigma**2))``. Canonne, Kamath and Steinke
    (2020) prove that adding it to an integer vector of L2 sensitivity ``D`` is
    ``rho``-zCDP with ``rho = D**2 / (2 sigma**2)``. Their rejection sampler: ``t = floor(sigma)
    + 1``, ``Y ~ discrete Laplace(t)``, accept with probability
    ``exp(-(|Y| - sigma**2 / t)**2 / (2 sigma**2))``, as the event ``E > x`` for a fresh
    ``E ~ Exp(1)``: ``Y`` and the acceptance both have exact tails, so the Gaussian does too.

Saturation (the one deliberate bound) is described in :mod:`dpsql.privacy.mechanisms`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import numpy.typing as npt

from dpsql.privacy.randomness import Randomness

#: Largest noise scale (grid units): a geometric variable then passes ``2**52`` (where the
#: sampler carries, see ``_geometric``) with probability ``exp(-2**5)`` only, and saturates at
#: ``2**62`` with probability below ``exp(-2**15)``.
MAX_GRID_SCALE = 2.0**47
#: A geometric variable saturates here (``2**62 - 1``), so that ``|exact| <= 2**62`` plus noise
#: stays inside int64.
NOISE_CAP = 2**62 - 1
#: Rounds of ``k = 0`` after which an exponential variable is saturated (+inf).
_MAX_ROUNDS = 1000
_LN2_53 = 53.0 * math.log(2.0)
#: A geometric variable is drawn in chunks of ``2**52`` (exact doubles), at most 1024 of them.
_CARRY = 2**52
_CARRY_STEPS = 1024


# --------------------------------------------------------------------------- randomness


def uniform(size: int, rng: Randomness) -> npt.NDArray[np.float64]:
    """``size`` iid float64 uniforms in the open interval (0, 1) from ``rng``.

    ``U = k / 2**53`` with ``k`` the top 53 bits of a CSPRNG 64-bit word; ``k = 0`` is redrawn
    (probability ``2**-53``), so ``2**-53 <= U <= 1 - 2**-53``: ``log(U)`` is always finite.
    Used where a 53-bit uniform is all that is needed (a point inside a quantile bucket, the
    exponential mechanism's inverse CDF); the noise samplers use :func:`exponential`.
    """
    _check_size(size)
    out = _bits53(size, rng)
    zero = np.flatnonzero(out == 0)
    while zero.size:
        out[zero] = _bits53(zero.size, rng)
        zero = zero[out[zero] == 0]
    return out.astype(np.float64) * 2.0**-53


def _bits53(size: int, rng: Randomness) -> npt.NDArray[np.uint64]:
    """``size`` integers uniform on ``0 .. 2**53 - 1`` (the high bits of CSPRNG words)."""
    return rng.words(size) >> np.uint64(11)


def exponential(size: int, rng: Randomness) -> npt.NDArray[np.float64]:
    """``size`` iid Exp(1) variables with unbounded support and an exact tail.

    ``E = -log(U)`` for a *continuous* uniform ``U``, drawn cell by cell (memorylessness):
    ``k``, the top 53 bits of a CSPRNG word, says in which cell ``[k, k + 1) / 2**53`` the
    variable ``U`` falls. If ``k >= 1``, ``U = (k + V) / 2**53`` with ``V`` a fresh uniform on
    (0, 1) from 52 more CSPRNG bits (the midpoint ``(2j + 1) / 2**53`` of one of ``2**52``
    sub-cells), and ``E = -log(U)``. If ``k = 0`` (probability ``2**-53``), then
    ``U < 2**-53``, and given that, ``2**53 U`` is again uniform: ``E = 53 ln 2 + E'`` with a
    fresh ``E'`` drawn the same way, round after round. So ``P(E > x) = exp(-x)`` for every
    ``x``, with no cap (the former ``U = k / 2**53`` never exceeded ``53 ln 2 = 36.7``).

    ``k + V`` is rounded to 53 significant bits, so ``E`` has a relative precision of about
    ``2**-52`` everywhere, in the tail as in the bulk. A variable still undecided after
    ``_MAX_ROUNDS`` rounds (probability ``2**(-53 * 1000)``, below ``e**-36000``) is returned
    as ``+inf``: callers treat it as saturated.
    """
    _check_size(size)
    out = np.empty(size, dtype=np.float64)
    pending = np.arange(size)
    for rounds in range(_MAX_ROUNDS):
        if not pending.size:
            return out
        words = rng.words(2 * pending.size)
        k = words[: pending.size] >> np.uint64(11)
        sub = (words[pending.size :] >> np.uint64(12)) * np.uint64(2) + np.uint64(1)
        hit = k != 0
        cell = (k[hit].astype(np.float64) + sub[hit].astype(np.float64) * 2.0**-53) * 2.0**-53
        out[pending[hit]] = rounds * _LN2_53 - np.log(cell)
        pending = pending[~hit]
    out[pending] = math.inf
    return out


# --------------------------------------------------------------------------- samplers


def discrete_laplace(scale: float, size: int, rng: Randomness) -> npt.NDArray[np.int64]:
    """``size`` iid draws of the discrete Laplace: ``P(Z = z)`` proportional to ``exp(-|z|/s)``.

    ``Z = G1 - G2`` of two iid geometric variables (:func:`_geometric`),
    ``Var(Z) = 2a / (1 - a)**2``, ``a = exp(-1/s)``. ``0 < scale < MAX_GRID_SCALE``. Each
    ``G`` saturates at ``NOISE_CAP = 2**62 - 1``, so ``|Z| <= 2**62 - 1``: adding it to a value
    saturated at ``2**62`` cannot overflow int64.
    """
    _check_size(size)
    _check_scale(scale, "scale")
    return _geometric(scale, size, rng) - _geometric(scale, size, rng)


def _geometric(scale: float, size: int, rng: Randomness) -> npt.NDArray[np.int64]:
    """Geometric variables on {0, 1, ...} with ``P(G >= n) = exp(-n / scale)``, saturated at
    ``NOISE_CAP``.

    ``G = floor(E * s)`` for ``E ~ Exp(1)`` (:func:`exponential`) while ``E * s < 2**52``,
    where every integer is an exactly representable double and consecutive values of the
    computed ``E * s`` are less than 1 apart (``E`` has ~``2**-52`` relative precision), so
    the support has no holes. Beyond, memorylessness again: ``P(G >= n + N | G >= n)`` is
    ``P(G >= N)`` for ``N = 2**52``, so a draw with ``E * s >= N`` adds ``N`` to the variable
    and draws again. After 1024 such steps the variable is ``>= 2**62`` and saturates at
    ``NOISE_CAP``: probability ``exp(-2**62 / s) < e**-32768`` for ``s < MAX_GRID_SCALE``. An
    exponential that gave up (``+inf``, probability ``2**-53000``) saturates it as well.
    """
    out = np.zeros(size, dtype=np.int64)
    pending = np.arange(size)
    for step in range(_CARRY_STEPS):
        if not pending.size:
            return out
        scaled = exponential(pending.size, rng) * scale
        inside = scaled < _CARRY
        out[pending[inside]] = step * _CARRY + np.floor(scaled[inside]).astype(np.int64)
        saturated = np.isinf(scaled)  # an exponential that gave up saturates the variable
        out[pending[saturated]] = NOISE_CAP
        pending = pending[~inside & ~saturated]
    out[pending] = NOISE_CAP
    return out


def discrete_gaussian(sigma: float, size: int, rng: Randomness) -> npt.NDArray[np.int64]:
    """``size`` iid draws with ``P(Z = z)`` proportional to ``exp(-z**2 / (2 sigma**2))``.

    Canonne-Kamath-Steinke (2020), Algorithm 3: ``t = floor(sigma) + 1``,
    ``Y ~ discrete_laplace(t)``, accept ``Y`` with probability
    ``exp(-(|Y| - sigma**2/t)**2 / (2 sigma**2))``; rejected draws are retried in batches.
    """
    _check_size(size)
    _check_scale(sigma, "sigma")
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        batch = _gaussian_batch(sigma, size - filled, rng)
        out[filled : filled + batch.size] = batch
        filled += batch.size
    return out


def _gaussian_batch(sigma: float, need: int, rng: Randomness) -> npt.NDArray[np.int64]:
    """At most ``need`` accepted draws of one vectorised round of the CKS rejection sampler.

    The Bernoulli trial with success probability ``exp(-x)`` is ``E > x`` for ``E ~ Exp(1)``
    (:func:`exponential`), exact for every ``x``. ``U < exp(-x)`` with a 53-bit ``U`` would
    never accept ``x > 36.7``, truncating the Gaussian at about ``9.6 sigma``.
    """
    t = math.floor(sigma) + 1
    # The acceptance rate is between ~0.44 (tiny sigma) and ~0.76 (large sigma), so 2.5x
    # oversampling usually finishes in one round; the caller loops for the rare shortfall.
    draws = (5 * need) // 2 + 16
    y = discrete_laplace(t, draws, rng)
    gap = np.abs(y) - sigma * sigma / t
    accept = exponential(draws, rng) > (gap * gap) / (2.0 * sigma * sigma)
    return y[accept][:need]


def _check_size(size: int) -> None:
    """A non-negative integer sample size."""
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 0:
        raise ValueError(f"size must be a non-negative integer, got {size!r}")


def _check_scale(scale: float, name: str) -> None:
    """A noise scale the samplers draw exactly: ``0 < scale < MAX_GRID_SCALE``."""
    if not 0.0 < scale < MAX_GRID_SCALE:  # also false for NaN
        raise ValueError(f"{name} must be in (0, {MAX_GRID_SCALE:g}), got {scale!r}")
