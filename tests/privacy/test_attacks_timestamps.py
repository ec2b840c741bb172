"""Attacks on timestamps: D holds ordinary people, D' adds "trigger" people whose timestamps sit
where an engine would fail, overflow or create a key of their own ('infinity', '-infinity', the
year 1500, the largest timestamp DuckDB holds, text that is a timestamp beyond year 9999 or no
timestamp at all). Every query must succeed on both, and release the same keys: the triggers are
read clamped to the declared bounds (or to the years 1 to 9999), never as themselves."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.usefixtures("seeded_randomness")  # same verdict every run: conftest.py

COLUMNS = {
    "pid": {"type": "int"},
    "ts": {"type": "timestamp", "lower": dt.datetime(2025, 1, 1),
           "upper": dt.datetime(2025, 6, 30, 23, 59, 59)},
    "open": {"type": "timestamp", "nullable": True},  # no bounds: the years 1 to 9999
    "txt": {"type": "timestamp", "nullable": True},  # stored as text
}
TABLES = {"t": {"privacy_unit": "pid", "one_row_per_unit": True, "columns": COLUMNS}}
ORDINARY = ("CREATE TABLE t AS SELECT i AS pid, TIMESTAMP '2025-02-01' + to_seconds("
            "CAST(i * 40000 AS BIGINT)) AS ts, TIMESTAMP '2025-02-01 10:00' AS open, "
            "'2025-02-01 10:00:00' AS txt FROM range(300) t(i)")
TRIGGERS = ("INSERT INTO t VALUES "
            "(1001, 'infinity', 'infinity', '300000-01-01 00:00:00'), "
            "(1002, '-infinity', '-infinity', 'not a time'), "
            "(1003, '1500-01-01', '1500-01-01', '1500-01-01'), "
            "(1004, '294246-12-31 23:59:59', '294246-12-31 23:59:59', 'infinity'), "
            "(1005, '2030-01-01', NULL, NULL)")

QUERIES = [
    "SELECT COUNT(*) FROM t WHERE DATE_TRUNC('hour', open) > TIMESTAMP '2025-01-01'",
    "SELECT COUNT(*) FROM t WHERE open + INTERVAL 10000 YEAR > TIMESTAMP '2025-01-01'",
    "SELECT COUNT(*) FROM t WHERE open - INTERVAL 10000 YEAR < TIMESTAMP '2025-01-01'",
    "SELECT COUNT(*) FROM t WHERE DATE_TRUNC('week', txt - INTERVAL 1 HOUR) < ts",
    "SELECT SUM(EPOCH(open) / 1e9) FROM t",
    "SELECT SUM(DATE_DIFF('microsecond', open, txt) / 1e18) FROM t",
    "SELECT SUM(YEAR(open) + MONTH(txt) + HOUR(ts)) FROM t",
    "SELECT COUNT(*) FROM t WHERE CAST(open AS DATE) < DATE '2025-03-01'",
    "SELECT COUNT(*) FROM t WHERE CAST(txt AS TIMESTAMP) IS NULL",
    "SELECT MIN(ts), MAX(ts), MEDIAN(ts) FROM t",
    "SELECT COUNT(*) FROM t WHERE TO_TIMESTAMP(EPOCH(open) * 1e300) > ts",
    "SELECT COUNT(*) FROM t WHERE TO_TIMESTAMP(LN(EPOCH(open) - 1e9)) > ts",
]
GROUPED = [
    "SELECT DATE_TRUNC('year', open) AS k, COUNT(*) AS n FROM t GROUP BY k",
    "SELECT YEAR(txt) AS k, COUNT(*) AS n FROM t GROUP BY k",
    "SELECT DATE_TRUNC('month', ts) AS k, COUNT(*) AS n FROM t GROUP BY k",
    "SELECT EXTRACT(year FROM open + INTERVAL 5000 YEAR) AS k, COUNT(*) AS n FROM t GROUP BY k",
]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    import duckdb

    import dpsql
    from tests.conftest import write_metadata
    folder = tmp_path_factory.mktemp("ts_attacks")
    dbs = []
    for name, statements in (("d", [ORDINARY]), ("d_prime", [ORDINARY, TRIGGERS])):
        with duckdb.connect(str(folder / f"{name}.duckdb")) as con:
            for statement in statements:
                con.execute(statement)
        meta = write_metadata(folder / f"{name}.toml", TABLES)
        dbs.append(dpsql.Database(folder / f"{name}.duckdb", meta))
    yield dbs[0], dbs[1]
    for db in dbs:
        db.close()


@pytest.mark.parametrize("sql", QUERIES)
def test_triggers_cause_no_error(pair: tuple[Any, Any], sql: str) -> None:
    for db in pair:
        assert len(db.query(sql, epsilon=1.0).rows) == 1


@pytest.mark.parametrize("sql", GROUPED)
def test_triggers_create_no_key_outside_the_bounds(pair: tuple[Any, Any], sql: str) -> None:
    """Thresholding with a generous delta (so that small groups pass): every released key of
    D' is a grain of a value between the bounds (the declared ones for ts, the years 1 to 9999
    otherwise), whatever the triggers hold."""
    for db in pair:
        for key, _ in db.query(sql, epsilon=5.0, delta=0.1).rows:
            if key is None:
                continue
            year = key.year if isinstance(key, dt.datetime) else int(key)
            assert 1 <= year <= (9999 + 5000 if "5000" in sql else 9999), (sql, key)
            if "ts)" in sql:
                assert dt.datetime(2025, 1, 1) <= key <= dt.datetime(2025, 6, 30), key


def test_bounded_triggers_are_read_as_the_bounds(pair: tuple[Any, Any]) -> None:
    """ts of the triggers ('infinity', 1500, 2030...) reads as its bounds: the count of ts at
    the bounds grows by the triggers, and nothing else changes."""
    counts = [db.query("SELECT COUNT(*) FROM t WHERE ts = TIMESTAMP '2025-06-30 23:59:59' OR "
                       "ts = TIMESTAMP '2025-01-01'", epsilon=50.0).rows[0][0] for db in pair]
    assert counts[0] <= 1 and 4 <= counts[1] <= 6
