"""The Spark SQL engine as users run it (PySpark on the JDK; no mocks): a standalone cluster
on loopback, a master and a worker whose two executors run in JVMs of their own (``spark://``),
and a Spark Connect server, a process of its own running its tasks locally (``sc://``), both
started once per run by the ``spark_cluster`` fixture (tests/support/sparkcluster.py). A
missing PySpark, JDK or Connect package fails these tests: they do not skip.

The corpus differential, the attack rows and the audit's neighbours run on both: by default
one selection of the corpus dealt between the classic session and Connect (:func:`dealt`);
every case on both with DPSQL_SLOW=1.

The differential harness (:func:`exact_rows`, :func:`differential`) runs a plan's rewritten
query on two engines over the same data and compares the exact per-group measurements. It
needs measurements that do not depend on which rows contribution bounding samples: the
sample metadata with ``visits`` bounded loosely enough (k = g = 1000) that every unit keeps
all its rows (a unit has at most 896 visits), so both engines' different
salted hashes keep the same rows. A PostgreSQL harness can call the same two functions.
"""

from __future__ import annotations

import math
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w
from sqlglot import exp

import dpsql
from dpsql.engines import DuckDBEngine, Engine
from dpsql.engines.spark.engine import SparkEngine, spark_type
from dpsql.errors import EngineError, QueryRefused, QueryTimeout
from dpsql.execution.perturb import histogram_arrays
from dpsql.execution.public import PublicStore
from dpsql.execution.rewrite import rewrite
from dpsql.metadata.metadata import Metadata, load_metadata, parse_metadata
from dpsql.privacy.keys import canonical
from dpsql.privacy.plan import Plan
from dpsql.routes.pipeline import engine_sql
from dpsql.routes.planner import Planner
from grammar_tests.corpus import Case, load_corpus
from grammar_tests.databases import corpus_metadata
from tests.support.hash_order import UNIFORMITY_CASES, assert_uniform_order
from tests.support.helpers import REPO
from tests.support.sparkcluster import SparkCluster
from tests.support.subset import cover, half, subset

pytestmark = pytest.mark.spark
FULL = os.environ.get("DPSQL_SLOW") == "1"

SAMPLE = REPO / "sample_data"
BACKENDS = ["cluster", "connect"]  # spark://127.0.0.1:<port> and sc://127.0.0.1:<port>
#: Every accepted case runs with DPSQL_SLOW=1; by default the cases :func:`dealt` chooses,
#: to keep CI time modest (a Spark query takes about a second on 2 cores, three on a busy one).


def loose_metadata(folder: Path) -> Path:
    """The corpus's metadata with visits' contribution bounds loose enough that bounding keeps
    every row (see the module docstring), written to ``folder``."""
    declared = corpus_metadata()
    visits = declared["tables"]["visits"]
    for key in ("max_rows_per_unit_cap", "max_groups_per_unit_cap"):
        visits.pop(key, None)
    visits.update(max_rows_per_unit=1000, max_groups_per_unit=1000)
    path = folder / "metadata.toml"
    path.write_text(tomli_w.dumps(declared), encoding="utf-8")
    return path


def backend_url(cluster: SparkCluster, backend: str, folder: Path) -> str:
    """The database argument of ``folder``'s Parquet files on the cluster (``backend``
    "cluster") or through its Connect server ("connect")."""
    return cluster.url(folder) if backend == "cluster" else cluster.connect_url(folder)


@pytest.fixture(scope="module", params=BACKENDS)
def engines(request: pytest.FixtureRequest, spark_cluster: SparkCluster
            ) -> Iterator[tuple[Engine, Engine]]:
    duck = DuckDBEngine(SAMPLE)
    spark = SparkEngine(backend_url(spark_cluster, request.param, SAMPLE))
    yield duck, spark
    duck.close()
    spark.close()


@pytest.fixture(scope="module")
def loose(tmp_path_factory: pytest.TempPathFactory) -> Metadata:
    return load_metadata(loose_metadata(tmp_path_factory.mktemp("loose")))


def exact_rows(engine: Engine, plan: Plan, salt: int | None = None
               ) -> dict[tuple[object, ...], list[object]]:
    """The exact measurements per canonical key of ``plan`` run on ``engine`` (the salt of
    contribution bounding random unless given)."""
    sql, salted = engine_sql(plan, engine)
    salt = secrets.randbits(63) if salt is None else salt
    _, rows = engine.execute(sql, [salt] if salted else [])
    keys = len(plan.keys)
    out: dict[tuple[object, ...], list[object]] = {}
    for row in rows:
        out[canonical(row[:keys])] = list(row[keys:])
    return out


