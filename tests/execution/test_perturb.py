"""Pass 7, perturb: key release (public domain, thresholding) and one noisy value per cell,
fed with hand-made engine rows (keys, then measurements in plan order)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dpsql.execution.perturb import perturb_cells
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.mechanisms import accuracy
from dpsql.privacy.randomness import Randomness
from dpsql.routes.planner import Planner


@pytest.fixture
def rng(randomness: Randomness) -> Randomness:
    """This test's seeded Randomness (conftest.py): the same verdict on every run."""
    return randomness


def test_public_domain_fills_empty_groups(md: Metadata, rng: Randomness) -> None:
    p = Planner(md).prepare("SELECT sex, COUNT(*) FROM people GROUP BY sex", epsilon=5)
    for _ in range(20):
        cells = perturb_cells(p, [("F", 1000)], rng)  # no row at all for M
        assert cells.keys == [("F",), ("M",)]
        f, m = cells.values["__a0"]
        assert abs(f - 1000) < 50 and abs(m) < 50  # M: noise around zero
    # Keys of the data that are not in the domain are never released.
    cells = perturb_cells(p, [("F", 10), ("X", 99), (None, 5)], rng)
    assert cells.keys == [("F",), ("M",)]


def test_public_domain_of_several_keys(md: Metadata, rng: Randomness) -> None:
    p = Planner(md).prepare("SELECT kids, married, SUM(age) FROM people GROUP BY kids, married")
    cells = perturb_cells(p, [], rng)
    assert len(cells.keys) == 8 and len(cells.values["__a0"]) == 8


def test_thresholding_drops_groups_below_tau(md: Metadata, rng: Randomness) -> None:
    # delta = 1e-8: each one-unit group escapes with probability <= 1e-8 per run.
    p = Planner(md).prepare("SELECT state, COUNT(*) FROM people GROUP BY state", epsilon=1,
                            delta=1e-8)
    assert p.threshold is not None
    tau = p.threshold.tau
    rows = [("CA", 10 * tau), ("NY", 3 * tau), ("VT", 1), ("AK", 1)]
    for _ in range(200):
        cells = perturb_cells(p, rows, rng)
        assert ("VT",) not in cells.keys and ("AK",) not in cells.keys
        assert ("CA",) in cells.keys and ("NY",) in cells.keys
        counts = dict(zip(cells.keys, cells.values["__a0"], strict=True))
        assert all(c >= tau for c in counts.values())  # the released count is the noisy one


def test_thresholding_with_a_separate_units_measurement(md: Metadata, rng: Randomness) -> None:
    p = Planner(md).prepare("SELECT n, SUM(amount) FROM visits GROUP BY n", epsilon=1, delta=1e-8)
    assert p.threshold is not None and [m.kind for m in p.measurements] == ["sum", "units"]
    tau = p.threshold.tau
    rows = [(1, 100, 1), (2, 100, 10 * tau), (3, 0, 0)]  # real sums: integers of the grid
    for _ in range(100):
        cells = perturb_cells(p, rows, rng)
        assert cells.keys == [(2,)]


def test_global_aggregate_is_one_row(md: Metadata, rng: Randomness) -> None:
    p = Planner(md).prepare("SELECT COUNT(*), SUM(income) FROM people")
    cells = perturb_cells(p, [(0, 0)], rng)
    assert cells.keys == [()]
    assert cells.values["__a0"].shape == (1,) and cells.values["__a1"].shape == (1,)


