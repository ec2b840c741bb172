"""Pass 8, post-process: the rest of the analyst's SELECT, evaluated over noisy cells only.
The cells are hand-made here, so every outcome is exact."""

from __future__ import annotations

import numpy as np
import pytest

from dpsql.execution.perturb import NoisyCells
from dpsql.execution.postprocess import Result, postprocess, reads_nothing, typed_empty
from dpsql.metadata.metadata import Metadata
from dpsql.routes.planner import Planner


def run(sql: str, md: Metadata, keys: list[tuple[object, ...]],
        values: dict[str, list[object]], delta: float = 0.0) -> Result:
    p = Planner(md).prepare(sql, delta=delta)
    arrays = {k: np.asarray(v) for k, v in values.items()}
    accuracy = {k: np.full(len(keys), 1.5 + i) for i, k in enumerate(values)}
    return postprocess(p, NoisyCells(keys=keys, values=arrays, accuracy=accuracy))


def test_plain_projection(md: Metadata) -> None:
    r = run("SELECT sex AS s, COUNT(*) AS n, AVG(income) FROM people GROUP BY sex", md,
            [("F",), ("M",)], {"__a0": [10, 20], "__a1": [5.5, 6.5]})
    assert [c.name for c in r.columns] == ["s", "n", "avg"]
    assert [c.type for c in r.columns] == ["VARCHAR", "BIGINT", "DOUBLE"]
    assert [c.accuracy_unit for c in r.columns] == [None, "value", "value"]
    assert r.rows == [("F", 10, 5.5), ("M", 20, 6.5)]
    assert r.accuracy == [(None, 2, 2.5), (None, 2, 2.5)]  # a count's ± rounded up
    assert all(type(v) is int for _, v, _ in r.rows)


def test_having_order_limit_on_noisy_cells(md: Metadata) -> None:
    r = run("SELECT kids, COUNT(*) AS n FROM people GROUP BY kids HAVING COUNT(*) > 10 "
            "ORDER BY n DESC LIMIT 2", md,
            [(0,), (1,), (2,), (3,)], {"__a0": [5, 30, 11, 40]})
    assert r.rows == [(3, 40), (1, 30)]
    assert r.accuracy == [(None, 2), (None, 2)]  # accuracy follows its row
    r = run("SELECT kids, COUNT(*) AS n FROM people GROUP BY kids ORDER BY kids DESC "
            "LIMIT 2 OFFSET 1", md, [(0,), (1,), (2,), (3,)], {"__a0": [5, 30, 11, 40]})
    assert r.rows == [(2, 11), (1, 30)]


def test_having_on_an_aggregate_not_in_the_select_list(md: Metadata) -> None:
    r = run("SELECT sex FROM people GROUP BY sex HAVING SUM(age) > 100", md,
            [("F",), ("M",)], {"__a0": [50, 150]})
    assert r.rows == [("M",)]


def test_having_on_a_global_aggregate(md: Metadata) -> None:
    r = run("SELECT COUNT(*) FROM people HAVING COUNT(*) > 10", md, [()], {"__a0": [3]})
    assert r.rows == []
    r = run("SELECT COUNT(*) FROM people HAVING COUNT(*) > 10", md, [()], {"__a0": [30]})
    assert r.rows == [(30,)]


def test_outer_expressions_and_their_types(md: Metadata) -> None:
    r = run("SELECT COUNT(*) / 2 AS half, COUNT(*) + SUM(age) AS total, "
            "ROUND(AVG(income), 1) AS r, CAST(COUNT(*) AS VARCHAR) AS txt, "
            "COUNT(*) > 5 AS big, SUM(age) FROM people", md,
            [()], {"__a0": [7], "__a1": [100], "__a2": [12.345]})
    assert [c.name for c in r.columns] == ["half", "total", "r", "txt", "big", "sum"]
    assert [c.type for c in r.columns] == ["DOUBLE", "BIGINT", "DOUBLE", "VARCHAR", "BOOLEAN",
                                           "BIGINT"]
    assert r.rows == [(3.5, 107, 12.3, "7", True, 100)]
    # Accuracy is carried for the cells that are a noisy cell as is, not for derived values.
    assert r.accuracy == [(None, None, None, None, None, 3)]  # SUM(age): BIGINT
    assert [c.accuracy_unit for c in r.columns] == [None] * 5 + ["value"]


