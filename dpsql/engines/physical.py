"""Physical types, in DuckDB's names (every engine spells its schema so), against the
declared types; and the one read of public data every engine runs (:func:`public_select`)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from sqlglot import exp

from dpsql.engines.ir import SafeCast
from dpsql.metadata.metadata import ENGINE_TYPES

INTEGER_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                       "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"})
_FLOATS = frozenset({"FLOAT", "REAL", "DOUBLE"})
_TIMESTAMPS = frozenset({"TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS"})


def declared_type(stored: str) -> str | None:
    """The declared type a physical DuckDB type reads as exactly, or None if there is none."""
    base = stored.split("(")[0].strip()
    if base in INTEGER_TYPES:
        return "int"
    if base == "DECIMAL":
        return "int" if re.fullmatch(r"DECIMAL\(\d+,\s*0\)", stored) else "float"
    if base in _FLOATS:
        return "float"
    if stored == "VARCHAR":
        return "text"
    if stored == "BOOLEAN":
        return "bool"
    if stored == "DATE" or stored in _TIMESTAMPS:
        return "date"
    return None


def compatible(declared: str, stored: str) -> bool:
    """Whether a column declared ``declared`` (int, float, text, bool, date) may be stored as
    the DuckDB type ``stored`` (see :func:`dpsql.engines.check_metadata` for the rule)."""
    kind = declared_type(stored.upper())
    if kind == declared or stored.upper() == "VARCHAR":
        return True
    # any instant or day, read as a UTC TIMESTAMP (dpsql.query.total_expressions)
    if declared == "timestamp":
        return kind == "date" or stored.upper() in ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ")
    return declared == "float" and kind == "int"


def public_select(table: str, columns: Mapping[str, str], stored: Mapping[str, str]
                  ) -> exp.Select:
    """``SELECT`` of every row of ``table`` with each of ``columns`` (name -> declared type)
    read as its declared type, written for DuckDB's semantics (an engine's compile spells it):
    a plain cast where the physical type (``stored``, DuckDB's names) converts without fail,
    a :class:`~dpsql.engines.ir.SafeCast` otherwise (text, an instant whose date depends
    on the time zone, or an integer type wider than BIGINT, whose value beyond BIGINT reads
    as NULL), as the rewrite reads private columns."""
    types = {k.lower(): v.upper() for k, v in stored.items()}
    projections = []
    for name, declared in columns.items():
        physical = types.get(name.lower(), "VARCHAR")
        kind = exp.Cast if compatible(declared, physical) and physical not in (
            "VARCHAR", "TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ") and not (
            declared == "int" and _wider(physical)) else SafeCast
        cast = kind(this=exp.column(name, quoted=True),
                    to=exp.DataType.build(ENGINE_TYPES[declared]))
        projections.append(exp.alias_(cast, name, quoted=True))
    return exp.select(*projections).from_(exp.Table(this=exp.to_identifier(table, quoted=True)))


def _wider(physical: str) -> bool:
    """Whether the integer type ``physical`` holds values beyond BIGINT (a plain cast of one
    would fail on the data, after the charge)."""
    base = physical.split("(")[0].strip()
    if base in ("HUGEINT", "UBIGINT", "UHUGEINT"):
        return True
    digits = re.fullmatch(r"DECIMAL\((\d+),\s*0\)", physical)
    return digits is not None and int(digits.group(1)) > 18
