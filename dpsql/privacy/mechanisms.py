"""Noise mechanisms: calibration, perturbation, thresholds, quantiles and accuracy.

The samplers (:mod:`dpsql.privacy.samplers`) draw the noise; this module decides how much a cell
needs and adds it. All functions are
vectorised over cells with numpy, and every random bit comes from the operating system's CSPRNG.

Why discrete noise (Mironov 2012)
    Textbook Laplace noise computed in floating point is not differentially private: the set of
    doubles that ``x + b * log(U)`` can produce has holes that depend on ``x``, so an attacker who
    sees one output can often tell which of two neighbouring databases produced it. dpsql never
    adds continuous noise. It adds *integer* noise, and an integer added to an integer is exact.

The power-of-two grid (real-valued cells), :func:`calibrate_laplace`, :func:`perturb`
    A real cell ``x`` is rounded to the nearest multiple of a granularity ``g = 2**k``; the
    integer ``round(x / g)`` gets integer noise of scale ``grid_sensitivity / epsilon`` and the
    answer is ``(round(x / g) + Z) * g``. Division and multiplication by a power of two are exact
    in binary floating point, so every output is an exact multiple of ``g`` whatever ``x`` was:
    the output set has no data-dependent holes. ``g`` is the smallest power of two
    ``>= (sensitivity / epsilon) / 2**40``, so the grid is ~2**40 times finer than the noise and
    costs no accuracy, and ``grid_sensitivity = ceil(sensitivity / g) + 1`` because rounding
    two neighbouring values can move them one grid step further apart (one step *per cell*
    that a unit can change; see ``cells_per_unit``). This is the approach of Google's
    differential-privacy library. Real sums that the engine computed exactly as integers of a
    fixed-point grid go through :func:`perturb_fixed`, which does the same in integer
    arithmetic, so the exact sum is never rounded to a double before the noise.

Exponential mechanism
    Quantiles, MIN and MAX: :mod:`dpsql.privacy.quantiles`.

Known, deliberate approximations
    *Saturation.* Noise is an int64: each geometric variable saturates at ``2**62 - 1``
    (``NOISE_CAP``), so ``|Z| < 2**62`` and ``exact + Z`` never overflows. That happens with
    probability ``exp(-2**62 / s) < e**-32768`` per variable for ``s < MAX_GRID_SCALE = 2**47``
    (or ``2**-53000``: 1000 rounds of ``k = 0``). Pure ``epsilon`` therefore means
    ``(epsilon, delta)`` with ``delta < 4 e**-32768`` per cell (two variables, two databases),
    far below anything a double can express. There is no other cap: in particular no
    ``36.7 s`` cap as with a 53-bit ``U`` (``delta ~ 2**-52``), whose draws beyond ~9 s were
    also too sparse to reach every integer when ``s ~ 2**40``.

    *Floating point.* ``U`` is continuous to ``2**-52`` (relative) inside its cell and
    ``-log(U)``, ``E * s`` are float64 operations, so the computed ``G`` is ``floor(E s (1 +
    theta) + eta s)`` with ``|theta| < 2**-50``, ``|eta| < 2**-51``: ``P(G >= n)`` is
    ``exp(-n/s)`` up to a relative error ``~2**-50 n/s + 2**-51`` for every ``n`` below the
    saturation (no cliff anywhere in the tail), and the computed ``E * s`` moves in steps
    below 1 wherever it is below ``2**52``: every integer is a possible value (no holes),
    however large ``s``. The probability of one integer is therefore exact only up to about
    ``2**-52 max(s, n)`` relative (``~2**-12`` for real cells, whose ``s`` is ~``2**40``
    grid steps), a slightly uneven but hole-free pmf, largely averaged out in ``G1 - G2``;
    a pointwise-exact sampler needs exact Bernoulli arithmetic (CKS 2020, Algorithm 1/2).
    The Gaussian's acceptance threshold ``x`` is a float64 expression (relative error ~1e-16).

    *Exponential mechanism.* :func:`dpsql.privacy.quantiles.quantile_from_histogram` draws its
    bucket by an exponential race in log space (``argmax(score_j - log E_j)``): no weight underflows
    and every bucket keeps a positive probability, exact up to the float64 rounding of the
    scores and of ``log E``. The point inside the bucket is a 53-bit uniform
    (post-processing).
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from statistics import NormalDist
from typing import SupportsInt, cast

import numpy as np
import numpy.typing as npt

from dpsql.errors import InvalidPrivacyParameter
from dpsql.metadata.owner_settings import (
    DEFAULT_MAX_QUERY_DELTA,
    DEFAULT_MAX_QUERY_EPSILON,
    QueryLimits,
)
from dpsql.privacy.mechanism_names import MECHANISMS as MECHANISMS
from dpsql.privacy.mechanism_names import Mechanism as Mechanism
from dpsql.privacy.randomness import Randomness
from dpsql.privacy.samplers import MAX_GRID_SCALE, discrete_gaussian, discrete_laplace

#: The grid is this many binary orders of magnitude finer than the noise scale.
GRID_BITS = 40
#: Largest epsilon accepted from an analyst unless the owner sets ``[budget] max_query_epsilon``
#: (:class:`~dpsql.metadata.owner_settings.QueryLimits`).
MAX_EPSILON = DEFAULT_MAX_QUERY_EPSILON
#: Largest delta accepted unless the owner sets ``[budget] max_query_delta``.
MAX_DELTA = DEFAULT_MAX_QUERY_DELTA
#: The owner's limits when the metadata sets none.
DEFAULT_LIMITS = QueryLimits()
#: The limits of a parameter's form alone (any finite epsilon > 0, any delta in [0, 1]): what a
#: front door or an inner pass checks; the owner's limits are checked where the query enters the
#: library (:class:`dpsql.routes.planner.Planner`), with the owner's values.
WELL_FORMED = QueryLimits(max_epsilon=float(np.finfo(np.float64).max), max_delta=1.0)
#: Smallest granularity for real cells (reached when the sensitivity is zero, or the epsilon
#: beyond ~1e280, as an owner's test database may allow): a cell's values are saturated at
#: ``2**1020`` grid units, so this grid still carries every value up to ``2**120``. A coarser
#: grid than the noise asks for costs accuracy only: the grid sensitivity pays its rounding.
_MIN_GRANULARITY = 2.0**-900
#: Exact values are saturated to this many grid units: far beyond any plausible aggregate,
#: small enough that ``units + noise`` cannot overflow int64.
_INT_SATURATION = 2**62
_INT64_MAX = int(np.iinfo(np.int64).max)


# --------------------------------------------------------------------------- calibration


@dataclass(frozen=True)
class NoiseSpec:
    """How one cell is perturbed.

    ``integer``: the cell is integer-valued (COUNT, SUM of integers) and stays an int64.
    ``granularity``: ``2**k``; noisy outputs are exact multiples of it (1.0 for integer cells).
    ``grid_scale``: the scale of the integer noise in grid units (discrete Laplace ``s`` or
    discrete Gaussian ``sigma``). ``scale``: the same in value units, ``grid_scale * granularity``.
    """

    mechanism: Mechanism
    integer: bool
    granularity: float
    grid_scale: float
    scale: float


def calibrate_laplace(
    sensitivity: float, epsilon: float, integer: bool, *, cells_per_unit: int = 1
) -> NoiseSpec:
    """Discrete-Laplace noise for an ``epsilon``-DP cell of L1 sensitivity ``sensitivity``.

    Integer cells: ``g = 1``, ``grid_scale = ceil(sensitivity) / epsilon``.
    Real cells: ``g`` = smallest power of two ``>= (sensitivity / epsilon) / 2**40``,
    ``grid_scale = (ceil(sensitivity / g) + cells_per_unit) / epsilon``. ``cells_per_unit``
    (the number of cells one unit can change, e.g. ``max_groups_per_unit`` when
    ``sensitivity`` is the L1 bound over all groups) pays one grid step of rounding per cell.
    Integer cells whose noise would exceed ``2**40`` also get a power-of-two ``g > 1``
    (keeping the sampler exact); their outputs are still integers.
    """
    _check_sensitivity(sensitivity)
    _check_positive_finite(epsilon, "epsilon")
    _check_cells(cells_per_unit)
    granularity = _granularity(sensitivity / epsilon, integer)
    grid_sens = _grid_sensitivity(sensitivity, granularity, integer, float(cells_per_unit))
    return _spec(Mechanism.LAPLACE, integer, granularity, grid_sens / epsilon)


def calibrate_gaussian(
    sensitivity_l2: float, rho: float, integer: bool, *, cells_per_unit: int = 1
) -> NoiseSpec:
    """Discrete-Gaussian noise for a ``rho``-zCDP cell of L2 sensitivity ``sensitivity_l2``.

    ``sigma = sensitivity / sqrt(2 rho)`` (CKS 2020: the discrete Gaussian is
    ``D**2 / (2 sigma**2)``-zCDP). Integer cells: ``g = 1``, grid sensitivity
    ``ceil(sensitivity)``. Real cells: ``g`` = smallest power of two ``>= sigma / 2**40``, grid
    sensitivity ``ceil(sensitivity / g) + sqrt(cells_per_unit)`` (rounding moves each changed
    cell by at most one grid step, so the L2 norm grows by at most ``sqrt(cells)``);
    ``grid_scale = grid_sensitivity / sqrt(2 rho)``.
    """
    _check_sensitivity(sensitivity_l2)
    _check_positive_finite(rho, "rho")
    _check_cells(cells_per_unit)
    root = math.sqrt(2.0 * rho)
    granularity = _granularity(sensitivity_l2 / root, integer)
    slack = math.sqrt(cells_per_unit)
    grid_sens = _grid_sensitivity(sensitivity_l2, granularity, integer, slack)
    return _spec(Mechanism.GAUSSIAN, integer, granularity, grid_sens / root)


def rho_for(epsilon: float, delta: float) -> float:
    """The largest ``rho`` whose ``rho``-zCDP implies ``(epsilon, delta)``-DP.

    Bun-Steinke (2016): ``rho``-zCDP implies ``(rho + 2 sqrt(rho ln(1/delta)), delta)``-DP.
    Solving for ``rho`` with ``L = ln(1/delta)``:
    ``sqrt(rho) = sqrt(L + epsilon) - sqrt(L) = epsilon / (sqrt(L + epsilon) + sqrt(L))``
    (the second form avoids cancellation when ``epsilon << L``).
    """
    _check_positive_finite(epsilon, "epsilon")
    _check_open_delta(delta)
    log_inv = -math.log(delta)
    root = epsilon / (math.sqrt(log_inv + epsilon) + math.sqrt(log_inv))
    return root * root


def _granularity(noise_scale: float, integer: bool) -> float:
    """The power-of-two grid: ``2**40`` times finer than ``noise_scale`` (value units)."""
    target = noise_scale / 2.0**GRID_BITS
    if not math.isfinite(target):
        raise InvalidPrivacyParameter(
            "The noise for this cell would be infinite: raise epsilon (or rho) or declare "
            "tighter column bounds."
        )
    if integer:
        # Integer cells keep unit granularity unless the noise is astronomically large.
        return max(1.0, _pow2_at_least(target))
    return _pow2_at_least(max(target, _MIN_GRANULARITY))


def _grid_sensitivity(sensitivity: float, granularity: float, integer: bool, slack: float) -> float:
    """Sensitivity in grid units, including the rounding slack when values are rounded."""
    if integer and granularity == 1.0:
        # Integer cells are not rounded; a zero sensitivity still gets unit noise so that the
        # sampler never sees a zero scale.
        return float(max(math.ceil(sensitivity), 1))
    return math.ceil(sensitivity / granularity) + slack


def _spec(mechanism: Mechanism, integer: bool, granularity: float, grid_scale: float) -> NoiseSpec:
    """Build a :class:`NoiseSpec`, refusing scales the samplers cannot draw exactly."""
    if not grid_scale < MAX_GRID_SCALE:
        raise InvalidPrivacyParameter(
            f"The privacy budget of this cell is too small: its noise would be {grid_scale:.3g} "
            f"grid steps (limit {MAX_GRID_SCALE:.3g}). Raise epsilon (or delta for the "
            "Gaussian) or declare tighter column bounds."
        )
    return NoiseSpec(mechanism, integer, granularity, grid_scale, grid_scale * granularity)


def _pow2_at_least(x: float) -> float:
    """The smallest power of two ``>= x`` for a positive finite ``x``, exactly."""
    mantissa, exponent = math.frexp(x)  # x = mantissa * 2**exponent, 0.5 <= mantissa < 1
    return math.ldexp(1.0, exponent - 1 if mantissa == 0.5 else exponent)


# --------------------------------------------------------------------------- perturbation


def perturb(
    values: npt.ArrayLike, spec: NoiseSpec, rng: Randomness
) -> npt.NDArray[np.int64] | npt.NDArray[np.float64]:
    """``values`` plus independent noise per cell (drawn from ``rng``), as described by
    ``spec``.

    Integer spec (g = 1): ``x + Z`` as int64. Real spec: ``(round(x / g) + Z) * g`` as float64,
    an exact multiple of ``g``. ``Z`` is ``discrete_laplace(grid_scale)`` or
    ``discrete_gaussian(grid_scale)``. Exact values beyond ``2**62`` grid steps are saturated
    before the noise (a 1-Lipschitz clamp, so privacy is unchanged), never an error, because
    an error must not depend on private values. Non-finite inputs raise ``ValueError``: they
    are a bug of the caller (empty sums must be coalesced to zero before this point).
    """
    array = np.asarray(values)
    noise = _noise(spec, array.size, rng).reshape(array.shape)
    if spec.integer:
        return _perturb_integer(array, spec.granularity, noise)
    return _perturb_real(array, spec.granularity, noise)


def perturb_fixed(sums: Sequence[object], step: float, spec: NoiseSpec, rng: Randomness
                  ) -> npt.NDArray[np.float64]:
    """Real cells given exactly as integers in units of ``step``: cell ``i`` is
    ``sums[i] * step``, an exact fixed-point sum (see dpsql.privacy.aggregates, "Exact sums").

    The same mechanism as :func:`perturb` for a real spec, in exact integer arithmetic:
    ``step`` and ``g`` are powers of two, so ``x / g = sums * 2**d``: a shift when ``d >= 0``,
    else rounded half up (``floor(sums / 2**-d + 1/2)``, monotone, off by at most 1/2, which
    the grid sensitivity's one step per cell pays for). The grid units are saturated (as in
    :func:`perturb`), the integer noise is added exactly, and the noisy integer is converted
    to float64 once: a function of the exact noisy integer only (post-processing). Nothing is
    rounded to a double before the noise, however large the HUGEINT sum.
    """
    if spec.integer or not _is_pow2(step):
        raise ValueError("perturb_fixed() needs a real spec and a power-of-two step")
    shift = math.frexp(spec.granularity)[1] - 1
    d = math.frexp(step)[1] - 1 - shift
    limit = 1 << min(1020, 1020 - shift)  # as in _perturb_real: a fine grid needs the range
    noise = _noise(spec, len(sums), rng)
    out = np.empty(len(sums), dtype=np.float64)
    for i, item in enumerate(sums):
        exact = _exact_int(item)
        units = exact << d if d >= 0 else (exact + (1 << (-d - 1))) >> -d
        noisy = max(-limit, min(limit, units)) + int(noise[i])
        out[i] = _ldexp_saturated(noisy, shift)
    return out


def _ldexp_saturated(noisy: int, shift: int) -> float:
    """``noisy * 2**shift`` as a double, the largest finite one beyond it: at bounds near the
    largest doubles the noise alone can pass it (an OverflowError after the charge before).
    A function of the noisy integer only: post-processing."""
    try:
        return math.ldexp(float(noisy), shift)
    except OverflowError:
        return math.copysign(sys.float_info.max, noisy)


def _exact_int(item: object) -> int:
    """One integer sum as a Python int; anything else is a bug of the caller."""
    if isinstance(item, bool) or not isinstance(item, numbers.Integral):
        raise ValueError(f"perturb_fixed() needs integer sums, got {item!r}")
    return int(item)


def _is_pow2(x: float) -> bool:
    """``x`` is a positive power of two (normal or subnormal)."""
    return x > 0 and math.isfinite(x) and math.frexp(x)[0] == 0.5


def _noise(spec: NoiseSpec, size: int, rng: Randomness) -> npt.NDArray[np.int64]:
    """Integer noise in grid units for ``size`` cells."""
    if spec.mechanism == Mechanism.LAPLACE:
        return discrete_laplace(spec.grid_scale, size, rng)
    if spec.mechanism == Mechanism.GAUSSIAN:
        return discrete_gaussian(spec.grid_scale, size, rng)
    raise ValueError(f"unknown mechanism {spec.mechanism!r}")


def _perturb_integer(
    array: npt.NDArray[np.generic], granularity: float, noise: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Integer cells: exact int64 arithmetic, rounding half up when ``g = 2**k > 1``."""
    exact = _to_int64_saturated(array)
    shift = math.frexp(granularity)[1] - 1
    if shift == 0:
        return exact + noise  # |exact| <= 2**62, |noise| <= NOISE_CAP: no overflow
    units = (exact + (1 << (shift - 1))) >> shift
    # The noisy total is already private; clipping it is post-processing.
    limit = _INT64_MAX >> shift
    noisy: npt.NDArray[np.int64] = np.clip(units + noise, -limit, limit) << shift
    return noisy


