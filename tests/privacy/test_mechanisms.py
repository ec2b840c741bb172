"""Statistical and unit tests of dpsql.privacy.mechanisms.

Every statistical assertion uses a band whose false-alarm probability is about 1e-7 (normal
bands of Z_BAND standard errors, or goodness-of-fit p-values above P_MIN), so it still catches a
wrong distribution; and the draws come from a Randomness seeded per test (``rng``, the
``randomness`` fixture of conftest.py), so the verdict is the same on every run. Tests that
need particular bits build a Randomness on a byte stream of their own.
"""

from __future__ import annotations

import math
import os
from decimal import Decimal

import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

from dpsql.errors import InvalidPrivacyParameter
from dpsql.privacy import mechanisms as m
from dpsql.privacy import quantiles, samplers, thresholds
from dpsql.privacy.quantiles import quantile_from_histogram as quantile_of
from dpsql.privacy.randomness import Randomness


@pytest.fixture
def rng(randomness: Randomness) -> Randomness:
    """This test's seeded Randomness (conftest.py): the same verdict on every run."""
    return randomness


Z_BAND = 5.3  # two-sided normal tail ~1.2e-7
P_MIN = 1e-6  # goodness-of-fit tests fail only below this p-value


def laplace_pmf(z: npt.NDArray[np.int64], scale: float) -> npt.NDArray[np.float64]:
    """Exact discrete Laplace pmf ``(1 - a)/(1 + a) a^|z|``."""
    a = math.exp(-1.0 / scale)
    return (1 - a) / (1 + a) * np.power(a, np.abs(z).astype(np.float64))


def laplace_variance(scale: float) -> float:
    """Exact variance ``2a / (1 - a)^2``, with ``1 - a`` from expm1 for large scales."""
    a = math.exp(-1.0 / scale)
    return 2 * a / math.expm1(-1.0 / scale) ** 2


def gaussian_pmf(z: npt.NDArray[np.int64], sigma: float) -> npt.NDArray[np.float64]:
    """Exact discrete Gaussian pmf, normalised over a support wide enough for float64."""
    span = int(40 * sigma) + 40
    support = np.arange(-span, span + 1, dtype=np.float64)
    norm = float(np.exp(-(support**2) / (2 * sigma**2)).sum())
    pmf: npt.NDArray[np.float64] = np.exp(-(z.astype(np.float64) ** 2) / (2 * sigma**2)) / norm
    return pmf


def gaussian_variance(sigma: float) -> float:
    """Exact variance by summation (sigma**2 up to e^{-2 pi^2 sigma^2} for large sigma)."""
    if sigma > 100:
        return sigma**2
    span = int(40 * sigma) + 40
    support = np.arange(-span, span + 1)
    return float((support.astype(np.float64) ** 2 * gaussian_pmf(support, sigma)).sum())


def assert_second_moment(
    z: npt.NDArray[np.int64] | npt.NDArray[np.float64], variance: float
) -> None:
    """mean(z^2) (the variance, the mean being 0) within Z_BAND standard errors."""
    squares = z.astype(np.float64) ** 2
    se = squares.std() / math.sqrt(z.size)
    assert abs(squares.mean() - variance) <= Z_BAND * se, (squares.mean(), variance, se)


def assert_centred(z: npt.NDArray[np.int64], variance: float) -> None:
    """Mean ~0 and as many positive as negative draws."""
    assert abs(z.astype(np.float64).mean()) <= Z_BAND * math.sqrt(variance / z.size)
    positive, negative = int((z > 0).sum()), int((z < 0).sum())
    if positive + negative:
        assert stats.binomtest(positive, positive + negative).pvalue > P_MIN


def chi_square_fit(z: npt.NDArray[np.int64], pmf: npt.NDArray[np.float64], span: int) -> float:
    """p-value of a chi-square test of draws against ``pmf`` on -span..span, tails merged."""
    clipped = np.clip(z, -span - 1, span + 1) + span + 1
    observed = np.bincount(clipped, minlength=2 * span + 3)
    inner = pmf[1:-1]
    tail = (1 - inner.sum()) / 2
    expected = np.concatenate([[tail], inner, [tail]]) * z.size
    keep = expected > 5  # the chi-square approximation needs populated cells
    observed_kept = np.append(observed[keep], observed[~keep].sum())
    expected_kept = np.append(expected[keep], expected[~keep].sum())
    if expected_kept[-1] == 0:
        observed_kept, expected_kept = observed_kept[:-1], expected_kept[:-1]
    expected_kept *= observed_kept.sum() / expected_kept.sum()
    return float(stats.chisquare(observed_kept, expected_kept).pvalue)


# --------------------------------------------------------------------------- uniform


def test_uniform_in_open_unit_interval_with_53_bits(rng: Randomness) -> None:
    u = samplers.uniform(200_000, rng)
    assert u.dtype == np.float64 and u.shape == (200_000,)
    assert np.all(u > 0) and np.all(u < 1)
    assert np.all(u * 2.0**53 == np.rint(u * 2.0**53))
    assert abs(u.mean() - 0.5) <= Z_BAND * math.sqrt(1 / 12 / u.size)
    assert stats.kstest(u, "uniform").pvalue > P_MIN
    assert samplers.uniform(0, rng).shape == (0,)


