"""The PostgreSQL frontend/backend protocol, version 3.0: framing, decoding and encoding.

Pure functions and small classes over ``bytes``; no I/O. The asyncio side lives in
:mod:`dpsql.server.session`. Every decoder checks lengths and raises :class:`ProtocolViolation`
(SQLSTATE 08P01) on malformed input, so a bad message can only ever close its own connection.

Reference: https://www.postgresql.org/docs/16/protocol-message-formats.html
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

PROTOCOL_3_0 = 196608  # 3 << 16
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102

MAX_STARTUP_LENGTH = 10_000  # as PostgreSQL's MAX_STARTUP_PACKET_LENGTH
# A SASL message before login: a SCRAM one is ~100 bytes; a larger one is refused from its
# header, before its body is read (PostgreSQL refuses long ones at once too).
MAX_AUTH_MESSAGE = 4096
DEFAULT_MAX_MESSAGE = 1 << 20  # 1 MiB: ten times dpsql's longest accepted SQL text

_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_HEADER = struct.Struct("!ci")


class ProtocolViolation(Exception):
    """Malformed, truncated or oversized input: the connection is closed with SQLSTATE 08P01
    (54000 for an oversized message)."""

    def __init__(self, message: str, sqlstate: str = "08P01") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class Reader:
    """Reads the fields of one message body; every read checks the remaining length."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolViolation("message is shorter than its contents claim")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def uint32(self) -> int:
        value: int = _U32.unpack(self._take(4))[0]
        return value

    def byte(self) -> bytes:
        return self._take(1)

    def cstring(self) -> str:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise ProtocolViolation("a string in the message is not NUL-terminated")
        raw = self.data[self.pos:end]
        self.pos = end + 1
        return decode(raw)

    def raw(self, n: int) -> bytes:
        return self._take(n)

    def rest(self) -> bytes:
        chunk = self.data[self.pos:]
        self.pos = len(self.data)
        return chunk

    def count(self, what: str, size: int) -> int:
        """An int16 element count, checked against what the message can still hold."""
        n = self.int16()
        if n < 0 or n * size > len(self.data) - self.pos:
            raise ProtocolViolation(f"invalid number of {what}: {n}")
        return n

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ProtocolViolation("message has trailing bytes")


def decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolViolation("invalid byte sequence for encoding \"UTF8\"",
                                "22021") from None


# -- frontend messages ----------------------------------------------------------------------


@dataclass
class Startup:
    major: int
    minor: int
    parameters: dict[str, str]


def parse_startup(code: int, body: Reader) -> Startup:
    """A StartupMessage body after its version code: name/value pairs ending with NUL."""
    params: dict[str, str] = {}
    while True:
        name = body.cstring()
        if not name:
            break
        if name in params:
            raise ProtocolViolation(f"startup parameter {name!r} given twice")
        params[name] = body.cstring()
    body.end()
    return Startup(code >> 16, code & 0xFFFF, params)


@dataclass
class Parse:
    name: str
    query: str
    param_types: list[int]


@dataclass
class Bind:
    portal: str
    statement: str
    param_formats: list[int]
    params: list[bytes | None]
    result_formats: list[int]


@dataclass
class Describe:
    kind: str  # "S" statement or "P" portal
    name: str


@dataclass
class Execute:
    portal: str
    max_rows: int


@dataclass
class Close:
    kind: str
    name: str


def parse_parse(body: Reader) -> Parse:
    name, query = body.cstring(), body.cstring()
    n = body.count("parameter types", 4)
    types = [body.uint32() for _ in range(n)]
    body.end()
    return Parse(name, query, types)


def parse_bind(body: Reader) -> Bind:
    portal, statement = body.cstring(), body.cstring()
    formats = [body.int16() for _ in range(body.count("parameter formats", 2))]
    params: list[bytes | None] = []
    for _ in range(body.count("parameters", 4)):
        n = body.int32()
        if n < -1:
            raise ProtocolViolation(f"invalid parameter length {n}")
        params.append(None if n == -1 else body.raw(n))
    results = [body.int16() for _ in range(body.count("result formats", 2))]
    body.end()
    for f in (*formats, *results):
        if f not in (0, 1):
            raise ProtocolViolation(f"unsupported format code: {f}", "22P02")
    if len(formats) not in (0, 1, len(params)):
        raise ProtocolViolation(f"bind message has {len(formats)} parameter formats but "
                                f"{len(params)} parameters")
    return Bind(portal, statement, formats, params, results)


def parse_describe(body: Reader) -> Describe:
    kind = body.byte().decode("latin-1")
    name = body.cstring()
    body.end()
    if kind not in ("S", "P"):
        raise ProtocolViolation(f"invalid DESCRIBE message subtype {kind!r}")
    return Describe(kind, name)


