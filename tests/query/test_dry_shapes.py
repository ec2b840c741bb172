"""Dry runs repeated only where a new constant could change their outcome
(:mod:`dpsql.query.dry_shapes`): a moved filter value reuses the shape's passed dry run, any
other change runs it again, and the answer is the cold plan's."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from sqlglot import exp, parse_one

import dpsql
import dpsql.routes.pipeline
from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.errors import UnsupportedQuery
from dpsql.query import dry_shapes
from dpsql.query.dry_shapes import dry_shape

PEOPLE_SQL = ("CREATE TABLE people AS SELECT i AS pid, i % 90 AS age, (i * 7 % 1000)::DOUBLE "
              "AS income, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex, 'CA' AS state, "
              "i % 4 AS kids, i % 3 = 0 AS married, DATE '1970-01-01' + (i % 9000)::INTEGER "
              "AS born, NULL::VARCHAR AS code FROM range(500) t(i)")


def shape(sql: str) -> str | None:
    return dry_shape(parse_one(sql, dialect="duckdb"), DuckDBDialect)


@pytest.mark.parametrize(("one", "other"), [
    ("SELECT 1 FROM t WHERE a > 5", "SELECT 1 FROM t WHERE a > 9"),  # a moved bound
    ("SELECT 1 FROM t WHERE 5 <= a", "SELECT 1 FROM t WHERE 6 <= a"),  # either side
    ("SELECT 1 FROM t WHERE a BETWEEN 1 AND 20", "SELECT 1 FROM t WHERE a BETWEEN 3 AND 40"),
    ("SELECT 1 FROM t WHERE a IN (1, 2)", "SELECT 1 FROM t WHERE a IN (7, 8)"),
    ("SELECT 1 FROM t WHERE a = 10.5", "SELECT 1 FROM t WHERE a = 12.5"),  # DECIMAL(3,1)
    ("SELECT 1 FROM t WHERE a > CAST(10.5 AS DOUBLE)", "SELECT 1 FROM t WHERE a > "
     "CAST(99.25 AS DOUBLE)"),  # any plain number casts to DOUBLE
    ("SELECT 1 FROM t WHERE a + 1 > 1000", "SELECT 1 FROM t WHERE a + 1 > 2000"),
    # a text under TRY_CAST to a date or timestamp: never an error, always that type
    ("SELECT 1 FROM t WHERE d > TRY_CAST('2025-01-01' AS DATE)",
     "SELECT 1 FROM t WHERE d > TRY_CAST('2025-13-45x' AS DATE)"),
    ("SELECT 1 FROM t WHERE d > (CASE WHEN TRY_CAST('2025-01-01 00:00:00' AS TIMESTAMP) < x "
     "THEN x ELSE TRY_CAST('2025-01-01 00:00:00' AS TIMESTAMP) END)",
     "SELECT 1 FROM t WHERE d > (CASE WHEN TRY_CAST('2026-02-03 04:05:06' AS TIMESTAMP) < x "
     "THEN x ELSE TRY_CAST('2026-02-03 04:05:06' AS TIMESTAMP) END)"),
])
def test_a_moved_opaque_number_keeps_the_shape(one: str, other: str) -> None:
    assert shape(one) is not None
    assert shape(one) == shape(other)


@pytest.mark.parametrize(("one", "other"), [
    # DuckDB types a number by its width: each integer type's edge is a new shape
    ("SELECT 1 FROM t WHERE a > 100", "SELECT 1 FROM t WHERE a > 200"),
    ("SELECT 1 FROM t WHERE a > 5", "SELECT 1 FROM t WHERE a > 3000000000"),
    ("SELECT 1 FROM t WHERE a = 10.5", "SELECT 1 FROM t WHERE a = 10.25"),  # another scale
    ("SELECT 1 FROM t WHERE a = 10.5", "SELECT 1 FROM t WHERE a = 100.5"),  # another width
    # computed with before any row is read: the value decides
    ("SELECT 1 FROM t WHERE a + 1 > 1000", "SELECT 1 FROM t WHERE a + 2 > 1000"),
    ("SELECT 1 FROM t WHERE a > 2147483647 + 1", "SELECT 1 FROM t WHERE a > 2147483646 + 1"),
    ("SELECT 1 FROM t WHERE a > CAST(100 AS TINYINT)", "SELECT 1 FROM t WHERE a > "
     "CAST(200 AS TINYINT)"),
    # strings cast by value (a date, a number as text), negatives, exponents, LIMIT
    ("SELECT 1 FROM t WHERE d > '2025-01-01'", "SELECT 1 FROM t WHERE d > '2025-13-01'"),
    ("SELECT 1 FROM t WHERE d > CAST('2025-01-01' AS DATE)", "SELECT 1 FROM t WHERE d > "
     "CAST('2025-13-01' AS DATE)"),  # a CAST can fail: the value decides
    ("SELECT 1 FROM t WHERE d > TRY_CAST('5' AS INTEGER)", "SELECT 1 FROM t WHERE d > "
     "TRY_CAST('6' AS INTEGER)"),
    ("SELECT 1 FROM t WHERE a > -5", "SELECT 1 FROM t WHERE a > -6"),
    ("SELECT 1 FROM t WHERE a > 1e5", "SELECT 1 FROM t WHERE a > 2e5"),
    ("SELECT 1 FROM t WHERE a > 5 LIMIT 5", "SELECT 1 FROM t WHERE a > 5 LIMIT 6"),
    ("SELECT 1 FROM t WHERE 5 > 6", "SELECT 1 FROM t WHERE 5 > 7"),  # no column: constant
])
def test_any_other_change_is_a_new_shape(one: str, other: str) -> None:
    """Another shape, or none (the dry run then always runs)."""
    assert shape(one) is None or shape(one) != shape(other)


def test_the_tree_is_left_as_it_was() -> None:
    tree = parse_one("SELECT 1 FROM t WHERE a > 5 AND b IN (1, 2.5)", dialect="duckdb")
    before = tree.sql(dialect="duckdb")
    assert dry_shape(tree, DuckDBDialect) is not None
    assert tree.sql(dialect="duckdb") == before


def test_no_opaque_number_no_shape() -> None:
    assert shape("SELECT COUNT(*) FROM t WHERE s = 'x'") is None


@pytest.fixture
def dry_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The engine queries dry-run from here on (the shapes of earlier tests forgotten)."""
    dry_shapes.PASSED.clear()
    calls: list[str] = []
    real = dpsql.routes.pipeline.run_dry

    def counted(sql: str, *args: Any) -> Any:
        calls.append(sql)
        return real(sql, *args)

    monkeypatch.setattr(dpsql.routes.pipeline, "run_dry", counted)
    return calls