def test_uniform_reads_the_stream() -> None:
    def counting_bytes(n: int) -> bytes:
        # word i carries k = i + 1 in its top 53 bits
        return (np.arange(1, n // 8 + 1, dtype="<u8") << np.uint64(11)).tobytes()

    assert np.array_equal(samplers.uniform(5, Randomness(counting_bytes)),
                          np.arange(1, 6) * 2.0**-53)
    assert np.all(samplers.uniform(3, Randomness(lambda n: b"\xff" * n)) == 1 - 2.0**-53)


def test_the_default_randomness_is_the_operating_systems(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """``Randomness()`` reads os.urandom for every draw and secrets for the salt."""
    calls: list[int] = []

    def counting(n: int) -> bytes:
        calls.append(n)
        return b"\xff" * n

    monkeypatch.setattr(os, "urandom", counting)
    os_randomness = Randomness()
    assert not os_randomness.reproducible
    assert np.all(samplers.uniform(3, os_randomness) == 1 - 2.0**-53) and calls == [24]
    monkeypatch.setattr("secrets.randbits", lambda k: k)
    assert os_randomness.salt() == 63 and calls == [24]


def test_uniform_redraws_zero() -> None:
    calls: list[int] = []

    def zeros_then_ones(n: int) -> bytes:
        calls.append(n)
        return (b"\x00" if len(calls) == 1 else b"\xff") * n

    assert np.all(samplers.uniform(4, Randomness(zeros_then_ones)) == 1 - 2.0**-53)
    assert calls == [32, 32]


def test_all_randomness_flows_from_the_randomness_passed_in() -> None:
    """With a seeded Randomness, every sampler becomes deterministic: no other source of
    randomness (numpy's global generator, random) is involved."""

    def run(seed: int) -> list[object]:
        rng = Randomness.seeded(seed)
        np.random.seed(seed + 12345)  # changing numpy's global state must not matter
        spec = m.calibrate_laplace(1.0, 1.0, False)
        return [
            samplers.discrete_laplace(3.0, 50, rng).tolist(),
            samplers.discrete_gaussian(2.5, 50, rng).tolist(),
            m.perturb(np.linspace(0, 10, 7), spec, rng).tolist(),
            quantile_of([1, 2, 3], 0.0, 1.0, 0.5, 1.0, 1.0, rng),
        ]

    assert run(1) == run(1)
    assert run(1) != run(2)


# --------------------------------------------------------------------------- discrete Laplace


@pytest.mark.parametrize("scale", [0.5, 3.0, 1e3, 1e12])
def test_discrete_laplace_variance_mean_symmetry(scale: float, rng: Randomness) -> None:
    z = samplers.discrete_laplace(scale, 400_000, rng)
    assert z.dtype == np.int64
    assert_second_moment(z, laplace_variance(scale))
    assert_centred(z, laplace_variance(scale))


def test_discrete_laplace_goodness_of_fit(rng: Randomness) -> None:
    scale, span = 1.5, 12
    z = samplers.discrete_laplace(scale, 200_000, rng)
    pmf = laplace_pmf(np.arange(-span - 1, span + 2), scale)
    assert chi_square_fit(z, pmf, span) > P_MIN


def test_discrete_laplace_largest_scale_does_not_overflow(rng: Randomness) -> None:
    z = samplers.discrete_laplace(samplers.MAX_GRID_SCALE * (1 - 1e-9), 100_000, rng)
    assert z.dtype == np.int64
    assert np.all(np.abs(z) <= samplers.NOISE_CAP)
    assert_second_moment(z, laplace_variance(samplers.MAX_GRID_SCALE * (1 - 1e-9)))


@pytest.mark.parametrize("scale", [0.0, -1.0, math.nan, math.inf, samplers.MAX_GRID_SCALE])
def test_discrete_laplace_refuses_bad_scale(scale: float, rng: Randomness) -> None:
    with pytest.raises(ValueError, match="scale"):
        samplers.discrete_laplace(scale, 3, rng)


def zeros_then_ones(zero_calls: int) -> Randomness:
    """A Randomness on a fixed stream: ``zero_calls`` calls of zero bytes (every 53-bit cell index
    ``k`` is 0, the deep tail), then all-one bytes (``U`` just below 1, ``E = 0``)."""
    calls: list[int] = []

    def fake(n: int) -> bytes:
        calls.append(n)
        return (b"\x00" if len(calls) <= zero_calls else b"\xff") * n

    return Randomness(fake)


def test_exponential_has_no_cap() -> None:
    """k = 0 three times in a row: E = 3 * 53 ln 2 = 110.2, three times the former cap."""
    rng = zeros_then_ones(3)
    assert samplers.exponential(1, rng)[0] == pytest.approx(3 * 53 * math.log(2), rel=1e-15)


def test_discrete_laplace_draws_beyond_the_former_cap() -> None:
    """The former sampler never exceeded 36.7 * s; k = 0 repeatedly now gives 110 * s."""
    scale = 10.0
    rng = zeros_then_ones(3)
    z = int(samplers.discrete_laplace(scale, 1, rng)[0])  # G1 in the deep tail, G2 = 0
    assert z == math.floor(3 * 53 * math.log(2) * scale)
    assert z > 36.8 * scale


def test_noise_saturates_without_overflow() -> None:
    """A stream of zeros forever: the exponential gives up after 1000 rounds (+inf), the
    geometric saturates at NOISE_CAP, and exact + noise still fits int64."""
    rng = zeros_then_ones(10**9)
    assert samplers.exponential(2, rng).tolist() == [math.inf, math.inf]
    rng = zeros_then_ones(1000)
    assert samplers.discrete_laplace(3.0, 1, rng)[0] == samplers.NOISE_CAP
    rng = zeros_then_ones(1000)
    spec = m.calibrate_laplace(1.0, 1.0, True)
    noisy = m.perturb(np.array([2**62], dtype=np.int64), spec, rng)
    assert int(noisy[0]) == 2**62 + samplers.NOISE_CAP == 2**63 - 1


def masked_first_call(seed: int, top_zero_bits: int) -> Randomness:
    """A Randomness on a seeded stream whose *first* call has the top
    ``top_zero_bits`` bits of its first half of words cleared: the first exponential draw of
    each cell is then conditioned on ``U < 2**-top_zero_bits`` (a cell index ``k`` below
    ``2**(53 - top_zero_bits)``, uniform), every later call is unconditioned."""
    state = np.random.default_rng(seed)  # deterministic: this test cannot flake
    first = [True]

    def fake(n: int) -> bytes:
        words = np.frombuffer(state.bytes(n), dtype="<u8").copy()
        if first[0]:
            first[0] = False
            half = words.size // 2
            words[:half] &= np.uint64((1 << (64 - top_zero_bits)) - 1)
        return words.tobytes()

    return Randomness(fake)


def test_discrete_laplace_deep_tail_matches_the_exact_pmf() -> None:
    """The tail beyond the former cap, against the exact pmf.

    With ``s = 1 / ln 2``, ``G = floor(-log2 U)``; given ``U < 2**-43``, ``G - 43`` is again
    geometric with ``P(>= n) = 2**-n`` (memorylessness), so ``Z - 43 = (G1 - 43) - G2`` is
    exactly discrete Laplace(s). Values of ``Z - 43 > 10`` need ``U < 2**-53``: the former
    sampler (``U = k / 2**53``) never produced them; here they have probability ~3e-4 each.
    """
    scale, span, size = 1 / math.log(2), 16, 200_000
    rng = masked_first_call(seed=2024, top_zero_bits=43)
    z = samplers.discrete_laplace(scale, size, rng) - 43
    pmf = laplace_pmf(np.arange(-span - 1, span + 2), scale)
    assert chi_square_fit(z, pmf, span) > 1e-9
    beyond = int((z > 10).sum())
    p_beyond = 2.0**-11 / 1.5  # P(Z > 10) = a**11 / (1 + a), a = 1/2
    assert beyond > 0
    assert stats.binomtest(beyond, size, p_beyond).pvalue > 1e-9


def test_noise_beyond_2_53_is_added_exactly() -> None:
    """A noise draw above 2**53 is not rounded to a double before it meets the value."""
    units = np.array([1.0, 5.0])
    noise = np.array([2**60 + 128, 7], dtype=np.int64)
    assert m._noisy_units(units, noise).tolist() == [float(2**60 + 129), 12.0]
    assert float(2**60 + 129) != float(2**60 + 128) + 1.0  # what the naive sum would give


# --------------------------------------------------------------------------- discrete Gaussian


@pytest.mark.parametrize("sigma", [0.5, 2.0, 50.0, 1e6])
def test_discrete_gaussian_variance_mean_symmetry(sigma: float, rng: Randomness) -> None:
    z = samplers.discrete_gaussian(sigma, 300_000, rng)
    assert z.dtype == np.int64 and z.size == 300_000
    assert_second_moment(z, gaussian_variance(sigma))
    assert_centred(z, gaussian_variance(sigma))


def test_discrete_gaussian_goodness_of_fit(rng: Randomness) -> None:
    sigma, span = 1.5, 8
    z = samplers.discrete_gaussian(sigma, 200_000, rng)
    pmf = gaussian_pmf(np.arange(-span - 1, span + 2), sigma)
    assert chi_square_fit(z, pmf, span) > P_MIN


def test_discrete_gaussian_sizes(rng: Randomness) -> None:
    assert samplers.discrete_gaussian(3.0, 0, rng).shape == (0,)
    assert samplers.discrete_gaussian(0.01, 1000, rng).size == 1000


# --------------------------------------------------------------------------- calibration


def is_power_of_two(x: float) -> bool:
    return x > 0 and math.frexp(x)[0] == 0.5


def test_calibrate_laplace_integer() -> None:
    spec = m.calibrate_laplace(3.0, 0.5, True)
    assert spec == m.NoiseSpec("laplace", True, 1.0, 6.0, 6.0)
    assert m.calibrate_laplace(2.5, 1.0, True).grid_scale == 3.0  # ceil(2.5)


def test_calibrate_laplace_real() -> None:
    spec = m.calibrate_laplace(1.0, 1.0, False)
    assert spec.granularity == 2.0**-40
    assert spec.grid_scale == 2.0**40 + 1
    assert spec.scale == pytest.approx(1.0, rel=1e-9)
    grouped = m.calibrate_laplace(1.0, 1.0, False, cells_per_unit=5)
    assert grouped.grid_scale == 2.0**40 + 5


@pytest.mark.parametrize("sensitivity", [1e-9, 0.3, 1.0, 7.0, 1e6, 1e15])
@pytest.mark.parametrize("epsilon", [0.01, 0.7, 3.0])
def test_calibrated_granularity_is_power_of_two(sensitivity: float, epsilon: float) -> None:
    for spec in (
        m.calibrate_laplace(sensitivity, epsilon, False),
        m.calibrate_gaussian(sensitivity, epsilon, False),
        m.calibrate_laplace(sensitivity, epsilon, True),
    ):
        assert is_power_of_two(spec.granularity)
        assert spec.grid_scale < samplers.MAX_GRID_SCALE
        assert spec.scale == spec.grid_scale * spec.granularity
    real = m.calibrate_laplace(sensitivity, epsilon, False)
    assert real.granularity >= sensitivity / epsilon / 2.0**40
    assert real.granularity / 2 < sensitivity / epsilon / 2.0**40
    # the grid costs (almost) nothing: the noise in value units stays sensitivity / epsilon
    assert real.scale == pytest.approx(sensitivity / epsilon, rel=1e-9)


def test_calibrate_huge_integer_sensitivity_uses_coarser_grid() -> None:
    spec = m.calibrate_laplace(1e15, 1.0, True)
    assert spec.granularity > 1 and is_power_of_two(spec.granularity)
    assert spec.scale == pytest.approx(1e15, rel=1e-9)


def test_calibrate_refuses_unsampleable_noise() -> None:
    with pytest.raises(InvalidPrivacyParameter, match="epsilon"):
        m.calibrate_laplace(1.0, 1e-20, False)
    with pytest.raises(ValueError, match="sensitivity"):
        m.calibrate_laplace(math.inf, 1.0, False)
    with pytest.raises(ValueError, match="epsilon"):
        m.calibrate_laplace(1.0, 0.0, True)


def test_calibrate_gaussian() -> None:
    spec = m.calibrate_gaussian(2.0, 0.5, True)
    assert spec == m.NoiseSpec("gaussian", True, 1.0, 2.0, 2.0)
    real = m.calibrate_gaussian(3.0, 2.0, False)
    sigma = 3.0 / math.sqrt(4.0)
    assert is_power_of_two(real.granularity) and real.granularity >= sigma / 2.0**40
    assert real.grid_scale == (math.ceil(3.0 / real.granularity) + 1) / 2.0
    assert real.scale == pytest.approx(sigma, rel=1e-9)


def test_rho_for_inverts_bun_steinke() -> None:
    for epsilon in (0.01, 0.5, 1.0, 10.0):
        for delta in (1e-12, 1e-6, 1e-3, 0.1):
            rho = m.rho_for(epsilon, delta)
            assert rho > 0
            implied = rho + 2 * math.sqrt(rho * math.log(1 / delta))
            assert implied == pytest.approx(epsilon, rel=1e-12)
    assert m.rho_for(1.0, 1e-3) > m.rho_for(1.0, 1e-6)
    for delta in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="delta"):
            m.rho_for(1.0, delta)


# --------------------------------------------------------------------------- perturb


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_perturb_real_is_exact_multiple_of_granularity(mechanism: str, rng: Randomness) -> None:
    values = np.random.default_rng(7).normal(1000.0, 300.0, size=5000)
    values[:3] = [0.0, -0.0, 1e-300]
    spec = (
        m.calibrate_laplace(2.5, 0.3, False)
        if mechanism == "laplace"
        else m.calibrate_gaussian(2.5, 0.3, False)
    )
    noisy = m.perturb(values, spec, rng)
    assert noisy.dtype == np.float64 and noisy.shape == values.shape
    units = noisy / spec.granularity
    assert np.all(units == np.rint(units))
    error = noisy - values
    assert abs(error.mean()) <= Z_BAND * spec.scale * math.sqrt(2 / values.size)


def test_perturb_real_noise_has_the_calibrated_variance(rng: Randomness) -> None:
    spec = m.calibrate_laplace(1.0, 0.5, False)
    noisy = m.perturb(np.zeros(200_000), spec, rng)
    assert_second_moment(noisy / spec.granularity, laplace_variance(spec.grid_scale))


def test_perturb_integer_keeps_int64(rng: Randomness) -> None:
    spec = m.calibrate_laplace(1.0, 1.0, True)
    values = np.arange(12, dtype=np.int64).reshape(3, 4)
    noisy = m.perturb(values, spec, rng)
    assert noisy.dtype == np.int64 and noisy.shape == (3, 4)
    from_floats = m.perturb(np.array([3.0, 1e6]), spec, rng)
    assert from_floats.dtype == np.int64
    from_objects = m.perturb(np.array([Decimal(5), 10**30], dtype=object), spec, rng)
    assert from_objects.dtype == np.int64
    assert from_objects[1] > 2**61  # saturated, not wrapped around


def test_perturb_integer_saturates_instead_of_overflowing(rng: Randomness) -> None:
    spec = m.calibrate_laplace(1.0, 1.0, True)
    extreme = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min], dtype=np.int64)
    noisy = m.perturb(extreme, spec, rng)
    assert noisy[0] > 2**61 and noisy[1] < -(2**61)
    coarse = m.calibrate_laplace(1e15, 1.0, True)
    noisy = m.perturb(extreme, coarse, rng)
    assert noisy[0] > 0 and noisy[1] < 0
    assert np.all(noisy % int(coarse.granularity) == 0)


