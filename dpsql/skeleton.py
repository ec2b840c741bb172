"""``dpsql metadata init``: a metadata skeleton from a database's schema.

Only the schema is read (names and types), never a value: bounds, domains, the privacy unit and
the contribution limits are public policy that the data owner must write in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import tomli_w

from dpsql.engines import declared_type

_HEADER = """\
# dpsql metadata skeleton, written from the database schema only (no values read).
# Fill in: the privacy unit of each table, contribution bounds, numeric bounds
# (lower/upper) and public key domains (values = [...] or public_range = true).
# Bounds and domains must come from public knowledge, never from the data.
"""
_TABLE_TODO = """\
# TODO: privacy_unit = "..." (the column naming the person protected),
# max_rows_per_unit (rows one unit may contribute),
# max_groups_per_unit (GROUP BY groups one unit may reach).
"""
_COLUMN_TODO = {"int": "lower = ..., upper = ...", "float": "lower = ..., upper = ...",
                "date": "lower = YYYY-MM-DD, upper = YYYY-MM-DD",
                "timestamp": "lower = YYYY-MM-DDTHH:MM:SS, upper = YYYY-MM-DDTHH:MM:SS",
                "text": "values = [...] if the keys are public"}


def skeleton(tables: Mapping[str, Sequence[tuple[str, str]]]) -> str:
    """TOML text declaring every table and column, with the decisions left as TODO comments.

    Every key and value is written by tomli-w, so any table or column name (quotes,
    backslashes, newlines) reads back the same; only the comments between its pieces are ours.
    """
    out = [_HEADER]
    for table, columns in tables.items():
        limits = {"max_rows_per_unit": 1, "max_groups_per_unit": 1}
        out.append(_TABLE_TODO + tomli_w.dumps({"tables": {table: limits}}))
        for name, dtype in columns:
            kind = declared_type(dtype.upper())
            if dtype.upper().startswith("TIMESTAMP"):  # an instant (one with a zone in UTC)
                kind = "timestamp"
            if kind is None:  # refused when the database is opened: left out, and said why
                shown = name.encode("unicode_escape").decode()  # one comment line
                out.append(f"# {shown}: {dtype} has no dpsql type; cast it in a view to "
                           "declare it\n")
                continue
            todo = f"# TODO: {_COLUMN_TODO[kind]}\n" if kind in _COLUMN_TODO else ""
            spec = {"type": kind, "nullable": True}
            out.append(todo + tomli_w.dumps({"tables": {table: {"columns": {name: spec}}}}))
    return "\n".join(out)