def same(a: object, b: object, real: bool = False) -> bool:
    """Equal measurements: integers (and histograms) exactly, reals up to summation order
    and the last bit of a math function (``real``: a fixed-point sum of real terms, whose
    units may differ by one per term where the engines' LN or EXP differ in the last bit)."""
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):  # histograms
        return as_histogram(a) == as_histogram(b)
    if real and isinstance(a, int) and isinstance(b, int):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=len(str(a)))
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(
            float(a), float(b), rel_tol=1e-9, abs_tol=1e-6)  # type: ignore[arg-type]
    return a == b


def as_histogram(value: object) -> dict[int, int]:
    """An engine's histogram (a MAP, or DuckDB's two lists) as its non-empty buckets."""
    return {int(b): int(c) for b, c in zip(*histogram_arrays(value), strict=True) if c}


def differential(plan: Plan, one: Engine, other: Engine) -> None:
    left, right = exact_rows(one, plan), exact_rows(other, plan)
    assert left.keys() == right.keys(), f"groups differ: {left.keys() ^ right.keys()}"
    for key, values in left.items():
        for m, a, b in zip(plan.measurements, values, right[key], strict=True):
            assert same(a, b, real=bool(m.step)), \
                f"group {key}, {m.name} ({m.kind}): {a!r} != {b!r}"


def features(plan: Plan) -> set[str]:
    """What a plan exercises on an engine: every node type of its engine query (the engine
    IR's nodes, sqlglot's functions and operators) and every measurement kind."""
    found = {type(node).__name__ for node in rewrite(plan).walk()}
    return found | {f"measurement {m.kind}" for m in plan.measurements}


def _is_connect(engine: Engine) -> bool:
    # not engine.location: an engine opened on a folder is named by the folder
    return isinstance(engine, SparkEngine) and engine.over_connect


def planned(cases: list[Case], metadata: Metadata) -> list[tuple[Case, Plan]]:
    """The cases that plan under ``metadata``, with their plans."""
    out = []
    for case in cases:
        try:
            plan = Planner(metadata).prepare(case.sql, **case.options)  # type: ignore[arg-type]
        except QueryRefused:
            continue
        out.append((case, plan))
    return out


