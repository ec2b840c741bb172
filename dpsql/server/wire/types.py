"""PostgreSQL types on the wire: OIDs, DuckDB type names -> PostgreSQL types, text and binary
encodings of result values, decoding of Bind parameters, and parameters as SQL literals.

Text formats follow PostgreSQL's output functions with DateStyle ISO and
``extra_float_digits = 1`` (shortest round-trip floats). Binary formats are the ``send``/
``recv`` functions of PostgreSQL: big-endian integers and IEEE floats, ``date`` as days and
``timestamp`` as microseconds since 2000-01-01, ``numeric`` as base-10000 digits.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

BOOL, BYTEA, CHAR, NAME, INT8, INT2, INT2VECTOR, INT4, REGPROC, TEXT, OID = (
    16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26)
OIDVECTOR, JSON, FLOAT4, FLOAT8, UNKNOWN, BPCHAR, VARCHAR = 30, 114, 700, 701, 705, 1042, 1043
DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, NUMERIC = 1082, 1083, 1114, 1184, 1186, 1700
REGCLASS, REGTYPE, UUID, JSONB, REGNAMESPACE = 2205, 2206, 2950, 3802, 4089


@dataclass(frozen=True)
class PgType:
    oid: int
    name: str  # pg_type.typname
    sql_name: str  # format_type()
    length: int  # typlen
    category: str  # typcategory
    array_oid: int = 0


TYPES: dict[int, PgType] = {t.oid: t for t in [
    PgType(BOOL, "bool", "boolean", 1, "B", 1000),
    PgType(BYTEA, "bytea", "bytea", -1, "U", 1001),
    PgType(CHAR, "char", '"char"', 1, "Z", 1002),
    PgType(NAME, "name", "name", 64, "S", 1003),
    PgType(INT8, "int8", "bigint", 8, "N", 1016),
    PgType(INT2, "int2", "smallint", 2, "N", 1005),
    PgType(INT2VECTOR, "int2vector", "int2vector", -1, "A", 1006),
    PgType(INT4, "int4", "integer", 4, "N", 1007),
    PgType(REGPROC, "regproc", "regproc", 4, "N", 1008),
    PgType(TEXT, "text", "text", -1, "S", 1009),
    PgType(OID, "oid", "oid", 4, "N", 1028),
    PgType(OIDVECTOR, "oidvector", "oidvector", -1, "A", 1013),
    PgType(JSON, "json", "json", -1, "U", 199),
    PgType(FLOAT4, "float4", "real", 4, "N", 1021),
    PgType(FLOAT8, "float8", "double precision", 8, "N", 1022),
    PgType(UNKNOWN, "unknown", "unknown", -2, "X", 0),
    PgType(BPCHAR, "bpchar", "character", -1, "S", 1014),
    PgType(VARCHAR, "varchar", "character varying", -1, "S", 1015),
    PgType(DATE, "date", "date", 4, "D", 1182),
    PgType(TIME, "time", "time without time zone", 8, "D", 1183),
    PgType(TIMESTAMP, "timestamp", "timestamp without time zone", 8, "D", 1115),
    PgType(TIMESTAMPTZ, "timestamptz", "timestamp with time zone", 8, "D", 1185),
    PgType(INTERVAL, "interval", "interval", 16, "T", 1187),
    PgType(NUMERIC, "numeric", "numeric", -1, "N", 1231),
    PgType(REGCLASS, "regclass", "regclass", 4, "N", 2210),
    PgType(REGTYPE, "regtype", "regtype", 4, "N", 2211),
    PgType(UUID, "uuid", "uuid", 16, "U", 2951),
    PgType(JSONB, "jsonb", "jsonb", -1, "U", 3807),
    PgType(REGNAMESPACE, "regnamespace", "regnamespace", 4, "N", 4090),
]}
ARRAY_ELEMENT = {t.array_oid: t.oid for t in TYPES.values() if t.array_oid}

# The declared metadata types (dpsql.metadata.metadata.COLUMN_TYPES) as PostgreSQL types.
DECLARED = {"int": INT8, "float": FLOAT8, "text": TEXT, "bool": BOOL, "date": DATE,
            "timestamp": TIMESTAMP}

_DUCKDB = {
    "BOOLEAN": BOOL, "TINYINT": INT2, "SMALLINT": INT2, "INTEGER": INT4, "BIGINT": INT8,
    "UTINYINT": INT2, "USMALLINT": INT4, "UINTEGER": INT8, "UBIGINT": NUMERIC,
    "HUGEINT": NUMERIC, "UHUGEINT": NUMERIC, "FLOAT": FLOAT4, "DOUBLE": FLOAT8,
    "VARCHAR": TEXT, "DATE": DATE, "TIME": TIME, "TIMESTAMP": TIMESTAMP,
    "TIMESTAMP_S": TIMESTAMP, "TIMESTAMP_MS": TIMESTAMP, "TIMESTAMP_NS": TIMESTAMP,
    "TIMESTAMP WITH TIME ZONE": TIMESTAMPTZ, "INTERVAL": INTERVAL, "BLOB": BYTEA,
    "UUID": UUID, "JSON": JSON,
}


def pg_type_of(duckdb_type: str) -> tuple[int, int]:
    """(type OID, type modifier) of a DuckDB type name; anything unusual is sent as text."""
    name = duckdb_type.upper().strip()
    if name in _DUCKDB:
        return _DUCKDB[name], -1
    m = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", name)
    if m:
        return NUMERIC, ((int(m.group(1)) << 16) | int(m.group(2))) + 4
    if name.endswith("[]"):
        element, _ = pg_type_of(name[:-2])
        return TYPES[element].array_oid if element in TYPES else 1009, -1
    return TEXT, -1


def type_size(oid: int) -> int:
    t = TYPES.get(oid)
    return t.length if t is not None and t.length > 0 else -1


class EncodeError(Exception):
    """A value that cannot be sent as the described type."""


# -- text encodings --------------------------------------------------------------------------


def _float_text(value: object) -> str:
    f = float(value)  # type: ignore[arg-type]
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    text = repr(f)
    if text.endswith(".0"):
        text = text[:-2]
    return text


def _float4_text(value: object) -> str:
    f = float(value)  # type: ignore[arg-type]
    if not math.isfinite(f) or abs(f) > 3.4e38:
        return _float_text(f)
    text = str(np.float32(f))
    return text[:-2] if text.endswith(".0") else text


def _int_text(value: object) -> str:
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise EncodeError(f"{value!r} is not an integer")
    return str(int(value))  # type: ignore[call-overload]


def _bool_text(value: object) -> str:
    return "t" if value else "f"


def _numeric_text(value: object) -> str:
    if isinstance(value, float):
        return _float_text(value)
    return str(value)


def _date_text(value: object) -> str:
    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _timestamp_text(value: object) -> str:
    if isinstance(value, dt.datetime):
        text = value.replace(tzinfo=None).isoformat(sep=" ")
        if value.microsecond:
            text = text.rstrip("0")
        if value.tzinfo is not None:
            offset = value.utcoffset() or dt.timedelta()
            hours, rest = divmod(int(offset.total_seconds()), 3600)
            text += f"{hours:+03d}" + (f":{rest // 60:02d}" if rest else "")
        return text
    if isinstance(value, dt.date):
        return value.isoformat() + " 00:00:00"
    return str(value)


def _bytea_text(value: object) -> str:
    data: bytes = bytes(value)  # type: ignore[call-overload]
    return "\\x" + data.hex()


def _array_text(value: object) -> str:
    if not isinstance(value, list | tuple):
        return str(value)
    items = []
    for v in value:
        if v is None:
            items.append("NULL")
            continue
        text = text_of(v)
        if text == "" or re.search(r'[{},"\\\s]', text) or text.upper() == "NULL":
            text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        items.append(text)
    return "{" + ",".join(items) + "}"


def text_of(value: object) -> str:
    """PostgreSQL text form of a Python value of no particular described type."""
    if isinstance(value, bool | np.bool_):
        return _bool_text(value)
    if isinstance(value, float | np.floating):
        return _float_text(value)
    if isinstance(value, dt.datetime):
        return _timestamp_text(value)
    if isinstance(value, dt.date):
        return _date_text(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return _bytea_text(value)
    if isinstance(value, list | tuple):
        return _array_text(value)
    return str(value)


_TEXT: dict[int, Callable[[object], str]] = {
    BOOL: _bool_text, INT2: _int_text, INT4: _int_text, INT8: _int_text, OID: _int_text,
    FLOAT4: _float4_text, FLOAT8: _float_text, NUMERIC: _numeric_text, DATE: _date_text,
    TIMESTAMP: _timestamp_text, TIMESTAMPTZ: _timestamp_text, BYTEA: _bytea_text,
}


# -- binary encodings ------------------------------------------------------------------------

_EPOCH_DATE = dt.date(2000, 1, 1)
_EPOCH = dt.datetime(2000, 1, 1)
_EPOCH_TZ = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


def _int_binary(fmt: str) -> Callable[[object], bytes]:
    packer = struct.Struct(fmt)

    def encode(value: object) -> bytes:
        try:
            return packer.pack(int(_int_text(value)))
        except struct.error:
            raise EncodeError(f"{value!r} is out of range") from None

    return encode


def _float_binary(fmt: str) -> Callable[[object], bytes]:
    packer = struct.Struct(fmt)
    return lambda value: packer.pack(float(value))  # type: ignore[arg-type]


def _date_binary(value: object) -> bytes:
    if isinstance(value, dt.datetime):
        value = value.date()
    if not isinstance(value, dt.date):
        raise EncodeError(f"{value!r} is not a date")
    return struct.pack("!i", (value - _EPOCH_DATE).days)


def _timestamp_binary(value: object) -> bytes:
    if isinstance(value, dt.datetime):
        delta = value - (_EPOCH_TZ if value.tzinfo is not None else _EPOCH)
    elif isinstance(value, dt.date):
        delta = dt.datetime.combine(value, dt.time()) - _EPOCH
    else:
        raise EncodeError(f"{value!r} is not a timestamp")
    micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    return struct.pack("!q", micros)


def _numeric_binary(value: object) -> bytes:
    d = value if isinstance(value, decimal.Decimal) else decimal.Decimal(
        repr(value) if isinstance(value, float) else str(value))
    if d.is_nan():
        return struct.pack("!hhHH", 0, 0, 0xC000, 0)
    if d.is_infinite():
        return struct.pack("!hhHH", 0, 0, 0xD000 if d > 0 else 0xF000, 0)
    sign, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    dscale = max(0, -exponent)
    # Pad the integer digits to a multiple of 4 on the left, the fraction on the right.
    text = "".join(map(str, digits)) or "0"
    int_len = len(text) + exponent  # digits before the decimal point (may be <= 0)
    if int_len <= 0:
        int_part, frac_part = "", "0" * -int_len + text
    elif exponent >= 0:
        int_part, frac_part = text + "0" * exponent, ""
    else:
        int_part, frac_part = text[:int_len], text[int_len:]
    int_part = int_part.lstrip("0")
    int_part = "0" * (-len(int_part) % 4) + int_part
    frac_part = frac_part + "0" * (-len(frac_part) % 4)
    groups = [int(int_part[i:i + 4]) for i in range(0, len(int_part), 4)]
    weight = len(groups) - 1
    groups += [int(frac_part[i:i + 4]) for i in range(0, len(frac_part), 4)]
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    header = struct.pack("!hhHH", len(groups), weight, 0x4000 if sign else 0, dscale)
    return header + b"".join(struct.pack("!H", g) for g in groups)


def _text_binary(value: object) -> bytes:
    return (value if isinstance(value, str) else text_of(value)).encode("utf-8")


_BINARY: dict[int, Callable[[object], bytes]] = {
    BOOL: lambda v: b"\x01" if v else b"\x00",
    INT2: _int_binary("!h"), INT4: _int_binary("!i"), INT8: _int_binary("!q"),
    OID: _int_binary("!I"), FLOAT4: _float_binary("!f"), FLOAT8: _float_binary("!d"),
    NUMERIC: _numeric_binary, DATE: _date_binary, TIMESTAMP: _timestamp_binary,
    TIMESTAMPTZ: _timestamp_binary, TEXT: _text_binary, VARCHAR: _text_binary,
    NAME: _text_binary, BPCHAR: _text_binary, CHAR: _text_binary, JSON: _text_binary,
    BYTEA: lambda v: bytes(v),  # type: ignore[call-overload]
    UUID: lambda v: uuid.UUID(str(v)).bytes,
}


def can_send_binary(oid: int) -> bool:
    return oid in _BINARY


def encoder(oid: int, fmt: int) -> Callable[[object], bytes | None]:
    """The function that turns a result value into its wire bytes (None for NULL)."""
    if fmt == 1:
        binary = _BINARY.get(oid)
        if binary is None:
            raise EncodeError(f"binary output of type {TYPES[oid].name if oid in TYPES else oid} "
                              "is not supported; ask for text format")

        def encode_binary(value: object) -> bytes | None:
            if value is None:
                return None
            try:
                return binary(value)
            except (TypeError, ValueError, decimal.InvalidOperation) as e:
                raise EncodeError(f"cannot send {value!r} as {TYPES[oid].name}: {e}") from None

        return encode_binary
    text = _TEXT.get(oid, text_of)

    def encode_text(value: object) -> bytes | None:
        if value is None:
            return None
        try:
            return text(value).encode("utf-8")
        except (TypeError, ValueError, decimal.InvalidOperation) as e:
            raise EncodeError(f"cannot send {value!r} as type {oid}: {e}") from None

    return encode_text


# -- parameters ------------------------------------------------------------------------------

_TRUE = {"t", "true", "y", "yes", "on", "1"}
_FALSE = {"f", "false", "n", "no", "off", "0"}


class ParameterError(ValueError):
    """A Bind parameter that does not decode as its type (SQLSTATE 22P02)."""


def decode_parameter(raw: bytes, oid: int, fmt: int) -> object:
    """A Bind parameter value as a Python object; text of unknown type stays a str."""
    try:
        return _decode_binary(raw, oid) if fmt == 1 else _decode_text(raw.decode("utf-8"), oid)
    except (ValueError, struct.error, decimal.InvalidOperation, UnicodeDecodeError) as e:
        name = TYPES[oid].sql_name if oid in TYPES else f"type {oid}"
        raise ParameterError(f"invalid input for a parameter of type {name}: {e}") from None


def _decode_text(text: str, oid: int) -> object:
    if oid in (INT2, INT4, INT8, OID):
        return int(text.strip())
    if oid in (FLOAT4, FLOAT8):
        return float(text)
    if oid == NUMERIC:
        return decimal.Decimal(text.strip())
    if oid == BOOL:
        low = text.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ValueError(f"{text!r} is not a boolean")
    if oid == DATE:
        return _date_from_text(text)
    if oid in (TIMESTAMP, TIMESTAMPTZ):
        return _timestamp_from_text(text, oid)
    if oid == BYTEA:
        if text.startswith("\\x"):
            return bytes.fromhex(text[2:])
        return text.encode("utf-8")
    return text


# An ISO date, an optional time and an optional zone, as PostgreSQL's date_in and
# timestamp[tz]_in read them: pgjdbc's setDate sends "2025-06-01 +00", setTimestamp
# "2025-06-01 00:00:00+00", a JavaScript Date "2025-06-01T00:00:00.000Z".
_DATETIME = re.compile(
    r"\s*(?P<date>\d{4}-\d{1,2}-\d{1,2})"
    r"(?:(?:T|\s+)(?P<time>\d{1,2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?))?"
    r"\s*(?P<zone>Z|UTC|GMT|[+-]\d{1,2}(?::?\d{2}(?::?\d{2})?)?)?\s*", re.I)


def _date_parts(text: str) -> re.Match[str]:
    m = _DATETIME.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not an ISO date or timestamp (YYYY-MM-DD[ HH:MM:SS][+ZZ])")
    return m


def _date_from_text(text: str) -> dt.date:
    """As PostgreSQL's date_in: a time and a zone after the date are read and ignored."""
    year, month, day = (int(x) for x in _date_parts(text).group("date").split("-"))
    return dt.date(year, month, day)


