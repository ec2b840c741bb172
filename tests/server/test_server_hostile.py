"""Hostile clients on loopback: each case is one way a single client could stall, fill or
read the server (issue 22), and each would have failed before the server defended against it.

One server serves the module, with small limits so that every case is quick: raw sockets
(:class:`~tests.support.sandbox.RawClient`) send exactly the bytes a hostile client would.
Nothing here asserts how fast anything is; the ordering of answers and events says what ran
where.
"""

from __future__ import annotations

import base64
import logging
import secrets
import shutil
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

import dpsql
from dpsql import errors
from dpsql.query.parse import check_size
from dpsql.server import ServerConfig, serve_in_thread
from dpsql.server.auth import LoginThrottle, secret_path, server_secret, set_password
from dpsql.server.machine import machine
from dpsql.server.machine.outcome import OWNER_SIDE
from tests.support.sandbox import RawClient, ServerClosed, error_fields, message, sandbox

PASSWORD = "hostile-test-password"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    folder = tmp_path_factory.mktemp("hostile")
    setup = sandbox(folder, {"alice": (PASSWORD, 100000.0, 0.5),
                             "bob": (PASSWORD, 100000.0, 0.5)})
    db = dpsql.Database(setup.database, setup.metadata)
    config = ServerConfig(port=0, passwords=setup.passwords, auth_failure_delay=0.0)
    # A second server on the same database, with short timeouts and few tries.
    short = ServerConfig(port=0, passwords=setup.passwords, auth_failure_delay=0.0,
                         auth_timeout=0.5, idle_timeout=0.5, failed_logins_per_source=3,
                         failed_logins_per_name=3)
    try:
        with serve_in_thread(db, config) as running, serve_in_thread(db, short) as strict:
            yield SimpleNamespace(port=running.port, server=running.server, setup=setup,
                                  folder=folder, db=db, strict=strict)
    finally:
        db.close()


def _client(served: SimpleNamespace, user: str = "alice") -> RawClient:
    client = RawClient(served.port)
    client.login(user, PASSWORD)
    return client


def _error(messages: list[tuple[bytes, bytes]]) -> dict[str, str]:
    found = [error_fields(body) for kind, body in messages if kind == b"E"]
    assert found, messages
    return found[0]


def _wait_for(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    """The records holding ``text``, once there is one (the server's thread logs them after
    the client has seen the connection close); at most 100 waits of 0.1 s."""
    for _ in range(100):
        found = [r for r in caplog.records if text in r.getMessage()]
        if found:
            return found
        threading.Event().wait(0.1)
    return []


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]


# -- 1. nothing on the event loop that grows with the input ------------------------------------


def test_a_statement_being_read_delays_only_its_own_connection(
        served: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    """While one connection's ~1 MB OR chain is being read (held in the pool by an event),
    ``SELECT 1`` on another connection is answered; the chain is then refused with 54001.
    Before, statements were split and parsed on the event loop: every client waited."""
    big = "SELECT COUNT(*) FROM people WHERE " + " OR ".join(
        f"age = {i}" for i in range(65_000))
    assert 900_000 < len(big) < 1_000_000
    reading, release = threading.Event(), threading.Event()

    def slow_check(text: str) -> None:
        if text == big:
            reading.set()
            release.wait(30)
        check_size(text)

    monkeypatch.setattr(machine, "check_size", slow_check)
    order: list[str] = []
    hostile, other = _client(served), _client(served, "bob")
    try:
        def send_big() -> None:
            answer = hostile.query(big)
            order.append("big:" + _error(answer)["C"])

        thread = threading.Thread(target=send_big)
        thread.start()
        assert reading.wait(30), "the big statement was never read"
        answer = other.query("SELECT 1")
        order.append("other:" + ("ok" if answer[-1][0] == b"Z" and
                                 not any(k == b"E" for k, _ in answer) else "error"))
        release.set()
        thread.join(30)
    finally:
        release.set()
        hostile.close()
        other.close()
    assert order == ["other:ok", "big:54001"]


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM people WHERE " + "(" * 10_000 + "age = 1" + ")" * 10_000,
    "SELECT COUNT(*) FROM people WHERE " + "NOT " * 3000 + "age = 1",
    "SELECT COUNT(*) FROM people WHERE " + " OR ".join(f"age = {i}" for i in range(300)),
], ids=["parentheses", "not", "or-chain"])
def test_deep_nesting_is_54001_with_a_message_and_no_traceback(
        served: SimpleNamespace, caplog: pytest.LogCaptureFixture, sql: str) -> None:
    caplog.set_level(logging.INFO)
    client = _client(served)
    try:
        error = _error(client.query(sql))
        assert client.query("SELECT 1")[-1][0] == b"Z"  # the connection goes on
    finally:
        client.close()
    assert error["C"] == "54001", error
    assert "nest" in error["M"] or "tokens" in error["M"], error
    assert not _tracebacks(caplog)


