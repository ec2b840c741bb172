"""The engine: DuckDB read-only with external access disabled (the second wall), and folders of
CSV/Parquet files loaded as views."""

from __future__ import annotations

import contextlib
import datetime as dt
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import numpy as np
import pytest
from sqlglot import exp

import dpsql
import dpsql.routes.pipeline
from dpsql.engines import DuckDBEngine, locked
from dpsql.engines.duckdb_engine import dry, folders
from dpsql.errors import EngineError
from dpsql.query.local_evaluator import run_over


@pytest.fixture
def files(tmp_path: Path) -> SimpleNamespace:
    db = tmp_path / "data.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT range AS a, range * 0.5 AS b FROM range(10)")
    outside = tmp_path / "outside.csv"
    outside.write_text("secret\n42\n")
    return SimpleNamespace(db=db, outside=outside, tmp=tmp_path)


@pytest.fixture
def engine(files: SimpleNamespace) -> Iterator[DuckDBEngine]:
    e = DuckDBEngine(files.db)
    yield e
    e.close()


def test_reads(engine: DuckDBEngine) -> None:
    names, rows = engine.execute("SELECT COUNT(*) AS n, SUM(a) FROM t")
    assert names[0] == "n" and rows == [(10, 45)]
    assert engine.execute("SELECT a FROM t WHERE a = $1", [3])[1] == [(3,)]
    tables = engine.tables()
    assert list(tables) == ["t"] and [c for c, _ in tables["t"]] == ["a", "b"]
    assert tables["t"][0][1] == "BIGINT"


@pytest.mark.parametrize("sql", [
    "CREATE TABLE y (a INT)",
    "CREATE VIEW v AS SELECT 1",
    "INSERT INTO t VALUES (1, 1)",
    "UPDATE t SET a = 3",
    "DELETE FROM t",
    "DROP TABLE t",
    "ALTER TABLE t ADD COLUMN c INT",
    "SET threads = 1",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "RESET lock_configuration",
    "PRAGMA enable_profiling",
    "INSTALL httpfs",
    "LOAD httpfs",
])
def test_writes_and_settings_fail_at_the_engine(sql: str, engine: DuckDBEngine) -> None:
    with pytest.raises(EngineError):
        engine.execute(sql)
    assert engine.execute("SELECT COUNT(*) FROM t")[1] == [(10,)]


@pytest.mark.parametrize("template", [
    "ATTACH '{tmp}/other.duckdb' AS other",
    "COPY t TO '{tmp}/out.csv'",
    "COPY (SELECT 1) TO '{tmp}/out.parquet' (FORMAT parquet)",
    "SELECT * FROM read_csv('{outside}')",
    "SELECT * FROM read_csv_auto('{outside}')",
    "SELECT * FROM '{outside}'",
    "SELECT * FROM read_text('{outside}')",
    "SELECT * FROM glob('{tmp}/*')",
    "EXPORT DATABASE '{tmp}/export'",
])
def test_file_access_fails_at_the_engine(template: str, engine: DuckDBEngine,
                                         files: SimpleNamespace) -> None:
    with pytest.raises(EngineError, match="engine failed"):
        engine.execute(template.format(tmp=files.tmp, outside=files.outside))
    assert not (files.tmp / "out.csv").exists() and not (files.tmp / "other.duckdb").exists()
    assert not (files.tmp / "export").exists()


def test_external_access_is_off(engine: DuckDBEngine) -> None:
    assert engine.execute("SELECT current_setting('enable_external_access')")[1] == [(False,)]
    assert engine.execute("SELECT current_setting('lock_configuration')")[1] == [(True,)]


def test_the_file_is_not_modified(files: SimpleNamespace) -> None:
    before = files.db.read_bytes()
    e = DuckDBEngine(files.db)
    for sql in ("INSERT INTO t VALUES (1, 1)", "DROP TABLE t", "CHECKPOINT"):
        with contextlib.suppress(EngineError):
            e.execute(sql)
    e.close()
    assert files.db.read_bytes() == before


def _folder(tmp: Path, kind: str) -> Path:
    folder = tmp / kind
    folder.mkdir()
    people = "SELECT range AS pid, 20 + range AS age, IF(range % 2 = 0, 'F', 'M') AS sex " \
             "FROM range(6)"
    visits = "SELECT range % 3 AS pid, range * 1.5 AS amount FROM range(9)"
    with duckdb.connect() as con:
        for name, sql in (("people", people), ("visits", visits)):
            if kind == "csv":
                con.execute(f"COPY ({sql}) TO '{folder}/{name}.csv' (HEADER)")
            elif kind == "parquet":
                con.execute(f"COPY ({sql}) TO '{folder}/{name}.parquet' (FORMAT parquet)")
            else:  # mixed
                fmt = "(HEADER)" if name == "people" else "(FORMAT parquet)"
                ext = "csv" if name == "people" else "parquet"
                con.execute(f"COPY ({sql}) TO '{folder}/{name}.{ext}' {fmt}")
    (folder / "notes.txt").write_text("not a table")
    return folder