def dealt(cases: list[Case], metadata: Metadata, seed: int
          ) -> dict[str, list[tuple[Case, Plan]]]:
    """The corpus cases each backend runs: every case on both with DPSQL_SLOW=1. Else one
    selection dealt between the two: the cluster and Connect run the same Spark SQL (one
    dialect) and differ in the session (py4j rows, Connect's Arrow batches), so each node
    type needs spelling and running once, not once per backend. The selection: ROUND with
    digits and one more ROUND case in turn (the rule dpsql.query.total_expressions spells out
    for each engine), a cover of half the engine queries' node types and measurement kinds
    (:func:`features`: the other half on the next seed, so two consecutive runs cover them
    all; every IR node is spelled by Spark's dialect on every run,
    tests/engines/test_engines_ir.py), and about two more on ``seed``
    (tests/support/subset.py; CI's runs cover the whole corpus over time).
    Connect gets a cover of half the measurement kinds among them (the shapes of result its
    client converts; the other half on the next seed), starting from a case that turns with
    ``seed``; the cluster the rest (a query through Connect took 3 s where the cluster took
    1.8, on an idle 2-core machine; a cold Connect server's first queries take 5-7 s).
    Cases accepted only under the sample's bounds (k, g) are left
    out: they are refused under the loose ones."""
    every = planned(cases, metadata)
    if FULL:
        return {backend: every for backend in BACKENDS}
    found = half([features(plan) for _, plan in every], seed)
    rounding = [i for i, (case, _) in enumerate(every) if "ROUND(" in case.sql.upper()]
    chosen = subset(range(len(every)), max(1, len(every) // 2), found.__getitem__, seed,
                    taken={rounding[seed % len(rounding)],
                           *(i for i in rounding if "with digits" in every[i][0].id)})
    kinds = half([{f for f in found[i] if f.startswith("measurement ")} for i in chosen], seed)
    start = seed % len(chosen)
    on_connect = {chosen[j] for j in cover(kinds, {start} if kinds[start] else ())}
    return {"cluster": [every[i] for i in chosen if i not in on_connect],
            "connect": [every[i] for i in chosen if i in on_connect]}


CORPUS = [c for c in load_corpus() if c.database == "sample"]  # the sample data here
# "central" (the sample without people's local rows) accepts nothing row-level of people.
ACCEPTED = [c for c in load_corpus() if c.database in ("sample", "central")
            and c.verdict == "accepted"]
REFUSED = [c for c in CORPUS if c.verdict == "refused"]


@pytest.fixture(scope="module")
def corpus_cases(loose: Metadata, neighbour_seed: int) -> dict[str, list[tuple[Case, Plan]]]:
    return dealt(ACCEPTED, loose, neighbour_seed)


@pytest.mark.parametrize("fixed", UNIFORMITY_CASES)
def test_the_salted_hash_orders_values_uniformly_over_salts(
        engines: tuple[Engine, Engine], fixed: list[exp.Expression]) -> None:
    assert_uniform_order(engines[1], fixed)  # xxhash64, seeded input by input


def test_corpus_accepted_same_measurements(engines: tuple[Engine, Engine],
                                           corpus_cases: dict[str, list[tuple[Case, Plan]]],
                                           neighbour_seed: int) -> None:
    """The rewritten Spark SQL computes DuckDB's exact per-group measurements, on the
    cluster and through Connect, each on its share of the corpus (:func:`dealt`)."""
    duck, spark = engines
    selected = corpus_cases["connect" if _is_connect(spark) else "cluster"]
    failures = []
    for case, plan in selected:
        try:
            differential(plan, duck, spark)
        except (AssertionError, EngineError, QueryRefused) as e:
            failures.append(f"{case.id}: {type(e).__name__}: {str(e)[:300]}")
    assert not failures, f"{len(failures)} of {len(selected)} (DPSQL_NEIGHBOUR_SEED=" \
        f"{neighbour_seed}):\n" + "\n".join(failures)


STRPTIME = ["SELECT COUNT(*) FROM people WHERE TO_DATE(CAST(signup_date AS VARCHAR), "
             "'YYYY-MM-DD') >= DATE '2023-06-01'",
             "SELECT COUNT(*) FROM people WHERE STRPTIME(CAST(signup_date AS VARCHAR), "
             "'%Y-%m-%d') >= TIMESTAMP '2023-06-01 00:00:00'"]


@pytest.mark.parametrize("sql", STRPTIME)
def test_text_parsed_as_a_date_as_on_duckdb(sql: str, engines: tuple[Engine, Engine],
                                            loose: Metadata) -> None:
    """TO_DATE / STRPTIME read the dates on Spark (TRY_TO_TIMESTAMP's format was once quoted
    twice, and every text read as NULL)."""
    plan = Planner(loose).prepare(sql, epsilon=1.0)
    differential(plan, *engines)
    assert next(iter(exact_rows(engines[1], plan).values()))[0] > 0


def test_corpus_refused_the_same_way(engines: tuple[Engine, Engine]) -> None:
    """Every refused case is refused with the same class on both engines, before any data
    (on the cluster; through Connect, one refused case per corpus file)."""
    duck, spark = engines
    refused = REFUSED
    if _is_connect(spark) and not FULL:
        refused = list({case.file: case for case in reversed(REFUSED)}.values())
    metadata = parse_metadata(corpus_metadata(), source="corpus")
    # Joins plan with public data, as an open Database does (its store, read from DuckDB).
    planner = Planner(metadata, PublicStore(metadata, duck))
    for case in refused:
        errors = []
        for engine in (duck, spark):
            try:  # the corpus's door (the planner: public reads and two releases too)
                plan = planner.prepare_query(case.sql, **case.options)  # type: ignore[arg-type]
                if isinstance(plan, Plan):
                    engine_sql(plan, engine)
            except QueryRefused as e:
                errors.append(type(e).__name__)
        assert errors == [case.error, case.error], f"{case.id}: {errors}"


# --- attacks: data chosen to make the engine fail, overflow or leak through an error ---------

ATTACK_METADATA = """
[tables.t]
privacy_unit = "pid"
one_row_per_unit = true

[tables.t.columns]
pid = { type = "int" }
x = { type = "float", lower = 0, upper = 100 }
n = { type = "int", lower = -4611686018427387904, upper = 4611686018427387904 }
s = { type = "int", lower = 0, upper = 100 }
g = { type = "text", values = ["a", "b"] }

[tables.w]
privacy_unit = "pid"
one_row_per_unit = true

[tables.w.columns]
pid = { type = "int" }
m = { type = "int", lower = 0, upper = 9007199254740991 }
"""
ATTACK_METADATA += """
[tables.b]
privacy_unit = "pid"
max_rows_per_unit = 2

[tables.b.columns]
pid = { type = "int" }
v = { type = "int", lower = 0, upper = 1125899906842624 }

[tables.e]
privacy_unit = "pid"
one_row_per_unit = true

[tables.e.columns]
pid = { type = "int" }
ts = { type = "timestamp", lower = 2025-01-01T00:00:00, upper = 2025-12-31T00:00:00 }
"""
#: Timestamps with fractions of a second: Spark's EXTRACT(SECOND) keeps the fraction (a
#: DECIMAL(8, 6)), DuckDB's gives whole seconds; summed as integers, 12.7 s once counted 13.
EVENT_ROWS = ("SELECT range AS pid, TIMESTAMP '2025-03-01 10:00:12.7' + "
              "INTERVAL (range * 61) SECOND AS ts FROM range(40)")
#: NaN and infinities, BIGINT extremes (clamped to +-2^62: four of them overflow BIGINT),
#: text declared int that does not convert, NULLs.
ATTACK_ROWS = """
CREATE TABLE t AS SELECT * FROM (VALUES
  (1, 'NaN'::DOUBLE, 9223372036854775807, '12', 'a'),
  (2, 'Infinity'::DOUBLE, 9223372036854775807, 'abc', 'a'),
  (3, '-Infinity'::DOUBLE, 9223372036854775807, '1e400', 'b'),
  (4, 1e308, 9223372036854775807, '', 'b'),
  (5, -5.5, -9223372036854775808, '99999999999999999999999', NULL),
  (6, NULL, NULL, NULL, 'a'),
  (7, 50.25, 3, ' 7 ', 'b')) v(pid, x, n, s, g)
"""
ATTACKS = [
    "SELECT SUM(x), COUNT(x), AVG(x) FROM t",
    "SELECT SUM(n) FROM t",
    "SELECT g, SUM(n), COUNT(*) FROM t GROUP BY g",
    "SELECT SUM(s), MEDIAN(s), MAX(x) FROM t",
    "SELECT COUNT(*) FROM t WHERE x > 10 AND s / (s - s) IS NULL",
    "SELECT SUM(LEAST(GREATEST(x / (s - 12), -10), 10)), "
    "SUM(LEAST(GREATEST(s // (s - s), 0), 5)), SUM(LEAST(GREATEST(s % (s - 12), 0), 5)) FROM t",
    "SELECT SUM(LEAST(GREATEST(TRY_CAST(g AS INT), 0), 9)), COUNT(*) FROM t "
    "WHERE CAST(s AS DOUBLE) >= 0",
    "SELECT VARIANCE(x), STDDEV(s) FROM t",
    "SELECT SUM(EXTRACT(SECOND FROM ts)), SUM(EXTRACT(MINUTE FROM ts)) FROM e",
]


@pytest.fixture(scope="module", params=BACKENDS)
def attack(request: pytest.FixtureRequest, spark_cluster: SparkCluster,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Metadata, Engine,
                                                                         Engine]]:
    import duckdb

    folder = tmp_path_factory.mktemp("attack")
    with duckdb.connect() as con:
        con.execute(ATTACK_ROWS)
        con.execute(f"COPY t TO '{folder / 't.parquet'}' (FORMAT parquet)")
        con.execute(f"COPY (SELECT range AS pid, 9007199254740991 AS m FROM range(2000)) "
                    f"TO '{folder / 'w.parquet'}' (FORMAT parquet)")
        con.execute(f"COPY ({EVENT_ROWS}) TO '{folder / 'e.parquet'}' (FORMAT parquet)")
        con.execute(f"COPY ({WEIGHTED_ROWS}) TO '{folder / 'b.parquet'}' (FORMAT parquet)")
    (folder / "metadata.toml").write_text(ATTACK_METADATA, encoding="utf-8")
    duck = DuckDBEngine(folder)
    spark = SparkEngine(backend_url(spark_cluster, request.param, folder))
    yield load_metadata(folder / "metadata.toml"), duck, spark
    duck.close()
    spark.close()


