"""Joins (dpsql.query.joins, dpsql.query.bind_joins): the engine's exact per-group values on crafted
data, the joined k and g, public domains and bounds read from public tables, unit paths, semi-joins,
refusals before any charge, and the three front doors."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

import dpsql
from dpsql.errors import JoinRefused, MetadataError, QueryRefused
from dpsql.routes.pipeline import engine_sql
from tests.support.sandbox import served_sandbox

PEOPLE = {"privacy_unit": "pid", "one_row_per_unit": True, "columns": {
    "pid": {"type": "int"}, "age": {"type": "int", "lower": 0, "upper": 100},
    "city": {"type": "text"}}}
VISITS = {"privacy_unit": "pid", "max_rows_per_unit": 3, "max_groups_per_unit": 2,
          "columns": {"vid": {"type": "int", "unique": True}, "pid": {"type": "int"},
                      "cat": {"type": "text", "values": ["a", "b"]},
                      "amount": {"type": "float", "lower": 0, "upper": 100}}}
CITIES = {"public": True, "columns": {"city": {"type": "text"}, "region": {"type": "text"},
                                      "fee": {"type": "float"}}}
ITEMS = {"unit_path": "vid -> visits.vid", "max_rows_per_unit": 4, "max_groups_per_unit": 2,
         "columns": {"vid": {"type": "int"}, "cost": {"type": "float", "lower": 0,
                                                      "upper": 10}}}
SQL = [
    "CREATE TABLE people AS SELECT * FROM (VALUES (1, 30, 'Ames'), (2, 40, 'Bend'), "
    "(3, 50, 'Ames'), (4, 60, 'Dup')) t(pid, age, city)",
    # person 1 has 5 visits (k = 3), person 2 one, person 3 none
    "CREATE TABLE visits AS SELECT * FROM (VALUES (10, 1, 'a', 10.0), (11, 1, 'a', 10.0), "
    "(12, 1, 'b', 10.0), (13, 1, 'b', 10.0), (14, 1, 'a', 10.0), (20, 2, 'a', 50.0)) "
    "t(vid, pid, cat, amount)",
    # Dup matches two public rows; region Empty has no member
    "CREATE TABLE cities AS SELECT * FROM (VALUES ('Ames', 'North', 1.5), ('Bend', 'West', "
    "2.5), ('Dup', 'West', 3.0), ('Dup', 'South', 4.0), ('Cove', 'Empty', 9.0)) "
    "t(city, region, fee)",
    "CREATE TABLE items AS SELECT * FROM (VALUES (20, 1.0), (20, 2.0), (10, 3.0), (99, 5.0)) "
    "t(vid, cost)",
]
TABLES = {"people": PEOPLE, "visits": VISITS, "cities": CITIES, "items": ITEMS}


@pytest.fixture
def crafted(make_db: Callable[..., Any]) -> Any:
    return make_db(SQL, TABLES)


def exact(crafted: Any, kit: SimpleNamespace, sql: str) -> list[tuple[object, ...]]:
    """The engine's exact measurements for ``sql`` (before noise), keys first."""
    plan = crafted.db.plan(sql)
    text, salted = engine_sql(plan, crafted.db.engine)
    _, rows = crafted.db.engine.execute(text, [12345] if salted else [])
    return sorted(rows, key=repr)


def test_private_join_on_the_unit_is_bounded_after_the_join(crafted: Any,
                                                           kit: SimpleNamespace) -> None:
    sql = "SELECT COUNT(*) FROM visits v JOIN people p ON v.pid = p.pid WHERE p.age < 45"
    plan = crafted.db.plan(sql)
    assert (plan.table.rows_per_unit, plan.table.needs_bounding) == (3, True)
    assert plan.cells[0].measurements[0].l1 == 3  # type: ignore[union-attr]
    # person 1: 5 joined rows, 3 kept; person 2: 1 row
    assert exact(crafted, kit, sql) == [(4,)]
    left = exact(crafted, kit, "SELECT COUNT(*), COUNT(v.vid) FROM people p LEFT JOIN visits v "
                               "USING (pid)")
    assert left == [(3 + 1 + 1 + 1, 4)]  # persons 3 and 4 kept, NULL-extended


