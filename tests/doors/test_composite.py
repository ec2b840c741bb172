"""A UNION of private queries and a private scalar subquery (dpsql/routes/releases.py), through the
DB-API: separate releases charged once as the sum of their costs, the rows combined; an exact
part beside a private one refused, naming it, wherever it hides, and nothing charged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import dpsql
from dpsql.query.composite import split
from dpsql.routes.releases import Releases
from tests.support.helpers import SAMPLE, sample_tables_toml

pytestmark = pytest.mark.usefixtures("no_dpsql_env")

CLAUSE = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = {}, delta = 0) "


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[dpsql.Connection]:
    path = tmp_path / "metadata.toml"
    path.write_text('[budget]\nledger = "ledger.sqlite"\n[analysts.alice]\nepsilon = 20.0\n'
                    "delta = 1e-5\n" + sample_tables_toml())
    with dpsql.connect(database=SAMPLE, metadata=path, analyst="alice") as connection:
        yield connection


def spent(conn: dpsql.Connection) -> float:
    return conn.budget().spent.epsilon  # type: ignore[union-attr]


def test_a_union_all_of_private_queries_is_charged_as_the_sum(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    sql = (CLAUSE.format(0.5) + "sex, COUNT(*) AS n FROM people GROUP BY sex UNION ALL " +
           CLAUSE.format(0.25) + "sex, COUNT(*) FROM people GROUP BY sex")
    cur.execute(sql)
    rows = cur.fetchall()
    assert [d[0] for d in cur.description] == ["sex", "n"]  # type: ignore[union-attr]
    assert len(rows) == 4 and sorted(r[0] for r in rows) == ["F", "F", "M", "M"]
    assert spent(conn) == pytest.approx(0.75)
    cur.execute(sql)  # the same text again: the stored answer, free
    assert sorted(cur.fetchall()) == sorted(rows) and spent(conn) == pytest.approx(0.75)
    # UNION (distinct) of released rows: post-processing of the same releases
    cur.execute("SELECT COUNT(*) FROM people UNION SELECT COUNT(*) FROM people", epsilon=0.125)
    assert 1 <= len(cur.fetchall()) <= 2 and spent(conn) == pytest.approx(1.0)


def test_without_the_clause_each_arm_is_a_private_query(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    cur.execute("SELECT AVG(age) FROM people UNION ALL SELECT AVG(income) FROM people",
                epsilon=0.5)
    assert len(cur.fetchall()) == 2 and spent(conn) == pytest.approx(1.0)


def test_a_private_query_in_a_scalar_subquery(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    cur.execute("SELECT ABS((" + CLAUSE.format(0.5) + "COUNT(*) FROM people) - 20000) < 1000 "
                "AS near, (" + CLAUSE.format(0.25) + "AVG(age) FROM people) > 0 AS positive")
    assert cur.fetchall() == [(True, True)]
    assert [d[0] for d in cur.description] == ["near", "positive"]  # type: ignore[union-attr]
    assert spent(conn) == pytest.approx(0.75)


@pytest.mark.parametrize("sql", [
    # an arm without the clause beside a private one: BigQuery's exact query
    CLAUSE.format(1) + "COUNT(*) FROM people UNION ALL SELECT COUNT(*) FROM people",
    # the same in parentheses, second or later
    "(" + CLAUSE.format(1) + "COUNT(*) FROM people) UNION ALL ((SELECT COUNT(*) FROM people))",
    CLAUSE.format(1) + "COUNT(*) FROM people UNION ALL " + CLAUSE.format(1) + "COUNT(*) FROM "
    "people UNION ALL SELECT SUM(income) FROM people",
    # behind a CTE of the UNION: the arm reads the CTE as the UNION did
    "WITH x AS (SELECT income FROM people) " + CLAUSE.format(1) + "COUNT(*) FROM people "
    "UNION ALL SELECT SUM(income) FROM x",
    # a row read of a private table
    CLAUSE.format(1) + "age FROM people GROUP BY age UNION ALL SELECT age FROM people",
    # an exact scalar subquery beside a private one
    "SELECT (" + CLAUSE.format(1) + "COUNT(*) FROM people) - (SELECT COUNT(*) FROM people)",
    # the query around a private subquery reads a private table
    "SELECT (" + CLAUSE.format(1) + "COUNT(*) FROM people) - income FROM people",
])
def test_an_exact_part_is_refused_naming_it_and_nothing_is_charged(
        conn: dpsql.Connection, sql: str) -> None:
    with pytest.raises(dpsql.ProgrammingError) as refused:
        conn.cursor().execute(sql)
    assert "people" in str(refused.value)
    assert spent(conn) == 0.0


def test_a_refused_arm_charges_nothing_for_the_others(conn: dpsql.Connection) -> None:
    with pytest.raises(dpsql.ProgrammingError, match="arm 2 of the UNION"):
        conn.cursor().execute(CLAUSE.format(1) + "COUNT(*) FROM people UNION ALL " +
                              CLAUSE.format(1) + "COUNT(*) FROM nowhere")
    with pytest.raises(dpsql.ProgrammingError, match="delta"):  # its clause lacks delta
        conn.cursor().execute(CLAUSE.format(1) + "COUNT(*) FROM people UNION ALL SELECT WITH "
                              "DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1) COUNT(*) FROM people")
    assert spent(conn) == 0.0


def test_the_plan_is_the_parts_and_explain_shows_each(conn: dpsql.Connection) -> None:
    sql = (CLAUSE.format(0.5) + "COUNT(*) FROM people UNION ALL " + CLAUSE.format(0.25) +
           "AVG(age) FROM people")
    plan = conn.database.plan(sql)
    assert isinstance(plan, Releases) and plan.epsilon == pytest.approx(0.75)
    assert [p.part.clause for p in plan.parts] == [True, True]
    explained = conn.database.explain(sql)
    assert explained.epsilon == pytest.approx(0.75) and "arm 2 of the UNION" in explained.sql
    assert spent(conn) == 0.0


def test_the_parts_are_written_back_as_queries_of_their_own() -> None:
    composite = split(CLAUSE.format(2) + "SUM(x, contribution_bounds_per_row => (0, 1)) FROM t "
                      "UNION ALL SELECT 1")
    assert composite is not None and composite.union
    assert [p.tree.sql(dialect="dpsql") for p in composite.parts] == [
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 2, delta = 0) SUM(x, "
        "contribution_bounds_per_row => (0, 1)) FROM t", "SELECT 1"]
    assert split("SELECT COUNT(*) FROM t") is None


def test_a_report_in_each_arm_is_built_by_that_arms_post_processing(
        conn: dpsql.Connection) -> None:
    """report_format => 'JSON' in an arm: the arm is answered as alone, its report a value of
    its own post-processing query (dpsql.execution.reports), the rows then combined."""
    cur = conn.cursor()
    cur.execute(CLAUSE.format(0.5) + "COUNT(*, report_format => 'JSON') AS r FROM people "
                "UNION ALL " + CLAUSE.format(0.25) + "COUNT(*, report_format => 'JSON') "
                "FROM people")
    reports = [json.loads(r) for (r,) in cur.fetchall()]
    assert cur.description[0][:2] == ("r", "JSON")  # type: ignore[index]
    # each arm's own noise: the interval of the arm charged half the epsilon is twice as wide
    half_widths = [r["result"]["noise_confidence_interval"]["upper_bound"] for r in reports]
    assert half_widths[1] == pytest.approx(2 * half_widths[0])
    assert all(isinstance(r["result"]["value"], int) for r in reports)
    assert spent(conn) == pytest.approx(0.75)


def test_a_report_in_an_arm_that_is_no_private_release_is_refused_before_any_charge(
        conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    with pytest.raises(dpsql.ProgrammingError, match=r"arm 2 .*report_format"):
        cur.execute(CLAUSE.format(0.5) + "COUNT(*) FROM people UNION ALL " + CLAUSE.format(0.5) +
                    "COUNT(*, report_format => 'JSON') FROM states")
    assert spent(conn) == 0


def test_a_union_of_ledger_views_is_a_ledger_read_and_never_a_part(
        conn: dpsql.Connection) -> None:
    """The ledger views (dpsql.ledger.spending) are read on their own, exactly and free, in a
    UNION too; beside a private arm they are refused as beside any table."""
    cur = conn.cursor()
    cur.execute("SELECT analyst FROM dpsql.budgets UNION ALL SELECT analyst FROM dpsql.budgets")
    assert cur.fetchall() == [("alice",), ("alice",)] and spent(conn) == 0
    with pytest.raises(dpsql.ProgrammingError, match="read on their own"):
        cur.execute(CLAUSE.format(0.5) + "COUNT(*) FROM people UNION ALL "
                    "SELECT COUNT(*) FROM dpsql.budgets")
    assert spent(conn) == 0
