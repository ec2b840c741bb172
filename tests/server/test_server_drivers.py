"""Drivers that bind typed parameters through the extended protocol: asyncpg (which needs the
server's ParameterDescription to type its arguments, sends ``client_encoding='utf-8'`` quoted,
and waits after Parse/Describe/Flush), SQLAlchemy's asyncpg dialect, psycopg 3 and pgjdbc (dates
and timestamps with a zone against a date column). Each call has a timeout, so a server that
never answers fails the test. The JDK and pgjdbc are installed by ``.ci/run``."""

from __future__ import annotations

import asyncio
import datetime as dt
from types import SimpleNamespace
from typing import Any

import asyncpg
import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from dpsql.server.wire import paramtypes
from dpsql.server.wire import types as t
from tests.support.helpers import run_asyncpg, run_java

TIMEOUT = 20
PASSWORD = "s3cret pw"


def run(served: SimpleNamespace, work: Any) -> Any:
    """``work(connection)`` on a fresh asyncpg connection, all of it under TIMEOUT."""
    return run_asyncpg(served.port, PASSWORD, work, TIMEOUT)


def test_asyncpg_connects_with_its_quoted_client_encoding(served) -> None:
    async def work(c: asyncpg.Connection) -> Any:
        return await c.fetchval("SHOW client_encoding")

    assert run(served, work) == "UTF8"


def test_asyncpg_parameters_are_typed_by_the_server(served) -> None:
    sql = ("SELECT COUNT(*) AS n FROM people WHERE age > $1::INTEGER AND income < $2 "
           "AND married = $3 AND signup_date >= $4")

    async def work(c: asyncpg.Connection) -> Any:
        statement = await c.prepare(sql)
        types = [p.name for p in statement.get_parameters()]
        row = await statement.fetchrow(30, 100000.0, True, dt.date(2020, 1, 1))
        return types, row

    types, row = run(served, work)
    assert types == ["int4", "float8", "bool", "date"]
    assert isinstance(row["n"], int) and row["n"] > 0


def test_asyncpg_parameter_types_from_compared_columns(served) -> None:
    sql = ("SELECT COUNT(*) AS n FROM visits v WHERE v.duration_min BETWEEN $1 AND $2 "
           "AND $3 <= day AND category IN ($4, $5) AND CAST($6 AS DATE) IS NOT NULL")

    async def work(c: asyncpg.Connection) -> Any:
        statement = await c.prepare(sql)
        return [p.name for p in statement.get_parameters()]

    assert run(served, work) == ["int8", "int8", "date", "text", "text", "date"]


def test_asyncpg_gets_a_refusal_without_hanging(served) -> None:
    async def work(c: asyncpg.Connection) -> Any:
        with pytest.raises(asyncpg.PostgresError) as refused:
            await c.fetch("SELECT email FROM people WHERE age > $1", 30)
        # The connection is still usable after the refusal (Sync was honoured).
        return refused.value, await c.fetchval("SELECT COUNT(*) FROM people WHERE age > $1", 30)

    refusal, n = run(served, work)
    assert "email" in str(refusal) and "aggregat" in str(refusal)
    assert isinstance(n, int)


def test_asyncpg_refused_cast_is_an_error_not_a_hang(served) -> None:
    async def work(c: asyncpg.Connection) -> Any:
        answered = await c.fetch("SELECT COUNT(*) FROM visits WHERE day >= $1::TIMESTAMP",
                                 dt.datetime(2025, 6, 1, 12))  # a TIMESTAMP is compared
        with pytest.raises(asyncpg.PostgresError) as refused:
            await c.fetch("SELECT COUNT(*) FROM visits WHERE day::TIMESTAMPTZ >= $1::DATE",
                          dt.date(2025, 6, 1))
        return answered, refused.value

    answered, refused = run(served, work)
    assert len(answered) == 1
    assert "CAST to TIMESTAMPTZ" in str(refused)


def test_psycopg_timestamp_with_zone_against_a_date_column(served) -> None:
    dsn = f"host=127.0.0.1 port={served.port} user=alice password='{PASSWORD}' dbname=dpsql"
    sql = "SELECT COUNT(*) FROM visits WHERE day >= %s"
    with psycopg.connect(dsn, connect_timeout=TIMEOUT) as c:
        as_timestamp = c.execute(sql, (dt.datetime(2025, 6, 1, tzinfo=dt.UTC),)).fetchone()
        as_text = c.execute(sql, ("2025-06-01 +00",)).fetchone()  # pgjdbc's setDate
        as_date = c.execute(sql, (dt.date(2025, 6, 1),)).fetchone()
        with pytest.raises(psycopg.errors.InvalidTextRepresentation, match="midnight UTC"):
            c.execute(sql, (dt.datetime(2025, 6, 1, 12, tzinfo=dt.UTC),))
    # Identical queries: the ledger reuses the first answer, so all three agree exactly.
    assert as_timestamp == as_text == as_date
    assert as_timestamp is not None and as_timestamp[0] > 0


