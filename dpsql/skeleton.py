"""``dpsql metadata init``: a metadata skeleton from a database's schema.

Only the schema is read (names and types), never a value: bounds, domains, the privacy unit and
the contribution limits are public policy that the data owner must write in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dpsql.engines import declared_type


def skeleton(tables: Mapping[str, Sequence[tuple[str, str]]]) -> str:
    """TOML text declaring every table and column, with the decisions left as TODO comments."""
    out = ["# dpsql metadata skeleton, written from the database schema only (no values read).",
           "# Fill in: the privacy unit of each table, contribution bounds, numeric bounds",
           "# (lower/upper) and public key domains (values = [...] or public_range = true).",
           "# Bounds and domains must come from public knowledge, never from the data.", ""]
    for table, columns in tables.items():
        out += [f"[tables.{_key(table)}]",
                '# privacy_unit = "person_id"   # TODO: the column naming the person protected',
                "max_rows_per_unit = 1           # TODO: rows one unit may contribute",
                "max_groups_per_unit = 1         # TODO: GROUP BY groups one unit may reach",
                "", f"[tables.{_key(table)}.columns]"]
        for name, dtype in columns:
            kind = declared_type(dtype.upper())
            if kind is None:  # refused when the database is opened: left out, and said why
                out.append(f"# {_key(name)}: {dtype} has no dpsql type; cast it in a view to "
                           "declare it")
                continue
            todo = {"int": "   # TODO: lower = ..., upper = ...",
                    "float": "   # TODO: lower = ..., upper = ...",
                    "date": "   # TODO: lower = YYYY-MM-DD, upper = YYYY-MM-DD",
                    "text": "   # TODO: values = [...] if the keys are public"}.get(kind, "")
            out.append(f'{_key(name)} = {{ type = "{kind}", nullable = true }}{todo}')
        out.append("")
    return "\n".join(out)


def _key(name: str) -> str:
    return name if name.replace("_", "").isalnum() and name.isascii() else f'"{name}"'
