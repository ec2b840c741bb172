"""One client connection: startup, authentication, and the simple and extended query protocols.

A session reads one message at a time and answers it; a query runs in the server's thread pool
so the event loop keeps serving every other connection (and cancel requests) meanwhile.

What a statement is decides where it goes:

* ``SET``/``SHOW``/``RESET``, ``BEGIN``/``COMMIT``/``ROLLBACK``, ``DISCARD``, ``DEALLOCATE``:
  answered by the session itself;
* a SELECT that reads no declared table (``SELECT version()``, pg_catalog, information_schema):
  answered by the :class:`~dpsql.server.catalog.Catalog`, which holds no data;
* everything else -- every query that names a declared table, and every statement that is not
  understood -- goes to :meth:`dpsql.Database.run`, whose checks answer it privately or refuse
  it, charged to the connected analyst. ``EXPLAIN SELECT ...`` shows
  :meth:`dpsql.Database.explain`.

Nothing is run before authentication succeeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dpsql import errors
from dpsql.cache import LRU
from dpsql.server import cursors, paramtypes, sqltext
from dpsql.server import protocol as p
from dpsql.server import settings as st
from dpsql.server import types as t
from dpsql.server.auth import MECHANISM, AuthenticationFailed, ScramExchange
from dpsql.server.catalog import CatalogError, SessionInfo, function_name, pg_column_names
from dpsql.server.describe import describe

if TYPE_CHECKING:
    from dpsql.server.config import ServerLike

log = logging.getLogger("dpsql.server")

_OPERATOR = re.compile(r"OPERATOR\s*\(\s*pg_catalog\s*\.\s*([^\s)]+)\s*\)", re.I)
_COLLATE = re.compile(r"\s+COLLATE\s+(pg_catalog\s*\.\s*)?\"?default\"?", re.I)
# sqlglot reads ``x::oid[]`` (and regtype[], regclass[], ...) as a subscript and fails;
# schema-qualified, the same type parses (asyncpg's type introspection writes ``$1::oid[]``).
_CATALOG_ARRAY = re.compile(r"(::|\bAS)\s*(?<!\.)\b(oid|xid|cid|tid|aclitem|reg[a-z]+)\s*\[\s*\]",
                            re.I)
_FLUSH_AT = 64 * 1024
# Functions a catalog query may not call (engine internals, files, settings, secrets).
_DENIED_FUNCTIONS = {"query", "query_table", "glob", "which_secret", "getenv", "setseed",
                     "checkpoint", "force_checkpoint", "enable_profiling", "disable_profiling",
                     "load", "install", "test_all_types", "summary", "sql_auto_complete"}
_DENIED_PREFIXES = ("duckdb_", "pragma_", "read_", "sniff_", "parquet_", "iceberg_",
                    "delta_", "json_execute", "current_setting_", "icu_", "tpch", "tpcds")
_TABLE_FUNCTIONS = {"generate_series", "exploding_generate_series", "unnest", "explode", "range",
                    "pg_get_keywords", "pg_show_all_settings", "json_each", "regexp_split_to_table",
                    "string_to_table"}


class PgError(Exception):
    """An error to send to the client as an ErrorResponse."""

    def __init__(self, sqlstate: str, message: str, severity: str = "ERROR",
                 detail: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.severity = severity
        self.detail = detail
        self.hint = hint


class Terminate(Exception):
    """The client said goodbye, or the connection must end."""


# -- statements ------------------------------------------------------------------------------


@dataclass
class Statement:
    """One SQL statement, classified once (cached by text)."""

    text: str
    kind: str  # empty, query, catalog, explain, set, show, reset, begin, commit, rollback,
    #            savepoint, release, rollback_to, discard, deallocate, noop
    tag: str = ""  # the CommandComplete tag of session commands
    tree: exp.Expression | None = None  # PostgreSQL-dialect parse (catalog and names)
    engine_sql: str = ""  # the text handed to Database (private queries)
    names: list[str] | None = None  # PostgreSQL's column names
    nparams: int = 0
    argument: str = ""  # SHOW/RESET/DEALLOCATE target; FETCH/MOVE/CLOSE cursor (None: ALL)
    declaration: cursors.Declaration | None = None  # DECLARE: what it says
    inner: Statement | None = None  # DECLARE: its query, classified
    direction: cursors.Direction | None = None  # FETCH/MOVE
    error: str = ""  # a cursor statement that cannot be read (sent as 42601 when run)


_COMMANDS = {"BEGIN": ("begin", "BEGIN"), "START": ("begin", "START TRANSACTION"),
             "COMMIT": ("commit", "COMMIT"), "END": ("commit", "COMMIT"),
             "ROLLBACK": ("rollback", "ROLLBACK"), "ABORT": ("rollback", "ROLLBACK"),
             "SAVEPOINT": ("savepoint", "SAVEPOINT"), "RELEASE": ("release", "RELEASE"),
             "SET": ("set", "SET"), "SHOW": ("show", "SHOW"), "RESET": ("reset", "RESET"),
             "DISCARD": ("discard", "DISCARD ALL"), "DEALLOCATE": ("deallocate", "DEALLOCATE"),
             "UNLISTEN": ("noop", "UNLISTEN"), "LISTEN": ("noop", "LISTEN")}


class Classifier:
    """Classifies statement texts; shared by the sessions of a server (cached)."""

    def __init__(self, declared: set[str], catalog_tables: set[str], size: int = 2048,
                 columns: paramtypes.ColumnTypes | None = None) -> None:
        self.declared = declared
        self.catalog_tables = catalog_tables
        self.columns: paramtypes.ColumnTypes = columns or {}
        self._cache: LRU[str, Statement] = LRU(size)
        self._inferred: LRU[str, dict[int, int]] = LRU(size)

    def classify(self, text: str) -> Statement:
        return self._cache.get_or_compute(text, lambda: self._classify(text))

    def inferred(self, statement: Statement) -> dict[int, int]:
        """The parameter types the statement's text implies (casts, compared columns)."""
        if not statement.nparams:
            return {}
        text = statement.inner.text if statement.inner is not None else statement.text
        return self._inferred.get_or_compute(text, lambda: paramtypes.infer(text, self.columns))

    def _classify(self, text: str) -> Statement:
        try:
            if sqltext.is_blank(text):
                return Statement(text, "empty")
            nparams = sqltext.parameters(text)
        except sqltext.SQLTextError as e:
            return Statement(text, "query", engine_sql=text, nparams=0, argument=str(e))
        words = sqltext.keywords(text, 4)
        first = words[0] if words else ""
        if first in ("DECLARE", "FETCH", "MOVE", "CLOSE"):
            return self._cursor_statement(text, first, nparams)
        if first in _COMMANDS:
            kind, tag = _COMMANDS[first]
            statement = Statement(text, kind, tag, nparams=nparams)
            if kind == "rollback" and (words[1:2] == ["TO"] or
                                       words[1:3] in (["TRANSACTION", "TO"], ["WORK", "TO"])):
                statement.kind = "rollback_to"
            if kind in ("show", "reset", "deallocate", "discard"):
                statement.argument = _target(text)
                if kind == "discard":
                    statement.tag = "DISCARD " + (words[1] if len(words) > 1 else "ALL")
            if kind in ("show", "reset") and words[1:2] == ["TRANSACTION"]:
                statement.argument = "transaction_isolation"
            elif kind in ("show", "reset") and words[1:3] == ["TIME", "ZONE"]:
                statement.argument = "timezone"
            elif kind in ("show", "reset") and words[1:3] == ["SESSION", "AUTHORIZATION"]:
                statement.argument = "session_authorization"
            return statement
        if first == "EXPLAIN":
            body = re.sub(r"^\s*EXPLAIN(\s+\((?:[^)]*)\))?(\s+(ANALYZE|VERBOSE))*\s+", "",
                          sqltext.strip_comments(text), flags=re.I)
            inner = self._classify(body)
            return Statement(text, "explain", engine_sql=inner.engine_sql or body,
                             nparams=nparams)
        return self._query(text, nparams)

    def _cursor_statement(self, text: str, first: str, nparams: int) -> Statement:
        statement = Statement(text, first.lower(), nparams=nparams)
        try:
            if first == "DECLARE":
                statement.declaration = cursors.parse_declare(text)
                statement.inner = self._classify(statement.declaration.query)
                statement.tag = "DECLARE CURSOR"
            elif first == "CLOSE":
                name = cursors.parse_close(text)
                statement.argument = name or ""
                statement.tag = "CLOSE CURSOR" + (" ALL" if name is None else "")
            else:
                statement.direction, statement.argument = cursors.parse_fetch(text)
        except cursors.CursorSyntaxError as e:
            statement.error = str(e)
        return statement

    def _query(self, text: str, nparams: int) -> Statement:
        cleaned = _clean(text)
        try:
            # cast: sqlglot types parse results as its Expr trait; every node is an Expression
            tree = cast(exp.Expression, sqlglot.parse_one(cleaned, read="postgres"))
        except (SqlglotError, ValueError, RecursionError):
            tree = None
        if tree is None:
            return Statement(text, "query", engine_sql=text, nparams=nparams)
        if isinstance(tree, exp.Select | exp.SetOperation) and self._is_catalog(tree):
            return Statement(text, "catalog", tree=tree, nparams=nparams)
        names = pg_column_names(tree)
        return Statement(text, "query", tree=tree, engine_sql=self._engine_sql(text, tree),
                         names=names, nparams=nparams)

    def _is_catalog(self, tree: exp.Expression) -> bool:
        """No table other than catalog tables (or CTEs), and no engine or file function:
        nothing private can be reached. (The catalog holds no data anyway; this keeps its
        surface small and lets the library refuse such queries with its own message.)"""
        for fn in tree.find_all(exp.Func):
            name = function_name(fn)
            if name in _DENIED_FUNCTIONS or name.startswith(_DENIED_PREFIXES):
                return False
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for table in tree.find_all(exp.Table):
            name, schema = table.name.lower(), table.db.lower()
            if not name:  # a table function, e.g. generate_series(1, 3)
                function = table.this
                if not isinstance(function, exp.Func) or \
                        function_name(function) not in _TABLE_FUNCTIONS:
                    return False
                continue
            if schema in ("pg_catalog", "information_schema"):
                continue
            if not schema and (name in ctes or name in self.catalog_tables) and \
                    name not in self.declared:
                continue
            return False
        return True

    def _engine_sql(self, text: str, tree: exp.Expression) -> str:
        """The text for the engine: as written, unless it names tables in schema ``public``
        (PostgreSQL's default schema), which is then dropped (DuckDB text from sqlglot)."""
        qualified = [tb for tb in tree.find_all(exp.Table)
                     if tb.db.lower() == "public" and tb.name.lower() in self.declared]
        if not qualified:
            return text
        tree = tree.copy()
        for tb in tree.find_all(exp.Table):
            if tb.db.lower() == "public":
                tb.set("db", None)
                tb.set("catalog", None)
        for col in tree.find_all(exp.Column):
            if col.db.lower() == "public":
                col.set("db", None)
                col.set("catalog", None)
        try:
            return tree.sql(dialect="duckdb")
        except SqlglotError:
            return text