def parse_close(body: Reader) -> Close:
    kind = body.byte().decode("latin-1")
    name = body.cstring()
    body.end()
    if kind not in ("S", "P"):
        raise ProtocolViolation(f"invalid CLOSE message subtype {kind!r}")
    return Close(kind, name)


def parse_execute(body: Reader) -> Execute:
    portal = body.cstring()
    max_rows = body.int32()
    body.end()
    return Execute(portal, max_rows)


def parse_query(body: Reader) -> str:
    query = body.cstring()
    body.end()
    return query


@dataclass
class SASLInitial:
    mechanism: str
    data: bytes


def parse_sasl_initial(body: Reader) -> SASLInitial:
    mechanism = body.cstring()
    n = body.int32()
    data = b"" if n == -1 else body.raw(n)
    body.end()
    return SASLInitial(mechanism, data)


# -- backend messages -----------------------------------------------------------------------


def message(kind: bytes, payload: bytes = b"") -> bytes:
    return _HEADER.pack(kind, len(payload) + 4) + payload


def cstr(text: str) -> bytes:
    return text.encode("utf-8").replace(b"\0", b"") + b"\0"


def authentication(code: int, payload: bytes = b"") -> bytes:
    return message(b"R", _I32.pack(code) + payload)


AUTH_OK = authentication(0)


def auth_sasl(mechanisms: Iterable[str]) -> bytes:
    return authentication(10, b"".join(cstr(m) for m in mechanisms) + b"\0")


def auth_sasl_continue(data: bytes) -> bytes:
    return authentication(11, data)


def auth_sasl_final(data: bytes) -> bytes:
    return authentication(12, data)


def parameter_status(name: str, value: str) -> bytes:
    return message(b"S", cstr(name) + cstr(value))


def backend_key_data(pid: int, secret: int) -> bytes:
    return message(b"K", _I32.pack(pid) + _I32.pack(secret))


def ready_for_query(status: str) -> bytes:
    return message(b"Z", status.encode("ascii"))


def negotiate_protocol_version(minor: int, unrecognized: Sequence[str]) -> bytes:
    return message(b"v", _I32.pack(minor) + _I32.pack(len(unrecognized))
                   + b"".join(cstr(o) for o in unrecognized))


@dataclass
class Field:
    """One column of a RowDescription."""

    name: str
    type_oid: int
    type_size: int = -1
    type_modifier: int = -1
    format: int = 0
    table_oid: int = 0
    column: int = 0


def row_description(fields: Sequence[Field]) -> bytes:
    parts = [_I16.pack(len(fields))]
    for f in fields:
        parts.append(cstr(f.name))
        parts.append(struct.pack("!ihihih", f.table_oid, f.column, f.type_oid, f.type_size,
                                 f.type_modifier, f.format))
    return message(b"T", b"".join(parts))


def data_row(values: Sequence[bytes | None]) -> bytes:
    parts = [_I16.pack(len(values))]
    for v in values:
        if v is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_I32.pack(len(v)))
            parts.append(v)
    return message(b"D", b"".join(parts))


def parameter_description(oids: Sequence[int]) -> bytes:
    return message(b"t", _I16.pack(len(oids)) + b"".join(_U32.pack(o) for o in oids))


def command_complete(tag: str) -> bytes:
    return message(b"C", cstr(tag))


EMPTY_QUERY = message(b"I")
PARSE_COMPLETE = message(b"1")
BIND_COMPLETE = message(b"2")
CLOSE_COMPLETE = message(b"3")
NO_DATA = message(b"n")
PORTAL_SUSPENDED = message(b"s")


@dataclass
class Notice:
    """The fields of an ErrorResponse or NoticeResponse."""

    severity: str  # ERROR, FATAL, WARNING, NOTICE
    sqlstate: str
    message: str
    detail: str | None = None
    hint: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    position: int | None = None  # P: 1-based character offset into the Query's text

    def encode(self, kind: bytes = b"E") -> bytes:
        fields = [(b"S", self.severity), (b"V", self.severity), (b"C", self.sqlstate),
                  (b"M", self.message)]
        if self.detail:
            fields.append((b"D", self.detail))
        if self.hint:
            fields.append((b"H", self.hint))
        if self.position is not None:
            fields.append((b"P", str(self.position)))
        fields.extend((k.encode("ascii"), v) for k, v in self.extra.items())
        return message(kind, b"".join(k + cstr(v) for k, v in fields) + b"\0")


def error_response(severity: str, sqlstate: str, text: str, detail: str | None = None,
                   hint: str | None = None) -> bytes:
    return Notice(severity, sqlstate, text, detail, hint).encode(b"E")


def notice_response(sqlstate: str, text: str, severity: str = "WARNING") -> bytes:
    return Notice(severity, sqlstate, text).encode(b"N")
