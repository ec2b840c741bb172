"""``dpsql metadata init`` writes a first database that is metered and typed: a ``[budget]``
and the user's ``[analysts.NAME]`` (the first query is charged), and ``nullable = false`` and
``unique = true`` from the schema's PRIMARY KEY, UNIQUE and NOT NULL (dpsql.engines.constraints);
where constraints cannot be read, it says so and keeps ``nullable = true``."""

from __future__ import annotations

import tomllib
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from dpsql.cli import main
from dpsql.database import Database, sample_paths
from dpsql.engines import open_engine
from dpsql.engines.constraints import read_constraints
from dpsql.owner.metadata_init import FIRST_EPSILON
from tests.support.pgcluster import Cluster


@pytest.fixture
def keyed(tmp_path: Path) -> Path:
    path = tmp_path / "keyed.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE people (id BIGINT PRIMARY KEY, email VARCHAR UNIQUE, "
                    "name VARCHAR NOT NULL, age BIGINT)")
        con.execute("CREATE TABLE pairs (a BIGINT, b BIGINT, PRIMARY KEY (a, b))")
        con.execute("INSERT INTO people VALUES (1, 'x', 'n', 30), (2, NULL, 'm', NULL)")
    return path


def init(*args: str) -> tuple[str, str]:
    result = CliRunner().invoke(main, ["metadata", "init", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout, result.stderr


def test_keys_and_not_null_come_from_the_schema(keyed: Path) -> None:
    columns = tomllib.loads(init("-d", str(keyed))[0])["tables"]["people"]["columns"]
    assert columns["id"] == {"type": "int", "nullable": False, "unique": True}  # the key
    assert columns["email"] == {"type": "text", "nullable": True, "unique": True}
    assert columns["name"] == {"type": "text", "nullable": False}
    assert columns["age"] == {"type": "int", "nullable": True}
    pairs = tomllib.loads(init("-d", str(keyed))[0])["tables"]["pairs"]["columns"]
    # a key of two columns: each NOT NULL, neither unique on its own
    assert pairs["a"] == {"type": "int", "nullable": False} == pairs["b"]


def test_another_schemas_table_of_the_same_name_lends_it_nothing(tmp_path: Path) -> None:
    """Leak (metadata init): DuckDB's duckdb_constraints() and information_schema.columns list
    every schema; a ``s.people`` whose id is a PRIMARY KEY made ``people.id`` (main, the table
    queries read) ``unique = true`` and ``nullable = false`` -- a false unit_path promise --
    and doubled its columns (a skeleton TOML cannot load). Only the current schema counts."""
    path = tmp_path / "schemas.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA s")
        con.execute("CREATE TABLE s.people (id BIGINT PRIMARY KEY, other VARCHAR NOT NULL)")
        con.execute("CREATE TABLE people (id BIGINT, age BIGINT)")
        con.execute("INSERT INTO people VALUES (1, 30), (1, 31), (NULL, 40)")
    columns = tomllib.loads(init("-d", str(path))[0])["tables"]["people"]["columns"]
    assert columns == {"id": {"type": "int", "nullable": True},
                       "age": {"type": "int", "nullable": True}}
    engine = open_engine(path)
    try:
        assert read_constraints(engine).unique == {}
        assert engine.schema == {"people": {"id": "BIGINT", "age": "BIGINT"}}
    finally:
        engine.close()


def test_a_folder_says_it_declares_no_constraints(tmp_path: Path) -> None:
    text = init("-d", str(sample_paths()[0]))[0]
    assert "a folder of CSV/Parquet files declares no key or NOT NULL constraint" in text
    engine = open_engine(sample_paths()[0])
    try:
        assert read_constraints(engine).not_null == {}
    finally:
        engine.close()


def test_the_skeleton_is_metered_for_its_author(keyed: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)
    monkeypatch.delenv("DPSQL_ANALYST", raising=False)
    out = tmp_path / "meta" / "metadata.toml"
    out.parent.mkdir()
    init("-d", str(keyed), "-o", str(out), "--analyst", "olga")
    data = tomllib.loads(out.read_text(encoding="utf-8"))
    assert data["budget"]["owners"] == ["olga"]
    assert data["analysts"] == {"olga": {"epsilon": FIRST_EPSILON, "delta": 1e-6}}
    text = out.read_text(encoding="utf-8")
    text = text.replace('[tables.people]\nmax_rows_per_unit = 1', '[tables.people]\n'
                        'privacy_unit = "id"\nmax_rows_per_unit = 1', 1)
    out.write_text(text, encoding="utf-8")
    with Database(keyed, out, analyst="olga") as db:
        answer = db.run("SELECT COUNT(*) FROM people", epsilon=1.0)
        assert answer.cost is not None and answer.analyst == "olga"  # charged: metered
        assert db.ledger is not None and Path(db.ledger.path) == out.parent / \
            "dpsql-ledger.sqlite"  # next to the metadata file


def first_query_is_metered(database: str | Path, folder: Path, sql: str) -> None:
    """The skeleton, as written, answers its first query charged to its author."""
    out = folder / "metadata.toml"
    init("-d", str(database), "-o", str(out), "--analyst", "olga")
    with Database(database, out, analyst="olga") as db:
        answer = db.run(sql, epsilon=1.0)
        assert answer.cost is not None and answer.analyst == "olga"
        status = db.budget()
        assert status is not None and status.spent.epsilon == 1.0


def test_the_sample_datas_skeleton_is_metered(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)
    first_query_is_metered(sample_paths()[0], tmp_path, "SELECT COUNT(*) FROM visits")


@pytest.mark.pg
def test_keys_and_not_null_from_postgresql(pg_cluster: Cluster, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)
    db = pg_cluster.database("init_keys")
    db.execute("CREATE TABLE people (id BIGINT PRIMARY KEY, email TEXT UNIQUE, "
               "name TEXT NOT NULL, age BIGINT)",
               "INSERT INTO people VALUES (1, 'a', 'n', 30), (2, NULL, 'm', NULL)",
               "GRANT SELECT ON people TO PUBLIC")
    text = init("-d", db.url())[0]
    columns = tomllib.loads(text)["tables"]["people"]["columns"]
    assert columns["id"]["nullable"] is False and columns["id"]["unique"] is True
    assert columns["email"].get("unique") is True and columns["email"]["nullable"] is True
    assert columns["name"]["nullable"] is False and columns["age"]["nullable"] is True
    first_query_is_metered(db.url(), tmp_path, "SELECT COUNT(*) FROM people")
