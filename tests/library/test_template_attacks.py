"""Constants that change a privacy decision never reuse a plan made for other constants
(:mod:`dpsql.routes.templates`, issue 39.1; docs/audit.md, "Constants a reused plan may
change"): each pair below plans the first text, then asks the second, which must be planned
from scratch (or, where reuse is allowed, give exactly what a plan from scratch gives), and
is answered as a database that never saw the first answers it.

The guards of the reuse path itself are tested by making each literal-reading pass answer
otherwise for the new constants: a reuse must then plan from scratch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlglot import exp

import dpsql.routes.templates as templates
from dpsql.database import Database
from dpsql.errors import QueryRefused, UnsupportedQuery
from dpsql.routes import pipeline
from dpsql.routes.exact import FreeRoute
from dpsql.routes.private import PrivatePlan
from grammar_tests.databases import open_database
from tests.library.test_templates import _engine_sql

EPSILON = 1.0


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Database, ...]]]:
    opened: dict[str, tuple[Database, ...]] = {}
    for name in ("sample", "events"):
        folder: Path = tmp_path_factory.mktemp(name)
        for side in ("warm", "cold"):
            (folder / side).mkdir()
        opened[name] = tuple(open_database(name, folder / side) for side in ("warm", "cold"))
    yield opened
    for pair in opened.values():
        for db in pair:
            db.close()


def _fresh(*dbs: Database) -> None:
    for db in dbs:
        db._memo.clear()
        db.planner.plans.clear()
        db.planner.templates.cache.clear()


def _route(db: Database, sql: str, parameters: Any = None) -> Any:
    try:
        return db._route(sql, EPSILON, 0.0, "laplace", parameters, None, None)
    except QueryRefused as refused:
        return refused


def _plans(db: Database) -> int:
    return sum(1 for key in db.planner.plans._entries if key[0] == "plan")


def _asked_after(dbs: tuple[Database, ...], first: str, second: str,
                 parameters: Any = None) -> tuple[Any, bool]:
    """Plan ``first`` on the warm database, then ``second``: its route there, and whether it
    was reused (no plan made from scratch); the same as a cold database's route of it."""
    warm, cold = dbs
    _fresh(warm, cold)
    learnt = _route(warm, first)
    assert not isinstance(learnt, QueryRefused), learnt
    made = _plans(warm)
    got = _route(warm, second, parameters)
    reused = _plans(warm) == made and not isinstance(got, QueryRefused)
    expected = _route(cold, second, parameters)
    if isinstance(expected, QueryRefused):
        assert (type(got), str(got)) == (type(expected), str(expected))
    else:
        assert type(got.route) is type(expected.route)
        assert got.normalised == expected.normalised
        if isinstance(expected.route, PrivatePlan):
            assert got.route.prepared == expected.route.prepared
            assert _engine_sql(warm, got) == _engine_sql(cold, expected)
    return got, reused


def test_a_moved_filter_value_is_reused(dbs: dict[str, tuple[Database, ...]]) -> None:
    """The control: what may be reused is (so the tests below can fail)."""
    for first, second in [
            ("SELECT COUNT(*) FROM people WHERE income > 40000", "SELECT COUNT(*) FROM people "
             "WHERE income > 41234"),
            ("SELECT sex, SUM(income) FROM people WHERE age BETWEEN 20 AND 40 GROUP BY sex",
             "SELECT sex, SUM(income) FROM people WHERE age BETWEEN 21 AND 45 GROUP BY sex"),
            ("SELECT AVG(income) FROM people WHERE income < 1000.5",
             "SELECT AVG(income) FROM people WHERE income < 2000.7")]:
        _, reused = _asked_after(dbs["sample"], first, second)
        assert reused, second


