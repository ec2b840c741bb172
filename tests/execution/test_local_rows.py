"""Row-level SELECTs under local DP (dpsql/execution/local_rows.py) through the library: the
charge, stored answers, sampling, releases to Parquet and the attacks an analyst would try."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import duckdb
import pytest
import tomli_w

import dpsql
from dpsql.errors import JoinRefused, QueryRefused, UnknownColumn, UnsupportedQuery
from dpsql.execution.local_rows import read_release_params
from dpsql.privacy.local_estimates import estimate_counts, rr_count_sql
from dpsql.privacy.randomness import Randomness

pytestmark = pytest.mark.usefixtures("no_dpsql_env")  # each test's own ledger
N = 200
PEOPLE: dict[str, Any] = {
    "privacy_unit": "pid", "one_row_per_unit": True,
    "columns": {
        "pid": {"type": "int"},
        "sex": {"type": "text", "values": ["F", "M"]},
        "age": {"type": "int", "lower": 0, "upper": 99},
        "pay": {"type": "float", "lower": 0, "upper": 100, "nullable": True},
        "day": {"type": "date", "lower": dt.date(2020, 1, 1), "upper": dt.date(2023, 12, 31)},
        "note": {"type": "text"}},
    "local": {"epsilon": 1.5, "row_count": "public", "columns": {
        "sex": "rr", "age": "laplace",
        "pay": {"release": "buckets", "edges": [0, 50, 100]},
        "day": {"release": "grain", "grain": "year"}}}}
# k = 2 rows per unit; the row count is not public: each query draws 30 rows.
VISITS: dict[str, Any] = {
    "privacy_unit": "pid", "max_rows_per_unit": 2,
    "columns": {"pid": {"type": "int"}, "kind": {"type": "text", "values": ["a", "b", "c"]}},
    "local": {"epsilon": 0.5, "sample_rows": 30, "columns": {"kind": "rr"}}}
ROWS_SQL = [
    # Every true sex is M, every age 77: what comes back as F or another age is randomized.
    f"CREATE TABLE people AS SELECT i AS pid, 'M' AS sex, 77 AS age, "
    f"CASE WHEN i % 5 = 0 THEN NULL ELSE i % 100 END::DOUBLE AS pay, "
    f"DATE '2021-06-01' AS day, 'secret ' || i AS note FROM range({N}) t(i)",
    "CREATE TABLE visits AS SELECT i % 10 AS pid, 'a' AS kind FROM range(50) t(i)",
    "CREATE TABLE ref AS SELECT 'F' AS sex, 'female' AS label",
]


def _open(folder: Path, sql: list[str], tables: dict[str, Any], seed: int = 1
          ) -> dpsql.Database:
    path = folder / "data.duckdb"
    with duckdb.connect(str(path)) as con:
        for statement in sql:
            con.execute(statement)
    metadata = folder / "metadata.toml"
    metadata.write_text(tomli_w.dumps({
        "budget": {"ledger": str(folder / "ledger.sqlite")},
        "analysts": {"ann": {"epsilon": 1000.0}}, "tables": tables}), encoding="utf-8")
    return dpsql.Database(path, metadata, analyst="ann", randomness=Randomness.seeded(seed))


TABLES = {"people": PEOPLE, "visits": VISITS,
          "ref": {"public": True, "columns": {"sex": "text", "label": "text"}}}


@pytest.fixture
def db(tmp_path: Path) -> Any:
    with _open(tmp_path, ROWS_SQL, TABLES) as opened:
        yield opened


def _spent(db: dpsql.Database) -> float:
    status = db.budget()
    assert status is not None
    return status.spent.epsilon


def test_a_preview_is_randomized_rows_charged_once(db: dpsql.Database) -> None:
    answered = db.run("SELECT * FROM people LIMIT 100", epsilon=0.01)
    rows = answered.result.rows
    assert len(rows) == 100
    assert answered.cost is not None and answered.cost.epsilon == 1.5  # epsilon x k, not 0.01
    assert _spent(db) == 1.5
    names = [c.name for c in answered.result.columns]
    assert names == ["pid", "sex", "age", "pay", "day", "note"]
    assert all(r[0] is None and r[5] is None for r in rows)  # the unit and free text withheld
    assert {r[1] for r in rows} <= {"F", "M"} and "F" in {r[1] for r in rows}
    assert {r[3] for r in rows} <= {0.0, 50.0, None}
    assert {r[4] for r in rows} <= {dt.date(y, 1, 1) for y in range(2020, 2024)}
    assert any(r[2] != 77 for r in rows)  # ages carry noise


def test_a_repeated_request_returns_the_same_rows_for_free(db: dpsql.Database) -> None:
    first = db.run("SELECT sex, age FROM people LIMIT 20")
    again = db.run("SELECT sex, age FROM people LIMIT 20")
    assert again.reused and again.cost is None
    assert again.result.rows == first.result.rows
    assert _spent(db) == 1.5


def test_every_preview_of_a_table_reads_one_copy_charged_once(db: dpsql.Database) -> None:
    first = db.run("SELECT sex, age FROM people LIMIT 3", epsilon=0.01)
    assert first.cost is not None and first.cost.epsilon == 1.5 and not first.reused
    more = db.run("SELECT age, sex FROM people LIMIT 100", epsilon=7.0)  # its epsilon ignored
    assert more.cost is None and more.reused and _spent(db) == 1.5
    assert [(r[1], r[0]) for r in more.result.rows[:3]] == first.result.rows  # the same copy
    everything = db.query("SELECT sex, age FROM people")
    assert len(everything.rows) == N and everything.rows[:3] == first.result.rows
    # Filters, orders, windows and samples of the copy: post-processing, all free.
    females = db.query("SELECT sex, age FROM people WHERE sex = 'F'").rows
    assert females == [r for r in everything.rows if r[0] == "F"]
    ranked = db.query("SELECT age, ROW_NUMBER() OVER (ORDER BY age, sex) AS n FROM people "
                      "ORDER BY n").rows
    assert [r[0] for r in ranked] == sorted(r[1] for r in everything.rows)
    sample = db.query("SELECT sex, age FROM people TABLESAMPLE 50%").rows
    assert set(sample) <= set(everything.rows) and 0 < len(sample) < N
    assert _spent(db) == 1.5
    # Every answer says what was charged, and why not the epsilon asked for.
    assert any("Charged epsilon 1.5" in n and "does not apply" in n for n in first.result.notes)
    assert any("No new privacy cost" in n for n in more.result.notes)


def test_each_analyst_gets_and_pays_for_a_copy_of_their_own(tmp_path: Path) -> None:
    path, metadata = tmp_path / "data.duckdb", tmp_path / "metadata.toml"
    with duckdb.connect(str(path)) as con:
        con.execute(ROWS_SQL[0])
    metadata.write_text(tomli_w.dumps({
        "budget": {"ledger": str(tmp_path / "ledger.sqlite")},
        "analysts": {"ann": {"epsilon": 1000.0}, "bob": {"epsilon": 1000.0}},
        "tables": {"people": PEOPLE}}), encoding="utf-8")
    with dpsql.Database(path, metadata) as db:
        ann = db.query("SELECT age FROM people", analyst="ann").rows
        bob = db.run("SELECT age FROM people", analyst="bob")
        again = db.run("SELECT age FROM people LIMIT 5", analyst="ann")
    assert bob.cost is not None and bob.cost.epsilon == 1.5 and bob.result.rows != ann
    assert again.cost is None and again.result.rows == ann[:5]  # ann's copy, not bob's


def test_a_sampled_copy_grows_by_the_draws_asked_each_charged_once(db: dpsql.Database
                                                                   ) -> None:
    small = db.run("SELECT kind FROM visits TABLESAMPLE (4 ROWS)")
    assert small.cost is not None and small.cost.epsilon == pytest.approx(2.0)  # 4 x 0.5
    default = db.run("SELECT kind FROM visits")  # m = 30: 26 more draws, the 4 kept
    assert default.cost is not None and default.cost.epsilon == pytest.approx(13.0)
    assert len(default.result.rows) == 30 and default.result.rows[:4] == small.result.rows
    again = db.run("SELECT kind FROM visits TABLESAMPLE (10 ROWS)")
    assert again.cost is None and again.result.rows == default.result.rows[:10]
    assert _spent(db) == pytest.approx(15.0)  # 30 draws released, each paid once


def test_without_stored_answers_each_query_draws_and_is_charged(tmp_path: Path) -> None:
    path = tmp_path / "data.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(ROWS_SQL[0])
    metadata = tmp_path / "metadata.toml"
    metadata.write_text(tomli_w.dumps({
        "budget": {"ledger": str(tmp_path / "ledger.sqlite"), "reuse_answers": False},
        "analysts": {"ann": {"epsilon": 1000.0}}, "tables": {"people": PEOPLE}}),
        encoding="utf-8")
    with dpsql.Database(path, metadata, analyst="ann") as db:
        first, second = (db.run("SELECT age FROM people LIMIT 3") for _ in range(2))
        spent = _spent(db)
    assert first.cost is not None and second.cost is not None and spent == 3.0
    assert second.result.randomized and any("draws anew" in n for n in second.result.notes)


def test_the_filter_reads_randomized_values_never_the_true_ones(db: dpsql.Database) -> None:
    # Every true sex is M: a filter on the truth would return nothing.
    rows = db.query("SELECT sex, age FROM people WHERE sex = 'F'").rows
    assert 0 < len(rows) < N and {r[0] for r in rows} == {"F"}
    # age = 77 for everyone: the rows matching 77 are those whose noise happened to be 0.
    exact = db.query("SELECT age FROM people WHERE age = 77").rows
    assert len(exact) < N / 2


def test_limit_without_order_keeps_rows_in_a_random_order(tmp_path: Path) -> None:
    # The stored order is by true age; the first 20 released rows are not the 20 youngest.
    sql = ["CREATE TABLE people AS SELECT i AS pid, 'M' AS sex, i % 100 AS age, 1.0 AS pay, "
           "DATE '2021-01-01' AS day, '' AS note FROM range(100) t(i) ORDER BY age"]
    tables = {"people": {**PEOPLE, "local": {**PEOPLE["local"], "epsilon": 200.0,
                                              "columns": {"age": "laplace"}}}}
    with _open(tmp_path, sql, tables) as db:
        ages = [r[0] for r in db.query("SELECT age FROM people LIMIT 20").rows]
    assert len(ages) == 20 and max(ages) > 40  # epsilon 200: ages are nearly exact


@pytest.mark.parametrize(("sql", "error"), [
    ("SELECT p.age, v.kind FROM people p JOIN visits v ON p.pid = v.pid", UnsupportedQuery),
    ("SELECT age FROM people WHERE pid IN (SELECT pid FROM visits)", UnsupportedQuery),
    ("SELECT p.sex, r.label FROM people p JOIN ref r ON p.sex = r.sex", UnsupportedQuery),
    ("SELECT * FROM people TABLESAMPLE BERNOULLI (10) REPEATABLE (1)", UnsupportedQuery),
    ("SELECT * FROM visits TABLESAMPLE 10%", UnsupportedQuery),  # its size is not public
    ("SELECT note FROM people", QueryRefused),
])
def test_what_cannot_be_made_private_is_refused_before_any_charge(
        db: dpsql.Database, sql: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        db.run(sql)
    assert _spent(db) == 0.0


def test_a_sampled_table_draws_m_rows_each_costing_epsilon(db: dpsql.Database) -> None:
    answered = db.run("SELECT * FROM visits")
    assert len(answered.result.rows) == 30
    assert answered.cost is not None and answered.cost.epsilon == pytest.approx(15.0)
    small = db.run("SELECT kind FROM visits TABLESAMPLE (4 ROWS)")  # 4 of the 30 draws
    assert len(small.result.rows) == 4 and small.cost is None


def test_a_public_count_table_bounds_each_unit_to_k_rows(tmp_path: Path) -> None:
    tables = {"visits": {**VISITS, "local": {"epsilon": 0.5, "row_count": "public",
                                             "columns": {"kind": "rr"}}}}
    sql = ["CREATE TABLE visits AS SELECT i % 10 AS pid, 'a' AS kind FROM range(50) t(i) "
           "UNION ALL SELECT NULL, 'b'"]
    with _open(tmp_path, sql, tables) as db:
        answered = db.run("SELECT * FROM visits")
    assert len(answered.result.rows) == 20  # 10 units x k = 2; the NULL unit's row dropped
    assert answered.cost is not None and answered.cost.epsilon == 1.0  # k x epsilon


def test_a_one_row_per_unit_table_releases_no_row_of_a_null_unit(tmp_path: Path) -> None:
    """A NULL unit is no one on the local path too (issue 35), as on the central one."""
    sql = ["CREATE TABLE people AS SELECT CASE WHEN i < 5 THEN NULL ELSE i END AS pid, "
           "'M' AS sex FROM range(40) t(i)"]
    table = {"privacy_unit": "pid", "one_row_per_unit": True, "columns": {
        "pid": {"type": "int", "nullable": True}, "sex": {"type": "text", "values": ["F", "M"]}},
        "local": {"epsilon": 1.0, "row_count": "public", "columns": {"sex": "rr"}}}
    with _open(tmp_path, sql, {"people": table}) as db:
        assert len(db.query("SELECT sex FROM people").rows) == 35


def test_an_empty_sampled_table_releases_phantom_rows(tmp_path: Path) -> None:
    sql = ["CREATE TABLE visits (pid BIGINT, kind VARCHAR)"]
    with _open(tmp_path, sql, {"visits": VISITS}) as db:
        rows = db.query("SELECT kind FROM visits").rows
    assert len(rows) == 30 and {r[0] for r in rows} <= {"a", "b", "c"}


def test_a_release_to_parquet_is_charged_once_and_queried_for_free(
        db: dpsql.Database, tmp_path: Path) -> None:
    out = tmp_path / "release" / "people_local.parquet"
    out.parent.mkdir()
    answered = db.release_local("people", out)
    assert answered.cost is not None and _spent(db) == 1.5
    again = db.release_local("people", out)  # the stored rows, written again
    assert again.reused and _spent(db) == 1.5
    params = read_release_params(out)
    assert params["charged_epsilon"] == 1.5 and params["row_count"] == "public"
    assert set(params["columns"]) == {"sex", "age", "pay", "day"}
    assert set(params["withheld"]) == {"pid", "note"}
    assert params["columns"]["sex"]["p"] == pytest.approx(0.5 / (0.5 + 1) * 2, rel=0.5)
    # The file declared as a public table: queries over it are exact and free.
    metadata = tmp_path / "release.toml"
    metadata.write_text(tomli_w.dumps({"tables": {"people_local": {"public": True, "columns": {
        "sex": "text", "age": "int", "pay": "float", "day": "date"}}}}), encoding="utf-8")
    with dpsql.Database(out.parent, metadata) as released:
        estimate = released.query(f"SELECT {rr_count_sql('sex', 'F', params)} AS f "
                                  "FROM people_local").rows[0][0]
        with pytest.raises((UnknownColumn, JoinRefused, QueryRefused)):
            released.query("SELECT pid FROM people_local")  # the unit never left
    pd = pytest.importorskip("pandas")
    frame = pd.read_parquet(out)
    table = estimate_counts(frame, "sex", params).set_index("value")
    assert table.loc["F", "estimate"] == pytest.approx(estimate)
    assert abs(table.loc["F", "estimate"]) < 4 * table.loc["F", "ci95"]  # the truth is 0
    assert table.loc["M", "estimate"] == pytest.approx(N - table.loc["F", "estimate"])


def test_a_release_of_a_table_not_opted_in_is_refused(db: dpsql.Database, tmp_path: Path
                                                      ) -> None:
    with pytest.raises(dpsql.errors.MetadataError, match="local"):
        db.release_local("ref", tmp_path / "x.parquet")


def test_a_local_release_joined_with_a_private_table_links_no_one(
        db: dpsql.Database, tmp_path: Path) -> None:
    folder = tmp_path / "both"
    folder.mkdir()
    db.release_local("people", folder / "people_local.parquet")
    duckdb.sql(f"COPY (SELECT i % 10 AS pid, 'a' AS kind FROM range(50) t(i)) TO "
               f"'{folder / 'visits.parquet'}' (FORMAT PARQUET)")
    metadata = tmp_path / "both.toml"
    metadata.write_text(tomli_w.dumps({"tables": {
        "people_local": {"public": True, "columns": {"sex": "text", "age": "int"}},
        "visits": {k: v for k, v in VISITS.items() if k != "local"}}}), encoding="utf-8")
    with dpsql.Database(folder, metadata) as both:
        with pytest.raises(QueryRefused):  # the unit is not in the release: nothing to join on
            both.query("SELECT COUNT(*) FROM visits v JOIN people_local r ON v.pid = r.pid")
        with pytest.raises(QueryRefused):  # the private table's rows stay private
            both.query("SELECT v.kind, r.sex FROM visits v JOIN people_local r "
                       "ON v.kind = r.sex")
        free = both.query("SELECT COUNT(*) FROM people_local")  # post-processing: exact
    assert free.rows == [(N,)]


def test_averaging_over_differently_written_queries_buys_nothing(tmp_path: Path) -> None:
    # The attack that per-query draws allowed: one person, asked for again and again in
    # different words, each answer a fresh draw; their mean converges to the true age. From
    # one stored copy every spelling returns the same randomized value, and nothing more is
    # charged: the copy's noise cannot be averaged away.
    sql = ["CREATE TABLE people AS SELECT 1 AS pid, 'M' AS sex, 77 AS age, 1.0 AS pay, "
           "DATE '2021-01-01' AS day, '' AS note"]
    with _open(tmp_path, sql, {"people": PEOPLE}) as db:
        ages = [db.query(q).rows[0][0] for q in (
            "SELECT age FROM people", "SELECT age FROM people LIMIT 1", "SELECT age AS a FROM "
            "people WHERE 1 = 1", "SELECT age + 0 FROM people", "SELECT age FROM people "
            "ORDER BY sex", *(f"SELECT age FROM people LIMIT {n}" for n in range(2, 30)))]
        assert _spent(db) == 1.5
    assert len(set(ages)) == 1  # one draw: at epsilon 0.5 for age, rarely the true 77