def _perturb_real(
    array: npt.NDArray[np.generic], granularity: float, noise: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """Real cells on the power-of-two grid, in float64.

    ``rint(x / g)`` is exact (``g`` is a power of two). ``units + noise`` adds two exactly
    representable integers and IEEE addition is correctly rounded, so the float result is a
    function of the exact noisy integer only: post-processing, no Mironov holes.
    """
    exact = np.asarray(array, dtype=np.float64)
    if not np.all(np.isfinite(exact)):
        raise ValueError("perturb() got a non-finite value; coalesce NULL/NaN before noising")
    shift = math.frexp(granularity)[1] - 1
    # Saturation bound in grid units that keeps (units + noise) * g finite (and the bound
    # itself a double). A fine grid (tiny noise, epsilon 1e20 and beyond) needs the large
    # bound: at g = 2**-1000, 2**1000 units would saturate every value above 1.
    limit = 2.0 ** min(1020, 1020 - shift)
    with np.errstate(over="ignore"):
        units = np.clip(np.rint(exact / granularity), -limit, limit)
    return _noisy_units(units, noise) * granularity


def _noisy_units(units: npt.NDArray[np.float64], noise: npt.NDArray[np.int64]
                 ) -> npt.NDArray[np.float64]:
    """``units + noise`` correctly rounded to float64, a function of the exact integer sum.

    ``units`` holds integers (exact doubles). A noise draw below ``2**53`` is an exact double
    too, and IEEE addition rounds the exact sum once. The rare larger draws (probability about
    ``exp(-2**53 / s)``) would be rounded *before* the addition, so they are added as Python
    integers instead.
    """
    big = np.flatnonzero(np.abs(noise) >= 2**53)
    out = units + noise.astype(np.float64)
    for i in big:
        out.flat[i] = float(int(units.flat[i]) + int(noise.flat[i]))
    return out


def _to_int64_saturated(array: npt.NDArray[np.generic]) -> npt.NDArray[np.int64]:
    """Integer-valued input as int64, clamped to ``+-2**62``; ``ValueError`` if not integral."""
    kind = array.dtype.kind
    if kind in "biu":
        if kind == "u":
            capped: npt.NDArray[np.int64] = np.minimum(array, np.uint64(_INT_SATURATION)).astype(
                np.int64
            )
            return capped
        clipped: npt.NDArray[np.int64] = np.clip(
            array.astype(np.int64), -_INT_SATURATION, _INT_SATURATION
        )
        return clipped
    if kind == "f":
        return _float_to_int64(array.astype(np.float64))
    # Object arrays (Python ints beyond int64, Decimal from HUGEINT/DECIMAL sums).
    flat = [_object_to_int(item) for item in array.ravel()]
    return np.asarray(flat, dtype=np.int64).reshape(array.shape)


def _float_to_int64(array: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Integral floats to int64, saturated."""
    if not np.all(np.isfinite(array)):
        raise ValueError("perturb() got a non-finite value; coalesce NULL/NaN before noising")
    if not np.all(array == np.rint(array)):
        raise ValueError("perturb() with an integer spec got a non-integral value")
    bound = float(_INT_SATURATION)
    return np.clip(array, -bound, bound).astype(np.int64)


def _object_to_int(item: object) -> int:
    """One Python number to a saturated int, refusing non-finite and non-integral values."""
    if isinstance(item, bool) or not isinstance(item, numbers.Real | Decimal):
        raise ValueError(f"perturb() got a non-numeric value {item!r}")
    try:
        whole = int(cast(SupportsInt, item))  # float, Fraction, Decimal, numpy scalars
    except (OverflowError, ValueError) as exc:  # inf, nan
        raise ValueError(f"perturb() got a non-finite value {item!r}") from exc
    if whole != item:
        raise ValueError(f"perturb() with an integer spec got a non-integral value {item!r}")
    return max(-_INT_SATURATION, min(_INT_SATURATION, whole))


# --------------------------------------------------------------------------- accuracy


def accuracy(spec: NoiseSpec, confidence: float = 0.95) -> float:
    """Half-width ``a`` (value units) with ``P(|noisy - exact| <= a) >= confidence``.

    Discrete Laplace, ``s = grid_scale``: ``P(|Z| > m) = 2 exp(-(m+1)/s) / (1 + exp(-1/s))``;
    ``m`` is the smallest integer with ``P(|Z| > m) <= 1 - confidence``. Discrete Gaussian:
    ``m = ceil(z * sigma)`` with ``z`` the ``(1 + confidence)/2`` normal quantile (the discrete
    tail beyond ``m`` is at most the continuous tail beyond ``m``, see CKS 2020).
    ``a = m * g``, plus ``g / 2`` when the exact value was rounded to the grid.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if spec.mechanism == Mechanism.LAPLACE:
        steps = _laplace_steps(spec.grid_scale, 1.0 - confidence)
    else:
        z = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
        steps = math.ceil(z * spec.grid_scale)
    rounding = 0.0 if spec.integer and spec.granularity == 1.0 else spec.granularity / 2.0
    return steps * spec.granularity + rounding


def _laplace_steps(scale: float, alpha: float) -> int:
    """The smallest integer ``m >= 0`` with ``P(|Z| > m) <= alpha`` for discrete Laplace(scale)."""
    log_alpha = math.log(alpha)
    log_norm = math.log1p(math.exp(-1.0 / scale))

    def log_tail(m: int) -> float:
        return math.log(2.0) - (m + 1) / scale - log_norm

    steps = max(0, math.ceil(scale * (math.log(2.0 / alpha) - log_norm)) - 1)
    # The closed form can be one off after floating-point rounding; settle it exactly.
    while steps > 0 and log_tail(steps - 1) <= log_alpha:
        steps -= 1
    while log_tail(steps) > log_alpha:
        steps += 1
    return steps


# --------------------------------------------------------------------------- validation


def validate_privacy_parameters(epsilon: float, delta: float, mechanism: str,
                                limits: QueryLimits = DEFAULT_LIMITS) -> None:
    """Refuse privacy parameters an analyst must not use, saying what to change.

    ``0 < epsilon <= limits.max_epsilon`` (the owner's ``[budget] max_query_epsilon``, default
    100); ``0 <= delta <= limits.max_delta`` (``max_query_delta``, default 0.1; 1e-3 or less is
    recommended: delta is the probability of a total failure); ``mechanism`` is ``"laplace"``
    or ``"gaussian"``, and the Gaussian needs ``delta > 0``. Booleans and non-numbers are
    refused. :data:`WELL_FORMED` checks the form alone.
    """
    eps = _real_parameter(epsilon, "epsilon")
    if not 0.0 < eps <= limits.max_epsilon:
        raise InvalidPrivacyParameter(
            f"epsilon must be greater than 0 and at most {limits.max_epsilon:g} (the data "
            f"owner's [budget] max_query_epsilon), got {epsilon!r}. Use a value such as 0.1 to 1."
        )
    dlt = _real_parameter(delta, "delta")
    if not 0.0 <= dlt <= limits.max_delta:
        raise InvalidPrivacyParameter(
            f"delta must be between 0 and {limits.max_delta:g} (the data owner's [budget] "
            f"max_query_delta), got {delta!r}. "
            "Use 0 for pure epsilon-DP or a small value such as 1e-6 (1e-3 at most is advised)."
        )
    if not isinstance(mechanism, str) or mechanism not in MECHANISMS:
        raise InvalidPrivacyParameter(
            f"Unknown noise mechanism {mechanism!r}: use 'laplace' (the default) or 'gaussian'."
        )
    if mechanism == Mechanism.GAUSSIAN and dlt == 0.0:
        raise InvalidPrivacyParameter(
            "The Gaussian mechanism needs delta > 0: set a small delta such as 1e-6, "
            "or use the 'laplace' mechanism for pure epsilon-DP."
        )


def _real_parameter(value: object, name: str) -> float:
    """A finite real number as float, else :class:`InvalidPrivacyParameter`."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise InvalidPrivacyParameter(f"{name} must be a number, got {value!r}.")
    number = float(value)
    if not math.isfinite(number):
        raise InvalidPrivacyParameter(f"{name} must be a finite number, got {value!r}.")
    return number


# --------------------------------------------------------------------------- internal checks


def _check_positive_finite(value: float, name: str) -> None:
    """``0 < value < inf``; ``ValueError`` for internal callers (analysts are validated above)."""
    if isinstance(value, bool) or not (0.0 < value < math.inf):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def _check_open_delta(delta: float) -> None:
    """``0 < delta < 1``."""
    if isinstance(delta, bool) or not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")


def _check_sensitivity(sensitivity: float) -> None:
    """A finite sensitivity ``>= 0``."""
    if isinstance(sensitivity, bool) or not 0.0 <= sensitivity < math.inf:
        raise ValueError(f"sensitivity must be finite and >= 0, got {sensitivity!r}")


def _check_cells(cells_per_unit: int) -> None:
    """A positive integer number of cells."""
    if isinstance(cells_per_unit, bool) or not isinstance(cells_per_unit, numbers.Integral):
        raise ValueError(f"cells_per_unit must be an integer, got {cells_per_unit!r}")
    if cells_per_unit < 1:
        raise ValueError(f"cells_per_unit must be >= 1, got {cells_per_unit}")
