"""Float underflow on PostgreSQL (dpsql/engines/postgres/underflow.py): a product, quotient or
POWER of doubles that rounds to 0 gives 0, as on DuckDB, where PostgreSQL would raise; what
cannot underflow is left as written; a nest too deep to spell is refused when the SQL is
generated, in time linear in its size. The end-to-end attack (a unit holding 5e-324 or 1e-200
on one side only) is tests/engines/test_engines_attacks.py::test_float_underflow_never_fails.
"""

from __future__ import annotations

import math
import random
import struct
import time
from collections.abc import Iterator

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from dpsql.engines import ir
from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.engines.postgres.dialect import PostgresDialect
from dpsql.engines.postgres.engine import PostgresEngine
from dpsql.engines.postgres.underflow import MAX_GUARDED
from dpsql.engines.spark.dialect import SparkDialect
from dpsql.errors import UnsupportedQuery
from tests.support.pgcluster import Cluster

GUARD = "THEN 0 ELSE"
#: Each operation over the doubles a and b of a row, as the rewrite writes them.
OPERATIONS = ["a * b", "a / b", "a * a", "a * CAST(0.25 AS DOUBLE)", "a * CAST(1e-300 AS DOUBLE)",
              "a / CAST(3e300 AS DOUBLE)", "a / NULLIF(CAST(50 AS BIGINT), 0)",
              "CAST(1e-300 AS DOUBLE) / b", "POWER(a, CAST(2 AS BIGINT))",
              "POWER(a, CAST(3 AS BIGINT))", "POWER(ABS(a), CAST(1.5 AS DOUBLE))",
              "POWER(NULLIF(a, 0), -1)"]
#: A result DuckDB rounds to at most two denormal steps (9.9e-324) may read 0 on PostgreSQL
#: (the module's docstring).
ROUNDED_AWAY = 1.1e-323


def _pg(sql: str) -> str:
    return sqlglot.parse_one(sql, read="duckdb").sql(dialect=PostgresDialect)


# --- what is guarded (no server) -------------------------------------------------------------


@pytest.mark.parametrize("sql", [
    "CAST(a AS BIGINT) * x", "x * 2", "x * CAST(1.5 AS DOUBLE)", "x / CAST(0.5 AS DOUBLE)",
    "x / NULLIF(CAST(1 AS BIGINT), 0)", "CAST(a AS BIGINT) / x", "FLOOR(x) * y",
    "POWER(CAST(a AS BIGINT), 2)", "POWER(x, 0)", "COUNT(*) * x"])
def test_what_cannot_underflow_is_left_as_written(sql: str) -> None:
    assert GUARD not in _pg(f"SELECT {sql} FROM t")


@pytest.mark.parametrize("sql", [
    "x * y", "x / y", "x * x", "x * CAST(0.5 AS DOUBLE)", "x / NULLIF(CAST(50 AS BIGINT), 0)",
    "CAST(1e-300 AS DOUBLE) / y", "POWER(x, 2)", "POWER(x, CAST(0.5 AS DOUBLE)) * y"])
def test_what_can_underflow_is_guarded_on_postgres_only(sql: str) -> None:
    tree = sqlglot.parse_one(f"SELECT {sql} FROM t", read="duckdb")
    assert tree.sql(dialect=PostgresDialect).count(GUARD) == 1
    assert GUARD not in tree.sql(dialect=DuckDBDialect)
    assert GUARD not in tree.sql(dialect=SparkDialect)


def test_the_rewrites_whole_columns_are_left_as_written() -> None:
    """``__p * __c / __n`` (a scaled exact sum): ir.Whole says what the names do not."""
    product = exp.Mul(this=exp.cast(ir.Whole(this=exp.column("__p")), "DOUBLE"),
                      expression=ir.Whole(this=exp.column("__c")))
    ratio = exp.Div(this=product, expression=exp.column("__n"))
    assert GUARD not in exp.select(ratio).sql(dialect=PostgresDialect)
    bare = exp.Div(this=exp.Mul(this=exp.cast(exp.column("__p"), "DOUBLE"),
                                expression=exp.column("__c")), expression=exp.column("__n"))
    assert exp.select(bare).sql(dialect=PostgresDialect).count(GUARD) == 3  # 2 copies inside


def test_a_nest_is_generated_once_and_refused_when_absurd() -> None:
    """Each level writes its operands twice (2^depth), generated once each: a 9-deep product
    of distinct columns is quick, a 30-deep one is refused before its SQL grows absurd."""
    def nest(depth: int) -> exp.Expression:
        node: exp.Expression = exp.column("x0")
        for i in range(1, depth + 1):
            node = exp.Mul(this=exp.Paren(this=node), expression=exp.column(f"x{i}"))
        return exp.select(node)

    start = time.perf_counter()
    sql = nest(9).sql(dialect=PostgresDialect)
    assert sql.count(GUARD) == 2 ** 9 - 1 and len(sql) < MAX_GUARDED
    with pytest.raises(UnsupportedQuery, match=r"over x0, x1, .* nests 1\d products"):
        nest(30).sql(dialect=PostgresDialect)
    assert time.perf_counter() - start < 5