def _clean(text: str) -> str:
    """The text as sqlglot can parse it: PostgreSQL-only spellings sqlglot misreads rewritten."""
    text = _COLLATE.sub("", _OPERATOR.sub(r"\1", text))
    return _CATALOG_ARRAY.sub(r"\1 pg_catalog.\2[]", text)


def _target(text: str) -> str:
    """What a SHOW, RESET, DISCARD or DEALLOCATE names: the rest of the statement, lower-case
    unless quoted (DEALLOCATE's optional PREPARE dropped)."""
    m = re.match(r"\s*\w+\s+(?:PREPARE\s+(?=\S))?(.+?)\s*;?\s*$", sqltext.strip_comments(text),
                 re.I | re.S)
    target = (m.group(1) if m else "").strip()
    if target.startswith('"') and target.endswith('"'):
        return target[1:-1].replace('""', '"')
    return target.lower()


# -- prepared statements and portals ---------------------------------------------------------


@dataclass
class Prepared:
    statement: Statement
    param_types: list[int]
    fields: list[p.Field] | None = None  # set by a Describe; Executes then send these types
    described: bool = False
    inferred: dict[int, int] = field(default_factory=dict)  # $n -> type its context implies


@dataclass
class Portal:
    prepared: Prepared
    params: list[object]
    result_formats: list[int]
    privacy: tuple[float, float, str]
    fields: list[p.Field] | None = None  # None: not yet known
    described: bool = False  # a RowDescription (or NoData) was sent for this portal
    rows: list[tuple[object, ...]] | None = None  # None: not yet executed
    position: int = 0
    tag: str = ""


