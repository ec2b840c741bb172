"""A filter's float comparisons read the column as stored, NaN excluded once (issue 39).

:func:`dpsql.query.total_expressions.total` with ``filtering`` reads a float column compared
with constants as ``NULLIF(x, 'NaN')``, which DuckDB cannot push into its scan. In a top-level
conjunct of a strict comparison it now reads ``x`` and ANDs ``x <> 'NaN'`` to the whole filter
(:func:`~dpsql.query.total_expressions._nan_guards`). These tests run the filter of each form,
old (the guard turned off) and new, over values that tell them apart if they differ -- NaN,
NULL, +-inf, -0.0 and ordinary numbers -- on DuckDB and PostgreSQL, and check that they keep
the same rows; and that the forms that are rewritten are the ones meant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.engines.postgres.dialect import PostgresDialect
from dpsql.engines.spark.dialect import SparkDialect
from dpsql.metadata.metadata import Table
from dpsql.query import total_expressions
from dpsql.query.total_expressions import Reader, total
from tests.conftest import metadata_from

TABLE: Table = metadata_from({"t": {"columns": {
    "x": {"type": "float", "lower": -10, "upper": 10, "nullable": True},
    "y": {"type": "float", "nullable": True},
    "n": {"type": "int", "lower": 0, "upper": 100, "nullable": True}}}}).tables["t"]
PHYSICAL = {"x": "DOUBLE", "y": "DOUBLE", "n": "BIGINT"}

X = ["'NaN'", "NULL", "'Infinity'", "'-Infinity'", "-0.0", "0.0", "5.0", "1.5", "-3.0",
     "10.0", "1e300"]
#: (id, x, y, n): every x with a NaN, a NULL and an ordinary y, n NULL on some rows.
ROWS = [(i * 3 + j, x, y, "NULL" if (i + j) % 4 == 0 else str(i + j))
        for i, x in enumerate(X) for j, y in enumerate(["'NaN'", "NULL", "2.0"])]

COMPARED = ["=", "<>", "!=", "<", "<=", ">", ">="]
CONSTANTS = ["5", "0", "-0.0", "1.5", "-3", "1e300"]
FILTERS = (
    [f"x {op} {c}" for op in COMPARED for c in CONSTANTS]
    + [f"{c} {op} x" for op in COMPARED for c in ("5", "0")]
    + ["x BETWEEN 0 AND 5", "x BETWEEN -0.0 AND 1e300", "x NOT BETWEEN 0 AND 5",
       "NOT x BETWEEN -3 AND 0", "x IN (0, 5)", "x IN (5, NULL)", "x NOT IN (0, 5)",
       "x NOT IN (5, NULL)", "5 IN (x, 5)", "5 IN (x, 0)", "NOT 5 IN (x, 5)",
       "x IS DISTINCT FROM 5", "x IS NOT DISTINCT FROM 5", "x IS NULL", "x IS NOT NULL",
       "NOT x > 5", "NOT NOT x > 5", "NOT (x > 0 AND x < 5)", "NOT (x > 0 OR y < 5)",
       "x > 0 AND x < 5", "(x > 0 AND (x < 5)) AND y >= 2", "x > 0 AND n < 3",
       "x > 0 OR n = 1", "x > 0 AND (x < 5 OR n = 2)", "x > 0 AND y IS NULL",
       "x >= 0 AND NOT (y > 1)", "x <> 5 AND y <> 5", "n > 2 AND n < 9 AND x <= 5",
       "CASE WHEN x > 0 THEN n > 1 ELSE n < 5 END", "x * 2 > 4 AND x < 5",
       "x = y", "x > 0 AND x = y"])


def where(text: str, guards: bool = True) -> exp.Expression:
    """The filter as dpsql runs it, with the NaN guards (new) or without (old)."""
    node = sqlglot.parse_one(f"SELECT * FROM t WHERE {text}", read="duckdb").args["where"].this
    if guards:
        return total(node, TABLE, Reader(TABLE, PHYSICAL), filtering=True)
    none: Callable[..., dict[int, str]] = lambda *_: {}  # noqa: E731
    original = total_expressions._nan_guards
    total_expressions._nan_guards = none  # type: ignore[assignment]
    try:
        return total(node, TABLE, Reader(TABLE, PHYSICAL), filtering=True)
    finally:
        total_expressions._nan_guards = original  # type: ignore[assignment]


def _values(dialect: str) -> str:
    cast = "DOUBLE" if dialect == "duckdb" else "DOUBLE PRECISION"
    return ", ".join(f"({i}, CAST({x} AS {cast}), CAST({y} AS {cast}), {n})"
                     for i, x, y, n in ROWS)


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, x DOUBLE, y DOUBLE, n BIGINT)")
    con.execute(f"INSERT INTO t VALUES {_values('duckdb')}")
    yield con
    con.close()


@pytest.mark.parametrize("text", FILTERS)
def test_duckdb_keeps_the_same_rows(duck: duckdb.DuckDBPyConnection, text: str) -> None:
    def kept(node: exp.Expression) -> list[int]:
        sql = f"SELECT id FROM t WHERE {node.sql(dialect=DuckDBDialect)} ORDER BY id"
        return [r[0] for r in duck.execute(sql).fetchall()]

    assert kept(where(text)) == kept(where(text, guards=False)), where(text).sql()


@pytest.mark.pg
def test_postgres_keeps_the_same_rows(pg_cluster: Any) -> None:
    """Every filter at once, on one database of the run's cluster (small: one connection)."""
    import psycopg

    cluster = pg_cluster.database("nan_guards")
    cluster.execute("CREATE TABLE t (id INTEGER, x DOUBLE PRECISION, y DOUBLE PRECISION, "
                    "n BIGINT)", f"INSERT INTO t VALUES {_values('postgres')}")
    differ = []
    with psycopg.connect(cluster.url()) as con:
        for text in FILTERS:
            kept = [[r[0] for r in con.execute(
                f"SELECT id FROM t WHERE {node.sql(dialect=PostgresDialect)} ORDER BY id"
            ).fetchall()] for node in (where(text), where(text, guards=False))]
            if kept[0] != kept[1]:
                differ.append((text, where(text).sql(dialect=PostgresDialect)))
    assert differ == []