def test_perturb_real_saturates_huge_values(rng: Randomness) -> None:
    spec = m.calibrate_laplace(1e-6, 1.0, False)
    noisy = m.perturb(np.array([1e308, -1e308]), spec, rng)
    assert np.all(np.isfinite(noisy)) and noisy[0] > 0 > noisy[1]


def test_perturb_fixed_rescales_exactly() -> None:
    """Integer sums in units of ``step`` reach the noise grid ``g`` without a float rounding:
    a shift when step >= g, rounding half up when step < g. All-one bytes make the noise 0."""
    rng = zeros_then_ones(0)
    fine = m.calibrate_laplace(1e-6, 1.0, False)  # g far below step = 1
    assert m.perturb_fixed([2**60 + 1, -3, 0], 1.0, fine, rng).tolist() == [2.0**60, -3.0, 0.0]
    coarse = m.calibrate_laplace(1e6, 1.0, False)
    g = coarse.granularity
    assert g == 2.0**-20
    step = 2.0**-30  # 1024 steps per grid unit
    got = m.perturb_fixed([1536, -1536, 1535, 10**40], step, coarse, rng)
    assert got.tolist() == [2 * g, -1 * g, 1 * g, float(round(10**40 / 1024)) * g]


def test_perturb_fixed_noise_and_huge_sums(rng: Randomness) -> None:
    spec = m.calibrate_laplace(1.0, 0.5, False)
    step = 2.0**-52
    noisy = m.perturb_fixed([0] * 200_000, step, spec, rng)
    assert np.all(noisy / spec.granularity == np.rint(noisy / spec.granularity))
    assert_second_moment(noisy / spec.granularity, laplace_variance(spec.grid_scale))
    huge = m.perturb_fixed([2**2000, -(2**2000)], step, spec, rng)  # saturated, never inf
    assert np.all(np.isfinite(huge)) and huge[0] > 0 > huge[1]
    gauss = m.calibrate_gaussian(1.0, 0.5, False)
    assert m.perturb_fixed([2**52], step, gauss, rng)[0] == pytest.approx(1.0, abs=20 * gauss.scale)


