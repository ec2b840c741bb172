"""One client connection over asyncio: startup, TLS, authentication, then frames in and out.

The adapter between a socket and the I/O-free protocol state machine
(:class:`~dpsql.server.machine.machine.Machine`): it reads one message at a time, hands it to the
machine, and writes what the machine answers when it says so. Work that may block runs in the
server's thread pool (:meth:`Session.blocking`), so the event loop keeps serving every other
connection -- and cancel requests -- meanwhile. Statements are classified in
:mod:`dpsql.server.machine.classify`; session commands are answered in
:mod:`dpsql.server.machine.commands`.

Nothing is run before authentication succeeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import ssl
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

from dpsql import errors
from dpsql.server.auth import MECHANISM, AuthenticationFailed, ScramExchange
from dpsql.server.machine import settings as st
from dpsql.server.machine.classify import Classifier, Statement
from dpsql.server.machine.host import Host
from dpsql.server.machine.machine import FLUSH_AT, Machine
from dpsql.server.machine.outcome import CANCELLED, PgError, Terminate
from dpsql.server.wire import protocol as p

if TYPE_CHECKING:
    import concurrent.futures

    from dpsql.server.auth import LoginThrottle, Verifier
    from dpsql.server.config import ServerConfig

__all__ = ["Classifier", "PgError", "Session", "Statement", "Terminate"]

log = logging.getLogger("dpsql.server")
#: How a session ends on its own (the client went away or broke the protocol): not a bug.
_CLOSING = (p.ProtocolViolation, asyncio.IncompleteReadError, ConnectionError, Terminate)


class _Running:
    """The DuckDB cursor of the statement running in the pool, to interrupt on cancel."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cursor: duckdb.DuckDBPyConnection | None = None
        self.abandoned = False

    def start(self) -> bool:
        """Whether the work may start: not when cancelled while it waited for a thread."""
        with self.lock:
            return not self.abandoned

    def attach(self, cursor: duckdb.DuckDBPyConnection) -> None:
        with self.lock:
            self.cursor = None if self.abandoned else cursor

    def detach(self) -> None:
        with self.lock:
            self.cursor = None

    def interrupt(self) -> None:
        with self.lock:
            self.abandoned = True
            if self.cursor is not None:
                with contextlib.suppress(duckdb.Error):
                    self.cursor.interrupt()
                self.cursor = None


# -- the session -----------------------------------------------------------------------------