def test_the_rows_tell_the_forms_apart(duck: duckdb.DuckDBPyConnection) -> None:
    """The data can fail the tests above: the plain comparison, unguarded, keeps NaN."""
    plain = duck.execute("SELECT count(*) FROM t WHERE x > 5").fetchone()
    kept = duck.execute(f"SELECT count(*) FROM t WHERE {where('x > 5').sql(dialect=DuckDBDialect)}"
                        ).fetchone()
    assert plain is not None and kept is not None and plain[0] - kept[0] == 3  # NaN's 3 rows


@pytest.mark.parametrize(("text", "guarded"), [
    ("x > 5", ["x"]), ("x BETWEEN 0 AND 5 AND y < 2", ["x", "y"]), ("NOT x IN (0, 5)", ["x"]),
    ("x > 0 AND x < 5", ["x"]), ("n > 1 AND x <> 2", ["x"]),
    ("x > 0 OR n = 1", []), ("NOT (x > 0 AND x < 5)", []), ("x IS DISTINCT FROM 5", []),
    ("5 IN (x, 5)", []), ("x * 2 > 4", []), ("x = y", []), ("n > 1", []),
])
def test_which_columns_are_read_as_stored(text: str, guarded: list[str]) -> None:
    """A guarded column is read bare (pushable: no NULLIF left over it) and guarded once; a
    filter with nothing to guard is the old form exactly."""
    node = where(text)
    guards = [g.this.name for g in node.find_all(exp.NEQ)
              if isinstance(g.expression, exp.Cast) and g.expression.name == "NaN"]
    assert sorted(guards) == guarded
    assert not [n for n in node.find_all(exp.Nullif) if n.this.name in guarded]
    if not guarded:
        assert node == where(text, guards=False)


@pytest.mark.parametrize("text", FILTERS)
def test_every_dialect_compiles(text: str) -> None:
    for dialect in (DuckDBDialect, PostgresDialect, SparkDialect):
        assert where(text).sql(dialect=dialect)
