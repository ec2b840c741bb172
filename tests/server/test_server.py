"""The PostgreSQL-wire server: protocol, authentication, answers, catalog and sessions.

The server runs in-process on a random loopback port (module fixture ``served``), over the
sample data with a fresh ledger. psycopg 3 and a raw protocol client (``RawClient``) talk to it;
the other real clients (psql, SQLAlchemy/pandas, pg8000, pgjdbc) are in test_server_clients.py
and the bad-input, cancel and timeout tests in test_server_robustness.py.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import psycopg
import pytest
from psycopg import errors as pg_errors
from scramp import ScramClient

import dpsql
from dpsql.server import ServerConfig, serve_in_thread
from dpsql.server.auth import (
    MECHANISM,
    AuthenticationFailed,
    ScramExchange,
    Verifier,
    make_verifier,
    read_passwords,
    set_password,
)
from dpsql.server.machine import settings as st
from dpsql.server.machine.classify import Classifier, clean
from dpsql.server.wire import sqltext
from dpsql.server.wire import types as t
from tests.support.sandbox import RawClient, ServerClosed, error_fields, message, sandbox

ANALYSTS = {"alice": ("secret", 100000.0, 0.5), "bob": ("bob-pw", 1.5, 0.0),
            "carol": ("carol-pw", None, None)}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    setup = sandbox(tmp_path_factory.mktemp("server"), ANALYSTS)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DPSQL_LEDGER", raising=False)  # the sandbox's own ledger
        db = dpsql.Database(setup.database, setup.metadata)
    config = ServerConfig(port=0, passwords=setup.passwords, auth_failure_delay=0.3,
                          statement_timeout=60)
    with serve_in_thread(db, config) as running:
        yield SimpleNamespace(port=running.port, setup=setup, db=db, server=running.server)
    db.close()


def connect(served: SimpleNamespace, user: str = "alice", password: str | None = None,
            **kwargs: object) -> psycopg.Connection:
    password = password if password is not None else ANALYSTS[user][0]
    return psycopg.connect(host="127.0.0.1", port=served.port, user=user, password=password,
                           dbname="dpsql", connect_timeout=10, **kwargs)  # type: ignore[arg-type]


def spent(served: SimpleNamespace, analyst: str = "alice") -> float:
    status = served.db.budget(analyst)
    return status.spent.epsilon


# -- units ------------------------------------------------------------------------------------


def test_statement_splitting_respects_quotes_and_comments() -> None:
    text = ("SELECT ';' AS a; -- a comment; with a semicolon\n SELECT $$x;y$$, E'\\';', \"a;b\""
            ";; /* nested /* ; */ comment */ SELECT 3")
    parts = sqltext.split(text)
    assert len(parts) == 3
    assert parts[0] == "SELECT ';' AS a"
    assert sqltext.split(" ; -- only comments ; \n") == []
    assert sqltext.parameters("SELECT $1, '$2', \"$3\", $10") == 10
    assert sqltext.substitute("SELECT a-$1", lambda n: "(-1)") == "SELECT a-(-1)"
    with pytest.raises(sqltext.SQLTextError):
        sqltext.split("SELECT 'unterminated")


def test_cleaning_edits_sql_code_never_literals_comments_or_names() -> None:
    """PostgreSQL-only spellings are rewritten for sqlglot in the code alone: a string constant
    that happens to contain them reaches the library as written."""
    literal = "SELECT COUNT(*) FROM people WHERE sex = 'F COLLATE default'"
    assert clean(literal) == literal
    assert clean('SELECT sex COLLATE "default" FROM people') == "SELECT sex FROM people"
    assert clean("SELECT a OPERATOR(pg_catalog.~) 'OPERATOR(pg_catalog.~)'") == \
        "SELECT a ~ 'OPERATOR(pg_catalog.~)'"
    assert clean("SELECT $1::oid[], E'x\\'::oid[]' -- ::oid[]") == \
        "SELECT $1:: pg_catalog.oid[], E'x\\'::oid[]' -- ::oid[]"
    assert clean('SELECT 1 AS "x COLLATE default", $$ COLLATE default $$') == \
        'SELECT 1 AS "x COLLATE default", $$ COLLATE default $$'
    assert clean("SELECT 'unterminated COLLATE default") == "SELECT 'unterminated COLLATE default"
    # a comment, a dollar-tagged string and a quoted name are never edited; code around is
    assert clean("SELECT b OPERATOR(pg_catalog.!~~*) c /* OPERATOR(pg_catalog.=) */, "
                 "$t$ COLLATE default $t$") == \
        "SELECT b !~~* c /* OPERATOR(pg_catalog.=) */, $t$ COLLATE default $t$"
    assert clean('SELECT n COLLATE pg_catalog."default", "OPERATOR"(pg_catalog.x), x AS '
                 "regtype [ ] FROM t -- COLLATE default") == \
        'SELECT n, "OPERATOR"(pg_catalog.x), x AS pg_catalog.regtype[] FROM t -- COLLATE default'
    assert clean('SELECT n COLLATE "C" FROM t') == 'SELECT n COLLATE "C" FROM t'
    statement = Classifier({"people"}, set()).classify(literal)
    assert "'F COLLATE default'" in statement.engine_sql


def test_set_parsing_and_privacy_settings() -> None:
    assert st.parse_set("SET extra_float_digits = 3").value == "3"
    assert st.parse_set("SET SESSION application_name TO 'my app'").value == "my app"
    assert st.parse_set("SET TIME ZONE 'Europe/Paris'").name == "timezone"
    assert st.parse_set("SET search_path TO public, \"$user\"").value == "public, $user"
    assert st.parse_set("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY").name is None
    assert st.normalise("dpsql.epsilon", "0.5", {}) == "0.5"
    for bad in ("-1", "nan", "inf", "0", "abc"):
        with pytest.raises(st.SettingError) as e:
            st.normalise("dpsql.epsilon", bad, {})
        assert e.value.sqlstate == "22023"
    with pytest.raises(st.SettingError):  # not a probability; the owner's limit is checked
        st.normalise("dpsql.delta", "1.5", {})  # at SET (below), with the owner's values
    with pytest.raises(st.SettingError) as e:
        st.normalise("dpsql.epsilom", "1", {})
    assert e.value.sqlstate == "42704"
    with pytest.raises(st.SettingError) as e:
        st.normalise("client_encoding", "LATIN1", {})
    with pytest.raises(st.SettingError) as e:
        st.parse_set("SET ROLE admin", "alice")
    assert e.value.sqlstate == "42501"
    assert st.parse_set("set role alice", "alice").name is None  # dbt's, for its own analyst
    assert st.parse_set('SET ROLE "alice"', "alice").name is None
    assert st.parse_duration_ms("5s") == 5000 and st.parse_duration_ms("250") == 250


@pytest.mark.parametrize("value", ["0", "1", "-1", "12345.678", "-0.000123", "1e20", "10000",
                                   "99999999999999999999.5", "0.1", "NaN"])
def test_numeric_binary_round_trip(value: str) -> None:
    d = decimal.Decimal(value)
    back = t._numeric_from_binary(t._numeric_binary(d))
    assert (back.is_nan() and d.is_nan()) or back == d


def test_text_encodings() -> None:
    assert t.encoder(t.FLOAT8, 0)(3.0) == b"3"
    assert t.encoder(t.FLOAT8, 0)(float("inf")) == b"Infinity"
    assert t.encoder(t.BOOL, 0)(True) == b"t"
    assert t.encoder(t.TIMESTAMP, 0)(dt.datetime(2025, 1, 2, 3, 4, 5, 500000)) == \
        b"2025-01-02 03:04:05.5"
    assert t.encoder(t.DATE, 1)(dt.date(2000, 1, 2)) == struct.pack("!i", 1)
    assert t.literal(-3) == "(-3)" and t.literal("it's") == "'it''s'"
    assert t.pg_type_of("DECIMAL(18,3)") == (t.NUMERIC, (18 << 16 | 3) + 4)


#: A verifier written by dpsql's earlier, hand-written SCRAM code (password "pässword ﬁ",
#: salt 00..0f): files from before the move to scramp keep working unchanged.
OLD_VERIFIER = ("SCRAM-SHA-256$4096:AAECAwQFBgcICQoLDA0ODw==$V4nABdhTeTuq6YuH68CswwDzJsMnD5gXs0"
                "z71In2kYs=:E5lam/VTvy5OdfF3qdhsmFCzEaiVVjgu5kwb5/LqBkM=")


def test_scram_verifier_and_exchange(tmp_path) -> None:
    verifier = make_verifier("pässword")
    assert Verifier.decode(verifier.encode()) == verifier
    assert make_verifier("pässword ﬁ", 4096, bytes(range(16))).encode() == OLD_VERIFIER
    set_password(tmp_path / "pw.toml", "dora", "pw")
    text = (tmp_path / "pw.toml").read_text()
    assert "pw\"" not in text.replace('"dora"', "") and "SCRAM-SHA-256$4096:" in text
    assert (tmp_path / "pw.toml").stat().st_mode & 0o777 == 0o600
    assert set(read_passwords(tmp_path / "pw.toml")) == {"dora"}
    exchange = ScramExchange("dora", verifier, b"k" * 32)
    with pytest.raises(AuthenticationFailed):
        exchange.first(b"p=tls-server-end-point,,n=,r=abc")
    with pytest.raises(AuthenticationFailed):
        ScramExchange("x", None, b"k" * 32).final(b"c=biws,r=x,p=AAAA")
    with pytest.raises(ValueError, match="control"):
        make_verifier("tab\there")  # SASLprep prohibits it: libpq and pg8000 would disagree
    with pytest.raises(ValueError, match="too weak"):
        Verifier.decode(make_verifier("pw", 4096).encode().replace("$4096:", "$1000:"))


def scram_login(verifier: Verifier | None, password: str, client_user: str = "dora") -> bool:
    """One exchange between scramp's client (pg8000's) and the server side."""
    client = ScramClient([MECHANISM], client_user, password)
    exchange = ScramExchange("dora", verifier, b"k" * 32)
    try:
        client.set_server_first(exchange.first(client.get_client_first().encode()).decode())
        final = exchange.final(client.get_client_final().encode())
    except AuthenticationFailed:
        return False
    client.set_server_final(final.decode())  # the client checks the server's signature
    return True


def test_scram_exchange_ignores_the_scram_user_name_and_hides_unknown_users() -> None:
    verifier = make_verifier("correct horse")
    # The startup packet's user counts; the name in the SCRAM message (signed as sent) not.
    assert scram_login(verifier, "correct horse", client_user="someone=else,")
    assert not scram_login(verifier, "wrong horse")
    assert not scram_login(None, "correct horse")


# -- startup and authentication ---------------------------------------------------------------


def test_startup_reports_what_drivers_need(served) -> None:
    client = RawClient(served.port)
    try:
        seen = client.login("alice", "secret")
        kinds = [k for k, _ in seen]
        assert b"K" in kinds and kinds[-1] == b"Z" and seen[-1][1] == b"I"
        params = client.parameters
        assert params["server_version"].startswith("16.")
        assert params["client_encoding"] == "UTF8" and params["server_encoding"] == "UTF8"
        assert params["DateStyle"].startswith("ISO")
        assert params["integer_datetimes"] == "on"
        assert params["standard_conforming_strings"] == "on"
        assert params["TimeZone"] == "UTC" and params["is_superuser"] == "off"
        assert params["session_authorization"] == "alice"
        assert "application_name" in params
    finally:
        client.close()


def test_protocol_negotiation_for_newer_minor_versions(served) -> None:
    client = RawClient(served.port)
    try:
        seen = client.login("alice", "secret", extra={"_pq_.compression": "on"},
                            version=(3 << 16) | 2)
        negotiate = [body for kind, body in seen if kind == b"v"]
        assert negotiate, "expected NegotiateProtocolVersion"
        minor, count = struct.unpack("!ii", negotiate[0][:8])
        assert minor == 0 and count == 1 and b"_pq_.compression" in negotiate[0]
        rows = [b for k, b in client.query("SELECT 1 AS one") if k == b"D"]
        assert rows == [struct.pack("!hi", 1, 1) + b"1"]
    finally:
        client.close()


def test_old_protocol_is_refused(served) -> None:
    client = RawClient(served.port)
    try:
        client.send(RawClient.startup_packet("alice", version=2 << 16))
        kind, body = client.message()
        assert kind == b"E" and error_fields(body)["C"] == "0A000"
    finally:
        client.close()


def test_gssenc_and_ssl_requests_are_declined_without_a_certificate(served) -> None:
    client = RawClient(served.port)
    try:
        client.send(struct.pack("!ii", 8, 80877104))
        assert client.read_byte() == b"N"
        client.send(struct.pack("!ii", 8, 80877103))
        assert client.read_byte() == b"N"
        client.login("alice", "secret")
        assert any(k == b"C" for k, _ in client.query("SELECT 1"))
    finally:
        client.close()


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("nobody", "secret")])
def test_wrong_password_or_unknown_user_gets_28P01_after_a_delay(served, user, password) -> None:
    start = time.monotonic()
    with pytest.raises(psycopg.OperationalError) as e:
        psycopg.connect(host="127.0.0.1", port=served.port, user=user, password=password,
                        dbname="dpsql", connect_timeout=10)
    assert time.monotonic() - start >= 0.3
    assert "password authentication failed" in str(e.value)
    client = RawClient(served.port)
    try:
        with pytest.raises(ServerClosed, match="password authentication failed"):
            client.login(user, password)
    finally:
        client.close()


def test_nothing_runs_before_authentication(served) -> None:
    before = spent(served)
    history = len(served.db.ledger.history("alice", limit=1000))
    client = RawClient(served.port)
    try:
        client.send(RawClient.startup_packet("alice"))
        kind, _ = client.message()
        assert kind == b"R"  # AuthenticationSASL
        client.send(message(b"Q", b"SELECT COUNT(*) FROM people\0"))
        kind, body = client.message()
        assert kind == b"E" and error_fields(body)["C"] == "08P01"
        with pytest.raises((ServerClosed, OSError)):
            client.message()
    finally:
        client.close()
    assert spent(served) == before
    assert len(served.db.ledger.history("alice", limit=1000)) == history


# -- simple and extended query ---------------------------------------------------------------


def test_simple_query_with_several_statements_and_empty_query(served) -> None:
    client = RawClient(served.port)
    try:
        client.login("alice", "secret")
        seen = client.query("SELECT COUNT(*) FROM people; SHOW dpsql.epsilon; SELECT 2 AS two")
        kinds = [k for k, _ in seen]
        assert kinds.count(b"T") == 3 and kinds.count(b"C") == 3 and kinds[-1] == b"Z"
        tags = [b.rstrip(b"\0") for k, b in seen if k == b"C"]
        assert tags == [b"SELECT 1", b"SHOW", b"SELECT 1"]
        assert [k for k, _ in client.query(" ;; -- nothing\n")] == [b"I", b"Z"]
        # an error stops the rest of the message
        seen = client.query("SELECT 1; SELECT email FROM people; SELECT 3")
        kinds = [k for k, _ in seen]
        assert kinds.count(b"C") == 1 and b"E" in kinds
        err = error_fields(next(b for k, b in seen if k == b"E"))
        assert err["C"] == "42803" and err["S"] == "ERROR"
    finally:
        client.close()


@pytest.mark.usefixtures("seeded_randomness")  # noisy answers within bands
def test_private_answers_simple_extended_prepared_and_binary(served) -> None:
    with connect(served, autocommit=True) as conn:
        (n,) = conn.execute("SELECT COUNT(*) FROM people").fetchone()
        assert abs(n - 20000) < 500
        rows = conn.execute("SELECT sex, COUNT(*) AS n FROM people WHERE age > %s GROUP BY sex "
                            "ORDER BY sex", (30,)).fetchall()
        assert [r[0] for r in rows] == ["F", "M"]
        prepared = conn.execute("SELECT education, AVG(income) FROM people WHERE age >= %s "
                                "GROUP BY education", (40,), prepare=True).fetchall()
        assert len(prepared) == 6 and all(isinstance(r[1], float) for r in prepared)
        again = conn.execute("SELECT education, AVG(income) FROM people WHERE age >= %s "
                             "GROUP BY education", (40,), prepare=True).fetchall()
        assert again == prepared  # the same question gets its stored answer again
        cur = conn.cursor(binary=True)
        cur.execute("SELECT married, COUNT(*) AS n, AVG(age) AS a FROM people WHERE sex = %s "
                    "GROUP BY married", ("F",))
        assert [d.name for d in cur.description] == ["married", "n", "a"]
        rows = cur.fetchall()
        assert {r[0] for r in rows} == {True, False}
        assert all(isinstance(r[1], int) and isinstance(r[2], float) for r in rows)
    with connect(served, autocommit=True) as conn:
        for beyond in ("SET dpsql.delta = 0.9", "SET dpsql.epsilon = 1000"):
            with pytest.raises(psycopg.errors.InvalidParameterValue, match="max_query"):
                conn.execute(beyond)  # beyond the owner's per-query limits (0.1 and 100)
        conn.execute("SET dpsql.delta = 1e-6")
        rows = conn.cursor(binary=True).execute(
            "SELECT signup_date, COUNT(*) FROM people GROUP BY signup_date").fetchall()
        assert rows and all(isinstance(r[0], dt.date) for r in rows)


def test_binary_and_text_formats_of_the_common_types(served) -> None:
    sql = ("SELECT CAST(1 AS SMALLINT) AS a, CAST(2 AS INTEGER) AS b, CAST(3 AS BIGINT) AS c, "
           "CAST(1.5 AS REAL) AS d, CAST(2.25 AS DOUBLE PRECISION) AS e, "
           "CAST(12345.678 AS NUMERIC(10, 3)) AS f, 'tëxt' AS g, CAST('v' AS VARCHAR) AS h, "
           "TRUE AS i, DATE '2024-02-29' AS j, TIMESTAMP '2024-01-02 03:04:05.25' AS k, "
           "CAST(NULL AS INTEGER) AS l")
    expected = (1, 2, 3, 1.5, 2.25, decimal.Decimal("12345.678"), "tëxt", "v", True,
                dt.date(2024, 2, 29), dt.datetime(2024, 1, 2, 3, 4, 5, 250000), None)
    with connect(served, autocommit=True) as conn:
        for binary in (False, True):
            row = conn.cursor(binary=binary).execute(sql).fetchone()
            assert row == expected, binary
        oids = [d.type_code for d in conn.execute(sql).description]
        assert oids == [21, 23, 20, 700, 701, 1700, 25, 25, 16, 1082, 1114, 23]
        # parameters of every common type, text and binary
        params = (7, 2**40, 1.25, decimal.Decimal("3.5"), "x'y", True, dt.date(2020, 1, 1),
                  dt.datetime(2020, 1, 1, 12, 0), None)
        for binary in (False, True):
            row = conn.cursor(binary=binary).execute(
                "SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s", params).fetchone()
            assert row[0] == 7 and row[1] == 2**40 and row[2] == 1.25
            assert decimal.Decimal(str(row[3])) == decimal.Decimal("3.5")
            assert row[4] == "x'y" and row[5] is True and row[8] is None


def test_describe_answers_from_the_plan_without_charging(served) -> None:
    before = spent(served)
    client = RawClient(served.port)
    try:
        client.login("alice", "secret")
        sql = b"SELECT sex, COUNT(*) AS n, AVG(income) FROM people WHERE age > $1 GROUP BY sex"
        client.send(message(b"P", b"s1\0" + sql + b"\0" + struct.pack("!hI", 1, 23))
                    + message(b"D", b"Ss1\0") + message(b"S", b""))
        seen = client.until(b"Z")
        kinds = [k for k, _ in seen]
        assert kinds == [b"1", b"t", b"T", b"Z"]
        description = next(b for k, b in seen if k == b"T")
        assert b"sex\0" in description and b"n\0" in description and b"avg\0" in description
        assert struct.unpack("!hI", next(b for k, b in seen if k == b"t")) == (1, 23)
        # Bind + Describe portal: still nothing charged
        client.send(message(b"B", b"p1\0s1\0" + struct.pack("!hhi", 0, 1, 2) + b"30"
                            + struct.pack("!hh", 1, 1))
                    + message(b"D", b"Pp1\0") + message(b"S", b""))
        assert [k for k, _ in client.until(b"Z")] == [b"2", b"T", b"Z"]
        assert spent(served) == before
        client.send(message(b"E", b"p1\0" + struct.pack("!i", 1)) + message(b"H", b""))
        # the answer's notes as a NOTICE (the bounds in force), then the rows
        assert [k for k, _ in client.until(b"s")] == [b"N", b"D", b"s"]  # PortalSuspended
        client.send(message(b"E", b"p1\0" + struct.pack("!i", 0)) + message(b"S", b""))
        seen = client.until(b"Z")
        assert [k for k, _ in seen] == [b"D", b"C", b"Z"]
        assert spent(served) == pytest.approx(before + 1.0)
        # a refused statement is refused at Describe, and nothing is charged
        client.send(message(b"P", b"s2\0SELECT email FROM people\0" + struct.pack("!h", 0))
                    + message(b"D", b"Ss2\0") + message(b"S", b""))
        seen = client.until(b"Z")
        assert error_fields(next(b for k, b in seen if k == b"E"))["C"] == "42803"
    finally:
        client.close()


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM people",
    "SELECT sex, COUNT(*) AS n, AVG(income) FROM people GROUP BY sex",
    "SELECT sex, COUNT(*) * 2 AS n FROM people GROUP BY sex ORDER BY n",
    "SELECT married, ROUND(AVG(age), 1) AS a FROM people GROUP BY married HAVING COUNT(*) > 10",
    "SELECT age, COUNT(*) FROM people GROUP BY age LIMIT 3",
    "SELECT state, COUNT(*) AS c FROM people GROUP BY state ORDER BY c DESC LIMIT 3",
    "SELECT MEDIAN(age), COUNT(*) / 2, SUM(income) / COUNT(*) FROM people",
    "SELECT signup_date, COUNT(*) FROM people GROUP BY signup_date",
    "SELECT category, SUM(amount) FROM visits GROUP BY category",
])
def test_described_columns_are_the_answer_columns(served, sql) -> None:
    route = served.db.route(sql, 1.0, 1e-6, "laplace")
    result = served.db.query(sql, 1.0, 1e-6, "laplace", analyst="alice")
    assert route.columns() == [(c.name, c.type) for c in result.columns]


def test_extended_protocol_errors_skip_to_sync_and_close_works(served) -> None:
    client = RawClient(served.port)
    try:
        client.login("alice", "secret")
        client.send(message(b"B", b"\0nope\0" + struct.pack("!hhh", 0, 0, 0))
                    + message(b"E", b"\0" + struct.pack("!i", 0)) + message(b"S", b""))
        seen = client.until(b"Z")
        assert [k for k, _ in seen] == [b"E", b"Z"]
        assert error_fields(seen[0][1])["C"] == "26000"
        client.send(message(b"P", b"x\0SELECT 1\0\0\0") + message(b"C", b"Sx\0")
                    + message(b"C", b"Sx\0") + message(b"S", b""))
        assert [k for k, _ in client.until(b"Z")] == [b"1", b"3", b"3", b"Z"]
        client.send(message(b"P", b"\0SELECT 1; SELECT 2\0\0\0") + message(b"S", b""))
        seen = client.until(b"Z")
        assert error_fields(seen[0][1])["C"] == "42601"
    finally:
        client.close()


# -- privacy: refusals, budget, settings ------------------------------------------------------


@pytest.mark.parametrize("sql,sqlstate", [
    ("SELECT email FROM people", "42803"),
    ("SELECT COUNT(*) FROM secrets", "42P01"),
    ("DROP TABLE people", "42501"),
    ("SELECT COUNT(*) FROM read_parquet('people.parquet')", "42501"),
    ("SELECT state, COUNT(*) FROM people GROUP BY state", "42501"),
    ("SELECT * FROM duckdb_settings()", "42501"),
    ("SELEC 1", "42601"),
])
def test_refusals_carry_their_sqlstate(served, sql, sqlstate) -> None:
    before = spent(served)
    with connect(served, autocommit=True) as conn, pytest.raises(psycopg.Error) as e:
        conn.execute(sql)
    assert e.value.sqlstate == sqlstate, str(e.value)
    assert spent(served) == before


def test_set_dpsql_epsilon_changes_the_charge(served) -> None:
    with connect(served, autocommit=True) as conn:
        conn.execute("SET dpsql.epsilon = 0.25")
        assert conn.execute("SHOW dpsql.epsilon").fetchone() == ("0.25",)
        before = spent(served)
        conn.execute("SELECT AVG(children) FROM people WHERE age < 25").fetchall()
        assert spent(served) == pytest.approx(before + 0.25)
        with pytest.raises(pg_errors.InvalidParameterValue):
            conn.execute("SET dpsql.epsilon = -1")
        conn.execute("RESET dpsql.epsilon")
        assert conn.execute("SHOW dpsql.epsilon").fetchone() == ("1",)
        assert "left epsilon" in conn.execute("SHOW dpsql.budget").fetchone()[0]


def test_set_dpsql_bounds_bigquery_options_and_bias_notices(served) -> None:
    """SET dpsql.max_rows / dpsql.max_groups are the session's contribution bounds (EXPLAIN
    and the NOTICE say them), BigQuery's OPTIONS win over them, above the cap is 22023."""
    notices: list[str] = []
    with connect(served, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SET dpsql.max_rows = 20")
        conn.execute("SET dpsql.max_groups = 2")
        assert conn.execute("SHOW dpsql.max_rows").fetchone() == ("20",)
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT category, COUNT(*) FROM visits GROUP BY category").fetchall())
        # public keys: no groups cap; the bounds stated once, in the bias note
        assert "at most 20 row(s)" in plan and "across all its groups" in plan
        assert plan.count("row(s)") == 1, plan
        conn.execute("SELECT COUNT(*) FROM visits").fetchall()
        assert any("at most 20 row(s)" in n for n in notices), notices
        before = spent(served)
        conn.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0, epsilon = 0.125, "
                     "max_rows_contributed = 30) COUNT(*) FROM visits").fetchall()
        assert spent(served) == pytest.approx(before + 0.125)
        assert "at most 30 row(s)" in notices[-1]
        conn.execute("SET dpsql.max_rows = 5000")
        with pytest.raises(pg_errors.InvalidParameterValue, match="cap of 1000"):
            conn.execute("SELECT COUNT(*) FROM visits")
        with pytest.raises(pg_errors.InvalidParameterValue):
            conn.execute("SET dpsql.max_groups = 0")
        conn.execute("RESET dpsql.max_rows")
        assert conn.execute("SHOW dpsql.max_rows").fetchone() == ("default",)


