"""The fine grid of real quantiles (issue 39.4, dpsql.privacy.quantile_grid): the engine's key
of each value and the interval Python reads back agree, the intervals partition the bounds in
key order, the draw over intervals of unequal widths has the exponential mechanism's law, and a
median of dense data is drawn to well within the equal grid's bucket width."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from scipy import stats
from sqlglot import exp

from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.execution.quantile_sql import fine_bucket
from dpsql.privacy import quantiles
from dpsql.privacy.quantile_grid import EQUAL, Grid
from dpsql.privacy.randomness import Randomness

P_MIN = 1e-6  # goodness-of-fit tests fail only below this p-value (as test_mechanisms)


@pytest.fixture
def rng(randomness: Randomness) -> Randomness:
    return randomness


def engine_keys(grid: Grid, values: np.ndarray) -> np.ndarray:
    """The keys DuckDB computes for ``values`` with the rewrite's SQL."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?)", [[float(v)] for v in values])
    key = fine_bucket(grid, exp.column("x")).sql(dialect=DuckDBDialect)
    return np.array([r[0] for r in con.execute(f"SELECT {key} FROM t ORDER BY rowid")
                     .fetchall()], dtype=np.int64)


@pytest.mark.parametrize(("lo", "hi"), [(0.0, 100000.0), (-50.0, 2000.0), (1900.0, 2100.0),
                                        (-7.5, -1.25)])
def test_each_value_lies_in_its_keys_interval(lo: float, hi: float) -> None:
    grid = Grid(lo, hi)
    gen = np.random.default_rng(39)
    span = hi - lo
    values = np.concatenate([
        lo + span * gen.random(2000),  # everywhere
        np.clip(grid.origin + gen.lognormal(0, 3, 2000) * gen.choice([-1, 1], 2000), lo, hi),
        [lo, hi, grid.origin, np.nextafter(hi, lo)]])
    keys = engine_keys(grid, values)
    assert np.all((keys >= 0) & (keys < grid.keys))
    low, high = grid.intervals(keys)
    # Within a relative 1e-9 of the interval: the engine's LN may place a value that sits on
    # an edge in the neighbouring bucket (accuracy, never privacy: module docstring).
    slack = 1e-9 * max(abs(lo), abs(hi))
    assert np.all(values >= low - slack) and np.all(values <= high + slack)
    # Keys sort as the values do.
    order = np.argsort(values, kind="stable")
    assert np.all(np.diff(keys[order]) >= 0)
    # Never coarser than the equal grid.
    assert np.all(high - low <= span / EQUAL * (1 + 1e-9))


def test_intervals_partition_the_bounds_in_key_order() -> None:
    grid = Grid(-50.0, 2000.0)
    keys = np.unique(engine_keys(grid, np.linspace(-50.0, 2000.0, 20001)))
    low, high = grid.intervals(keys)
    assert low[0] == -50.0 and high[-1] == 2000.0
    assert np.all(high >= low) and np.all(low[1:] >= high[:-1] - 1e-9)


def test_null_has_no_key() -> None:
    key = fine_bucket(Grid(0.0, 10.0), exp.Null()).sql(dialect=DuckDBDialect)
    assert duckdb.connect().execute(f"SELECT {key}").fetchone() == (None,)


def test_draw_over_unequal_intervals_follows_the_exponential_mechanism(rng: Randomness) -> None:
    """Each piece (the runs between the intervals and the intervals) is drawn with probability
    proportional to its length times exp(epsilon u / (2 k))."""
    lows, highs, counts = np.array([1.0, 1.5, 6.0]), np.array([1.5, 2.0, 9.0]), \
        np.array([3.0, 4.0, 2.0])
    lower, upper, q, epsilon, k = 0.0, 10.0, 0.5, 1.0, 1.0
    # n = 9, target 4.5: pieces [0,1] r0, [1,1.5] r[0,3], [1.5,2] r[3,7], [2,6] r7,
    # [6,9] r[7,9], [9,10] r9
    edges = [0.0, 1.0, 1.5, 2.0, 6.0, 9.0, 10.0]
    ranks = [(0, 0), (0, 3), (3, 7), (7, 7), (7, 9), (9, 9)]
    utility = np.array([-max(0.0, a - 4.5, 4.5 - b) for a, b in ranks])
    weights = np.diff(edges) * np.exp(epsilon * utility / (2 * k))
    draws = 4000
    picks = [np.searchsorted(edges, quantiles.quantile_from_intervals(
        lows, highs, counts, lower, upper, q, epsilon, k, rng), "right") - 1
        for _ in range(draws)]
    observed = np.bincount(np.minimum(picks, 5), minlength=6)
    expected = weights / weights.sum() * draws
    assert stats.chisquare(observed, expected).pvalue > P_MIN


def test_median_of_dense_data_is_finer_than_the_equal_grid(rng: Randomness) -> None:
    """A million values around 40 under bounds [0, 100000]: the equal grid's buckets are 1.5
    wide; on the fine grid the draw lands within a few hundredths of the median."""
    grid = Grid(0.0, 100000.0)
    values = np.random.default_rng(5).lognormal(np.log(40), 1.0, 200_000)
    width = grid.hi / EQUAL
    e = np.minimum(np.floor(values / width), EQUAL - 1).astype(np.int64)
    # The geometric key of a positive value (o = 0), as fine_bucket computes it
    steps = np.clip(np.floor((np.log(np.maximum(values, grid.tau)) - np.log(grid.tau))
                             / grid.ln_ratio), 0, grid.side - 1).astype(np.int64)
    keys, counts = np.unique(e * grid.geometric + grid.side + steps, return_counts=True)
    low, high = grid.intervals(keys)
    median = float(np.median(values))
    errors = [abs(quantiles.quantile_from_intervals(low, high, counts, 0.0, 100000.0, 0.5,
                                                    1.0, 1.0, rng) - median)
              for _ in range(50)]
    assert np.median(errors) < 0.05 < width


def test_intervals_refuse_bad_arguments(rng: Randomness) -> None:
    bad = [([0.0], [1.0], [0.0]), ([0.0], [2.0], [1.0]), ([1.0], [0.5], [1.0]),
           ([0.0, 0.5], [1.0], [1.0])]
    for lows, highs, counts in bad:
        with pytest.raises(ValueError):
            quantiles.quantile_from_intervals(lows, highs, counts, 0.0, 1.5, 0.5, 1.0, 1.0, rng)
