"""Time analysis: public date ranges, their grains as GROUP BY keys, date functions in
row-level SQL and dates as MIN / MAX / MEDIAN."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from dpsql.errors import MetadataError
from dpsql.metadata.metadata import MAX_DOMAIN_SIZE
from dpsql.privacy.domains import key_domain

pytestmark = pytest.mark.usefixtures("seeded_randomness")  # same draws every run: conftest.py

LONG = (dt.date(1990, 1, 1), dt.date(2025, 12, 31))  # 13149 days: more than MAX_DOMAIN_SIZE


def _events(lower: dt.date, upper: dt.date, public_range: bool = True) -> dict[str, Any]:
    return {"privacy_unit": "pid", "one_row_per_unit": True, "columns": {
        "pid": {"type": "int"},
        "d": {"type": "date", "lower": lower, "upper": upper, "public_range": public_range}}}


EVENTS_SQL = ("CREATE TABLE events AS SELECT i AS pid, "
              "DATE '2020-01-15' + CAST((i % 50) * 7 AS INTEGER) AS d FROM range(400) t(i)")


def _months(lower: dt.date, upper: dt.date) -> list[dt.date]:
    out, day = [], dt.date(lower.year, lower.month, 1)
    while day <= upper:
        out.append(day)
        day = dt.date(day.year + day.month // 12, day.month % 12 + 1, 1)
    return out


def test_public_range_date_is_accepted_and_long_ranges_have_no_day_domain(kit: Any) -> None:
    short = kit.metadata_from({"events": _events(dt.date(2025, 1, 1), dt.date(2025, 12, 31))})
    assert len(short.tables["events"].column("d").domain) == 365
    long = kit.metadata_from({"events": _events(*LONG)})
    assert (LONG[1] - LONG[0]).days + 1 > MAX_DOMAIN_SIZE
    assert long.tables["events"].column("d").domain is None


def test_public_range_needs_bounds(kit: Any) -> None:
    with pytest.raises(MetadataError, match="public_range"):
        kit.metadata_from({"events": {"columns": {
            "d": {"type": "date", "public_range": True}}}})


@pytest.mark.parametrize(("sql", "expected"), [
    ("DATE_TRUNC('month', d)", 432),
    ("DATE_TRUNC('quarter', d)", 144),
    ("DATE_TRUNC('year', d)", 36),
    ("DATE_TRUNC('week', d)", 1879),
    ("YEAR(d)", 36),
    ("MONTH(d)", 12),
    ("EXTRACT(day FROM d)", 31),
    ("EXTRACT(dow FROM d)", 7),
    ("EXTRACT(doy FROM d)", 366),
    ("EXTRACT(week FROM d)", 53),
    ("QUARTER(d)", 4),
])
def test_grains_of_a_long_range_have_a_public_domain(kit: Any, sql: str,
                                                     expected: int) -> None:
    import sqlglot
    meta = kit.metadata_from({"events": _events(*LONG)})
    table = meta.tables["events"]
    domain = key_domain(sqlglot.parse_one(sql, read="duckdb"), table)
    assert domain is not None and len(domain) == expected


def test_days_of_a_long_range_have_no_domain(kit: Any) -> None:
    import sqlglot
    table = kit.metadata_from({"events": _events(*LONG)}).tables["events"]
    assert key_domain(sqlglot.parse_one("DATE_TRUNC('day', d)", read="duckdb"), table) is None
    assert key_domain(sqlglot.parse_one("d + 1", read="duckdb"), table) is None


def test_month_keys_are_every_month_between_the_bounds_in_order(
        make_db: Callable[..., Any]) -> None:
    """Empty months are released too (their noisy counts hide whether they are empty)."""
    db = make_db(EVENTS_SQL, {"events": _events(*LONG)}).db
    result = db.query("SELECT DATE_TRUNC('month', d) AS m, COUNT(*) AS n FROM events "
                      "GROUP BY m ORDER BY m", epsilon=1.0)
    keys = [row[0] for row in result.rows]
    assert [k.date() if isinstance(k, dt.datetime) else k for k in keys] == _months(*LONG)


def test_year_keys_are_every_year(make_db: Callable[..., Any]) -> None:
    db = make_db(EVENTS_SQL, {"events": _events(*LONG)}).db
    result = db.query("SELECT YEAR(d) AS y, COUNT(*) FROM events GROUP BY y ORDER BY y")
    assert [row[0] for row in result.rows] == list(range(1990, 2026))


SUPERSET = ("SELECT COUNT(*) FROM events WHERE d >= TO_DATE('2020-03-01', 'YYYY-MM-DD') "
            "AND d < TO_DATE('2020-04-01', 'YYYY-MM-DD')")


def test_superset_time_range_is_folded_to_dates(make_db: Callable[..., Any]) -> None:
    """The filter is two DATE literals by the time the engine sees it: no per-row parsing."""
    db = make_db(EVENTS_SQL, {"events": _events(*LONG)}).db
    where = db.plan(SUPERSET).query.where.sql(dialect="duckdb")
    assert "CAST('2020-03-01' AS DATE)" in where and "CAST('2020-04-01' AS DATE)" in where
    assert "STRPTIME" not in where.upper()


def test_superset_time_series_with_a_time_range_at_delta_0(make_db: Callable[..., Any]) -> None:
    """The time-series chart Superset sends: grain keys from public_range and a constant
    filter. Folding the constants left a half-read result on the thread's scratch cursor,
    and DuckDB 2 then refused to register the noisy cells (an internal error)."""
    db = make_db(EVENTS_SQL, {"events": _events(*LONG)}).db
    result = db.query("SELECT DATE_TRUNC('month', d) AS m, COUNT(*) AS n FROM events "
                      "WHERE d >= DATE '2020-03-01' AND d < DATE '2020-06-01' GROUP BY m "
                      "ORDER BY m", epsilon=1.0, delta=0.0)
    # The months of the public range that the filter keeps (dpsql.privacy.key_filters), not all 432.
    # DATE_TRUNC of a DATE is a DATE (dpsql.query.total_expressions)
    assert [r[0] for r in result.rows] == [dt.date(2020, m, 1) for m in (3, 4, 5)]


@pytest.mark.parametrize(("text", "expected"), [
    ("2025-06-01 +00", "2025-06-01"),
    ("2025-06-01 00:00:00+00", "2025-06-01"),
    ("2025-06-01T00:00:00+00:00", "2025-06-01"),
    ("2025-06-01 02:00:00+02", "2025-06-01"),
    ("2025-06-01 00:00:00", "2025-06-01"),
    ("2025-06-01", "2025-06-01"),
    ("June 1st", "June 1st"),  # not ISO: left to DuckDB's cast, which refuses it
])
def test_date_text_reads_midnight_utc_as_the_date(text: str, expected: str) -> None:
    from dpsql.query.dates import date_text
    assert date_text(text) == expected


@pytest.mark.parametrize("text", ["2025-06-01 10:00:00+00", "2025-06-01 00:00:00+02",
                                  "2025-06-01 00:00:01", "2025-06-01T23:59:59.999Z"])
def test_date_text_with_a_time_of_day_is_its_date_as_postgresql_reads_it(text: str) -> None:
    from dpsql.query.dates import date_text
    assert date_text(text) == "2025-06-01"


def test_to_date_of_rows_is_total_and_clamped(make_db: Callable[..., Any]) -> None:
    """Texts that are no date, or beyond year 9999, read as NULL or clamped, never an error."""
    db = make_db(["CREATE TABLE t (pid INT, s VARCHAR)",
                  "INSERT INTO t VALUES (1, '2020-01-01'), (2, '99999-01-01'), (3, 'x'), "
                  "(4, '0000-01-01'), (5, NULL)"],
                 {"t": {"privacy_unit": "pid", "one_row_per_unit": True,
                        "columns": {"pid": {"type": "int"}, "s": {"type": "text",
                                                                  "nullable": True}}}}).db
    for sql in ("SELECT COUNT(*) FROM t WHERE TO_DATE(s, 'YYYY-MM-DD') IS NULL",
                "SELECT COUNT(*) FROM t WHERE STRPTIME(s, '%Y-%m-%d') < TIMESTAMP '2000-01-01'",
                "SELECT COUNT(*) FROM t WHERE TO_TIMESTAMP(s, 'YYYY-MM-DD') > DATE '1999-01-01'"):
        assert len(db.query(sql, epsilon=1.0).rows) == 1


def test_min_max_median_of_a_bounded_date_are_dates(make_db: Callable[..., Any]) -> None:
    """Drawn among the declared days: with a large epsilon, MIN and MAX land near the data's
    extremes (seeded: deterministic)."""
    db = make_db(EVENTS_SQL, {"events": _events(dt.date(2020, 1, 1), dt.date(2021, 12, 31))}).db
    (low, high, middle), = db.query("SELECT MIN(d), MAX(d), MEDIAN(d) FROM events",
                                    epsilon=30.0).rows
    assert all(isinstance(v, dt.date) for v in (low, high, middle))
    first, last = dt.date(2020, 1, 15), dt.date(2020, 1, 15) + dt.timedelta(days=49 * 7)
    assert dt.date(2020, 1, 1) <= low <= first + dt.timedelta(days=30)
    assert last - dt.timedelta(days=30) <= high <= dt.date(2021, 12, 31)
    assert low <= middle <= high


def test_date_quantile_over_many_days_is_a_date(make_db: Callable[..., Any]) -> None:
    db = make_db(EVENTS_SQL, {"events": _events(*LONG)}).db
    (middle,), = db.query("SELECT MEDIAN(d) FROM events", epsilon=30.0).rows
    assert isinstance(middle, dt.date) and LONG[0] <= middle <= LONG[1]


def test_date_quantile_needs_declared_bounds(make_db: Callable[..., Any]) -> None:
    from dpsql.errors import UnboundedExpression
    tables = {"events": {"privacy_unit": "pid", "one_row_per_unit": True, "columns": {
        "pid": {"type": "int"}, "d": {"type": "date"}}}}
    db = make_db(EVENTS_SQL, tables).db
    with pytest.raises(UnboundedExpression, match="d needs declared date bounds"):
        db.plan("SELECT MAX(d) FROM events")