def test_set_dpsql_retention_sends_a_charged_estimate_as_a_notice(served) -> None:
    """SET dpsql.retention = EPSILON: each query also estimates what its bounds keep, charged
    at that epsilon, sent as a NOTICE; OFF stops it; an invalid epsilon is 22023."""
    notices: list[str] = []
    with connect(served, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SET dpsql.epsilon = 0.5")
        conn.execute("SET dpsql.max_rows = 3")
        conn.execute("SET dpsql.retention = 0.125")
        assert conn.execute("SHOW dpsql.retention").fetchone() == ("0.125",)
        before = spent(served)
        conn.execute("SELECT COUNT(*) FROM visits WHERE amount > 10").fetchall()
        assert spent(served) == pytest.approx(before + 0.625)
        assert any(n.startswith("Retention (estimated at epsilon 0.125, charged): the bounds "
                                "keep about") for n in notices), notices
        conn.execute("SET dpsql.retention = off")
        before, seen = spent(served), len(notices)
        conn.execute("SELECT COUNT(*) FROM visits WHERE amount > 20").fetchall()
        assert spent(served) == pytest.approx(before + 0.5)
        assert not any(n.startswith("Retention") for n in notices[seen:])
        with pytest.raises(pg_errors.InvalidParameterValue):
            conn.execute("SET dpsql.retention = -1")


def test_caveats_are_notices_and_set_dpsql_caveats_off_stops_them(served) -> None:
    """Daily counts and AVGs at epsilon 0.05: NOTICEs say the noise exceeds the values and
    AVGs sit at a bound (about 11 of 14 do; none, a chance of about 1e-8); SET dpsql.caveats =
    off stops them (the same answer, stored, without them); a bad value is 22023."""
    daily = ("SELECT day, COUNT(*) AS n, AVG(amount) AS a FROM visits "
             "WHERE day < DATE '2025-01-15' GROUP BY day")
    notices: list[str] = []
    with connect(served, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SET dpsql.epsilon = 0.05")
        assert len(conn.execute(daily).fetchall()) == 14
        assert any(n.startswith("The noise exceeds the value in ") for n in notices), notices
        assert any(n.startswith("AVG at a bound: a at ") for n in notices), notices
        conn.execute("SET dpsql.caveats = off")
        assert conn.execute("SHOW dpsql.caveats").fetchone() == ("off",)
        seen = len(notices)
        assert len(conn.execute(daily).fetchall()) == 14
        assert not any("noise exceeds" in n or "AVG at a bound" in n for n in notices[seen:])
        assert any(n.startswith("Contribution bounds") for n in notices[seen:])  # still there
        with pytest.raises(pg_errors.InvalidParameterValue):
            conn.execute("SET dpsql.caveats = maybe")


def test_bigquery_query_runs_unchanged_with_zetasql_reports(served) -> None:
    """A BigQuery DP query over the wire: OPTIONS, privacy_unit_column, per-row bounds and a
    per-group COUNT bound that changes nothing; a per-group SUM bound is answered on each
    unit's totals, a per-group AVG bound on each unit's average; a per-group VAR_POP bound is
    0A000, uncharged; report_format => 'JSON' is a json column."""
    with connect(served, autocommit=True) as conn:
        before = spent(served)
        rows = conn.execute(
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.25, delta = 1e-6, "
            "max_groups_contributed = 1, privacy_unit_column = person_id) category, "
            "COUNT(*, contribution_bounds_per_group => (0, 1000)) AS n, "
            "AVG(amount, contribution_bounds_per_row => (0, 100)) AS a "
            "FROM visits GROUP BY category").fetchall()
        assert len(rows) == 8 and spent(served) == pytest.approx(before + 0.25)
        total = conn.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0, epsilon = 0.25) "
                             "SUM(amount, contribution_bounds_per_group => (0, 100)) "
                             "FROM visits").fetchall()
        assert len(total) == 1 and spent(served) == pytest.approx(before + 0.5)
        with pytest.raises(pg_errors.FeatureNotSupported, match="contribution_bounds_per_row"):
            conn.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                         "VAR_POP(amount, "
                         "contribution_bounds_per_group => (0, 100)) FROM visits")
        assert spent(served) == pytest.approx(before + 0.5)
        # ZetaSQL's report: a json column (OID 114), which psycopg reads as a dict
        cur = conn.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0, epsilon = 0.25) "
                           "AVG(amount, "
                           "contribution_bounds_per_group => (0, 100), report_format => 'JSON') "
                           "AS a FROM visits")
        assert cur.description is not None and cur.description[0].type_code == 114
        [(report,)] = cur.fetchall()
        interval = report["result"]["noise_confidence_interval"]
        assert 0 <= report["result"]["value"] <= 100 and interval["confidence_level"] == 0.95
        assert interval["lower_bound"] == -interval["upper_bound"] < 0
        assert spent(served) == pytest.approx(before + 0.75)
        with pytest.raises(pg_errors.FeatureNotSupported, match="'JSON'"):
            conn.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                         "COUNT(*, report_format => 'PROTO') "
                         "FROM visits")
        assert spent(served) == pytest.approx(before + 0.75)
        # a report read by field access and BigQuery's JSON functions: json and float8
        cur = conn.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.25, delta = 0) "
                           "COUNT(*, report_format => 'JSON').result.noise_confidence_interval "
                           "AS ci, "
                           "DOUBLE(COUNT(*, report_format => 'JSON').result.value) AS v "
                           "FROM visits")
        assert cur.description is not None
        assert [c.type_code for c in cur.description] == [114, 701]
        [(ci, value)] = cur.fetchall()
        assert set(ci) == {"confidence_level", "lower_bound", "upper_bound"}
        assert ci["upper_bound"] > 0 and isinstance(value, float)
        assert spent(served) == pytest.approx(before + 1.0)
        # APPROX_QUANTILES' report as BigQuery users read it: a json[] column of the quantiles
        cur = conn.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.25, delta = 0) "
                           "JSON_QUERY_ARRAY(APPROX_QUANTILES(amount, 2, contribution_bounds_"
                           "per_row => (0, 100), report_format => 'JSON').result) AS q "
                           "FROM visits")
        assert cur.description is not None and cur.description[0].type_code == 199
        [(quantiles,)] = cur.fetchall()
        assert len(quantiles) == 3 and all(
            q["noise_confidence_interval"]["upper_bound"] == 100 for q in quantiles)
        assert spent(served) == pytest.approx(before + 1.25)
        with pytest.raises(pg_errors.FeatureNotSupported, match="not an expression"):
            conn.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                         "DPSQL_REPORT(COUNT(*) + 1) FROM visits")
        assert spent(served) == pytest.approx(before + 1.25)


