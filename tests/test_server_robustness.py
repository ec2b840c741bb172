"""The server under bad input, long queries, cancel requests, timeouts and TLS.

A fuzzer throws random, truncated and oversized messages at it, before and after
authentication; each bad connection is closed alone and a normal client still gets answers.
A slow private query (contribution bounding over 6 million rows) is cancelled and timed out.
"""

from __future__ import annotations

import random
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import duckdb
import psycopg
import pytest

import dpsql
from dpsql.server import ServerConfig, serve_in_thread
from dpsql.server.testing import RawClient, ServerClosed, error_fields, message, sandbox

SLOW_ROWS = 6_000_000


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    folder = tmp_path_factory.mktemp("robust")
    setup = sandbox(folder, {"alice": ("secret", 100000.0, 0.5)})
    mp = pytest.MonkeyPatch()
    mp.delenv("DPSQL_LEDGER", raising=False)  # each database here has its own ledger
    db = dpsql.Database(setup.database, setup.metadata)
    # A second database whose queries are slow: many rows per unit to sample.
    big = folder / "big.duckdb"
    with duckdb.connect(str(big)) as con:
        con.execute("SET enable_progress_bar = false")
        con.execute(f"CREATE TABLE events AS SELECT i AS id, i % 700000 AS pid, (i * 7919) % 100 "
                    f"AS v FROM range({SLOW_ROWS}) t(i)")
    big_metadata = folder / "big.toml"
    big_metadata.write_text(
        f'[budget]\nledger = "{folder / "big-ledger.sqlite"}"\nreuse_answers = false\n\n'
        '[analysts.alice]\nepsilon = 100000.0\n\n'
        '[tables.events]\nprivacy_unit = "pid"\nmax_rows_per_unit = 5\n\n'
        '[tables.events.columns]\nid = { type = "int" }\npid = { type = "int" }\n'
        'v = { type = "int", lower = 0, upper = 100, public_range = true }\n')
    slow_db = dpsql.Database(big, big_metadata)
    mp.undo()
    config = ServerConfig(port=0, passwords=setup.passwords, auth_failure_delay=0.1,
                          auth_timeout=3, max_message_size=64 * 1024, statement_timeout=60)
    with serve_in_thread(db, config) as running, \
            serve_in_thread(slow_db, ServerConfig(port=0, passwords=setup.passwords)) as slow:
        yield SimpleNamespace(port=running.port, slow_port=slow.port, setup=setup, db=db,
                              server=running.server, folder=folder, slow_db=slow_db)
    db.close()
    slow_db.close()


def connect(port: int, **kwargs: object) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=port, user="alice", password="secret",
                           dbname="dpsql", connect_timeout=10, autocommit=True,
                           **kwargs)  # type: ignore[arg-type]


def still_serves(port: int) -> None:
    with connect(port) as conn:
        assert conn.execute("SELECT COUNT(*) FROM people").fetchone()[0] > 0
        assert conn.execute("SELECT relname FROM pg_class WHERE relname = 'people'"
                            ).fetchone() == ("people",)


def _exchange(port: int, data: bytes, login: bool) -> None:
    """Send ``data`` (after logging in, or as the very first bytes) and read until the server
    closes or goes quiet."""
    client = RawClient(port, timeout=3)
    try:
        if login:
            client.login("alice", "secret")
        client.send(data)
        client.sock.shutdown(socket.SHUT_WR)  # end of input: a truncated message stays so
        while True:
            try:
                client.message()
            except (ServerClosed, TimeoutError, OSError, struct.error):
                return
    except (ServerClosed, OSError):
        return
    finally:
        client.close()


def test_fuzz_random_truncated_and_malformed_messages(served) -> None:
    rng = random.Random(20251121)
    kinds = b"QPBDESCHXFpdcfv?\0"
    cases: list[tuple[bytes, bool]] = []
    for _ in range(60):
        n = rng.randrange(0, 200)
        cases.append((bytes(rng.randrange(256) for _ in range(n)), False))  # noise as startup
    for _ in range(120):
        kind = bytes([rng.choice(kinds)])
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
        length = len(body) + 4 + rng.choice([0, 0, 0, -1, 1, -5, 1000, 2**31 - 5 - len(body)])
        cases.append((kind + struct.pack("!i", length) + body, True))
    good_parse = message(b"P", b"s\0SELECT COUNT(*) FROM people WHERE age > $1\0"
                         + struct.pack("!hI", 1, 23))
    for cut in range(1, len(good_parse)):
        cases.append((good_parse[:cut], True))  # truncated
    cases.append((message(b"B", b"\0s\0" + struct.pack("!hhh", 0, 1, 3) + b"\0\0\0\xff"
                          + b"\0\0"), True))  # a parameter longer than the message
    cases.append((b"Q" + struct.pack("!i", 70 * 1024) + b"x" * 100, True))  # oversized
    cases.append((struct.pack("!ii", 8, 1234), False))  # unknown startup code
    cases.append((struct.pack("!i", 100_000) + b"\0" * 8, False))  # oversized startup
    cases.append((RawClient.startup_packet("alice")[:-3], False))  # truncated startup
    cases.append((struct.pack("!ii", 8, 80877103) + b"garbage", False))  # bytes after SSLRequest
    threads = []
    for data, login in cases:
        th = threading.Thread(target=_exchange, args=(served.port, data, login))
        th.start()
        threads.append(th)
        if len(threads) >= 16:
            for t in threads:
                t.join(30)
            threads = []
    for t in threads:
        t.join(30)
    still_serves(served.port)
    assert served.server.connections <= 1


