"""What the protocol state machine works with: errors for the client, prepared statements and
portals, a statement's outcome, and the result columns (names, types and formats) it sends."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dpsql import errors
from dpsql.server.machine import settings as st
from dpsql.server.machine.classify import Statement
from dpsql.server.wire import protocol as p
from dpsql.server.wire import types as t

owner_log = logging.getLogger("dpsql.owner")


#: The start of a cancelled statement's message (PostgreSQL's words), what it cost after it.
CANCELLED = "canceling statement due to user request"


class PgError(Exception):
    """An error to send to the client as an ErrorResponse."""

    def __init__(self, sqlstate: str, message: str, severity: str = "ERROR",
                 detail: str | None = None, hint: str | None = None,
                 position: int | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.severity = severity
        self.detail = detail
        self.hint = hint
        self.position = position  # 1-based, in the statement's text (the P field)


class Terminate(Exception):
    """The client said goodbye, or the connection must end."""


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


def no_cursor(name: str) -> PgError:
    return PgError("34000", f'cursor "{name}" does not exist')


def aborted() -> PgError:
    return PgError("25P02", "current transaction is aborted, commands ignored until end of "
                            "transaction block")


#: What an analyst is told of an error on the owner's side (an engine that cannot be reached,
#: metadata or a ledger that cannot be read): its text names files, hosts and settings, which
#: are the owner's business, so it goes to the owner's log instead.
OWNER_SIDE = ("the server cannot answer now because of a problem on the data owner's side "
              "(the details are in the server's log); try again later, or tell the data owner")


def analyst_text(e: errors.Error) -> str:
    """The message an analyst sees for ``e``: its own, unless it is about the owner's setup
    (an engine, metadata or ledger failure, :data:`OWNER_SIDE`). Fixed texts (a bug, a
    timeout) and refusals, which are about the query, are kept."""
    if isinstance(e, errors.EngineFailure) or not (
            isinstance(e, errors.EngineError | errors.MetadataError)
            or type(e) is errors.OperationalError):
        return str(e) or type(e).__name__
    owner_log.error("%s (shown to the analyst as a problem on the owner's side): %s",
                    type(e).__name__, e)
    return OWNER_SIDE


def from_dpsql(e: errors.Error, statement: Statement | None = None) -> PgError:
    sqlstate = getattr(e, "sqlstate", "XX000") or "XX000"
    said = [f"SET dpsql.{r.parameter} = {r.example:g}" if r.example is not None else
            f"a smaller SET dpsql.{r.parameter} may fit" for r in e.remedies]
    if isinstance(e, errors.BudgetExhausted):
        said.insert(0, "SHOW dpsql.budget tells what is left")
    hint = "; ".join(said) or None
    return PgError(sqlstate, analyst_text(e), hint=hint,
                   detail=f"dpsql {type(e).__name__}", position=_position(e, statement))


def _position(e: errors.Error, statement: Statement | None) -> int | None:
    """A syntax error's position in ``statement``'s text (PostgreSQL's P field): the library's
    is in the text it was handed (``engine_sql``), which is the statement's text or a piece of
    it (EXPLAIN's query); where the server rewrote the text, there is no position to give."""
    position = getattr(e, "position", None)
    if not isinstance(e, errors.SQLSyntaxError) or position is None or statement is None:
        return None
    start = statement.text.find(statement.engine_sql) if statement.engine_sql else -1
    return None if start < 0 else start + position


def field_of(name: str, duck_type: str) -> p.Field:
    oid, modifier = t.pg_type_of(duck_type)
    return p.Field(name, oid, t.type_size(oid), modifier)


def fields_of(columns: Sequence[tuple[str, str]], names: list[str] | None) -> list[p.Field]:
    if names is not None and len(names) == len(columns):
        columns = [(n, ty) for n, (_, ty) in zip(names, columns, strict=True)]
    return [field_of(name, ty) for name, ty in columns]


def copy_fields(fields: list[p.Field] | None) -> list[p.Field] | None:
    if fields is None:
        return None
    return [p.Field(f.name, f.type_oid, f.type_size, f.type_modifier, f.format, f.table_oid,
                    f.column) for f in fields]


def with_formats(fields: list[p.Field] | None, formats: list[int]) -> list[p.Field] | None:
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


def encoder(f: p.Field) -> Callable[[object], bytes | None]:
    return t.encoder(f.type_oid, f.format)


def show_column(target: str) -> str:
    return st.display_name(target.lower()) if target.lower() in st.CANONICAL else target

