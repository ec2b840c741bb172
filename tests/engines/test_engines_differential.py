"""The differential test of engines: the same rewritten query on every engine, over the same
data, gives the same exact per-group measurements (up to float summation order), and every
refused query is refused with the same class.

**Why the data is chosen so that bounding keeps every row.** Each engine keys the contribution
bounding sample with its own salted hash (DuckDB's ``hash``, PostgreSQL's
``hash_record_extended``): the two cannot be made bit-identical without slowing the default
engine down, and a sample is only required to be uniformly random and secret, not the same.
So the data sets here are built so that no unit exceeds its bounds (at most
min(max_rows_per_unit, max_groups_per_unit) rows per unit, or one row per unit): the sample
then keeps every row on every engine, and every measurement -- sums, counts, histograms --
must agree exactly. That bounding itself keeps at most k rows in g groups on each engine is
tested by the attack suite, which runs on every engine (tests/engines/test_engines_attacks.py).

**Which corpus cases.** Every one with DPSQL_SLOW=1; by default the subset of
tests/support/subset.py (a cover of every corpus file, SQL construct, verdict and error class,
and one in :data:`SHARE` of the rest on the run's seed, so that consecutive runs see the whole
corpus; ``DPSQL_NEIGHBOUR_SEED=<seed>`` picks the same cases again).

**Adding an engine** is one line in :data:`ENGINES`: a name and a function that copies a
DuckDB file's tables into that engine (given the pytest request, for fixtures such as a
cluster) and returns the database argument dpsql opens it with.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpsql.database import sample_paths
from dpsql.engines import Engine, check_metadata, open_engine
from dpsql.errors import QueryRefused
from dpsql.execution.perturb import histogram_arrays
from dpsql.execution.public import PublicStore
from dpsql.metadata.metadata import Metadata, parse_metadata
from dpsql.routes.pipeline import engine_sql
from dpsql.routes.planner import Planner
from grammar_tests.corpus import Case, load_corpus
from grammar_tests.databases import corpus_metadata
from tests.support.subset import corpus_subset

pytestmark = pytest.mark.pg  # every test here runs on every engine: PostgreSQL too

Loader = Callable[[pytest.FixtureRequest, Path, str], str]


def _duckdb(request: pytest.FixtureRequest, path: Path, name: str) -> str:
    return str(path)


def _postgres(request: pytest.FixtureRequest, path: Path, name: str) -> str:
    cluster = request.getfixturevalue("pg_cluster").database(name)
    return str(cluster.load_duckdb_file(path))


#: name -> how to put a DuckDB file's tables into that engine. The first is the reference.
ENGINES: dict[str, Loader] = {
    "duckdb": _duckdb,
    "postgres": _postgres,
    # "spark": _spark,  (tests of dpsql/engines/spark/engine.py)
}
SALT = 1234567  # any: the data keeps every row, so the sample does not depend on it

SHARE = 6
CASES = corpus_subset([c for c in load_corpus() if c.verdict in ("accepted", "refused")], SHARE)


# --- the data: the sample data, and the end-to-end tables, with bounds that keep every row ---


def _sample_within_bounds(folder: Path) -> Path:
    """The sample tables, visits cut to the first 3 of each person (max_groups_per_unit),
    prescriptions to the bounds they reach their person with."""
    sample, _ = sample_paths()
    path = folder / "sample.duckdb"
    with duckdb.connect(str(path)) as con:
        for file in sorted(sample.glob("*.parquet")):
            query = f"SELECT * FROM read_parquet('{file}')"
            if file.stem == "visits":
                query += (" QUALIFY row_number() OVER (PARTITION BY person_id ORDER BY visit_id)"
                          " <= 3")
            con.execute(f'CREATE TABLE "{file.stem}" AS {query}')
        # prescriptions reach their person through a kept visit; each person keeps at most
        # max_rows_per_unit = 20 of them, of at most max_groups_per_unit = 3 drugs.
        con.execute("""CREATE TABLE kept AS SELECT r.* FROM prescriptions r
            JOIN visits v USING (visit_id)
            QUALIFY dense_rank() OVER (PARTITION BY v.person_id ORDER BY r.drug) <= 3""")
        con.execute("""CREATE OR REPLACE TABLE prescriptions AS SELECT r.* FROM kept r
            JOIN visits v USING (visit_id) QUALIFY row_number() OVER (
                PARTITION BY v.person_id ORDER BY r.prescription_id) <= 20""")
        con.execute("DROP TABLE kept")
    return path


def _end_to_end_within_bounds(folder: Path) -> Path:
    from tests.library.test_end_to_end import T_SQL  # the end-to-end tables (tests/ is on sys.path)

    path = folder / "end_to_end.duckdb"
    with duckdb.connect(str(path)) as con:
        for statement in T_SQL:
            con.execute(statement)
        # v keeps at most max_rows_per_unit = 4 rows per unit, all of one kind (g = 1).
        con.execute("CREATE TABLE v2 AS SELECT * FROM v QUALIFY row_number() OVER "
                    "(PARTITION BY u ORDER BY amount, kind) <= 4")
        con.execute("DROP TABLE v")
        con.execute("ALTER TABLE v2 RENAME TO v")
    return path


def _end_to_end_metadata() -> Metadata:
    from dpsql.metadata.metadata import parse_metadata
    from tests.library.test_end_to_end import T_META

    return parse_metadata({"tables": T_META}, source="end_to_end.toml")


@pytest.fixture(scope="module")
def sample_engines(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[dict[str, Engine]]:
    path = _sample_within_bounds(tmp_path_factory.mktemp("differential"))
    metadata = parse_metadata(corpus_metadata(), source="corpus")  # the corpus's k and g
    yield from _opened(request, path, "differential_sample", metadata)


@pytest.fixture(scope="module")
def end_to_end_engines(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                       ) -> Iterator[dict[str, Engine]]:
    path = _end_to_end_within_bounds(tmp_path_factory.mktemp("differential"))
    yield from _opened(request, path, "differential_end_to_end", _end_to_end_metadata())


def _opened(request: pytest.FixtureRequest, path: Path, name: str, metadata: Metadata
            ) -> Iterator[dict[str, Engine]]:
    # Every copy is made before any engine opens the file (DuckDB opens it read-only, locked).
    databases = {engine: load(request, path, name) for engine, load in ENGINES.items()}
    engines = {}
    try:
        for engine, database in databases.items():
            engines[engine] = open_engine(database, metadata)
            check_metadata(metadata, engines[engine].schema, engine)
            # Joins plan from the public tables, copied by each engine (Engine.read_public).
            STORES[id(engines[engine])] = PublicStore(metadata, engines[engine])
        yield engines
    finally:
        for opened in engines.values():
            store = STORES.pop(id(opened), None)
            if store is not None:
                store.close()
            opened.close()


#: id(engine) -> the public tables as that engine reads them, for plans of public joins.
STORES: dict[int, PublicStore] = {}


# --- outcomes --------------------------------------------------------------------------------


def outcome(engine: Engine, metadata: Metadata, sql: str, options: Mapping[str, Any]
            ) -> tuple[str, object]:
    """("refused", class name) or ("rows", the exact rows in a canonical order). Each engine
    plans with its own copy of the public tables (and its own plan cache)."""
    try:
        plan = Planner(metadata, STORES.get(id(engine))).prepare(sql, **options)
        text, salted = engine_sql(plan, engine)
    except QueryRefused as e:
        return "refused", type(e).__name__
    _, rows = engine.execute(text, [SALT] if salted else [])
    nkeys = len(plan.keys)
    return "rows", sorted((tuple(_canonical(v) for v in row) for row in rows),
                          key=lambda row: repr(row[:nkeys]))


def _canonical(value: object) -> object:
    if isinstance(value, (dict, list)):  # a histogram: bucket -> count, keys as int everywhere
        return tuple(sorted(zip(*(a.astype(int).tolist() for a in histogram_arrays(value)),
                                strict=True)))
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.9g}")  # summation order differs between engines
    if isinstance(value, dt.datetime) and value.time() == dt.time():
        return value.date()
    return value


def same(reference: tuple[str, object], other: tuple[str, object]) -> bool:
    return reference == other


def _check(engines: Mapping[str, Engine], metadata: Metadata, sql: str,
           options: Mapping[str, Any]) -> None:
    (ref_name, ref), *others = engines.items()
    expected = outcome(ref, metadata, sql, options)
    for name, engine in others:
        got = outcome(engine, metadata, sql, options)
        assert same(expected, got), f"{name} differs from {ref_name}:\n{got}\n{expected}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_corpus_case_is_the_same_on_every_engine(case: Case,
                                                 sample_engines: dict[str, Engine]) -> None:
    metadata = parse_metadata(corpus_metadata(), source="corpus")
    _check(sample_engines, metadata, case.sql, case.options)


END_TO_END = [
    "SELECT COUNT(*) FROM t", "SELECT COUNT(x) FROM t WHERE n > 2", "SELECT SUM(x) FROM t",
    "SELECT SUM(n) FROM t", "SELECT SUM(CASE WHEN x > 50 THEN 1 ELSE 0 END) FROM t",
    "SELECT AVG(x) FROM t", "SELECT AVG(x / 10) FROM t WHERE grp = 'a'", "SELECT VAR(x) FROM t",
    "SELECT VAR_POP(n) FROM t", "SELECT STDDEV(x) FROM t", "SELECT COUNT(DISTINCT uid) FROM t",
    "SELECT MEDIAN(x) FROM t", "SELECT QUANTILE_CONT(x, 0.9) FROM t",
    "SELECT PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY n) FROM t", "SELECT MIN(x) FROM t",
    "SELECT MAX(x) FROM t", "SELECT COUNT(*), SUM(x), AVG(x), VAR(x), STDDEV(x), MEDIAN(x), "
    "MIN(n), MAX(n) FROM t", "SELECT grp, COUNT(*) AS c, AVG(x) AS m FROM t GROUP BY grp",
    "SELECT n, COUNT(*) FROM t GROUP BY n", "SELECT city, COUNT(*) FROM t GROUP BY city",
    "SELECT kind, COUNT(*), SUM(amount) FROM v GROUP BY kind",
    "SELECT COUNT(*), AVG(amount), MAX(amount) FROM v",
]


@pytest.mark.parametrize("sql", END_TO_END)
def test_end_to_end_query_is_the_same_on_every_engine(sql: str, end_to_end_engines: dict[
        str, Engine]) -> None:
    options = {"epsilon": 1.0, "delta": 1e-6 if "city" in sql or "kind" in sql else 0.0}
    _check(end_to_end_engines, _end_to_end_metadata(), sql, options)


# --- casts of text that does not convert: never an error, on every engine ----------------------

NASTY = ["12", " -7 ", "12.5", "1e3", "99999999999999999999", "1e400", "-1e-400", "abc", "",
         "2024-02-29", "2023-02-29", "0000-01-01", "2024-13-01", "2024-04-31 10:00:00", "true",
         "NaN", "1_000", "0x10", "9" * 500]
WELL_FORMED = {"12", " -7 ", "12.5", "2024-02-29", "2024-04-30"}
CASTS = ["CAST(code AS BIGINT)", "CAST(code AS INTEGER)", "CAST(code AS SMALLINT)",
         "CAST(code AS DOUBLE)", "CAST(code AS DECIMAL(10, 2))", "CAST(code AS DATE)",
         "CAST(code AS BOOLEAN)"]
CAST_META = {"t": {"privacy_unit": "id", "max_rows_per_unit": 1, "one_row_per_unit": True,
                   "columns": {"id": {"type": "int"}, "code": {"type": "text",
                                                               "nullable": True}}}}


@pytest.fixture(scope="module")
def cast_engines(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[dict[str, Engine]]:
    from dpsql.metadata.metadata import parse_metadata

    path = tmp_path_factory.mktemp("casts") / "casts.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t (id BIGINT, code VARCHAR)")
        con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(NASTY)))
    yield from _opened(request, path, "differential_casts",
                       parse_metadata({"tables": CAST_META}, source="casts.toml"))


@pytest.mark.parametrize("cast", CASTS)
def test_text_that_does_not_convert_never_fails(cast: str,
                                                cast_engines: dict[str, Engine]) -> None:
    """Every value of NASTY through every cast, as a GROUP BY key (thresholded, so that the
    keys themselves come back exactly): no engine raises, and well-formed text converts to
    the same value everywhere."""
    from dpsql.metadata.metadata import parse_metadata

    metadata = parse_metadata({"tables": CAST_META}, source="casts.toml")
    sql = f"SELECT code, {cast} AS k, COUNT(*) FROM t GROUP BY code, k"
    answers = {}
    for name, engine in cast_engines.items():
        kind, rows = outcome(engine, metadata, sql, {"epsilon": 1.0, "delta": 1e-6})
        assert kind == "rows", f"{name}: {sql} refused"
        answers[name] = {row[0]: row[1] for row in rows  # type: ignore[attr-defined]
                         if row[0] in WELL_FORMED}
    reference = next(iter(answers.values()))
    assert len(reference) == len(WELL_FORMED & set(NASTY)), reference
    assert all(a == reference for a in answers.values()), answers


@pytest.mark.parametrize("declared", ["int", "float", "date", "bool", "text"])
def test_a_public_read_of_text_never_fails(declared: str,
                                           cast_engines: dict[str, Engine]) -> None:
    """Engine.read_public (how the public store and the plans of joins read public tables)
    on every engine: text that does not convert is NULL, never an error, and well-formed text
    reads as the same value everywhere."""
    answers = {}
    for name, engine in cast_engines.items():
        rows = engine.read_public("t", {"id": "int", "code": declared})
        assert len(rows) == len(NASTY), name
        answers[name] = {NASTY[i]: _canonical(v) for i, v in rows  # type: ignore[index]
                         if NASTY[i] in WELL_FORMED}  # type: ignore[index]
    reference = next(iter(answers.values()))
    assert any(v is not None for v in reference.values()) or declared == "bool", reference
    assert all(a == reference for a in answers.values()), answers