@dataclass
class Outcome:
    """What a statement returns: columns (None for commands), rows, the command tag."""

    fields: list[p.Field] | None
    rows: list[tuple[object, ...]] = field(default_factory=list)
    tag: str = ""
    extra: list[bytes] = field(default_factory=list)  # ParameterStatus / NoticeResponse


class _Running:
    """The DuckDB cursor of the statement running in the pool, to interrupt on cancel."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cursor: duckdb.DuckDBPyConnection | None = None
        self.abandoned = False

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
        self.out = bytearray()
        self.pid = 0
        self.secret = 0
        self.user = ""
        self.database = ""
        self.tls = False
        self.settings: dict[str, str] = {}
        self.initial: dict[str, str] = {}
        self.status = "I"  # ReadyForQuery: I idle, T in a transaction block, E failed block
        self.statements: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self.cursors: dict[str, cursors.Cursor] = {}
        self.implicit = False  # running a simple Query of several statements (one transaction)
        self.skipping = False  # after an error in the extended protocol, until Sync
        self.running: _Running | None = None
        self.overflow = False  # over max_connections: refuse after the startup packet
        self.cancelled: asyncio.Future[None] | None = None
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    # --- I/O

    def send(self, data: bytes) -> None:
        self.out += data

    async def flush(self) -> None:
        if self.out:
            self.writer.write(bytes(self.out))
            self.out.clear()
        await self.writer.drain()

    async def read_message(self) -> tuple[bytes, p.Reader]:
        header = await self.reader.readexactly(5)
        kind, length = header[:1], int.from_bytes(header[1:], "big", signed=True)
        if length < 4:
            raise p.ProtocolViolation(f"invalid message length {length}")
        if length - 4 > self.server.config.max_message_size:
            raise p.ProtocolViolation(
                f"message of {length} bytes is larger than the server's limit of "
                f"{self.server.config.max_message_size}", "54000")
        body = await self.reader.readexactly(length - 4)
        return kind, p.Reader(body)

    # --- lifecycle

    async def run(self) -> None:
        try:
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
        except p.ProtocolViolation as e:
            log.info("session %d (%s): closing on a protocol violation: %s", self.pid, self.peer,
                     e)
            await self.fatal(e.sqlstate, str(e))
        except (asyncio.IncompleteReadError, ConnectionError, Terminate):
            pass
        except Exception:  # never let one connection take the server down
            log.exception("session %d (%s): internal error", self.pid, self.peer)
            await self.fatal("XX000", "internal error in the dpsql server; see its log")
        finally:
            if self.running is not None:
                self.running.interrupt()
            self.server.forget(self)
            with contextlib.suppress(ConnectionError, RuntimeError):
                self.writer.close()

    async def fatal(self, sqlstate: str, message: str) -> None:
        try:
            self.out.clear()
            self.send(p.error_response("FATAL", sqlstate, message))
            await asyncio.wait_for(self.flush(), 2)
        except (ConnectionError, TimeoutError, RuntimeError):
            pass

    # --- startup and authentication

    async def startup(self) -> bool:
        config = self.server.config
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
                return False
            if code == p.SSL_REQUEST:
                if ssl_done:
                    raise p.ProtocolViolation("SSLRequest sent twice")
                ssl_done = True
                if self.reader._buffer:  # type: ignore[attr-defined]  # CVE-2021-23222-style
                    raise p.ProtocolViolation("received unencrypted data after SSL request")
                if self.server.ssl_context is None:
                    self.writer.write(b"N")
                    await self.writer.drain()
                    continue
                self.writer.write(b"S")
                await self.writer.drain()
                await self.writer.start_tls(self.server.ssl_context)
                self.tls = True
                continue
            if code == p.GSSENC_REQUEST:
                if gss_done:
                    raise p.ProtocolViolation("GSSENCRequest sent twice")
                gss_done = True
                self.writer.write(b"N")
                await self.writer.drain()
                continue
            startup = p.parse_startup(code, body)
            break
        if self.overflow:
            await self.fatal("53300", "sorry, too many clients already")
            return False
        if startup.major != 3:
            await self.fatal("0A000", f"unsupported frontend protocol {startup.major}."
                                      f"{startup.minor}: server supports 3.0")
            return False
        params = startup.parameters
        unrecognized = sorted(k for k in params if k.startswith("_pq_."))
        if startup.minor > 0 or unrecognized:
            self.send(p.negotiate_protocol_version(0, unrecognized))
        self.user = params.get("user", "")
        if not self.user:
            await self.fatal("28000", "no PostgreSQL user name specified in startup packet")
            return False
        self.database = params.get("database") or self.user
        if params.get("replication", "false").lower() not in ("false", "off", "0", "no"):
            await self.fatal("28000", "dpsql does not serve replication connections")
            return False
        if config.require_tls and not self.tls:
            await self.fatal("28000", "this dpsql server requires an encrypted connection "
                                      "(sslmode=require)")
            return False
        if not await self.authenticate():
            return False
        return await self.begin_session(params)

    async def authenticate(self) -> bool:
        verifier = self.server.verifier(self.user)
        exchange = ScramExchange(self.user, verifier, self.server.mock_secret)
        self.send(p.auth_sasl([MECHANISM]))
        await self.flush()
        try:
            kind, body = await self.read_message()
            if kind != b"p":
                raise p.ProtocolViolation("expected a SASL initial response")
            initial = p.parse_sasl_initial(body)
            if initial.mechanism != MECHANISM:
                raise AuthenticationFailed(f"unsupported SASL mechanism {initial.mechanism!r}")
            self.send(p.auth_sasl_continue(exchange.first(initial.data)))
            await self.flush()
            kind, body = await self.read_message()
            if kind != b"p":
                raise p.ProtocolViolation("expected a SASL response")
            final = exchange.final(body.rest())
        except AuthenticationFailed as e:
            log.warning("authentication of %r from %s failed: %s", self.user, self.peer, e)
            await asyncio.sleep(self.server.config.auth_failure_delay)
            await self.fatal("28P01", f'password authentication failed for user "{self.user}"')
            return False
        self.send(p.auth_sasl_final(final))
        self.send(p.AUTH_OK)
        return True

    async def begin_session(self, params: dict[str, str]) -> bool:
        server = self.server
        config = server.config
        self.settings = st.defaults(self.user, config.epsilon, config.delta, config.mechanism,
                                    int(config.statement_timeout * 1000), server.version)
        try:
            for name, value in params.items():
                if name in ("user", "database", "replication") or name.startswith("_pq_."):
                    continue
                if name == "options":
                    for opt_name, opt_value in _startup_options(value):
                        self.apply_setting(opt_name.lower(), opt_value)
                    continue
                self.apply_setting(name.lower(), value)
        except st.SettingError as e:
            await self.fatal(e.sqlstate, str(e))
            return False
        self.initial = dict(self.settings)
        self.pid, self.secret = server.register(self)
        for name in st.REPORTED:
            self.send(p.parameter_status(name, self.settings[name.lower()]))
        self.send(p.backend_key_data(self.pid, self.secret))
        self.send(p.ready_for_query(self.status))
        await self.flush()
        return True

    # --- the main loop

    async def serve(self) -> None:
        while True:
            kind, body = await self.read_message()
            if self.skipping and kind not in (b"S", b"X"):
                continue
            try:
                if kind == b"Q":
                    await self.simple_query(p.parse_query(body))
                elif kind == b"P":
                    self.on_parse(p.parse_parse(body))
                elif kind == b"B":
                    self.on_bind(p.parse_bind(body))
                elif kind == b"D":
                    await self.on_describe(p.parse_describe(body))
                elif kind == b"E":
                    await self.on_execute(p.parse_execute(body))
                elif kind == b"C":
                    self.on_close(p.parse_close(body))
                elif kind == b"H":
                    body.end()
                    await self.flush()
                elif kind == b"S":
                    body.end()
                    await self.on_sync()
                elif kind == b"X":
                    raise Terminate
                elif kind in (b"d", b"c", b"f"):
                    continue  # CopyData/CopyDone/CopyFail outside COPY: ignored, as PostgreSQL
                elif kind == b"F":
                    raise PgError("0A000", "the function call protocol is not supported")
                else:
                    raise p.ProtocolViolation(
                        f"invalid frontend message type {kind[0]}")
            except PgError as e:
                self.send_error(e)
                if kind != b"Q":
                    self.skipping = True
                # Written out at once, as PostgreSQL does: a client waiting after Parse/
                # Describe/Flush would otherwise never see it (its Flush is now skipped).
                await self.flush()
            if len(self.out) > _FLUSH_AT:
                await self.flush()

    def send_error(self, e: PgError) -> None:
        self.send(p.Notice(e.severity, e.sqlstate, str(e), e.detail, e.hint).encode())
        if self.status == "T":
            self.status = "E"

    # --- simple query

    async def simple_query(self, text: str) -> None:
        try:
            parts = sqltext.split(text)
        except sqltext.SQLTextError as e:
            self.send_error(PgError("42601", str(e)))
            self.send(p.ready_for_query(self.status))
            await self.flush()
            return
        if not parts:
            self.send(p.EMPTY_QUERY)
        self.implicit = len(parts) > 1
        try:
            succeeded = await self._run_parts(parts)
        finally:
            self.implicit = False
        if self.status == "I":  # the implicit transaction of the Query ended
            self._end_cursors(committed=succeeded)
        self.send(p.ready_for_query(self.status))
        await self.flush()

    async def _run_parts(self, parts: list[str]) -> bool:
        """Run a simple Query's statements up to the first error; whether all succeeded."""
        for part in parts:
            statement = self.server.classifier.classify(part)
            try:
                outcome = await self.execute(statement, [], privacy=self.privacy())
                if outcome.fields is not None:
                    self.send(p.row_description(outcome.fields))
                    await self.send_rows(outcome.fields, outcome.rows)
            except PgError as e:
                self.send_error(e)
                return False
            self.send(p.command_complete(outcome.tag))
            for extra in outcome.extra:
                self.send(extra)
        return True

    async def send_rows(self, fields: Sequence[p.Field], rows: Sequence[Sequence[object]]
                        ) -> None:
        encoders = [_encoder(f) for f in fields]
        for row in rows:
            try:
                values = [enc(v) for enc, v in zip(encoders, row, strict=True)]
            except (t.EncodeError, ValueError) as e:
                raise PgError("22P03", f"cannot send a result value: {e}") from None
            self.send(p.data_row(values))
            if len(self.out) > _FLUSH_AT:
                await self.flush()

    # --- extended query

    def on_parse(self, msg: p.Parse) -> None:
        if msg.name and msg.name in self.statements:
            raise PgError("42P05", f'prepared statement "{msg.name}" already exists')
        try:
            parts = sqltext.split(msg.query)
        except sqltext.SQLTextError as e:
            raise PgError("42601", str(e)) from None
        if len(parts) > 1:
            raise PgError("42601", "cannot insert multiple commands into a prepared statement")
        statement = self.server.classifier.classify(parts[0] if parts else "")
        inferred = self.server.classifier.inferred(statement)
        param_types = paramtypes.combine(msg.param_types, statement.nparams, inferred)
        self.statements[msg.name] = Prepared(statement, param_types, inferred=inferred)
        self.send(p.PARSE_COMPLETE)

    def on_bind(self, msg: p.Bind) -> None:
        prepared = self.statements.get(msg.statement)
        if prepared is None:
            raise PgError("26000", f'prepared statement "{msg.statement}" does not exist')
        if msg.portal and (msg.portal in self.portals or msg.portal in self.cursors):
            raise PgError("42P03", f'portal "{msg.portal}" already exists')
        needed = max(prepared.statement.nparams, len(prepared.param_types))
        if len(msg.params) != needed:
            raise PgError("08P01", f"bind message supplies {len(msg.params)} parameters, but "
                                   f"prepared statement \"{msg.statement}\" requires {needed}")
        if self.status == "E" and prepared.statement.kind not in ("rollback", "commit",
                                                                  "rollback_to"):
            raise _aborted()
        values: list[object] = []
        for i, raw in enumerate(msg.params):
            fmt = msg.param_formats[0] if len(msg.param_formats) == 1 else (
                msg.param_formats[i] if msg.param_formats else 0)
            oid = prepared.param_types[i] if i < len(prepared.param_types) else 0
            if raw is None:
                values.append(None)
                continue
            try:
                value = t.decode_parameter(raw, oid, fmt)
                if prepared.inferred.get(i + 1) == t.DATE:
                    value = t.as_date(value, f"${i + 1}")
                values.append(value)
            except t.ParameterError as e:
                raise PgError("22P02", str(e)) from None
        self.portals[msg.portal] = Portal(prepared, values, list(msg.result_formats),
                                          self.privacy())
        self.send(p.BIND_COMPLETE)

    async def on_describe(self, msg: p.Describe) -> None:
        if msg.kind == "S":
            prepared = self.statements.get(msg.name)
            if prepared is None:
                raise PgError("26000", f'prepared statement "{msg.name}" does not exist')
            oids = [self._param_oid(prepared, i) for i in
                    range(max(prepared.statement.nparams, len(prepared.param_types)))]
            self.send(p.parameter_description(oids))
            fields = await self.describe(prepared, None, self.privacy())
            prepared.fields, prepared.described = fields, True
            self.send(p.row_description(fields) if fields is not None else p.NO_DATA)
            return
        portal = self.portals.get(msg.name)
        if portal is None and msg.name in self.cursors:  # a cursor is a portal (psycopg 3)
            fields = self.cursors[msg.name].fields
            self.send(p.row_description(fields) if fields is not None else p.NO_DATA)
            return
        if portal is None:
            raise PgError("34000", f'portal "{msg.name}" does not exist')
        if portal.fields is None and portal.rows is None:
            if portal.prepared.described:
                portal.fields = _copy_fields(portal.prepared.fields)
            else:
                portal.fields = await self.describe(portal.prepared, portal.params,
                                                    portal.privacy)
        fields = _with_formats(portal.fields, portal.result_formats)
        portal.fields, portal.described = fields, True
        self.send(p.row_description(fields) if fields is not None else p.NO_DATA)

    def _param_oid(self, prepared: Prepared, i: int) -> int:
        oid = prepared.param_types[i] if i < len(prepared.param_types) else 0
        return oid if oid not in (0, t.UNKNOWN) else t.TEXT

    async def describe(self, prepared: Prepared, params: list[object] | None,
                       privacy: tuple[float, float, str]) -> list[p.Field] | None:
        """The columns a statement will return, without running a private query."""
        statement = prepared.statement
        if statement.kind in ("query", "explain"):
            if statement.kind == "explain":
                return [p.Field("QUERY PLAN", t.TEXT)]
            values = params if params is not None else [None] * statement.nparams
            epsilon, delta, mechanism = privacy
            # Plans depend on the text, the privacy parameters and the metadata only; so do
            # their columns (and on the parameters' types). Refusals are not cached.
            key = (statement.engine_sql, privacy, tuple(type(v).__name__ for v in values))
            columns = self.server.describe_cache.get(key)
            if columns is None:
                def plan_columns() -> list[tuple[str, str]]:
                    plan = self.server.db.plan(statement.engine_sql, epsilon, delta, mechanism,
                                               parameters=values or None)
                    return describe(plan)

                try:
                    columns = await self.blocking(plan_columns)
                except errors.Error as e:
                    raise _from_dpsql(e) from None
                columns = self.server.describe_cache.put(key, columns)
            return _fields(columns, statement.names)
        if statement.kind == "catalog":
            values = params if params is not None else [None] * statement.nparams
            result = await self.run_catalog(statement, values, prepared.param_types,
                                            describe_only=True)
            return result.fields
        if statement.kind == "show":
            return [p.Field(_show_column(statement.argument), t.TEXT)]
        if statement.kind == "fetch" and not statement.error:
            return _copy_fields(self._cursor(statement.argument).fields)
        return None

    async def on_execute(self, msg: p.Execute) -> None:
        portal = self.portals.get(msg.portal)
        if portal is None:
            raise PgError("34000", f'portal "{msg.portal}" does not exist')
        statement = portal.prepared.statement
        if statement.kind == "empty":
            self.send(p.EMPTY_QUERY)
            return
        if portal.rows is None:
            outcome = await self.execute(statement, portal.params, portal.privacy,
                                         portal.prepared.param_types)
            if outcome.fields is not None:
                described = portal.fields if portal.fields is not None else (
                    _copy_fields(portal.prepared.fields) if portal.prepared.described else None)
                if described is not None and len(described) != len(outcome.fields):
                    raise PgError("XX000", "the answer does not have the described columns")
                fields = described if described is not None else outcome.fields
                portal.fields = _with_formats(fields, portal.result_formats)
            portal.rows, portal.tag = outcome.rows, outcome.tag
            if portal.fields is None:
                self.send(p.command_complete(portal.tag))
                for extra in outcome.extra:
                    self.send(extra)
                return
        rows = portal.rows
        if portal.fields is None:
            self.send(p.command_complete(portal.tag))
            return
        end = len(rows) if msg.max_rows <= 0 else min(len(rows), portal.position + msg.max_rows)
        await self.send_rows(portal.fields, rows[portal.position:end])
        sent = end - portal.position
        portal.position = end
        if msg.max_rows > 0 and end < len(rows):
            self.send(p.PORTAL_SUSPENDED)
        else:
            tag = portal.tag if portal.tag and not portal.tag.startswith("SELECT") else \
                f"SELECT {sent}"
            self.send(p.command_complete(tag))

    def on_close(self, msg: p.Close) -> None:
        if msg.kind == "S":
            self.statements.pop(msg.name, None)
        elif self.portals.pop(msg.name, None) is None:
            self.cursors.pop(msg.name, None)
        self.send(p.CLOSE_COMPLETE)

    async def on_sync(self) -> None:
        self.skipping = False
        if self.status == "I":
            self.portals.pop("", None)
        self.send(p.ready_for_query(self.status))
        await self.flush()

    # --- executing one statement

    def privacy(self) -> tuple[float, float, str]:
        return (float(self.settings["dpsql.epsilon"]), float(self.settings["dpsql.delta"]),
                self.settings["dpsql.mechanism"])

    async def execute(self, statement: Statement, params: list[object],
                      privacy: tuple[float, float, str],
                      param_types: Sequence[int] = ()) -> Outcome:
        kind = statement.kind
        if self.status == "E" and kind not in ("rollback", "commit", "rollback_to"):
            raise _aborted()
        try:
            if kind == "empty":
                return Outcome(None, tag="")
            if kind == "query":
                return await self.run_private(statement, params, privacy)
            if kind == "catalog":
                return await self.run_catalog(statement, params, param_types)
            if kind == "explain":
                return await self.run_explain(statement, params, privacy)
            if kind in ("declare", "fetch", "move", "close"):
                return await self.cursor_command(statement, params, privacy, param_types)
            return await self.session_command(statement)
        except PgError:
            raise
        except errors.Error as e:
            raise _from_dpsql(e) from None
        except Exception:
            log.exception("session %d: internal error on %r", self.pid, statement.text[:200])
            raise PgError("XX000", "internal error in the dpsql server; see its log") from None

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
        if cancelled.done():
            raise PgError("57014", "canceling statement due to user request")
        raise PgError("57014", "canceling statement due to statement timeout")

    def statement_timeout(self) -> float | None:
        """The session's limit for what reads no private data: its own ``statement_timeout``,
        capped by the server's."""
        timeout_ms = int(self.settings.get("statement_timeout", "0") or 0)
        cap = self.server.config.statement_timeout
        timeout = timeout_ms / 1000 if timeout_ms > 0 else None
        if cap > 0:
            timeout = cap if timeout is None else min(timeout, cap)
        return timeout

    def request_cancel(self) -> None:
        if self.cancelled is not None and not self.cancelled.done():
            self.cancelled.set_result(None)

    async def run_private(self, statement: Statement, params: list[object],
                          privacy: tuple[float, float, str]) -> Outcome:
        """A private query, through the library.

        Its time limit is the data owner's (:meth:`dpsql.Database.run`), never the session's
        ``statement_timeout``: an analyst's limit would turn a data-dependent running time into
        a data-dependent error. A cancel request (or a closed connection) answers the client at
        once but does not interrupt the engine: the charged query runs on to its end (or the
        owner's limit) and its outcome is stored for reuse as usual. Interrupting it would make
        whether an answer was stored -- seen by asking again -- tell whether the engine was
        still running when the cancel came, finer than the answer time on the owner's grid.
        """
        epsilon, delta, mechanism = privacy

        def answer() -> Any:
            return self.server.run_query(statement.engine_sql, epsilon, delta, mechanism,
                                         params or None, self.user)

        try:
            result = await self.blocking(answer, timed=False)
        except errors.Error as e:
            raise _from_dpsql(e) from None
        columns = [(c.name, c.type) for c in result.columns]
        fields = _fields(columns, statement.names)
        return Outcome(fields, list(result.rows), f"SELECT {len(result.rows)}")

    async def run_explain(self, statement: Statement, params: list[object],
                          privacy: tuple[float, float, str]) -> Outcome:
        epsilon, delta, mechanism = privacy

        def explain() -> Any:
            return self.server.db.explain(statement.engine_sql, epsilon, delta, mechanism,
                                          parameters=params or None)

        try:
            e = await self.blocking(explain)
        except errors.Error as err:
            raise _from_dpsql(err) from None
        lines = ["Rewritten SQL:", *e.sql.splitlines(), ""]
        for c in e.cells:
            scale = "-" if c.noise_scale is None else f"{c.noise_scale:.4g}"
            lines.append(f"{c.output}: {c.measurement}, sensitivity {c.sensitivity:g}, "
                         f"epsilon {c.epsilon:.4g}, {c.mechanism}, noise scale {scale}, "
                         f"95% accuracy ±{c.accuracy:.4g}"
                         + (" ranks" if c.accuracy_unit == "rank" else ""))
        lines.append(f"Key release: {e.key_release}")
        if e.rows_per_unit:  # 0: an exact read of public tables, no unit to bound
            lines.append(f"Contribution bounds: {e.rows_per_unit} row(s) per unit in at most "
                         f"{e.groups_per_unit} group(s)")
        lines.append(f"Privacy cost: epsilon={e.epsilon:g}, delta={e.delta:g}")
        return Outcome([p.Field("QUERY PLAN", t.TEXT)], [(line,) for line in lines], "EXPLAIN")

    async def run_catalog(self, statement: Statement, params: Sequence[object],
                          param_types: Sequence[int], describe_only: bool = False) -> Outcome:
        catalog = self.server.catalog
        assert statement.tree is not None
        try:
            if params:
                def literal(n: int) -> str:
                    if n > len(params):
                        raise PgError("42P02", f"there is no parameter ${n}")
                    oid = param_types[n - 1] if n - 1 < len(param_types) else 0
                    return t.typed_literal(params[n - 1], oid)

                text = sqltext.substitute(statement.text, literal)
                cleaned = _clean(text)
                # cast: as in _query, every node sqlglot returns is an exp.Expression
                tree = cast(exp.Expression, sqlglot.parse_one(cleaned, read="postgres"))
                key = text
            else:
                tree, key = statement.tree, statement.text
            query = catalog.prepare(key, tree, self.session_info())
        except (SqlglotError, ValueError) as e:
            raise PgError("42601", f"cannot parse the catalog query: {e}") from None
        except CatalogError as e:
            raise PgError(e.sqlstate, str(e)) from None

        def run() -> Any:
            return catalog.run(query, catalog.cursor(), describe_only)

        try:
            result = await self.blocking(run, catalog.cursor)
        except CatalogError as e:
            raise PgError(e.sqlstate, str(e)) from None
        fields = [_field(name, duck_type) for name, duck_type in zip(result.names, result.types,
                                                                       strict=True)]
        return Outcome(fields, result.rows, f"SELECT {len(result.rows)}")

    def session_info(self) -> SessionInfo:
        return SessionInfo(self.user, self.database, self.pid, self.settings,
                           self.server.start_time, self.server.version_text)

    # --- session commands

    async def session_command(self, statement: Statement) -> Outcome:
        kind = statement.kind
        if kind == "begin":
            if self.status != "I":
                return Outcome(None, tag=statement.tag, extra=[p.notice_response(
                    "25001", "there is already a transaction in progress")])
            self.status = "T"
            return Outcome(None, tag="BEGIN")
        if kind in ("commit", "rollback"):
            extra = []
            tag = "COMMIT" if kind == "commit" and self.status != "E" else "ROLLBACK"
            if self.status == "I":
                extra.append(p.notice_response("25P01", "there is no transaction in progress"))
            committed = tag == "COMMIT"
            self.status = "I"
            self._end_transaction()
            self._end_cursors(committed)
            return Outcome(None, tag=tag, extra=extra)
        if kind == "rollback_to":
            if self.status == "I":
                raise PgError("25P01", "ROLLBACK TO SAVEPOINT can only be used in transaction "
                                       "blocks")
            self.status = "T"
            return Outcome(None, tag="ROLLBACK")
        if kind in ("savepoint", "release"):
            if self.status == "I":
                raise PgError("25P01", f"{statement.tag} can only be used in transaction "
                                       "blocks")
            return Outcome(None, tag=statement.tag)
        if kind == "set":
            return self.do_set(statement.text)
        if kind == "reset":
            return self.do_reset(statement.argument)
        if kind == "show":
            return await self.do_show(statement.argument)
        if kind == "discard":
            if statement.argument in ("all", ""):
                if self.status != "I":
                    raise PgError("25001", "DISCARD ALL cannot run inside a transaction block")
                self.statements = {k: v for k, v in self.statements.items() if k == ""}
                self.portals.clear()
                self.cursors.clear()
                return self._reset_all(statement.tag)
            return Outcome(None, tag=statement.tag)
        if kind == "deallocate":
            target = statement.argument
            if target == "all":
                self.statements = {k: v for k, v in self.statements.items() if k == ""}
            elif self.statements.pop(target, None) is None:
                raise PgError("26000", f'prepared statement "{target}" does not exist')
            return Outcome(None, tag="DEALLOCATE" + (" ALL" if target == "all" else ""))
        if kind == "noop":
            return Outcome(None, tag=statement.tag)
        raise PgError("0A000", "not supported")

    def _end_transaction(self) -> None:
        self.portals.clear()  # portals live until the end of their transaction

    # --- cursors (see dpsql.server.cursors)

    async def cursor_command(self, statement: Statement, params: list[object],
                             privacy: tuple[float, float, str],
                             param_types: Sequence[int]) -> Outcome:
        if statement.error:
            raise PgError("42601", statement.error)
        if statement.kind == "declare":
            return await self.declare(statement, params, privacy, param_types)
        if statement.kind == "close":
            if not statement.argument:
                self.cursors.clear()
            elif self.cursors.pop(statement.argument, None) is None:
                raise _no_cursor(statement.argument)
            return Outcome(None, tag=statement.tag)
        cursor = self._cursor(statement.argument)
        assert statement.direction is not None  # set with the name by the classifier
        try:
            rows = cursor.fetch(statement.direction)
        except cursors.CursorStateError as e:
            raise PgError("55000", str(e), hint="Declare it with SCROLL option to enable "
                                                "backward scan.") from None
        if statement.kind == "move":
            return Outcome(None, tag=f"MOVE {len(rows)}")
        return Outcome(_copy_fields(cursor.fields), rows, f"FETCH {len(rows)}")

    async def declare(self, statement: Statement, params: list[object],
                      privacy: tuple[float, float, str], param_types: Sequence[int]) -> Outcome:
        """Answer the cursor's query once (charged once, like any query) and keep its rows.

        Every check that can refuse comes before the query runs, so a DECLARE that fails
        for its name or its transaction state charges nothing."""
        declaration, inner = statement.declaration, statement.inner
        assert declaration is not None and inner is not None  # set by the classifier
        name = declaration.name
        if name in self.cursors or (name and name in self.portals):
            raise PgError("42P03", f'cursor "{name}" already exists')
        if not declaration.hold and self.status == "I" and not self.implicit:
            raise PgError("25P01", "DECLARE CURSOR can only be used in transaction blocks")
        if inner.kind not in ("query", "catalog"):
            raise PgError("42601", "DECLARE CURSOR needs a SELECT query")
        outcome = await self.execute(inner, params, privacy, param_types)
        fields = _with_formats(outcome.fields, [1]) if declaration.binary else outcome.fields
        self.cursors[name] = cursors.Cursor(declaration, fields, outcome.rows,
                                            in_transaction=self.status == "T" or self.implicit)
        return Outcome(None, tag=statement.tag)

    def _cursor(self, name: str) -> cursors.Cursor:
        cursor = self.cursors.get(name)
        if cursor is None:
            raise _no_cursor(name)
        return cursor

    def _end_cursors(self, committed: bool) -> None:
        """The end of a transaction: cursors WITHOUT HOLD close; on a rollback, so do those
        declared in it. Those WITH HOLD declared in a committed transaction live on."""
        for name, cursor in list(self.cursors.items()):
            if not cursor.declaration.hold or (cursor.in_transaction and not committed):
                del self.cursors[name]
            else:
                cursor.in_transaction = False

    def apply_setting(self, name: str, value: str | None) -> bytes | None:
        """Set (or with None reset) one setting; the ParameterStatus to send if reported."""
        if value is None:
            default = self.initial.get(name, st.defaults(self.user, self.server.config.epsilon,
                                                         self.server.config.delta,
                                                         self.server.config.mechanism, 0,
                                                         "").get(name))
            if name in st.READ_ONLY:
                raise st.SettingError(f"parameter \"{st.display_name(name)}\" cannot be "
                                      "changed", "55P02")
            if default is None:
                if self.settings.pop(name, None) is None:
                    raise st.SettingError(f'unrecognized configuration parameter "{name}"',
                                          "42704")
                return None
            value = default
        else:
            value = st.normalise(name, value, self.settings)
        changed = self.settings.get(name) != value
        self.settings[name] = value
        if name == "datestyle":
            self.settings["datestyle_order"] = value.split(",")[-1].strip()
        if changed and name in st.CANONICAL:
            return p.parameter_status(st.CANONICAL[name], value)
        return None

    def do_set(self, text: str) -> Outcome:
        try:
            command = st.parse_set(text)
            if command.name is None:
                return Outcome(None, tag="SET")
            status = self.apply_setting(command.name, command.value)
        except st.SettingError as e:
            raise PgError(e.sqlstate, str(e)) from None
        return Outcome(None, tag="SET", extra=[status] if status else [])

    def do_reset(self, target: str) -> Outcome:
        target = target.strip().strip(";").strip()
        if target == "all":
            return self._reset_all("RESET")
        try:
            status = self.apply_setting(target, None)
        except st.SettingError as e:
            raise PgError(e.sqlstate, str(e)) from None
        return Outcome(None, tag="RESET", extra=[status] if status else [])

    def _reset_all(self, tag: str) -> Outcome:
        extra = []
        for name, value in self.initial.items():
            if self.settings.get(name) != value and name in st.CANONICAL:
                extra.append(p.parameter_status(st.CANONICAL[name], value))
        self.settings = dict(self.initial)
        return Outcome(None, tag=tag, extra=extra)

    async def do_show(self, target: str) -> Outcome:
        target = target.strip().strip(";").strip()
        if target == "all":
            rows: list[tuple[object, ...]] = [
                (st.display_name(k), v, "") for k, v in sorted(self.settings.items())
                if k != "datestyle_order"]
            return Outcome([p.Field("name", t.TEXT), p.Field("setting", t.TEXT),
                            p.Field("description", t.TEXT)], rows, f"SHOW {len(rows)}")
        name = target.lower()
        if name == "dpsql.budget":
            value = await self.blocking(self.budget_text)
        elif name in self.settings and name != "datestyle_order":
            value = self.settings[name]
        else:
            raise PgError("42704", f'unrecognized configuration parameter "{target}"')
        return Outcome([p.Field(_show_column(target), t.TEXT)], [(value,)], "SHOW")

    def budget_text(self) -> str:
        status = self.server.budget(self.user)
        if status is None:
            return "unmetered: no analyst budgets are declared"
        return (f"spent epsilon={status.spent.epsilon:g}, delta={status.spent.delta:g} of "
                f"epsilon={status.total.epsilon:g}, delta={status.total.delta:g}; left "
                f"epsilon={status.remaining.epsilon:g}, delta={status.remaining.delta:g}")