def _timestamp_from_text(text: str, oid: int) -> dt.datetime:
    """As timestamp_in (the zone is ignored) and timestamptz_in (the zone is kept; none is
    UTC, the session's only time zone for values dpsql reads)."""
    m = _date_parts(text)
    year, month, day = (int(x) for x in m.group("date").split("-"))
    hms = (m.group("time") or "0:00").split(":")
    seconds = decimal.Decimal(hms[2]) if len(hms) > 2 else decimal.Decimal(0)
    micros = int((seconds % 1) * 1_000_000)
    value = dt.datetime(year, month, day, int(hms[0]), int(hms[1]), int(seconds), micros)
    if oid == TIMESTAMP:
        return value
    return value.replace(tzinfo=_zone(m.group("zone")))


def _zone(text: str | None) -> dt.tzinfo:
    if text is None or text.upper() in ("Z", "UTC", "GMT"):
        return dt.UTC
    digits = text[1:].replace(":", "")
    digits = digits.zfill(2) if len(digits) <= 2 else digits.zfill(4 if len(digits) <= 4 else 6)
    hours, minutes, seconds = int(digits[:2]), int(digits[2:4] or 0), int(digits[4:6] or 0)
    offset = dt.timedelta(hours=hours, minutes=minutes, seconds=seconds)
    return dt.timezone(-offset if text[0] == "-" else offset)


