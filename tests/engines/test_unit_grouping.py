"""How DuckDB groups the rows by unit (dpsql.engines.duckdb_engine.grouping, issue 39.4): the
engine's database takes a perfect hash for up to 2**20 integer units, and a filtered read
spells its unit ``~(~unit)`` so that it keeps the general hash table. Neither may change a
released value: every test compares outputs with the spelling and the setting of before."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import pytest

import dpsql
import dpsql.audit.neighbours as neighbours
from dpsql.audit.neighbours import SALT, check_queries, duckdb_neighbourhood, synthesize
from dpsql.engines.duckdb_engine import grouping
from dpsql.metadata.metadata import parse_metadata
from grammar_tests.corpus import load_corpus
from grammar_tests.databases import corpus_metadata

_OPAQUE = re.compile(r"~\(~")


def test_settings_narrow_the_perfect_hash_on_many_threads() -> None:
    """20 bits (a million units) on a few threads, fewer as every thread allocates its own
    table, never below DuckDB's default of 12."""
    assert grouping.settings(2) == {"perfect_ht_threshold": 20}
    assert grouping.settings(8) == {"perfect_ht_threshold": 20}
    assert grouping.settings(64)["perfect_ht_threshold"] == 17
    assert grouping.settings(2**20)["perfect_ht_threshold"] == 12


INTEGER_TYPES = ["TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                 "USMALLINT", "UINTEGER", "UBIGINT"]


@pytest.mark.parametrize("kind", INTEGER_TYPES)
def test_the_opaque_unit_is_the_same_value_of_the_same_type(kind: str) -> None:
    """``~(~u)`` on every integer type: its extremes, 0, -1, NULL: the same value, the same
    type, the same salted hash (what bounding's ranking and sampling read), the same groups."""
    con = duckdb.connect(":memory:")
    low, high = _extremes(kind)
    con.execute(f"CREATE TABLE t AS SELECT CAST(v AS {kind}) AS u FROM (VALUES "
                f"({low}), ({high}), (0), (1), ({low} + 1), ({high} - 1), (NULL), (0), "
                f"({high})) AS v(v)")
    if low < 0:
        con.execute("INSERT INTO t VALUES (-1), (-1)")
    same = con.execute(
        "SELECT count(*) FILTER (WHERE u IS NOT DISTINCT FROM ~(~u)), count(*), "
        "count(*) FILTER (WHERE typeof(u) = typeof(~(~u))), "
        f"count(*) FILTER (WHERE hash({SALT}, u) IS NOT DISTINCT FROM hash({SALT}, ~(~u))) "
        "FROM t").fetchone()
    assert same is not None and same[0] == same[1] == same[2] == same[3]
    plain = con.execute("SELECT u, count(*) FROM t GROUP BY u ORDER BY u").fetchall()
    opaque = con.execute("SELECT ~(~u) AS w, count(*) FROM t GROUP BY w ORDER BY w").fetchall()
    assert plain == opaque


def _extremes(kind: str) -> tuple[int, int]:
    """The smallest and largest value of the integer type ``kind``."""
    bits = {"TINYINT": 8, "SMALLINT": 16, "INTEGER": 32, "BIGINT": 64, "HUGEINT": 128}
    if kind in bits:
        return -2 ** (bits[kind] - 1), 2 ** (bits[kind] - 1) - 1
    return 0, 2 ** {"UTINYINT": 8, "USMALLINT": 16, "UINTEGER": 32, "UBIGINT": 64}[kind] - 1


@pytest.fixture(scope="module")
def visits(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A DuckDB file of visits by integer units, with its metadata."""
    folder = tmp_path_factory.mktemp("grouping")
    database, metadata = folder / "v.duckdb", folder / "v.toml"
    with duckdb.connect(str(database)) as con:
        con.execute("CREATE TABLE visits AS SELECT (i % 5000)::BIGINT AS person_id, "
                    "(i * 7919 % 1000)::DOUBLE / 10 AS amount FROM range(40000) t(i)")
    metadata.write_text('[tables.visits]\nprivacy_unit = "person_id"\nmax_rows_per_unit = 4\n'
                        '[tables.visits.columns]\nperson_id = { type = "int" }\n'
                        'amount = { type = "float", lower = 0, upper = 100 }\n')
    return database, metadata


def _engine_sql(db: dpsql.Database, sql: str) -> str:
    seen: list[str] = []
    execute = db.engine.execute

    def keep(text: str, parameters: Any = ()) -> Any:
        seen.append(text)
        return execute(text, parameters)

    db.engine.execute = keep  # type: ignore[method-assign]
    db.query(sql, epsilon=1.0)
    db.engine.execute = execute  # type: ignore[method-assign]
    return seen[-1]


def test_only_a_filtered_read_spells_its_unit_opaque(visits: tuple[Path, Path]) -> None:
    """Through the library: the engine's database has the wider threshold; a query with a
    WHERE reads ``~(~"person_id")``, one without reads the column as it is."""
    db = dpsql.Database(str(visits[0]), str(visits[1]))
    threshold = db.engine.cursor().execute(
        "SELECT current_setting('perfect_ht_threshold')").fetchone()
    assert threshold == (grouping.settings()["perfect_ht_threshold"],)
    for aggregate in ("COUNT(*)", "SUM(amount)", "MEDIAN(amount)"):
        assert not _OPAQUE.search(_engine_sql(db, f"SELECT {aggregate} FROM visits"))
        filtered = _engine_sql(db, f"SELECT {aggregate} FROM visits WHERE amount > 50")
        assert _OPAQUE.search(filtered), filtered


def test_same_engine_output_on_the_corpus_world(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every accepted corpus query, planned as the neighbour harness plans it: its engine
    query with the unit spelled before (no opaque unit, DuckDB's default threshold) and after
    (the opaque unit where filtered, 20 bits), run on every neighbour of the synthetic world,
    gives the same rows."""
    md = parse_metadata(corpus_metadata(), source="corpus")
    hood = duckdb_neighbourhood(synthesize(md, seed=7))
    generate = neighbours.engine_sql
    changed: list[str] = []

    def both(p: Any, engine: Any) -> tuple[str, bool]:
        sql, salted = generate(p, engine)
        engine.rewritten.clear()
        with monkeypatch.context() as patch:
            patch.setattr(grouping, "filtered_units", lambda tree, schema: None)
            old, _ = generate(p, engine)
        engine.rewritten.clear()
        if old == sql:
            return sql, salted
        parameters = [SALT] if salted else []
        cursor = engine.cursor()
        for name in hood.world.neighbours():
            hood.use(name)
            cursor.execute("SET perfect_ht_threshold = 12")
            before = engine.execute(old, parameters)[1]
            cursor.execute("SET perfect_ht_threshold = 20")
            assert before == engine.execute(sql, parameters)[1], (name, sql)
        changed.append(sql)
        return sql, salted

    monkeypatch.setattr(neighbours, "engine_sql", both)
    cases = [c.sql for c in load_corpus() if c.database == "sample"
             and c.verdict == "accepted" and "WHERE" in c.sql.upper()]
    summary = check_queries(cases, hood)
    assert not summary.violations
    assert len(changed) >= 10, "too few filtered reads of an integer unit in the corpus"
