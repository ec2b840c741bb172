"""Timestamps over the wire: a timestamp column is described as ``timestamp`` (OID 1114),
its ``$n`` parameters too, and real drivers bind ``datetime`` values (asyncpg, psycopg 3 in
text and binary, pgjdbc ``setTimestamp``); MIN / MAX come back as timestamps in both formats."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import asyncpg
import duckdb
import psycopg
import pytest
import tomli_w

from dpsql.database import Database
from dpsql.server.auth import set_password
from dpsql.server.config import ServerConfig
from dpsql.server.server import serve_in_thread
from tests.support.helpers import run_asyncpg, run_java

TIMEOUT = 20
PASSWORD = "t1me pw"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """2,000 events over the first quarter of 2025, a public range, alice with a budget."""
    folder = tmp_path_factory.mktemp("timestamps")
    with duckdb.connect(str(folder / "events.duckdb")) as con:
        con.execute("CREATE TABLE events AS SELECT i AS pid, TIMESTAMP '2025-01-01 00:00:00' + "
                    "to_seconds(CAST(i * 3889 AS BIGINT)) AS ts FROM range(2000) t(i)")
    metadata = {
        "budget": {"ledger": str(folder / "ledger.sqlite")},
        "analysts": {"alice": {"epsilon": 100000.0, "delta": 0.5}},
        "tables": {"events": {"privacy_unit": "pid", "one_row_per_unit": True, "columns": {
            "pid": {"type": "int"},
            "ts": {"type": "timestamp", "lower": dt.datetime(2025, 1, 1),
                   "upper": dt.datetime(2025, 3, 31, 23, 59, 59), "public_range": True}}}}}
    (folder / "metadata.toml").write_text(tomli_w.dumps(metadata), encoding="utf-8")
    set_password(folder / "passwords.toml", "alice", PASSWORD)
    db = Database(folder / "events.duckdb", folder / "metadata.toml")
    try:
        with serve_in_thread(db, ServerConfig(port=0, passwords=folder / "passwords.toml")
                             ) as running:
            yield SimpleNamespace(port=running.port, db=db)
    finally:
        db.close()


def dsn(served: SimpleNamespace) -> str:
    return f"host=127.0.0.1 port={served.port} user=alice password='{PASSWORD}' dbname=dpsql"


def run(served: SimpleNamespace, work: Any) -> Any:
    return run_asyncpg(served.port, PASSWORD, work, TIMEOUT)


def test_asyncpg_binds_datetimes_to_a_timestamp_column(served: SimpleNamespace) -> None:
    async def work(c: asyncpg.Connection) -> Any:
        statement = await c.prepare("SELECT COUNT(*) FROM events WHERE ts >= $1 AND ts < $2")
        types = [p.name for p in statement.get_parameters()]
        row = await statement.fetchrow(dt.datetime(2025, 3, 1), dt.datetime(2025, 4, 1))
        grains = await c.fetch("SELECT DATE_TRUNC('month', ts) AS m, MIN(ts) AS lo, "
                               "COUNT(*) AS n FROM events GROUP BY m ORDER BY m")
        return types, row, grains

    types, row, grains = run(served, work)
    assert types == ["timestamp", "timestamp"]
    assert 600 < row[0] < 760
    assert [g["m"] for g in grains] == [dt.datetime(2025, m, 1) for m in (1, 2, 3)]
    assert all(isinstance(g["lo"], dt.datetime) for g in grains)


@pytest.mark.parametrize("binary", [False, True])
def test_psycopg_timestamps_in_text_and_binary(served: SimpleNamespace, binary: bool) -> None:
    with psycopg.connect(dsn(served), connect_timeout=TIMEOUT) as c:
        cur = c.cursor(binary=binary)
        low, high = cur.execute("SELECT MIN(ts), MAX(ts) FROM events").fetchone() or (None, None)
        assert cur.description is not None
        assert [d.type_code for d in cur.description] == [1114, 1114]
        naive = cur.execute("SELECT COUNT(*) FROM events WHERE ts >= %s",
                            (dt.datetime(2025, 3, 1),)).fetchone()
        aware = cur.execute(  # 02:00 at +02 is midnight UTC
            "SELECT COUNT(*) FROM events WHERE ts >= %s",
            (dt.datetime(2025, 3, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=2))),)).fetchone()
    assert isinstance(low, dt.datetime) and isinstance(high, dt.datetime) and low <= high
    assert naive is not None and aware is not None and abs(naive[0] - aware[0]) < 50


def test_superset_time_range_filter_over_the_wire(served: SimpleNamespace) -> None:
    """The SQL Superset sends for a time-series chart on a timestamp column, at delta 0."""
    sql = ("SELECT DATE_TRUNC('day', ts) AS __timestamp, COUNT(*) AS count FROM events "
           "WHERE ts >= TO_TIMESTAMP('2025-03-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') "
           "AND ts < TO_TIMESTAMP('2025-03-08 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') "
           "GROUP BY DATE_TRUNC('day', ts) ORDER BY count DESC LIMIT 10000")
    with psycopg.connect(dsn(served), connect_timeout=TIMEOUT) as c:
        c.execute("SET dpsql.delta = 0")
        rows = c.execute(sql).fetchall()
    days = sorted(r[0] for r in rows)
    # Every day of the public range that the filter lets through (dpsql.privacy.key_filters): empty
    # ones hide nothing.
    assert days == [dt.datetime(2025, 3, d) for d in range(1, 8)]


JAVA = r"""
import java.sql.*;

public class DpsqlTimestamps {
    public static void main(String[] args) throws Exception {
        String sql = "SELECT COUNT(*) AS n, MAX(ts) AS hi FROM events WHERE ts >= ?";
        try (Connection c = DriverManager.getConnection(args[0], args[1], args[2]);
             PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setTimestamp(1, Timestamp.valueOf("2025-03-01 00:00:00"));
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                System.out.println(rs.getLong(1) + " " + rs.getTimestamp(2));
            }
        }
    }
}
"""


def test_pgjdbc_set_timestamp(served: SimpleNamespace, tmp_path: Path) -> None:
    out = run_java("DpsqlTimestamps", JAVA, served.port, PASSWORD, utc=True)
    count, day, _time = out.split()
    assert 600 < int(count) < 760 and day.startswith("2025-0")


def test_the_catalog_shows_a_timestamp_column(served: SimpleNamespace) -> None:
    with psycopg.connect(dsn(served), connect_timeout=TIMEOUT) as c:
        (data_type,), = c.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'events' "
            "AND column_name = 'ts'").fetchall()
        typname = c.execute(
            "SELECT t.typname FROM pg_attribute a JOIN pg_class c ON a.attrelid = c.oid "
            "JOIN pg_type t ON a.atttypid = t.oid WHERE c.relname = 'events' "
            "AND a.attname = 'ts'").fetchone()
    assert data_type == "timestamp without time zone"
    assert typname == ("timestamp",)