@pytest.mark.parametrize(("first", "second"), [
    # A constant-false WHERE: a free answer, never the private plan of a true one.
    ("SELECT COUNT(*) FROM people WHERE 1 = 1 AND age > 30",
     "SELECT COUNT(*) FROM people WHERE 1 = 0 AND age > 30"),
    ("SELECT COUNT(*) FROM people WHERE 2 > 1 AND age > 30",
     "SELECT COUNT(*) FROM people WHERE 2 > 3 AND age > 30"),
    # A key's filter narrows its public domain (the released keys).
    ("SELECT age, COUNT(*) FROM people WHERE age IN (30, 31) GROUP BY age",
     "SELECT age, COUNT(*) FROM people WHERE age IN (30, 32) GROUP BY age"),
    ("SELECT age, COUNT(*) FROM people WHERE age = 30 GROUP BY age",
     "SELECT age, COUNT(*) FROM people WHERE age = 31 GROUP BY age"),
    ("SELECT age / 10, COUNT(*) FROM people WHERE age < 40 GROUP BY age / 10",
     "SELECT age / 10, COUNT(*) FROM people WHERE age < 50 GROUP BY age / 10"),
    ("SELECT age AS a, COUNT(*) FROM people WHERE age IN (30, 31) GROUP BY a",
     "SELECT age AS a, COUNT(*) FROM people WHERE age IN (30, 32) GROUP BY a"),
    ("SELECT age, COUNT(*) FROM people WHERE age IN (30, 31) GROUP BY 1",
     "SELECT age, COUNT(*) FROM people WHERE age IN (30, 32) GROUP BY 1"),
    ("SELECT children, COUNT(*) FROM people WHERE children BETWEEN 1 AND 3 GROUP BY children",
     "SELECT children, COUNT(*) FROM people WHERE children BETWEEN 1 AND 4 GROUP BY children"),
    # Another width or type class.
    ("SELECT COUNT(*) FROM people WHERE income > 100", "SELECT COUNT(*) FROM people "
     "WHERE income > 100000"),
    ("SELECT COUNT(*) FROM people WHERE income > 12", "SELECT COUNT(*) FROM people "
     "WHERE income > 12.5"),
    ("SELECT COUNT(*) FROM people WHERE income > 12.5", "SELECT COUNT(*) FROM people "
     "WHERE income > 12.50"),
    ("SELECT COUNT(*) FROM people WHERE income > 9223372036854775806",
     "SELECT COUNT(*) FROM people WHERE income > 9223372036854775808"),
    ("SELECT COUNT(*) FROM people WHERE income > 99999999999999999999",
     "SELECT COUNT(*) FROM people WHERE income > 99999999999999999998"),
    # Exponents, infinity and NaN: never a slot.
    ("SELECT COUNT(*) FROM people WHERE income > 1e3", "SELECT COUNT(*) FROM people "
     "WHERE income > 1e309"),
    ("SELECT COUNT(*) FROM people WHERE income > 1e3", "SELECT COUNT(*) FROM people "
     "WHERE income > 2e3"),
    ("SELECT COUNT(*) FROM people WHERE income > 'inf'", "SELECT COUNT(*) FROM people "
     "WHERE income > 'nan'"),
    ("SELECT COUNT(*) FROM people WHERE income > 5", "SELECT COUNT(*) FROM people "
     "WHERE income > 'nan'"),
    # Negative numbers, strings for numbers.
    ("SELECT COUNT(*) FROM people WHERE income > -5", "SELECT COUNT(*) FROM people "
     "WHERE income > -6"),
    ("SELECT COUNT(*) FROM people WHERE income > 5", "SELECT COUNT(*) FROM people "
     "WHERE income > -5"),
    ("SELECT COUNT(*) FROM people WHERE age = 30", "SELECT COUNT(*) FROM people "
     "WHERE age = '30'"),
    ("SELECT COUNT(*) FROM people WHERE age = '30'", "SELECT COUNT(*) FROM people "
     "WHERE age = '31x'"),
    # Numbers outside the WHERE's comparisons: LIMIT, quantiles, arithmetic, the clause.
    ("SELECT sex, COUNT(*) FROM people WHERE age > 3 GROUP BY sex LIMIT 1",
     "SELECT sex, COUNT(*) FROM people WHERE age > 3 GROUP BY sex LIMIT 0"),
    ("SELECT QUANTILE_CONT(income, 0.5) FROM people WHERE age > 3",
     "SELECT QUANTILE_CONT(income, 0.9) FROM people WHERE age > 3"),
    ("SELECT COUNT(*) FROM people WHERE age + 1 > 30", "SELECT COUNT(*) FROM people "
     "WHERE age + 100 > 30"),
    ("SELECT SUM(LEAST(income, 100)) FROM people WHERE age > 30",
     "SELECT SUM(LEAST(income, 900)) FROM people WHERE age > 30"),
    ("SELECT COUNT(*) FROM people WHERE age > 30 LIMIT 5", "SELECT COUNT(*) FROM people "
     "WHERE age > 30 LIMIT 0"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM people "
     "WHERE age > 3", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 2, delta = 0) "
     "COUNT(*) FROM people WHERE age > 3"),
])
def test_a_decision_changing_constant_is_planned_from_scratch(
        dbs: dict[str, tuple[Database, ...]], first: str, second: str) -> None:
    _, reused = _asked_after(dbs["sample"], first, second)
    assert not reused


