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
from dpsql.engines.pgcluster import Cluster
from dpsql.errors import EngineError
from dpsql.server.testing import served_sandbox

pytestmark = pytest.mark.usefixtures("seeded_randomness")


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
    result = CliRunner().invoke(main, ["explain", "--database", sample_url, "--metadata",
                                       str(metadata), "SELECT AVG(amount) FROM visits"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "hash_record_extended" in result.output.lower()


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
    from dpsql.engines.postgres import _redacted

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
