"""Every front door on PostgreSQL: ``dpsql query --database postgresql://...``,
``dpsql.connect("postgresql://...", metadata)`` and the wire-protocol server in front of a
PostgreSQL engine, on the sample tables copied into a throw-away cluster; and the read-only
wall of the engine's sessions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

import dpsql
from dpsql.cli import main
from dpsql.database import sample_paths
from dpsql.engines import open_engine
from dpsql.errors import EngineError
from dpsql.privacy.plan import Plan
from tests.support.pgcluster import Cluster
from tests.support.sandbox import served_sandbox

pytestmark = [pytest.mark.usefixtures("seeded_randomness"), pytest.mark.pg]


@pytest.fixture(scope="module")
def sample_url(pg_cluster: Cluster) -> str:
    return pg_cluster.database("doors").load_duckdb_file(sample_paths()[0])


@pytest.fixture
def metadata(tmp_path: Path) -> Iterator[Path]:
    yield sample_paths()[1]


def test_the_command_line_queries_postgresql(sample_url: str, metadata: Path) -> None:
    result = CliRunner().invoke(main, ["query", "--database", sample_url, "--metadata",
                                       str(metadata), "--epsilon", "5",
                                       "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "F" in result.output and "M" in result.output


def test_explain_shows_the_postgresql_query(sample_url: str, metadata: Path) -> None:
    result = CliRunner().invoke(main, ["explain", "--sql", "--database", sample_url,
                                       "--metadata", str(metadata),
                                       "SELECT category, COUNT(DISTINCT amount) FROM "
                                       "visits GROUP BY category"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "hash_record_extended" in result.output.lower()  # the row sample's salted hash
    result = CliRunner().invoke(main, ["explain", "--sql", "--database", sample_url,
                                       "--metadata", str(metadata),
                                       "SELECT category, MEDIAN(amount) FROM "
                                       "visits GROUP BY category"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    # A quantile's rows weighted (issue 39.4): PostgreSQL's histogram sums the weights
    assert "array_agg(__w)" in result.output.lower(), result.output


def test_a_url_needs_its_metadata(sample_url: str) -> None:
    result = CliRunner().invoke(main, ["query", "--database", sample_url, "SELECT 1"])
    assert result.exit_code != 0 and "metadata" in result.output


def test_the_dbapi_connects_to_postgresql(sample_url: str, metadata: Path) -> None:
    with dpsql.connect(sample_url, metadata, epsilon=5.0) as con:
        cur = con.cursor()
        cur.execute("SELECT COUNT(*), AVG(age) FROM people")
        (count, age), = cur.fetchall()
    assert abs(count - 20000) < 100 and 18 <= age <= 95


def test_the_server_serves_a_postgresql_engine(sample_url: str, tmp_path: Path) -> None:
    with served_sandbox(tmp_path, "pw", database=sample_url) as running, psycopg.connect(
            host="127.0.0.1", port=running.port, user="alice", password="pw",
            dbname="dpsql", sslmode="disable") as con:
        rows = con.execute("SELECT category, COUNT(*) FROM visits GROUP BY category "
                           "ORDER BY category").fetchall()
    assert len(rows) == 8 and all(n > 0 for _, n in rows)


def test_sessions_are_read_only_and_see_only_granted_tables(pg_cluster: Cluster,
                                                            sample_url: str) -> None:
    """The second wall: the engine's own session refuses writes even for a role that could
    write, and the reader role sees only the tables granted to it."""
    doors = pg_cluster.database("doors_rw")
    doors.execute("CREATE TABLE t (x int)", "CREATE TABLE secret (x int)")
    doors.grant_reader(["t"])
    engine = open_engine(doors.url())  # the owner's role: read-only by the session's settings
    try:
        with pytest.raises(EngineError):
            engine.execute("INSERT INTO t VALUES (1)")
    finally:
        engine.close()
    reader = open_engine(doors.url("dpsql_reader"))
    try:
        assert set(reader.schema) == {"t"}
    finally:
        reader.close()


def test_the_database_argument_chooses_the_engine(tmp_path: Path) -> None:
    from dpsql.engines import is_url
    from dpsql.engines.postgres.engine import _redacted

    assert is_url("postgresql://u@h/db") and is_url("sc://host:15002")
    assert not is_url(tmp_path / "data.duckdb") and not is_url("data/")
    with pytest.raises(EngineError, match="unknown database URL scheme 'mysql'"):
        open_engine("mysql://u@h/db")
    assert _redacted("postgresql://u:secret@h:5432/db") == "postgresql://u@h:5432/db"


def test_a_password_never_reaches_a_message(pg_cluster: Cluster) -> None:
    url = pg_cluster.url("nobody").replace("nobody@", "nobody:hunter2@")
    with pytest.raises(EngineError) as info:
        open_engine(url)
    assert "hunter2" not in str(info.value)


def test_metadata_init_reads_a_postgresql_schema(sample_url: str) -> None:
    result = CliRunner().invoke(main, ["metadata", "init", "--database", sample_url],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "[tables.people" in result.output and "income" in result.output


# --- public tables on PostgreSQL: exact reads, and the public data plans read -------------------


def test_an_exact_public_read_answers_from_postgresql(sample_url: str, metadata: Path) -> None:
    """``SELECT * FROM states`` through Database.query on a postgresql:// database: the
    public store was copied in PostgreSQL's own SQL, exact, free, as on DuckDB."""
    sql = "SELECT * FROM states ORDER BY state"
    pg = dpsql.Database(sample_url, metadata)
    duck = dpsql.Database(sample_paths()[0], metadata)
    try:
        answer = pg.run(sql)
        assert answer.cost is None and len(answer.result.rows) == 51
        assert answer.result.rows == duck.query(sql).rows
        covered = "SELECT category, covered, base_fee FROM categories ORDER BY category"
        assert pg.query(covered).rows == duck.query(covered).rows
    finally:
        pg.close()
        duck.close()


def test_a_public_join_plans_from_postgresql_public_data(sample_url: str,
                                                         metadata: Path) -> None:
    """Multiplicities, key domains and bounds of a public join are read through the engine:
    the same plan on PostgreSQL as on DuckDB, and an answer."""
    sql = ("SELECT s.region, COUNT(*), SUM(c.base_fee) FROM visits v JOIN people p USING "
           "(person_id) JOIN states s ON p.state = s.state JOIN categories c USING (category) "
           "GROUP BY s.region")
    pg = dpsql.Database(sample_url, metadata)
    duck = dpsql.Database(sample_paths()[0], metadata)
    try:
        plans = [db.plan(sql, epsilon=1.0) for db in (pg, duck)]
        facts = []
        for p in plans:
            assert isinstance(p, Plan)
            facts.append((p.table.rows_per_unit, p.domain, [m.l1 for m in p.measurements]))
        assert facts[0] == facts[1] and facts[0][1] is not None  # regions: a public domain
        assert {row[0] for row in pg.query(sql, epsilon=5.0).rows} <= {
            "Midwest", "Northeast", "South", "West"}
    finally:
        pg.close()
        duck.close()