def test_public_row_multiplicity_sets_k_for_a_one_row_table(crafted: Any,
                                                            kit: SimpleNamespace) -> None:
    """The classic leak: Dup's one row matches two public rows, so the join needs bounding."""
    sql = "SELECT c.region, COUNT(*) FROM people p JOIN cities c ON p.city = c.city GROUP BY 1"
    plan = crafted.db.plan(sql)
    assert (plan.table.rows_per_unit, plan.table.needs_bounding) == (2, True)
    assert plan.domain is not None and {k[0] for k in plan.domain} == {
        "North", "West", "South", "Empty"}  # public groups, the empty one included
    step = plan.measurements[0].step  # counts on weighted rows: in units of 2**-20 rows
    assert [(r, n * step) for r, n in exact(crafted, kit, sql)] == [
        ("North", 2), ("South", 1), ("West", 2)]
    unique = crafted.db.plan("SELECT COUNT(*) FROM people p JOIN cities c ON "
                             "p.city = c.city AND c.region <> 'South'")
    assert unique.table.rows_per_unit == 2  # multiplicity of the key, not of the filter


def test_unique_public_key_keeps_the_one_row_fast_path(make_db: Callable[..., Any]) -> None:
    db = make_db([*SQL[:2], "CREATE TABLE cities AS SELECT 'Ames' AS city, 'N' AS region, "
                  "1.0 AS fee"], {**TABLES, "items": None} if False else
                 {"people": PEOPLE, "visits": VISITS, "cities": CITIES}).db
    plan = db.plan("SELECT COUNT(*) FROM people p LEFT JOIN cities c USING (city)")
    assert (plan.table.rows_per_unit, plan.table.needs_bounding) == (1, False)


def test_public_column_bounds_come_from_public_data(crafted: Any, kit: SimpleNamespace) -> None:
    sql = "SELECT SUM(c.fee) FROM visits v JOIN people p USING (pid) JOIN cities c USING (city)"
    plan = crafted.db.plan(sql)
    assert plan.table.rows_per_unit == 6  # k of visits (3) times Dup's multiplicity (2)
    assert math.isclose(plan.cells[0].measurements[0].l1, 6 * 9.0)  # type: ignore[union-attr]
    # a fixed-point sum (dpsql.privacy.aggregates, "Exact sums")
    (units,), = exact(crafted, kit, sql)
    assert units * plan.measurements[0].step == 5 * 1.5 + 2.5  # k = 6 keeps all 5 rows


def test_unit_path_reaches_the_person_through_its_visit(crafted: Any,
                                                        kit: SimpleNamespace) -> None:
    plan = crafted.db.plan("SELECT COUNT(*), SUM(cost) FROM items")
    assert (plan.table.rows_per_unit, plan.table.needs_bounding) == (4, True)
    # item 99 leads to no visit, so to no person: dropped
    assert exact(crafted, kit, "SELECT COUNT(*) FROM items") == [(3,)]
    sql = "SELECT SUM(i.cost) FROM items i JOIN people p ON i.pid = p.pid WHERE p.age < 45"
    (units,), = exact(crafted, kit, sql)
    assert units * crafted.db.plan(sql).measurements[0].step == 3.0 + 1.0 + 2.0


def test_semi_and_anti_joins_filter_by_the_units_own_rows(crafted: Any,
                                                          kit: SimpleNamespace) -> None:
    semi = "SELECT COUNT(*) FROM people WHERE pid IN (SELECT pid FROM visits WHERE cat = 'b')"
    assert exact(crafted, kit, semi) == [(1,)]
    anti = ("SELECT COUNT(*) FROM people p WHERE NOT EXISTS (SELECT 1 FROM visits v "
            "WHERE v.pid = p.pid)")
    assert exact(crafted, kit, anti) == [(2,)]


