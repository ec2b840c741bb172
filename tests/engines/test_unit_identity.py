"""A row's fate depends on its own unit alone, and a unit is one canonical value everywhere
(issue 17): adversarial neighbours D and D' (one unit added or removed), the *noise-free*
engine query on both, every exact measurement moving by at most its declared sensitivity.

Two leak classes, each with the issue's examples and variants, then their siblings:

* three-valued logic in semi- and anti-joins (:func:`dpsql.query.joins.null_outer`): a row whose
  outer unit is NULL -- NULL-filled by a LEFT JOIN (a row of a NULL unit, even in a
  ``one_row_per_unit`` table, is read by no query) -- must not pass or fail by whether
  *anyone* matches;
* the unit's identity (:meth:`dpsql.query.total_expressions.Reader.unit`): spellings of one unit
stored as text
  ('99', '099', '+99', ' 99', ...) are one unit in bounding as in filters, values that do not
  convert are NULL units, and units are never clamped (two people merged in a join, or a
  ``unit_path`` link leading to several rows);
* siblings: NULL and dangling ``unit_path`` links, NULL keys of public joins.

Each test runs on DuckDB and on PostgreSQL (the throw-away cluster of conftest.py); the
issue's two examples on Spark too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import duckdb
import pytest
import tomli_w

import dpsql
from dpsql.errors import JoinRefused, MetadataError
from dpsql.execution.perturb import histogram_arrays
from dpsql.query.parse import parse_query
from dpsql.routes.pipeline import engine_sql
from dpsql.routes.series import two_releases
from tests.engines.test_engines_differential import ENGINES

SALT = 424242
ENGINE_NAMES = ["duckdb", "postgres"]
_copies = iter(range(10**6))

PEOPLE = {"privacy_unit": "pid", "one_row_per_unit": True, "columns": {
    "pid": {"type": "int", "nullable": True}, "age": {"type": "int", "lower": 0, "upper": 100}}}
VISITS = {"privacy_unit": "pid", "max_rows_per_unit": 3, "max_groups_per_unit": 1,
          "columns": {"vid": {"type": "int", "unique": True},
                      "pid": {"type": "int", "nullable": True},
                      "amount": {"type": "float", "lower": 0, "upper": 100}}}
ITEMS = {"unit_path": "vid -> visits.vid", "max_rows_per_unit": 4, "max_groups_per_unit": 1,
         "columns": {"vid": {"type": "int", "nullable": True},
                     "cost": {"type": "float", "lower": 0, "upper": 10}}}
CITIES = {"public": True, "columns": {"city": {"type": "text", "nullable": True},
                                      "region": {"type": "text", "nullable": True}}}


def measured(db: dpsql.Database, sql: str) -> dict[tuple[object, ...], float]:
    """The exact measurements of ``sql`` (:func:`measured_plan`)."""
    return measured_plan(db, db.plan(sql))


def measured_plan(db: dpsql.Database, plan: Any) -> dict[tuple[object, ...], float]:
    """The exact measurements of ``plan``: (measurement, group key, histogram bucket) -> value
    (fixed-point sums and weighted counts in their own units, m.step per grid unit)."""
    text, salted = engine_sql(plan, db.engine)
    rows = db.engine.execute(text, [SALT] if salted else [])[1]
    nkeys, out = len(plan.keys), {}
    for row in rows:
        for m, value in zip(plan.measurements, row[nkeys:], strict=True):
            buckets = dict(zip(*histogram_arrays(value), strict=True)) \
                if isinstance(value, (dict, list)) else {None: value}
            for bucket, v in buckets.items():
                out[(m.name, *row[:nkeys], bucket)] = float(v or 0) * (m.step or 1)
    return out


def assert_neighbours(d: dpsql.Database, d_prime: dpsql.Database, sql: str) -> None:
    """Every measurement moves from D to D' by at most its declared L1 sensitivity (summed
    over groups and buckets: the unit's whole contribution vector)."""
    plan = d.plan(sql)
    a, b = measured(d, sql), measured(d_prime, sql)
    for m in plan.measurements:
        moved = sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in {*a, *b} if k[0] == m.name)
        assert moved <= m.l1 + 1e-9, f"{sql}: {m.name} moved by {moved} > l1 = {m.l1} " \
                                     f"({a} on D, {b} on D')"


@pytest.fixture(scope="module")
def copies() -> Iterator[dict[tuple[str, ...], dpsql.Database]]:
    """The module's databases copied into PostgreSQL or Spark, by engine and content: the
    tests that differ in their query alone share them (a copy took about a second)."""
    opened: dict[tuple[str, ...], dpsql.Database] = {}
    yield opened
    for db in opened.values():
        db.close()