class Session:
    def __init__(self, server: ServerLike, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.machine = Machine(server, self.blocking, self.flush)
        self.out = self.machine.out
        self.pid = 0
        self.secret = 0
        self.tls = False
        self.running: _Running | None = None
        self.cancelled: asyncio.Future[None] | None = None
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.host = str(peer[0]) if isinstance(peer, tuple) else str(peer)  # throttled by

    @property
    def user(self) -> str:
        return self.machine.user

    @property
    def database(self) -> str:
        return self.machine.database

    # --- I/O

    def send(self, data: bytes) -> None:
        self.out += data

    async def flush(self) -> None:
        if self.out:
            self.writer.write(bytes(self.out))
            self.out.clear()
        await self.writer.drain()

    async def read_message(self, limit: int | None = None, first: bytes = b""
                           ) -> tuple[bytes, p.Reader]:
        """The next message; ``limit``: its largest body (the server's limit by default);
        ``first``: its first byte, already read."""
        header = first + await self.reader.readexactly(5 - len(first))
        kind, length = header[:1], int.from_bytes(header[1:], "big", signed=True)
        if length < 4:
            raise p.ProtocolViolation(f"invalid message length {length}")
        limit = self.server.config.max_message_size if limit is None else limit
        if length - 4 > limit:  # refused from its header, before its body is read
            raise p.ProtocolViolation(
                f"message of {length} bytes is larger than the server's limit of {limit}",
                "54000")
        body = await self.reader.readexactly(length - 4)
        return kind, p.Reader(body)

    # --- lifecycle

    async def run(self) -> None:
        try:
            with errors.guarded(f"session {self.pid} ({self.peer})", passing=_CLOSING):
                await self._session()
        except p.ProtocolViolation as e:
            log.info("session %d (%s): closing on a protocol violation: %s", self.pid, self.peer,
                     e)
            await self.fatal(e.sqlstate, str(e))
        except (asyncio.IncompleteReadError, ConnectionError, Terminate):
            pass
        except errors.InternalError as error:  # a bug: never let one connection take the
            await self.fatal(error.sqlstate, str(error))  # server down (errors.guarded)
        finally:
            if self.running is not None:
                self.running.interrupt()
            self.server.forget(self)
            with contextlib.suppress(ConnectionError, RuntimeError):
                self.writer.close()

    async def _session(self) -> None:
        try:
            async with asyncio.timeout(self.server.config.auth_timeout):
                ok = await self.startup()
        except TimeoutError:
            await self.fatal("08006", "authentication timed out")
            return
        if not ok:
            return
        log.info("session %d: %s connected from %s (database %s)", self.pid, self.user,
                 self.peer, self.database)
        await self.serve()

    async def fatal(self, sqlstate: str, message: str) -> None:
        try:
            self.out.clear()
            self.send(p.error_response("FATAL", sqlstate, message))
            await asyncio.wait_for(self.flush(), 2)
        except (ConnectionError, TimeoutError, RuntimeError):
            pass

    # --- startup and authentication

    async def startup(self) -> bool:
        startup = await self.negotiate()
        if startup is None:
            return False
        refusal = self.refusal(startup)
        if refusal is not None:
            await self.fatal(*refusal)
            return False
        params = startup.parameters
        unrecognized = sorted(k for k in params if k.startswith("_pq_."))
        if startup.minor > 0 or unrecognized:
            self.send(p.negotiate_protocol_version(0, unrecognized))
        self.machine.user = params["user"]
        self.machine.database = params.get("database") or self.user
        if not await self.authenticate():
            return False
        return await self.begin_session(params)

    async def negotiate(self) -> p.Startup | None:
        """Answer SSLRequest and GSSENCRequest until the startup packet; None after a
        CancelRequest (which ends the connection)."""
        ssl_done = gss_done = False
        while True:
            length = int.from_bytes(await self.reader.readexactly(4), "big", signed=True)
            if length < 8 or length > p.MAX_STARTUP_LENGTH:
                raise p.ProtocolViolation(f"invalid length of startup packet: {length}")
            body = p.Reader(await self.reader.readexactly(length - 4))
            code = body.int32()
            if code == p.CANCEL_REQUEST:
                pid, secret = body.int32(), body.int32()
                self.server.cancel(pid, secret)
                return None
            if code == p.SSL_REQUEST:
                if ssl_done:
                    raise p.ProtocolViolation("SSLRequest sent twice")
                ssl_done = True
                await self.answer_ssl()
            elif code == p.GSSENC_REQUEST:
                if gss_done:
                    raise p.ProtocolViolation("GSSENCRequest sent twice")
                gss_done = True
                self.writer.write(b"N")
                await self.writer.drain()
            else:
                return p.parse_startup(code, body)

    async def answer_ssl(self) -> None:
        if self.reader._buffer:  # type: ignore[attr-defined]  # CVE-2021-23222-style
            raise p.ProtocolViolation("received unencrypted data after SSL request")
        if self.server.ssl_context is None:
            self.writer.write(b"N")
            await self.writer.drain()
            return
        self.writer.write(b"S")
        await self.writer.drain()
        try:
            await self.writer.start_tls(self.server.ssl_context)
        except (ssl.SSLError, ConnectionError, OSError) as e:
            # A client's doing (a scanner, an old client, a wrong certificate): one line, no
            # traceback; the connection is closed (nothing can be said in the clear now).
            log.info("session from %s: TLS handshake failed: %s", self.peer,
                     getattr(e, "reason", None) or type(e).__name__)
            raise Terminate from None
        self.tls = True

    def refusal(self, startup: p.Startup) -> tuple[str, str] | None:
        """Why this connection is refused before authentication (SQLSTATE, message), if it is."""
        params = startup.parameters
        if self.server.full():
            return "53300", "sorry, too many clients already"
        if startup.major != 3:
            return "0A000", (f"unsupported frontend protocol {startup.major}.{startup.minor}: "
                             "server supports 3.0")
        if not params.get("user", ""):
            return "28000", "no PostgreSQL user name specified in startup packet"
        if params.get("replication", "false").lower() not in ("false", "off", "0", "no"):
            return "28000", "dpsql does not serve replication connections"
        if self.server.config.require_tls and not self.tls:
            return "28000", "this dpsql server requires an encrypted connection (sslmode=require)"
        return None

    async def authenticate(self) -> bool:
        throttle = self.server.throttle
        wait = throttle.wait(self.host, self.user)
        if wait > 0:
            log.warning("login of %r from %s refused: too many failed logins from this address "
                        "or for this name", self.user, self.peer)
            await self.fatal("28000", "too many failed logins from this address or for this "
                                      f"user; try again in {math.ceil(wait)} s")
            return False
        verifier = self.server.verifier(self.user)
        exchange = ScramExchange(self.user, verifier, self.server.mock_secret,
                                 self.server.mock_iterations())
        self.send(p.auth_sasl([MECHANISM]))
        await self.flush()
        try:
            kind, body = await self.read_message(p.MAX_AUTH_MESSAGE)
            if kind != b"p":
                raise p.ProtocolViolation("expected a SASL initial response")
            initial = p.parse_sasl_initial(body)
            if initial.mechanism != MECHANISM:
                raise AuthenticationFailed(f"unsupported SASL mechanism {initial.mechanism!r}")
            self.send(p.auth_sasl_continue(exchange.first(initial.data)))
            await self.flush()
            kind, body = await self.read_message(p.MAX_AUTH_MESSAGE)
            if kind != b"p":
                raise p.ProtocolViolation("expected a SASL response")
            final = exchange.final(body.rest())
        except AuthenticationFailed as e:
            throttle.failed(self.host, self.user)
            # One line, for the owner: whether the name exists (the client cannot tell).
            reason = ("no such analyst" if not exchange.real else
                      "wrong password" if "invalid-proof" in str(e) else str(e))
            log.warning("failed login of %s %r from %s: %s",
                        "analyst" if exchange.real else "unknown name", self.user, self.peer,
                        reason)
            await asyncio.sleep(self.server.config.auth_failure_delay)
            await self.fatal("28P01", f'password authentication failed for user "{self.user}"')
            return False
        self.send(p.auth_sasl_final(final))
        self.send(p.AUTH_OK)
        return True

    async def begin_session(self, params: dict[str, str]) -> bool:
        machine = self.machine
        if self.server.full():  # taken while this client logged in
            await self.fatal("53300", "sorry, too many clients already")
            return False
        try:
            machine.login(self.user, self.database, params)
        except st.SettingError as e:
            await self.fatal(e.sqlstate, str(e))
            return False
        self.pid, self.secret = self.server.register(self)
        machine.pid = self.pid
        for name in st.REPORTED:
            self.send(p.parameter_status(name, machine.settings[name.lower()]))
        self.send(p.backend_key_data(self.pid, self.secret))
        self.send(p.ready_for_query(machine.status))
        await self.flush()
        return True

    # --- the main loop

    async def serve(self) -> None:
        idle = self.server.idle_timeout()
        while True:
            try:  # only between messages: never while one is half read
                async with asyncio.timeout(idle if idle > 0 else None):
                    first = await self.reader.readexactly(1)
            except TimeoutError:
                log.info("session %d: %s from %s closed after %g s idle", self.pid, self.user,
                         self.peer, idle)
                await self.fatal("57P05", "terminating connection due to idle-session timeout")
                return
            kind, body = await self.read_message(first=first)
            if await self.machine.handle(kind, body) or len(self.out) > FLUSH_AT:
                await self.flush()

    # --- running blocking work

    async def blocking(self, fn: Callable[[], Any], interruptible: Callable[[], Any] | None
                       = None, timed: bool = True) -> Any:
        """Run ``fn`` in the pool; give up (and interrupt DuckDB) on cancel or timeout.

        ``timed``: the session's ``statement_timeout`` (capped by the server's) applies. Private
        queries run untimed here: their limit is the owner's, applied by the library."""
        running = _Running()
        loop = asyncio.get_running_loop()
        cancelled: asyncio.Future[None] = loop.create_future()
        self.running, self.cancelled = running, cancelled

        def work() -> Any:
            if not running.start():  # cancelled while queued: never run (nor charged) later
                raise PgError("57014", f"{CANCELLED}; nothing was charged")
            if interruptible is not None:
                running.attach(interruptible())
            try:
                return fn()
            finally:
                running.detach()

        future = loop.run_in_executor(self.server.executor, work)
        timeout = self.statement_timeout() if timed else None
        try:
            done, _ = await asyncio.wait((future, cancelled), timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.running = self.cancelled = None
        if future in done:
            return future.result()
        running.interrupt()
        future.add_done_callback(_discard)
        if cancelled.done():  # a private query's answer says what it cost (Machine.run_private)
            raise PgError("57014", f"{CANCELLED}; nothing was charged")
        raise PgError("57014", "canceling statement due to statement timeout")

    def statement_timeout(self) -> float | None:
        """The session's limit for what reads no private data: its own ``statement_timeout``,
        capped by the server's."""
        timeout_ms = int(self.machine.settings.get("statement_timeout", "0") or 0)
        cap = self.server.config.statement_timeout
        timeout = timeout_ms / 1000 if timeout_ms > 0 else None
        if cap > 0:
            timeout = cap if timeout is None else min(timeout, cap)
        return timeout

    def request_cancel(self) -> None:
        if self.cancelled is not None and not self.cancelled.done():
            self.cancelled.set_result(None)



# -- helpers ---------------------------------------------------------------------------------


def _discard(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class ServerLike(Host, Protocol):
    """What a session uses of the server that runs it (:class:`~dpsql.server.server.Server`):
    what its machine uses (:class:`~dpsql.server.machine.host.Host`), and the connection's
    own needs. The session depends on this protocol, not on the server module, which imports
    this one."""

    config: ServerConfig  # the machine's Defaults, and the connection's limits
    executor: concurrent.futures.ThreadPoolExecutor
    mock_secret: bytes
    throttle: LoginThrottle
    ssl_context: ssl.SSLContext | None

    def verifier(self, user: str) -> Verifier | None: ...

    def mock_iterations(self) -> int: ...

    def full(self) -> bool: ...

    def idle_timeout(self) -> float: ...

    def forget(self, session: Session) -> None: ...

    def cancel(self, pid: int, secret: int) -> None: ...

    def register(self, session: Session) -> tuple[int, int]: ...