def test_attack_rows_never_fail_and_match_duckdb(
        attack: tuple[Metadata, Engine, Engine]) -> None:
    """Rows built to break the engine (NaN, infinities, BIGINT extremes whose sum overflows
    64 bits, text that does not convert, divisions by zero) give DuckDB's exact answer on
    Spark, with no error; the sum of four 2^62 and one -2^62 exceeds BIGINT and is not
    wrapped. By default the cluster runs half of :data:`ATTACKS` and Connect the other."""
    metadata, duck, spark = attack
    # Dealt between the two backends by default (one dialect); every row on both when slow.
    for sql in ATTACKS if FULL else ATTACKS[_is_connect(spark)::2]:
        differential(Planner(metadata).prepare(sql, delta=1e-6), duck, spark)
    total = exact_rows(spark, Planner(metadata).prepare("SELECT SUM(n) FROM t"))[()][0]
    # 2000 integers of 2^53 - 1 add up beyond BIGINT: exact (DECIMAL(38, 0)), as DuckDB's
    # HUGEINT, where a BIGINT sum would wrap (non-ANSI) or fail (ANSI).
    plan = Planner(metadata).prepare("SELECT SUM(m) FROM w")
    assert exact_rows(spark, plan)[()][0] == 2000 * (2**53 - 1) == exact_rows(duck, plan)[()][0]
    # Beyond BIGINT (2^63), not wrapped: bounds this wide are summed in DOUBLE by the plan.
    assert math.isclose(float(total), 3 * 2**62 + 3, rel_tol=1e-12)  # type: ignore[arg-type]