def open_db(request: pytest.FixtureRequest, make_db: Callable[..., Any], engine: str,
            sql: list[str], tables: dict[str, Any], name: str) -> dpsql.Database:
    """The crafted database (``make_db``) on DuckDB, or its tables copied into ``engine``
    (once per content: :func:`copies`)."""
    if engine == "duckdb":
        return make_db(sql, tables, name=name).db
    opened = request.getfixturevalue("copies")
    key = (engine, json.dumps(tables, sort_keys=True), *sql)
    if key not in opened:
        opened[key] = _copied(request, engine, sql, tables, name)
    return opened[key]


def _copied(request: pytest.FixtureRequest, engine: str, sql: list[str],
            tables: dict[str, Any], name: str) -> dpsql.Database:
    folder = request.getfixturevalue("tmp_path_factory").mktemp(f"{engine}-{name}")
    with duckdb.connect(str(folder / "db.duckdb")) as con:
        for statement in sql:
            con.execute(statement)
    (folder / "meta.toml").write_text(tomli_w.dumps({"tables": tables}), encoding="utf-8")
    if engine == "spark":  # Parquet files of the tables, read by the run's Spark cluster
        with duckdb.connect(str(folder / "db.duckdb"), read_only=True) as con:
            for table in tables:
                con.execute(f"COPY {table} TO '{folder / table}.parquet' (FORMAT parquet)")
        target = request.getfixturevalue("spark_cluster").url(folder)
    else:
        target = ENGINES[engine](request, folder / "db.duckdb", f"{name}_{next(_copies)}")
    return dpsql.Database(target, folder / "meta.toml")


def pair(request: pytest.FixtureRequest, make_db: Callable[..., Any], engine: str,
         d: list[str], d_prime: list[str], tables: dict[str, Any]
         ) -> tuple[dpsql.Database, dpsql.Database]:
    return (open_db(request, make_db, engine, d, tables, "d"),
            open_db(request, make_db, engine, d_prime, tables, "d_prime"))


# --- 1. three-valued logic in semi- and anti-joins ------------------------------------------

def _people_visits(extra_people: str = "", extra_visits: str = "",
                   visit_pid: str = "BIGINT") -> list[str]:
    people = ", ".join(f"({i}, 30)" for i in range(1, 21)) + extra_people
    visits = ", ".join(f"({100 + i}, {i}, 10.0)" for i in range(1, 21)) + extra_visits
    return [f"CREATE TABLE people AS SELECT * FROM (VALUES {people}) t(pid, age)",
            f"CREATE TABLE visits AS SELECT vid, CAST(pid AS {visit_pid}) AS pid, amount "
            f"FROM (VALUES {visits}) t(vid, pid, amount)"]


NULL_PEOPLE = "".join(f", (NULL, {20 + i})" for i in range(30))
# Person 99: a people row, and a visit that the anti-join's predicate matches.
PERSON_99 = (", (99, 30)", ", (999, 99, 90.0)")
SEMI_QUERIES = [
    # the example: NULL-filled v.pid, NOT IN naming one person
    "SELECT COUNT(*) FROM people p LEFT JOIN visits v ON v.pid = p.pid AND v.vid < 0 "
    "WHERE v.pid NOT IN (SELECT pid FROM visits WHERE pid = 99 AND amount > 50)",
    "SELECT COUNT(*) FROM people p LEFT JOIN visits v ON v.pid = p.pid AND v.vid < 0 "
    "WHERE v.pid NOT IN (SELECT pid FROM visits WHERE amount > 50)",
    "SELECT COUNT(*) FROM people p LEFT JOIN visits v ON v.pid = p.pid AND v.vid < 0 "
    "WHERE NOT EXISTS (SELECT 1 FROM visits w WHERE w.pid = v.pid AND w.amount > 50)",
    "SELECT COUNT(*) FROM people p LEFT JOIN visits v ON v.pid = p.pid AND v.vid < 0 "
    "WHERE v.pid IN (SELECT pid FROM visits WHERE amount > 50)",
    "SELECT COUNT(*) FROM people p LEFT JOIN visits v ON v.pid = p.pid AND v.vid < 0 "
    "WHERE EXISTS (SELECT 1 FROM visits w WHERE w.pid = v.pid AND w.amount > 50)",
    # a one_row_per_unit table with NULL-unit rows (dropped: a NULL unit is no one)
    "SELECT COUNT(*) FROM people WHERE pid NOT IN (SELECT pid FROM visits WHERE amount > 50)",
    "SELECT COUNT(*) FROM people p WHERE NOT EXISTS (SELECT 1 FROM visits v "
    "WHERE v.pid = p.pid AND v.amount > 50)",
    "SELECT COUNT(*), SUM(age) FROM people WHERE pid NOT IN (SELECT pid FROM visits "
    "WHERE amount > 50) AND pid NOT IN (SELECT pid FROM visits WHERE amount > 60)",
    # the anti-join over the bounded table's own rows
    "SELECT COUNT(*) FROM visits v WHERE NOT EXISTS (SELECT 1 FROM visits w "
    "WHERE w.pid = v.pid AND w.amount > 50)",
]


