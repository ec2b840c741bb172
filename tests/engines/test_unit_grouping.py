"""How DuckDB groups the rows by unit (dpsql.engines.duckdb_engine.grouping): every read
spells an integer unit ``~(~unit)``, so that its ``GROUP BY`` takes the general hash table
whatever the ids' span (a perfect hash sized by the data made the time depend on one person's
id). The spelling may not change a released value (outputs compared with the plain unit), and
the engine's plan may not depend on one person's id (EXPLAIN on neighbours)."""

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


def test_every_read_spells_its_unit_opaque(visits: tuple[Path, Path]) -> None:
    """Through the library: with a WHERE or without, the engine query reads
    ``~(~"person_id")``, and the engine's database keeps DuckDB's default threshold."""
    db = dpsql.Database(str(visits[0]), str(visits[1]))
    threshold = db.engine.cursor().execute(
        "SELECT current_setting('perfect_ht_threshold')").fetchone()
    assert threshold == (12,)
    for aggregate in ("COUNT(*)", "SUM(amount)", "MEDIAN(amount)"):
        for where in ("", " WHERE amount > 50"):
            sql = _engine_sql(db, f"SELECT {aggregate} FROM visits{where}")
            assert _OPAQUE.search(sql), sql


def _plan_lines(db: dpsql.Database, sql: str) -> list[str]:
    """The lines of ``sql``'s physical plan on ``db``'s engine (operators, their keys and
    casts), without the boxes, the estimated row counts and the file's name."""
    parameters = [SALT] if re.search(r"\$1\b|\?", sql) else []
    rows = db.engine.cursor().execute(f"EXPLAIN {sql}", parameters).fetchall()
    lines = (re.sub("[\u2500-\u257f]", " ", line).strip()
             for line in "".join(str(row[1]) for row in rows).splitlines())
    return [line for line in lines if line and not line.startswith("Table:")
            and not re.fullmatch(r"~[\d,.]+k? rows?", line)]


def test_the_plan_does_not_depend_on_one_persons_id(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Dense ids (0..999, a perfect hash's span) and the neighbour with one more person whose
    id is 10^12: the same physical operators for every bounded query, no perfect hash in
    either. With the plain unit the dense world's plan differs (the channel this guards)."""
    metadata = tmp_path / "v.toml"
    metadata.write_text('[tables.visits]\nprivacy_unit = "person_id"\nmax_rows_per_unit = 4\n'
                        '[tables.visits.columns]\nperson_id = { type = "int" }\n'
                        'amount = { type = "float", lower = 0, upper = 100 }\n')
    worlds = {}
    for name, extra in (("dense", ""), ("extreme", "INSERT INTO visits VALUES (10^12, 5)")):
        worlds[name] = tmp_path / f"{name}.duckdb"
        with duckdb.connect(str(worlds[name])) as con:
            con.execute("CREATE TABLE visits AS SELECT (i % 1000)::BIGINT AS person_id, "
                        "(i * 7919 % 1000)::DOUBLE / 10 AS amount FROM range(20000) t(i)")
            if extra:
                con.execute(extra)
    queries = [f"SELECT {a} FROM visits{w}" for a in ("COUNT(*)", "SUM(amount)",
                                                      "MEDIAN(amount)", "AVG(amount)")
               for w in ("", " WHERE amount > 50")]

    def plans(name: str) -> list[list[str]]:
        db = dpsql.Database(str(worlds[name]), str(metadata))
        return [_plan_lines(db, _engine_sql(db, q)) for q in queries]

    dense, extreme = plans("dense"), plans("extreme")
    assert dense == extreme
    assert not any("Perfect Hash" in "".join(lines) for lines in dense)
    monkeypatch.setattr(grouping, "opaque_units", lambda tree, schema: None)
    assert any("Perfect Hash" in "".join(lines) for lines in plans("dense"))
    assert plans("dense") != plans("extreme")


def test_same_engine_output_on_the_corpus_world(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every accepted corpus query with a WHERE, planned as the neighbour harness plans it: its
    engine query with the plain unit and with the opaque unit, run on every neighbour of the
    synthetic world, gives the same rows."""
    md = parse_metadata(corpus_metadata(), source="corpus")
    hood = duckdb_neighbourhood(synthesize(md, seed=7))
    generate = neighbours.engine_sql
    changed: list[str] = []

    def both(p: Any, engine: Any) -> tuple[str, bool]:
        sql, salted = generate(p, engine)
        engine.rewritten.clear()
        with monkeypatch.context() as patch:
            patch.setattr(grouping, "opaque_units", lambda tree, schema: None)
            old, _ = generate(p, engine)
        engine.rewritten.clear()
        if old == sql:
            return sql, salted
        parameters = [SALT] if salted else []
        for name in hood.world.neighbours():
            hood.use(name)
            before = engine.execute(old, parameters)[1]
            assert before == engine.execute(sql, parameters)[1], (name, sql)
        changed.append(sql)
        return sql, salted

    monkeypatch.setattr(neighbours, "engine_sql", both)
    cases = [c.sql for c in load_corpus() if c.database == "sample"
             and c.verdict == "accepted" and "WHERE" in c.sql.upper()]
    summary = check_queries(cases, hood)
    assert not summary.violations
    assert len(changed) >= 10, "too few filtered reads of an integer unit in the corpus"