#: Units of 1 to 5 rows near the bound 2^50: bounded by weights (a quantile beside the sum),
#: each row's term times its unit's weight (up to 2^20) lies beyond BIGINT.
WEIGHTED_ROWS = ("SELECT range % 7 AS pid, 1125899906842624 - range * 3 AS v FROM range(20) "
                 "UNION ALL SELECT 100, 1125899906842624")
WEIGHTED = ["SELECT SUM(v), MEDIAN(v) FROM b",
            "SELECT SUM(v), COUNT(v), PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY v) FROM b "
            "WHERE v > 1000"]


def test_weighted_sums_beyond_bigint(attack: tuple[Metadata, Engine, Engine]) -> None:
    """A sum bounded by weights whose weighted terms exceed BIGINT (a wide
    :class:`~dpsql.engines.ir.ExactSum`: Spark sums them as DECIMAL(38, 0), not in BIGINT
    slices, which failed with CAST_OVERFLOW after the charge) gives DuckDB's exact answer."""
    metadata, duck, spark = attack
    for sql in WEIGHTED if FULL else WEIGHTED[_is_connect(spark)::2]:  # dealt, as ATTACKS
        plan = Planner(metadata).prepare(sql, delta=1e-6)
        assert plan.weight_bits and any(max(map(abs, m.units)) >= 2**63
                                        for m in plan.measurements), sql
        differential(plan, duck, spark)


#: BIGINT terms whose 21-bit slices (dpsql.engines.spark.dialect._exact_sum) carry and borrow:
#: the extremes, -1, the slices' edges, and their sums far beyond BIGINT in both directions.
EXACT_TERMS = [-2**63, 2**63 - 1, -1, 0, 1, 2**21 - 1, 2**21, -(2**21), 2**42 - 1, 2**42,
               -(2**42) - 1, 2**62 + 2**42 + 2**21 + 1, -(2**62) - 3, 12345678901234567]


def test_exact_sums_of_bigint_extremes(attack: tuple[Metadata, Engine, Engine]) -> None:
    """An exact SUM (:class:`~dpsql.engines.ir.ExactSum`, Spark's three BIGINT sums of
    21-bit slices) adds BIGINT terms of both signs exactly, far beyond BIGINT, as Python and
    DuckDB's HUGEINT do; NULL terms are skipped and a group of NULLs sums to NULL."""
    from sqlglot import exp, parse_one

    from dpsql.engines import ir

    _, duck, spark = attack
    groups = {1: EXACT_TERMS, 2: [t for t in EXACT_TERMS if t > 0] * 3,
              3: [t for t in EXACT_TERMS if t < 0] * 3 + [None], 4: [None, None]}
    values = ", ".join(f"({g}, CAST('{t}' AS BIGINT))" if t is not None else
                       f"({g}, CAST(NULL AS BIGINT))" for g, ts in groups.items() for t in ts)
    tree = parse_one(f"SELECT g, SUM(x) AS s FROM (VALUES {values}) AS v(g, x) GROUP BY g",
                     dialect="duckdb")
    tree.find(exp.Sum).replace(ir.ExactSum(this=exp.column("x")))  # type: ignore[union-attr]
    expected = {g: sum(t for t in ts if t is not None) if any(t is not None for t in ts)
                else None for g, ts in groups.items()}
    for engine in (spark, duck):
        _, rows = engine.execute(tree.sql(dialect=engine.dialect))
        assert dict(rows) == expected, engine.name  # type: ignore[arg-type]
    assert any(abs(v) >= 2**63 for v in expected.values() if v is not None)


#: Doubles at and next to the ties of rounding to a whole number, and where doubles are whole.
ROUNDED = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999999999999994, -0.49999999999999994,
           0.5000000000000001, 2**52 - 0.5, -(2**52 - 0.5), 2**52 + 1.0, 2**53 + 2.0,
           1e15 + 0.5, -1e15 - 0.5, 0.0, -0.0, 123.4999, -7.5000001, 9.2e18, -2.0**63]


