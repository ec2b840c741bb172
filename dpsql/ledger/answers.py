"""The stored-answer codec: a noisy result as JSON in the ledger, and back.

An answer is stored with its charge so that asking the same query again returns it at no new
cost (:mod:`dpsql.database`); a charged query on which the engine failed stores
:data:`ENGINE_FAILURE_ANSWER` instead, so that asking again returns the same failure.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import uuid
from typing import Any

from dpsql.errors import (
    OperationalError,
)
from dpsql.execution.result import Result, ResultColumn

#: The stored answer of a charged query on which the engine failed (see Database.run).
ENGINE_FAILURE_ANSWER = b'{"format":1,"failure":"engine"}'

_ANSWER_FORMAT = 1


def encode_result(result: Result) -> bytes:
    """Serialize a result to JSON that :func:`decode_result` turns back into an equal Result
    (values keep their Python types: int, float, Decimal, date, ...)."""
    document = {
        "format": _ANSWER_FORMAT,
        "columns": [[c.name, c.type, c.accuracy_unit] for c in result.columns],
        "rows": [[_encode(v) for v in row] for row in result.rows],
        "accuracy": [[_encode(a) for a in acc] for acc in result.accuracy],
        "epsilon": _encode(result.epsilon),
        "delta": _encode(result.delta),
        "notes": list(result.notes),
        "chosen_rows": result.chosen_rows,  # an automatic k, released with the answer
        "chosen_bounds": result.chosen_bounds,  # automatic value bounds, likewise
        "local_label": result.local_label,  # randomized rows stay labelled when reused
    }
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode()


def decode_result(data: bytes) -> Result:
    document = json.loads(data)
    if document.get("format") != _ANSWER_FORMAT:
        raise OperationalError(f"stored answer has format {document.get('format')!r}; this "
                               f"dpsql reads format {_ANSWER_FORMAT}")
    return Result(
        columns=[ResultColumn(name, ctype, unit) for name, ctype, unit in document["columns"]],
        rows=[tuple(_decode(v) for v in row) for row in document["rows"]],
        accuracy=[tuple(_decode(a) for a in acc) for acc in document["accuracy"]],
        epsilon=_decode(document["epsilon"]),
        delta=_decode(document["delta"]),
        notes=list(document["notes"]),
        chosen_rows=document.get("chosen_rows"),  # absent from answers stored before it
        chosen_bounds=None if document.get("chosen_bounds") is None else {
            column: (lo, hi) for column, (lo, hi) in document["chosen_bounds"].items()},
        local_label=document.get("local_label"),
    )


def _encode(value: Any) -> Any:
    """JSON primitives as they are; everything else as a tagged object {"t": type, "v": ...}."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"t": "float", "v": repr(value)}
    if isinstance(value, decimal.Decimal):
        return {"t": "decimal", "v": str(value)}
    if isinstance(value, dt.datetime):
        return {"t": "datetime", "v": value.isoformat()}
    if isinstance(value, dt.date):
        return {"t": "date", "v": value.isoformat()}
    if isinstance(value, dt.time):
        return {"t": "time", "v": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"t": "timedelta", "v": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, uuid.UUID):
        return {"t": "uuid", "v": str(value)}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"t": "bytes", "v": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, list | tuple):
        return {"t": type(value).__name__, "v": [_encode(v) for v in value]}
    if isinstance(value, dict):
        return {"t": "dict", "v": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if hasattr(value, "item"):  # a numpy scalar
        return _encode(value.item())
    raise TypeError(f"cannot store a value of type {type(value).__name__}")


def _decode(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    kind, data = value["t"], value["v"]
    decoders: dict[str, Any] = {
        "float": float,
        "decimal": decimal.Decimal,
        "datetime": dt.datetime.fromisoformat,
        "date": dt.date.fromisoformat,
        "time": dt.time.fromisoformat,
        "timedelta": lambda v: dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
        "uuid": uuid.UUID,
        "bytes": base64.b64decode,
        "list": lambda v: [_decode(x) for x in v],
        "tuple": lambda v: tuple(_decode(x) for x in v),
        "dict": lambda v: {_decode(k): _decode(x) for k, x in v},
    }
    return decoders[kind](data)


