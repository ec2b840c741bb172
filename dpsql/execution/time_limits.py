"""The data owner's limits on a query's time: the statement timeout and the answer-time grid.

A :class:`Deadline` interrupts the engine once the owner's ``statement_timeout`` has passed (one
watchdog thread serves every deadline); :func:`pad_to_grid` releases an outcome only at the next
multiple of the owner's ``time_grid`` after the query started, so that the time of an answer
says as little as possible about how long the engine worked (see ``docs/audit.md``).
"""

from __future__ import annotations

import atexit
import heapq
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING

from dpsql.errors import EngineError, EngineFailure, QueryTimeout

if TYPE_CHECKING:
    from dpsql.engines import CancelToken
    from dpsql.execution.watch import Watch

#: The data owner's log: what the analyst must not see (the engine's own error messages, which
#: may quote private values) and the queries stopped by the statement_timeout.
owner_log = logging.getLogger("dpsql.owner")



@contextmanager
def limited(token: CancelToken | None, limit: float, what: str, *, watch: Watch | None = None,
            private: bool = True, failed: Callable[[], None] | None = None) -> Iterator[None]:
    """The one time-limit and engine-failure policy, around what reads data: ``token`` (None:
    nothing to interrupt, nothing to limit) is interrupted at the owner's ``limit`` in
    seconds; ``what`` names the query in the owner's log; ``watch`` is the front door's
    (:mod:`dpsql.execution.watch`), whose cancel interrupts the same token.

    * the analyst's cancel raises the watch's error (after the charge: the charge stands);
    * the owner's limit raises :class:`~dpsql.errors.QueryTimeout`, which names only the limit
      (``charged`` when ``private``: what read private data was charged);
    * any other interrupt (a signal to the process, not the data) is raised as it is;
    * the engine failing otherwise, on ``private`` data, is a dpsql bug whose message may quote
      a private value: the owner's log gets it, ``failed`` runs (the failure stored with its
      charge), and the analyst gets the fixed :class:`~dpsql.errors.EngineFailure`. On public
      data alone its error is raised as it is."""
    if token is None:
        yield
        return
    deadline = Deadline(token, limit)
    try:
        with watch.engine(token) if watch is not None else nullcontext():
            yield
    except EngineError as e:
        if e.interrupted and watch is not None and watch.cancelled:
            raise watch.error() from None
        if e.interrupted and deadline.fired:
            owner_log.warning("%s stopped at the statement_timeout of %g s", what, limit)
            raise QueryTimeout(limit, charged=private) from None
        if e.interrupted or not private:
            raise
        owner_log.error("the engine failed on %s (a dpsql bug; the analyst got the generic "
                        "EngineFailure): %s", what, e.owner_detail or e)
        if failed is not None:
            failed()
        raise EngineFailure() from None
    finally:
        deadline.stop()


class Deadline:
    """Cancels the engine's execution (``token``, see :class:`dpsql.engines.CancelToken`) once
    ``seconds`` have passed, unless stopped first.

    The lock makes the interrupt happen only while the query may still be running: after
    :meth:`stop` returns, the watchdog can no longer touch the token (whose engine cursor's
    next query belongs to someone else). One watchdog thread serves every deadline of the
    process (a thread per query cost 0.2 ms)."""

    def __init__(self, token: CancelToken, seconds: float) -> None:
        self._token: CancelToken | None = token
        self._lock = threading.Lock()
        self._active = True
        self.fired = False
        _WATCHDOG.add(time.monotonic() + seconds, self)

    @property
    def active(self) -> bool:
        return self._active

    def fire(self) -> None:
        with self._lock:
            if self._active and self._token is not None:
                self.fired = True
                self._token.cancel()

    def stop(self) -> None:
        with self._lock:
            self._active = False
            self._token = None  # the watchdog may hold this object until its due time


class _Watchdog:
    """A daemon thread that fires each :class:`Deadline` at its time (stopped ones are fired
    too, and do nothing)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Deadline]] = []
        self._wake = threading.Condition()
        self._count = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, when: float, deadline: Deadline) -> None:
        with self._wake:
            self._count += 1
            if len(self._due) >= 1024:  # mostly stopped deadlines, due minutes from now
                self._due = [d for d in self._due if d[2].active]
                heapq.heapify(self._due)
            heapq.heappush(self._due, (when, self._count, deadline))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="dpsql-deadlines",
                                                daemon=True)
                self._thread.start()
            if self._due[0][2] is deadline:
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closed and (not self._due or
                                            self._due[0][0] > time.monotonic()):
                    self._wake.wait(self._due[0][0] - time.monotonic() if self._due else None)
                if self._closed:
                    return
                _, _, deadline = heapq.heappop(self._due)
            deadline.fire()

    def close(self) -> None:
        """End the thread (at exit: a thread still waiting then keeps DuckDB's objects from
        being freed, and DuckDB's bindings report them as leaks)."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout=1)


_WATCHDOG = _Watchdog()
atexit.register(_WATCHDOG.close)


def grid_point(started: float, grid: float) -> float:
    """The next multiple of ``grid`` seconds after ``started`` (time.monotonic()), from now:
    when an outcome computed since ``started`` may be released, so that its release time
    shows only which grid cell its running time fell in. ``grid = 0``: now."""
    now = time.monotonic()
    if grid <= 0:
        return now
    return started + max(1, math.ceil((now - started) / grid)) * grid


def pad_to_grid(started: float, grid: float) -> None:
    """Sleep until :func:`grid_point` (``grid = 0``: return at once)."""
    if grid <= 0:
        return
    target = grid_point(started, grid)
    while (left := target - time.monotonic()) > 0:  # sleep may wake early on some platforms
        time.sleep(left)