def test_a_union_of_private_queries_and_a_private_subquery_over_the_wire(served) -> None:
    """dpsql.routes.releases over the wire: the parts charged once as the sum of their costs (the
    extended protocol's Describe plans the parts, reading nothing), the rows combined; an
    exact arm refused (0A000) with nothing charged."""
    clause = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = {}, delta = 0) "
    union = (clause.format(0.125) + "category, COUNT(*) AS n FROM visits GROUP BY category "
             "UNION ALL " + clause.format(0.25) + "category, COUNT(*) FROM visits GROUP BY "
             "category")
    with connect(served) as conn:
        before = spent(served)
        cur = conn.execute(union)  # the extended protocol: Describe, then Execute
        assert [d.name for d in cur.description or ()] == ["category", "n"]
        assert len(cur.fetchall()) == 16
        assert spent(served) == pytest.approx(before + 0.375)
        [(near,)] = conn.execute("SELECT ABS((" + clause.format(0.25) + "COUNT(*) FROM visits) "
                                 "- 100) >= 0").fetchall()
        assert near is True and spent(served) == pytest.approx(before + 0.625)
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="exact query"):
            conn.execute(clause.format(1) + "COUNT(*) FROM visits UNION ALL SELECT COUNT(*) "
                         "FROM visits")
        assert spent(served) == pytest.approx(before + 0.625)