def as_date(value: object, name: str) -> object:
    """A timestamp parameter compared with a date column, as the date it equals.

    PostgreSQL compares such a pair as timestamps, the date at midnight (UTC, dpsql's only
    time zone); the date is the same comparison exactly when the timestamp is at midnight UTC
    (pgjdbc's setTimestamp, a JavaScript Date or a Go time.Time of a day). A time of day
    would need the comparison operator to round the right way, so it is refused."""
    if not isinstance(value, dt.datetime):
        return value
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    if value.time() != dt.time():
        raise ParameterError(f"parameter {name} is the timestamp {value.isoformat(sep=' ')} "
                             "(UTC), compared with a date column; send a date, or a "
                             "timestamp at midnight UTC")
    return value.date()


def _decode_binary(raw: bytes, oid: int) -> object:
    if oid == INT2:
        return struct.unpack("!h", raw)[0]
    if oid == INT4:
        return struct.unpack("!i", raw)[0]
    if oid == INT8:
        return struct.unpack("!q", raw)[0]
    if oid == OID:
        return struct.unpack("!I", raw)[0]
    if oid == FLOAT4:
        return float(struct.unpack("!f", raw)[0])
    if oid == FLOAT8:
        return struct.unpack("!d", raw)[0]
    if oid == BOOL:
        if len(raw) != 1:
            raise ValueError("a binary boolean is one byte")
        return raw != b"\x00"
    if oid == DATE:
        return _EPOCH_DATE + dt.timedelta(days=struct.unpack("!i", raw)[0])
    if oid == TIMESTAMP:
        return _EPOCH + dt.timedelta(microseconds=struct.unpack("!q", raw)[0])
    if oid == TIMESTAMPTZ:
        return _EPOCH_TZ + dt.timedelta(microseconds=struct.unpack("!q", raw)[0])
    if oid == NUMERIC:
        return _numeric_from_binary(raw)
    if oid == BYTEA:
        return bytes(raw)
    if oid in (TEXT, VARCHAR, NAME, BPCHAR, CHAR, UNKNOWN, JSON, 0):
        return raw.decode("utf-8")
    raise ValueError("binary input of this type is not supported; send it as text")