@pytest.mark.usefixtures("noise_free")
def test_a_moved_filter_value_is_not_dry_run_again_and_answers_as_a_cold_plan(
        make_db: Callable[..., Any], kit: SimpleNamespace, dry_runs: list[str]) -> None:
    db = make_db(PEOPLE_SQL, {"people": kit.PEOPLE}).db
    template = "SELECT COUNT(*), SUM(income) FROM people WHERE age >= {} AND income > {}"
    db.query(template.format(18, 100.5))
    assert len(dry_runs) == 1
    warm = db.query(template.format(30, 400.5)).rows  # the filter moved: no new dry run
    assert len(dry_runs) == 1
    # a cold plan and a cold dry run of the same text give the same answer
    dry_shapes.PASSED.clear()
    db.planner.plans.clear()
    db._memo.clear()
    db.engine.rewritten.clear()
    assert db.query(template.format(30, 400.5)).rows == warm
    assert len(dry_runs) == 2
    db.query(template.format(30, 400.5) + " AND pid < 3000000000")  # a new shape
    db.query(template.format(31, 401.5) + " AND pid < 3000000001")
    assert len(dry_runs) == 3
    db.query(template.format(30, 400.5) + " AND pid < 100")  # a narrower number: dry-run again
    assert len(dry_runs) == 4


def test_a_moved_parameter_through_dbapi(make_db: Callable[..., Any], kit: SimpleNamespace,
                                         dry_runs: list[str]) -> None:
    crafted = make_db(PEOPLE_SQL, {"people": kit.PEOPLE})
    crafted.db.close()
    with dpsql.connect(crafted.path, crafted.metadata) as con:
        cur = con.cursor()
        for age in (20, 30, 40):  # a dashboard's filter value, as a ? parameter
            cur.execute("SELECT COUNT(*) FROM people WHERE age >= ?", (age,))
            assert len(cur.fetchall()) == 1
    assert len(dry_runs) == 1


def test_a_refused_shape_is_refused_again(make_db: Callable[..., Any], kit: SimpleNamespace,
                                          dry_runs: list[str]) -> None:
    """A shape that failed is never stored: each text of it is dry-run, and refused."""
    db = make_db(PEOPLE_SQL, {"people": kit.PEOPLE}).db
    for value in (5, 6):
        with pytest.raises(UnsupportedQuery, match="engine cannot run"):
            db.query(f"SELECT COUNT(*) FROM people WHERE age > {value} AND "
                     "LENGTH(age) > 1")  # DuckDB's LENGTH takes no integer
    assert len(dry_runs) == 2
    assert not dry_shapes.PASSED


def test_what_a_generator_reads_is_in_the_shape() -> None:
    """The shape is a digest of the tree: a comment, a type or a spelling kept in a node's meta
    (all written by the generator) makes another shape; where the parser read a node does not."""
    sql = "SELECT 1 FROM t WHERE a > 5 AND f(b) = 1"
    plain = parse_one(sql, dialect="duckdb")
    assert dry_shape(plain, DuckDBDialect) == shape("SELECT 1 FROM t WHERE  a >  7 AND f(b) = 1")
    commented = plain.copy()
    commented.find(exp.Column).add_comments(["x"])
    spelled = plain.copy()
    spelled.find(exp.Anonymous).meta["name"] = "F"
    typed = plain.copy()
    typed.find(exp.Column).type = exp.DataType.build("INT")
    for changed in (commented, spelled, typed):
        assert dry_shape(changed, DuckDBDialect) != dry_shape(plain, DuckDBDialect)
