"""Time series as BI tools send them, through the wire with psycopg: Grafana's PostgreSQL
macros (pkg/tsdb/grafana-postgresql-datasource/macros.go: ``$__timeFilter``, ``$__time``,
``$__timeEpoch``, ``$__timeGroupAlias``) and Metabase's relative filters (``NOW()``).

A public domain follows the analyst's constant filters (dpsql/privacy/key_filters.py): a 3-day
``$__timeFilter`` releases 3 or 4 days, not the 365 of the declared range, at delta 0.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import duckdb
import psycopg
import pytest
import tomli_w

import dpsql
from dpsql.server import ServerConfig, serve_in_thread
from dpsql.server.auth import set_password
from grammar_tests.databases import EVENTS, EVENTS_SQL

# $__timeFilter(day) for 2025-03-04 .. 2025-03-07 (Grafana formats both ends RFC 3339, UTC).
TIME_FILTER = "BETWEEN '2025-03-04T00:00:00Z' AND '2025-03-07T23:59:59.999Z'"
DAYS = [dt.date(2025, 3, d) for d in (4, 5, 6, 7)]


def _serve(folder: Path, database: Path, tables: dict[str, object]
           ) -> Iterator[SimpleNamespace]:
    metadata = folder / "metadata.toml"
    metadata.write_text(tomli_w.dumps({
        "budget": {"ledger": str(folder / "ledger.sqlite")},
        "analysts": {"grafana": {"epsilon": 100.0, "query_epsilon": 0.5}},
        "tables": tables}), encoding="utf-8")
    passwords = folder / "passwords.toml"
    set_password(passwords, "grafana", "pw", iterations=4096)
    db = dpsql.Database(database, metadata)
    with serve_in_thread(db, ServerConfig(port=0, passwords=passwords)) as running, \
            psycopg.connect(host="127.0.0.1", port=running.port, user="grafana", password="pw",
                            dbname="dpsql", autocommit=True) as conn:
        yield SimpleNamespace(conn=conn, db=db)
    db.close()


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    import tomllib

    folder, metadata = dpsql.database.sample_paths()
    tables = tomllib.loads(metadata.read_text())["tables"]
    yield from _serve(tmp_path_factory.mktemp("ts-sample"), folder, tables)


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    folder = tmp_path_factory.mktemp("ts-events")
    with duckdb.connect(str(folder / "events.duckdb")) as con:
        con.execute(EVENTS_SQL)
    yield from _serve(folder, folder / "events.duckdb", EVENTS)


def test_grafana_time_series_on_a_date_column(sample) -> None:
    # $__timeGroupAlias(day, 1d), $__timeFilter(day): exactly the 4 days of the filter.
    rows = sample.conn.execute(
        'SELECT floor(extract(epoch from day)/86400)*86400 AS "time", count(*) AS "value" '
        f"FROM visits WHERE day {TIME_FILTER} GROUP BY 1 ORDER BY 1").fetchall()
    assert [dt.datetime.fromtimestamp(float(r[0]), dt.UTC).date() for r in rows] == DAYS
    # $__time(day) and $__timeEpoch(day)
    rows = sample.conn.execute(f'SELECT day AS "time", count(*) FROM visits WHERE day '
                               f"{TIME_FILTER} GROUP BY 1 ORDER BY 1").fetchall()
    assert [r[0] for r in rows] == DAYS
    rows = sample.conn.execute(
        'SELECT extract(epoch from day) as "time", avg(amount) AS "value" FROM visits '
        f"WHERE day {TIME_FILTER} GROUP BY 1 ORDER BY 1").fetchall()
    assert len(rows) == 4


def test_grafana_series_per_category_narrowed_by_a_variable(sample) -> None:
    # A multi-value template variable $category expands to an IN-list.
    rows = sample.conn.execute(
        'SELECT day AS "time", category AS metric, count(*) AS "value" FROM visits '
        f"WHERE day {TIME_FILTER} AND category IN ('lab','dental') GROUP BY 1, 2 "
        "ORDER BY 1, 2").fetchall()
    assert [(r[0], r[1]) for r in rows] == [(d, c) for d in DAYS for c in ("dental", "lab")]


def test_the_session_pays_its_query_epsilon(sample) -> None:
    before = sample.db.budget("grafana").spent.epsilon
    sample.conn.execute(f"SELECT count(*) FROM visits WHERE day {TIME_FILTER}").fetchall()
    assert sample.db.budget("grafana").spent.epsilon - before == pytest.approx(0.5)


def test_template_variable_with_a_filter_is_free(sample) -> None:
    before = sample.db.budget("grafana").spent.epsilon
    rows = sample.conn.execute("SELECT DISTINCT category FROM visits WHERE category IN "
                               "('lab', 'dental') ORDER BY 1").fetchall()
    assert rows == [("dental",), ("lab",)]
    assert sample.db.budget("grafana").spent.epsilon == before


def test_relative_filters_read_the_clock_when_planned(sample) -> None:
    # Metabase's "previous 30 days" and Grafana's now()-based filters.
    for sql in ("SELECT count(*) FROM visits WHERE day >= CAST((NOW() + INTERVAL '-30 day') "
                "AS date) AND day < CAST(NOW() AS date)",
                "SELECT day, count(*) FROM visits WHERE day > CURRENT_DATE GROUP BY 1",
                "SELECT count(*) FROM visits WHERE day <= CURRENT_TIMESTAMP"):
        sample.conn.execute(sql).fetchall()
    today = dt.datetime.now(dt.UTC).date()
    rows = sample.conn.execute("SELECT day, count(*) FROM visits WHERE day >= CURRENT_DATE - "
                               "INTERVAL '2 days' GROUP BY 1 ORDER BY 1").fetchall()
    assert all(r[0] >= today - dt.timedelta(days=3) for r in rows)


def test_grafana_hourly_series_on_a_timestamp_with_a_public_range(events) -> None:
    # $__timeGroupAlias(ts, 1h) over $__timeFilter(ts): 72 hours at delta 0, not refused.
    rows = events.conn.execute(
        'SELECT floor(extract(epoch from ts)/3600)*3600 AS "time", count(*) AS "value" FROM '
        "events WHERE ts BETWEEN '2025-03-04T00:00:00Z' AND '2025-03-06T23:59:59.999Z' "
        "GROUP BY 1 ORDER BY 1").fetchall()
    assert len(rows) == 72
    assert float(rows[1][0]) - float(rows[0][0]) == 3600