@pytest.mark.parametrize(("text", "oid", "expected"), [
    ("2025-06-01 +00", t.DATE, dt.date(2025, 6, 1)),
    ("2025-06-01 13:45:00+02", t.DATE, dt.date(2025, 6, 1)),
    ("2025-06-01T00:00:00.000Z", t.TIMESTAMPTZ, dt.datetime(2025, 6, 1, tzinfo=dt.UTC)),
    ("2025-06-01 10:00:00.5-05:30", t.TIMESTAMPTZ,
     dt.datetime(2025, 6, 1, 10, 0, 0, 500000,
                 tzinfo=dt.timezone(-dt.timedelta(hours=5, minutes=30)))),
    ("2025-06-01 10:00:00+05", t.TIMESTAMP, dt.datetime(2025, 6, 1, 10)),
])
def test_temporal_text_parameters_decode_as_postgresql_reads_them(text, oid, expected) -> None:
    assert t.decode_parameter(text.encode(), oid, 0) == expected


def test_a_malformed_date_parameter_is_refused() -> None:
    with pytest.raises(t.ParameterError, match="not an ISO date"):
        t.decode_parameter(b"June 1st", t.DATE, 0)


def test_sqlalchemy_asyncpg_dialect(served) -> None:
    url = f"postgresql+asyncpg://alice:s3cret%20pw@127.0.0.1:{served.port}/dpsql"
    sql = sa.text("SELECT COUNT(*) AS n FROM visits WHERE day >= :day AND amount < :amount")

    async def work() -> Any:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as c:
                rows = (await c.execute(sql, {"day": dt.date(2025, 6, 1), "amount": 100.0})).all()
                with pytest.raises(sa.exc.DBAPIError, match="aggregat"):
                    await c.execute(sa.text("SELECT email FROM people"))
                return rows
        finally:
            await engine.dispose()

    rows = asyncio.run(asyncio.wait_for(work(), TIMEOUT))
    assert len(rows) == 1 and rows[0][0] > 0


# -- pgjdbc: setDate and setTimestamp send texts with a zone and no type ---------------------

JAVA = r"""
import java.sql.*;

public class DpsqlDates {
    public static void main(String[] args) throws Exception {
        String sql = "SELECT COUNT(*) AS n FROM visits WHERE day >= ?";
        try (Connection c = DriverManager.getConnection(args[0], args[1], args[2]);
             PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setDate(1, Date.valueOf("2025-06-01"));
            print(ps, "date");
            ps.setTimestamp(1, Timestamp.valueOf("2025-06-01 00:00:00"));
            print(ps, "timestamp");
        }
    }

    static void print(PreparedStatement ps, String label) throws SQLException {
        try (ResultSet rs = ps.executeQuery()) {
            rs.next();
            System.out.println(label + " " + rs.getLong(1));
        }
    }
}
"""


def test_pgjdbc_set_date_and_set_timestamp_against_a_date_column(served) -> None:
    # The JVM's zone is UTC, so both values are midnight UTC.
    out = run_java("DpsqlDates", JAVA, served.port, PASSWORD, utc=True)
    date, timestamp = out.split()[1::2]
    assert int(date) > 0 and int(timestamp) > 0


# -- inference without a client ----------------------------------------------------------------

COLUMNS = {"people": {"age": "int", "signup_date": "date", "person_id": "int"},
           "visits": {"day": "date", "person_id": "int", "amount": "float"}}


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT COUNT(*) FROM people WHERE age > $1", {1: t.INT8}),
    ("SELECT COUNT(*) FROM people p WHERE p.signup_date >= $1 AND $2 = p.age",
     {1: t.DATE, 2: t.INT8}),
    ("SELECT COUNT(*) FROM people WHERE age > $1::FLOAT8", {1: t.FLOAT8}),  # the cast wins
    ("SELECT COUNT(*) FROM people JOIN visits USING (person_id) WHERE person_id = $1",
     {1: t.INT8}),  # the same type in both tables
    ("SELECT $1::regclass", {}),  # a type name dpsql does not bind: text
    ("SELECT COUNT(*) FROM people WHERE age + $1 > 3", {1: t.INT8}),  # the other operand's
    ("SELECT COUNT(*) FROM visits WHERE amount > $1 * 2", {1: t.FLOAT8}),
    ("SELECT COUNT(*) FROM people WHERE age > $1 * 2", {1: t.INT8}),
    ("SELECT COUNT(*) FROM people WHERE age > -$1 / 2", {1: t.FLOAT8}),  # a division: double
    ("SELECT COUNT(*) FROM people WHERE age > $1 * $2", {}),  # ambiguous: text
    ("SELECT COUNT(*) FROM visits WHERE day > $1 - INTERVAL '1 day'", {1: t.DATE}),
    ("SELECT COUNT(*) FROM visits WHERE amount > $1 - INTERVAL '1 day'", {}),
    ("SELECT COUNT(*) FROM people WHERE nope = $1", {}),
])
def test_parameter_types_inferred_from_the_text(sql, expected) -> None:
    assert paramtypes.infer(sql, COLUMNS) == expected


def test_given_types_win_and_the_rest_is_text() -> None:
    assert paramtypes.combine([t.INT4, 0], 3, {2: t.DATE, 1: t.INT8}) == [t.INT4, t.DATE, t.TEXT]
