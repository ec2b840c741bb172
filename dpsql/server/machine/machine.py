"""The protocol state machine of one session, with no I/O: messages in, messages out.

:meth:`Machine.handle` takes one frontend message after login (its type byte and body) and
appends the backend messages it answers with to :attr:`Machine.out`; it returns whether they
must reach the client now (Flush, Sync, the end of a simple Query, an error). One handler per
message type (:data:`HANDLERS`). The state: the session's settings, the transaction status,
named and unnamed prepared statements and portals, server-side cursors, and, after an error in
the extended protocol, skipping messages until Sync.

Everything that may block -- planning, a private query, a catalog query, reading the budget --
goes through :attr:`Machine.blocking`, which the I/O adapter (:mod:`dpsql.server.session`)
runs in the server's thread pool with cancel and timeouts; tests run it inline. Private
queries go to the library through the server (:meth:`~dpsql.server.machine.host.Host.
run_query`): this module makes no privacy decision.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from sqlglot.errors import SqlglotError

from dpsql import errors
from dpsql.execution.watch import Watch, watching
from dpsql.explanation.render import render
from dpsql.query.parse import check_size
from dpsql.server.catalog import CatalogError, SessionInfo
from dpsql.server.machine import commands, cursors
from dpsql.server.machine import settings as st
from dpsql.server.machine.classify import Statement, StatementKind
from dpsql.server.machine.host import Blocking, Host, inline
from dpsql.server.machine.outcome import (
    CANCELLED,
    Outcome,
    PgError,
    Portal,
    Prepared,
    Terminate,
    aborted,
    copy_fields,
    encoder,
    field_of,
    fields_of,
    from_dpsql,
    show_column,
    with_formats,
)
from dpsql.server.machine.parameters import bound_parameter, catalog_tree, parameter_oid
from dpsql.server.wire import paramtypes, sqltext
from dpsql.server.wire import protocol as p
from dpsql.server.wire import types as t

log = logging.getLogger("dpsql.server")

FLUSH_AT = 64 * 1024  # bytes of output after which rows are written out before the rest
# Named prepared statements one session may hold, and their total SQL text.
MAX_PREPARED = 1000
MAX_PREPARED_TEXT = 256 * 1024


async def _nothing() -> None:
    return None


class Machine:
    def __init__(self, server: Host, blocking: Blocking = inline,
                 drain: Callable[[], Awaitable[None]] = _nothing) -> None:
        self.server = server
        self.blocking = blocking
        self.drain = drain  # writes :attr:`out` to the client (large results, mid-message)
        self.out = bytearray()
        self.pid = 0
        self.user = ""
        self.database = ""
        self.settings: dict[str, str] = {}
        self.initial: dict[str, str] = {}
        self.status = "I"  # ReadyForQuery: I idle, T in a transaction block, E failed block
        self.statements: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self.cursors: dict[str, cursors.Cursor] = {}
        self.implicit = False  # running a simple Query of several statements (one transaction)
        self.skipping = False  # after an error in the extended protocol, until Sync

    def send(self, data: bytes) -> None:
        self.out += data

    def login(self, user: str, database: str, params: Mapping[str, str]) -> None:
        """The logged-in session's settings: the server's defaults, then the startup packet's
        parameters and ``options`` (raises :class:`~dpsql.server.machine.settings.SettingError`)."""
        config = self.server.config
        self.user, self.database = user, database
        # The analyst's query_epsilon, else the server's --epsilon, else 1.0.
        epsilon = self.server.db.query_epsilon(user, config.epsilon)
        self.settings = st.defaults(user, epsilon, config.delta, config.mechanism,
                                    int(config.statement_timeout * 1000), self.server.version)
        for name, value in params.items():
            if name in ("user", "database", "replication") or name.startswith("_pq_."):
                continue
            if name == "options":
                for opt_name, opt_value in commands.startup_options(value):
                    commands.apply_setting(self, opt_name.lower(), opt_value)
                continue
            commands.apply_setting(self, name.lower(), value)
        self.initial = dict(self.settings)

    async def handle(self, kind: bytes, body: p.Reader) -> bool:
        """Answer one message; whether the output must be written out now."""
        if self.skipping and kind not in (b"S", b"X"):
            return False
        handler = HANDLERS.get(kind)
        if handler is None:
            raise p.ProtocolViolation(f"invalid frontend message type {kind[0]}")
        try:
            return await handler(self, body)
        except PgError as e:
            self.send_error(e)
            if kind != b"Q":
                self.skipping = True
            # Written out at once, as PostgreSQL does: a client waiting after Parse/
            # Describe/Flush would otherwise never see it (its Flush is now skipped).
            return True

    def send_error(self, e: PgError) -> None:
        self.send(p.Notice(e.severity, e.sqlstate, str(e), e.detail, e.hint,
                           position=e.position).encode())
        if self.status == "T":
            self.status = "E"

    # --- simple query

    async def on_query(self, body: p.Reader) -> bool:
        text = p.parse_query(body)
        try:
            parts = await self.classified(text)
        except sqltext.SQLTextError as e:
            self.send_error(PgError("42601", str(e)))
            self.send(p.ready_for_query(self.status))
            return True
        except PgError as e:  # cancelled while being read
            self.send_error(e)
            self.send(p.ready_for_query(self.status))
            return True
        if not parts:
            self.send(p.EMPTY_QUERY)
        self.implicit = len(parts) > 1
        try:
            succeeded = await self._run_parts(parts, text)
        finally:
            self.implicit = False
        if self.status == "I":  # the implicit transaction of the Query ended
            commands.end_cursors(self, committed=succeeded)
        self.send(p.ready_for_query(self.status))
        return True

    async def classified(self, text: str, infer: bool = False) -> list[Statement]:
        """The statements of ``text``, split and classified in the pool: their cost grows with
        the text, and nothing that does may run on the event loop, which serves every other
        connection. ``infer``: their parameter types are inferred there too (cached)."""
        def work() -> list[Statement]:
            classifier = self.server.classifier
            try:  # the whole message, before it is even split (dpsql.query.parse.check_size)
                check_size(text)
            except errors.QueryTooComplex as e:
                raise from_dpsql(e) from None
            statements = [classifier.classify(part) for part in sqltext.split(text)]
            if infer:
                for statement in statements:
                    classifier.inferred(statement)
            return statements

        result: list[Statement] = await self.blocking(work, timed=False)
        return result

    async def _run_parts(self, parts: list[Statement], text: str) -> bool:
        """Run a simple Query's statements up to the first error; whether all succeeded.
        ``text`` is the Query's: an error's position is in it, as PostgreSQL's is."""
        offset = 0
        for statement in parts:
            offset = max(text.find(statement.text, offset), 0)  # the parts are in order
            try:
                outcome = await self.execute(statement, [], privacy=self.privacy())
                if outcome.fields is not None:
                    self.send(p.row_description(outcome.fields))
                    await self.send_rows(outcome.fields, outcome.rows)
            except PgError as e:
                if e.position is not None:
                    e.position += offset
                self.send_error(e)
                return False
            offset += len(statement.text)
            self.send(p.command_complete(outcome.tag))
            for extra in outcome.extra:
                self.send(extra)
        return True

    async def send_rows(self, fields: Sequence[p.Field], rows: Sequence[Sequence[object]]
                        ) -> None:
        encoders = [encoder(f) for f in fields]
        for row in rows:
            try:
                values = [enc(v) for enc, v in zip(encoders, row, strict=True)]
            except (t.EncodeError, ValueError) as e:
                raise PgError("22P03", f"cannot send a result value: {e}") from None
            self.send(p.data_row(values))
            if len(self.out) > FLUSH_AT:
                await self.drain()

    # --- extended query

    async def on_parse(self, body: p.Reader) -> bool:
        msg = p.parse_parse(body)
        if msg.name and msg.name in self.statements:
            raise PgError("42P05", f'prepared statement "{msg.name}" already exists')
        try:
            parts = await self.classified(msg.query, infer=True)
        except sqltext.SQLTextError as e:
            raise PgError("42601", str(e)) from None
        if len(parts) > 1:
            raise PgError("42601", "cannot insert multiple commands into a prepared statement")
        statement = parts[0] if parts else self.server.classifier.classify("")
        if msg.name:
            self._room_for(statement.text)
        inferred = self.server.classifier.inferred(statement)
        param_types = paramtypes.combine(msg.param_types, statement.nparams, inferred)
        self.statements[msg.name] = Prepared(statement, param_types, inferred=inferred)
        self.send(p.PARSE_COMPLETE)
        return False

    def _room_for(self, text: str) -> None:
        """Refuse (54000) a named prepared statement beyond the session's bounds: each holds
        its parse, which the server's byte-bounded caches cannot free while it is held."""
        held = sum(len(s.statement.text) for s in self.statements.values())
        if len(self.statements) >= MAX_PREPARED or held + len(text) > MAX_PREPARED_TEXT:
            raise PgError("54000", f"this session holds {len(self.statements)} prepared "
                                   f"statements ({held} characters of SQL), the most the server "
                                   "keeps per session; DEALLOCATE the ones no longer used")

    async def on_bind(self, body: p.Reader) -> bool:
        msg = p.parse_bind(body)
        prepared = self.statements.get(msg.statement)
        if prepared is None:
            raise PgError("26000", f'prepared statement "{msg.statement}" does not exist')
        if msg.portal and (msg.portal in self.portals or msg.portal in self.cursors):
            raise PgError("42P03", f'portal "{msg.portal}" already exists')
        needed = max(prepared.statement.nparams, len(prepared.param_types))
        if len(msg.params) != needed:
            raise PgError("08P01", f"bind message supplies {len(msg.params)} parameters, but "
                                   f"prepared statement \"{msg.statement}\" requires {needed}")
        if self.status == "E" and prepared.statement.kind not in (
                StatementKind.ROLLBACK, StatementKind.COMMIT, StatementKind.ROLLBACK_TO):
            raise aborted()
        values = [bound_parameter(prepared, i, raw, msg.param_formats)
                  for i, raw in enumerate(msg.params)]
        self.portals[msg.portal] = Portal(prepared, values, list(msg.result_formats),
                                          self.privacy())
        self.send(p.BIND_COMPLETE)
        return False

    async def on_describe(self, body: p.Reader) -> bool:
        msg = p.parse_describe(body)
        if msg.kind == "S":
            await self._describe_statement(msg.name)
        else:
            await self._describe_portal(msg.name)
        return False

    async def _describe_statement(self, name: str) -> None:
        prepared = self.statements.get(name)
        if prepared is None:
            raise PgError("26000", f'prepared statement "{name}" does not exist')
        oids = [parameter_oid(prepared, i) for i in
                range(max(prepared.statement.nparams, len(prepared.param_types)))]
        self.send(p.parameter_description(oids))
        fields = await self.describe(prepared, None, self.privacy())
        prepared.fields, prepared.described = fields, True
        self.send(p.row_description(fields) if fields is not None else p.NO_DATA)

    async def _describe_portal(self, name: str) -> None:
        portal = self.portals.get(name)
        if portal is None and name in self.cursors:  # a cursor is a portal (psycopg 3)
            fields = self.cursors[name].fields
            self.send(p.row_description(fields) if fields is not None else p.NO_DATA)
            return
        if portal is None:
            raise PgError("34000", f'portal "{name}" does not exist')
        if portal.fields is None and portal.rows is None:
            if portal.prepared.described:
                portal.fields = copy_fields(portal.prepared.fields)
            else:
                portal.fields = await self.describe(portal.prepared, portal.params,
                                                    portal.privacy)
        fields = with_formats(portal.fields, portal.result_formats)
        portal.fields, portal.described = fields, True
        self.send(p.row_description(fields) if fields is not None else p.NO_DATA)

    async def describe(self, prepared: Prepared, params: list[object] | None,
                       privacy: tuple[float, float, str]) -> list[p.Field] | None:
        """The columns a statement will return, without running a private query."""
        statement = prepared.statement
        if statement.kind == StatementKind.EXPLAIN:
            return [p.Field("QUERY PLAN", t.TEXT)]
        if statement.kind == StatementKind.QUERY:
            return await self._plan_fields(statement, params, privacy)
        if statement.kind == StatementKind.CATALOG:
            values = params if params is not None else [None] * statement.nparams
            result = await self.run_catalog(statement, values, prepared.param_types,
                                            describe_only=True)
            return result.fields
        if statement.kind == StatementKind.SHOW:
            return [p.Field(show_column(statement.argument), t.TEXT)]
        if statement.kind == StatementKind.FETCH and not statement.error:
            return copy_fields(commands.find_cursor(self, statement.argument).fields)
        return None

    async def _plan_fields(self, statement: Statement, params: list[object] | None,
                           privacy: tuple[float, float, str]) -> list[p.Field]:
        """A private query's columns, from its plan (which reads no data, charges nothing)."""
        values = params if params is not None else [None] * statement.nparams
        epsilon, delta, mechanism = privacy
        # Plans depend on the text, the privacy parameters and the metadata only; so do
        # their columns (and on the parameters' types). Refusals are not cached.
        key = (statement.engine_sql, privacy, tuple(type(v).__name__ for v in values))
        columns = self.server.describe_cache.get(key)
        if columns is None:
            def plan_columns() -> list[tuple[str, str]]:
                return self.server.db.route(statement.engine_sql, epsilon, delta, mechanism,
                                            parameters=values or None).columns()

            try:
                columns = await self.blocking(plan_columns)
            except errors.Error as e:
                raise from_dpsql(e, statement) from None
            columns = self.server.describe_cache.put(key, columns)
        return fields_of(columns, statement.names)

    async def on_execute(self, body: p.Reader) -> bool:
        msg = p.parse_execute(body)
        portal = self.portals.get(msg.portal)
        if portal is None:
            raise PgError("34000", f'portal "{msg.portal}" does not exist')
        if portal.prepared.statement.kind == StatementKind.EMPTY:
            self.send(p.EMPTY_QUERY)
            return False
        if portal.rows is None and not await self._run_portal(portal):
            return False
        if portal.fields is None:
            self.send(p.command_complete(portal.tag))
            return False
        await self._send_portal_rows(portal, msg.max_rows)
        return False

    async def _run_portal(self, portal: Portal) -> bool:
        """Run the portal's statement; whether it returns rows (else its tag is sent)."""
        outcome = await self.execute(portal.prepared.statement, portal.params, portal.privacy,
                                     portal.prepared.param_types)
        if outcome.fields is not None:
            described = portal.fields if portal.fields is not None else (
                copy_fields(portal.prepared.fields) if portal.prepared.described else None)
            if described is not None and len(described) != len(outcome.fields):
                raise PgError("XX000", "the answer does not have the described columns")
            fields = described if described is not None else outcome.fields
            portal.fields = with_formats(fields, portal.result_formats)
        portal.rows, portal.tag = outcome.rows, outcome.tag
        if portal.fields is None:
            self.send(p.command_complete(portal.tag))
            for extra in outcome.extra:
                self.send(extra)
            return False
        for extra in outcome.extra:  # the answer's notices (randomized rows say so), first
            self.send(extra)
        return True

    async def _send_portal_rows(self, portal: Portal, max_rows: int) -> None:
        rows = portal.rows or []
        assert portal.fields is not None
        end = len(rows) if max_rows <= 0 else min(len(rows), portal.position + max_rows)
        await self.send_rows(portal.fields, rows[portal.position:end])
        sent = end - portal.position
        portal.position = end
        if max_rows > 0 and end < len(rows):
            self.send(p.PORTAL_SUSPENDED)
        else:
            tag = portal.tag if portal.tag and not portal.tag.startswith("SELECT") else \
                f"SELECT {sent}"
            self.send(p.command_complete(tag))

    async def on_close(self, body: p.Reader) -> bool:
        msg = p.parse_close(body)
        if msg.kind == "S":
            self.statements.pop(msg.name, None)
        elif self.portals.pop(msg.name, None) is None:
            self.cursors.pop(msg.name, None)
        self.send(p.CLOSE_COMPLETE)
        return False

    async def on_flush(self, body: p.Reader) -> bool:
        body.end()
        return True

    async def on_sync(self, body: p.Reader) -> bool:
        body.end()
        self.skipping = False
        if self.status == "I":
            self.portals.pop("", None)
        self.send(p.ready_for_query(self.status))
        return True

    async def on_terminate(self, body: p.Reader) -> bool:
        raise Terminate

    async def on_copy(self, body: p.Reader) -> bool:
        return False  # CopyData/CopyDone/CopyFail outside COPY: ignored, as PostgreSQL

    async def on_function_call(self, body: p.Reader) -> bool:
        raise PgError("0A000", "the function call protocol is not supported")

    # --- executing one statement

    def privacy(self) -> tuple[float, float, str]:
        return (float(self.settings["dpsql.epsilon"]), float(self.settings["dpsql.delta"]),
                self.settings["dpsql.mechanism"])

    async def execute(self, statement: Statement, params: list[object],
                      privacy: tuple[float, float, str],
                      param_types: Sequence[int] = ()) -> Outcome:
        kind = statement.kind
        if self.status == "E" and kind not in (StatementKind.ROLLBACK, StatementKind.COMMIT,
                                               StatementKind.ROLLBACK_TO):
            raise aborted()
        try:
            with errors.guarded(f"session {self.pid}: {statement.text[:200]!r}",
                                passing=(PgError, errors.Error)):
                if kind == StatementKind.EMPTY:
                    return Outcome(None, tag="")
                if kind == StatementKind.QUERY:
                    return await self.run_private(statement, params, privacy)
                if kind == StatementKind.CATALOG:
                    return await self.run_catalog(statement, params, param_types)
                if kind == StatementKind.EXPLAIN:
                    return await self.run_explain(statement, params, privacy)
                return await commands.run_command(self, statement, params, privacy,
                                                  param_types)
        except errors.Error as e:  # dpsql's own, or a bug the guard turned into InternalError
            raise from_dpsql(e, statement) from None

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
        A query cancelled before its charge (still waiting for a worker thread, or planning)
        is never charged nor run (:mod:`dpsql.execution.watch`); the error says which.
        """
        epsilon, delta, mechanism = privacy
        release: list[float] = []
        bounds = st.session_bounds(self.settings)
        watch = Watch(interrupts=False)  # a cancel before the charge: never charged nor run

        def answer() -> Any:
            try:
                with watching(watch):
                    return self.server.run_query(statement.engine_sql, epsilon, delta,
                                                 mechanism, params or None, self.user,
                                                 release, bounds, st.retention(self.settings),
                                                 caveats=st.caveats(self.settings))
            except errors.Error as e:  # released on the grid too, as an answer is
                return e

        try:
            result = await self.blocking(answer, timed=False)
        except PgError as e:  # cancelled: say what it cost (final once cancel() returns)
            watch.cancel()
            raise PgError(e.sqlstate, f"{CANCELLED}; {watch.error().charge_words()}") from None
        if release:  # the library's time grid, waited for here without holding a thread
            await asyncio.sleep(max(0.0, max(release) - time.monotonic()))
        if isinstance(result, errors.Error):
            raise from_dpsql(result, statement)
        fields = fields_of([(c.name, c.type) for c in result.columns], statement.names)
        # The bias of bounding and clamping, which the noise's accuracy does not cover, and
        # the caveats (dpsql.execution.caveats), as psql and drivers show a NOTICE
        # (dpsql.explanation.bias;
        # public: the bounds in force; the caveats are post-processing).
        notices = [p.notice_response("00000", note, "NOTICE") for note in result.notes]
        return Outcome(fields, list(result.rows), f"SELECT {len(result.rows)}", notices)

    async def run_explain(self, statement: Statement, params: list[object],
                          privacy: tuple[float, float, str]) -> Outcome:
        """``EXPLAIN``: the text of ``dpsql explain`` (:func:`dpsql.explanation.render.render`)."""
        epsilon, delta, mechanism = privacy

        def explain() -> Any:
            return self.server.db.explain(statement.engine_sql, epsilon, delta, mechanism,
                                          parameters=params or None,
                                          bounds=st.session_bounds(self.settings))

        try:
            e = await self.blocking(explain)
        except errors.Error as err:
            raise from_dpsql(err, statement) from None
        lines = render(e, sql=True)  # a client of the wire: everything, the SQL too
        return Outcome([p.Field("QUERY PLAN", t.TEXT)], [(line,) for line in lines], "EXPLAIN")

    async def run_catalog(self, statement: Statement, params: Sequence[object],
                          param_types: Sequence[int], describe_only: bool = False) -> Outcome:
        catalog = self.server.catalog
        info = self.session_info()

        def prepare() -> Any:  # in the pool: the parameters' text may be long
            tree, key = catalog_tree(statement, params, param_types)
            return catalog.prepare(key, tree, info)

        try:
            query = await self.blocking(prepare, timed=False)
        except (SqlglotError, ValueError, RecursionError) as e:
            raise PgError("42601", f"cannot parse the catalog query: {e}") from None
        except CatalogError as e:
            raise PgError(e.sqlstate, str(e)) from None

        def run() -> Any:
            return catalog.run(query, catalog.cursor(), describe_only)

        try:
            result = await self.blocking(run, catalog.cursor)
        except CatalogError as e:
            raise PgError(e.sqlstate, str(e)) from None
        fields = [field_of(name, duck_type) for name, duck_type in zip(result.names, result.types,
                                                                         strict=True)]
        return Outcome(fields, result.rows, f"SELECT {len(result.rows)}")

    def session_info(self) -> SessionInfo:
        return SessionInfo(self.user, self.database, self.pid, self.settings,
                           self.server.start_time, self.server.version_text)


HANDLERS: dict[bytes, Callable[[Machine, p.Reader], Awaitable[bool]]] = {
    b"Q": Machine.on_query, b"P": Machine.on_parse, b"B": Machine.on_bind,
    b"D": Machine.on_describe, b"E": Machine.on_execute, b"C": Machine.on_close,
    b"H": Machine.on_flush, b"S": Machine.on_sync, b"X": Machine.on_terminate,
    b"d": Machine.on_copy, b"c": Machine.on_copy, b"f": Machine.on_copy,
    b"F": Machine.on_function_call,
}
