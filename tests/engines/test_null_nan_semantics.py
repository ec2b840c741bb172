"""One meaning for NULL and NaN on every path (issue 35, item 5), by noise-free answers.

Each query's answer (every noise draw 0: the ``noise_free`` fixture, conftest.py) is compared
with the plain SQL of the documented rule, run by DuckDB on the same world read as the rule
reads it: rows of a NULL unit removed, NaN replaced by NULL, and a count or sum of no rows 0
(docs/sql.md, "NULL, NaN and empty groups"). The world keeps every bound loose (one row per person
in a table of k = 3, values inside their declared bounds), so nothing else can make them
differ. Every test runs on DuckDB and on PostgreSQL.

The three classes the semantic oracle of issue 35 found, each first reproduced here:

* ``COUNT(DISTINCT pid)`` of a ``one_row_per_unit`` table counted a row of a NULL unit (2 for
  people = {1, NULL}, where SQL and the same table without the promise say 1);
* SUM, COUNT_IF (and SUM of a CASE) of no rows or only NULLs are 0, which SQL makes NULL: kept
  (a released NULL would tell whether a group has a non-NULL value), the same on every path,
  with HAVING, ORDER BY and outer expressions reading the released value;
* NaN was NaN in a WHERE comparison with a constant and NULL everywhere else, so that
  ``WHERE amount > 5`` and ``WHERE amount * 2 > 10`` disagreed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import duckdb
import pytest

import dpsql
from tests.engines.test_unit_identity import copies, open_db  # noqa: F401  (copies: a fixture)

pytestmark = pytest.mark.usefixtures("noise_free")
ENGINE_NAMES = ["duckdb", pytest.param("postgres", marks=pytest.mark.pg)]
EPSILON, DELTA = 100.0, 1e-6

VISITS = {"privacy_unit": "pid", "max_rows_per_unit": 3, "max_groups_per_unit": 1, "columns": {
    "pid": {"type": "int", "nullable": True},
    "cat": {"type": "text", "values": ["a", "b", "c"]},
    "city": {"type": "text"},
    "amount": {"type": "float", "lower": 0, "upper": 10, "nullable": True},
    "flag": {"type": "bool", "nullable": True}}}
PEOPLE = {"privacy_unit": "pid", "one_row_per_unit": True, "columns": {
    "pid": {"type": "int", "nullable": True}, "age": {"type": "int", "lower": 0, "upper": 100},
    "score": {"type": "float", "lower": 0, "upper": 10, "nullable": True}}}
TABLES = {"visits": VISITS, "people": PEOPLE}


def _visit(i: int) -> str:
    """Person i's one visit: cat c is never reached; amount i % 10 but NaN for every 7th and
    NULL for every 11th; city 'x' for many, 'y' for persons 30-39 whose amounts are NULL."""
    cat = "a" if i % 2 else "b"
    amount = "'NaN'" if i % 7 == 0 else "NULL" if i % 11 == 0 or i >= 30 else f"{i % 10}.5"
    flag = "NULL" if i % 3 == 0 else "true" if i % 4 else "false"
    city = "y" if i >= 30 else "x"
    return f"({i}, '{cat}', '{city}', {amount}::DOUBLE, {flag})"


WORLD = [
    "CREATE TABLE visits (pid BIGINT, cat VARCHAR, city VARCHAR, amount DOUBLE, flag BOOLEAN)",
    "INSERT INTO visits VALUES " + ", ".join(
        [_visit(i) for i in range(1, 40)] + ["(NULL, 'a', 'x', 9.5, true)"] * 4),
    "CREATE TABLE people (pid BIGINT, age BIGINT, score DOUBLE)",
    "INSERT INTO people VALUES " + ", ".join(
        [f"({i}, {20 + i}, {'NULL' if i % 5 == 0 else repr(float(i % 10))})" for i in range(1, 30)]
        + ["(NULL, 40, 1.0)", "(NULL, 50, 2.0)", "(30, 60, 'NaN'::DOUBLE)"]),
]

#: The world as the rule reads it: no row of a NULL unit, NaN as NULL.
AS_READ = {
    "visits": "SELECT pid, cat, city, CASE WHEN isnan(amount) THEN NULL ELSE amount END AS amount,"
              " flag FROM raw.visits WHERE pid IS NOT NULL",
    "people": "SELECT pid, age, CASE WHEN isnan(score) THEN NULL ELSE score END AS score "
              "FROM raw.people WHERE pid IS NOT NULL",
}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """The reference model: plain SQL over the world as the rule reads it."""
    con = duckdb.connect()
    con.execute("ATTACH ':memory:' AS raw")
    for statement in WORLD:
        con.execute(statement.replace("TABLE visits", "TABLE raw.visits").replace(
            "TABLE people", "TABLE raw.people").replace("INTO visits", "INTO raw.visits")
            .replace("INTO people", "INTO raw.people"))
    for name, sql in AS_READ.items():
        con.execute(f"CREATE VIEW {name} AS {sql}")
    yield con
    con.close()


@pytest.fixture
def world(request: pytest.FixtureRequest, make_db: Callable[..., Any]
          ) -> Callable[[str], dpsql.Database]:
    def opened(engine: str) -> dpsql.Database:
        return open_db(request, make_db, engine, WORLD, TABLES, "nulls")
    return opened


def answer(db: dpsql.Database, sql: str, delta: float = 0.0) -> list[tuple[object, ...]]:
    return [tuple(r) for r in db.query(sql, epsilon=EPSILON, delta=delta).rows]


def expected(reference: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[object, ...]]:
    return [tuple(r) for r in reference.execute(sql).fetchall()]


# --- 1. a NULL unit never counts as a person ------------------------------------------------

@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_count_distinct_unit_of_a_one_row_per_unit_table_is_sqls(
        world: Callable[[str], dpsql.Database], reference: duckdb.DuckDBPyConnection,
        engine: str) -> None:
    db = world(engine)
    raw = expected(reference, "SELECT COUNT(DISTINCT pid) FROM raw.people")
    assert answer(db, "SELECT COUNT(DISTINCT pid) FROM people") == raw == [(30,)]
    for sql in ["SELECT COUNT(*), COUNT(DISTINCT pid), SUM(age) FROM people",
                "SELECT COUNT(DISTINCT pid) FROM people WHERE age >= 40",
                "SELECT COUNT(*) FROM visits v JOIN people p ON v.pid = p.pid WHERE p.age > 30",
                "SELECT cat, COUNT(DISTINCT pid) FROM visits WHERE cat IN ('a', 'b') GROUP BY cat "
                "ORDER BY cat"]:
        assert answer(db, sql) == expected(reference, sql), sql


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_thresholded_keys_count_identified_units_only(
        world: Callable[[str], dpsql.Database], engine: str) -> None:
    """Four rows of a NULL unit in city 'x', none elsewhere: the unit counts that thresholding
    compares with tau (and COUNT(DISTINCT pid)) are the identified people's."""
    db = world(engine)
    rows = answer(db, "SELECT city, COUNT(DISTINCT pid), COUNT(*) FROM visits GROUP BY city "
                      "ORDER BY city", delta=DELTA)
    assert rows == [("x", 29, 29), ("y", 10, 10)]


