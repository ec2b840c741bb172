"""The metadata checked against the engine when a database is opened: a declared table or column
that the database lacks, or a declared type its physical type does not match, is a
MetadataError from ``Database(...)`` -- through the library, the DB-API and the CLI -- never an
engine error after a charge."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

import dpsql
from dpsql.cli import main
from dpsql.engines import compatible, declared_type
from dpsql.errors import MetadataError
from tests.support.helpers import assert_names

UNIT = {"pid": {"type": "int"}}


def database(tmp_path: Path, create: str, insert: str = "") -> Path:
    path = tmp_path / "d.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(create)
        if insert:
            con.execute(insert)
    return path


def table(columns: dict[str, Any], **settings: Any) -> dict[str, Any]:
    return {"privacy_unit": "pid", "one_row_per_unit": True, **settings,
            "columns": {**UNIT, **columns}}


def open_error(kit: SimpleNamespace, tmp_path: Path, path: Path,
               tables: dict[str, Any]) -> str:
    meta = kit.write_metadata(tmp_path / "owner.toml", tables)
    with pytest.raises(MetadataError) as info:
        dpsql.Database(path, meta)
    return str(info.value)


# ------------------------------------------------------------------ the rule


@pytest.mark.parametrize(("declared", "stored"), [
    ("int", "TINYINT"), ("int", "INTEGER"), ("int", "BIGINT"), ("int", "HUGEINT"),
    ("int", "UBIGINT"), ("int", "DECIMAL(10,0)"), ("int", "VARCHAR"),
    ("float", "DOUBLE"), ("float", "FLOAT"), ("float", "DECIMAL(18,3)"), ("float", "INTEGER"),
    ("float", "VARCHAR"), ("text", "VARCHAR"), ("bool", "BOOLEAN"), ("bool", "VARCHAR"),
    ("date", "DATE"), ("date", "TIMESTAMP"), ("date", "TIMESTAMP_NS"), ("date", "VARCHAR"),
])
def test_compatible(declared: str, stored: str) -> None:
    assert compatible(declared, stored)


@pytest.mark.parametrize(("declared", "stored"), [
    ("int", "DOUBLE"), ("int", "DECIMAL(10,2)"), ("int", "BOOLEAN"), ("int", "DATE"),
    ("float", "BOOLEAN"), ("text", "INTEGER"), ("text", "DATE"), ("text", "UUID"),
    ("text", "ENUM('a', 'b')"), ("bool", "INTEGER"), ("date", "TIMESTAMP WITH TIME ZONE"),
    ("date", "INTEGER"), ("int", "INTEGER[]"), ("text", "BLOB"), ("float", "INTERVAL"),
])
def test_incompatible(declared: str, stored: str) -> None:
    assert not compatible(declared, stored)


def test_declared_type_of_unsupported_types_is_none() -> None:
    for stored in ("UUID", "BLOB", "TIME", "INTERVAL", "INTEGER[]", "STRUCT(x INTEGER)",
                   "TIMESTAMP WITH TIME ZONE"):
        assert declared_type(stored) is None


# ------------------------------------------------------------------ refused at open


def test_missing_table(kit: SimpleNamespace, tmp_path: Path) -> None:
    path = database(tmp_path, "CREATE TABLE people (pid BIGINT, age INTEGER)")
    message = open_error(kit, tmp_path, path, {"people": table({}), "visits": table({})})
    assert_names(message, "owner.toml", "'visits'", "no such table", "people", "remove")


def test_missing_column(kit: SimpleNamespace, tmp_path: Path) -> None:
    path = database(tmp_path, "CREATE TABLE people (pid BIGINT, age INTEGER)")
    message = open_error(kit, tmp_path, path, {"people": table({"income": {"type": "float"}})})
    assert_names(message, "owner.toml", "'people'", "'income'", "no such column", "age, pid")


@pytest.mark.parametrize(("declared", "stored", "remedy"), [
    ({"type": "int", "lower": 0, "upper": 10}, "DOUBLE", 'declare it as type "float"'),
    ({"type": "int"}, "DECIMAL(10,2)", 'declare it as type "float"'),
    ({"type": "text"}, "INTEGER", 'declare it as type "int"'),
    ({"type": "bool"}, "INTEGER", "store it as BOOLEAN or VARCHAR"),
    ({"type": "date"}, "TIMESTAMPTZ", "must be stored as DATE"),
    ({"type": "text"}, "UUID", "must be stored as VARCHAR"),
])
def test_mismatching_type(kit: SimpleNamespace, tmp_path: Path, declared: dict[str, Any],
                          stored: str, remedy: str) -> None:
    path = database(tmp_path, f"CREATE TABLE t (pid BIGINT, x {stored})")
    message = open_error(kit, tmp_path, path, {"t": table({"x": declared})})
    stored_name = "TIMESTAMP WITH TIME ZONE" if stored == "TIMESTAMPTZ" else stored
    assert_names(message, "owner.toml", "'t'", "'x'", f"declared {declared['type']}",
                 f"stores it as {stored_name}", remedy)


def test_names_ignore_case(kit: SimpleNamespace, tmp_path: Path) -> None:
    path = database(tmp_path, 'CREATE TABLE "People" (PID BIGINT, "Age" INTEGER)',
                    "INSERT INTO \"People\" VALUES (1, 30)")
    meta = kit.write_metadata(tmp_path / "m.toml", {"people": table(
        {"age": {"type": "int", "lower": 0, "upper": 100}})})
    with dpsql.Database(path, meta) as db:
        assert db.query("SELECT COUNT(*) FROM people WHERE age > 3").rows


def test_folder_database(kit: SimpleNamespace, tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "people.csv").write_text("pid,score\n1,1.5\n2,2.5\n")
    meta = kit.write_metadata(tmp_path / "m.toml", {"people": table({"score": {"type": "int"}})})
    with pytest.raises(MetadataError, match=r"'score' is declared int .* DOUBLE"):
        dpsql.Database(folder, meta)


# ------------------------------------------------------------------ accepted types answer


ACCEPTED = [  # physical type, a value, declaration, queries that must answer
    ("TINYINT", "7", {"type": "int", "lower": 0, "upper": 100},
     ["SELECT SUM(x), AVG(x) FROM t", "SELECT COUNT(*) FROM t WHERE x > 3"]),
    ("UBIGINT", "7", {"type": "int", "lower": 0, "upper": 100, "public_range": True},
     ["SELECT x, COUNT(*) FROM t GROUP BY x", "SELECT SUM(x * 2) FROM t WHERE x = 7"]),
    ("DECIMAL(10,0)", "7", {"type": "int", "lower": 0, "upper": 100},
     ["SELECT SUM(x) FROM t WHERE x >= 7", "SELECT MEDIAN(x) FROM t"]),
    ("DECIMAL(10,2)", "7.25", {"type": "float", "lower": 0, "upper": 100},
     ["SELECT SUM(x), STDDEV(x) FROM t WHERE x > 1.5"]),
    ("INTEGER", "7", {"type": "float", "lower": 0, "upper": 100},
     ["SELECT AVG(x / 2) FROM t WHERE x < 9.5"]),
    ("TIMESTAMP", "TIMESTAMP '2001-02-03 04:05:06'",
     {"type": "date", "values": [dt.date(2001, 2, 3), dt.date(2001, 2, 4)]},
     ["SELECT COUNT(*) FROM t WHERE x > DATE '2000-01-01'",
      "SELECT COUNT(*) FROM t WHERE YEAR(x) = 2001", "SELECT x, COUNT(*) FROM t GROUP BY x"]),
    ("TIMESTAMP_NS", "TIMESTAMP '2001-02-03 04:05:06'", {"type": "date"},
     ["SELECT COUNT(*) FROM t WHERE x = DATE '2001-02-03'"]),
    ("VARCHAR", "'maybe'", {"type": "bool"}, ["SELECT COUNT(*) FROM t WHERE x"]),
]


@pytest.mark.parametrize(("stored", "value", "declared", "queries"), ACCEPTED)
def test_accepted_types_answer(kit: SimpleNamespace, tmp_path: Path, stored: str, value: str,
                               declared: dict[str, Any], queries: list[str]) -> None:
    path = database(tmp_path, f"CREATE TABLE t (pid BIGINT, x {stored})",
                    f"INSERT INTO t VALUES (1, {value}), (2, NULL)")
    declared = {**declared, "nullable": True}
    meta = kit.write_metadata(tmp_path / "m.toml", {"t": table({"x": declared})})
    with dpsql.Database(path, meta) as db:
        for sql in queries:
            assert db.query(sql, epsilon=1.0).rows, sql


def test_timestamp_declared_date_is_read_as_its_date(kit: SimpleNamespace,
                                                     tmp_path: Path) -> None:
    rows = ", ".join(f"({i}, TIMESTAMP '2001-02-03 23:59:59')" for i in range(400))
    path = database(tmp_path, "CREATE TABLE t (pid BIGINT, x TIMESTAMP)",
                    f"INSERT INTO t VALUES {rows}")
    meta = kit.write_metadata(tmp_path / "m.toml", {"t": table({"x": {"type": "date"}})})
    with dpsql.Database(path, meta) as db:
        n = db.query("SELECT COUNT(*) FROM t WHERE x = DATE '2001-02-03'", epsilon=5.0).rows[0][0]
    assert 350 < n < 450  # Laplace scale 0.2: a failure has probability below 1e-100


def test_text_stored_in_a_typed_column_is_a_warning(kit: SimpleNamespace, tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    path = database(tmp_path, "CREATE TABLE t (pid BIGINT, x VARCHAR)")
    meta = kit.write_metadata(tmp_path / "m.toml", {"t": table({"x": {"type": "int"}})})
    with dpsql.Database(path, meta):
        pass
    assert any("'x' is declared int but stored as VARCHAR" in r.getMessage()
               for r in caplog.records)


# ------------------------------------------------------------------ every front door


@pytest.fixture
def mismatched(kit: SimpleNamespace, tmp_path: Path) -> SimpleNamespace:
    path = database(tmp_path, "CREATE TABLE t (pid BIGINT, x DOUBLE)",
                    "INSERT INTO t VALUES (1, 1.5)")
    meta = kit.write_metadata(tmp_path / "m.toml", {"t": table({"x": {"type": "int"}})})
    return SimpleNamespace(path=path, meta=meta)


def test_dbapi_connect_refuses(mismatched: SimpleNamespace) -> None:
    with pytest.raises(dpsql.OperationalError) as info:
        dpsql.connect(mismatched.path, mismatched.meta)
    assert isinstance(info.value, MetadataError) and "'x' is declared int" in str(info.value)


def test_cli_refuses_in_one_line(mismatched: SimpleNamespace) -> None:
    commands: list[Callable[[], list[str]]] = [
        lambda: ["query", "SELECT COUNT(*) FROM t"], lambda: ["explain", "SELECT COUNT(*) FROM t"]]
    for command in commands:
        result = CliRunner().invoke(main, [*command(), "-d", str(mismatched.path), "-m",
                                           str(mismatched.meta)], catch_exceptions=False)
        assert result.exit_code == 2
        assert result.stdout == "" and "Traceback" not in result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("dpsql: MetadataError: ")
        assert "'x' is declared int but the database stores it as DOUBLE" in lines[0]


def test_metadata_init_skeleton_opens(tmp_path: Path) -> None:
    """``dpsql metadata init`` declares what the check accepts, and leaves out what it would
    refuse, so its skeleton opens as it stands."""
    path = database(tmp_path, "CREATE TABLE t (pid BIGINT, d DECIMAL(9,0), ts TIMESTAMP_NS, "
                    "u UUID, tz TIMESTAMPTZ, l INTEGER[], s VARCHAR)")
    out = tmp_path / "skeleton.toml"
    result = CliRunner().invoke(main, ["metadata", "init", "-d", str(path), "-o", str(out)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    text = out.read_text()
    assert "# u: UUID has no dpsql type" in text
    assert '[tables.t.columns.ts]\ntype = "timestamp"' in text  # an instant, not a date
    assert '[tables.t.columns.tz]\ntype = "timestamp"' in text  # read in UTC
    with dpsql.Database(path, out) as db:
        assert set(db.metadata.table("t").columns) == {"pid", "d", "ts", "tz", "s"}  # type: ignore[union-attr]
