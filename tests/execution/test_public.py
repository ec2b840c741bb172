"""Public tables read exactly (dpsql/execution/public.py) and the series limit answered as two
private releases charged once (dpsql/routes/series.py), through every front door."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import duckdb
import psycopg
import pytest
from click.testing import CliRunner

import dpsql
import dpsql.routes.series
from dpsql.cli import main
from dpsql.database import Database, sample_paths
from dpsql.errors import BudgetExhausted, UnknownColumn, UnsupportedQuery
from dpsql.ledger.opening import LEDGER_ENV
from tests.support.sandbox import sandbox

PASSWORD = "pw"

pytestmark = pytest.mark.usefixtures("seeded_randomness")

SUPERSET = ("SELECT v.category AS category, COUNT(*) AS count FROM visits v JOIN (SELECT "
            "category AS category_, COUNT(*) AS mme_inner__ FROM visits GROUP BY category ORDER "
            "BY mme_inner__ DESC LIMIT 5) AS series_limit ON v.category = series_limit.category_ "
            "GROUP BY v.category ORDER BY count DESC LIMIT 10000")
IN_FORM = ("SELECT category, COUNT(*) AS count FROM visits WHERE category IN (SELECT category "
           "FROM visits GROUP BY category ORDER BY COUNT(*) DESC LIMIT 3) GROUP BY category")


def raw(sql: str) -> list[tuple[object, ...]]:
    """The exact answer, straight from the sample Parquet files."""
    folder, _ = sample_paths()
    con = duckdb.connect()
    for name in ("states", "categories"):
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{folder / name}.parquet')")
    return con.execute(sql).fetchall()


@pytest.fixture
def metered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    setup = sandbox(tmp_path, {"alice": ("pw", 3.0, 1e-6), "bob": ("pw", 0.6, 0.0)})
    with Database(setup.database, setup.metadata, analyst="alice") as db:
        yield db


# -- exact public reads -----------------------------------------------------------------------


@pytest.mark.parametrize("sql", [
    "SELECT * FROM states ORDER BY state",
    "SELECT region, COUNT(*) AS n, ROW_NUMBER() OVER (ORDER BY COUNT(*) DESC, region) AS k "
    "FROM states GROUP BY region ORDER BY k",
    "WITH d AS (SELECT department, SUM(base_fee) AS fees FROM categories GROUP BY 1) "
    "SELECT * FROM d WHERE fees > 100 ORDER BY department",
    "SELECT s.state, c.category FROM states s CROSS JOIN categories c ORDER BY 1, 2 LIMIT 7",
    "SELECT state FROM states UNION SELECT category FROM categories ORDER BY 1",
])
def test_public_reads_are_exact_and_free(metered: Database, sql: str) -> None:
    before = metered.budget()
    answered = metered.run(sql)
    assert answered.result.rows == raw(sql)
    assert answered.cost is None and answered.result.epsilon == 0
    assert metered.budget() == before  # no ledger entry, nothing spent
    assert metered.ledger is not None and metered.ledger.history("alice") == []


def test_public_read_types_and_explain(metered: Database) -> None:
    result = metered.query("SELECT category, covered, base_fee FROM categories ORDER BY 1")
    assert [c.type for c in result.columns] == ["VARCHAR", "BOOLEAN", "DOUBLE"]
    assert all(a == (None, None, None) for a in result.accuracy)
    e = metered.explain("SELECT * FROM states")
    assert e.epsilon == 0 and e.delta == 0 and e.cells == [] and "exact" in e.key_release


def test_public_read_needs_a_known_analyst(metered: Database) -> None:
    with pytest.raises(dpsql.errors.Error):
        metered.run("SELECT * FROM states", analyst="mallory")


def test_only_declared_columns_and_tables_are_visible(make_db) -> None:
    crafted = make_db(["CREATE TABLE ref (code VARCHAR, label VARCHAR, secret VARCHAR)",
                       "INSERT INTO ref VALUES ('a', 'A', 's1'), ('b', 'B', 's2')",
                       "CREATE TABLE people (id INTEGER, age INTEGER)",
                       "INSERT INTO people VALUES (1, 30)"],
                      {"ref": {"public": True, "columns": {"code": "text", "label": "text"}},
                       "people": {"privacy_unit": "id", "columns": {
                           "id": "int", "age": {"type": "int", "lower": 0, "upper": 100}}}})
    db = crafted.db
    result = db.query("SELECT * FROM ref ORDER BY code")
    assert [c.name for c in result.columns] == ["code", "label"]
    assert result.rows == [("a", "A"), ("b", "B")]
    with pytest.raises(UnknownColumn):
        db.query("SELECT secret FROM ref")
    # Functions that run SQL text find only the public store: no private table there.
    with pytest.raises(dpsql.errors.QueryRefused):
        db.query("SELECT (SELECT COUNT(*) FROM people) FROM ref")


def test_a_public_reads_dry_run_depends_on_no_other_query(metered: Database) -> None:
    """A public read is dry-run on a DuckDB of its own, never on the database where dpsql's
    engine queries are dry-run (dpsql.engines.duckdb_engine.dry): what it can name there (the
    database's own name) is the same whatever ran before it in the process."""
    sql = "SELECT CAST(concat(current_database(), MIN(state)) AS INT) FROM states"
    with pytest.raises(dpsql.errors.QueryRefused) as first:
        metered.query(sql)
    metered.query("SELECT COUNT(*) FROM people", epsilon=0.1)  # an engine query's dry run
    with pytest.raises(dpsql.errors.QueryRefused) as again:
        metered.query(sql)
    assert str(first.value) == str(again.value) and "dry_" not in str(again.value)


def test_public_read_runtime_error_is_a_data_error(metered: Database) -> None:
    with pytest.raises(dpsql.errors.DataError, match="public tables failed"):
        metered.query("SELECT CAST(state AS INTEGER) FROM states")


def test_public_read_is_stopped_by_the_owners_time_limit(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    setup = sandbox(tmp_path, {"alice": ("pw", 1.0, 0.0)})
    text = setup.metadata.read_text() + "\n[server]\nstatement_timeout = 0.5\n"
    setup.metadata.write_text(text)
    slow = ("SELECT COUNT(*) FROM states a, states b, states c, states d, states e, states f "
            "WHERE a.state || b.state || c.state || d.state || e.state < f.state")
    with Database(setup.database, setup.metadata, analyst="alice") as db, \
            pytest.raises(dpsql.errors.QueryTimeout):
        db.query(slow)


def test_dbapi_and_cli_read_public_tables(tmp_path: Path) -> None:
    with dpsql.connect() as conn:
        cur = conn.cursor()
        cur.execute("SELECT state, region FROM states WHERE region = ? ORDER BY state",
                    ["West"])
        assert cur.fetchall() == raw("SELECT state, region FROM states WHERE region = 'West' "
                                     "ORDER BY state")
        assert [d[1] for d in cur.description] == ["VARCHAR", "VARCHAR"]
    runner = CliRunner()
    env = {LEDGER_ENV: str(tmp_path / "ledger.sqlite")}
    out = runner.invoke(main, ["query", "--format", "json",
                               "SELECT region, COUNT(*) AS n FROM states GROUP BY 1 ORDER BY 1"],
                        env=env)
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)["rows"]
    assert [(r["region"], r["n"]) for r in rows] == raw(
        "SELECT region, COUNT(*) FROM states GROUP BY 1 ORDER BY 1")
    out = runner.invoke(main, ["explain", "SELECT * FROM states"], env=env)
    assert out.exit_code == 0 and "epsilon=0" in out.output and "exact" in out.output


# -- the series limit: two releases, one charge ------------------------------------------------


def test_series_limit_is_two_releases_charged_once(metered: Database) -> None:
    e = metered.explain(SUPERSET)
    assert e.epsilon == pytest.approx(1.0)
    assert any(c.output.startswith("release 1") for c in e.cells)
    assert any(c.output.startswith("release 2") for c in e.cells)
    answered = metered.run(SUPERSET)
    assert answered.cost is not None and answered.cost.epsilon == pytest.approx(1.0)
    assert metered.ledger is not None
    assert len(metered.ledger.history("alice")) == 1
    rows = answered.result.rows
    assert 1 <= len(rows) <= 5 and len({r[0] for r in rows}) == len(rows)
    counts = [r[1] for r in rows]
    assert counts == sorted(counts, reverse=True)
    again = metered.run(SUPERSET)  # a repeat reuses the stored answer: no second charge
    assert again.reused and again.result.rows == rows
    assert len(metered.ledger.history("alice")) == 1


def test_series_limit_keeps_only_released_keys(metered: Database) -> None:
    result = metered.query(IN_FORM)
    # category's public domain has 8 keys; the inner released 3, and only those are answered
    assert len(result.rows) == 3 and len({r[0] for r in result.rows}) == 3


def test_series_limit_not_covered_charges_nothing(metered: Database) -> None:
    # bob has epsilon 0.6: one release of 0.5 would fit, both (1.0) do not
    with pytest.raises(BudgetExhausted):
        metered.run(SUPERSET, analyst="bob")
    status = metered.budget("bob")
    assert status is not None and status.spent.epsilon == 0
    assert metered.ledger is not None and metered.ledger.history("bob") == []
    metered.run(SUPERSET, epsilon=0.5, analyst="bob")
    assert metered.budget("bob").spent.epsilon == pytest.approx(0.5)


def test_series_limit_refusals_charge_nothing(metered: Database) -> None:
    for sql in [SUPERSET.replace(" JOIN ", " LEFT JOIN "),
                SUPERSET.replace("series_limit.category_", "series_limit.mme_inner__")]:
        with pytest.raises(UnsupportedQuery):
            metered.run(sql)
    assert metered.ledger is not None and metered.ledger.history("alice") == []


# -- the wire server ---------------------------------------------------------------------------


def connect(served: SimpleNamespace) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=served.port, user="alice", password=PASSWORD,
                           dbname="dpsql", autocommit=True)