@pytest.mark.parametrize("kind", ["csv", "parquet", "mixed"])
def test_folder_loads_as_views(kind: str, tmp_path: Path, kit: SimpleNamespace) -> None:
    folder = _folder(tmp_path, kind)
    e = DuckDBEngine(folder)
    try:
        tables = e.tables()
        assert set(tables) == {"people", "visits"}  # notes.txt is not a table
        assert [c for c, _ in tables["people"]] == ["pid", "age", "sex"]
        assert e.execute("SELECT COUNT(*), SUM(age) FROM people")[1] == [(6, 135)]
        assert e.execute("SELECT COUNT(*) FROM visits")[1] == [(9,)]
        with pytest.raises(EngineError):
            e.execute(f"SELECT * FROM read_csv('{tmp_path}/elsewhere.csv')")
        with pytest.raises(EngineError):
            e.execute("CREATE VIEW x AS SELECT 1")
    finally:
        e.close()
    md = kit.metadata_from({"people": {"columns": {
        "pid": "int", "age": {"type": "int", "lower": 0, "upper": 100},
        "sex": {"type": "text", "values": ["F", "M"]}}}})
    with dpsql.Database(folder, md) as db:
        result = db.query("SELECT sex, COUNT(*), SUM(age) FROM people GROUP BY sex", epsilon=50)
        assert [r[0] for r in result.rows] == ["F", "M"]


