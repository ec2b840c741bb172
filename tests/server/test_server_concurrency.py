"""The answer-time grid pads each answer but does not serialise the server.

Untimed: the check is that twelve queries are all charged -- hence computed and waiting for
their grid point -- before any of them is answered, which needs them all in flight at once
(a pool of 8 threads, the old default on two CPUs, would hold the other four back until the
first answers left, a grid cell later).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest

from dpsql import Database
from dpsql.server import ServerConfig, serve_in_thread
from tests.support.sandbox import sandbox

GRID = 10.0  # seconds: far longer than connecting and charging twelve small queries takes
CLIENTS = 12


def test_queries_waiting_for_their_grid_point_do_not_hold_back_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The sandbox's own ledger, not the test run's shared one (conftest.py sets DPSQL_LEDGER),
    # where other tests' charges of "alice" would be counted too.
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)
    setup = sandbox(tmp_path, {"alice": ("pw", 1000.0, 0.0)})
    setup.metadata.write_text(setup.metadata.read_text() + f"\n[server]\ntime_grid = {GRID}\n")
    answered: list[int] = []
    # Two worker threads for twelve clients: a query waiting for its grid point holds none
    # (it waits on the event loop), so the pool never makes one query wait for another's grid.
    with Database(setup.database, setup.metadata) as db, serve_in_thread(
            db, ServerConfig(port=0, passwords=setup.passwords, workers=2)) as running:
        assert db.ledger is not None

        def ask(k: int) -> None:
            with psycopg.connect(host="127.0.0.1", port=running.port, user="alice",
                                 password="pw", dbname="dpsql", autocommit=True) as conn:
                conn.execute(f"SELECT COUNT(*) FROM people WHERE age > {20 + k}").fetchall()
                answered.append(k)

        threads = [threading.Thread(target=ask, args=(k,)) for k in range(CLIENTS)]
        for thread in threads:
            thread.start()
        charged = 0
        for _ in range(600):  # the bound only ends a failing run
            charged = len(db.ledger.history("alice", limit=100))
            if charged == CLIENTS or answered:
                break
            time.sleep(0.01)
        first_answer_seen = bool(answered)
        for thread in threads:
            thread.join(timeout=60)
        assert charged == CLIENTS
        assert not first_answer_seen
        assert sorted(answered) == list(range(CLIENTS))
