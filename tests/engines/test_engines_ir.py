"""The engine IR (dpsql/engines/ir.py): every node spelled by every engine's dialect, run on
DuckDB and PostgreSQL with the semantics its docstring states; a node without a spelling is
refused when the SQL is generated; what the passes emit holds IR nodes, never anonymous
functions; engines say who they are and what they need of the checker; database URLs stay
text."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

import dpsql
from dpsql.engines import DuckDBEngine, ir, open_engine, url_scheme
from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.engines.postgres.dialect import PostgresDialect
from dpsql.engines.postgres.engine import PostgresEngine, _redacted
from dpsql.engines.spark.dialect import SparkDialect
from dpsql.errors import UnsupportedQuery
from dpsql.execution.perturb import histogram_arrays
from dpsql.execution.rewrite import rewrite
from dpsql.privacy.plan import Plan
from dpsql.query.joins import physical
from grammar_tests.corpus import load_corpus
from grammar_tests.databases import open_database
from tests.engines.test_engines_attacks import UNBOUNDED_META
from tests.support.hash_order import UNIFORMITY_CASES, assert_uniform_order
from tests.support.pgcluster import Cluster

DIALECTS: dict[str, type[Dialect]] = {"duckdb": DuckDBDialect, "postgres": PostgresDialect,
                                      "spark": SparkDialect}
# The test table: a BIGINT, a text that converts or not, a date, a DOUBLE; NULLs in each.
# The doubles: a negative tie, the double just below 1/2 (which 0.5 + x rounds up to 1), and
# a tie whose 0.5 + x is not a double (2^52 - 1/2).
ROWS = [(1, "12", dt.date(1970, 1, 11), -2.5),
        (2 ** 40, " -7 ", dt.date(1969, 12, 31), 0.49999999999999994),
        (None, "x1", None, None), (5, None, dt.date(2025, 3, 1), 2.0 ** 52 - 0.5)]
SALT = 987654321


def column(name: str) -> exp.Expression:
    return exp.column(name, quoted=True)


#: name -> (an IR expression over t, a test of its values on the rows of ROWS in order), in
#: the semantics of ir.py's docstrings.
CASES: dict[str, tuple[exp.Expression, Callable[[list[Any]], bool]]] = {
    "salted hash": (
        ir.SaltedHash(expressions=[exp.Placeholder(this="1"), column("a"), column("s")]),
        lambda got: all(isinstance(h, int) and 0 <= h < ir.HASH_RANGE for h in got) and
        len(set(got)) == len(got)),
    "safe cast": (ir.SafeCast(this=column("s"), to=exp.DataType.build("BIGINT")),
                  lambda got: got == [12, -7, None, None]),
    "exact integer": (exp.Mul(this=ir.ExactInteger(this=column("a")),
                              expression=ir.ExactInteger(this=column("a"))),
                      lambda got: got == [1, 2 ** 80, None, 25]),
    "strict least": (ir.StrictLeast(this=column("a"), expressions=[exp.Literal.number(3)]),
                     lambda got: got == [1, 3, None, 3]),
    "strict greatest": (ir.StrictGreatest(this=column("a"), expressions=[
        exp.Literal.number(3)]), lambda got: got == [3, 2 ** 40, None, 5]),
    "days since epoch": (ir.DaysSinceEpoch(this=column("d")),
                         lambda got: got == [10, -1, None, 20148]),
    "whole": (ir.Whole(this=column("a")), lambda got: got == [1, 2 ** 40, None, 5]),
    "chosen": (exp.Div(this=column("x"), expression=ir.Chosen(this=exp.cast(
        exp.Literal.number(0.5), "DOUBLE"))),
               lambda got: got == [-5.0, 0.9999999999999999, None, 2.0 ** 53 - 1]),
    "round half away": (ir.RoundHalfAway(this=column("x")),
                        lambda got: got == [-3.0, 0.0, None, 2.0 ** 52] and
                        all(isinstance(v, float) for v in got if v is not None)),
}
HISTOGRAM = ir.Histogram(this=ir.StrictLeast(this=column("a"), expressions=[
    exp.Literal.number(6)]))


def _per_row(node: exp.Expression) -> exp.Select:
    return exp.select(exp.alias_(node.copy(), "v")).from_(exp.to_identifier("t")).order_by(
        exp.column("i"))


def _histogram() -> exp.Select:
    return exp.select(exp.alias_(HISTOGRAM.copy(), "v")).from_(exp.to_identifier("t"))


def _as_dict(value: object) -> dict[int, int]:
    """DuckDB's MAP (a dict) or PostgreSQL's JSON object (text keys), as bucket -> count."""
    value = json.loads(value) if isinstance(value, str) else value
    assert isinstance(value, dict)
    return {int(k): int(v) for k, v in value.items()}


@pytest.fixture(scope="module")
def duck(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("ir") / "ir.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t (i INTEGER, a BIGINT, s VARCHAR, d DATE, x DOUBLE)")
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)",
                        [(i, *row) for i, row in enumerate(ROWS)])
    yield path


@pytest.fixture(scope="module")
def engines(request: pytest.FixtureRequest, duck: Path) -> Iterator[dict[str, Any]]:
    """The test table on DuckDB and on PostgreSQL (the session's throw-away cluster)."""
    cluster: Cluster = request.getfixturevalue("pg_cluster")
    url = cluster.database("ir").load_duckdb_file(duck)
    opened = {"duckdb": DuckDBEngine(duck), "postgres": PostgresEngine(url)}
    yield opened
    for engine in opened.values():
        engine.close()


# --- each node, compiled on each dialect -------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", CASES)
def test_each_node_is_spelled_by_each_dialect(name: str, dialect: str) -> None:
    sql = _per_row(CASES[name][0]).sql(dialect=DIALECTS[dialect])
    for node in ir.NODES:  # no IR node leaks under a made-up function name
        assert f"{node.sql_name()}(" not in sql.upper(), (node, sql)


def test_every_dialect_has_a_spelling_or_a_refusal_for_every_node() -> None:
    for name, dialect in DIALECTS.items():
        transforms = dialect.generator_class.TRANSFORMS
        missing = [n.__name__ for n in ir.NODES if n not in transforms]
        assert missing == ([] if name != "spark" else ["Histogram"]), (name, missing)


def test_the_engine_specific_spellings() -> None:
    hashed = _per_row(CASES["salted hash"][0])
    assert "hash($1" in hashed.sql(dialect=DuckDBDialect).lower()
    assert "hash_record_extended(row(" in hashed.sql(dialect=PostgresDialect).lower()
    spark = hashed.sql(dialect=SparkDialect).lower()
    assert "xxhash64(:dpsql_salt" in spark and "$1" not in spark
    exact = _per_row(CASES["exact integer"][0])
    assert "HUGEINT" in exact.sql(dialect=DuckDBDialect)
    assert "AS DECIMAL)" in exact.sql(dialect=PostgresDialect)  # NUMERIC, no precision
    assert "DECIMAL(38, 0)" in exact.sql(dialect=SparkDialect)
    cast = _per_row(CASES["safe cast"][0])
    assert "TRY_CAST" in cast.sql(dialect=SparkDialect)
    assert "TRY_CAST" not in cast.sql(dialect=PostgresDialect)  # a regular expression test
    assert "DATEDIFF" in _per_row(CASES["days since epoch"][0]).sql(dialect=SparkDialect)
    rounded = _per_row(CASES["round half away"][0])
    assert 'ROUND("x")' in rounded.sql(dialect=DuckDBDialect)
    assert "ROUND(`x`)" in rounded.sql(dialect=SparkDialect)
    spelled = rounded.sql(dialect=PostgresDialect)  # PostgreSQL's ROUND ties to even
    assert "TRUNC(" in spelled and "ROUND(" not in spelled
    parsed = exp.StrToDate(this=column("s"), format=exp.Literal.string("%Y-%m-%d"), safe=True)
    # The format is a value, not quoted twice (Spark would look for quote characters).
    assert "TRY_TO_TIMESTAMP(`s`, 'yyyy-M-d')" in parsed.sql(dialect=SparkDialect)


# --- each node, run -----------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
@pytest.mark.parametrize("name", CASES)
def test_each_node_means_the_same_on_each_engine(name: str, engine: str,
                                                 engines: dict[str, Any]) -> None:
    node, expected = CASES[name]
    opened = engines[engine]
    sql = _per_row(node).sql(dialect=opened.dialect)
    got = [row[0] for row in opened.execute(sql, [SALT] if "hash" in name else [])[1]]
    assert expected(got), (engine, name, got)


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_the_histogram_counts_the_non_null_buckets(engine: str,
                                                   engines: dict[str, Any]) -> None:
    opened = engines[engine]
    (value,), = opened.execute(_histogram().sql(dialect=opened.dialect))[1]
    assert _as_dict(value) == {1: 1, 6: 1, 5: 1}


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_a_weighted_histogram_sums_the_weights_of_the_non_null_buckets(
        engine: str, engines: dict[str, Any]) -> None:
    """Quantiles bounded by weights (issue 39.4): bucket -> the sum of its rows' weights, as
    one aggregate in each dialect (DuckDB's two lists, PostgreSQL's JSON object)."""
    opened = engines[engine]
    bucket = HISTOGRAM.this.copy()
    weighted = exp.select(exp.alias_(ir.Histogram(this=bucket, weight=column("i")), "v")).from_(
        exp.to_identifier("t"))
    (value,), = opened.execute(weighted.sql(dialect=opened.dialect))[1]
    value = json.loads(value) if isinstance(value, str) else value
    got = dict(zip(*(a.astype(int).tolist() for a in histogram_arrays(value)), strict=True))
    plain = exp.select(bucket.copy(), exp.Sum(this=column("i"))).from_(exp.to_identifier(
        "t")).where(exp.Not(this=exp.Is(this=bucket.copy(), expression=exp.Null()))).group_by(
        bucket.copy())
    assert got == dict(opened.execute(plain.sql(dialect=opened.dialect))[1]) and got


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_rounding_keeps_nan_and_the_infinities(engine: str, engines: dict[str, Any]) -> None:
    opened = engines[engine]
    specials = ["NaN", "Infinity", "-Infinity"]
    query = exp.select(*[ir.RoundHalfAway(this=exp.cast(exp.Literal.string(v), "DOUBLE"))
                         for v in specials])
    (nan, up, down), = opened.execute(query.sql(dialect=opened.dialect))[1]
    assert math.isnan(nan) and up == math.inf and down == -math.inf


def test_the_salted_hash_depends_on_the_salt(engines: dict[str, Any]) -> None:
    for opened in engines.values():
        sql = _per_row(CASES["salted hash"][0]).sql(dialect=opened.dialect)
        one, again, other = (opened.execute(sql, [s])[1] for s in (SALT, SALT, SALT + 1))
        assert one == again and one != other


@pytest.mark.parametrize("fixed", UNIFORMITY_CASES)
def test_the_salted_hash_orders_values_uniformly_over_salts(
        engines: dict[str, Any], fixed: list[exp.Expression]) -> None:
    for opened in engines.values():
        assert_uniform_order(opened, fixed)


# --- refusals -----------------------------------------------------------------------------


class Unknown(ir.EngineNode):
    """A node no dialect spells."""

    arg_types = {"this": True}  # noqa: RUF012 (sqlglot's own class attribute)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_node_without_a_spelling_is_refused_when_compiled(dialect: str) -> None:
    with pytest.raises(UnsupportedQuery, match="cannot compute Unknown"):
        _per_row(Unknown(this=column("a"))).sql(dialect=DIALECTS[dialect])


def test_a_sort_key_is_the_signed_hash() -> None:
    """A bounding window's ORDER BY sorts by the engine's signed BIGINT hash (Spark's xxhash64,
    PostgreSQL's hash_record_extended): the same order as the value shifted into [0, 2^64)
    that the hash is everywhere else (a DECIMAL, a NUMERIC), sorted faster."""
    hashed = ir.SaltedHash(expressions=[exp.Placeholder(this="1"), exp.column("u")])
    rank = exp.Window(this=exp.RowNumber(), partition_by=[exp.column("u")],
                      order=exp.Order(expressions=[exp.Ordered(this=hashed)]))
    query = exp.select(rank, hashed.copy()).from_("t")
    spark = query.sql(dialect=SparkDialect)
    assert "ORDER BY XXHASH64(:dpsql_salt, u)" in spark, spark
    assert "CAST(XXHASH64(:dpsql_salt, u) AS DECIMAL(20, 0))" in spark, spark
    postgres = query.sql(dialect=PostgresDialect)
    assert "ORDER BY HASH_RECORD_EXTENDED(ROW(u), $1))" in postgres, postgres
    assert "CAST(HASH_RECORD_EXTENDED(ROW(u), $1) AS DECIMAL) + " in postgres, postgres


def test_spark_refuses_a_histogram_inside_an_expression() -> None:
    with pytest.raises(UnsupportedQuery, match="Spark cannot compute Histogram"):
        _histogram().sql(dialect=SparkDialect)


# --- what the passes emit -----------------------------------------------------------------


ENGINE_FACING = (exp.Anonymous, exp.AnonymousAggFunc)


@pytest.fixture(scope="module")
def rewritten_corpus(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, exp.Select]]:
    """Every accepted case of the grammar corpus (of both releases of a two-release query),
    planned on the sample database (the corpus's pinned bounds) and rewritten for its physical
    types: (case id, engine query), planned once for the tests that read them."""
    database = open_database("sample", tmp_path_factory.mktemp("rewritten"))
    out = []
    try:
        for case in load_corpus():
            # "central" is the sample without people's local rows: its accepted cases (no
            # row-level query of people) plan the same on the sample.
            if case.verdict != "accepted" or case.database not in ("sample", "central"):
                continue
            options = {k: v for k, v in case.options.items()
                       if k in ("epsilon", "delta", "mechanism")}
            prepared = database.plan(case.sql, **options)  # type: ignore[arg-type]
            plans = [prepared] if isinstance(prepared, Plan) else [
                p for p in vars(prepared).values() if isinstance(p, Plan)]
            for plan in plans:
                schema = physical(plan.query.relation, database.engine.schema) \
                    if plan.query.relation is not None else \
                    database.engine.schema.get(plan.table.name.lower(), {})
                out.append((case.id, rewrite(plan, schema)))
    finally:
        database.close()
    return out