def test_an_empty_probe_is_free(dbs: dict[str, tuple[Database, ...]]) -> None:
    got, _ = _asked_after(dbs["sample"], "SELECT COUNT(*) FROM people WHERE age > 3 LIMIT 1",
                          "SELECT COUNT(*) FROM people WHERE age > 3 LIMIT 0")
    assert isinstance(got.route, FreeRoute)


def test_a_key_filter_narrows_the_released_keys(dbs: dict[str, tuple[Database, ...]]) -> None:
    got, _ = _asked_after(dbs["sample"],
                          "SELECT age, COUNT(*) FROM people WHERE age IN (30, 31) GROUP BY age",
                          "SELECT age, COUNT(*) FROM people WHERE age IN (30, 32) GROUP BY age")
    assert got.route.prepared.keys[0].domain == (30, 32)


@pytest.mark.parametrize(("first", "second"), [
    # Dates at and beyond the clamp bounds (read as stored only strictly inside them).
    ("SELECT COUNT(*) FROM events WHERE day > DATE '2025-02-01'",
     "SELECT COUNT(*) FROM events WHERE day > DATE '2025-01-01'"),
    ("SELECT COUNT(*) FROM events WHERE day > DATE '2025-02-01'",
     "SELECT COUNT(*) FROM events WHERE day > DATE '2024-12-31'"),
    ("SELECT COUNT(*) FROM events WHERE ts < TIMESTAMP '2025-02-01 00:00:00'",
     "SELECT COUNT(*) FROM events WHERE ts < TIMESTAMP '2026-02-01 00:00:00'"),
    ("SELECT COUNT(*) FROM events WHERE day > DATE '2025-02-01' AND person_id > 10",
     "SELECT COUNT(*) FROM events WHERE day > DATE '9999-12-31' AND person_id > 10"),
])
def test_a_typed_date_literal_is_never_moved(dbs: dict[str, tuple[Database, ...]], first: str,
                                        second: str) -> None:
    _, reused = _asked_after(dbs["events"], first, second)
    assert not reused


E = "SELECT COUNT(*) FROM events WHERE "