# --- 2. a count or sum of no rows, or of NULLs only, is 0 ----------------------------------

ZERO_WHEN_EMPTY = [
    # no GROUP BY: no row, only NULL values, only NULL conditions
    "SELECT SUM(amount), COUNT_IF(flag), COUNT(amount) FROM visits WHERE cat = 'c'",
    "SELECT SUM(amount), COUNT_IF(amount > 100), SUM(CASE WHEN amount > 100 THEN 1 END) "
    "FROM visits WHERE city = 'y'",
    "SELECT COUNT_IF(flag AND amount IS NULL), SUM(amount) FILTER (WHERE flag IS NULL AND "
    "amount IS NULL AND cat = 'c') FROM visits",
    # a public domain's empty group, and groups whose values are all NULL
    "SELECT cat, SUM(amount), COUNT_IF(flag), COUNT(amount) FROM visits GROUP BY cat ORDER BY cat",
    "SELECT cat, COUNT_IF(amount > 100) AS c FROM visits GROUP BY cat HAVING c < 2 ORDER BY cat",
    "SELECT cat, SUM(amount) AS s FROM visits GROUP BY cat ORDER BY s, cat",
    "SELECT cat, SUM(amount) + 1, COALESCE(SUM(amount), -1), SUM(amount) IS NULL FROM visits "
    "GROUP BY cat ORDER BY cat",
    # a series limit: the inner release ranks the empty group by its 0
    "SELECT cat, SUM(amount), COUNT_IF(flag) FROM visits JOIN (SELECT cat AS c__, SUM(amount) "
    "AS m FROM visits GROUP BY cat ORDER BY m LIMIT 2) AS s ON cat = c__ GROUP BY cat "
    "ORDER BY cat",
    # a join whose joined rows hold only NULL values
    "SELECT SUM(v.amount), COUNT_IF(v.amount > 0), SUM(p.score) FROM visits v JOIN people p "
    "ON v.pid = p.pid WHERE v.amount IS NULL AND p.score IS NULL",
]
#: The same queries in SQL with the rule written out: every count and sum COALESCEd to 0 (the
#: value HAVING, ORDER BY and the outer expressions then read).
ZERO_WHEN_EMPTY_SQL = [
    "SELECT COALESCE(SUM(amount), 0), COUNT(*) FILTER (WHERE flag), COUNT(amount) FROM visits "
    "WHERE cat = 'c'",
    "SELECT COALESCE(SUM(amount), 0), COUNT(*) FILTER (WHERE amount > 100), "
    "COALESCE(SUM(CASE WHEN amount > 100 THEN 1 END), 0) FROM visits WHERE city = 'y'",
    "SELECT COUNT(*) FILTER (WHERE flag AND amount IS NULL), COALESCE(SUM(amount) FILTER "
    "(WHERE flag IS NULL AND amount IS NULL AND cat = 'c'), 0) FROM visits",
    "SELECT d.cat, COALESCE(SUM(amount), 0), COUNT(*) FILTER (WHERE flag), COUNT(amount) "
    "FROM (VALUES ('a'), ('b'), ('c')) d(cat) LEFT JOIN visits v ON v.cat = d.cat "
    "GROUP BY d.cat ORDER BY d.cat",
    "SELECT d.cat, COUNT(*) FILTER (WHERE amount > 100) AS c FROM (VALUES ('a'), ('b'), ('c')) "
    "d(cat) LEFT JOIN visits v ON v.cat = d.cat GROUP BY d.cat HAVING c < 2 ORDER BY d.cat",
    "SELECT d.cat, COALESCE(SUM(amount), 0) AS s FROM (VALUES ('a'), ('b'), ('c')) d(cat) "
    "LEFT JOIN visits v ON v.cat = d.cat GROUP BY d.cat ORDER BY s, d.cat",
    "SELECT d.cat, COALESCE(SUM(amount), 0) + 1, COALESCE(SUM(amount), 0), false FROM "
    "(VALUES ('a'), ('b'), ('c')) d(cat) LEFT JOIN visits v ON v.cat = d.cat GROUP BY d.cat "
    "ORDER BY d.cat",
    "WITH d AS (SELECT d.cat, COALESCE(SUM(amount), 0) AS s, COUNT(*) FILTER (WHERE flag) "
    "AS n FROM (VALUES ('a'), ('b'), ('c')) d(cat) LEFT JOIN visits v ON v.cat = d.cat GROUP BY "
    "d.cat) SELECT cat, s, n FROM d WHERE cat IN (SELECT cat FROM d ORDER BY s LIMIT 2) "
    "ORDER BY cat",
    "SELECT COALESCE(SUM(v.amount), 0), COUNT(*) FILTER (WHERE v.amount > 0), "
    "COALESCE(SUM(p.score), 0) FROM visits v JOIN people p ON v.pid = p.pid "
    "WHERE v.amount IS NULL AND p.score IS NULL",
]