def test_perturb_fixed_refuses_what_is_not_an_exact_sum(rng: Randomness) -> None:
    spec = m.calibrate_laplace(1.0, 1.0, False)
    with pytest.raises(ValueError, match="integer sums"):
        m.perturb_fixed([1.5], 1.0, spec, rng)
    with pytest.raises(ValueError, match="power-of-two"):
        m.perturb_fixed([1], 0.3, spec, rng)
    with pytest.raises(ValueError, match="real spec"):
        m.perturb_fixed([1], 1.0, m.calibrate_laplace(1.0, 1.0, True), rng)


@pytest.mark.parametrize("integer", [True, False])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_perturb_refuses_non_finite(integer: bool, bad: float, rng: Randomness) -> None:
    spec = m.calibrate_laplace(1.0, 1.0, integer)
    with pytest.raises(ValueError, match="non-finite"):
        m.perturb(np.array([1.0, bad]), spec, rng)


def test_perturb_integer_refuses_fractions(rng: Randomness) -> None:
    spec = m.calibrate_laplace(1.0, 1.0, True)
    with pytest.raises(ValueError, match="non-integral"):
        m.perturb(np.array([1.5]), spec, rng)
    with pytest.raises(ValueError, match="non-integral"):
        m.perturb(np.array([Decimal("2.5")], dtype=object), spec, rng)


