"""Building the catalog DuckDB from the metadata: its tables, macros and rows (names, types,
nullability and the declared bounds and domains as comments; never a row of data)."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from dpsql.engines.locked import insert_values
from dpsql.ledger.spending import SCHEMA as LEDGER_SCHEMA
from dpsql.ledger.spending import VIEWS as LEDGER_VIEWS
from dpsql.metadata.metadata import Column, Metadata, Table
from dpsql.server.catalog.functions import _MACROS, INFO_MACROS, TABLE_MACROS
from dpsql.server.catalog.keys import (
    constraint_definition,
    constraint_rows,
    declared_keys,
    index_definition,
    info_rows,
)
from dpsql.server.catalog.keywords import keyword_rows
from dpsql.server.catalog.tables import (
    _KNOWN_OIDS,
    CATALOG_OID,
    FIRST_TABLE_OID,
    FIRST_VIEW_OID,
    INFO_OID,
    INFO_TABLES,
    IS_SCHEMA,
    LEDGER_OID,
    OWNER,
    OWNER_OID,
    PG_SCHEMA,
    PUBLIC_OID,
    TABLES,
    TOAST_OID,
)
from dpsql.server.wire import types as t

FIRST_FUNCTION_OID = 40000
# relacl and attacl of the declared tables: the owner reads, and PUBLIC (every analyst) may
# SELECT; nothing else (pgjdbc's getTablePrivileges, DBeaver's permissions tab)
_ACL = [f"{OWNER}=r/{OWNER}", f"=r/{OWNER}"]  # pg_proc: after the tables, indexes and constraints


def _table_oids(metadata: Metadata) -> dict[str, int]:
    return {name: FIRST_TABLE_OID + i for i, name in enumerate(metadata.tables)}


def _column_comment(column: Column) -> str:
    parts = []
    if column.description and column.description.strip():
        parts.append(column.description.strip())
    if column.lower is not None and column.upper is not None:
        parts.append(f"declared bounds {column.lower} .. {column.upper} (values are clamped)")
    if column.values is not None:
        shown = ", ".join(map(str, column.values[:20]))
        more = ", ..." if len(column.values) > 20 else ""
        parts.append(f"public GROUP BY keys: {shown}{more}")
    elif column.public_range:
        parts.append("public GROUP BY keys: every integer in the bounds")
    return "; ".join(parts)


def _table_comment(table: Table) -> str:
    parts = []
    if table.description and table.description.strip():
        parts.append(table.description.strip())
    # dpsql.execution.public: read exactly by any SELECT that reads nothing private
    if table.public:
        parts.append("public: read exactly, no noise and no privacy cost")
        return "; ".join(parts)
    parts.append("differentially private: aggregate queries only")
    if table.privacy_unit:
        parts.append(f"privacy unit {table.privacy_unit}, at most {table.max_rows_per_unit} "
                     f"row(s) and {table.max_groups_per_unit} group(s) per unit")
    return "; ".join(parts)


def build(con: duckdb.DuckDBPyConnection, metadata: Metadata,
          table_oids: dict[str, int]) -> None:
    """Create the catalog's schemas, tables and macros on ``con`` and fill them."""
    con.execute(f"CREATE SCHEMA {PG_SCHEMA}")
    con.execute(f"CREATE SCHEMA {IS_SCHEMA}")
    for name, columns in TABLES.items():
        con.execute(f"CREATE TABLE {PG_SCHEMA}.{name} ({columns})")
    for name, columns in INFO_TABLES.items():
        con.execute(f"CREATE TABLE {IS_SCHEMA}.{name} ({columns})")
    con.execute(f"CREATE TABLE {PG_SCHEMA}.__type_names (oid BIGINT, sql_name VARCHAR)")
    type_names = [(ty.oid, ty.sql_name) for ty in t.TYPES.values()]
    type_names += [(ty.array_oid, ty.sql_name + "[]") for ty in t.TYPES.values()
                   if ty.array_oid]
    _insert(con, f"{PG_SCHEMA}.__type_names", type_names)
    con.execute(f"CREATE TABLE {PG_SCHEMA}.__definitions (oid BIGINT, num INTEGER, "
                "definition VARCHAR)")
    for name, overloads in _MACROS.items():
        bodies = ", ".join(f"({params}) AS {body}" for params, body in overloads)
        con.execute(f"CREATE MACRO {PG_SCHEMA}.{name} {bodies}")
    con.execute(f"CREATE TABLE {PG_SCHEMA}.__keywords (word VARCHAR, catcode VARCHAR, "
                "barelabel BOOLEAN, catdesc VARCHAR, baredesc VARCHAR)")
    _insert(con, f"{PG_SCHEMA}.__keywords", keyword_rows())
    for name, (params, body) in INFO_MACROS.items():
        con.execute(f"CREATE MACRO {IS_SCHEMA}.{name}({params}) AS {body}")
    for name, (params, body) in TABLE_MACROS.items():
        con.execute(f"CREATE MACRO {PG_SCHEMA}.{name}({params}) AS TABLE {body}")
    _fill(metadata, table_oids, con)


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[Sequence[object]],
            columns: Sequence[str] | None = None) -> None:
    """``rows`` into ``table`` (``columns`` of it, or all), many rows a statement:
    executemany runs one statement a row (2 s per catalog). The values are dpsql's own
    (ints, texts, booleans, lists), converted by the column types on insert."""
    names = f" ({', '.join(columns)})" if columns else ""
    insert_values(con, f"{table}{names}", rows)