def test_a_composite_over_the_wire_is_refused_before_its_charge(served) -> None:
    """The attacker's pass (docs/audit.md): a session's epsilon within the owner's per-query
    limit (default 100), asked by each arm of a UNION, is beyond it in all: refused (22023)
    with nothing charged, as is a scalar subquery that would return several rows."""
    with connect(served) as conn:
        before = spent(served)
        conn.execute("SET dpsql.epsilon = 60")
        with pytest.raises(pg_errors.InvalidParameterValue, match="max_query_epsilon"):
            conn.execute("SELECT COUNT(*) FROM visits UNION ALL SELECT COUNT(*) FROM visits")
        conn.rollback()
        conn.execute("RESET dpsql.epsilon")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="LIMIT 1"):
            conn.execute("SELECT (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, "
                         "delta = 0) COUNT(*) FROM visits GROUP BY category) AS n")
        assert spent(served) == pytest.approx(before)


@pytest.mark.parametrize(("sql", "at"), [
    ("SELECT COUNT(*) FROM visits WHERE", "WHERE"),
    ("SELECT 1; SELECT COUNT(*) FROM visits WHERE amount > 3 AND", "AND"),  # simple Query
    ("EXPLAIN SELECT COUNT(*) FROM visits WHERE", "WHERE"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0, epsilon = 0.5) SUM(amount, "
     "contribution_bounds_per_row => (0, 10)) FROM visits WHERE", "WHERE"),
    ("SELECT\tCOUNT(*\tFROM visits", "FROM"),  # a tab is one character
    ("SELECT COUNT(*)\r\nFROM visits\r\nWHERE amount IN (1,\r\n2 AND", "AND"),
    ("SELECT COUNT(*) FROM visits WHERE category = '日本' AND (amount > 3 FROM", "FROM"),
    ("SELEC COUNT(*) FROM visits", "SELEC"),  # the misspelt word, as PostgreSQL points
])
def test_syntax_error_position_is_the_p_field(served, sql: str, at: str) -> None:
    """A syntax error carries PostgreSQL's P field, the 1-based position in the text sent, for
    psql's caret and drivers' diag.statement_position; nothing is charged."""
    before = spent(served)
    with connect(served, autocommit=True) as conn, pytest.raises(pg_errors.SyntaxError) as e:
        conn.execute(sql)
    assert e.value.diag.statement_position == str(sql.rindex(at) + 1)
    assert spent(served) == before