def test_windows_over_noisy_cells(md: Metadata) -> None:
    r = run("SELECT sex, COUNT(*) AS n, SUM(COUNT(*)) OVER () AS total, "
            "RANK() OVER (ORDER BY COUNT(*) DESC) AS rk FROM people GROUP BY sex ORDER BY sex",
            md, [("F",), ("M",)], {"__a0": [10, 30]})
    assert r.rows == [("F", 10, 40, 2), ("M", 30, 40, 1)]


def test_quantile_cells_report_ranks(md: Metadata) -> None:
    r = run("SELECT MEDIAN(age) AS m FROM people", md, [()], {"__a0": [42.0]})
    assert r.columns[0].accuracy_unit == "rank" and r.rows == [(42.0,)]


def test_empty_answer_keeps_its_columns(md: Metadata) -> None:
    r = run("SELECT state, COUNT(*) AS n FROM people GROUP BY state", md, [],
            {"__a0": np.array([], dtype=np.int64)}, delta=1e-6)
    assert [c.name for c in r.columns] == ["state", "n"] and r.rows == [] and r.accuracy == []
    r = run("SELECT state, COUNT(*) AS n FROM people GROUP BY state ORDER BY n", md, [],
            {"__a0": np.array([], dtype=np.int64)}, delta=1e-6)
    assert r.rows == []


def test_key_types(md: Metadata) -> None:
    r = run("SELECT married, kids, COUNT(*) FROM people GROUP BY married, kids", md,
            [(False, 0), (True, 3)], {"__a0": [1, 2]})
    assert [c.type for c in r.columns] == ["BOOLEAN", "BIGINT", "BIGINT"]
    assert r.rows == [(False, 0, 1), (True, 3, 2)]


def test_distinct_over_cells(md: Metadata) -> None:
    r = run("SELECT DISTINCT COUNT(*) > 0 AS any FROM people GROUP BY sex", md,
            [("F",), ("M",)], {"__a0": [3, 4]})
    assert r.rows == [(True,)]


@pytest.mark.parametrize("sql", [
    "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex LIMIT 0",
    "SELECT COUNT(*) + 1 AS x, AVG(age) / 2 AS half FROM people LIMIT 0 OFFSET 3",
    "SELECT sex, SUM(age) AS s FROM people GROUP BY sex HAVING COUNT(*) > 3 "
    "ORDER BY s FETCH FIRST 0 ROWS ONLY",
])
def test_limit_0_answer_has_the_planned_columns(sql: str, md: Metadata) -> None:
    plan = Planner(md).prepare(sql, 1.0)
    assert reads_nothing(plan)
    empty = typed_empty(plan)
    assert empty.rows == [] and empty.accuracy == []
    assert [c.name for c in empty.columns] == plan.query.output_names
    assert all(c.type in ("BIGINT", "DOUBLE", "VARCHAR") for c in empty.columns)


@pytest.mark.parametrize("sql", ["SELECT COUNT(*) FROM people LIMIT 1",
                                 "SELECT COUNT(*) FROM people",
                                 "SELECT COUNT(*) FROM people LIMIT '0'"])
def test_only_a_zero_limit_reads_nothing(sql: str, md: Metadata) -> None:
    assert not reads_nothing(Planner(md).prepare(sql, 1.0))


def test_an_integer_cells_accuracy_is_whole_and_rounded_up() -> None:
    """A BIGINT cell's ± is an int, rounded up (the interval still covers its 95%); a DOUBLE
    cell's, a quantile's ranks and a key's None are kept."""
    from dpsql.execution.result import Result as Answer
    from dpsql.execution.result import ResultColumn as Column

    r = Answer([Column("k", "VARCHAR"), Column("n", "BIGINT", "value"),
                Column("a", "DOUBLE", "value"), Column("m", "BIGINT", "rank")],
               [("x", 1, 2.0, 3)], [(None, 1348.0795, 0.25, 7.5)])
    assert r.accuracy == [(None, 1349, 0.25, 7.5)] and type(r.accuracy[0][1]) is int
    assert Answer([Column("n", "BIGINT", "value")], [(1,)], [(6.0,)]).accuracy == [(6,)]


def test_unique_names_number_repeats_as_duckdb() -> None:
    from dpsql.texttable import unique_names

    assert unique_names(["count", "count", "Count", "count_1"]) == [
        "count", "count_2", "Count_3", "count_1"]
    assert unique_names(["a", "b"]) == ["a", "b"]