@pytest.mark.parametrize("engine", ENGINE_NAMES)
@pytest.mark.parametrize("sql", SEMI_QUERIES)
def test_a_null_outer_unit_never_depends_on_who_matches(
        request: pytest.FixtureRequest, make_db: Callable[..., Any], engine: str,
        sql: str) -> None:
    """D' adds person 99, the only one whose rows the subquery's predicate matches: rows
    whose outer unit is NULL must not all flip (about 20 + 30 of them did)."""
    tables = {"people": PEOPLE, "visits": VISITS}
    d, d_prime = pair(request, make_db, engine, _people_visits(NULL_PEOPLE),
                      _people_visits(NULL_PEOPLE + PERSON_99[0], PERSON_99[1]), tables)
    assert_neighbours(d, d_prime, sql)
    assert_neighbours(d_prime, d, sql)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_null_outer_units_have_the_documented_fate(
        request: pytest.FixtureRequest, make_db: Callable[..., Any], engine: str) -> None:
    """NOT EXISTS keeps a row whose outer unit is NULL (SQL's answer: no row equals NULL);
    NOT IN, IN and EXISTS drop it, whether or not the subquery has rows. A row whose own unit
    is NULL (the 30 of the one_row_per_unit table) is no one's and never read (issue 35)."""
    db = open_db(request, make_db, engine, _people_visits(NULL_PEOPLE), {
        "people": PEOPLE, "visits": VISITS}, "d")
    filled = "FROM people p LEFT JOIN visits w ON w.pid = p.pid AND w.vid < 0"  # w.pid NULL
    for pred in ("amount > 50", "amount > 5"):  # the subquery empty, then not
        not_in = measured(db, f"SELECT COUNT(*) FROM people WHERE pid NOT IN (SELECT pid FROM "
                              f"visits WHERE {pred})")
        not_exists = measured(db, "SELECT COUNT(*) FROM people p WHERE NOT EXISTS (SELECT 1 "
                                  f"FROM visits v WHERE v.pid = p.pid AND v.{pred})")
        identified = 20 if pred == "amount > 50" else 0
        assert list(not_in.values()) == [identified], pred
        assert list(not_exists.values()) == [identified], pred
        null_not_in = measured(db, f"SELECT COUNT(*) {filled} WHERE w.pid NOT IN (SELECT pid "
                                   f"FROM visits WHERE {pred})")
        null_not_exists = measured(db, f"SELECT COUNT(*) {filled} WHERE NOT EXISTS (SELECT 1 "
                                       f"FROM visits v WHERE v.pid = w.pid AND v.{pred})")
        assert list(null_not_in.values()) == [0], pred
        assert list(null_not_exists.values()) == [20], pred


# --- 2. one canonical unit ------------------------------------------------------------------

SPELLINGS = ["99", "099", "+99", " 99", "99 ", "0099", " +099 ", "00099", "+0099", "  99  "]
NOT_NUMBERS = ["abc", "", "x99", "99x", "--1", "nine", "9 9", "1e999999", "NaN", "0x"]


def _text_visits(extra: list[str]) -> list[str]:
    """visits with pid stored as text (declared int): 20 people with one row each."""
    rows = [f"({100 + i}, '{i}', 10.0)" for i in range(1, 21)]
    rows += [f"({1000 + j}, '{pid}', 40.0)" for j, pid in enumerate(extra)]
    return ["CREATE TABLE visits (vid BIGINT, pid VARCHAR, amount DOUBLE)",
            f"INSERT INTO visits VALUES {', '.join(rows)}",
            "CREATE TABLE people AS SELECT i AS pid, 30 AS age FROM range(1, 21) t(i) "
            "UNION ALL SELECT 99, 30"]


