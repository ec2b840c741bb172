"""A test engine whose private queries wait until they are interrupted: the cancel and
timeout tests prove an interruption without racing a timer against a query that happens to be
slow (the server's, tests/server/test_server_robustness.py; the library's and the DB-API's,
tests/execution/test_watch.py). :class:`HeldCharge` does the same before the charge: a query
waits there, as during a long planning, until the test lets it go."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from dpsql.engines import DuckDBEngine
from dpsql.errors import EngineError
from dpsql.execution.watch import Watch

#: How long a blocked query waits for its interrupt: code that never interrupts fails the
#: test after this, instead of hanging it.
BLOCK_LIMIT = 60.0


class _InterruptibleCursor:
    """The cursor the server attaches to a running statement (``engine.cursor``): its
    ``interrupt()`` releases the query that :class:`BlockingEngine` holds, and DuckDB's."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, gate: threading.Event) -> None:
        self._cursor, self._gate = cursor, gate

    def interrupt(self) -> None:
        self._gate.set()
        self._cursor.interrupt()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class BlockingEngine(DuckDBEngine):
    """A DuckDB engine whose private queries never finish on their own: ``execute`` waits
    until the cursor the server attached is interrupted (by a cancel request or the statement
    timeout), then fails as an interrupted DuckDB query does."""

    def __init__(self, path: Path) -> None:
        self._gates = threading.local()  # per worker thread, as DuckDB cursors are
        self.blocked = threading.Event()  # a query is waiting for its interrupt
        self.released = threading.Event()  # ...and an interrupt released it
        super().__init__(path)

    def reset(self) -> None:
        self.blocked.clear()
        self.released.clear()

    def _gate(self) -> threading.Event:
        gate = getattr(self._gates, "event", None)
        if gate is None:
            gate = self._gates.event = threading.Event()
        return gate

    def cursor(self) -> Any:
        return _InterruptibleCursor(super().cursor(), self._gate())

    def execute(self, sql: str, parameters: Sequence[object] = ()
                ) -> tuple[list[str], list[tuple[object, ...]]]:
        gate = self._gate()
        self.blocked.set()
        released = gate.wait(BLOCK_LIMIT)
        self._gates.event = None  # the next query on this thread waits again
        if not released:
            raise EngineError("the test engine was never interrupted")
        self.released.set()
        raise EngineError("the engine failed on the rewritten query: INTERRUPT Error",
                          interrupted=True)


class HeldCharge:
    """Holds every watched query just before its charge (``Watch.charging``, patched with
    ``install``) until :meth:`release`: ``reached`` is set once one waits there."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self._release = threading.Event()

    def install(self, monkeypatch: Any) -> HeldCharge:
        charging = Watch.charging

        @contextmanager
        def held(watch: Watch, epsilon: float, delta: float) -> Iterator[None]:
            self.reached.set()
            if not self._release.wait(BLOCK_LIMIT):
                raise AssertionError("the test never released the charge")
            with charging(watch, epsilon, delta):
                yield

        monkeypatch.setattr(Watch, "charging", held)
        return self

    def release(self) -> None:
        self._release.set()
