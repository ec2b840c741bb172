"""Tools' ``SELECT * FROM (q) AS a LIMIT n`` wrappers are read as q with the smaller limit
(dpsql.query.wrappers); any other outer query is left as written."""

from __future__ import annotations

import pytest

from dpsql.query.parse import parse

INNER = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"


@pytest.mark.parametrize(("sql", "expected"), [
    (f"select * from ({INNER}) as model_limit_subq limit 5", f"{INNER} LIMIT 5"),
    (f"SELECT * FROM ({INNER}) t", INNER),
    (f"SELECT * FROM ({INNER} ORDER BY n LIMIT 3 OFFSET 1) t LIMIT 2",
     f"{INNER} ORDER BY n LIMIT 2 OFFSET 1"),
    (f"SELECT * FROM ({INNER} LIMIT 2) t LIMIT 9", f"{INNER} LIMIT 2"),
    (f"SELECT * FROM (SELECT * FROM ({INNER}) a LIMIT 7) b LIMIT 9", f"{INNER} LIMIT 7"),
    (f"SELECT * FROM ({INNER}) AS virtual_table LIMIT 0", f"{INNER} LIMIT 0"),
])
def test_limit_wrapper_is_the_query_it_wraps(sql: str, expected: str) -> None:
    assert parse(sql).sql("duckdb") == expected


@pytest.mark.parametrize("outer", [
    "SELECT * EXCLUDE (n) FROM ({}) AS t LIMIT 2",
    "SELECT t.* FROM ({}) AS t LIMIT 2",
    "SELECT sex FROM ({}) AS t LIMIT 2",
    "SELECT * FROM ({}) AS t(a, b) LIMIT 2",
    "SELECT * FROM ({}) AS t WHERE n > 3 LIMIT 2",
    "SELECT DISTINCT * FROM ({}) AS t LIMIT 2",
    "SELECT * FROM ({}) AS t ORDER BY n LIMIT 2",
    "SELECT * FROM ({}) AS t LIMIT $1",
    "SELECT * FROM ({}) AS t LIMIT 2 OFFSET 1",
    "SELECT * FROM ({}) AS t, people LIMIT 2",
    "SELECT * FROM ({} LIMIT 1 + 1) AS t LIMIT 2",
])
def test_other_outer_queries_are_left_as_written(outer: str) -> None:
    assert "FROM (SELECT" in parse(outer.format(INNER)).sql("duckdb")
