"""A UNION of private queries and a private scalar subquery (dpsql/routes/releases.py), through the
DB-API: separate releases charged once as the sum of their costs, the rows combined; an exact
part beside a private one refused, naming it, wherever it hides, and nothing charged."""

from __future__ import annotations

import datetime as dt
import json
import time
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


# The attacker's pass of 2026-12-06 (docs/audit.md, "Attacker's pass"): each of these was
# charged, then failed (or, for the limit, answered beyond the owner's per-query cap).


def test_the_owners_per_query_limit_caps_the_sum_of_the_parts(tmp_path: Path) -> None:
    path = tmp_path / "metadata.toml"
    path.write_text('[budget]\nledger = "ledger.sqlite"\nmax_query_epsilon = 2.0\n'
                    'max_query_delta = 1e-4\n[analysts.alice]\nepsilon = 100.0\ndelta = 0.1\n'
                    + sample_tables_toml())
    with dpsql.connect(database=SAMPLE, metadata=path, analyst="alice") as conn:
        three = " UNION ALL ".join([CLAUSE.format(2) + "COUNT(*) FROM people"] * 3)
        two_scalars = ("SELECT (" + CLAUSE.format(1.5) + "COUNT(*) FROM people) + (" +
                       CLAUSE.format(1.5) + "COUNT(*) FROM visits) AS s")
        deltas = " UNION ALL ".join(["SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5, "
                                     "delta = 1e-4) state, COUNT(*) FROM people GROUP BY "
                                     "state"] * 2)  # thresholded keys: each charges its delta
        for sql in (three, two_scalars, deltas):
            with pytest.raises(dpsql.ProgrammingError, match="max_query_delta") as refused:
                conn.cursor().execute(sql)
            assert "in all" in str(refused.value)
        with pytest.raises(dpsql.ProgrammingError, match="in all"):  # the door's epsilon, too
            conn.cursor().execute("SELECT COUNT(*) FROM people UNION ALL "
                                  "SELECT COUNT(*) FROM visits", epsilon=1.5)
        assert spent(conn) == 0.0
        cur = conn.cursor()  # at the limit: answered
        cur.execute(CLAUSE.format(1) + "COUNT(*) FROM people UNION ALL " + CLAUSE.format(1) +
                    "COUNT(*) FROM visits")
        assert len(cur.fetchall()) == 2 and spent(conn) == pytest.approx(2.0)


@pytest.mark.parametrize(("sql", "said"), [
    # arms of different widths: the UNION cannot be bound
    (CLAUSE.format(1) + "COUNT(*) FROM people UNION ALL " + CLAUSE.format(1) +
     "COUNT(*), AVG(age) FROM people", "same number of result columns"),
    # a scalar subquery of two columns
    ("SELECT (" + CLAUSE.format(1) + "COUNT(*), AVG(age) FROM people) AS s", "2 columns"),
    # a grouped scalar subquery: its rows are its released groups (two here, public domain)
    ("SELECT (" + CLAUSE.format(1) + "COUNT(*) FROM people GROUP BY sex) AS s", "GROUP BY"),
    # ... or thresholded keys, whose number is known only after the charge
    ("SELECT (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6) COUNT(*) "
     "FROM people GROUP BY state) AS s", "LIMIT 1"),
    # the UNION's ORDER BY reads a private table (the combining query has no such table)
    (CLAUSE.format(1) + "COUNT(*) AS n FROM people UNION ALL " + CLAUSE.format(1) +
     "COUNT(*) FROM people ORDER BY (SELECT MAX(income) FROM people)", "subquery without"),
    # a column that is in no part's answer
    ("SELECT (" + CLAUSE.format(1) + "COUNT(*) FROM people) + nosuch AS s", "nosuch"),
])
def test_a_combination_that_cannot_run_is_refused_before_the_charge(
        conn: dpsql.Connection, sql: str, said: str) -> None:
    with pytest.raises(dpsql.ProgrammingError, match=said):
        conn.cursor().execute(sql)
    assert spent(conn) == 0.0


