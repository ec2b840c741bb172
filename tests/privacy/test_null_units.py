"""Rows whose privacy unit is NULL: dropped, before contribution bounding, from every query over
every table with a unit (they belong to no identifiable unit), ``one_row_per_unit`` tables
included. Measured through the real pipeline on a real engine:
the exact measurements the engine returns for a fixed salt, then noisy answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import dpsql
from dpsql.routes.pipeline import engine_sql

SALTS = (1, 2, 3, 12345, 2**62 + 7)
VISITS = {
    "privacy_unit": "pid",
    "max_rows_per_unit": 3,
    "max_groups_per_unit": 1,
    "columns": {
        "pid": {"type": "int", "nullable": True},
        "cat": {"type": "text", "values": ["a", "b"]},
        "amount": {"type": "float", "lower": 0, "upper": 10},
    },
}
QUERIES = [
    "SELECT COUNT(*) FROM visits",
    "SELECT COUNT(*), SUM(amount) FROM visits WHERE cat = 'a' OR amount > 5",
    "SELECT COUNT(DISTINCT pid) FROM visits",
    "SELECT cat, COUNT(*), SUM(amount), COUNT(DISTINCT pid) FROM visits GROUP BY cat",
]


def measured(db: dpsql.Database, sql: str, salt: int) -> list[tuple[object, ...]]:
    """The exact per-group measurements the engine computes for ``sql`` (before noise)."""
    plan = db.plan(sql)
    text, salted = engine_sql(plan, db.engine)
    rows = db.engine.execute(text, [salt] if salted else [])[1]
    # Real sums come back in integer units of their fixed-point step (dpsql.privacy.aggregates).
    steps = [1] * len(plan.keys) + [m.step or 1 for m in plan.measurements]
    return sorted((tuple(v * s if v is not None and s != 1 else v for v, s in
                         zip(row, steps, strict=True)) for row in rows), key=repr)


def visits(make_db: Callable[..., Any], rows: list[str], name: str = "db",
           table: dict[str, Any] | None = None) -> dpsql.Database:
    values = ", ".join(rows)
    return make_db(["CREATE TABLE visits (pid BIGINT, cat VARCHAR, amount DOUBLE)",
                    f"INSERT INTO visits VALUES {values}"],
                   {"visits": table or VISITS}, name=name).db


IDENTIFIED = [f"({i}, 'a', 1.0)" for i in range(20)]
NULLS = [f"(NULL, '{'a' if i % 2 else 'b'}', 9.0)" for i in range(50)]


@pytest.mark.parametrize("sql", QUERIES)
def test_null_unit_rows_are_dropped(make_db: Callable[..., Any], sql: str) -> None:
    """With or without rows of no unit, every exact measurement is the same."""
    without = visits(make_db, IDENTIFIED, "without")
    with_nulls = visits(make_db, IDENTIFIED + NULLS, "with")
    for salt in SALTS:
        assert measured(with_nulls, sql, salt) == measured(without, sql, salt), (sql, salt)


def test_counts_exclude_null_units(make_db: Callable[..., Any]) -> None:
    db = visits(make_db, IDENTIFIED + NULLS)
    assert measured(db, "SELECT COUNT(*) FROM visits", 1) == [(20,)]
    assert measured(db, "SELECT COUNT(DISTINCT pid) FROM visits", 1) == [(20,)]
    assert measured(db, "SELECT cat, COUNT(*) FROM visits GROUP BY cat", 1) == [("a", 20)]
    # The noisy answer: Laplace with scale k / epsilon = 0.3; 50 NULL rows would show.
    n = db.query("SELECT COUNT(*) FROM visits", epsilon=10.0).rows[0][0]
    assert abs(n - 20) < 10  # fails with probability below e^-33


def test_null_units_cannot_displace(make_db: Callable[..., Any]) -> None:
    """Honest rows without a unit, then an attacker adding many more rows without a unit: the
    answer does not move (bounded together, the attacker's rows would have crowded the honest
    ones out of the k-row sample of the NULL "unit")."""
    honest = [f"({i}, 'a', 1.0)" for i in range(5)] + ["(NULL, 'a', 2.0)"] * 3
    attack = ["(NULL, 'b', 10.0)"] * 200
    before = visits(make_db, honest, "before")
    after = visits(make_db, honest + attack, "after")
    sql = "SELECT cat, COUNT(*), SUM(amount) FROM visits GROUP BY cat"
    for salt in SALTS:
        assert measured(before, sql, salt) == measured(after, sql, salt) == [("a", 5, 5.0)]


ONE_ROW = {"privacy_unit": "pid", "one_row_per_unit": True, "columns": VISITS["columns"]}


@pytest.mark.parametrize("sql", QUERIES)
@pytest.mark.usefixtures("noise_free")
def test_one_row_per_unit_table_drops_null_units(make_db: Callable[..., Any], sql: str) -> None:
    """A NULL unit never counts as a person, on the fast path too (issue 35): a
    ``one_row_per_unit`` table drops rows of no unit as a bounded table does, so the owner's
    promise changes how rows are bounded and nothing else."""
    without = visits(make_db, IDENTIFIED, "without", table=ONE_ROW)
    with_nulls = visits(make_db, IDENTIFIED + NULLS, "with", table=ONE_ROW)
    bounded = visits(make_db, IDENTIFIED + NULLS, "bounded")
    assert measured(with_nulls, sql, 1) == measured(without, sql, 1)
    answers = [db.query(sql, epsilon=100.0).rows for db in (with_nulls, without, bounded)]
    assert answers[0] == answers[1] == answers[2], answers


def test_count_distinct_unit_is_sql_on_one_row_per_unit(make_db: Callable[..., Any]) -> None:
    """people = {1, NULL}: SQL's COUNT(DISTINCT pid) is 1, and so is the fast path's (it
    counted the NULL row as a second person); COUNT(*) counts the identified row only."""
    db = visits(make_db, ["(1, 'a', 1.0)", "(NULL, 'a', 2.0)"], table=ONE_ROW)
    assert measured(db, "SELECT COUNT(DISTINCT pid) FROM visits", 1) == [(1,)]
    assert measured(db, "SELECT COUNT(*), SUM(amount) FROM visits", 1) == [(1, 1.0)]
    assert measured(db, "SELECT COUNT(*) FROM visits WHERE pid IS NULL", 1) == [(0,)]