def test_the_statement_cache_is_bounded_by_bytes(served: SimpleNamespace,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Distinct long statements (each under every limit) do not pile up: the classifier's
    cache stays within its byte budget (here 8 MiB), however many there were. Before, it held
    2,048 statements of any length."""
    cache = served.server.classifier._cache
    monkeypatch.setattr(cache, "max_bytes", 8 << 20)
    client = _client(served)
    try:
        for i in range(12):
            filler = "x" * 9_000
            client.query(f"SELECT COUNT(*) FROM people WHERE name <> '{filler}{i}'")
    finally:
        client.close()
    assert 0 < cache.bytes <= cache.max_bytes
    assert len(cache) < 12


def test_named_prepared_statements_are_bounded_per_session(served: SimpleNamespace) -> None:
    """Each named statement holds its parse: a session cannot pile them up without limit."""
    client = _client(served)
    filler = "x" * 60_000
    try:
        errors_seen = []
        for i in range(6):  # 6 x 60,000 characters: over the 256 KiB a session may hold
            sql = f"SELECT '{filler}' AS v{i}"
            client.send(message(b"P", f"s{i}\0{sql}\0".encode() + struct.pack("!h", 0))
                        + message(b"S", b""))
            answer = client.until(b"Z")
            errors_seen += [error_fields(b)["C"] for k, b in answer if k == b"E"]
        client.send(message(b"Q", b"DEALLOCATE ALL\0"))
        client.until(b"Z")
        client.send(message(b"P", f"again\0SELECT '{filler}'\0".encode()
                            + struct.pack("!h", 0)) + message(b"S", b""))
        again = client.until(b"Z")
    finally:
        client.close()
    assert errors_seen == ["54000", "54000"], errors_seen
    assert not any(k == b"E" for k, _ in again)


# -- 3. authentication as PostgreSQL does it -----------------------------------------------------


def _server_first(port: int, user: str) -> tuple[bytes, int]:
    """The salt and iteration count the server offers ``user`` (the exchange is then left)."""
    client = RawClient(port)
    try:
        client.send(RawClient.startup_packet(user))
        kind, body = client.message()
        assert kind == b"R" and struct.unpack("!i", body[:4])[0] == 10
        first = b"n,,n=,r=" + base64.b64encode(secrets.token_bytes(18))
        client.send(message(b"p", b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first))
        kind, body = client.message()
        assert kind == b"R" and struct.unpack("!i", body[:4])[0] == 11
        attrs = dict(part.split("=", 1) for part in body[4:].decode().split(","))
        return base64.b64decode(attrs["s"]), int(attrs["i"])
    finally:
        client.close()


def test_unknown_names_get_a_stable_salt_and_the_analysts_iteration_count(
        served: SimpleNamespace, tmp_path: Path) -> None:
    """Across a restart an unknown name keeps its fake salt, as a real analyst keeps hers, and
    its iteration count is the one the analysts' verifiers use. Before, the fake salt came from
    a per-process secret and the count was always 4096."""
    passwords = tmp_path / "passwords.toml"
    set_password(passwords, "carol", "pw", iterations=5000)
    set_password(passwords, "dave", "pw", iterations=5000)
    offered = []
    for _ in range(2):  # two servers, one after the other: a restart
        with serve_in_thread(served.db, ServerConfig(port=0, passwords=passwords)) as running:
            offered.append((_server_first(running.port, "carol"),
                            _server_first(running.port, "nobody")))
    (carol, nobody), (carol_again, nobody_again) = offered
    assert carol == carol_again and nobody == nobody_again
    assert carol[0] != nobody[0] and carol[1] == nobody[1] == 5000
    assert len(carol[0]) == len(nobody[0])


def test_a_long_sasl_message_is_refused_from_its_header(served: SimpleNamespace) -> None:
    """A SASL message announcing 1 MiB is refused at once, before its body is sent. Before,
    the server waited to read up to 1 MiB from a client that had not logged in."""
    client = RawClient(served.port)
    try:
        client.send(RawClient.startup_packet("alice"))
        assert client.message()[0] == b"R"
        client.send(b"p" + struct.pack("!i", 1 << 20))  # the header alone
        kind, body = client.message()
    finally:
        client.close()
    assert kind == b"E" and error_fields(body)["C"] == "54000", error_fields(body)


def test_silent_connections_do_not_lock_analysts_out(served: SimpleNamespace,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """100 TCP connections that never say a word, then an analyst logs in and is answered.
    Before, they held every one of the 100 connection slots: 53300 for 30 s."""
    caplog.set_level(logging.INFO, logger="dpsql.server")
    silent = [socket.create_connection(("127.0.0.1", served.port)) for _ in range(100)]
    try:
        client = _client(served)
        try:
            assert client.query("SELECT 1")[-1][0] == b"Z"
        finally:
            client.close()
    finally:
        for sock in silent:
            sock.close()
    assert any("still logging in" in r.getMessage() for r in caplog.records)


def test_a_client_that_does_not_log_in_is_closed(served: SimpleNamespace) -> None:
    client = RawClient(served.strict.port)
    try:
        client.send(RawClient.startup_packet("alice"))
        assert client.message()[0] == b"R"
        kind, body = client.message()  # nothing sent: the authentication timeout
    finally:
        client.close()
    assert kind == b"E" and error_fields(body)["C"] == "08006"


def test_an_idle_session_is_closed_at_the_owners_timeout(served: SimpleNamespace) -> None:
    """Before, a logged-in connection that said nothing held its slot for ever."""
    client = RawClient(served.strict.port)
    try:
        client.login("alice", PASSWORD)
        kind, body = client.message()  # nothing sent: the idle timeout
        with pytest.raises((ServerClosed, OSError)):
            client.message()
    finally:
        client.close()
    assert kind == b"E" and error_fields(body)["C"] == "57P05", error_fields(body)


def test_failed_logins_are_logged_once_and_rate_limited(
        served: SimpleNamespace, caplog: pytest.LogCaptureFixture) -> None:
    """Each failure is one log line that tells the owner whether the name exists; after three
    failures from this address, even the right password is refused at once, with a message
    that says why. Before, failures were unlimited and the log did not tell unknown names
    from analysts."""
    caplog.set_level(logging.INFO, logger="dpsql.server")
    throttle = served.strict.server.throttle
    try:
        for user in ("alice", "nobody", "alice"):
            with pytest.raises(ServerClosed, match="password authentication failed"):
                RawClient(served.strict.port).login(user, "wrong password")
        with pytest.raises(ServerClosed, match="too many failed logins"):
            RawClient(served.strict.port).login("bob", PASSWORD)
    finally:
        throttle._failures.clear()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("failed login")]
    assert len(lines) == 3, lines
    assert "analyst 'alice'" in lines[0] and "wrong password" in lines[0]
    assert "unknown name 'nobody'" in lines[1] and "no such analyst" in lines[1]
    assert not _tracebacks(caplog)


# -- 4. logs an owner can read -------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_port(served: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    openssl = shutil.which("openssl")
    assert openssl, "openssl is needed to make a test certificate (apt-get install openssl)"
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    config = ServerConfig(port=0, passwords=served.setup.passwords, tls_cert=cert, tls_key=key)
    with serve_in_thread(served.db, config) as running:
        yield running.port


@pytest.mark.parametrize("hello", [b"this is not a TLS ClientHello" * 4, b""],
                         ids=["garbage", "hang-up"])
def test_a_failed_tls_handshake_is_one_line_without_traceback(
        tls_port: int, caplog: pytest.LogCaptureFixture, hello: bytes) -> None:
    """Before, each one logged an internal error with a 3.6 KB traceback, no login needed."""
    caplog.set_level(logging.INFO)
    with socket.create_connection(("127.0.0.1", tls_port), timeout=10) as sock:
        sock.sendall(struct.pack("!ii", 8, 80877103))  # SSLRequest
        assert sock.recv(1) == b"S"
        if hello:
            sock.sendall(hello)
            while sock.recv(4096):  # until the server closes
                pass
    if hello:
        served_log = _wait_for(caplog, "TLS handshake failed")
        assert len(served_log) == 1 and served_log[0].levelno == logging.INFO, served_log
    assert not _tracebacks(caplog)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_an_owner_side_failure_shows_the_analyst_no_path(
        served: SimpleNamespace, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """An engine, metadata or ledger failure names files and hosts: the analyst gets a fixed
    message with its SQLSTATE, the owner's log the text (one line, no traceback)."""
    secret_path = "/srv/owner-only/ledger.sqlite"

    def failing(*args: object, **kwargs: object) -> object:
        raise errors.OperationalError(f"cannot open the budget ledger {secret_path}: gone")

    monkeypatch.setattr(served.server, "run_query", failing)
    caplog.set_level(logging.INFO)
    client = _client(served)
    try:
        error = _error(client.query("SELECT COUNT(*) FROM people"))
    finally:
        client.close()
    assert error["C"] == "58000" and error["M"] == OWNER_SIDE
    assert secret_path not in str(error)
    owner = [r for r in caplog.records if secret_path in r.getMessage()]
    assert len(owner) == 1 and owner[0].name == "dpsql.owner"
    assert not _tracebacks(caplog)


def test_the_login_throttle_forgets_after_its_window_and_bounds_its_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    throttle = LoginThrottle(per_source=2, per_name=3, window=60.0)
    throttle.failed("10.0.0.1", "alice", now=0.0)
    assert throttle.wait("10.0.0.1", "bob", now=1.0) == 0.0
    throttle.failed("10.0.0.1", "bob", now=1.0)
    assert throttle.wait("10.0.0.1", "carol", now=2.0) == pytest.approx(58.0)  # per source
    assert throttle.wait("10.0.0.2", "alice", now=2.0) == 0.0
    throttle.failed("10.0.0.2", "alice", now=2.0)
    throttle.failed("10.0.0.3", "alice", now=3.0)
    assert throttle.wait("10.0.0.4", "alice", now=4.0) == pytest.approx(56.0)  # per name
    assert throttle.wait("10.0.0.4", "alice", now=61.0) == 0.0  # the window has passed
    monkeypatch.setattr(LoginThrottle, "MAX_KEYS", 8)
    for i in range(100):  # random names from random addresses: memory stays bounded
        throttle.failed(f"10.1.0.{i}", f"name{i}", now=100.0 + i)
    assert len(throttle._failures) <= 8


def test_the_server_secret_is_kept_private_and_reused(tmp_path: Path) -> None:
    passwords = tmp_path / "dpsql-passwords.toml"
    first = server_secret(passwords)
    assert server_secret(passwords) == first and len(first) == 32
    assert secret_path(passwords).stat().st_mode & 0o777 == 0o600
