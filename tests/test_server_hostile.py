"""Hostile clients on loopback: each case is one way a single client could stall, fill or
read the server (issue 22), and each would have failed before the server defended against it.

One server serves the module, with small limits so that every case is quick: raw sockets
(:class:`~dpsql.server.testing.RawClient`) send exactly the bytes a hostile client would.
Nothing here asserts how fast anything is; the ordering of answers and events says what ran
where.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

import dpsql
from dpsql.parse import check_size
from dpsql.server import ServerConfig, machine, serve_in_thread
from dpsql.server.testing import RawClient, error_fields, sandbox

PASSWORD = "hostile-test-password"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    folder = tmp_path_factory.mktemp("hostile")
    setup = sandbox(folder, {"alice": (PASSWORD, 100000.0, 0.5),
                             "bob": (PASSWORD, 100000.0, 0.5)})
    db = dpsql.Database(setup.database, setup.metadata)
    config = ServerConfig(port=0, passwords=setup.passwords, auth_failure_delay=0.0)
    try:
        with serve_in_thread(db, config) as running:
            yield SimpleNamespace(port=running.port, server=running.server, setup=setup,
                                  folder=folder)
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