def test_folder_catalog_is_shared_renewed_and_cleaned_up(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Engines on the same files share one catalog (dpsql.engines.duckdb_engine.folders), each
    on a connection of its own; a rewritten file makes a new catalog; idle catalogs beyond
    IDLE_KEPT are closed and their files deleted."""
    monkeypatch.setattr(folders, "IDLE_KEPT", 1)
    folder = _folder(tmp_path, "csv")
    one, two = DuckDBEngine(folder), DuckDBEngine(folder)
    catalog = one._folder
    assert catalog is not None and catalog is two._folder and catalog.users == 2
    assert Path(catalog.folder).exists()
    one.close()
    assert two.execute("SELECT COUNT(*) FROM people")[1] == [(6,)]  # still open for two
    with pytest.raises(EngineError):
        two.execute("SET enable_external_access = true")  # the lock holds for every engine
    (folder / "visits.csv").write_text("pid,amount\n1,2.5\n")
    three = DuckDBEngine(folder)
    assert three._folder is not catalog and three.schema["visits"]["amount"] == "DOUBLE"
    assert three.execute("SELECT COUNT(*) FROM visits")[1] == [(1,)]
    newer = three._folder
    assert newer is not None
    two.close()
    three.close()  # two idle catalogs, one kept: the older one is closed and deleted
    assert not Path(catalog.folder).exists() and Path(newer.folder).exists()
    again = DuckDBEngine(folder)  # the kept one serves the same files again
    assert again._folder is newer
    again.close()


def test_a_failed_open_leaves_its_catalog_unused(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine whose schema cannot be read gives its catalog back (else it stayed in use,
    never closed); a file replaced by one of the same size and times makes a new catalog."""
    folder = _folder(tmp_path, "parquet")

    def broken(self: DuckDBEngine) -> dict[str, list[tuple[str, str]]]:
        raise duckdb.IOException("cannot read")
    with monkeypatch.context() as patch:
        patch.setattr(DuckDBEngine, "tables", broken)
        with pytest.raises(EngineError, match="cannot open database"):
            DuckDBEngine(folder)
    engine = DuckDBEngine(folder)
    catalog = engine._folder
    assert catalog is not None and catalog.users == 1
    before = (folder / "visits.parquet").stat()
    (folder / "visits.parquet").rename(tmp_path / "visits.parquet")
    shutil.copy2(tmp_path / "visits.parquet", folder / "visits.parquet")  # as cp -p does
    after = (folder / "visits.parquet").stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    other = DuckDBEngine(folder)
    assert other._folder is not catalog
    engine.close()
    other.close()


def test_missing_path(tmp_path: Path, kit: SimpleNamespace) -> None:
    with pytest.raises(EngineError, match=r"nowhere\.duckdb does not exist"):
        DuckDBEngine(tmp_path / "nowhere.duckdb")
    md = kit.metadata_from({"t": {"columns": {"a": "int"}}})
    with pytest.raises(EngineError, match="does not exist"):
        dpsql.Database(tmp_path / "nowhere", md)


def test_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(EngineError, match=r"holds no \.csv or \.parquet files"):
        DuckDBEngine(tmp_path / "empty")


def test_not_a_database(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.duckdb"
    bogus.write_text("this is not a database")
    with pytest.raises(EngineError, match="cannot open database"):
        DuckDBEngine(bogus)


def test_scratch_connection_holds_no_data_and_no_files(files: SimpleNamespace) -> None:
    names, _, rows = run_over("SELECT SUM(x) AS s FROM __cells", "__cells",
                                      {"x": np.array([1.5, 2.5])})
    assert names == ["s"] and rows == [(4.0,)]
    with pytest.raises(EngineError):
        run_over(f"SELECT * FROM read_csv('{files.outside}')", "__cells",
                     {"x": np.array([1])})
    with pytest.raises(EngineError):
        run_over("SET enable_external_access = true", "__cells", {"x": np.array([1])})
    with pytest.raises(EngineError):  # the cells table is gone after each query
        run_over("SELECT * FROM __old", "__new", {"x": np.array([1])})


INSERTED = [  # each column's values as given, then as a one-row INSERT stores each
    ("BIGINT", [2**63 - 1, -2**63, None, 3]),  # the list path: all of one type, in range
    ("BIGINT", [2**53 + 1, 0.5, None]),  # int beside float: a list would be DOUBLE first
    ("HUGEINT", [2**64 + 1, 1]),  # beyond BIGINT: a list of these would be DOUBLE
    ("DOUBLE", [0.1, float("nan"), float("-inf"), None]),
    ("VARCHAR", ["it's", None, ""]),
    ("DATE", [dt.date(2024, 2, 29), None, dt.date(1, 1, 1)]),
    ("TIMESTAMP", [dt.datetime(2024, 1, 1, 0, 0, 0, 1), None, dt.datetime(1970, 1, 1)]),
    ("BOOLEAN", [True, None, False]),
    ("VARCHAR[]", [["a", "b"], [], None]),
]


@pytest.mark.parametrize(("ty", "values"), INSERTED)
def test_inserted_rows_are_stored_as_one_row_inserts_store_them(ty: str, values: list) -> None:
    """locked.insert_rows and insert_values, whichever path each column takes (one list
    parameter, or a VALUES list): each value stored as a one-row INSERT of it would store it,
    never first unified with its column's other values (a BIGINT beside a DOUBLE rounds)."""
    con = duckdb.connect()
    for name in ("one", "rows", "values"):
        con.execute(f"CREATE TABLE {name} (i INTEGER, v {ty})")
    for i, value in enumerate(values):
        con.execute("INSERT INTO one VALUES (?, ?)", [i, value])
    rows = [(i, value) for i, value in enumerate(values)]
    locked.insert_rows(con, "rows", ["INTEGER", ty], rows)
    locked.insert_values(con, "values", rows)
    stored = {name: repr(con.execute(f'SELECT * FROM "{name}" ORDER BY i').fetchall())
              for name in ("one", "rows", "values")}  # repr: NaN equals NaN
    assert stored["rows"] == stored["one"] and stored["values"] == stored["one"], stored


PEOPLE_CREATE = 'CREATE TABLE "people" ("pid" INTEGER, "age" DOUBLE)'
VISITS_CREATE = 'CREATE TABLE "visits" ("vid" INTEGER)'


def test_dry_runs_create_each_set_of_tables_once_apart_from_the_others(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The dry runs' database: a set of empty tables is created on its first dry run and only
    used again after (the query's own text, ``main.`` names included), each set in a database
    of its own; a set whose tables fail to create is not kept; past MAX_SETS sets a new
    database starts empty, and a cursor on the old one is replaced."""
    monkeypatch.setattr(dry, "_current", None)
    columns, rows = dry.run_dry("SELECT COUNT(*) AS n, MAX(age) FROM main.people WHERE pid = $1",
                                [1], (PEOPLE_CREATE,))
    assert columns == [("n", "BIGINT"), ("max(age)", "DOUBLE")] and rows == [(0, None)]
    first = dry._current
    assert first is not None and len(first.sets) == 1
    dry.run_dry("SELECT pid FROM people", (), (PEOPLE_CREATE,))
    assert dry._current is first and len(first.sets) == 1
    with pytest.raises(duckdb.CatalogException):  # another set's tables are not in reach
        dry.run_dry("SELECT pid FROM people", (), (VISITS_CREATE,))
    assert len(first.sets) == 2
    with pytest.raises(duckdb.Error):
        dry.run_dry("SELECT 1", (), (VISITS_CREATE, 'CREATE TABLE "x" ("a" NO_SUCH_TYPE)'))
    assert len(first.sets) == 2  # not kept
    assert dry.run_dry("SELECT 1 AS one", (), (VISITS_CREATE, 'CREATE TABLE "x" ("a" INT)')
                       )[1] == [(1,)]
    monkeypatch.setattr(dry, "MAX_SETS", 3)
    assert dry.run_dry("SELECT vid FROM visits", (), (VISITS_CREATE,))[1] == []
    assert dry._current is not first and len(dry._current.sets) == 1


def test_a_sets_database_is_named_by_the_set_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the name a dry run can see (current_database()) nor anything else tells which
    sets were made before it in the process."""
    def seen(creates: tuple[str, ...]) -> object:
        return dry.run_dry("SELECT current_database()", (), creates)[1]

    monkeypatch.setattr(dry, "_current", None)
    alone = seen((PEOPLE_CREATE,))
    monkeypatch.setattr(dry, "_current", None)
    seen((VISITS_CREATE,))
    assert seen((PEOPLE_CREATE,)) == alone != seen((VISITS_CREATE,))


def test_the_dry_runs_database_is_locked_and_threads_keep_their_own_set(
        files: SimpleNamespace) -> None:
    """No file, no setting from a dry run; threads dry-running different sets at once each
    read their own (each thread's cursor switches databases for itself)."""
    with pytest.raises(duckdb.Error):
        dry.run_dry(f"SELECT * FROM read_csv('{files.outside}')", (), (PEOPLE_CREATE,))
    with pytest.raises(duckdb.Error):
        dry.run_dry("SET enable_external_access = true", (), (PEOPLE_CREATE,))
    seen: dict[str, set[str]] = {"people": set(), "visits": set()}

    def run(table: str, create: str) -> None:
        for _ in range(50):
            columns, _ = dry.run_dry(f"SELECT * FROM {table}", (), (create,))
            seen[table].add(columns[0][0])

    threads = [threading.Thread(target=run, args=args)
               for args in (("people", PEOPLE_CREATE), ("visits", VISITS_CREATE))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"people": {"pid"}, "visits": {"vid"}}


def test_duckdbs_dry_run_is_the_text_it_runs(monkeypatch: pytest.MonkeyPatch,
                                             make_db: Callable[..., Any]) -> None:
    """On DuckDB the pipeline checks the very text the engine then runs (generated once,
    histograms gathered as the engine gathers them), before the engine reads anything."""
    crafted = make_db("CREATE TABLE t AS SELECT range AS pid, range % 90 AS age, "
                      "CASE WHEN range % 2 = 0 THEN 'F' ELSE 'M' END AS sex FROM range(50)",
                      {"t": {"privacy_unit": "pid", "max_rows_per_unit": 1,
                             "columns": {"pid": {"type": "int"},
                                         "age": {"type": "int", "lower": 0, "upper": 100},
                                         "sex": {"type": "text", "values": ["F", "M"]}}}})
    steps: list[tuple[str, str]] = []
    real = dpsql.routes.pipeline.run_dry
    monkeypatch.setattr(dpsql.routes.pipeline, "run_dry", lambda sql, *rest: (
        steps.append(("dry", sql)), real(sql, *rest))[1])
    execute = crafted.db.engine.execute
    monkeypatch.setattr(crafted.db.engine, "execute", lambda sql, *rest: (
        steps.append(("engine", sql)), execute(sql, *rest))[1])
    crafted.db.query("SELECT sex, COUNT(*), MEDIAN(age) FROM t GROUP BY sex")
    assert [kind for kind, _ in steps] == ["dry", "engine"]
    assert steps[0][1] == steps[1][1] and "__h0" in steps[1][1]  # the gathered histogram


def test_empty_tables_are_typed_selects_copied_when_read(tmp_path: Path) -> None:
    """The empty tables an engine's dry run reads: each table's typed SELECT of no row, a
    fresh copy at each read (``with_empty`` places it in its own tree), built only if read."""
    from dpsql.engines.empty import with_empty
    from dpsql.query.dry_runs import empty_tables
    from tests.support.sandbox import sandbox

    setup = sandbox(tmp_path, {}, metered=False)
    with dpsql.Database(setup.database, setup.metadata) as db:
        people = db.metadata.tables["people"]
        empties = empty_tables(None, people, {"age": "BIGINT"})
        assert len(empties) == 1 and empties[0][0] == "people"
        ((_, first),) = list(empties)
        second = empties[-1][1]
        assert first is not second and first == second and first.parent is None
        select = first.sql(dialect="duckdb")
        assert 'CAST(NULL AS BIGINT) AS "age"' in select and select.endswith("WHERE FALSE")
        dry = with_empty(exp.select("COUNT(*)").from_("people"), empties)
        assert duckdb.sql(dry.sql(dialect="duckdb")).fetchall() == [(0,)]
        assert empties[0:1] == [("people", first)] and empties[1:] == []
