"""The PostgreSQL engine: psycopg 3, one read-only session per thread, as a second wall behind
the checker.

    dpsql query --database postgresql://dpsql_reader@db.example/clinic --metadata clinic.toml

The owner gives dpsql a role that can only read the declared tables (docs/engines.md has the
GRANTs). Every session dpsql opens is read-only (``default_transaction_read_only = on``, set
again by dpsql whatever the role's defaults), has the owner's ``statement_timeout`` (the
metadata's ``[server] statement_timeout``; dpsql's own deadline cancels earlier), and reads
dates in ISO style. The schema (each declared table's columns and their types) is read from
``information_schema`` when the engine opens and spelled in DuckDB's type names, which the
rewrite and :func:`~dpsql.engines.check_metadata` speak.

The rewritten query is generated for PostgreSQL in :class:`~dpsql.engines.postgres.dialect.
PostgresDialect`, which keeps it total there (safe casts, NaN, sums, the bounding hash); before
anything is charged, :meth:`PostgresEngine.compile` runs it with every table replaced by an
empty table of its physical types, so that an error PostgreSQL raises whatever the data is a
refusal. Parameters are sent as PostgreSQL's own ``$1`` (psycopg's raw cursor), never pasted.

Errors: an error raised before any row is read (syntax, types, permissions: SQLSTATE classes
42 and 0A) is reported with PostgreSQL's message, which quotes the query, never the data; any
other error (a data exception, class 22) may quote a value, so the analyst gets no detail and
the owner's log gets it (as for DuckDB).
"""

from __future__ import annotations

import decimal
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dpsql.cache import LRU, REWRITTEN_CACHE_SIZE
from dpsql.engines.empty import with_empty
from dpsql.engines.physical import public_select
from dpsql.engines.postgres.dialect import PostgresDialect
from dpsql.engines.protocol import column_arrays
from dpsql.errors import EngineError, UnsupportedQuery
from dpsql.metadata.owner_settings import DEFAULT_STATEMENT_TIMEOUT

if TYPE_CHECKING:
    import numpy.typing as npt

MINIMUM_VERSION = 140000
CANCEL_RETRY, CANCEL_RETRIES = 0.02, 100  # a lost cancel request is repeated for up to 2 s
# PostgreSQL's types in DuckDB's names (the rewrite's vocabulary); others are kept as spelled
# (and refused by check_metadata if declared).
_TYPES = {"bigint": "BIGINT", "integer": "INTEGER", "smallint": "SMALLINT",
          "double precision": "DOUBLE", "real": "FLOAT", "text": "VARCHAR",
          "character varying": "VARCHAR", "character": "VARCHAR", "boolean": "BOOLEAN",
          "date": "DATE", "timestamp without time zone": "TIMESTAMP",
          "timestamp with time zone": "TIMESTAMP WITH TIME ZONE"}
# SQLSTATE classes raised before any row is read: their messages quote the query only.
_BEFORE_ROWS = ("42", "0A", "57014")


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise EngineError("the PostgreSQL engine needs psycopg 3: pip install "
                          "'dpsql[postgres]'") from None
    return psycopg


