"""Caveats (dpsql.execution.caveats): the notes that say when an answer is not worth reading,
from released values only; and the accuracy explain promises (dpsql.execution.expected).

Hand-made noisy cells (as in test_postprocess) make every outcome exact; the library runs
check that the notes are what the released answer implies, and that they travel with it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import dpsql
from dpsql.execution import caveats as cv
from dpsql.execution.expected import EXAMPLE_ROWS, expected
from dpsql.execution.perturb import NoisyCells
from dpsql.execution.postprocess import Result, postprocess
from dpsql.execution.retention import WHOLE, Retention
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.plan import Plan
from dpsql.routes.pipeline import explain
from dpsql.routes.planner import Planner
from tests.support.helpers import SAMPLE, sample_tables_toml


def answer(sql: str, md: Metadata, keys: list[tuple[object, ...]],
           values: dict[str, list[object]], widths: dict[str, list[float]]
           ) -> tuple[Plan, Result]:
    p = Planner(md).prepare(sql)
    assert isinstance(p, Plan)
    cells = NoisyCells(keys=keys, values={k: np.asarray(v) for k, v in values.items()},
                       accuracy={k: np.asarray(w, dtype=float) for k, w in widths.items()})
    return p, postprocess(p, cells)


def test_noise_above_the_value_is_counted_per_column(md: Metadata) -> None:
    p, r = answer("SELECT cat, COUNT(*) AS n, SUM(amount) AS s FROM visits GROUP BY cat", md,
                  [("a",), ("b",), ("c",)],
                  {"__a0": [100, -3, 2], "__a1": [50.0, 400.0, -20.0]},
                  {"__a0": [9.0, 9.0, 9.0], "__a1": [30.0, 30.0, 30.0]})
    [note] = cv.caveats(p, r)
    # n: -3 and 2 within ±9; s: none of 50, 400, -20 within ±30 but -20
    assert note.startswith(f"{cv.NOISE} in 3 of 6 cell(s) (n: 2 of 3; s: 1 of 3)")
    assert "Coarser groups" in note and "larger epsilon" in note
    # visits: a unit counts with up to k = 3 rows, so a smaller k cuts the noise too
    assert "a smaller max_rows_contributed (each unit counts with up to 3 rows here" in note
    p, r = answer("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", md, [("F",), ("M",)],
                  {"__a0": [4, 50]}, {"__a0": [9.0, 9.0]})
    [note] = cv.caveats(p, r)
    assert note.startswith(f"{cv.NOISE} in 1 of 2 cell(s) (n)")
    assert "max_rows_contributed" not in note  # one row per unit: nothing to lower
    p, r = answer("SELECT cat, COUNT(*) AS n FROM visits GROUP BY cat", md,
                  [("a",), ("b",), ("c",)], {"__a0": [100, 30, 20]}, {"__a0": [9.0] * 3})
    assert cv.caveats(p, r) == []  # every value above its noise: nothing to say


def test_a_cell_computed_from_several_is_not_judged(md: Metadata) -> None:
    """Outer arithmetic has no ± of its own (None): it is left out, not guessed."""
    p, r = answer("SELECT cat, COUNT(*) - 100 AS d FROM visits GROUP BY cat", md,
                  [("a",), ("b",)], {"__a0": [100, 101]}, {"__a0": [9.0, 9.0]})
    assert r.rows == [("a", 0), ("b", 1)] and cv.caveats(p, r) == []


def test_avg_at_a_bound(md: Metadata) -> None:
    p, r = answer("SELECT cat, AVG(amount) AS a FROM visits GROUP BY cat", md,
                  [("a",), ("b",), ("c",)], {"__a0": [-10.0, 12.5, 40.0]},
                  {"__a0": [1.0, 1.0, 1.0]})
    [note] = cv.caveats(p, r)
    assert note.startswith(f"{cv.AVG_AT_BOUND}: a at -10 in 1 and at 40 in 1 of 3 row(s)")
    assert "small noisy count" in note and "the owner's bounds" in note
    p, r = answer("SELECT cat, AVG(amount) AS a FROM visits GROUP BY cat", md,
                  [("a",), ("b",)], {"__a0": [-9.9, 39.9]}, {"__a0": [1.0, 1.0]})
    assert cv.caveats(p, r) == []


def test_quantile_in_its_first_or_last_bucket(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT MEDIAN(income) AS m, MAX(age) AS x FROM people")
    assert isinstance(p, Plan)
    m = p.cells[0].measurements[0]
    bucket = (m.hi - m.lo) / m.buckets
    _, r = answer("SELECT MEDIAN(income) AS m, MAX(age) AS x FROM people", md, [()],
                  {"__a0": [m.hi - bucket / 2], "__a1": [100.0]}, {"__a0": [9.0], "__a1": [9.0]})
    [note] = cv.caveats(p, r)
    assert note.startswith(f"{cv.QUANTILE_AT_BOUND}: m at its upper bound in 1 of 1 row(s); "
                           "x at its upper bound in 1 of 1 row(s)")
    _, r = answer("SELECT MEDIAN(income) AS m, MAX(age) AS x FROM people", md, [()],
                  {"__a0": [m.hi - 2 * bucket], "__a1": [99.0]}, {"__a0": [9.0], "__a1": [9.0]})
    assert cv.caveats(p, r) == []  # the age bucket is one year: 99 is not at 100


def test_rows_dropped_only_from_a_released_estimate(md: Metadata) -> None:
    p, r = answer("SELECT COUNT(*) AS n FROM visits", md, [()], {"__a0": [1000]},
                  {"__a0": [9.0]})
    dropped = Retention(0.5, 400.0, 120.0, 0.3, 0.25, 0.36)
    [note] = cv.caveats(p, r, dropped)
    assert note.startswith(f"{cv.DROPPED} about 70% of a unit's rows") and "at least 64%" in note
    assert "max_rows_contributed" in note
    assert cv.caveats(p, r, Retention(0.5, 400.0, 300.0, 0.75, 0.7, 0.85)) == []  # may keep 85%
    assert cv.caveats(p, r, WHOLE) == [] and cv.caveats(p, r, None) == []


@pytest.fixture
def db(tmp_path: Path) -> dpsql.Database:
    meta = tmp_path / "metadata.toml"
    meta.write_text('[budget]\nledger = "ledger.sqlite"\n[analysts.alice]\nepsilon = 50.0\n'
                    "delta = 1e-5\n" + sample_tables_toml())
    with dpsql.Database(SAMPLE, meta, analyst="alice") as database:
        yield database


DAILY = ("SELECT day, COUNT(*) AS n, AVG(amount) AS a FROM visits "
         "WHERE day < DATE '2025-01-15' GROUP BY day")


def test_the_library_attaches_them_from_the_released_answer(db: dpsql.Database) -> None:
    """Every cell judged from what was released, the note's numbers are the answer's own; a
    stored answer asked again gets the same caveats (computed again, not stored); a good
    answer has none; caveats=False leaves them out."""
    answered = db.run(DAILY, epsilon=0.05)
    result = answered.result
    over = sum(1 for row, acc in zip(result.rows, result.accuracy, strict=True)
               for v, a in zip(row[1:], acc[1:], strict=True) if a > abs(v))
    assert over > 0  # ±95% of daily counts at epsilon 0.05 is in the tens of thousands
    noise = next(c for c in result.caveats if c.startswith(cv.NOISE))
    assert f"in {over} of {2 * len(result.rows)} cell(s)" in noise
    assert all(c in result.notes for c in result.caveats)
    again = db.run(DAILY, epsilon=0.05)
    assert again.reused and again.result.caveats == result.caveats
    assert again.result.notes.count(noise) == 1
    quiet = db.run(DAILY, epsilon=0.05, caveats=False)
    assert quiet.result.caveats == [] and noise not in quiet.result.notes
    assert db.run("SELECT COUNT(*) AS n FROM people", epsilon=1.0).result.caveats == []


def test_explain_gives_each_output_its_accuracy_in_its_units(md: Metadata) -> None:
    """COUNT and SUM: their measurement's ±; AVG: (w_S + h w_n) / n, from its COUNT and SUM
    parts; a quantile: its rank error R as values for n rows spread over the bounds."""
    p = Planner(md).prepare("SELECT cat, COUNT(*), SUM(amount), AVG(amount), MEDIAN(amount) "
                            "FROM visits GROUP BY cat", epsilon=1.0)
    assert isinstance(p, Plan)
    count, total, avg, median = expected(p)
    cells = explain(p).cells
    assert count.fixed == cells[0].accuracy and total.fixed == cells[1].accuracy
    w_n, w_s = cells[2].accuracy, cells[3].accuracy
    h = (40 - -10) / 2
    for n, width in avg.at_rows:
        assert width == pytest.approx((w_s + h * w_n) / n)
    assert [n for n, _ in avg.at_rows] == list(EXAMPLE_ROWS) and avg.bounds == (-10.0, 40.0)
    ranks = cells[4].accuracy
    assert median.ranks == ranks and median.step == pytest.approx(50 / median_buckets(p))
    for n, width in median.at_rows:
        assert width == pytest.approx(min(50.0, max(median.step or 0, 50 * ranks / n)))
    assert "within" in median.text() and "ranks" in median.text()
    assert math.isfinite(avg.at_rows[-1][1]) and avg.at_rows[0][1] > avg.at_rows[-1][1]


def median_buckets(p: Plan) -> int:
    return p.cells[3].measurements[0].buckets


def test_caveats_read_released_values_only() -> None:
    """The privacy argument is structural: the module reads no engine and no ledger, and its
    entry points take the plan (public), the released result and the released estimate."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(cv))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(m and m.startswith(("dpsql.engines", "dpsql.ledger")) for m in imported)
    assert list(inspect.signature(cv.caveats).parameters) == ["plan", "result", "retention"]
    assert list(inspect.signature(cv.attach_caveats).parameters) == ["plan", "result",
                                                                     "retention"]
