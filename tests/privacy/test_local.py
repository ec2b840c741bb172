"""The local DP mechanism (dpsql/privacy/local.py) and its estimators
(dpsql/privacy/local_estimates.py): the probabilities it draws with, exact uniform integers,
bad data released privately, and debiased counts that are unbiased with the stated variance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpsql.errors import DataError, MetadataError
from dpsql.metadata.metadata import parse_metadata
from dpsql.privacy.local import (
    randomized_response,
    row_mechanism,
    rr_probabilities,
    uniform_integers,
)
from dpsql.privacy.local_estimates import debiased_count, estimate_mean, rr_count_sql
from dpsql.privacy.randomness import Randomness
from dpsql.routes.local import LocalRoute


def _mechanism(columns: dict[str, object], epsilon: float = 1.0) -> object:
    table = {"columns": {"sex": {"type": "text", "values": ["F", "M", "X"]},
                         "age": {"type": "int", "lower": 0, "upper": 10},
                         "big": {"type": "int", "lower": 0, "upper": 10**15}},
             "local": {"epsilon": epsilon, "row_count": "public", "columns": columns}}
    return row_mechanism(parse_metadata({"tables": {"t": table}}).tables["t"])


@pytest.mark.parametrize(("epsilon", "d"), [(0.1, 2), (1.0, 3), (3.0, 10), (800.0, 4)])
def test_randomized_response_probabilities_sum_to_one_at_ratio_e_eps(epsilon: float, d: int
                                                                     ) -> None:
    p, q = rr_probabilities(epsilon, d)
    assert p + (d - 1) * q == pytest.approx(1.0)
    if epsilon < 700:
        assert p / q == pytest.approx(math.exp(epsilon))


def test_randomized_response_keeps_with_p_and_flips_uniformly() -> None:
    n, d, epsilon = 30_000, 3, 1.0
    out = randomized_response(np.zeros(n, dtype=np.int64), d, epsilon, Randomness.seeded(3))
    p, q = rr_probabilities(epsilon, d)
    counts = np.bincount(out, minlength=d) / n
    assert counts == pytest.approx([p, q, q], abs=0.015)
    outside = randomized_response(np.full(n, -1, dtype=np.int64), d, epsilon,
                                  Randomness.seeded(4))
    assert np.bincount(outside, minlength=d) / n == pytest.approx([1 / 3] * 3, abs=0.015)


def test_uniform_integers_are_exact_and_in_range() -> None:
    out = uniform_integers(3, 30_000, Randomness.seeded(5))
    assert out.min() == 0 and out.max() == 2
    assert np.bincount(out) / 30_000 == pytest.approx([1 / 3] * 3, abs=0.015)
    # A source of all-ones words: every word is above the last multiple of 3, redrawn.
    words = iter([b"\xff" * 8, (5).to_bytes(8, "little")])
    assert list(uniform_integers(3, 1, Randomness(lambda n: next(words)))) == [2]


def test_bad_data_is_released_inside_the_domain() -> None:
    m = _mechanism({"sex": "rr", "age": "laplace"})
    out = m.randomize({"sex": ["nonsense", None, 7], "age": [None, float("nan"), 10**18]}, 3,
                      Randomness.seeded(6))
    assert set(out["sex"]) <= {"F", "M", "X"}
    assert all(isinstance(a, int) for a in out["age"])


def test_a_grid_too_fine_for_the_sampler_is_refused_at_plan_time() -> None:
    with pytest.raises(MetadataError, match="'big'"):
        _mechanism({"big": "laplace"}, epsilon=0.001)


def test_the_charge_under_zcdp_is_pure_dp_converted() -> None:
    read = type("R", (), {"epsilon": 2.0})()
    assert LocalRoute(read).cost("basic").rho == 0.0  # type: ignore[arg-type]
    assert LocalRoute(read).cost("zcdp").rho == pytest.approx(2.0)  # type: ignore[arg-type]


def test_debiased_counts_are_unbiased_with_the_stated_variance() -> None:
    n, true_f, epsilon = 400, 120, 1.0
    p, q = rr_probabilities(epsilon, 2)
    rng = Randomness.seeded(9)
    truth = np.array([0] * true_f + [1] * (n - true_f), dtype=np.int64)
    estimates, variances = [], []
    for _ in range(300):
        observed = float((randomized_response(truth, 2, epsilon, rng) == 0).sum())
        estimate, variance = debiased_count(observed, n, p, q)
        estimates.append(estimate)
        variances.append(variance)
    mean, spread = float(np.mean(estimates)), float(np.var(estimates))
    assert abs(mean - true_f) < 4 * math.sqrt(spread / 300)
    assert float(np.mean(variances)) == pytest.approx(spread, rel=0.25)


def test_estimators_refuse_what_they_cannot_estimate() -> None:
    params = {"columns": {"age": {"release": "laplace"}}, "withheld": ["note"]}
    with pytest.raises(DataError, match="withheld"):
        rr_count_sql("note", "x", params)
    with pytest.raises(DataError, match="laplace"):
        estimate_mean([1.0], {"release": "rr"})
    mean, variance = estimate_mean([1.0, 3.0, 5.0], params, "age")
    assert mean == 3.0 and variance == pytest.approx(4.0 / 3)
    sql = rr_count_sql("sex", "F", {"release": "rr", "p": 0.75, "q": 0.25})
    assert sql == """((COUNT(*) FILTER (WHERE "sex" = 'F')) - COUNT(*) * 0.25) / 0.5"""
