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

import datetime as dt
from collections.abc import Iterator
from typing import Any

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.engines.postgres.dialect import PostgresDialect
from dpsql.engines.spark.dialect import SparkDialect
from dpsql.errors import UnsupportedQuery
from dpsql.metadata.metadata import Table
from dpsql.query import total_expressions
from dpsql.query.total_expressions import Reader, total
from tests.conftest import metadata_from

TABLE: Table = metadata_from({"t": {"columns": {
    "x": {"type": "float", "lower": -10, "upper": 10, "nullable": True},
    "y": {"type": "float", "nullable": True},
    "n": {"type": "int", "lower": 0, "upper": 100, "nullable": True}}}}).tables["t"]
PHYSICAL = {"x": "DOUBLE", "y": "DOUBLE", "n": "BIGINT", "day": "DATE", "ts": "TIMESTAMP"}
DAYS: Table = metadata_from({"t": {"columns": {
    "day": {"type": "date", "lower": dt.date(2025, 1, 1), "upper": dt.date(2025, 12, 31),
            "nullable": True},
    "ts": {"type": "timestamp", "nullable": True}}}}).tables["t"]

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


def where(text: str, guards: bool = True, table: Table = TABLE) -> exp.Expression:
    """The filter as dpsql runs it (new), or as it ran before issue 39 (``guards`` False: no
    NaN guards, dates and timestamps read clamped)."""
    node = sqlglot.parse_one(f"SELECT * FROM t WHERE {text}", read="duckdb").args["where"].this
    for typed in node.find_all(exp.DataType):  # TIMESTAMP as fold_constants types a constant
        if typed.this == exp.DataType.Type.TIMESTAMPNTZ:
            typed.set("this", exp.DataType.Type.TIMESTAMP)
    if guards:
        return total(node, table, Reader(table, PHYSICAL), filtering=True)
    with pytest.MonkeyPatch.context() as patch:  # the two decisions issue 39 added, undone
        patch.setattr(total_expressions, "_nan_guards", lambda *_: {})
        patch.setattr(total_expressions, "_temporal_inside", lambda *_: False)
        return total(node, table, Reader(table, PHYSICAL), filtering=True)


def _values(dialect: str) -> str:
    cast = "DOUBLE" if dialect == "duckdb" else "DOUBLE PRECISION"
    return ", ".join(f"({i}, CAST({x} AS {cast}), CAST({y} AS {cast}), {n})"
                     for i, x, y, n in ROWS)


def _kept(con: duckdb.DuckDBPyConnection, node: exp.Expression) -> list[int]:
    """The ids of table t's rows that the filter ``node`` keeps, on DuckDB."""
    sql = f"SELECT id FROM t WHERE {node.sql(dialect=DuckDBDialect)} ORDER BY id"
    return [r[0] for r in con.execute(sql).fetchall()]


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, x DOUBLE, y DOUBLE, n BIGINT)")
    con.execute(f"INSERT INTO t VALUES {_values('duckdb')}")
    yield con
    con.close()


@pytest.mark.parametrize("text", FILTERS)
def test_duckdb_keeps_the_same_rows(duck: duckdb.DuckDBPyConnection, text: str) -> None:
    assert _kept(duck, where(text)) == _kept(duck, where(text, guards=False)), where(text).sql()


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


#: (id, day, ts): below, at and above day's declared bounds, +-infinity, NULL; ts unbounded
#: (read within the years 1 to 9999).
INSTANTS = ["NULL", "'-infinity'", "'infinity'", "'2024-06-01'", "'2025-01-01'", "'2025-03-01'",
            "'2025-03-02'", "'2025-12-31'", "'2026-01-01'", "'0001-01-01'", "'9999-12-31'"]
DAY_ROWS = [(i, d, d if d != "'9999-12-31'" else "'9999-12-31 23:59:59.999999'")
            for i, d in enumerate(INSTANTS)]
DAY = "CAST('{}' AS DATE)"
TS = "CAST('{}' AS TIMESTAMP)"
DAY_FILTERS = (
    [f"day {op} {DAY.format(c)}" for op in COMPARED
     for c in ("2025-03-01", "2025-01-01", "2025-01-02", "2025-12-30", "2025-12-31", "2024-01-01",
               "2026-06-01")]
    + [f"ts {op} {TS.format(c)}" for op in COMPARED
       for c in ("2025-03-01 00:00:00", "0001-01-01 00:00:00", "9999-12-31 23:59:59.999999",
                 "2025-03-01 12:00:00.5")]
    + [f"day BETWEEN {DAY.format('2025-03-01')} AND {DAY.format('2025-12-30')}",
       f"day BETWEEN {DAY.format('2025-01-01')} AND {DAY.format('2025-03-01')}",
       f"day NOT BETWEEN {DAY.format('2025-03-01')} AND {DAY.format('2025-06-01')}",
       f"day IN ({DAY.format('2025-03-01')}, {DAY.format('2025-03-02')})",
       f"day IN ({DAY.format('2025-03-01')}, {DAY.format('2025-12-31')})",
       f"day NOT IN ({DAY.format('2025-03-01')}, {DAY.format('2025-01-01')})",
       f"day IS DISTINCT FROM {DAY.format('2025-03-01')}",
       f"day > {DAY.format('2025-03-01')} OR ts IS NULL",
       f"CASE WHEN day < {DAY.format('2025-03-02')} THEN 1 ELSE 0 END = 1",
       "day = CAST('2025-3-1' AS DATE)"]
    + [f"day {op} {TS.format(c)}" for op in COMPARED
       for c in ("2025-03-01 00:00:00", "2025-03-01 12:30:00", "2025-01-01 00:00:00",
                 "2025-01-01 00:00:01", "2025-12-31 00:00:00", "2025-12-30 23:59:59.999999",
                 "2024-12-31 23:59:59")])