@pytest.mark.parametrize(("sql", "error", "words"), [
    ("SELECT COUNT(*) FROM visits v JOIN people p ON v.amount = p.age", JoinRefused, "unit"),
    ("SELECT COUNT(*) FROM visits, people", JoinRefused, "cross join"),
    ("SELECT COUNT(*) FROM cities c LEFT JOIN people p USING (city)", JoinRefused, "first"),
    ("SELECT COUNT(*) FROM visits a JOIN visits b ON a.pid = b.pid JOIN visits c ON "
     "c.pid = a.pid JOIN visits d ON d.pid = a.pid JOIN visits e ON e.pid = a.pid "
     "JOIN visits f ON f.pid = a.pid JOIN visits g ON g.pid = a.pid", JoinRefused, "1000"),
])
def test_refused_before_any_charge(tmp_path: Path, make_db: Callable[..., Any], sql: str,
                                   error: type[Exception], words: str) -> None:
    crafted = make_db(SQL, TABLES)
    meta = tmp_path / "metered.toml"
    text = crafted.metadata_path.read_text() + (
        f'\n[budget]\nledger = "{tmp_path / "ledger.sqlite"}"\n[analysts.eve]\nepsilon = 5.0\n')
    meta.write_text(text)
    with dpsql.Database(crafted.path, meta, analyst="eve") as db:
        with pytest.raises(error, match=words):
            db.query(sql)
        status = db.budget()
        assert status is not None and status.spent.epsilon == 0


@pytest.mark.parametrize(("change", "words"), [
    ({"unit_path": "vid visits.vid"}, "column -> table.column"),
    ({"unit_path": "vid -> nowhere.vid"}, "privacy_unit"),
    ({"unit_path": "vid -> visits.pid"}, "unique = true"),
    ({"unit_path": "nope -> visits.vid"}, "not one of its columns"),
    ({"privacy_unit": "vid"}, "remove privacy_unit"),
])
def test_unit_path_is_validated(kit: SimpleNamespace, change: dict[str, object],
                                words: str) -> None:
    with pytest.raises(MetadataError, match=words):
        kit.metadata_from({**TABLES, "items": {**ITEMS, **change}})


def test_public_table_takes_no_unit_path(kit: SimpleNamespace) -> None:
    with pytest.raises(MetadataError, match="unit_path"):
        kit.metadata_from({**TABLES, "cities": {**CITIES, "unit_path": "city -> visits.vid"}})


# ---------------------------------------------------------------------- the front doors

REGIONS = ("SELECT s.region, COUNT(*) AS n FROM visits v JOIN people p ON v.person_id = "
           "p.person_id JOIN states s ON p.state = s.state GROUP BY s.region ORDER BY 1")


def test_join_through_the_server(tmp_path: Path) -> None:
    with served_sandbox(tmp_path, "pw") as served, psycopg.connect(
            host="127.0.0.1", port=served.port, user="alice", password="pw", dbname="dpsql",
            connect_timeout=10, autocommit=True) as conn:
        rows = conn.execute(REGIONS).fetchall()
        assert [r[0] for r in rows] == ["Midwest", "Northeast", "South", "West"]
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="cross join"):
            conn.execute("SELECT COUNT(*) FROM people, visits")