def _fill(metadata: Metadata, table_oids: dict[str, int], con: duckdb.DuckDBPyConnection) -> None:
    pg, md = PG_SCHEMA, metadata
    _insert(con, f"{pg}.pg_namespace", [
        (CATALOG_OID, "pg_catalog", OWNER_OID, None), (PUBLIC_OID, "public", OWNER_OID, None),
        (INFO_OID, "information_schema", OWNER_OID, None),
        (TOAST_OID, "pg_toast", OWNER_OID, None)])
    _insert(con, f"{pg}.pg_am", [(2, "heap", "heap_tableam_handler", "t"),
                                      (403, "btree", "bthandler", "i")])
    _insert(con, f"{pg}.pg_tablespace", [(1663, "pg_default", OWNER_OID, None, None),
                                              (1664, "pg_global", OWNER_OID, None, None)])
    _insert(con, f"{pg}.pg_collation", [
        (100, "default", CATALOG_OID, OWNER_OID, "d", True, -1, None, None, None, None, None),
        (950, "C", CATALOG_OID, OWNER_OID, "c", True, -1, "C", "C", None, None, None),
        (951, "POSIX", CATALOG_OID, OWNER_OID, "c", True, -1, "POSIX", "POSIX", None, None,
         None)])
    _insert(con, f"{pg}.pg_language", [
        (12, "internal", OWNER_OID, False, False, 0, 0, 0, None),
        (13, "c", OWNER_OID, False, False, 0, 0, 0, None),
        (14, "sql", OWNER_OID, False, True, 0, 0, 0, None)])
    types = []
    for ty in t.TYPES.values():
        types.append(_type_row(ty.oid, ty.name, ty.length, "b", ty.category, 0,
                               ty.array_oid, f"{ty.name}in", ty.oid in (t.TEXT, t.VARCHAR,
                                                                        t.BPCHAR, t.NAME)))
        if ty.array_oid:
            types.append(_type_row(ty.array_oid, "_" + ty.name, -1, "b", "A", ty.oid, 0,
                                   "array_in", False))
    _insert(con, f"{pg}.pg_type", types)
    classes: list[tuple[object, ...]] = []
    attributes: list[tuple[object, ...]] = []
    descriptions: list[tuple[object, ...]] = []
    tables, info_tables, info_columns = [], [], []
    catalog_names = list(TABLES)
    next_oid = 13500
    for name in catalog_names:
        oid = _KNOWN_OIDS.get(name)
        if oid is None:
            oid, next_oid = next_oid, next_oid + 1
        classes.append(_class_row(oid, name, CATALOG_OID, "r", TABLES[name].count(",") + 1))
    for tname, table in md.tables.items():
        oid = table_oids[tname]
        classes.append((*_class_row(oid, tname, PUBLIC_OID, "r", len(table.columns))[:30],
                        _ACL, None, None, False))
        descriptions.append((oid, 1259, 0, _table_comment(table)))
        tables.append(("public", tname, OWNER, None, False, False, False, False))
        info_tables.append((None, "public", tname, "BASE TABLE", None, None, None, None,
                            None, "NO", "NO", None))
        for num, (cname, column) in enumerate(table.columns.items(), start=1):
            ty = t.TYPES[t.DECLARED[column.type]]
            attributes.append(_attribute_row(oid, cname, num, ty, column.nullable))
            comment = _column_comment(column)
            if comment:
                descriptions.append((oid, 1259, num, comment))
            info_columns.append(_info_column("public", tname, cname, num, column.nullable, ty))
    if metadata.budget is not None:  # metered: the views have a ledger to read
        _fill_ledger_views(con, classes, attributes, descriptions, info_columns)
    _fill_keys(con, metadata, table_oids, classes, attributes)
    _insert(con, f"{pg}.pg_class", classes)
    _insert(con, f"{pg}.pg_proc", [  # the functions the catalog answers (getFunctions)
        (FIRST_FUNCTION_OID + i, name, CATALOG_OID, OWNER_OID, 14, 1.0, 0.0, 0, None, "f",
         False, False, False, False, "s", "s", 0, 0, 0, [], None, None, None, None, None,
         name, None, None, None, None)
        for i, name in enumerate(sorted(_MACROS))])
    _insert(con, f"{pg}.pg_attribute", attributes)
    _insert(con, f"{pg}.pg_description", descriptions)
    _insert(con, f"{pg}.pg_tables", tables)
    # Every counter zero and never analyzed, as PostgreSQL shows a table nobody has read or
    # vacuumed: n_live_tup (Metabase's "estimated row count") would otherwise be a count of
    # the private rows, an exact aggregate released without noise.
    _insert(con, f"{pg}.pg_stat_user_tables", [
        (table_oids[tname], "public", tname, *([0] * 12), None, None, None, None, 0, 0, 0, 0)
        for tname in md.tables])
    _insert(con, f"{IS_SCHEMA}.tables", info_tables)
    _insert(con, f"{IS_SCHEMA}.columns", info_columns)
    _insert(con, f"{IS_SCHEMA}.schemata", [
        (None, "public", OWNER, None, None, "UTF8", None),
        (None, "pg_catalog", OWNER, None, None, "UTF8", None),
        (None, "information_schema", OWNER, None, None, "UTF8", None)])
    _insert(con, f"{IS_SCHEMA}.table_privileges", [
        (OWNER, "PUBLIC", None, "public", tname, "SELECT", "NO", "YES")
        for tname in md.tables])
    _insert(con, f"{IS_SCHEMA}.character_sets", [
        (None, None, "UTF8", "UCS", "UTF8", None, None, None)])