def test_sql_itself_gives_null_where_the_rule_gives_0(
        reference: duckdb.DuckDBPyConnection) -> None:
    """What the rule departs from: SQL's SUM of no rows is NULL, and so is DuckDB's COUNT_IF
    of no rows or of NULL conditions only (PostgreSQL's COUNT(*) FILTER and BigQuery's COUNTIF
    give 0); HAVING then drops the group SQL makes NULL."""
    assert expected(reference, ZERO_WHEN_EMPTY[0]) == [(None, None, 0)]
    assert expected(reference, ZERO_WHEN_EMPTY[4]) == [("a", 0), ("b", 0)]


@pytest.mark.parametrize("engine", ENGINE_NAMES)
@pytest.mark.parametrize("i", range(len(ZERO_WHEN_EMPTY)))
def test_an_empty_count_or_sum_is_0_on_every_path(
        world: Callable[[str], dpsql.Database], reference: duckdb.DuckDBPyConnection,
        engine: str, i: int) -> None:
    got = answer(world(engine), ZERO_WHEN_EMPTY[i])
    assert got == expected(reference, ZERO_WHEN_EMPTY_SQL[i]), ZERO_WHEN_EMPTY[i]


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_thresholded_groups_of_null_values_sum_to_0(
        world: Callable[[str], dpsql.Database], engine: str) -> None:
    """City 'y' is released (ten people) and their amounts are all NULL."""
    rows = answer(world(engine), "SELECT city, SUM(amount), COUNT_IF(amount > 0) AS n "
                                 "FROM visits GROUP BY city HAVING n < 1 ORDER BY city",
                  delta=DELTA)
    assert rows == [("y", 0.0, 0)]