def test_server_public_read_and_series_limit(served: SimpleNamespace) -> None:
    with connect(served) as conn:
        rows = conn.execute("SELECT * FROM public.states ORDER BY state").fetchall()
        assert rows == raw("SELECT * FROM states ORDER BY state")
        cur = conn.execute("SELECT base_fee, covered FROM categories ORDER BY base_fee",
                           prepare=True)
        assert [d.type_code for d in cur.description] == [701, 16]  # float8, bool
        comment = conn.execute("SELECT obj_description('states'::regclass)").fetchone()
        assert comment is not None and "public" in comment[0]
        spent = served.db.budget("alice").spent.epsilon
        rows = conn.execute(SUPERSET).fetchall()
        assert 1 <= len(rows) <= 5
        assert served.db.budget("alice").spent.epsilon == pytest.approx(spent + 1.0)
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + SUPERSET).fetchall())
        assert "release 1" in plan and "release 2" in plan and "epsilon=1" in plan


def test_psql_select_star_from_states(served: SimpleNamespace) -> None:
    psql = shutil.which("psql")
    assert psql, "psql is not installed; .ci/run installs it"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PGPASSWORD": "pw"}
    out = subprocess.run([psql, "-X", "-h", "127.0.0.1", "-p", str(served.port), "-U", "alice",
                          "-d", "dpsql", "-A", "-t", "-c", "SELECT * FROM states ORDER BY state",
                          "-c", r"\dt+ states"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["AK|West", "AL|South"] and len([x for x in lines if "|" in x]) >= 51
    assert "public: read exactly" in out.stdout


def test_an_aggregate_of_public_tables_is_not_a_release(metered: Database) -> None:
    """Only a private aggregate subquery is a release; one over public tables is public data,
    left to the private pipeline's own rules (today: refused; never charged as a release)."""
    sql = ("SELECT COUNT(*) FROM visits WHERE category IN (SELECT category FROM categories "
           "GROUP BY category)")
    try:
        prepared = metered.plan(sql)
    except dpsql.errors.QueryRefused:
        return
    assert not isinstance(prepared, dpsql.routes.series.TwoReleases)
