"""The asyncio server: listening, the connections, cancel requests and the thread pool.

    >>> from dpsql.server import Server, ServerConfig
    >>> server = Server(dpsql.Database("data.duckdb", "metadata.toml"), ServerConfig(port=5433))
    >>> asyncio.run(server.serve_forever())

or, from a thread that is not running an event loop (tests, benchmarks, notebooks)::

    >>> with serve_in_thread(db, ServerConfig(port=0)) as running:
    ...     psycopg.connect(host="127.0.0.1", port=running.port, user="alice", ...)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as dt
import logging
import os
import secrets
import ssl
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from dpsql import __version__
from dpsql.cache import LRU
from dpsql.database import Database
from dpsql.server.auth import (
    LoginThrottle,
    Verifier,
    mock_iterations,
    passwords_for,
    read_passwords,
    server_secret,
)
from dpsql.server.catalog import Catalog
from dpsql.server.config import ServerConfig
from dpsql.server.machine.classify import Classifier
from dpsql.server.machine.settings import SERVER_VERSION
from dpsql.server.session import Session

log = logging.getLogger("dpsql.server")


class Server:
    """Serves one :class:`~dpsql.Database` over the PostgreSQL protocol."""

    def __init__(self, db: Database, config: ServerConfig | None = None) -> None:
        self.db = db
        self.config = config or ServerConfig()
        self.version = __version__
        self.version_text = (f"PostgreSQL {SERVER_VERSION} (dpsql {__version__}, differentially "
                             "private answers) on x86_64-pc-linux-gnu, compiled by dpsql, 64-bit")
        self.start_time = dt.datetime.now(dt.UTC)
        self.catalog = Catalog(db.metadata)
        columns = {name: {c: col.type for c, col in table.columns.items()}
                   for name, table in db.metadata.tables.items()}
        self.classifier = Classifier(set(db.metadata.tables), self.catalog.catalog_tables,
                                     columns=columns)
        # Threads do CPU work only (parsing, planning, the engine, the ledger's fsync): a fresh
        # answer waits for its grid point on the event loop, not on a thread (Database.run's
        # ``release``). More threads than that only contend for the GIL and the cores:
        # benchmarks/bench_server.py measured throughput falling from 167 to 66 queries/s
        # between 50 and 200 connections with a thread per connection.
        workers = self.config.workers or default_workers()
        self.executor = concurrent.futures.ThreadPoolExecutor(workers,
                                                              thread_name_prefix="dpsql-query")
        self.sessions: dict[int, Session] = {}
        self.logging_in: dict[Session, None] = {}  # oldest first: the one evicted when full
        self.describe_cache: LRU[tuple[object, ...], list[tuple[str, str]]] = LRU(2048)
        self.connections = 0
        self.ssl_context = self._ssl_context()
        self.passwords_file = self.config.passwords or passwords_for(db.metadata)
        self.mock_secret = server_secret(self.passwords_file)
        self.throttle = LoginThrottle(self.config.failed_logins_per_source,
                                      self.config.failed_logins_per_name,
                                      self.config.failed_login_window)
        self._verifiers: dict[str, Verifier] = {}
        self._verifiers_stamp: tuple[float, int] | None = None
        self._mock_iterations = mock_iterations({})
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        if getattr(db, "metered", None) is False:
            log.warning("the metadata declares no analyst budgets: answers are not metered and "
                        "nothing limits the total privacy loss of the analysts")

    def _ssl_context(self) -> ssl.SSLContext | None:
        if self.config.tls_cert is None:
            if self.config.require_tls:
                raise ValueError("require_tls needs a TLS certificate (tls_cert and tls_key)")
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(self.config.tls_cert),
                                str(self.config.tls_key) if self.config.tls_key else None)
        return context

    # --- the analysts

    def verifier(self, user: str) -> Verifier | None:
        """The stored verifier of ``user`` (the file is re-read when it changes)."""
        try:
            stat = self.passwords_file.stat()
            stamp: tuple[float, int] | None = (stat.st_mtime, stat.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp != self._verifiers_stamp:
            try:
                self._verifiers = read_passwords(self.passwords_file)
            except ValueError as e:
                log.error("cannot read the passwords file: %s", e)
                self._verifiers = {}
            self._verifiers_stamp = stamp
            self._mock_iterations = mock_iterations(self._verifiers)
        return self._verifiers.get(user)

    def mock_iterations(self) -> int:
        """The iteration count of unknown names' fake verifiers (see :func:`mock_iterations`)."""
        return self._mock_iterations

    def idle_timeout(self) -> float:
        """Seconds a logged-in session may stay silent (0: no limit): the server's setting,
        else the metadata's ``[server] idle_timeout``."""
        if self.config.idle_timeout is not None:
            return self.config.idle_timeout
        return float(self.db.metadata.server.idle_timeout)

    def full(self) -> bool:
        """Whether every logged-in slot is taken (those logging in have their own)."""
        return len(self.sessions) >= self.config.max_connections

    def run_query(self, sql: str, epsilon: float, delta: float, mechanism: str,
                  parameters: Sequence[object] | None, analyst: str,
                  release: list[float] | None = None, bounds: Any = None,
                  retention: float | None = None, caveats: bool = True) -> Any:
        """One private query through the library, charged to ``analyst``; ``release``: see
        :meth:`dpsql.Database.run` (the session waits for the time grid without a thread);
        ``retention``: the session's retention epsilon (SET dpsql.retention); ``caveats``:
        SET dpsql.caveats."""
        cap = self.config.statement_timeout
        return self.db.run(sql, epsilon, delta, mechanism, parameters=parameters,
                           analyst=analyst, timeout=cap if cap > 0 else None,
                           release=release, bounds=bounds, retention=retention,
                           caveats=caveats).result

    def budget(self, analyst: str) -> Any:
        budget = getattr(self.db, "budget", None)
        return budget(analyst) if budget is not None else None

    # --- connections

    def register(self, session: Session) -> tuple[int, int]:
        self.logging_in.pop(session, None)
        while True:
            pid = secrets.randbelow(2**31 - 2) + 1
            if pid not in self.sessions:
                break
        self.sessions[pid] = session
        return pid, secrets.randbits(31)

    def forget(self, session: Session) -> None:
        if self.sessions.get(session.pid) is session:
            del self.sessions[session.pid]

    def cancel(self, pid: int, secret: int) -> None:
        session = self.sessions.get(pid)
        if session is None or not secrets.compare_digest(
                session.secret.to_bytes(4, "big"), (secret & 0xFFFFFFFF).to_bytes(4, "big")):
            log.info("ignoring a cancel request with a wrong process id or key")
            return
        session.request_cancel()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        session = Session(self, reader, writer)
        try:
            self._admit(session)
            # With every logged-in slot taken, the session still negotiates TLS and reads the
            # startup packet, then says "too many clients" (as PostgreSQL does).
            await session.run()
        finally:
            self.logging_in.pop(session, None)
            self.connections -= 1
            if task is not None:
                self._tasks.discard(task)

    def _admit(self, session: Session) -> None:
        """Give ``session`` a login slot, closing the oldest client still logging in when all
        are taken: a client that logs in takes milliseconds, so a flood of silent connections
        only evicts itself."""
        while len(self.logging_in) >= max(1, self.config.login_slots):
            oldest = next(iter(self.logging_in))
            del self.logging_in[oldest]
            log.info("closing the connection from %s, still logging in, to make room for "
                     "%s (%d login slots)", oldest.peer, session.peer, self.config.login_slots)
            oldest.writer.transport.abort()
        self.logging_in[session] = None

    async def start(self) -> int:
        """Start listening; returns the port (useful with port 0)."""
        self._server = await asyncio.start_server(
            self._handle, self.config.host, self.config.port,
            limit=max(2**16, self.config.max_message_size))
        port = self._server.sockets[0].getsockname()[1]
        log.info("dpsql serving %s on %s:%d (TLS %s)", self.db.metadata.source, self.config.host,
                 port, "on" if self.ssl_context else "off")
        return int(port)

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        async with self._server:
            await self._server.serve_forever()

    async def close(self) -> None:
        """Stop listening, end every session, and release the pool and the catalog."""
        if self._closed:
            return
        self._closed = True
        if self._server is not None:
            self._server.close()
        for session in list(self.sessions.values()):
            session.request_cancel()
            session.writer.close()
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=5)
            for task in pending:
                task.cancel()
        if self._server is not None:
            await self._server.wait_closed()
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.catalog.close()