def test_the_refusal_does_not_depend_on_how_constants_are_spelled() -> None:
    """The SQL run after the charge differs from the SQL checked before it in its constants
    only (an automatic bound drawn: 0.018145860519450736 where the cap read 1000.0,
    tests/privacy/test_auto_sql.py): a guarded operation's size counts each number as one
    character, so both have the same fate (here both pass, at 88,569 and 124,969 characters)."""
    def sql(constant: str) -> str:
        return _pg(f"SELECT x * GREATEST(y, {', '.join([f'CAST({constant} AS DOUBLE)'] * 1300)}) "
                   "FROM t")

    assert len(sql("1000.0")) < MAX_GUARDED < len(sql("0.018145860519450736"))


def test_power_needs_a_constant_exponent() -> None:
    with pytest.raises(UnsupportedQuery, match="constant exponent"):
        _pg("SELECT POWER(x, y) FROM t")


# --- the values, DuckDB against PostgreSQL -----------------------------------------------------


def _double(bits: int) -> float:
    return float(struct.unpack(">d", bits.to_bytes(8, "big"))[0])


def _pairs() -> list[tuple[float, float]]:
    """Doubles near the underflow edge (products and quotients whose exact value is a few
    denormals), denormals, NaN, the infinities, zeros, signs."""
    rng = random.Random(7)
    special = [0.0, 5e-324, 1e-323, 0.5, 1.0, 2.0, 1e300, 1.7976931348623157e308, math.inf,
               math.nan, 2.2250738585072014e-308, 1e-170, 1.5e-162]
    pairs = [(a, b) for a in special for b in special]
    for _ in range(400):
        a = math.ldexp(rng.random() + 0.5, rng.randrange(-1074, 60))
        b = rng.uniform(0.2, 4) * 5e-324 / a
        if rng.random() < 0.5:  # a quotient near the edge
            b = a / b if b else 1.0
        pairs.append((a, b))
    pairs += [(_double(rng.randrange(1, 2**53)), rng.uniform(-1, 1)) for _ in range(100)]
    return [(-a if rng.random() < 0.3 else a, b) for a, b in pairs]


def _literal(v: float, double: str) -> str:
    text = "NaN" if math.isnan(v) else "Infinity" if v == math.inf else \
        "-Infinity" if v == -math.inf else repr(v)
    return f"CAST('{text}' AS {double})"


def _runs(sql: str, result: float | None, pair: tuple[float, float]) -> bool:
    """Whether PostgreSQL computes it without an error that is not underflow's: an overflow
    to Infinity from finite operands, a division by 0 (DuckDB: NULL)."""
    used = [v for name, v in zip("ab", pair, strict=True) if name in sql]
    if "/ b" in sql and pair[1] == 0:
        return False
    return result is None or not math.isinf(result) or any(map(math.isinf, used))


@pytest.fixture(scope="module")
def postgres(request: pytest.FixtureRequest) -> Iterator[PostgresEngine]:
    cluster: Cluster = request.getfixturevalue("pg_cluster")
    engine = PostgresEngine(cluster.database("underflow").url())
    yield engine
    engine.close()


def _values(pairs: list[tuple[float, float]], double: str) -> str:
    return "WITH t(i, a, b) AS (VALUES " + ", ".join(
        f"({i}, {_literal(a, double)}, {_literal(b, double)})" for i, (a, b) in pairs) + ") "


@pytest.mark.pg
def test_postgres_gives_duckdbs_values_where_it_would_raise(postgres: PostgresEngine) -> None:
    """Row by row, each operation gives DuckDB's IEEE value (NaN as NaN), or 0 where DuckDB's
    is at most two denormal steps; never an error. Pairs that fail on PostgreSQL for another
    reason (overflow, division by 0) are left out: check.py refuses what could overflow."""
    pairs = list(enumerate(_pairs()))
    select = sqlglot.parse_one(f"SELECT i, {', '.join(OPERATIONS)} FROM t ORDER BY i",
                               read="duckdb")
    with duckdb.connect() as con:
        want = con.execute(_values(pairs, "DOUBLE") + select.sql(dialect=DuckDBDialect)
                           ).fetchall()
    for k, sql in enumerate(OPERATIONS, start=1):
        kept = [pairs[row[0]] for row in want if _runs(sql, row[k], pairs[row[0]][1])]
        one = sqlglot.parse_one(f"SELECT i, {sql} FROM t ORDER BY i", read="duckdb")
        got = postgres.execute(_values(kept, "DOUBLE PRECISION") +
                               one.sql(dialect=PostgresDialect))[1]
        assert [i for i, _ in got] == [i for i, _ in kept]
        zeros = 0
        for i, value in got:
            expected = want[i][k]
            if expected is None or math.isnan(expected):
                assert (value is None) if expected is None else math.isnan(value), (sql, i)
            elif value != expected:
                assert value == 0 and abs(expected) < ROUNDED_AWAY, (sql, pairs[i], value,
                                                                     expected)
                zeros += 1
        assert zeros <= len(got) // 10, (sql, zeros)  # only the few at the very edge