def test_join_through_the_cli_and_dbapi() -> None:
    from click.testing import CliRunner

    from dpsql.cli import main

    result = CliRunner().invoke(main, ["query", REGIONS, "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert [line.split(",")[0] for line in result.stdout.splitlines()[1:]] == [
        "Midwest", "Northeast", "South", "West"]
    import dpsql.dbapi

    with dpsql.dbapi.connect() as conn:
        cur = conn.cursor()
        cur.execute("SELECT COUNT(*) FROM prescriptions WHERE drug = 'insulin'")
        assert len(cur.fetchall()) == 1
        with pytest.raises(QueryRefused):
            cur.execute("SELECT COUNT(*) FROM visits v JOIN people p ON v.amount = p.age")


# ---------------------------------------------------------------------- attacks

VICTIM = [  # one more person: 40 visits, in a city matching two public rows
    "INSERT INTO people VALUES (9, 1000000, 'Dup')",
    "INSERT INTO visits SELECT 900 + i, 9, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, 99.9 "
    "FROM range(40) t(i)",
]
AMPLIFIERS = [  # each tries to make the victim count more than the noise is calibrated to
    "SELECT COUNT(*) FROM visits a JOIN visits b ON a.pid = b.pid",
    "SELECT COUNT(*) FROM visits a JOIN visits b USING (pid) JOIN visits c USING (pid)",
    "SELECT SUM(v.amount) FROM visits v JOIN people p USING (pid) JOIN cities c USING (city)",
    "SELECT c.region, COUNT(*) FROM people p JOIN cities c USING (city) GROUP BY 1",
    "SELECT COUNT(*) FROM visits v JOIN cities c ON c.fee > 0",
    "SELECT COUNT(*) FROM people p WHERE EXISTS (SELECT 1 FROM visits v WHERE v.pid = p.pid)",
    "SELECT COUNT(*) FROM visits v WHERE v.pid IN (SELECT pid FROM people WHERE age > 90)",
    "SELECT v.cat, SUM(i.cost) FROM items i JOIN visits v ON i.vid = v.vid GROUP BY 1",
]


@pytest.mark.parametrize("sql", AMPLIFIERS)
def test_one_person_moves_each_measurement_by_at_most_its_sensitivity(
        make_db: Callable[..., Any], kit: SimpleNamespace, sql: str) -> None:
    """D and D' differ by one person with many rows, in a city with two public rows: on the
    engine's exact values (noise off), the joined bounds hold for every salt."""
    d, d_prime = make_db(SQL, TABLES, "d"), make_db(SQL + VICTIM, TABLES, "d_prime")
    plan = d.db.plan(sql)
    for salt in (1, 2, 3):
        on_d = _measurements(d, sql, salt)
        on_d_prime = _measurements(d_prime, sql, salt)
        keys = set(on_d) | set(on_d_prime)
        for i, m in enumerate(plan.measurements):
            moved = sum(abs(on_d_prime.get(k, (0,) * 9)[i] - on_d.get(k, (0,) * 9)[i])
                        for k in keys)
            scale = m.step if m.step else 1
            assert moved * scale <= m.l1 + 1e-9, (sql, m.name, moved * scale, m.l1)


def _measurements(crafted: Any, sql: str, salt: int) -> dict[object, tuple[float, ...]]:
    plan = crafted.db.plan(sql)
    text, salted = engine_sql(plan, crafted.db.engine)
    _, rows = crafted.db.engine.execute(text, [salt] if salted else [])
    width = len(plan.keys)
    return {tuple(r[:width]): tuple(float(x or 0) for x in r[width:]) for r in rows}


def test_multiplicity_counts_keys_as_read_not_as_stored(make_db: Callable[..., Any]) -> None:
    """'30' and '030' are two stored texts but one int as read: two matches for age 30, so the
    one-row fast path must not be taken."""
    codes = {"public": True, "columns": {"code": {"type": "int"}, "label": {"type": "text"}}}
    db = make_db([SQL[0], SQL[1], "CREATE TABLE codes AS SELECT * FROM (VALUES ('30', 'x'), "
                  "('030', 'y'), ('40', 'z')) t(code, label)"],
                 {"people": PEOPLE, "visits": VISITS, "codes": codes}).db
    plan = db.plan("SELECT COUNT(*) FROM people p JOIN codes c ON p.age = c.code")
    assert (plan.table.rows_per_unit, plan.table.needs_bounding) == (2, True)
    other_type = db.plan("SELECT COUNT(*) FROM people p JOIN codes c ON p.city = c.label")
    assert other_type.table.rows_per_unit == 1  # text = text, unique labels


def test_two_databases_sharing_one_metadata_plan_from_their_own_public_data(
        make_db: Callable[..., Any]) -> None:
    """Plans of joins read public data, so each Database plans with its own planner (store
    and cache), even when both share one Metadata object: Dup matches two cities in one
    database and one in the other."""
    first = make_db(SQL, TABLES, name="first")
    other = make_db([*SQL[:2], "CREATE TABLE cities AS SELECT * FROM (VALUES ('Ames', 'North', "
                     "1.5), ('Dup', 'West', 3.0)) t(city, region, fee)", SQL[3]], TABLES,
                    name="other")
    second = dpsql.Database(other.path, first.db.metadata)
    try:
        assert second.metadata is first.db.metadata
        sql = "SELECT SUM(c.fee) FROM visits v JOIN people p USING (pid) JOIN cities c " \
              "USING (city)"
        for _ in range(2):  # planned afresh, then from each planner's cache
            assert first.db.plan(sql).table.rows_per_unit == 6  # k 3 times Dup's 2 rows
            assert second.plan(sql).table.rows_per_unit == 3
        assert first.db.planner.plans is not second.planner.plans
    finally:
        second.close()