def default_workers() -> int:
    """Threads answering queries: eight per core, between 8 and 32. They compute, and wait
    for the ledger's fsync (group commit batches the charges of the threads waiting at once)
    and the engine; many more only contend for the GIL (benchmarks/bench_server.py)."""
    return min(32, max(8, 8 * (os.cpu_count() or 2)))


@dataclass
class Running:
    server: Server
    port: int
    host: str
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread


@contextmanager
def serve_in_thread(db: Database, config: ServerConfig | None = None) -> Iterator[Running]:
    """Run a server on its own event loop in a background thread, for the ``with`` block."""
    server = Server(db, config)
    loop = asyncio.new_event_loop()
    started: concurrent.futures.Future[int] = concurrent.futures.Future()
    serving: list[asyncio.Task[None]] = []

    def main() -> None:
        asyncio.set_event_loop(loop)

        async def run() -> None:
            try:
                port = await server.start()
            except BaseException as e:
                started.set_exception(e)
                return
            started.set_result(port)
            with contextlib.suppress(asyncio.CancelledError):
                await server.serve_forever()

        serving.append(loop.create_task(run()))
        try:
            loop.run_until_complete(serving[0])
        finally:
            # Closed here, on the loop, to the end: a close awaited from another thread raced
            # this loop's stop when sessions were still open (the loop stopped once serving
            # ended, the close half done: the stop waited 15 s for nothing).
            loop.run_until_complete(server.close())
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.close()

    thread = threading.Thread(target=main, name="dpsql-server", daemon=True)
    thread.start()
    port = started.result(timeout=30)
    try:
        yield Running(server, port, server.config.host, loop, thread)
    finally:
        with contextlib.suppress(RuntimeError):  # the loop already closed
            loop.call_soon_threadsafe(serving[0].cancel)
        thread.join(timeout=30)


def run(db: Database, config: ServerConfig) -> None:
    """Serve until interrupted (``dpsql serve``), logging to standard error."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s "
                                                   "%(message)s")
    server = Server(db, config)
    log.info("analyst passwords: %s (set one with `dpsql analyst add NAME`)",
             server.passwords_file)

    async def main() -> None:
        try:
            await server.serve_forever()
        finally:
            await server.close()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
