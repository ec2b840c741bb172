"""Readers of the owner's TOML values (:mod:`dpsql.metadata.metadata`): each checks one setting's
type and range, and raises a :class:`~dpsql.errors.MetadataError` naming where it was declared."""

from __future__ import annotations

import datetime as dt
import difflib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpsql.errors import MetadataError


def flag(spec: Mapping[str, Any], key: str, where: str) -> bool:
    value = spec.get(key, False)
    if not isinstance(value, bool):
        raise MetadataError(f"{where}: {key} must be true or false, not {value!r}")
    return value


def positive_int(spec: Mapping[str, Any], key: str, where: str) -> int:
    value = spec.get(key, 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MetadataError(f"{where}: {key} must be a whole number >= 1, not {value!r}")
    return value


def no_unknown_keys(spec: Mapping[str, Any], allowed: set[str], where: str,
                     kind: str = "setting") -> None:
    """Refuse every key not in ``allowed``, suggesting the closest allowed spelling: an ignored
    key is a setting the owner believes in and dpsql does not apply (a misspelt [analysts]
    section would leave every query unmetered)."""
    unknown = sorted(set(spec) - allowed)
    if not unknown:
        return
    key = unknown[0]
    section = kind == "section" and isinstance(spec[key], dict)
    kind = "section" if section else "setting"
    shown = f"[{key}]" if section else repr(key)
    close = difflib.get_close_matches(str(key).lower(), sorted(allowed), n=1, cutoff=0.6)
    if close:
        intended = f"[{close[0]}]" if section else repr(close[0])
        hint = f"; did you mean {intended}?"
    else:
        hint = ""
    raise MetadataError(f"{where}: unknown {kind} {shown}{hint} (expected one of "
                        f"{', '.join(sorted(allowed))})")


def description_of(spec: Mapping[str, Any], where: str) -> str | None:
    value = spec.get("description")
    if value is not None and not isinstance(value, str):
        raise MetadataError(f"{where}: description must be text, not {value!r}")
    return value


def seconds(spec: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or value < 0:
        raise MetadataError(f"{where}: {key} must be a finite number of seconds >= 0, "
                            f"not {value!r}")
    return float(value)


def relative_to(declared: str, path: Path | None) -> Path:
    """``declared`` with ~ expanded, made absolute against the metadata file's folder."""
    resolved = Path(declared).expanduser()
    if not resolved.is_absolute():
        resolved = (path.parent if path is not None else Path.cwd()) / resolved
    return resolved


def unit_path(declared: Any, unit: Any, one_row: bool, columns: Mapping[str, Any],
               where: str) -> tuple[str, str, str] | None:
    """``unit_path = "visit_id -> visits.visit_id"``: this table's ``visit_id`` names a row of
    ``visits``, whose unit is this row's unit (checked against the other tables later)."""
    if declared is None:
        return None
    parts = declared.split("->") if isinstance(declared, str) else []
    target = parts[1].strip().lower().split(".") if len(parts) == 2 else []
    if len(target) != 2 or not parts[0].strip() or not all(target):
        raise MetadataError(f"{where}: unit_path must read \"column -> table.column\", such "
                            f"as \"visit_id -> visits.visit_id\", not {declared!r}")
    if unit is not None or one_row:
        raise MetadataError(f"{where}: a table with unit_path takes its unit from the path; "
                            "remove privacy_unit and one_row_per_unit")
    column = parts[0].strip().lower()
    if column not in columns:
        raise MetadataError(f"{where}: unit_path names {column!r}, not one of its columns")
    return column, target[0], target[1]


def check_unit_path(table: Any, tables: Mapping[str, Any], where: str) -> None:
    if table.unit_path is None:
        return
    _, name, column = table.unit_path
    target = tables.get(name)
    if target is None or target.privacy_unit is None:
        raise MetadataError(f"{where}: unit_path leads to {name!r}, which must be a declared "
                            "table with a privacy_unit (a path has one step)")
    declared = target.column(column)
    if declared is None or not declared.unique:
        raise MetadataError(f"{where}: unit_path leads to {name}.{column}, which must be a "
                            "declared column with unique = true (one row per value)")
    own = table.column(table.unit_path[0])
    if own is not None and own.type != declared.type:
        # The link compares identities (dpsql.query.total_expressions.Reader.unit): one typed value
        # each side.
        raise MetadataError(f"{where}: unit_path links {table.unit_path[0]} ({own.type}) to "
                            f"{name}.{column} ({declared.type}); declare both with one type")


Scalar = int | float | str | bool | dt.date


def typed_bound(spec: Mapping[str, Any], key: str, ctype: str, where: str) -> Scalar | None:
    """A column's ``lower`` or ``upper``, checked against its type ``ctype``."""
    value = spec.get(key)
    if value is None:
        return None
    if ctype == "date":
        if not isinstance(value, dt.date) or isinstance(value, dt.datetime):
            raise MetadataError(f"{where}: {key} must be a TOML date such as 2025-01-01")
        return value
    if ctype == "timestamp":
        return instant(value, f"{where}: {key}")
    if ctype not in ("int", "float"):
        raise MetadataError(f"{where}: {key} is only for int, float, date and timestamp columns")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MetadataError(f"{where}: {key} must be a finite number, not {value!r}")
    if ctype == "int" and not float(value).is_integer():
        raise MetadataError(f"{where}: {key} of an int column must be a whole number")
    if ctype == "int":
        return within_bigint(int(value), f"{where}: {key}")
    return float(value)


#: What every engine reads an ``int`` column as (the rewrite widens it to BIGINT; a larger
#: value reads as NULL, see dpsql.engines.check_metadata).
BIGINT_RANGE = (-(2 ** 63), 2 ** 63 - 1)


def within_bigint(value: int, where: str) -> int:
    """``value``, refused when an ``int`` column cannot hold it: a bound beyond BIGINT would
    clamp nothing and calibrate noise to a range no value reaches, and the engine's sums and
    casts of it overflow (an int upper bound of 2^70 made SUM answer near 2^63)."""
    lo, hi = BIGINT_RANGE
    if not lo <= value <= hi:
        raise MetadataError(f"{where} = {value} is beyond what an int column holds: int columns "
                            f"are read as BIGINT, from {lo} to {hi}; declare a bound in that "
                            "range (or the column as float)")
    return value


def typed_values(spec: Mapping[str, Any], ctype: str, max_size: int, where: str
                 ) -> tuple[Scalar, ...] | None:
    """A column's ``values`` (its public keys), each of type ``ctype``, at most ``max_size``."""
    values = spec.get("values")
    if values is None:
        return None
    if not isinstance(values, list) or not values:
        raise MetadataError(f"{where}: values must be a non-empty list of the column's keys")
    if len(values) > max_size:
        raise MetadataError(f"{where}: values has more than {max_size} keys")
    expected: tuple[type, ...] = {"int": (int,), "float": (int, float), "text": (str,),
                                  "bool": (bool,), "date": (dt.date,),
                                  "timestamp": (dt.date,)}[ctype]
    if ctype == "timestamp":
        values = [instant(v, f"{where}: value {v!r} in values") for v in values]
    for v in values:
        if not isinstance(v, expected) or (ctype != "bool" and isinstance(v, bool)):
            raise MetadataError(f"{where}: value {v!r} in values is not of type {ctype}")
        if ctype == "int" and isinstance(v, int):
            within_bigint(v, f"{where}: value in values")
    if len(set(values)) != len(values):
        raise MetadataError(f"{where}: values lists a key twice")
    return tuple(values)


def instant(value: Any, where: str) -> dt.datetime:
    """A timestamp bound or key: a TOML datetime (an offset one read as the UTC instant it
    denotes, so the bound does not depend on a session's time zone) or a date (its midnight)."""
    if isinstance(value, dt.datetime):
        instant: dt.datetime = value
        if instant.tzinfo is not None:
            instant = instant.astimezone(dt.UTC).replace(tzinfo=None)
        return instant
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    raise MetadataError(f"{where} must be a TOML datetime such as 2025-01-01T00:00:00")