def test_whole_rounding_ties_away_from_zero(attack: tuple[Metadata, Engine, Engine]) -> None:
    """``CAST(RoundHalfAway(x) AS BIGINT)``, every term of a fixed-point sum (Spark's own
    spelling, dpsql.engines.spark.dialect._whole_half_away), rounds ties away from zero and
    nothing else, exactly, as DuckDB does; NULL stays NULL."""
    from fractions import Fraction

    from sqlglot import exp, parse_one

    from dpsql.engines import ir

    _, duck, spark = attack
    values = ", ".join(f"({i}, CAST('{x!r}' AS DOUBLE))" for i, x in enumerate(ROUNDED))
    tree = parse_one(f"SELECT i, CAST(ROUND(x) AS BIGINT) AS r FROM (VALUES {values}, "
                     f"({len(ROUNDED)}, CAST(NULL AS DOUBLE))) AS v(i, x)", dialect="duckdb")
    tree.find(exp.Round).replace(ir.RoundHalfAway(this=exp.column("x")))  # type: ignore[union-attr]
    expected: dict[int, int | None] = {len(ROUNDED): None}
    for i, x in enumerate(ROUNDED):
        whole = int(abs(Fraction(x)) + Fraction(1, 2))  # floor: a non-negative Fraction
        expected[i] = whole if x >= 0 else -whole
    assert "ROUND" not in tree.sql(dialect=spark.dialect).upper()
    for engine in (spark, duck):
        _, rows = engine.execute(tree.sql(dialect=engine.dialect))
        assert dict(rows) == expected, engine.name  # type: ignore[arg-type]


def test_engine_errors_quote_no_data(attack: tuple[Metadata, Engine, Engine]) -> None:
    """A query that fails while reading rows (never one dpsql generates) tells the analyst
    nothing about the value; the owner's detail keeps Spark's message."""
    _, _, spark = attack
    with pytest.raises(EngineError) as info:
        spark.execute("SELECT CAST(s AS INT) FROM t")  # ANSI: 'abc' does not convert
    assert "abc" not in str(info.value) and "dpsql bug" in str(info.value)
    assert "abc" in (info.value.owner_detail or "")


def test_spark_analysis_refuses_before_charge(attack: tuple[Metadata, Engine, Engine]
                                              ) -> None:
    """generate() analyses the query on Spark (no data read): what Spark cannot analyse is
    a refusal, never an engine error after a charge."""
    _, _, spark = attack
    from sqlglot import parse_one

    with pytest.raises(QueryRefused, match="engine cannot run"):
        # type: ignore[attr-defined, arg-type]
        spark.generate(parse_one("SELECT no_such_column FROM t"))


# --- the reduced audit: sensitivity on the audit's worst neighbours -------------------------

#: By default two of them on the run's seed on the cluster and one through Connect (whose
#: rewritten SQL is the same; tests/support/subset.py: consecutive runs take turns; the
#: neighbour harness checks the same on Spark's generated queries,
#: tests/neighbours/test_neighbours_spark.py), all five on both with DPSQL_SLOW=1.
AUDITED = subset(["count_where", "sum_clamped", "user_bounds", "sum_product", "group_public"],
                 2, lambda name: ())
AUDITED_ON = [(name, "cluster") for name in AUDITED] + [
    (name, "connect") for name in (AUDITED if FULL else AUDITED[:1])]


@pytest.mark.parametrize(("name", "backend"), AUDITED_ON)
def test_audit_neighbour_moves_measurements_within_sensitivity(
        name: str, backend: str, tmp_path: Path, spark_cluster: SparkCluster) -> None:
    """The audit's D and worst neighbour D' (one unit far beyond every bound) on Spark: the
    exact measurements move by at most their L1 sensitivity summed over all groups, so
    clamping and contribution bounding hold in Spark SQL (the statistical audit of the noise
    itself runs on DuckDB: the noise is dpsql's, not the engine's)."""
    import duckdb

    from dpsql.audit.audit import build_databases
    from dpsql.audit.scenarios import SCENARIOS

    scenario = SCENARIOS[name]
    d, d_prime, metadata_path = build_databases(scenario, tmp_path)
    # One salt for both: the other units keep the same rows in D and D', so the measurements
    # move only by what the neighbour contributes after bounding.
    measured, salt = [], secrets.randbits(63)
    for path in (d, d_prime):
        folder = tmp_path / path.stem
        folder.mkdir()
        with duckdb.connect(str(path), read_only=True) as con:
            con.execute(f"COPY {scenario.table} TO '{folder}/{scenario.table}.parquet'")
        engine = SparkEngine(backend_url(spark_cluster, backend, folder))
        plan = Planner(load_metadata(metadata_path)).prepare(scenario.sql, scenario.epsilon,
                                                             scenario.delta, scenario.mechanism)
        measured.append(exact_rows(engine, plan, salt=salt))
        engine.close()
    before, after = measured
    moved = False
    for m in plan.measurements:
        change = 0.0
        for key in before.keys() | after.keys():
            a, b = (float(side.get(key, [0] * len(plan.measurements))[m.index] or 0)
                    for side in (before, after))
            change += abs(b - a) * (m.step or 1)
        moved = moved or change > 0
        assert change <= m.l1 * (1 + 1e-9), f"{m.name}: moved {change} > l1 {m.l1}"
    assert moved, "the neighbour changed nothing: the test cannot fail"


