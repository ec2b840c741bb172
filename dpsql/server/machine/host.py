"""What the session's state machine is given by the server that runs it: the server as the
machine and its commands see it (:class:`Host`), a way to run blocking work
(:class:`Blocking`), and the machine's state as its commands see it (:class:`SessionState`).

Protocols, so that the machine depends on none of the modules above it: the server
(:mod:`dpsql.server.server`) and the I/O adapter (:mod:`dpsql.server.session`) satisfy them,
tests pass their own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from dpsql.cache import LRU
    from dpsql.database import Database
    from dpsql.server.catalog import Catalog
    from dpsql.server.machine.classify import Classifier, Statement
    from dpsql.server.machine.cursors import Cursor
    from dpsql.server.machine.outcome import Outcome, Portal, Prepared


class Blocking(Protocol):
    """Runs ``fn`` off the event loop. ``interruptible`` opens the DuckDB cursor a cancel
    interrupts; ``timed``: the session's ``statement_timeout`` applies."""

    def __call__(self, fn: Callable[[], Any], interruptible: Callable[[], Any] | None = None,
                 timed: bool = True) -> Awaitable[Any]: ...


async def inline(fn: Callable[[], Any], interruptible: Callable[[], Any] | None = None,
                 timed: bool = True) -> Any:
    """A :class:`Blocking` that runs ``fn`` on the caller's thread (tests, no cancel)."""
    return fn()


class Defaults(Protocol):
    """The server's defaults that a session starts from
    (:class:`~dpsql.server.config.ServerConfig` has them)."""

    @property
    def epsilon(self) -> float | None: ...

    @property
    def delta(self) -> float: ...

    @property
    def mechanism(self) -> str: ...

    @property
    def statement_timeout(self) -> float: ...


class Host(Protocol):
    """What the machine and its commands use of the server that runs them."""

    db: Database
    catalog: Catalog
    classifier: Classifier
    describe_cache: LRU[tuple[object, ...], list[tuple[str, str]]]
    start_time: dt.datetime
    version: str
    version_text: str

    @property
    def config(self) -> Defaults: ...

    def run_query(self, sql: str, epsilon: float, delta: float, mechanism: str,
                  parameters: Sequence[object] | None, analyst: str,
                  release: list[float] | None = None, bounds: Any = None,
                  retention: float | None = None, caveats: bool = True) -> Any: ...

    def budget(self, analyst: str) -> Any: ...


class SessionState(Protocol):
    """The machine's state as its session commands (:mod:`dpsql.server.machine.commands`)
    read and change it: :class:`~dpsql.server.machine.machine.Machine` has it."""

    server: Host
    blocking: Blocking
    user: str
    settings: dict[str, str]
    initial: dict[str, str]
    status: str
    statements: dict[str, Prepared]
    portals: dict[str, Portal]
    cursors: dict[str, Cursor]
    implicit: bool

    def privacy(self) -> tuple[float, float, str]: ...

    def execute(self, statement: Statement, params: list[object],
                privacy: tuple[float, float, str],
                param_types: Sequence[int] = ()) -> Awaitable[Outcome]: ...