def test_the_rewritten_corpus_holds_no_anonymous_function(
        rewritten_corpus: list[tuple[str, exp.Select]]) -> None:
    """Every accepted case of the grammar corpus, rewritten for the sample database's physical
    types: an engine-facing function is a sqlglot node or an IR node, never a name that each
    engine would have to recognise."""
    seen: set[type[exp.Expression]] = set()
    for case, tree in rewritten_corpus:
        for node in tree.find_all(*ENGINE_FACING):
            raise AssertionError(f"{case}: {node.sql(dialect='duckdb')}")
        seen.update(type(n) for n in tree.find_all(ir.EngineNode))
    assert len(rewritten_corpus) > 100  # the corpus's accepted cases on the sample data
    assert {ir.SaltedHash, ir.SafeCast, ir.ExactInteger, ir.Histogram,
            ir.StrictLeast, ir.RoundHalfAway} <= seen


def test_sums_inside_the_rewritten_query_are_exact(
        rewritten_corpus: list[tuple[str, exp.Select]]) -> None:
    """Every SUM the rewrite computes inside a CTE or subquery (per unit, per total of the
    weighted query's ``__by``) is an :class:`~dpsql.engines.ir.ExactSum`: Spark's SUM
    of BIGINTs is a BIGINT, which overflowed on two corpus joins (the final SELECT's SUMs are
    widened by each dialect, see dpsql.engines.spark.dialect._exact_sums)."""
    inner = 0
    for case, tree in rewritten_corpus:
        final = {id(s) for p in tree.expressions for s in p.find_all(exp.Sum)}
        for total in tree.find_all(exp.Sum):
            # a sum of row counts (COUNT(*) AS __n) stays below the number of rows, 2^63
            if id(total) not in final and total.this != exp.column("__n"):
                inner += 1
                assert isinstance(total, ir.ExactSum), \
                    f"{case}: {total.sql(dialect='duckdb')[:200]}"
    assert inner > 0  # the weighted and pre-aggregated queries of the corpus


