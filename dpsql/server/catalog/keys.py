"""Keys and indexes in the catalog, from the owner's declarations alone.

PostgreSQL clients learn a table's keys from pg_constraint, pg_index and information_schema
(pgjdbc's getPrimaryKeys/getImportedKeys/getIndexInfo, Metabase's foreign-key sync, DBeaver's
ER diagrams). dpsql declares them from the metadata, which is public by definition:

- a column declared ``unique = true`` is a key: the table's first such column that is not
  nullable is its PRIMARY KEY (``<table>_pkey``), any other a UNIQUE constraint
  (``<table>_<column>_key``), each with the unique btree index PostgreSQL would build for it;
- a ``unit_path = "c -> t.c2"`` is a FOREIGN KEY from c to t.c2 (``<table>_<c>_fkey``), whose
  target is the unique column c2 the metadata check requires.

These are the owner's promises, not facts read from the data (dpsql never checks them on the
rows, which would be a computation on private data).
"""

from __future__ import annotations

from dataclasses import dataclass

from dpsql.metadata.metadata import Metadata

FIRST_INDEX_OID = 20000
FIRST_CONSTRAINT_OID = 30000


@dataclass(frozen=True)
class Key:
    """One declared constraint: ``kind`` is PostgreSQL's contype (p, u or f)."""

    oid: int
    name: str
    kind: str
    table: str
    column: str
    attnum: int
    index_oid: int  # p, u: its own index; f: the index of the referenced key
    index_name: str
    target: str | None = None  # f: the referenced table and column
    target_column: str | None = None
    target_attnum: int | None = None
    target_key: str | None = None  # f: the referenced constraint's name


def _attnum(metadata: Metadata, table: str, column: str) -> int:
    return list(metadata.tables[table].columns).index(column) + 1


def declared_keys(metadata: Metadata) -> list[Key]:
    """Every primary, unique and foreign key the metadata declares, in a fixed order."""
    keys: list[Key] = []
    unique: dict[tuple[str, str], Key] = {}
    for tname, table in metadata.tables.items():
        has_primary = False
        for cname, column in table.columns.items():
            if not column.unique:
                continue
            primary = not has_primary and not column.nullable
            has_primary = has_primary or primary
            name = f"{tname}_pkey" if primary else f"{tname}_{cname}_key"
            n = len(keys)
            key = Key(FIRST_CONSTRAINT_OID + n, name, "p" if primary else "u", tname, cname,
                      _attnum(metadata, tname, cname), FIRST_INDEX_OID + n, name)
            keys.append(key)
            unique[(tname, cname)] = key
    for tname, table in metadata.tables.items():
        if table.unit_path is None:
            continue
        source, target, target_column = table.unit_path
        referenced = unique.get((target, target_column))
        if referenced is None:  # the metadata check requires it; never invent a key
            continue
        keys.append(Key(FIRST_CONSTRAINT_OID + len(keys), f"{tname}_{source}_fkey", "f", tname,
                        source, _attnum(metadata, tname, source), referenced.index_oid,
                        referenced.index_name, target, target_column,
                        _attnum(metadata, target, target_column), referenced.name))
    return keys


def index_definition(key: Key) -> str:
    """``pg_get_indexdef``'s text for the index of a primary or unique key."""
    return (f"CREATE UNIQUE INDEX {key.index_name} ON public.{key.table} USING btree "
            f"({key.column})")


def constraint_definition(key: Key) -> str:
    """``pg_get_constraintdef``'s text."""
    if key.kind == "f":
        return f"FOREIGN KEY ({key.column}) REFERENCES {key.target}({key.target_column})"
    return f"{'PRIMARY KEY' if key.kind == 'p' else 'UNIQUE'} ({key.column})"


_TYPES = {"p": "PRIMARY KEY", "u": "UNIQUE", "f": "FOREIGN KEY"}


def constraint_rows(key: Key, namespace: int, table_oids: dict[str, int]) -> tuple[object, ...]:
    """The key's pg_constraint row."""
    foreign = key.kind == "f"
    target = table_oids[key.target] if key.target else 0
    return (key.oid, key.name, namespace, key.kind, False, False, True,
            table_oids[key.table], 0, key.index_oid, 0, target, *(
                ("a", "a", "s") if foreign else (" ", " ", " ")), True, 0, True, [key.attnum],
            [key.target_attnum] if foreign else None, None, None, None, None, None, None)


def info_rows(key: Key) -> dict[str, tuple[object, ...]]:
    """The key's rows in information_schema's table_constraints, key_column_usage,
    referential_constraints and constraint_column_usage (catalog columns are set per
    session)."""
    rows: dict[str, tuple[object, ...]] = {
        "table_constraints": (None, "public", key.name, None, "public", key.table,
                              _TYPES[key.kind], "NO", "NO", "YES", "YES"),
        "key_column_usage": (None, "public", key.name, None, "public", key.table, key.column,
                             1, 1 if key.kind == "f" else None),
    }
    if key.kind == "f":
        rows["referential_constraints"] = (None, "public", key.name, None, "public",
                                           key.target_key, "NONE", "NO ACTION", "NO ACTION")
        rows["constraint_column_usage"] = (None, "public", key.target, key.target_column,
                                           None, "public", key.name)
    else:
        rows["constraint_column_usage"] = (None, "public", key.table, key.column, None,
                                           "public", key.name)
    return rows
