"""A running query watched by its front door: how far it got, and its cancel.

A front door makes a :class:`Watch`, makes it current while it calls
:meth:`dpsql.Database.run` (:func:`watching`, or :func:`call_watched`, which also runs the call
on a worker thread so that Ctrl-C reaches the door and not the library), and may
:meth:`~Watch.cancel` it from another thread: the command line on Ctrl-C, the DB-API's
``cursor.cancel()`` and ``connection.interrupt()`` (and a KeyboardInterrupt in ``execute``), the
server on a CancelRequest. :class:`~dpsql.errors.QueryCancelled` then says what was charged.

**Why a cancel before the charge costs nothing.** :meth:`dpsql.Database.run` charges the
ledger before the engine query starts, and nothing before that point reads a private row:
parsing, checking, planning and the dry runs read the query, the metadata and empty tables,
and a join reads public tables only. So everything the analyst can observe of a query
cancelled before its charge -- that it stopped, when, with which error -- is a function of
public information and of the analyst's own cancel: the same on every pair of neighbouring
databases. It reveals nothing, so nothing is charged (:meth:`Watch.charging` holds the
cancel back while the charge is recorded: either the charge happened and stands, or the
query never charges and never runs).

**Why a cancel after the charge stays charged.** Once charged, the engine may read private
rows at any moment. When the query stops, whether it had finished and how long it ran can
depend on the data (more rows, more groups: more time), and a charge is never refunded (a
refund would let a query that ran go unpaid). So the charge stands, whether the engine had
started or not. What the analyst sees is kept to what the owner's answer-time grid shows
(``[server] time_grid``, :mod:`dpsql.execution.time_limits`): on the local doors (``interrupts``:
the command line, the DB-API) the engine is interrupted, and a computed answer is stored with
its charge only after its grid point and only if no cancel came first (:meth:`Watch.storing`),
so whether asking again finds a stored answer does not tell when the engine finished, finer
than the grid. The server does not interrupt a charged query (``interrupts=False``): it runs on
and its outcome is stored as usual (:meth:`dpsql.server.machine.machine.Machine.run_private`).

docs/long-queries.md says the same for analysts.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from dpsql.errors import QueryCancelled

T = TypeVar("T")

_CURRENT: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("dpsql_watch",
                                                                       default=None)


def current() -> Watch | None:
    """The watch of the query this thread runs, if its front door watches it."""
    return _CURRENT.get()


@contextmanager
def watching(watch: Watch) -> Iterator[Watch]:
    """Make ``watch`` current for what runs inside (one query's call of the library)."""
    token = _CURRENT.set(watch)
    try:
        yield watch
    finally:
        _CURRENT.reset(token)


class Watch:
    """One query's state as its front door sees it: cancelled or not, charged or not, the
    engine running or not (and its progress, where the engine reports it). ``interrupts``:
    a cancel after the charge interrupts the engine and keeps the answer from being stored
    (the local doors); False: it only stops a query not yet charged (the server)."""

    def __init__(self, interrupts: bool = True) -> None:
        self.interrupts = interrupts
        self.started = time.monotonic()
        self.charged: tuple[float, float] | None = None
        #: Set once the query is charged, or its call has returned (what a door may wait for
        #: before saying what a cancel cost).
        self.settled = threading.Event()
        self._lock = threading.Lock()
        self._cancelled = False
        self._cancel = threading.Event()  # wakes wait_until
        self._token: Any = None  # the engine's CancelToken while the engine query runs

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def cancel(self) -> None:
        """Stop the query: before its charge it is never charged nor run; after it, the engine
        is interrupted if ``interrupts`` (the charge stands)."""
        with self._lock:
            self._cancelled = True
            if self.interrupts and self._token is not None:
                self._token.cancel()
        self._cancel.set()

    def wait_until(self, deadline: float) -> None:
        """Sleep until ``deadline`` (time.monotonic(); the owner's time grid), or until a local
        door's cancel: what follows (:meth:`storing`) then stores nothing, so waking early
        shows nothing about the data."""
        while (left := deadline - time.monotonic()) > 0:
            if self.interrupts and self._cancel.wait(left):
                return
            if not self.interrupts:
                time.sleep(left)

    def error(self) -> QueryCancelled:
        return QueryCancelled(self.elapsed, self.charged)

    @contextmanager
    def charging(self, epsilon: float, delta: float) -> Iterator[None]:
        """Around the ledger's charge: refused (nothing charged) if cancelled before it; a
        cancel waits until the charge is recorded here, so the two never cross."""
        with self._lock:
            if self._cancelled:
                raise self.error()
            yield
            self.charged = (epsilon, delta)
        self.settled.set()

    @contextmanager
    def engine(self, token: Any) -> Iterator[None]:
        """Around the engine's query: ``token`` (:class:`dpsql.engines.CancelToken`) is what a
        cancel interrupts. A query cancelled before it starts does not start (on the server, if
        it was not charged)."""
        with self._lock:
            if self._cancelled and (self.interrupts or self.charged is None):
                raise self.error()
            self._token = token
        try:
            yield
        finally:
            with self._lock:
                self._token = None

    def storing(self, store: Callable[[], None]) -> None:
        """Store a computed answer with its charge, unless a local door's cancel came first
        (then :class:`~dpsql.errors.QueryCancelled`, the answer neither stored nor shown)."""
        with self._lock:
            if self._cancelled and self.interrupts:
                raise self.error()
            store()

    def progress(self) -> float | None:
        """The engine's progress in percent, where it reports one (else None)."""
        report = getattr(self._token, "progress", None)
        return report() if report is not None else None


def call_watched(fn: Callable[[], T], watch: Watch,
                 tick: Callable[[Watch], None] | None = None, every: float = 0.25,
                 submit: Callable[[Callable[[], None]], object] | None = None) -> T:
    """Call ``fn`` (one query) on a worker thread with ``watch`` current, the caller waiting
    and calling ``tick(watch)`` every ``every`` seconds (a status line). A KeyboardInterrupt in
    the caller (Ctrl-C) cancels the query and, once the worker has stopped, raises
    :class:`~dpsql.errors.QueryCancelled` -- unless the answer was complete (then it is
    returned: the cancel came too late to stop anything). The library itself never sees the
    KeyboardInterrupt, which could otherwise strike in the middle of its bookkeeping.
    ``submit`` runs the work on a thread of the caller's (a connection's own worker, whose
    engine cursors stay open across queries); by default, a new thread."""
    outcome: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()

    def work() -> None:
        try:
            outcome["value"] = context.run(_under, watch, fn)
        except BaseException as e:  # handed to the caller's thread
            outcome["error"] = e
        finally:
            watch.settled.set()
            done.set()

    # Not a daemon: its engine cursors must close before the interpreter does.
    thread = threading.Thread(target=work, name="dpsql-query") if submit is None else None
    if thread is not None:
        thread.start()
    else:
        assert submit is not None
        submit(work)
    try:
        while not done.wait(every):
            if tick is not None:
                tick(watch)
    except KeyboardInterrupt:
        watch.cancel()
        done.wait()  # a second Ctrl-C leaves at once (the caller's KeyboardInterrupt)
        if "value" not in outcome:
            raise watch.error() from None
    finally:
        if thread is not None and done.is_set():
            thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


def _under(watch: Watch, fn: Callable[[], T]) -> T:
    with watching(watch):
        return fn()
