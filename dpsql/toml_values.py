"""Readers of the owner's TOML values (:mod:`dpsql.metadata`): each checks one setting's type
and range, and raises a :class:`~dpsql.errors.MetadataError` naming where it was declared."""

from __future__ import annotations

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