# --- the three front doors -------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, spark_cluster: SparkCluster
           ) -> Iterator[tuple[str, Path, Path]]:
    """The sample data on Spark with a metered metadata (its own ledger) and a password."""
    from tests.support.sandbox import sandbox

    setup = sandbox(tmp_path_factory.mktemp("doors"), {"alice": ("pw", 1000.0, 1e-3)})
    saved = os.environ.pop("DPSQL_LEDGER", None)
    yield spark_cluster.url(setup.database), setup.metadata, setup.passwords
    if saved is not None:
        os.environ["DPSQL_LEDGER"] = saved


def test_cli_query_on_spark(served: tuple[str, Path, Path]) -> None:
    from click.testing import CliRunner

    from dpsql.cli import main

    url, metadata, _ = served
    result = CliRunner().invoke(main, ["query", "--database", url, "--metadata",
                                       str(metadata), "--analyst", "alice", "-e", "1",
                                       "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"])
    assert result.exit_code == 0, result.output
    assert "F" in result.output and "M" in result.output


def test_dbapi_connect_on_spark(served: tuple[str, Path, Path]) -> None:
    url, metadata, _ = served
    with dpsql.connect(url, metadata, analyst="alice", epsilon=1.0) as con:
        cur = con.cursor()
        cur.execute("SELECT education, AVG(income) AS a FROM people GROUP BY education "
                    "ORDER BY education")
        rows = cur.fetchall()
    assert [r[0] for r in rows] == sorted(["none", "primary", "secondary", "bachelor",
                                           "master", "doctorate"])
    assert all(isinstance(r[1], float) for r in rows)


def test_serve_on_spark_with_psycopg(served: tuple[str, Path, Path]) -> None:
    import psycopg

    from dpsql.server.config import ServerConfig
    from dpsql.server.server import serve_in_thread

    url, metadata, passwords = served
    with dpsql.Database(url, metadata) as db, \
            serve_in_thread(db, ServerConfig(port=0, passwords=passwords)) as running, \
            psycopg.connect(host="127.0.0.1", port=running.port, user="alice", password="pw",
                            dbname="dpsql", sslmode="disable") as con:
        row = con.execute("SELECT COUNT(*) AS n, MEDIAN(age) AS m FROM people").fetchone()
    assert row is not None and 15000 < row[0] < 25000 and 18 <= row[1] <= 95


@pytest.mark.parametrize("backend", BACKENDS)
def test_owner_timeout_interrupts_a_running_spark_job(tmp_path: Path, backend: str,
                                                      spark_cluster: SparkCluster) -> None:
    """The owner's statement_timeout decides on Spark: its jobs are cancelled (job group; on
    Connect, the operation tag) and an answer that arrives after the deadline is dropped; the
    analyst gets DuckDB's refusal, QueryTimeout, whose text names only the limit. (Spark's
    driver-side planning cannot be cancelled, so the call may return well after the limit;
    tests/engines/test_engines_cancel.py checks that the job itself stops.)"""
    import duckdb

    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT range AS pid, range % 97 AS v FROM range(3000000)) TO "
                    f"'{tmp_path / 'big.parquet'}' (FORMAT parquet)")
    metadata = tmp_path / "metadata.toml"
    metadata.write_text('[server]\nstatement_timeout = 0.5\n\n[tables.big]\nprivacy_unit = '
                        '"pid"\nmax_rows_per_unit = 2\n\n[tables.big.columns]\npid = { type = '
                        '"int" }\nv = { type = "int", lower = 0, upper = 100 }\n')
    with dpsql.Database(backend_url(spark_cluster, backend, tmp_path), metadata) as db:
        with pytest.raises(QueryTimeout) as info:
            db.query("SELECT SUM(v), MEDIAN(v) FROM big")
        assert str(info.value) == str(QueryTimeout(0.5)) and info.value.sqlstate == "57014"
        assert db.engine.execute("SELECT 1 AS one") == (["one"], [(1,)])  # still usable


def test_urls_and_refusals(tmp_path: Path, spark_cluster: SparkCluster) -> None:
    """Unknown URL options and folders without Parquet are refused when opening, naming what
    to pass instead; the Spark types read as the DuckDB names the metadata check knows."""
    with pytest.raises(EngineError, match="folder="):
        SparkEngine("spark:local[2]?path=/x")
    with pytest.raises(EngineError, match=r"no \.parquet"):
        SparkEngine(spark_cluster.url(tmp_path))
    from dpsql.database import open_engine
    from dpsql.engines import ENGINES, _spark, url_scheme
    from dpsql.engines.spark.engine import spark_type

    assert all(ENGINES[str(url_scheme(u))] is _spark
               for u in ("spark:local", "spark:local[2]", "sc://h:15002", "spark://h:1"))
    assert url_scheme("local[2]") is None  # a path: Spark is named spark:local[2]
    assert url_scheme(SAMPLE) is None and isinstance(open_engine(SAMPLE), DuckDBEngine)
    assert spark_type("int") == "INTEGER" and spark_type("decimal(10,2)") == "DECIMAL(10,2)"
    assert spark_type("timestamp") == "TIMESTAMP WITH TIME ZONE"  # refused for dates