UNIT_QUERIES = [
    "SELECT COUNT(*) FROM visits WHERE pid = 99",
    "SELECT COUNT(*), SUM(amount) FROM visits",
    "SELECT COUNT(DISTINCT pid) FROM visits",
    "SELECT MAX(amount), COUNT(amount) FROM visits",  # bounded by a sample of rows
    "SELECT COUNT(*) FROM visits v JOIN people p ON v.pid = p.pid",
    "SELECT COUNT(*) FROM people p JOIN visits v ON v.pid = p.pid",
    "SELECT COUNT(*) FROM visits a JOIN visits b ON a.pid = b.pid",
    "SELECT COUNT(*) FROM visits v WHERE EXISTS (SELECT 1 FROM visits w WHERE w.pid = v.pid "
    "AND w.amount > 20)",
]


@pytest.mark.parametrize("engine", ENGINE_NAMES)
@pytest.mark.parametrize("sql", UNIT_QUERIES)
def test_spellings_of_one_unit_are_one_unit(
        request: pytest.FixtureRequest, make_db: Callable[..., Any], engine: str,
        sql: str) -> None:
    """D' adds person 99 with k = 3 rows under each of 10 spellings: 30 rows that WHERE pid
    = 99 matches, bounded together to 3 (they moved the count by 30)."""
    tables = {"visits": VISITS, "people": PEOPLE}
    extra = [s for s in SPELLINGS for _ in range(3)]
    d, d_prime = pair(request, make_db, engine, _text_visits([]), _text_visits(extra), tables)
    assert_neighbours(d, d_prime, sql)
    if sql == UNIT_QUERIES[0]:  # every spelling is the unit 99, bounded to k rows
        assert list(measured(d_prime, sql).values()) == [3]


@pytest.mark.parametrize("engine", ENGINE_NAMES)
@pytest.mark.parametrize("sql", UNIT_QUERIES[1:4])
def test_values_that_do_not_convert_are_null_units(
        request: pytest.FixtureRequest, make_db: Callable[..., Any], engine: str,
        sql: str) -> None:
    """Rows whose unit does not convert to the declared int belong to no unit: dropped, as
    NULL units are (each was a unit of its own, k rows apiece)."""
    extra = [s for s in NOT_NUMBERS for _ in range(3)]
    d, d_prime = pair(request, make_db, engine, _text_visits([]), _text_visits(extra),
                      {"visits": VISITS, "people": PEOPLE})
    assert measured(d, sql) == measured(d_prime, sql)


BOUNDED_PID = {"int": {"type": "int", "lower": 0, "upper": 50}}


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_units_beyond_declared_bounds_are_not_merged_by_a_join(
        request: pytest.FixtureRequest, make_db: Callable[..., Any], engine: str) -> None:
    """pid declared within [0, 50]: persons 50 and 70 are two units. Joined through the
    clamped read, 70's visits met 50's people row, so removing person 50 removed rows of
    person 70 as well (6 rows, with k = 3)."""
    people = {**PEOPLE, "columns": {**PEOPLE["columns"], "pid": BOUNDED_PID["int"]}}
    visits = {**VISITS, "columns": {**VISITS["columns"], "pid": BOUNDED_PID["int"]}}

    def data(person_50: bool) -> list[str]:
        return [f"CREATE TABLE people AS SELECT * FROM (VALUES (1, 30)"
                f"{', (50, 30)' * person_50}) t(pid, age)",
                "CREATE TABLE visits (vid BIGINT, pid BIGINT, amount DOUBLE)",
                "INSERT INTO visits VALUES (2, 70, 1.0), (3, 70, 1.0), (4, 70, 1.0)" + (
                    ", (5, 50, 1.0), (6, 50, 1.0), (7, 50, 1.0)" if person_50 else "")]

    d, d_prime = pair(request, make_db, engine, data(True), data(False),
                      {"people": people, "visits": visits})
    for sql in ("SELECT COUNT(*) FROM people p JOIN visits v ON v.pid = p.pid",
                "SELECT COUNT(*) FROM visits v JOIN people p ON v.pid = p.pid",
                "SELECT COUNT(*), SUM(v.amount) FROM visits v JOIN people p ON p.pid = v.pid",
                "SELECT COUNT(*) FROM visits v LEFT JOIN people p USING (pid) "
                "WHERE p.age IS NOT NULL",
                "SELECT COUNT(*) FROM visits v WHERE v.pid IN (SELECT pid FROM people)"):
        assert_neighbours(d, d_prime, sql)