def test_exhausted_budget_is_53400_and_unknown_budget_is_28000(served) -> None:
    with connect(served, "bob", autocommit=True) as conn:
        conn.execute("SELECT COUNT(*) FROM people").fetchall()
        with pytest.raises(psycopg.Error) as e:
            conn.execute("SELECT COUNT(*) FROM visits")
        assert e.value.sqlstate == "53400"
        assert "--" not in e.value.diag.message_primary
        assert e.value.diag.message_hint == ("SHOW dpsql.budget tells what is left; a smaller "
                                             "SET dpsql.epsilon may fit")
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the session goes on
    with connect(served, "carol", autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as e:
            conn.execute("SELECT COUNT(*) FROM people")
        assert e.value.sqlstate == "28000"
        with pytest.raises(psycopg.Error) as e:
            conn.execute("SHOW dpsql.budget")
        assert e.value.sqlstate == "28000"
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_refusals_name_the_servers_remedy_in_the_hint(served) -> None:
    """The message is the library's (door-neutral); the HINT says what to SET, never the
    command line's --delta."""
    with connect(served, autocommit=True) as conn:
        with pytest.raises(pg_errors.Error) as e:
            conn.execute("SELECT state, COUNT(*) FROM people GROUP BY state")
        assert "delta > 0" in e.value.diag.message_primary
        assert "--" not in e.value.diag.message_primary
        assert e.value.diag.message_hint == "SET dpsql.delta = 1e-06"


def test_limit_0_sends_the_columns_and_charges_nothing(served) -> None:
    with connect(served, autocommit=True) as conn:
        before = spent(served)
        history = len(served.db.ledger.history("alice"))
        sql = ("SELECT sex, COUNT(*) AS n, AVG(income) AS income FROM people GROUP BY sex "
               "ORDER BY sex LIMIT 0")
        for prepare in (False, True):  # the simple and the extended protocol
            cur = conn.execute(sql, prepare=prepare)
            assert cur.fetchall() == []
            assert [(d.name, d.type_code) for d in cur.description] == [
                ("sex", t.TEXT), ("n", t.INT8), ("income", t.FLOAT8)]
        assert spent(served) == before
        assert len(served.db.ledger.history("alice")) == history
        cur = conn.execute("SELECT email FROM people LIMIT 0")  # row-level: names only
        assert cur.fetchall() == [] and [d.name for d in cur.description] == ["email"]
        with pytest.raises(pg_errors.Error) as e:
            conn.execute("SELECT email FROM people LIMIT 1")
        assert e.value.sqlstate != "42601" and spent(served) == before


def test_transactions_and_failed_transaction_state(served) -> None:
    with connect(served) as conn:  # psycopg opens a transaction block itself
        assert conn.execute("SELECT COUNT(*) FROM people").fetchone()[0] > 0
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        with pytest.raises(psycopg.Error):
            conn.execute("SELECT email FROM people")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(pg_errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.rollback()
        assert conn.execute("SELECT 1").fetchone() == (1,)
        conn.commit()


def test_probes_of_bi_tools(served) -> None:
    with connect(served, autocommit=True) as conn:
        version = conn.execute("SELECT version()").fetchone()[0]
        assert version.startswith("PostgreSQL 16") and "dpsql" in version
        assert conn.execute("SELECT current_schema()").fetchone() == ("public",)
        assert conn.execute("SELECT current_database(), current_user").fetchone() == \
            ("dpsql", "alice")
        assert conn.execute("SHOW TRANSACTION ISOLATION LEVEL").fetchone() == \
            ("read committed",)
        conn.execute("SET extra_float_digits = 3")
        conn.execute("SET application_name = 'Metabase v0.50'")
        assert conn.info.parameter_status("application_name") == "Metabase v0.50"
        assert conn.execute("SHOW application_name").fetchone() == ("Metabase v0.50",)
        conn.execute("BEGIN")
        conn.execute("COMMIT")
        conn.execute("BEGIN")
        conn.execute("ROLLBACK")
        conn.execute("DISCARD ALL")
        assert conn.info.parameter_status("application_name") == ""
        assert conn.execute("SELECT current_setting('server_version_num')").fetchone() == \
            ("160004",)
        assert conn.execute("SELECT 1 AS x WHERE 1 = 0").fetchall() == []
        with pytest.raises(pg_errors.UndefinedObject):
            conn.execute("SHOW no_such_setting")


def test_catalog_lists_declared_tables_only_and_no_data(served) -> None:
    with connect(served, autocommit=True) as conn:
        tables = conn.execute("SELECT table_schema, table_name FROM information_schema.tables "
                              "ORDER BY 2").fetchall()
        # the declared tables, and the ledger views (schema dpsql: no private data)
        assert sorted(tables) == [("dpsql", v) for v in ("budgets", "queries", "spending")] + [
            ("public", t) for t in ("categories", "people", "prescriptions", "states",
                                    "visits")]
        columns = conn.execute(
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull "
            "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
            "WHERE c.relname = %s AND a.attnum > 0 ORDER BY a.attnum", ("people",)).fetchall()
        assert columns[0] == ("person_id", "bigint", True)
        assert ("income", "double precision", False) in columns
        assert conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'people'"
                            ).fetchone() == (-1.0,)
        assert conn.execute("SELECT 'people'::regclass::oid = c.oid FROM pg_class c "
                            "WHERE relname = 'people'").fetchone() == (True,)
        # private tables are never reachable from the catalog's engine
        with pytest.raises(psycopg.Error):
            conn.execute("SELECT COUNT(*) FROM people p JOIN pg_class c ON true")
        with pytest.raises(psycopg.Error) as e:
            conn.execute("SELECT * FROM read_csv('/etc/passwd')")
        assert e.value.sqlstate.startswith("42")


DBEAVER_AND_METABASE = [
    "SELECT current_schema(), session_user",
    "SHOW search_path",
    "SELECT n.oid, n.*, d.description FROM pg_catalog.pg_namespace n LEFT OUTER JOIN "
    "pg_catalog.pg_description d ON d.objoid = n.oid AND d.objsubid = 0 "
    "AND d.classoid = 'pg_namespace'::regclass ORDER BY nspname",
    "SELECT * FROM pg_catalog.pg_settings WHERE name = 'standard_conforming_strings'",
    "SELECT db.oid, db.* FROM pg_catalog.pg_database db WHERE datname = 'dpsql'",
    "SELECT string_agg(word, ',') FROM pg_catalog.pg_get_keywords() "
    "WHERE word <> ALL ('{a,abs,absolute}'::text[])",
    "SELECT t.oid, t.*, c.relkind, format_type(nullif(t.typbasetype, 0), t.typtypmod) AS b, "
    "d.description FROM pg_catalog.pg_type t LEFT OUTER JOIN pg_catalog.pg_type et "
    "ON et.oid = t.typelem LEFT OUTER JOIN pg_catalog.pg_class c ON c.oid = t.typrelid "
    "LEFT OUTER JOIN pg_catalog.pg_description d ON t.oid = d.objoid "
    "WHERE t.typname IS NOT NULL AND (c.relkind IS NULL OR c.relkind = 'c')",
    "SELECT c.oid, c.*, d.description, pg_catalog.pg_get_expr(c.relpartbound, c.oid) AS pe, "
    "pg_catalog.pg_get_partkeydef(c.oid) AS pk FROM pg_catalog.pg_class c LEFT OUTER JOIN "
    "pg_catalog.pg_description d ON d.objoid = c.oid AND d.objsubid = 0 "
    "AND d.classoid = 'pg_class'::regclass WHERE c.relnamespace = 2200 "
    "AND c.relkind NOT IN ('i', 'I', 'c')",
    "SELECT i.*, pg_catalog.pg_stat_get_numscans(i.indexrelid) AS n FROM pg_catalog.pg_index i",
    "SELECT nspname AS TABLE_SCHEM FROM pg_catalog.pg_namespace WHERE nspname <> 'pg_toast' "
    "AND (nspname !~ '^pg_temp_' OR nspname = (pg_catalog.current_schemas(true))[1]) "
    "ORDER BY TABLE_SCHEM",
    "SELECT has_table_privilege('public.people', 'SELECT')",
]


def test_dbeaver_and_metabase_catalog_probes_answer(served) -> None:
    with connect(served, autocommit=True) as conn:
        results = [conn.execute(q).fetchall() for q in DBEAVER_AND_METABASE]
    assert results[0] == [("public", "alice")]
    assert {r[2] for r in results[2]} >= {"public", "pg_catalog"}
    assert [r[2] for r in results[4]] == ["dpsql"]  # oid, oid, datname, ...
    keywords = results[5][0][0].split(",")  # PostgreSQL's keywords but those excluded
    assert "select" in keywords and "abort" in keywords and "absolute" not in keywords
    assert {r[2] for r in results[7]} == {"categories", "people", "prescriptions", "states",
                                          "visits"}
    assert [r[0] for r in results[9]] == ["dpsql", "information_schema", "pg_catalog",
                                          "public"]  # dpsql: the ledger views
    assert results[10] == [(True,)]


def test_explain_shows_the_plan_and_costs_nothing(served) -> None:
    before = spent(served)
    with connect(served, autocommit=True) as conn:
        lines = [r[0] for r in conn.execute("EXPLAIN SELECT AVG(amount) FROM visits")]
    assert lines[0].startswith("Privacy cost") and "Rewritten SQL:" in lines  # the SQL last
    assert spent(served) == before


def test_many_clients_at_once(served) -> None:
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            with connect(served, autocommit=True) as conn:
                for j in range(5):
                    conn.execute("SELECT COUNT(*) FROM visits WHERE duration_min > %s",
                                 (5 + i * 5 + j,)).fetchone()
                    conn.execute("SELECT relname FROM pg_class").fetchall()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors, errors


def test_a_second_server_on_the_same_ledger_and_max_connections(served, tmp_path) -> None:
    setup = sandbox(tmp_path, {"dave": ("pw", 10.0, 0.0)})
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DPSQL_LEDGER", raising=False)
        db = dpsql.Database(setup.database, setup.metadata)
    try:
        with serve_in_thread(db, ServerConfig(port=0, passwords=setup.passwords,
                                              max_connections=1)) as running:
            first = psycopg.connect(host="127.0.0.1", port=running.port, user="dave",
                                    password="pw", dbname="x", autocommit=True)
            with first, pytest.raises(psycopg.OperationalError, match="too many clients"):
                psycopg.connect(host="127.0.0.1", port=running.port, user="dave",
                                password="pw", dbname="x")
    finally:
        db.close()


def test_startup_options_set_the_session(served) -> None:
    with connect(served, autocommit=True,
                 options="-c dpsql.epsilon=0.5 -c statement_timeout=5s") as conn:
        assert conn.execute("SHOW dpsql.epsilon").fetchone() == ("0.5",)
        assert conn.execute("SHOW statement_timeout").fetchone() == ("5000",)
    with pytest.raises(psycopg.OperationalError, match="epsilon"):
        connect(served, options="-c dpsql.epsilon=-2")


# -- the command line ------------------------------------------------------------------------


def test_cli_analyst_add_stores_a_verifier_only(tmp_path) -> None:
    from click.testing import CliRunner

    from dpsql.cli import main

    setup = sandbox(tmp_path, {"alice": ("secret", 1.0, 0.0)})
    runner = CliRunner()
    result = runner.invoke(main, ["analyst", "add", "erin", "--metadata", str(setup.metadata),
                                  "--password-stdin"], input="correct horse\n")
    assert result.exit_code == 0, result.output
    assert "erin" in result.output and "no privacy budget" in result.output
    default = tmp_path / "dpsql-passwords.toml"  # next to the metadata
    assert "correct horse" not in default.read_text()
    verifier = read_passwords(default)["erin"]
    assert verifier == make_verifier("correct horse", verifier.iterations, verifier.salt)
    result = runner.invoke(main, ["analyst", "add", "erin", "--metadata", str(setup.metadata),
                                  "--password-stdin"], input="\n")
    assert result.exit_code != 0 and "empty" in result.output


def test_cli_serve_answers_over_the_wire(tmp_path) -> None:
    import os
    import socket
    import subprocess
    import sys

    setup = sandbox(tmp_path, {"alice": ("secret", 100.0, 0.0)})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "DPSQL_LEDGER"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dpsql.cli", "serve", "--database", str(setup.database),
         "--metadata", str(setup.metadata), "--passwords", str(setup.passwords),
         "--port", str(port), "--epsilon", "0.5"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = psycopg.connect(host="127.0.0.1", port=port, user="alice",
                                       password="secret", dbname="dpsql", autocommit=True)
                break
            except psycopg.OperationalError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
                time.sleep(0.2)
        with conn:
            assert conn.execute("SHOW dpsql.epsilon").fetchone() == ("0.5",)
            assert conn.execute("SELECT COUNT(*) FROM people").fetchone()[0] > 0
    finally:
        proc.terminate()
        proc.wait(timeout=15)