def test_automatic_value_bounds_compile_for_every_dialect(tmp_path: Path) -> None:
    """The ``autoval`` corpus (issue 21.2's value bounds): each choice's engine query
    (:func:`dpsql.execution.rewrite.unit_values`) and the plan calibrated to a bound, spelled by
    DuckDB's, PostgreSQL's and Spark's dialects, with no anonymous function."""
    from dpsql.execution.rewrite import unit_values
    from dpsql.privacy.auto_values import edge, with_values

    database = open_database("autoval", tmp_path)
    compiled = 0
    try:
        for case in load_corpus():
            if case.verdict != "accepted" or case.database != "autoval":
                continue
            options = {k: v for k, v in case.options.items()
                       if k in ("epsilon", "delta", "mechanism")}
            p = database.plan(case.sql, **options)  # type: ignore[arg-type]
            if not isinstance(p, Plan) or not p.values:
                continue
            schema = database.engine.schema.get(p.table.name.lower(), {})
            chosen = with_values(p, tuple(edge(v, 40) for v in p.values))
            for tree in [*(unit_values(p, v, schema) for v in p.values), rewrite(chosen, schema)]:
                assert not list(tree.find_all(*ENGINE_FACING)), case.id
                for dialect in DIALECTS.values():
                    assert tree.sql(dialect=dialect)
                compiled += 1
    finally:
        database.close()
    assert compiled >= 12  # the corpus's cases that choose a bound, each with its plan