def test_a_grouped_scalar_subquery_of_one_row_is_answered(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    cur.execute("SELECT (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6) "
                "COUNT(*) AS c FROM people GROUP BY state ORDER BY c DESC LIMIT 1) > 0 AS big")
    assert cur.fetchall() in ([(True,)], [(None,)]) and spent(conn) == pytest.approx(1.0)


def test_the_query_around_the_parts_runs_under_the_owners_time_limit(tmp_path: Path) -> None:
    """Its work is its own (a cross join of VALUES lists), which no checker bounds: the
    owner's statement_timeout stops it, before the charge while it is bound on the parts'
    empty answers, after it (charged) when only the released rows make it long."""
    path = tmp_path / "metadata.toml"
    path.write_text('[budget]\nledger = "ledger.sqlite"\n[server]\nstatement_timeout = 1\n'
                    '[analysts.alice]\nepsilon = 20.0\ndelta = 1e-5\n' + sample_tables_toml())
    values = "(VALUES " + ", ".join(f"({i})" for i in range(200)) + ")"
    joined = ", ".join(f"{values} AS v{i}(x)" for i in range(5))
    product = "SUM(v0.x * v1.x + v2.x - v3.x * v4.x)"
    private = "(" + CLAUSE.format(1) + "COUNT(*) FROM people)"
    with dpsql.connect(database=SAMPLE, metadata=path, analyst="alice") as conn:
        started = time.monotonic()
        with pytest.raises(dpsql.OperationalError, match="not charged"):
            conn.cursor().execute(f"SELECT {product} + {private} AS n FROM {joined}")
        assert spent(conn) == 0.0
        with pytest.raises(dpsql.OperationalError, match="was charged"):
            conn.cursor().execute(f"SELECT {product} AS n FROM {joined} "
                                  f"WHERE {private} IS NOT NULL")
        assert spent(conn) == pytest.approx(1.0)
        # an arm that reads public tables: exact, and under the limit as when sent alone
        states = ", ".join(f"states AS s{i}" for i in range(7))
        with pytest.raises(dpsql.OperationalError, match="was charged"):
            conn.cursor().execute(CLAUSE.format(1) + "COUNT(*) FROM people UNION ALL SELECT "
                                  f"COUNT(*) FROM {states} WHERE s0.state || s6.state <> 'x'")
        assert spent(conn) == pytest.approx(2.0)
        assert time.monotonic() - started < 30


def test_a_limit_0_probe_of_a_composite_is_free_and_runs_no_part(
        conn: dpsql.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its answer is the columns only, whatever the data: free, as any probe (BI tools send
    them to learn the types), its parts prepared but never run."""
    import dpsql.routes.private

    def never(*args: object) -> None:
        raise AssertionError("a part of a probe was run")

    monkeypatch.setattr(dpsql.routes.private, "answer", never)
    cur = conn.cursor()
    cur.execute("SELECT (" + CLAUSE.format(1) + "AVG(age) FROM people) AS a LIMIT 0")
    assert cur.fetchall() == [] and [d[0] for d in cur.description] == ["a"]  # type: ignore[union-attr]
    cur.execute(CLAUSE.format(1) + "COUNT(*) AS n FROM people UNION ALL " + CLAUSE.format(1) +
                "COUNT(*) FROM visits LIMIT 0")
    assert cur.fetchall() == [] and spent(conn) == 0.0
    assert conn.database.plan(CLAUSE.format(1) + "COUNT(*) FROM people UNION ALL " +
                              CLAUSE.format(1) + "COUNT(*) FROM visits LIMIT 0").epsilon == 0.0


def test_a_part_naming_the_clock_is_another_answer_on_another_day(
        conn: dpsql.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stored answer of a composite is keyed by its parts' texts as routed (the clock
    read): asked again the same day it is reused, on the next day it is a new release."""
    import dpsql.routes.releases as releases
    from dpsql.query.dates import fold_clock

    sql = ("SELECT (" + CLAUSE.format(0.5) + "COUNT(*) FROM visits WHERE day <= CURRENT_DATE)"
           " AS a, (" + CLAUSE.format(0.25) + "COUNT(*) FROM people) AS b")
    cur = conn.cursor()
    for day, total in ((1, 0.75), (1, 0.75), (2, 1.5)):
        now = dt.datetime(2026, 12, day, 12, tzinfo=dt.UTC)
        monkeypatch.setattr(releases, "fold_clock",
                            lambda text, now=now: fold_clock(text, now=now))
        cur.execute(sql)
        assert len(cur.fetchall()) == 1
        assert spent(conn) == pytest.approx(total), day


def test_the_stored_answer_key_tells_any_two_lists_of_texts_apart(
        conn: dpsql.Connection) -> None:
    """Texts may hold any character, a NUL too: joined with a separator, the lists
    (``a\\0b``, ``c``) and (``a``, ``b\\0c``) would make one key and share an answer."""
    import dataclasses

    sql = ("SELECT (" + CLAUSE.format(0.5) + "COUNT(*) FROM visits) AS a, (" +
           CLAUSE.format(0.25) + "COUNT(*) FROM people) AS b")
    whole = conn.database.route(sql)
    first, second = whole.parts

    def key(a: str, b: str) -> str:
        return dataclasses.replace(whole, parts=(dataclasses.replace(first, sql=a),
                                                 dataclasses.replace(second, sql=b))
                                   ).key_text(sql)

    assert key("a\0b", "c") != key("a", "b\0c")
    assert key("a", "b") == key("a", "b")