# --------------------------------------------------------------------------- accuracy


def laplace_tail(steps: int, scale: float) -> float:
    """P(|Z| > steps) for the discrete Laplace."""
    a = math.exp(-1 / scale)
    return 2 * math.exp(-(steps + 1) / scale) / (1 + a)


@pytest.mark.parametrize("scale", [0.3, 1.0, 7.0, 1e3, 1e9])
@pytest.mark.parametrize("confidence", [0.5, 0.95, 0.999])
def test_laplace_accuracy_is_the_smallest_valid_half_width(scale: float, confidence: float) -> None:
    spec = m.NoiseSpec("laplace", True, 1.0, scale, scale)
    steps = int(m.accuracy(spec, confidence))
    alpha = 1 - confidence
    assert laplace_tail(steps, scale) <= alpha * (1 + 1e-12)
    if steps > 0:
        assert laplace_tail(steps - 1, scale) > alpha * (1 - 1e-12)


def test_laplace_accuracy_coverage(rng: Randomness) -> None:
    spec = m.calibrate_laplace(1.0, 0.001, True)  # scale 1000
    half_width = m.accuracy(spec)
    noise = m.perturb(np.zeros(200_000, dtype=np.int64), spec, rng)
    covered = float(np.mean(np.abs(noise) <= half_width))
    band = Z_BAND * math.sqrt(0.95 * 0.05 / noise.size)
    assert 0.95 - band <= covered < 0.97