# --- engine identity and what the checker reads ---------------------------------------------


class RaisingDuckDB(DuckDBEngine):
    """DuckDB declared to raise where a double overflows, as PostgreSQL does."""

    raises_on_float_overflow = True


def test_float_overflow_is_refused_only_where_the_engine_raises(tmp_path: Path) -> None:
    path, meta = tmp_path / "t.duckdb", tmp_path / "meta.toml"
    meta.write_text(UNBOUNDED_META)  # test_engines_attacks' table
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT i AS id, i::DOUBLE AS x FROM range(20) r(i)")
    sql = "SELECT COUNT(*) FROM t WHERE x * 1e300 > 1"
    with dpsql.Database(path, meta) as db:
        assert db.engine.name == "duckdb" and not db.engine.raises_on_float_overflow
        assert len(db.query(sql).rows) == 1
    with dpsql.Database(metadata=meta, engine=RaisingDuckDB(path)) as db, \
            pytest.raises(UnsupportedQuery, match=r"x \* 1e300 could overflow a double"):
        db.query(sql)


def test_database_urls_stay_text_and_paths_stay_paths(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert url_scheme("postgresql://u:pw@h:5432/db") == "postgresql"
    assert url_scheme("spark:local[2]?folder=x") == "spark" and url_scheme("sc://h:1") == "sc"
    for path in ("local", "local[2]", "data/x.duckdb", "C:\\data", "x:y",
                 Path("postgresql://h/db"), Path("spark:local")):
        assert url_scheme(path) is None, path
    assert _redacted("postgresql://u:pw@h:5432/db") == "postgresql://u@h:5432/db"
    folder = tmp_path / "local"
    folder.mkdir()
    (folder / "t.csv").write_text("id,x\n1,2.5\n")
    monkeypatch.chdir(tmp_path)
    for named in ("local", Path("local")):  # a DuckDB folder named local is DuckDB's
        engine = open_engine(named)
        try:
            assert isinstance(engine, DuckDBEngine) and engine.name == "duckdb"
            assert engine.location == str(folder.resolve())
        finally:
            engine.close()


def test_a_postgres_engine_is_named_by_its_url(engines: dict[str, Any]) -> None:
    engine = engines["postgres"]
    assert engine.name == "postgres" and engine.raises_on_float_overflow
    assert engine.location.startswith("postgresql://") and engine.dialect is PostgresDialect