def _type_row(oid: int, name: str, length: int, kind: str, category: str, elem: int,
              array: int, typinput: str, preferred: bool) -> tuple[object, ...]:
    return (oid, name, CATALOG_OID, OWNER_OID, length, 0 < length <= 8, kind, category,
            preferred, True, ",", 0, None, elem, array, typinput, typinput[:-2] + "out"
            if typinput.endswith("in") else "array_out", None, None, None, None, None,
            "d" if length == 8 else "i", "x" if length < 0 else "p", False, 0, -1, 0,
            100 if category == "S" else 0, None, None, None)


def _class_row(oid: int, name: str, namespace: int, kind: str, natts: int) -> tuple[object, ...]:
    return (oid, name, namespace, 0, 0, OWNER_OID, 2, 0, 0, 0, -1.0, 0, 0, False, False, "p",
            kind, natts, 0, False, False, False, False, False, True, "d", False, 0, 0, 0, None,
            None, None, False)


def _attribute_row(oid: int, name: str, num: int, ty: t.PgType, nullable: bool
                   ) -> tuple[object, ...]:
    return (oid, name, ty.oid, ty.length, num, -1, -1, 0, ty.length > 0,
            "d" if ty.length == 8 else "i", "x" if ty.length < 0 else "p", "", not nullable,
            False, False, "", "", False, True, 0, -1, 100 if ty.oid == t.TEXT else 0, _ACL, None,
            None, None)


