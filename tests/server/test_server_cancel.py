"""The server's CancelRequest, through psycopg, says what the cancel cost (SQLSTATE 57014):
a query cancelled while it waits for a worker thread is never run and never charged; one
cancelled after its charge keeps it (and, on the server, runs on: its answer is stored).

The engine blocks every private query until interrupted (tests/support/blocking.py); the
server has one worker thread, so a second query waits for it, and the owner's short time
limit is what finally releases the first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import duckdb
import psycopg
import pytest
import tomli_w

import dpsql
from dpsql.server import ServerConfig, serve_in_thread
from tests.support.blocking import BLOCK_LIMIT, BlockingEngine, HeldCharge
from tests.support.sandbox import sandbox

LIMIT = 3.0  # the owner's time limit that releases a blocked query, in seconds
SQL = "SELECT v, COUNT(*) AS n FROM events GROUP BY v"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)
    setup = sandbox(tmp_path, {"alice": ("secret", 100.0, 0.0)})
    path = tmp_path / "events.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE events AS SELECT i % 50 AS pid, i % 7 AS v "
                    "FROM range(500) t(i)")
    metadata = tmp_path / "events.toml"
    metadata.write_text(tomli_w.dumps({
        "budget": {"ledger": str(tmp_path / "events-ledger.sqlite")},
        "analysts": {"alice": {"epsilon": 100.0}},
        "tables": {"events": {"privacy_unit": "pid", "max_rows_per_unit": 5, "columns": {
            "pid": {"type": "int"},
            "v": {"type": "int", "lower": 0, "upper": 6, "public_range": True}}}}}))
    engine = BlockingEngine(path)
    db = dpsql.Database(metadata=metadata, engine=engine)
    config = ServerConfig(port=0, passwords=setup.passwords, workers=1, statement_timeout=LIMIT)
    with serve_in_thread(db, config) as running:
        yield SimpleNamespace(port=running.port, engine=engine, db=db)
    db.close()


def connect(port: int, simple: bool = False) -> psycopg.Connection:
    """psycopg's connection: the extended protocol (Parse, Describe: the plan waits for the
    worker), or with ``simple`` its client-side cursors' simple Query (the answer waits)."""
    return psycopg.connect(host="127.0.0.1", port=port, user="alice", password="secret",
                           dbname="dpsql", connect_timeout=10, autocommit=True,
                           cursor_factory=psycopg.ClientCursor if simple else psycopg.Cursor)


def spent(db: dpsql.Database) -> float:
    status = db.budget("alice")
    assert status is not None
    return status.spent.epsilon


@pytest.mark.parametrize("simple", [False, True], ids=["extended", "simple"])
def test_a_query_cancelled_while_waiting_for_a_worker_never_runs(server, simple: bool) -> None:
    with connect(server.port) as first, connect(server.port, simple) as second:
        second.execute("SET dpsql.epsilon = 0.5")
        errors: list[BaseException] = []

        def occupy() -> None:  # holds the only worker until the owner's limit stops it
            try:
                first.execute(SQL)
            except psycopg.Error as e:
                errors.append(e)

        holder = threading.Thread(target=occupy)
        holder.start()
        assert server.engine.blocked.wait(BLOCK_LIMIT)
        server.engine.reset()
        canceller = threading.Timer(0.5, second.cancel_safe)  # while it waits for the worker
        canceller.start()
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            second.execute(SQL)
        assert e.value.sqlstate == "57014" and "nothing was charged" in str(e.value)
        holder.join(BLOCK_LIMIT)
        assert errors and "data owner's limit" in str(errors[0])  # the first: charged, stopped
        time.sleep(0.5)  # the worker is free: a queued query would run now
        assert not server.engine.blocked.is_set()  # the cancelled one never reached the engine
        assert spent(server.db) == 1.0  # the first query's epsilon only, never the 0.5


def test_a_query_cancelled_before_its_charge_is_never_charged(server, monkeypatch) -> None:
    """A cancel while the query is being prepared (held before its charge, as a long planning
    would be): 57014 saying nothing was charged; the query, let go after the cancel, is
    neither charged nor run."""
    held = HeldCharge().install(monkeypatch)
    with connect(server.port) as conn:
        def cancel() -> None:
            if held.reached.wait(BLOCK_LIMIT):
                conn.cancel_safe()
        canceller = threading.Thread(target=cancel)
        canceller.start()
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            conn.execute(SQL)
        canceller.join(BLOCK_LIMIT)
        assert e.value.sqlstate == "57014" and str(e.value).endswith("nothing was charged")
        held.release()
        time.sleep(0.5)  # the held query goes on now, to its charge
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the session goes on
    assert not server.engine.blocked.is_set()  # never reached the engine
    assert spent(server.db) == 0.0


def test_a_cancel_after_the_charge_says_the_charge_stands(server) -> None:
    with connect(server.port) as conn:
        threading.Thread(target=lambda: server.engine.blocked.wait(BLOCK_LIMIT)
                         and conn.cancel_safe()).start()
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            conn.execute(SQL)
        assert e.value.sqlstate == "57014"
        assert "the charge of epsilon 1 stands: the answer was not shown" in str(e.value)
        assert spent(server.db) == 1.0
        # the cancel did not interrupt it: the owner's limit does
        assert server.engine.released.wait(BLOCK_LIMIT)