# --- 3. siblings: unit_path links, public join keys ---------------------------------------

@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_a_clamped_path_link_does_not_lead_to_another_unit(
        request: pytest.FixtureRequest, make_db: Callable[..., Any], engine: str) -> None:
    """vid declared within [0, 100]: person 1's visit 150 and person 2's visit 100 are two
    rows. Clamped, person 1's 100 items (cost -10) led to person 2's visit instead, so
    removing person 1 moved person 2's bounded sum from about -37 to 40."""
    visits = {**VISITS, "columns": {**VISITS["columns"], "vid": {
        "type": "int", "unique": True, "lower": 0, "upper": 100}}}
    items = {**ITEMS, "columns": {"vid": {"type": "int", "lower": 0, "upper": 100},
                                  "cost": {"type": "float", "lower": -10, "upper": 10}}}

    def data(person_1: bool) -> list[str]:
        return ["CREATE TABLE visits (vid BIGINT, pid BIGINT, amount DOUBLE)",
                f"INSERT INTO visits VALUES {'(150, 1, 1.0), ' * person_1}(100, 2, 1.0)",
                "CREATE TABLE items AS SELECT 100 AS vid, 10.0 AS cost FROM range(4)" + (
                    " UNION ALL SELECT 150, -10.0 FROM range(100)" if person_1 else "")]

    d, d_prime = pair(request, make_db, engine, data(True), data(False),
                      {"visits": visits, "items": items})
    for sql in ("SELECT COUNT(*), SUM(cost) FROM items",
                "SELECT SUM(i.cost) FROM items i JOIN visits v ON i.vid = v.vid"):
        assert_neighbours(d, d_prime, sql)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_null_and_dangling_path_links_belong_to_no_one(
        request: pytest.FixtureRequest, make_db: Callable[..., Any], engine: str) -> None:
    """Items whose link is NULL or leads nowhere, and visits of no person: dropped on D and
    D' alike; D' adds person 3 with a visit and 9 items (k = 4 kept)."""
    def data(extra: bool) -> list[str]:
        visits = "(10, 1, 1.0), (20, 2, 1.0), (30, NULL, 1.0), (NULL, 4, 1.0)" + (
            ", (40, 3, 1.0)" if extra else "")
        items = ("(10, 1.0), (20, 2.0), (NULL, 3.0), (NULL, 4.0), (99, 5.0), (30, 6.0)"
                 + ", (40, 7.0)" * (9 if extra else 0))
        return ["CREATE TABLE visits (vid BIGINT, pid BIGINT, amount DOUBLE)",
                f"INSERT INTO visits VALUES {visits}",
                "CREATE TABLE items (vid BIGINT, cost DOUBLE)",
                f"INSERT INTO items VALUES {items}"]

    d, d_prime = pair(request, make_db, engine, data(False), data(True),
                      {"visits": VISITS, "items": ITEMS})
    for sql in ("SELECT COUNT(*), SUM(cost) FROM items",
                "SELECT COUNT(*) FROM items i LEFT JOIN visits v ON i.vid = v.vid",
                "SELECT COUNT(*) FROM visits v WHERE EXISTS (SELECT 1 FROM visits w "
                "WHERE w.pid = v.pid AND w.vid > 15)"):
        assert_neighbours(d, d_prime, sql)
    assert list(measured(d, "SELECT COUNT(*) FROM items").values()) == [2]  # items 10 and 20 only


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_null_keys_of_a_public_join_depend_on_the_row_alone(
        request: pytest.FixtureRequest, make_db: Callable[..., Any], engine: str) -> None:
    """NULL join keys on either side of a public join match nothing; LEFT JOIN NULL-fills
    them, row by row. D' adds person 5, whose city is NULL."""
    people = {**PEOPLE, "columns": {**PEOPLE["columns"], "city": {
        "type": "text", "nullable": True}}}

    def data(extra: bool) -> list[str]:
        rows = "(1, 30, 'Ames'), (2, 30, NULL), (3, 30, 'Bend'), (NULL, 30, NULL)" + (
            ", (5, 30, NULL)" if extra else "")
        return [f"CREATE TABLE people AS SELECT * FROM (VALUES {rows}) t(pid, age, city)",
                "CREATE TABLE cities AS SELECT * FROM (VALUES ('Ames', 'N'), (NULL, 'S'), "
                "('Bend', NULL)) t(city, region)"]

    d, d_prime = pair(request, make_db, engine, data(False), data(True),
                      {"people": people, "cities": CITIES})
    for sql in ("SELECT COUNT(*) FROM people p JOIN cities c ON p.city = c.city",
                "SELECT COUNT(*), COUNT(c.region) FROM people p LEFT JOIN cities c "
                "ON p.city = c.city",
                "SELECT COUNT(*) FROM people p LEFT JOIN cities c ON p.city = c.city "
                "WHERE c.region IS NULL"):
        assert_neighbours(d, d_prime, sql)