# --- 3. NaN is NULL wherever a float column of a private table is read ----------------------

#: Queries that SQL answers alike once NaN is NULL (on the raw world they do not: NaN is above
#: every number in DuckDB's and PostgreSQL's comparisons, and poisons SUM).
NAN_QUERIES = [
    "SELECT COUNT(*) FROM visits WHERE amount > 5",
    "SELECT COUNT(*) FROM visits WHERE amount * 2 > 10",
    "SELECT COUNT_IF(amount > 5) FROM visits",
    "SELECT COUNT(*) FROM visits WHERE NOT amount <= 5",
    "SELECT COUNT(amount), COUNT(*) FILTER (WHERE amount IS NULL) FROM visits",
    "SELECT COUNT(*) FROM visits WHERE amount IS NULL OR amount BETWEEN 2 AND 4",
    "SELECT COUNT(*) FROM visits WHERE amount IN (1.5, 2.5) OR amount NOT IN (3.5)",
    "SELECT SUM(amount), SUM(amount * 2) FROM visits WHERE amount >= 0",
    "SELECT CASE WHEN amount > 5 THEN 'hi' ELSE 'lo' END AS k, COUNT(*) FROM visits "
    "GROUP BY k ORDER BY k",
    "SELECT COUNT(*) FROM people WHERE score < 5",
    "SELECT COUNT(*), SUM(score) FROM people WHERE score IS NULL OR score > 8",
    "SELECT COUNT(*) FROM visits v JOIN people p ON v.pid = p.pid AND p.score > 5",
]


def test_nan_is_not_null_in_plain_sql(reference: duckdb.DuckDBPyConnection) -> None:
    """The reproduction: on the raw world, the first three queries disagree in plain SQL's own
    reading too (NaN > 5 holds, NaN * 2 > 10 holds, but dpsql used to clamp the second)."""
    raw = [expected(reference, q.replace("FROM visits", "FROM raw.visits")) for q in
           NAN_QUERIES[:3]]
    cleaned = [expected(reference, q) for q in NAN_QUERIES[:3]]
    assert raw[0] != cleaned[0] and len(set(map(tuple, cleaned))) == 1


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_nan_reads_as_null_in_where_expressions_keys_and_aggregates(
        world: Callable[[str], dpsql.Database], reference: duckdb.DuckDBPyConnection,
        engine: str) -> None:
    db = world(engine)
    for sql in NAN_QUERIES:
        assert answer(db, sql) == expected(reference, sql), sql


def test_the_rules_through_the_dbapi(make_db: Callable[..., Any],
                                     reference: duckdb.DuckDBPyConnection) -> None:
    """A door: ``dpsql.connect`` gives the same noise-free answers (the three rules at once)."""
    crafted = make_db(WORLD, TABLES, name="dbapi")
    queries = [NAN_QUERIES[0], NAN_QUERIES[1], "SELECT COUNT(DISTINCT pid) FROM people",
               ZERO_WHEN_EMPTY[4]]
    wanted = [NAN_QUERIES[0], NAN_QUERIES[1], "SELECT COUNT(DISTINCT pid) FROM raw.people",
              ZERO_WHEN_EMPTY_SQL[4]]
    with dpsql.connect(crafted.path, crafted.metadata_path, epsilon=EPSILON) as connection:
        cursor = connection.cursor()
        for sql, reference_sql in zip(queries, wanted, strict=True):
            cursor.execute(sql)
            assert [tuple(r) for r in cursor.fetchall()] == expected(reference, reference_sql)