def _fill_ledger_views(con: duckdb.DuckDBPyConnection, classes: list[tuple[object, ...]],
                       attributes: list[tuple[object, ...]],
                       descriptions: list[tuple[object, ...]],
                       info_columns: list[tuple[object, ...]]) -> None:
    """The ``dpsql`` schema and its ledger views (:mod:`dpsql.ledger.spending`): names, columns
    and types only, so that BI tools list them; their rows are the library's, read for the
    analyst who asks, never the catalog's."""
    pg, info = PG_SCHEMA, IS_SCHEMA
    _insert(con, f"{pg}.pg_namespace", [(LEDGER_OID, LEDGER_SCHEMA, OWNER_OID, None)])
    _insert(con, f"{info}.schemata", [(None, LEDGER_SCHEMA, OWNER, None, None, "UTF8", None)])
    for i, (name, (columns, about)) in enumerate(LEDGER_VIEWS.items()):
        oid, definition = FIRST_VIEW_OID + i, f"-- {LEDGER_SCHEMA}.{name}: the budget ledger"
        classes.append((*_class_row(oid, name, LEDGER_OID, "v", len(columns))[:30], _ACL, None,
                        None, False))
        descriptions.append((oid, 1259, 0, f"the privacy budget ledger, read-only: {about}; "
                             "your own rows (the data owner's: everyone's); exact and free"))
        _insert(con, f"{pg}.pg_views", [(LEDGER_SCHEMA, name, OWNER, definition)])
        _insert(con, f"{info}.tables", [(None, LEDGER_SCHEMA, name, "VIEW", None, None, None,
                                         None, None, "NO", "NO", None)])
        _insert(con, f"{info}.views", [(None, LEDGER_SCHEMA, name, definition, "NONE", "NO",
                                        "NO")])
        _insert(con, f"{info}.table_privileges", [(OWNER, "PUBLIC", None, LEDGER_SCHEMA, name,
                                                   "SELECT", "NO", "YES")])
        for num, (column, duck) in enumerate(columns, start=1):
            ty = t.TYPES[t.pg_type_of(duck)[0]]
            attributes.append(_attribute_row(oid, column, num, ty, True))
            info_columns.append(_info_column(LEDGER_SCHEMA, name, column, num, True, ty))


def _info_column(schema: str, table: str, name: str, num: int, nullable: bool,
                 ty: t.PgType) -> tuple[object, ...]:
    precision = {t.INT8: 64, t.FLOAT8: 53}.get(ty.oid)
    radix = 2 if precision else None
    scale = 0 if ty.oid == t.INT8 else None
    return (None, schema, table, name, num, None, "YES" if nullable else "NO",
            ty.sql_name, None, 1073741824 if ty.oid == t.TEXT else None, precision, radix, scale,
            0 if ty.oid == t.DATE else None, None, None, None, None, None, None, None, None,
            None, None, None, None, "pg_catalog", ty.name, None, None, None, None, str(num),
            "NO", "NO", None, None, None, None, None, "NO", "NEVER", None, "NO")


def _fill_keys(con: duckdb.DuckDBPyConnection, metadata: Metadata, table_oids: dict[str, int],
               classes: list[tuple[object, ...]], attributes: list[tuple[object, ...]]) -> None:
    """The declared keys (:mod:`.keys`): constraints, their indexes and definitions."""
    pg, info = PG_SCHEMA, IS_SCHEMA
    keys = declared_keys(metadata)
    by_attribute = {(a[0], a[4]): a for a in attributes}
    indexed = set()
    definitions: list[tuple[object, ...]] = []
    for key in keys:
        table_oid = table_oids[key.table]
        _insert(con, f"{pg}.pg_constraint", [constraint_rows(key, PUBLIC_OID, table_oids)])
        definitions.append((key.oid, 0, constraint_definition(key)))
        for table, rows in info_rows(key).items():
            _insert(con, f"{info}.{table}", [rows])
        if key.kind == "f":
            continue
        indexed.add(table_oid)
        classes.append(_class_row(key.index_oid, key.index_name, PUBLIC_OID, "i", 1))
        column = by_attribute[(table_oid, key.attnum)]
        attributes.append((key.index_oid, key.column, *column[2:4], 1, *column[5:]))
        _insert(con, f"{pg}.pg_index", [(
            key.index_oid, table_oid, 1, 1, True, False, key.kind == "p", False, True, False,
            True, False, True, True, False, [key.attnum], [0], [0], [0], None, None)])
        _insert(con, f"{pg}.pg_indexes", [("public", key.table, key.index_name, None,
                                            index_definition(key))])
        definitions += [(key.index_oid, 0, index_definition(key)),
                        (key.index_oid, 1, key.column)]
    _insert(con, f"{pg}.__definitions", definitions)
    for i, row in enumerate(classes):  # relhasindex, relam: as PostgreSQL sets them
        if row[0] in indexed or row[16] == "i":
            changed = list(row)
            changed[13] = row[16] != "i"
            changed[6] = 403 if row[16] == "i" else row[6]
            classes[i] = tuple(changed)