@pytest.mark.spark
@pytest.mark.parametrize("sql", [SEMI_QUERIES[0], SEMI_QUERIES[6]])
def test_on_spark_a_null_outer_unit_never_depends_on_who_matches(
        request: pytest.FixtureRequest, make_db: Callable[..., Any], sql: str) -> None:
    test_a_null_outer_unit_never_depends_on_who_matches(request, make_db, "spark", sql)


@pytest.mark.spark
@pytest.mark.parametrize("sql", UNIT_QUERIES[:1])
def test_on_spark_spellings_of_one_unit_are_one_unit(
        request: pytest.FixtureRequest, make_db: Callable[..., Any], sql: str) -> None:
    test_spellings_of_one_unit_are_one_unit(request, make_db, "spark", sql)


def test_units_of_different_declared_types_are_refused(make_db: Callable[..., Any],
                                                       kit: Any) -> None:
    """A unit is one typed value: joining or semi-joining a unit declared int with one
    declared text is refused before anything runs (the engine would compare them by an
    implicit cast of its own), and so is a unit_path linking columns of two types."""
    text_people = {**PEOPLE, "columns": {**PEOPLE["columns"], "pid": {"type": "text"}}}
    db = make_db(["CREATE TABLE people (pid VARCHAR, age BIGINT)",
                  "CREATE TABLE visits (vid BIGINT, pid BIGINT, amount DOUBLE)"],
                 {"people": text_people, "visits": VISITS}).db
    for sql, words in [
            ("SELECT COUNT(*) FROM visits v JOIN people p ON v.pid = p.pid", "different types"),
            ("SELECT COUNT(*) FROM visits WHERE pid IN (SELECT pid FROM people)", "one type"),
            ("SELECT COUNT(*) FROM people p WHERE NOT EXISTS (SELECT 1 FROM visits v WHERE "
             "v.pid = p.pid)", "one type")]:
        with pytest.raises(JoinRefused, match=words):
            db.plan(sql)
    items = {**ITEMS, "columns": {**ITEMS["columns"], "vid": {"type": "text"}}}
    with pytest.raises(MetadataError, match="declare both with one type"):
        kit.metadata_from({"visits": VISITS, "items": items})


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_both_releases_of_a_series_limit_bound_one_unit(
        request: pytest.FixtureRequest, make_db: Callable[..., Any], engine: str) -> None:
    """A series limit (dpsql.routes.series) is two ordinary plans: the inner aggregate, and the
    outer query filtered by the keys the inner released (public constants; here the stand-in key).
    Each bounds the 10 spellings of person 99 as one unit."""
    visits = {**VISITS, "columns": {**VISITS["columns"], "cat": {
        "type": "text", "values": ["a", "b"], "nullable": True}}}

    def data(extra: bool) -> list[str]:
        rows = [f"({i}, '{i}', 10.0, '{'ab'[i % 2]}')" for i in range(1, 21)]
        rows += [f"({100 + j}, '{s}', 40.0, NULL)" for j, s in enumerate(SPELLINGS * 3)] \
            if extra else []
        return ["CREATE TABLE visits (vid BIGINT, pid VARCHAR, amount DOUBLE, cat VARCHAR)",
                f"INSERT INTO visits VALUES {', '.join(rows)}"]

    d, d_prime = pair(request, make_db, engine, data(False), data(True), {"visits": visits})
    sql = ("SELECT cat, COUNT(*) AS n FROM visits WHERE cat IN (SELECT cat FROM visits "
           "GROUP BY cat ORDER BY COUNT(*) DESC LIMIT 1) OR cat IS NULL GROUP BY cat")
    releases = two_releases(parse_query(sql), d.planner.metadata, d.planner.prepare, 1.0, 0.0,
                            "laplace")
    assert releases is not None
    for plan in (releases.inner, releases.outer):
        a, b = (measured_plan(db, plan) for db in (d, d_prime))
        for m in plan.measurements:
            moved = sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in {*a, *b} if k[0] == m.name)
            assert moved <= m.l1, (m.name, a, b)
