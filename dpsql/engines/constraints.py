"""The keys and NOT NULL constraints a database declares, read from its schema (no value read):
what ``dpsql metadata init`` turns into ``nullable = false`` and ``unique = true``.

DuckDB lists them in ``duckdb_constraints()``, PostgreSQL in ``pg_constraint`` and
``information_schema.columns``. A folder of CSV/Parquet files (views over files) and Spark
declare none; :func:`read_constraints` then says why in :attr:`Constraints.unknown`, and
the skeleton keeps ``nullable = true``, the safe default.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# Only the schema that unqualified names resolve to (the one queries read, as for PostgreSQL
# below): a table of the same name in another schema or attached database lends it nothing.
_DUCKDB = ("SELECT table_name, constraint_type, constraint_column_names "
           "FROM duckdb_constraints() WHERE constraint_type IN "
           "('PRIMARY KEY', 'UNIQUE', 'NOT NULL') AND database_name = current_database() "
           "AND schema_name = current_schema()")
_POSTGRES_KEYS = (
    "SELECT c.relname, con.contype, array_agg(a.attname::text ORDER BY a.attnum) "
    "FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(con.conkey) "
    "WHERE n.nspname = current_schema() AND con.contype IN ('p', 'u') "
    "GROUP BY c.relname, con.oid, con.contype")
_POSTGRES_NOT_NULL = ("SELECT table_name, column_name FROM information_schema.columns "
                      "WHERE table_schema = current_schema() AND is_nullable = 'NO'")


@dataclass
class Constraints:
    """Per table (lower-case name): its NOT NULL columns (a primary key's included) and its
    single-column keys (PRIMARY KEY or UNIQUE), lower-case; ``unknown`` says why none could be
    read (None: read)."""

    not_null: dict[str, set[str]] = field(default_factory=dict)
    unique: dict[str, set[str]] = field(default_factory=dict)
    primary: dict[str, set[str]] = field(default_factory=dict)
    unknown: str | None = None

    def add(self, table: str, kind: str, columns: Iterable[str]) -> None:
        names = [c.lower() for c in columns]
        table = table.lower()
        if kind in ("PRIMARY KEY", "p", "NOT NULL"):
            self.not_null.setdefault(table, set()).update(names)
        if kind in ("PRIMARY KEY", "p", "UNIQUE", "u") and len(names) == 1:
            self.unique.setdefault(table, set()).update(names)
        if kind in ("PRIMARY KEY", "p"):
            self.primary.setdefault(table, set()).update(names)


def read_constraints(engine: Any) -> Constraints:
    """The constraints of ``engine``'s tables (a :class:`dpsql.engines.Engine`), or an empty
    :class:`Constraints` saying why they could not be read."""
    found = Constraints()
    if engine.name == "duckdb":
        if engine.path.is_dir():
            return Constraints(unknown="a folder of CSV/Parquet files declares no key or NOT "
                               "NULL constraint")
        for table, kind, columns in engine.cursor().execute(_DUCKDB).fetchall():
            found.add(table, kind, columns)
        return found
    if engine.name == "postgres":
        session = engine.session()
        for table, kind, columns in session.execute(_POSTGRES_KEYS).fetchall():
            found.add(table, kind, columns)
        for table, column in session.execute(_POSTGRES_NOT_NULL).fetchall():
            found.add(table, "NOT NULL", [column])
        return found
    return Constraints(unknown=f"dpsql does not read the constraints of a {engine.name} "
                       "database")