# -- helpers ---------------------------------------------------------------------------------


def _discard(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _no_cursor(name: str) -> PgError:
    return PgError("34000", f'cursor "{name}" does not exist')


def _aborted() -> PgError:
    return PgError("25P02", "current transaction is aborted, commands ignored until end of "
                            "transaction block")


def _from_dpsql(e: errors.Error) -> PgError:
    sqlstate = getattr(e, "sqlstate", "XX000") or "XX000"
    said = [f"SET dpsql.{r.parameter} = {r.example:g}" if r.example is not None else
            f"a smaller SET dpsql.{r.parameter} may fit" for r in e.remedies]
    if isinstance(e, errors.BudgetExhausted):
        said.insert(0, "SHOW dpsql.budget tells what is left")
    hint = "; ".join(said) or None
    return PgError(sqlstate, str(e) or type(e).__name__, hint=hint,
                   detail=f"dpsql {type(e).__name__}")


def _field(name: str, duck_type: str) -> p.Field:
    oid, modifier = t.pg_type_of(duck_type)
    return p.Field(name, oid, t.type_size(oid), modifier)


def _fields(columns: Sequence[tuple[str, str]], names: list[str] | None) -> list[p.Field]:
    if names is not None and len(names) == len(columns):
        columns = [(n, ty) for n, (_, ty) in zip(names, columns, strict=True)]
    return [_field(name, ty) for name, ty in columns]


def _copy_fields(fields: list[p.Field] | None) -> list[p.Field] | None:
    if fields is None:
        return None
    return [p.Field(f.name, f.type_oid, f.type_size, f.type_modifier, f.format, f.table_oid,
                    f.column) for f in fields]


def _with_formats(fields: list[p.Field] | None, formats: list[int]) -> list[p.Field] | None:
    if fields is None:
        return None
    out = []
    for i, f in enumerate(fields):
        fmt = formats[0] if len(formats) == 1 else (formats[i] if i < len(formats) else 0)
        if fmt == 1 and not t.can_send_binary(f.type_oid):
            type_name = t.TYPES[f.type_oid].sql_name if f.type_oid in t.TYPES else f.type_oid
            raise PgError("0A000", f"binary format is not supported for column \"{f.name}\" "
                                   f"of type {type_name}; request text format")
        out.append(p.Field(f.name, f.type_oid, f.type_size, f.type_modifier, fmt, f.table_oid,
                           f.column))
    if formats and len(formats) not in (1, len(fields)):
        raise PgError("08P01", f"bind message has {len(formats)} result formats but query has "
                               f"{len(fields)} columns")
    return out


def _encoder(f: p.Field) -> Callable[[object], bytes | None]:
    return t.encoder(f.type_oid, f.format)


def _show_column(target: str) -> str:
    return st.display_name(target.lower()) if target.lower() in st.CANONICAL else target


def _startup_options(text: str) -> list[tuple[str, str]]:
    """``-c name=value`` and ``--name=value`` pairs of the ``options`` startup parameter."""
    out = []
    words = re.findall(r"(?:\\.|\S)+", text)
    words = [re.sub(r"\\(.)", r"\1", w) for w in words]
    i = 0
    while i < len(words):
        word = words[i]
        if word == "-c" and i + 1 < len(words):
            pair = words[i + 1]
            i += 2
        elif word.startswith("-c") or word.startswith("--"):
            pair = word[2:]
            i += 1
        else:
            raise st.SettingError(f"invalid command-line argument in options: {word!r}",
                                  "22023")
        name, sep, value = pair.partition("=")
        if not sep:
            raise st.SettingError(f"option {pair!r} needs a value (-c name=value)", "22023")
        out.append((name.replace("-", "_"), value))
    return out