def test_gaussian_accuracy_coverage(rng: Randomness) -> None:
    spec = m.calibrate_gaussian(1.0, 0.005, True)  # sigma 10
    half_width = m.accuracy(spec)
    noise = m.perturb(np.zeros(200_000, dtype=np.int64), spec, rng)
    covered = float(np.mean(np.abs(noise) <= half_width))
    band = Z_BAND * math.sqrt(0.95 * 0.05 / noise.size)
    assert 0.95 - band <= covered < 0.97
    support = np.arange(-200, 201)
    exact = gaussian_pmf(support, 10.0)[np.abs(support) <= half_width].sum()
    assert exact >= 0.95


def test_real_accuracy_includes_grid_rounding() -> None:
    spec = m.calibrate_laplace(1.0, 1.0, False)
    noiseless = m.NoiseSpec("laplace", True, 1.0, spec.grid_scale, spec.grid_scale)
    expected = m.accuracy(noiseless) * spec.granularity + spec.granularity / 2
    assert m.accuracy(spec) == expected
    # a fine grid behaves like the continuous Laplace: P(|X| > a) = exp(-a / b) = 0.05
    assert m.accuracy(spec) == pytest.approx(spec.scale * math.log(20), rel=1e-6)


def test_accuracy_refuses_bad_confidence() -> None:
    spec = m.calibrate_laplace(1.0, 1.0, True)
    for confidence in (0.0, 1.0, 1.5, math.nan):
        with pytest.raises(ValueError, match="confidence"):
            m.accuracy(spec, confidence)


# --------------------------------------------------------------------------- threshold


def test_threshold_is_minimal_and_respects_delta() -> None:
    for epsilon in (0.1, 1.0, 5.0):
        for delta in (1e-9, 1e-5, 0.01):
            for groups in (1, 3, 50):
                scale, tau = thresholds.threshold(epsilon, delta, groups)
                assert scale == groups / epsilon and tau >= 2
                a = math.exp(-1 / scale)
                escape = math.exp(-(tau - 1) / scale) / (1 + a)
                assert escape <= delta / groups * (1 + 1e-12)
                if tau > 2:
                    assert math.exp(-(tau - 2) / scale) / (1 + a) > delta / groups * (1 - 1e-12)


def test_threshold_is_monotone() -> None:
    deltas = [1e-12, 1e-9, 1e-6, 1e-3, 0.05]
    taus = [thresholds.threshold(1.0, delta, 4)[1] for delta in deltas]
    assert taus == sorted(taus, reverse=True)
    epsilons = [0.01, 0.1, 0.5, 1.0, 2.0, 10.0]
    taus = [thresholds.threshold(epsilon, 1e-6, 4)[1] for epsilon in epsilons]
    assert taus == sorted(taus, reverse=True)
    assert thresholds.threshold(1.0, 1e-6, 1)[1] <= thresholds.threshold(1.0, 1e-6, 10)[1]


@pytest.mark.parametrize(("epsilon", "groups"), [(1.0, 1), (2.0, 4)])
def test_threshold_release_probability_of_a_single_unit_group(epsilon: float, groups: int,
                                                              rng: Randomness) -> None:
    delta = 0.1
    scale, tau = thresholds.threshold(epsilon, delta, groups)
    released = float(np.mean(1 + samplers.discrete_laplace(scale, 400_000, rng) >= tau))
    target = delta / groups
    band = Z_BAND * math.sqrt(target * (1 - target) / 400_000)
    assert released <= target + band
    a = math.exp(-1 / scale)
    assert released == pytest.approx(a ** (tau - 1) / (1 + a), abs=band)


def test_threshold_refuses_bad_arguments() -> None:
    bad: list[tuple[float, float, object]] = [
        (0.0, 1e-6, 1),
        (1.0, 0.0, 1),
        (1.0, 1.0, 1),
        (1.0, 1e-6, 0),
        (1.0, 1e-6, 1.5),
    ]
    for epsilon, delta, groups in bad:
        with pytest.raises(ValueError):
            thresholds.threshold(epsilon, delta, groups)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- quantiles