@pytest.mark.parametrize(("first", "second", "reusable"), [
    # A dashboard's moving time range: the same shape, dates or instants strictly inside the
    # clamp bounds.
    (E + "day > '2025-02-01'", E + "day > '2025-03-01'", True),
    (E + "day BETWEEN '2025-02-01' AND '2025-02-28'", E + "day BETWEEN '2025-02-02' AND "
     "'2025-03-01'", True),
    (E + "ts < '2025-02-01 00:00:00'", E + "ts < '2025-03-01 10:30:00'", True),
    (E + "ts >= '2025-02-01T00:00:00.000Z' AND ts < '2025-02-02T00:00:00.000Z'",
     E + "ts >= '2025-02-01T06:00:00.000Z' AND ts < '2025-02-02T06:00:00.000Z'", True),
    (E + "ts < '2025-02-01 00:00:00+02'", E + "ts < '2025-02-01 00:00:00+05'", True),
    # At or beyond the clamp bounds (the rewrite spells those otherwise), not a date, another
    # shape, a time of day or a zone on a date column, a key's filter (its released days): as
    # from scratch, whichever way.
    (E + "day > '2025-02-01'", E + "day > '2025-01-01'", None),
    (E + "day > '2025-02-01'", E + "day > '2024-12-31'", None),
    (E + "day > '2025-02-01'", E + "day > '9999-12-31'", None),
    (E + "ts < '2025-02-01 00:00:00'", E + "ts < '2026-02-01 00:00:00'", None),
    (E + "day > '2025-02-01'", E + "day > '2025-02-30'", False),
    (E + "day > '2025-02-01'", E + "day > '2025-13-01'", False),
    (E + "day > '2025-02-01'", E + "day > '2025-02-01 10:00:00'", False),
    (E + "day > '2025-02-01T00:00:00Z'", E + "day > '2025-02-01T10:00:00Z'", None),
    (E + "day > '2025-02-01T00:00:00+02'", E + "day > '2025-02-01T00:00:00-02'", None),
    ("SELECT day, COUNT(*) FROM events WHERE day BETWEEN '2025-02-01' AND '2025-02-03' "
     "GROUP BY day", "SELECT day, COUNT(*) FROM events WHERE day BETWEEN '2025-02-01' AND "
     "'2025-02-04' GROUP BY day", False),
    # A text column compared with a date-shaped text: never a slot.
    (E + "ts_text = '2025-02-01'", E + "ts_text = '2025-02-02'", False),
])
def test_a_temporal_text_moves_only_as_from_scratch(
        dbs: dict[str, tuple[Database, ...]], first: str, second: str,
        reusable: bool | None) -> None:
    """Date and timestamp texts compared with a date or timestamp column are slots: a reuse
    gives exactly the route, plan and engine SQL of a plan from scratch (``_asked_after``)."""
    _, reused = _asked_after(dbs["events"], first, second)
    if reusable is not None:
        assert reused == reusable


def test_a_parameter_is_planned_as_bound(dbs: dict[str, tuple[Database, ...]]) -> None:
    _, reused = _asked_after(dbs["sample"], "SELECT COUNT(*) FROM people WHERE income > 5",
                             "SELECT COUNT(*) FROM people WHERE income > ?", [7])
    assert not reused
    _, reused = _asked_after(dbs["sample"], "SELECT COUNT(*) FROM people WHERE income > 5",
                             "SELECT COUNT(*) FROM people WHERE income > ?", [7.5])
    assert not reused


def test_an_invalid_epsilon_is_refused_not_reused(dbs: dict[str, tuple[Database, ...]]) -> None:
    warm = dbs["sample"][0]
    _fresh(warm)
    _route(warm, "SELECT COUNT(*) FROM people WHERE income > 5")
    with pytest.raises(QueryRefused):
        warm._route("SELECT COUNT(*) FROM people WHERE income > 6", True, 0.0, "laplace", None,
                    None, None)


# ------------------------------------------------------------- the reuse path's own guards

FIRST = "SELECT sex, COUNT(*) FROM people WHERE income > 40000 GROUP BY sex"
SECOND = "SELECT sex, COUNT(*) FROM people WHERE income > 41234 GROUP BY sex"