#: Every type DuckDB writes that the footer converts (the sample tables' and the neighbour
#: worlds' among them), and types it leaves to Spark's inference.
FOOTER_TYPES = ["TINYINT", "SMALLINT", "INTEGER", "BIGINT", "FLOAT", "DOUBLE", "VARCHAR",
                "BOOLEAN", "DATE", "TIMESTAMP", "TIMESTAMPTZ", "DECIMAL(4,1)", "DECIMAL(10,2)",
                "DECIMAL(18,3)", "DECIMAL(38,10)", "BLOB"]
LEFT_TO_SPARK = ["UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "TIME", "INTERVAL", "UUID",
                 "INTEGER[]", "STRUCT(a INTEGER)", "MAP(VARCHAR, INTEGER)"]


def test_footer_schema_is_the_one_spark_infers(tmp_path: Path,
                                               spark_cluster: SparkCluster) -> None:
    """A classic session opens each Parquet file with the schema read from its footer
    (dpsql.engines.spark.footer, no Spark job): exactly the StructType Spark's inference
    gives, on every sample table and on a file of every plain type; anything else (and a
    file whose footer holds Spark's own schema) is left to Spark's inference."""
    import duckdb

    from dpsql.engines.spark.footer import SPARK_ROW_METADATA, spark_types, struct_type

    with duckdb.connect() as con:
        columns = ", ".join(f"CAST(NULL AS {t}) AS c{i}" for i, t in enumerate(FOOTER_TYPES))
        con.execute(f"COPY (SELECT {columns}) TO '{tmp_path / 'typed.parquet'}'")
        for i, kind in enumerate(LEFT_TO_SPARK):
            con.execute(f"COPY (SELECT 1 AS a, CAST(NULL AS {kind}) AS b) TO "
                        f"'{tmp_path / f'other{i}.parquet'}'")
        con.execute(f"COPY (SELECT 1 AS a) TO '{tmp_path / 'by_spark.parquet'}' (FORMAT "
                    f"parquet, KV_METADATA {{'{SPARK_ROW_METADATA}': '{{}}'}})")
    engine = SparkEngine(spark_cluster.url(SAMPLE))
    try:
        session = engine._session
        for path in [*sorted(SAMPLE.glob("*.parquet")), tmp_path / "typed.parquet"]:
            columns_read = spark_types(path)
            assert columns_read is not None, path
            assert struct_type(session, columns_read) == session.read.parquet(
                str(path)).schema, path
        assert engine.tables()["people"] == [
            (f.name, spark_type(f.dataType.simpleString()))
            for f in session.read.parquet(str(SAMPLE / "people.parquet")).schema.fields]
    finally:
        engine.close()
    assert [spark_types(tmp_path / f"other{i}.parquet") for i in range(len(LEFT_TO_SPARK))
            ] == [None] * len(LEFT_TO_SPARK)
    assert spark_types(tmp_path / "by_spark.parquet") is None


@pytest.mark.parametrize(("url", "hidden", "extra"), [
    ("sc://127.0.0.1:1", "grpc", "dpsql[spark-connect]"),
    ("spark://127.0.0.1:1", "pyspark.sql", "dpsql[spark]")])
def test_a_missing_package_names_the_extra_to_install(
        monkeypatch: pytest.MonkeyPatch, url: str, hidden: str, extra: str) -> None:
    """Without Connect's client packages (grpcio, ...), or without PySpark, opening the
    engine is an EngineError naming the extra that installs them, not PySpark's traceback.
    The import failure is simulated: the module is hidden, and every Connect module is
    imported afresh (PySpark checks its packages when they are first imported)."""
    import sys

    for name in [n for n in sys.modules if n.startswith("pyspark.sql.connect")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, hidden, None)  # `import grpc` raises ImportError
    with pytest.raises(EngineError, match=re.escape(f"pip install '{extra}'")):
        SparkEngine(f"{url}/?folder={SAMPLE}")


def test_the_postgres_engine_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from dpsql.engines.postgres.engine import PostgresEngine

    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(EngineError, match=re.escape("pip install 'dpsql[postgres]'")):
        PostgresEngine("postgresql://nobody@127.0.0.1:1/none")