def bucket_of(value: float, lower: float, upper: float, n_buckets: int) -> int:
    width = (upper - lower) / n_buckets
    return min(int((value - lower) // width), n_buckets - 1)


def test_quantile_large_epsilon_is_near_true_median(rng: Randomness) -> None:
    data = np.random.default_rng(3).normal(40.0, 10.0, size=2001).clip(0, 100)
    counts, _ = np.histogram(data, bins=100, range=(0.0, 100.0))
    median = float(np.median(data))
    for _ in range(30):
        result = quantile_of(counts, 0.0, 100.0, 0.5, 10.0, 1.0, rng)
        assert abs(result - median) <= 3.0


def test_quantile_tiny_epsilon_is_roughly_uniform(rng: Randomness) -> None:
    counts = np.zeros(10)
    counts[2] = 1000
    results = [quantile_of(counts, -5.0, 5.0, 0.5, 1e-9, 1.0, rng) for _ in range(3000)]
    assert stats.kstest(results, stats.uniform(loc=-5.0, scale=10.0).cdf).pvalue > P_MIN


def test_quantile_with_no_values_is_uniform(rng: Randomness) -> None:
    results = [quantile_of(np.zeros(8), 1.0, 2.0, 0.3, 5.0, 1.0, rng) for _ in range(3000)]
    assert stats.kstest(results, stats.uniform(loc=1.0, scale=1.0).cdf).pvalue > P_MIN


def test_quantile_stays_within_bounds(rng: Randomness) -> None:
    counts = np.array([0, 50, 0, 0, 70])
    for q in (0.0, 0.25, 0.5, 1.0):
        for _ in range(200):
            result = quantile_of(counts, -3.5, 7.25, q, 0.1, 2.0, rng)
            assert -3.5 <= result <= 7.25
    assert quantile_of([4], 2.0, 2.0, 0.5, 1.0, 1.0, rng) == 2.0


def test_quantile_min_and_max(rng: Randomness) -> None:
    counts = np.zeros(20)
    counts[[5, 6, 14]] = [30, 40, 30]
    lows = [quantile_of(counts, 0.0, 20.0, 0.0, 50.0, 1.0, rng) for _ in range(50)]
    highs = [quantile_of(counts, 0.0, 20.0, 1.0, 50.0, 1.0, rng) for _ in range(50)]
    # With no rows below the minimum every bucket up to it ties; none above it can win.
    assert max(lows) < 6.0 and min(highs) >= 14.0


def test_exponential_mechanism_matches_softmax(rng: Randomness) -> None:
    counts, q, epsilon, sensitivity = np.array([2, 5, 3]), 0.5, 1.0, 1.0
    # n = 10, target rank 5; buckets cover ranks [0,2], [2,7], [7,10]: utilities -3, 0, -2
    weights = np.exp(epsilon * np.array([-3.0, 0.0, -2.0]) / (2 * sensitivity))
    draws = 6_000  # epsilon for epsilon / 2 gives p ~ 1e-263 at this size, 0.8 epsilon 1e-20
    picks = [
        bucket_of(quantile_of(counts, 0.0, 3.0, q, epsilon, sensitivity, rng), 0.0, 3.0, 3)
        for _ in range(draws)
    ]
    observed = np.bincount(picks, minlength=3)
    expected = weights / weights.sum() * draws
    assert stats.chisquare(observed, expected).pvalue > P_MIN


def test_quantile_rank_accuracy_formula_and_coverage(rng: Randomness) -> None:
    bound = quantiles.quantile_rank_accuracy(20, 0.5, 1.0)
    assert bound == pytest.approx(4.0 * (math.log(20) + math.log(20)))
    counts = np.full(20, 5.0)  # ranks 5j .. 5(j+1); the median rank 50 is bucket 9/10's edge
    right = np.cumsum(counts)
    left = right - counts
    errors = []
    for _ in range(2000):
        j = bucket_of(quantile_of(counts, 0.0, 1.0, 0.5, 0.5, 1.0, rng), 0.0, 1.0, 20)
        errors.append(max(0.0, left[j] - 50, 50 - right[j]))
    assert np.mean(np.array(errors) <= bound) >= 0.95


def test_quantile_refuses_bad_arguments(rng: Randomness) -> None:
    good: dict[str, object] = {"counts": [1, 2], "lower": 0.0, "upper": 1.0, "q": 0.5}
    changes: list[dict[str, object]] = [
        {"counts": []},
        {"counts": [1, -1]},
        {"counts": [1, math.nan]},
        {"lower": 2.0},
        {"upper": math.inf},
        {"q": 1.5},
        {"epsilon": 0.0},
    ]
    for change in changes:
        arguments = {"epsilon": 1.0, "sensitivity": 1.0, **good, **change}
        with pytest.raises(ValueError):
            quantile_of(**arguments, rng=rng)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("epsilon", "delta", "mechanism"),
    [
        (1.0, 0.0, "laplace"),
        (0.01, 1e-6, "gaussian"),
        (100, 0.1, "laplace"),
        (np.float64(0.5), np.float32(1e-5), "gaussian"),
        (1, 0, "laplace"),
    ],
)
def test_validate_accepts(epsilon: float, delta: float, mechanism: str) -> None:
    m.validate_privacy_parameters(epsilon, delta, mechanism)


@pytest.mark.parametrize(
    ("epsilon", "delta", "mechanism", "message"),
    [
        (-1.0, 0.0, "laplace", "epsilon"),
        (0.0, 0.0, "laplace", "epsilon"),
        (math.nan, 0.0, "laplace", "epsilon"),
        (math.inf, 0.0, "laplace", "epsilon"),
        (1e6, 0.0, "laplace", "epsilon"),
        (True, 0.0, "laplace", "epsilon"),
        ("1", 0.0, "laplace", "epsilon"),
        (None, 0.0, "laplace", "epsilon"),
        (1.0, 1.0, "laplace", "delta"),
        (1.0, 2.0, "laplace", "delta"),
        (1.0, 0.5, "laplace", "delta"),
        (1.0, -1e-9, "laplace", "delta"),
        (1.0, math.nan, "laplace", "delta"),
        (1.0, False, "laplace", "delta"),
        (1.0, 0.0, "gaussian", "delta > 0"),
        (1.0, 1e-6, "exponential", "mechanism"),
        (1.0, 1e-6, "Laplace", "mechanism"),
        (1.0, 1e-6, None, "mechanism"),
    ],
)
def test_validate_refuses(epsilon: object, delta: object, mechanism: object, message: str) -> None:
    with pytest.raises(InvalidPrivacyParameter, match=message) as info:
        m.validate_privacy_parameters(epsilon, delta, mechanism)  # type: ignore[arg-type]
    assert info.value.sqlstate == "22023"


def test_exponential_mechanism_never_rounds_a_bucket_away(monkeypatch: pytest.MonkeyPatch,
                                                          rng: Randomness) -> None:
    """A bucket whose weight is e**-800 of another's (0 in float64) can still be drawn: the race
    runs in log space. With the first runner slow and the second fast, the second wins."""
    scores = np.array([0.0, -800.0])
    monkeypatch.setattr(quantiles, "exponential", lambda size, rng: np.array([1e300, 1e-300]))
    assert quantiles._sample_softmax(scores, rng) == 1
    monkeypatch.setattr(quantiles, "exponential", lambda size, rng: np.array([1.0, 1.0]))
    assert quantiles._sample_softmax(scores, rng) == 0


def test_exponential_race_matches_the_softmax(rng: Randomness) -> None:
    """Seeded by the test's randomness fixture where one is in force; the tolerance is 6 sigma."""
    scores = np.log(np.array([1.0, 2.0, 5.0]))
    n = 30_000
    draws = np.bincount([quantiles._sample_softmax(scores, rng) for _ in range(n)], minlength=3) / n
    expected = np.array([1.0, 2.0, 5.0]) / 8.0
    assert np.all(np.abs(draws - expected) < 6 * np.sqrt(expected * (1 - expected) / n)), draws


def test_sparse_quantile_draws_runs_of_empty_buckets_as_one_interval(rng: Randomness) -> None:
    """The continuous-interval method: over 2**20 buckets with three non-empty ones, the draw
    lands in each run of buckets with the per-bucket softmax's probability (run length times
    the run's weight), reading only the non-empty buckets."""
    n_buckets, q, epsilon = 2**20, 0.5, 1.0
    buckets, counts = np.array([700_000, 10, 300_000]), np.array([3.0, 2.0, 4.0])
    # Sorted: 10 (2 values), 300000 (4), 700000 (3); n = 9, target 4.5 inside bucket 300000.
    edges = [0, 10, 11, 300_000, 300_001, 700_000, 700_001, n_buckets]
    ranks = [(0, 0), (0, 2), (2, 2), (2, 6), (6, 6), (6, 9), (9, 9)]
    utility = np.array([-max(0.0, lo - 4.5, 4.5 - hi) for lo, hi in ranks])
    weights = np.diff(edges) * np.exp(epsilon * utility / 2.0)
    draws = 2000
    picks = [np.searchsorted(edges, quantiles.quantile_from_buckets(
        buckets, counts, n_buckets, 0.0, float(n_buckets), q, epsilon, 1.0, rng), "right") - 1
        for _ in range(draws)]
    observed = np.bincount(picks, minlength=7)
    expected = weights / weights.sum() * draws
    # The run before the first value and the three single buckets expect 0.02 draws together:
    # at most a few; the three long runs must follow their share of the rest.
    small = expected < 5
    assert small.sum() == 4 and observed[small].sum() <= 3
    large = observed[~small]
    share = expected[~small] / expected[~small].sum() * large.sum()
    assert stats.chisquare(large, share).pvalue > P_MIN


def test_sparse_quantile_refuses_bad_buckets(rng: Randomness) -> None:
    bad = [([0, 0], [1.0, 1.0], 4), ([4], [1.0], 4), ([-1], [1.0], 4), ([1], [0.0], 4),
           ([1], [1.0], 0), ([1, 2], [1.0], 4)]
    for buckets, counts, n_buckets in bad:
        with pytest.raises(ValueError):
            quantiles.quantile_from_buckets(buckets, counts, n_buckets, 0.0, 1.0, 0.5, 1.0, 1.0,
                                            rng)