def test_oversized_message_closes_only_that_connection(served) -> None:
    with connect(served.port) as bystander:
        client = RawClient(served.port)
        try:
            client.login("alice", "secret")
            client.send(b"Q" + struct.pack("!i", 1 << 20) + b"SELECT 1")
            kind, body = client.message()
            assert kind == b"E" and error_fields(body)["C"] == "54000"
            with pytest.raises((ServerClosed, OSError)):
                client.message()
        finally:
            client.close()
        assert bystander.execute("SELECT 1").fetchone() == (1,)


def test_a_silent_client_is_dropped_at_the_authentication_timeout(served) -> None:
    client = RawClient(served.port, timeout=10)
    try:
        start = time.monotonic()
        kind, body = client.message()  # nothing sent at all
        assert kind == b"E" and error_fields(body)["C"] == "08006"
        assert 2 < time.monotonic() - start < 8
    finally:
        client.close()


def slow_sql(condition: str = "v > 2") -> str:
    """A query that runs for most of a second: GROUP BY on the big table, so every unit's
    groups and rows are sampled (a lone COUNT(*) or a plain SUM got fast enough to race the
    0.25 s cancel)."""
    return f"SELECT v, COUNT(*), SUM(v) FROM events WHERE {condition} GROUP BY v"


def test_cancel_a_running_private_query(served) -> None:
    with connect(served.slow_port) as conn, connect(served.port) as other:
        # cancel_safe: libpq 17 cancel that releases the GIL (the server runs in this process)
        timer = threading.Timer(0.25, conn.cancel_safe)
        timer.start()
        start = time.monotonic()
        # meanwhile another client is served at once
        quick = threading.Thread(target=lambda: other.execute("SELECT COUNT(*) FROM people"))
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            quick.start()
            conn.execute(slow_sql())
        elapsed = time.monotonic() - start
        quick.join(10)
        timer.join()
        assert e.value.sqlstate == "57014" and "user request" in str(e.value)
        assert elapsed < 3, elapsed
        assert conn.execute("SELECT 42").fetchone() == (42,)  # the session goes on


def test_cancel_a_catalog_query_with_a_raw_cancel_request(served) -> None:
    client = RawClient(served.port)
    try:
        client.login("alice", "secret")
        client.send(message(b"Q", b"SELECT SUM(i * i) FROM range(100000000000) t(i)\0"))
        time.sleep(0.3)
        from dpsql.server.testing import cancel_request

        cancel_request(served.port, client.pid, client.secret ^ 1)  # a wrong key is ignored
        cancel_request(served.port, client.pid, client.secret)
        seen = client.until(b"Z")
        err = error_fields(next(b for k, b in seen if k == b"E"))
        assert err["C"] == "57014"
    finally:
        client.close()


def test_the_analysts_statement_timeout_does_not_stop_a_private_query(served) -> None:
    """The analyst's limit is accepted and shown (BI tools send it) but a private query runs
    to its end: a limit of the analyst's choosing would make a data-dependent running time a
    data-dependent error."""
    with connect(served.slow_port) as conn:
        conn.execute("SET statement_timeout = 300")
        assert conn.execute("SHOW statement_timeout").fetchone() == ("300",)
        start = time.monotonic()
        rows = conn.execute(slow_sql("v > 2 AND v < 99")).fetchall()
        assert len(rows) == 101 and time.monotonic() - start > 0.3  # the public range 0..100
        conn.execute("SET statement_timeout = '5min'")
        assert conn.execute("SHOW statement_timeout").fetchone() == ("300000",)


def test_the_owners_statement_timeout_stops_a_private_query(served) -> None:
    """The server's cap (the owner's) stops it through the library, with one fixed error."""
    config = ServerConfig(port=0, passwords=served.setup.passwords, statement_timeout=0.3)
    with serve_in_thread(served.slow_db, config) as capped, connect(capped.port) as conn:
        conn.execute("SET statement_timeout = '1h'")  # the analyst cannot lengthen it either
        start = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            conn.execute(slow_sql("v > 2 AND v < 99"))
        assert e.value.sqlstate == "57014"
        assert "data owner's limit of 0.3 s" in str(e.value)
        assert time.monotonic() - start < 3
        assert conn.execute("SELECT 42").fetchone() == (42,)


def test_tls_when_a_certificate_is_configured(served, tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    assert openssl, "openssl is needed to make a test certificate (apt-get install openssl)"
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    setup = served.setup
    with serve_in_thread(served.db, ServerConfig(port=0, passwords=setup.passwords,
                                                 tls_cert=cert, tls_key=key,
                                                 require_tls=True)) as running:
        with connect(running.port, sslmode="require") as conn:
            assert conn.pgconn.ssl_in_use
            assert conn.execute("SELECT COUNT(*) FROM people").fetchone()[0] > 0
        with pytest.raises(psycopg.OperationalError, match="requires an encrypted"):
            connect(running.port, sslmode="disable")
        psql = shutil.which("psql")
        assert psql, "psql is needed (apt-get install postgresql-client)"
        out = subprocess.run([psql, "-X", "-At", "-h", "127.0.0.1", "-p", str(running.port),
                              "-U", "alice", "-d", "dpsql", "-c", "SELECT 1"],
                             env={"PGPASSWORD": "secret", "PGSSLMODE": "require",
                                  "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0 and out.stdout.strip() == "1", out.stderr
