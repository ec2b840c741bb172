"""Cancelling a query (dpsql.execution.watch), through the library and the DB-API.

A query cancelled before its charge is neither charged nor run; one cancelled after it keeps
its charge, its engine query is interrupted and its answer is not stored (asking again is a
new charge). The engine here blocks until interrupted (tests/support/blocking.py), so the
tests prove the interruption without racing a timer against a slow query.
"""

from __future__ import annotations

import _thread
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest
import tomli_w

import dpsql
from dpsql.dbapi import Connection
from dpsql.errors import QueryCancelled
from dpsql.execution.watch import Watch, call_watched, watching
from tests.support.blocking import BLOCK_LIMIT, BlockingEngine, HeldCharge

SQL = "SELECT v, COUNT(*) AS n FROM events GROUP BY v"


@pytest.fixture
def blocking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)  # this metadata's own ledger
    path = tmp_path / "events.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE events AS SELECT i % 50 AS pid, i % 7 AS v "
                    "FROM range(500) t(i)")
    metadata = tmp_path / "metadata.toml"
    metadata.write_text(tomli_w.dumps({
        "budget": {"ledger": str(tmp_path / "ledger.sqlite")},
        "analysts": {"alice": {"epsilon": 10.0}},
        "tables": {"events": {"privacy_unit": "pid", "max_rows_per_unit": 5, "columns": {
            "pid": {"type": "int"},
            "v": {"type": "int", "lower": 0, "upper": 6, "public_range": True}}}}}))
    engine = BlockingEngine(path)
    db = dpsql.Database(metadata=metadata, engine=engine, analyst="alice")
    yield SimpleNamespace(db=db, engine=engine, path=path, metadata=metadata)
    db.close()


def spent(db: dpsql.Database) -> float:
    status = db.budget()
    assert status is not None
    return status.spent.epsilon


def in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    raised: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:
            raised.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, raised


def test_a_cancel_before_the_charge_is_not_charged_and_never_runs(blocking) -> None:
    watch = Watch()
    watch.cancel()
    with watching(watch), pytest.raises(QueryCancelled) as e:
        blocking.db.run(SQL)
    assert e.value.charged is None and e.value.sqlstate == "57014"
    assert "nothing was charged" in str(e.value)
    assert spent(blocking.db) == 0.0
    assert not blocking.engine.blocked.is_set()  # the engine query never started


def test_a_cancel_after_the_charge_stands_and_stores_no_answer(blocking) -> None:
    watch = Watch()

    def ask() -> None:
        with watching(watch):
            blocking.db.run(SQL)

    thread, raised = in_thread(ask)
    assert blocking.engine.blocked.wait(BLOCK_LIMIT)
    watch.cancel()
    thread.join(BLOCK_LIMIT)
    assert blocking.engine.released.is_set()  # the cancel interrupted the engine
    (error,) = raised
    assert isinstance(error, QueryCancelled) and error.charged == (1.0, 0.0)
    assert "the charge of epsilon 1 stands: the answer was not shown" in str(error)
    assert spent(blocking.db) == 1.0
    # Nothing was stored with the charge: the same query asked again is answered afresh.
    with dpsql.Database(blocking.path, blocking.metadata, analyst="alice") as db:
        again = db.run(SQL)
        assert not again.reused and again.cost is not None
        assert spent(db) == 2.0


def test_call_watched_turns_ctrl_c_into_one_error(blocking) -> None:
    """A KeyboardInterrupt in the waiting thread (Ctrl-C) cancels the query on the worker."""
    blocking.engine.reset()
    interrupter, _ = in_thread(lambda: blocking.engine.blocked.wait(BLOCK_LIMIT)
                               and _thread.interrupt_main())
    with pytest.raises(QueryCancelled) as e:
        call_watched(lambda: blocking.db.run(SQL), Watch())
    interrupter.join()
    assert e.value.charged == (1.0, 0.0)
    assert blocking.engine.released.is_set()


def test_dbapi_keyboard_interrupt_during_execute(blocking) -> None:
    conn = Connection(blocking.db)
    interrupter, _ = in_thread(lambda: blocking.engine.blocked.wait(BLOCK_LIMIT)
                               and _thread.interrupt_main())
    with pytest.raises(dpsql.OperationalError) as e:
        conn.cursor().execute(SQL)
    interrupter.join()
    assert isinstance(e.value, QueryCancelled) and e.value.sqlstate == "57014"
    assert "the charge of epsilon 1 stands" in str(e.value)
    assert conn.budget() is not None and conn.budget().spent.epsilon == 1.0  # type: ignore[union-attr]


@pytest.mark.parametrize("how", ["cursor.cancel", "connection.interrupt"])
def test_dbapi_cancel_from_another_thread(blocking, how: str) -> None:
    conn = Connection(blocking.db)
    cursor = conn.cursor()
    thread, raised = in_thread(lambda: cursor.execute(SQL))
    assert blocking.engine.blocked.wait(BLOCK_LIMIT)
    cursor.cancel() if how == "cursor.cancel" else conn.interrupt()
    thread.join(BLOCK_LIMIT)
    (error,) = raised
    assert isinstance(error, QueryCancelled) and error.charged == (1.0, 0.0)
    cursor.cancel()  # nothing under way: does nothing


def test_dbapi_cancel_before_the_charge_is_not_charged(blocking, monkeypatch) -> None:
    """cursor.cancel() while the query is still before its charge (held there, as a long
    planning would be): QueryCancelled saying nothing was charged, even though the query then
    reaches its charge; nothing charged, the engine never started."""
    held = HeldCharge().install(monkeypatch)
    conn = Connection(blocking.db)
    cursor = conn.cursor()
    thread, raised = in_thread(lambda: cursor.execute(SQL))
    assert held.reached.wait(BLOCK_LIMIT)
    cursor.cancel()
    held.release()
    thread.join(BLOCK_LIMIT)
    (error,) = raised
    assert isinstance(error, QueryCancelled) and error.charged is None
    assert str(error).endswith("nothing was charged") and error.sqlstate == "57014"
    assert spent(blocking.db) == 0.0
    assert not blocking.engine.blocked.is_set()  # the engine query never started