def _reused(dbs: dict[str, tuple[Database, ...]]) -> bool:
    warm = dbs["sample"][0]
    _fresh(warm)
    _route(warm, FIRST)
    made = _plans(warm)
    got = _route(warm, SECOND)
    return _plans(warm) == made and not isinstance(got, QueryRefused)


def test_the_guards_hold_without_a_change(dbs: dict[str, tuple[Database, ...]]) -> None:
    assert _reused(dbs)


def test_a_where_folded_otherwise_is_not_reused(dbs: dict[str, tuple[Database, ...]],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Were a constant to fold otherwise (constant-false, another type), the plan is made anew."""
    real = templates.fold  # type: ignore[attr-defined]

    def fold(node: exp.Expression, table: Any) -> exp.Expression:
        folded = real(node, table)
        moved = any(isinstance(n, exp.Literal) and n.this == "41234" for n in folded.walk())
        return exp.false() if moved else folded

    monkeypatch.setattr(templates, "fold", fold)
    assert not _reused(dbs)


def test_a_key_domain_narrowed_otherwise_is_not_reused(
        dbs: dict[str, tuple[Database, ...]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templates, "key_domain", lambda *args: ("F",))
    assert not _reused(dbs)


def test_a_refused_condition_is_refused_from_scratch(
        dbs: dict[str, tuple[Database, ...]], monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> None:
        raise UnsupportedQuery("a refusal of the new constants, as the checker would say it")

    monkeypatch.setattr(templates, "check_condition", refuse)
    assert not _reused(dbs)


def test_an_empty_probe_is_not_reused(dbs: dict[str, tuple[Database, ...]],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templates, "empty_probe", lambda tree: "WHERE FALSE (always false)")
    assert not _reused(dbs)


def test_the_engine_query_is_moved_not_rewritten(dbs: dict[str, tuple[Database, ...]]) -> None:
    """A reused plan's engine SQL is its template's with the constants moved in, kept before
    the route is checked; equal to the rewrite of the plan from scratch (compared above)."""
    warm = dbs["sample"][0]
    _fresh(warm)
    _route(warm, FIRST)
    got = _route(warm, SECOND)
    assert id(got.route.plan) in warm.engine.rewritten
    assert "41234" in pipeline.engine_sql(got.route.plan, warm.engine)[0]


def test_a_moved_time_range_moves_the_engine_query(dbs: dict[str, tuple[Database, ...]]
                                                   ) -> None:
    """A dashboard's next time range: its engine SQL is moved too, not rewritten."""
    warm = dbs["events"][0]
    _fresh(warm)
    _route(warm, E + "ts >= '2025-02-01 00:00:00' AND ts < '2025-02-02 00:00:00'")
    got = _route(warm, E + "ts >= '2025-02-03 06:00:00' AND ts < '2025-02-04 06:00:00'")
    assert id(got.route.plan) in warm.engine.rewritten
    sql = pipeline.engine_sql(got.route.plan, warm.engine)[0]
    assert "2025-02-03 06:00:00" in sql and "2025-02-04 06:00:00" in sql


def test_a_where_written_otherwise_is_rewritten(dbs: dict[str, tuple[Database, ...]],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Were the rewrite to write the new constants otherwise (a clamp interval, a type), the
    engine query is not moved: engine_sql rewrites the plan itself."""
    real = templates.total  # type: ignore[attr-defined]

    def total(node: exp.Expression, *args: Any, **kwargs: Any) -> exp.Expression:
        written = real(node, *args, **kwargs)
        moved = any(isinstance(n, exp.Literal) and n.this == "41234" for n in node.walk())
        return exp.false() if moved else written

    monkeypatch.setattr(templates, "total", total)
    warm = dbs["sample"][0]
    _fresh(warm)
    _route(warm, FIRST)
    got = _route(warm, SECOND)
    assert isinstance(got.route, PrivatePlan)
    assert id(got.route.plan) not in warm.engine.rewritten