def _day_values() -> str:
    return ", ".join(f"({i}, CAST({d} AS DATE), CAST({t} AS TIMESTAMP))"
                     for i, d, t in DAY_ROWS)


@pytest.fixture(scope="module")
def days() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, day DATE, ts TIMESTAMP)")
    con.execute(f"INSERT INTO t VALUES {_day_values()}")
    yield con
    con.close()


@pytest.mark.parametrize("text", DAY_FILTERS)
def test_dates_keep_the_same_rows(days: duckdb.DuckDBPyConnection, text: str) -> None:
    new, old = where(text, table=DAYS), where(text, guards=False, table=DAYS)
    assert _kept(days, new) == _kept(days, old), new.sql()
    for dialect in (PostgresDialect, SparkDialect):
        assert _compiles(new, dialect) == _compiles(old, dialect)


def _compiles(node: exp.Expression, dialect: type[sqlglot.Dialect]) -> bool:
    """PostgreSQL refuses a TRY_CAST to TIMESTAMP, the old form and the new alike."""
    try:
        return bool(node.sql(dialect=dialect))
    except UnsupportedQuery:
        return False


@pytest.mark.pg
def test_postgres_dates_keep_the_same_rows(pg_cluster: Any) -> None:
    import psycopg

    cluster = pg_cluster.database("date_reads")
    cluster.execute("CREATE TABLE t (id INTEGER, day DATE, ts TIMESTAMP)",
                    f"INSERT INTO t VALUES {_day_values()}")
    differ = []
    with psycopg.connect(cluster.url()) as con:
        for text in DAY_FILTERS:
            forms = (where(text, table=DAYS), where(text, guards=False, table=DAYS))
            if not _compiles(forms[1], PostgresDialect):
                continue
            kept = [[r[0] for r in con.execute(
                f"SELECT id FROM t WHERE {node.sql(dialect=PostgresDialect)} ORDER BY id"
            ).fetchall()] for node in forms]
            if kept[0] != kept[1]:
                differ.append((text, forms[0].sql(dialect=PostgresDialect)))
    assert differ == []


@pytest.mark.parametrize(("text", "stored"), [
    (f"day >= {DAY.format('2025-03-01')}", True),
    (f"day BETWEEN {DAY.format('2025-03-01')} AND {DAY.format('2025-04-01')}", True),
    (f"day > {DAY.format('2025-03-01')} OR ts IS NULL", True),
    (f"ts < {TS.format('2025-03-01 00:00:00')}", True),
    (f"day >= {DAY.format('2025-01-01')}", False),  # lo: every earlier day reads as lo
    (f"day < {DAY.format('2025-12-31')}", False),  # hi
    (f"day > {DAY.format('2026-06-01')}", False),
    (f"day IN ({DAY.format('2025-03-01')}, {DAY.format('2025-12-31')})", False),
    (f"day > {TS.format('2025-03-01 00:00:00')}", True),  # a date read as its midnight
    (f"day > {TS.format('2025-12-31 00:00:00')}", False),  # hi's midnight
    (f"day > {TS.format('2025-01-01 00:00:01')}", False),  # lo's day (PostgreSQL reads it so)
    (f"day > {TS.format('2025-01-02 00:00:01')}", True),
    (f"ts > {DAY.format('2025-03-01')}", False),  # a timestamp and a date: not these
    ("day = CAST('2025-3-1' AS DATE)", False),  # not as typed constants are spelled
    ("day = CAST('2025-02-30' AS DATE)", False),  # no such day
    ("ts < CAST('2025-03-01 24:00:00' AS TIMESTAMP)", False),
])
def test_which_dates_are_read_as_stored(text: str, stored: bool) -> None:
    """A date or timestamp compared with constants strictly inside the interval it is read
    clamped to is read as stored (no CASE around it, the scan can filter it)."""
    node = where(text, table=DAYS)
    clamped = any(isinstance(c.parent, exp.LT) and isinstance(c.parent.parent, exp.If)
                  for c in node.find_all(exp.Column))
    assert clamped is not stored