def test_typed_cells_and_accuracy(md: Metadata, rng: Randomness) -> None:
    p = Planner(md).prepare(
        "SELECT COUNT(*), SUM(age), SUM(income), AVG(income), MEDIAN(age) FROM people", epsilon=4)
    income_sum, income_centred = p.measurements[2], p.measurements[4]
    cells = perturb_cells(p, [(100, 5000, round(30000.0 / income_sum.step), 100,
                               round(-20000.0 / income_centred.step), {30: 40, 60: 60})], rng)
    assert cells.values["__a0"].dtype == np.int64
    assert cells.values["__a1"].dtype == np.int64
    assert cells.values["__a2"].dtype == np.float64
    assert cells.values["__a3"].dtype == np.float64
    count = p.cells[0].measurements[0]
    assert cells.accuracy["__a0"][0] == accuracy(count.noise)  # type: ignore[arg-type]
    assert 0 <= cells.values["__a3"][0] <= 1000  # AVG is clamped to the bounds
    assert np.isfinite(cells.accuracy["__a3"][0]) and cells.accuracy["__a3"][0] > 0
    assert 0 <= cells.values["__a4"][0] <= 100 and float(cells.values["__a4"][0]).is_integer()
    assert cells.accuracy["__a4"][0] > 0  # in ranks


def test_quantiles_follow_the_histogram(md: Metadata, rng: Randomness) -> None:
    p = Planner(md).prepare("SELECT MIN(age), MEDIAN(age), MAX(age) FROM people", epsilon=30)
    histogram = {20: 500, 50: 500, 80: 500}
    got = np.array([[perturb_cells(p, [(histogram, histogram, histogram)], rng).values[f"__a{i}"][0]
                     for i in range(3)] for _ in range(20)])
    # Ranks are what the exponential mechanism gets right: MIN (rank 0) may land anywhere
    # below the smallest value, MAX anywhere above the largest, with no rank error.
    assert np.all(got[:, 0] <= 20) and np.all(got[:, 2] >= 80)
    assert np.median(got[:, 1]) == pytest.approx(50, abs=3)


def test_empty_and_null_measurements_never_fail(md: Metadata, rng: Randomness) -> None:
    p = Planner(md).prepare("SELECT sex, SUM(age), AVG(income), VAR(income), MEDIAN(age) "
                            "FROM people GROUP BY sex")
    cells = perturb_cells(p, [("F", None, 0, None, None, None, None)], rng)
    assert len(cells.keys) == 2
    for values in cells.values.values():
        assert np.all(np.isfinite(values))


def test_huge_integer_sums_saturate(kit: SimpleNamespace, rng: Randomness) -> None:
    md = kit.metadata_from({"t": {"columns": {
        "x": {"type": "int", "lower": 0, "upper": 2**50}}}})
    p = Planner(md).prepare("SELECT SUM(x) FROM t", epsilon=1)
    cells = perturb_cells(p, [(2**70,)], rng=rng)  # a HUGEINT sum beyond int64
    assert cells.values["__a0"].dtype == np.int64 and cells.values["__a0"][0] > 2**60


def test_real_sums_arrive_as_exact_integers_of_their_grid(md: Metadata, rng: Randomness) -> None:
    """A real SUM comes from the engine as a HUGEINT in units of its step, possibly beyond
    int64; the noisy cell is a float near sum * step. A float from the engine is refused."""
    p = Planner(md).prepare("SELECT SUM(income) FROM people", epsilon=1)
    step = p.measurements[0].step
    cells = perturb_cells(p, [(2**70,)], rng=rng)
    value = cells.values["__a0"][0]
    assert value == pytest.approx(2**70 * step, abs=50 * 1000)  # noise scale 1000
    with pytest.raises(ValueError, match="integer sums"):
        perturb_cells(p, [(123.5,)], rng)


def test_a_null_gathered_histogram_is_empty_not_an_error() -> None:
    """A whole-table quantile over no rows: DuckDB's two gathered lists come back NULL (the
    LEFT JOIN of dpsql.engines.histograms). An error there on one neighbour and an answer on
    the other would tell them apart (found by the neighbour harness's perturb check)."""
    from dpsql.execution.perturb import histogram_arrays

    for value in (None, [None, None], (None, None), {}):
        buckets, counts = histogram_arrays(value)
        assert len(buckets) == 0 and len(counts) == 0
    buckets, counts = histogram_arrays([[3, 5], [2, 1]])
    assert buckets.tolist() == [3, 5] and counts.tolist() == [2.0, 1.0]