class PgCancel:
    """A PostgreSQL cancel token for the calling thread's session and its next query.

    A cancel request that reaches the server before the query does is lost (the server
    cancels whatever runs at that moment, here nothing), and the query would then run to the
    session's backstop timeout. So after the first request the token repeats it every
    :data:`CANCEL_RETRY` seconds, on a thread of its own, until its query has finished
    (``finished``, set by :meth:`PostgresEngine.execute` under ``lock``, so that no repeat can
    reach the session's next query), for at most :data:`CANCEL_RETRIES` tries."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self.lock = threading.Lock()
        self.finished = threading.Event()

    def cancel(self) -> None:
        self._send()
        threading.Thread(target=self._repeat, daemon=True, name="dpsql-pg-cancel").start()

    def _send(self) -> bool:
        with self.lock:
            if self.finished.is_set():
                return False
            self._connection.cancel_safe()
            return True

    def _repeat(self) -> None:
        for _ in range(CANCEL_RETRIES):
            if self.finished.wait(CANCEL_RETRY) or not self._send():
                return


class PostgresEngine:
    """A PostgreSQL database behind a ``postgresql://`` URL; one read-only session per
    thread, all opened with the same settings."""

    name = "postgres"
    dialect = PostgresDialect
    #: DOUBLE PRECISION arithmetic that overflows raises (DuckDB and Spark give Infinity).
    raises_on_float_overflow = True

    def __init__(self, url: str, tables: Sequence[str] | None = None,
                 statement_timeout: float | None = None) -> None:
        self.url = url
        self.location = _redacted(url)
        # A backstop a second after dpsql's own deadline (dpsql.execution.time_limits), which
        # cancels first.
        seconds = statement_timeout or DEFAULT_STATEMENT_TIMEOUT
        self._timeout_ms = int((seconds + 1.0) * 1000)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._sessions: list[Any] = []
        version = self._fetch("SELECT current_setting('server_version_num')::int")[0][0]
        if version < MINIMUM_VERSION:  # hash_record_extended, NUMERIC infinities
            raise EngineError(f"{self.location} runs PostgreSQL {version // 10000}; dpsql needs "
                              "PostgreSQL 14 or later")
        self.schema = self._schema(tables)
        self.rewritten: LRU[int, tuple[object, str, bool]] = LRU(REWRITTEN_CACHE_SIZE)

    # --- sessions ---------------------------------------------------------------------------

    def session(self) -> Any:
        """The calling thread's read-only session (opened on first use)."""
        con = getattr(self._local, "session", None)
        if con is None or con.closed:
            psycopg = _psycopg()
            try:
                con = psycopg.connect(self.url, autocommit=True,
                                      cursor_factory=psycopg.RawCursor, options=(
                                          "-c default_transaction_read_only=on "
                                          f"-c statement_timeout={self._timeout_ms} "
                                          "-c DateStyle=ISO -c TimeZone=UTC "
                                          "-c extra_float_digits=3"))
            except psycopg.Error as e:
                raise EngineError(f"cannot connect to {self.location}: {e}") from None
            self._local.session = con
            with self._lock:
                self._sessions.append(con)
        return con

    def cancel_token(self) -> PgCancel:
        """A token that cancels the next query this thread runs (see :class:`PgCancel`)."""
        token = PgCancel(self.session())
        self._local.token = token
        return token

    def close(self) -> None:
        with self._lock:
            sessions, self._sessions = self._sessions, []
        for con in sessions:
            con.close()

    # --- schema -----------------------------------------------------------------------------

    def _schema(self, tables: Sequence[str] | None) -> dict[str, dict[str, str]]:
        """Table -> column -> physical type in DuckDB's names, lower-case names. Only the
        tables this role may read are visible in information_schema."""
        rows = self._fetch(
            "SELECT table_name, column_name, data_type, numeric_precision, numeric_scale "
            "FROM information_schema.columns WHERE table_schema = current_schema() "
            "ORDER BY table_name, ordinal_position")
        out: dict[str, dict[str, str]] = {}
        for table, column, dtype, precision, scale in rows:
            if tables is not None and table.lower() not in tables:
                continue
            name = _TYPES.get(dtype, dtype.upper())
            if dtype == "numeric":
                name = f"DECIMAL({precision},{scale})" if precision is not None else "DOUBLE"
            out.setdefault(table.lower(), {})[column.lower()] = name
        return out

    def _fetch(self, sql: str, parameters: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        psycopg = _psycopg()
        try:
            rows: list[tuple[Any, ...]] = self.session().execute(
                sql, list(parameters) or None).fetchall()
            return rows
        except psycopg.Error as e:
            raise EngineError(f"cannot read the schema of {self.location}: {e}") from None

    # --- queries ----------------------------------------------------------------------------

    def compile(self, tree: exp.Expression, salted: bool,
                empty_tables: Sequence[tuple[str, exp.Select]]) -> str:
        """PostgreSQL's SQL for the rewritten ``tree``, run once with every table it reads
        (joined ones too) replaced by its empty table of ``empty_tables`` (the physical types,
        the declared ones where unknown) so that a type error is a refusal, before any charge
        (see :func:`dpsql.routes.pipeline.check_engine_query` for DuckDB)."""
        sql = tree.sql(dialect=PostgresDialect)
        assert isinstance(tree, exp.Query)  # the rewrite builds one SELECT
        dry = with_empty(tree, empty_tables).sql(dialect=PostgresDialect)
        psycopg = _psycopg()
        try:
            self.session().execute(dry, [0] if salted else None).fetchall()
        except psycopg.Error as e:
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise UnsupportedQuery(f"PostgreSQL cannot run this query: {message}; check the "
                                   "types of the expressions it computes") from None
        return sql

    def read_public(self, table: str, columns: Mapping[str, str]
                    ) -> list[tuple[object, ...]]:
        """Every row of a public table, as the declared types (:meth:`dpsql.engines.Engine.
        read_public`), in PostgreSQL's SQL: the same total casts as the private queries'."""
        select = public_select(table, columns, self.schema.get(table.lower(), {}))
        return self.execute(select.sql(dialect=PostgresDialect))[1]

    def execute(self, sql: str, parameters: Sequence[object] = ()
                ) -> tuple[list[str], list[tuple[object, ...]]]:
        """Run one checked, rewritten query and return its column names and rows (NUMERIC
        sums as Python ints when whole, floats otherwise)."""
        psycopg = _psycopg()
        token: PgCancel | None = getattr(self._local, "token", None)
        self._local.token = None
        try:
            cur = self.session().execute(sql, list(parameters) or None)
            names = [d.name for d in cur.description or []]
            return names, [tuple(_value(v) for v in row) for row in cur.fetchall()]
        except psycopg.Error as e:
            state = e.sqlstate or ""
            interrupted = isinstance(e, psycopg.errors.QueryCanceled)
            if interrupted or state.startswith(_BEFORE_ROWS):
                raise EngineError(f"the engine failed on the rewritten query: {e}",
                                  owner_detail=str(e), interrupted=interrupted) from None
            raise EngineError("the engine failed on the rewritten query (a dpsql bug: the "
                              "data owner's log has the details)", owner_detail=str(e)) from None
        finally:
            if token is not None:
                with token.lock:  # no repeated cancel request can follow
                    token.finished.set()

    def execute_arrays(self, sql: str, parameters: Sequence[object] = ()
                       ) -> dict[str, npt.NDArray[Any]]:
        """:meth:`execute`, one array per column (:meth:`dpsql.engines.Engine.execute_arrays`)."""
        return column_arrays(*self.execute(sql, parameters))

    def fixed(self, table: str) -> bool:
        """Never: other sessions may change the data at any time (:meth:`dpsql.engines.
        Engine.fixed`)."""
        return False


def _value(value: object) -> object:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _redacted(url: str) -> str:
    """The URL without its password (it names the database in messages and answer keys)."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at:
        return url
    user = credentials.split(":", 1)[0]
    return f"{scheme}{sep}{user}@{host}"
