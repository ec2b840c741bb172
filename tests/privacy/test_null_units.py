"""Rows whose privacy unit is NULL: dropped, before contribution bounding, from every query over
a table that needs bounding (they belong to no identifiable unit); in a ``one_row_per_unit``
table each such row is its own unit. Measured through the real pipeline on a real engine:
the exact measurements the engine returns for a fixed salt, then noisy answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import dpsql
from dpsql.pipeline import engine_sql

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


def test_one_row_per_unit_table_counts_each_null_unit_row(make_db: Callable[..., Any]) -> None:
    """Without bounding each row is its own unit, NULL unit included (documented in
    dpsql.execution.rewrite): one row still changes a count by at most 1."""
    table = {"privacy_unit": "pid", "one_row_per_unit": True, "columns": VISITS["columns"]}
    db = visits(make_db, IDENTIFIED + NULLS[:4], table=table)
    assert measured(db, "SELECT COUNT(*) FROM visits", 1) == [(24,)]
    assert measured(db, "SELECT COUNT(DISTINCT pid) FROM visits", 1) == [(24,)]