def _numeric_from_binary(raw: bytes) -> decimal.Decimal:
    ndigits, weight, sign, dscale = struct.unpack("!hhHH", raw[:8])
    if len(raw) != 8 + 2 * ndigits or ndigits < 0:
        raise ValueError("malformed binary numeric")
    if sign == 0xC000:
        return decimal.Decimal("NaN")
    if sign in (0xD000, 0xF000):
        return decimal.Decimal("Infinity" if sign == 0xD000 else "-Infinity")
    digits = struct.unpack(f"!{ndigits}H", raw[8:])
    value = decimal.Decimal(0)
    for i, d in enumerate(digits):
        if d > 9999:
            raise ValueError("malformed binary numeric digit")
        value += decimal.Decimal(d).scaleb(4 * (weight - i))
    value = value.quantize(decimal.Decimal(1).scaleb(-dscale)) if dscale < 1000 else value
    return -value if sign == 0x4000 else value


def literal(value: object) -> str:
    """A parameter value as a DuckDB/PostgreSQL SQL literal, parenthesised where needed."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value) if value >= 0 else f"({value})"
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"CAST('{_float_text(value)}' AS DOUBLE)"
        text = repr(value)
        return text if value >= 0 else f"({text})"
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return f"CAST('{value}' AS DOUBLE)"
        text = str(value)
        return text if value >= 0 else f"({text})"
    if isinstance(value, dt.datetime):
        kind = "TIMESTAMPTZ" if value.tzinfo is not None else "TIMESTAMP"
        return f"{kind} '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, bytes):
        return "'" + "".join(f"\\x{b:02x}" for b in value) + "'::BLOB"
    return string_literal(str(value))


def string_literal(text: str) -> str:
    if "\0" in text:
        raise ParameterError("a parameter holds a NUL character")
    return "'" + text.replace("'", "''") + "'"


def typed_literal(value: object, oid: int) -> str:
    """A literal for a parameter whose declared type is ``oid`` (0 or 705: unknown)."""
    if isinstance(value, str) and oid in (INT2, INT4, INT8, FLOAT4, FLOAT8, NUMERIC, BOOL,
                                          DATE, TIMESTAMP, TIMESTAMPTZ):
        value = _decode_text(value, oid)
    return literal(value)


def sql_type_name(oid: int) -> str:
    """The DuckDB type name to CAST a NULL parameter to."""
    return {BOOL: "BOOLEAN", INT2: "SMALLINT", INT4: "INTEGER", INT8: "BIGINT",
            FLOAT4: "FLOAT", FLOAT8: "DOUBLE", NUMERIC: "DOUBLE", DATE: "DATE",
            TIMESTAMP: "TIMESTAMP", TIMESTAMPTZ: "TIMESTAMPTZ", BYTEA: "BLOB"}.get(oid,
                                                                                "VARCHAR")
