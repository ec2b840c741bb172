"""PostgreSQL functions a catalog query may call: macros in the catalog DuckDB, session values
(``current_user``, ``version()``, ``current_setting(...)``) as literals, and PostgreSQL's type
names as DuckDB's."""

from __future__ import annotations

import re

from sqlglot import exp

from dpsql.server.catalog.model import CatalogError, SessionInfo
from dpsql.server.catalog.names import function_name
from dpsql.server.catalog.tables import LEDGER_OID, OWNER, OWNER_OID, PG_SCHEMA

# Functions answered by macros in PG_SCHEMA (name -> list of (parameters, body)).
_DEFINITION = (f"(SELECT d.definition FROM {PG_SCHEMA}.__definitions d "
               "WHERE d.oid = o AND d.num = {num})")
_READ = "regexp_matches(lower({p}), 'select|usage|connect|execute')"
_MACROS: dict[str, list[tuple[str, str]]] = {
    "format_type": [("t, m", f"""CASE
        WHEN t IS NULL THEN NULL
        WHEN t = 1043 AND m > 4 THEN 'character varying(' || (m - 4) || ')'
        WHEN t = 1042 AND m > 4 THEN 'character(' || (m - 4) || ')'
        WHEN t = 1700 AND m > 4 THEN 'numeric(' || ((m - 4) >> 16) || ',' || ((m - 4) & 65535)
                                     || ')'
        ELSE coalesce((SELECT n.sql_name FROM {PG_SCHEMA}.__type_names n WHERE n.oid = t),
                      '???') END""")],
    "pg_get_userbyid": [("r", f"CASE WHEN r = {OWNER_OID} THEN '{OWNER}' "
                              "ELSE 'unknown (OID=' || r || ')' END")],
    **{f"pg_{kind}_is_visible": [("o", "true")]
       for kind in ("table", "type", "function", "collation", "opclass", "operator",
                    "conversion", "ts_config")},
    # The ledger views' schema is not on the search path (public, pg_catalog): as in
    # PostgreSQL, psql's \d and \dv list them when asked for dpsql.*, not unqualified.
    # (an alias of its own: ``o`` is the caller's expression, often ``c.oid``)
    "pg_table_is_visible": [("o", f"coalesce((SELECT __v.relnamespace <> {LEDGER_OID} FROM "
                                  f"{PG_SCHEMA}.pg_class __v WHERE __v.oid = o), true)")],
    "pg_get_expr": [("e, r", "CAST(NULL AS VARCHAR)"), ("e, r, p", "CAST(NULL AS VARCHAR)")],
    "obj_description": [
        ("o", f"(SELECT d.description FROM {PG_SCHEMA}.pg_description d "
              "WHERE d.objoid = o AND d.objsubid = 0 LIMIT 1)"),
        ("o, c", f"(SELECT d.description FROM {PG_SCHEMA}.pg_description d "
                 "WHERE d.objoid = o AND d.objsubid = 0 LIMIT 1)")],
    "col_description": [("o, n", f"(SELECT d.description FROM {PG_SCHEMA}.pg_description d "
                                  "WHERE d.objoid = o AND d.objsubid = n LIMIT 1)")],
    "shobj_description": [("o, c", "CAST(NULL AS VARCHAR)")],
    # the definitions of the declared keys and their indexes (.keys), column c of an index
    "pg_get_indexdef": [("o", _DEFINITION.format(num="0")), ("o, c, p", _DEFINITION.format(
        num="c"))],
    "pg_get_constraintdef": [("o", _DEFINITION.format(num="0")),
                             ("o, p", _DEFINITION.format(num="0"))],
    "pg_get_viewdef": [("o", "CAST(NULL AS VARCHAR)"), ("o, p", "CAST(NULL AS VARCHAR)")],
    "pg_get_triggerdef": [("o", "CAST(NULL AS VARCHAR)"), ("o, p", "CAST(NULL AS VARCHAR)")],
    "pg_get_ruledef": [("o", "CAST(NULL AS VARCHAR)"), ("o, p", "CAST(NULL AS VARCHAR)")],
    "pg_get_partkeydef": [("o", "CAST(NULL AS VARCHAR)")],
    "pg_get_statisticsobjdef_columns": [("o", "CAST(NULL AS VARCHAR)")],
    "pg_get_function_result": [("o", "CAST(NULL AS VARCHAR)")],
    "pg_get_function_arguments": [("o", "CAST(NULL AS VARCHAR)")],
    "pg_get_function_identity_arguments": [("o", "CAST(NULL AS VARCHAR)")],
    "pg_get_serial_sequence": [("a, b", "CAST(NULL AS VARCHAR)")],
    "pg_encoding_to_char": [("e", "'UTF8'")],
    "pg_char_to_encoding": [("e", "6")],
    "pg_relation_size": [("o", "CAST(NULL AS BIGINT)"), ("o, f", "CAST(NULL AS BIGINT)")],
    "pg_total_relation_size": [("o", "CAST(NULL AS BIGINT)")],
    "pg_table_size": [("o", "CAST(NULL AS BIGINT)")],
    "pg_indexes_size": [("o", "CAST(NULL AS BIGINT)")],
    "pg_database_size": [("o", "CAST(NULL AS BIGINT)")],
    "pg_size_pretty": [("s", "CAST(s AS VARCHAR) || ' bytes'")],
    # Activity counters (scans, tuples read): zero, as on a server that just started; they
    # count what queries did, which follows from the data.
    **{f"pg_stat_get_{counter}": [("o", "CAST(0 AS BIGINT)")]
       for counter in ("numscans", "tuples_returned", "tuples_fetched", "live_tuples",
                       "dead_tuples", "blocks_fetched", "blocks_hit")},
    "pg_is_in_recovery": [("", "false")],
    "pg_relation_is_publishable": [("o", "false")],
    "txid_current": [("", "1")],
    "pg_current_xact_id": [("", "1")],
    "array_upper": [("a, d", "CASE WHEN a IS NULL OR len(a) = 0 THEN NULL ELSE len(a) END")],
    "array_lower": [("a, d", "CASE WHEN a IS NULL OR len(a) = 0 THEN NULL ELSE 1 END")],
    "quote_literal": [("s", "CASE WHEN s IS NULL THEN 'NULL' ELSE chr(39) || "
                            "replace(s, chr(39), chr(39) || chr(39)) || chr(39) END")],
    "quote_ident": [("s", "CASE WHEN regexp_full_match(s, '[a-z_][a-z0-9_$]*') THEN s "
                          "ELSE '\"' || replace(s, '\"', '\"\"') || '\"' END")],
    "to_regclass": [("s", f"(SELECT c.oid FROM {PG_SCHEMA}.pg_class c "
                          "WHERE c.relname = s LIMIT 1)")],
    "to_regtype": [("s", f"(SELECT ty.oid FROM {PG_SCHEMA}.pg_type ty "
                         "WHERE ty.typname = s LIMIT 1)")],
    "pg_has_role": [("a, b", "true"), ("a, b, c", "true")],
    # An analyst may read (SELECT, USAGE, CONNECT, EXECUTE) and never write: Metabase and
    # DBeaver offer editing only where these say so.
    **{name: [("a, b", _READ.format(p="b")), ("a, b, c", _READ.format(p="c"))]
       for name in ("has_table_privilege", "has_schema_privilege", "has_database_privilege",
                    "has_function_privilege", "has_sequence_privilege",
                    "has_any_column_privilege", "has_language_privilege",
                    "has_tablespace_privilege", "has_type_privilege")},
    "has_column_privilege": [("a, b, c", _READ.format(p="c")),
                             ("a, b, c, d", _READ.format(p="d"))],
}
# Set-returning functions answered by table macros in PG_SCHEMA (name -> (parameters, body)).
TABLE_MACROS: dict[str, tuple[str, str]] = {
    "pg_get_keywords": ("", f"SELECT * FROM {PG_SCHEMA}.__keywords"),
}
# information_schema's functions (name -> (parameters, body)). _pg_expandarray(a) is
# PostgreSQL's set-returning (x, n): each element with its 1-based position; pgjdbc's
# getPrimaryKeys and getIndexInfo read keys with it.
INFO_MACROS: dict[str, tuple[str, str]] = {
    "_pg_expandarray": ("a", "struct_pack(x := unnest(a), "
                             "n := CAST(unnest(range(1, len(a) + 1)) AS INTEGER))"),
}
_REG_NAMESPACE_TYPES = {"regclass", "regtype", "regproc", "regprocedure", "regnamespace",
                        "regoper", "regoperator", "regrole", "regconfig", "regdictionary",
                        "regcollation"}
_PLAIN_TYPES = {
    "oid": "BIGINT", "xid": "BIGINT", "cid": "BIGINT", "tid": "VARCHAR", "name": "VARCHAR",
    '"char"': "VARCHAR", "char": "VARCHAR", "text": "VARCHAR", "bpchar": "VARCHAR",
    "varchar": "VARCHAR", "character varying": "VARCHAR", "int2": "SMALLINT",
    "int4": "INTEGER", "int8": "BIGINT", "float4": "FLOAT", "float8": "DOUBLE",
    "bool": "BOOLEAN", "int2vector": "SMALLINT[]", "oidvector": "BIGINT[]", "_text": "VARCHAR[]",
    "text[]": "VARCHAR[]", "name[]": "VARCHAR[]", "oid[]": "BIGINT[]", "_oid": "BIGINT[]",
    "aclitem[]": "VARCHAR[]", "aclitem": "VARCHAR", "pg_node_tree": "VARCHAR",
    "anyarray": "VARCHAR", "regclass[]": "BIGINT[]", "xid8": "BIGINT",
}


_DUCK_NAMES = {
    "int2": "SMALLINT", "smallint": "SMALLINT", "int4": "INTEGER", "int": "INTEGER",
    "integer": "INTEGER", "int8": "BIGINT", "bigint": "BIGINT", "float4": "FLOAT",
    "real": "FLOAT", "float8": "DOUBLE", "double precision": "DOUBLE", "numeric": "DOUBLE",
    "bool": "BOOLEAN", "boolean": "BOOLEAN", "date": "DATE", "timestamp": "TIMESTAMP",
    "timestamptz": "TIMESTAMPTZ", "timestamp with time zone": "TIMESTAMPTZ",
    "timestamp without time zone": "TIMESTAMP", "bytea": "BLOB", "json": "VARCHAR",
    "jsonb": "VARCHAR", "uuid": "UUID", "interval": "INTERVAL",
}


def _duck_type(name: str) -> str | None:
    """The DuckDB type for a PostgreSQL type name of a catalog query (None: leave it)."""
    name = name.strip().strip('"')
    if name.endswith("[]"):
        element = _duck_type(name[:-2])
        return f"{element or 'VARCHAR'}[]"
    if name.startswith("_") and name[1:] in _DUCK_NAMES:
        return f"{_DUCK_NAMES[name[1:]]}[]"
    if name in _PLAIN_TYPES:
        return _PLAIN_TYPES[name]
    if name in _REG_NAMESPACE_TYPES:
        return "BIGINT"
    return _DUCK_NAMES.get(name)


def _session_value(name: str, info: SessionInfo) -> exp.Expression | None:
    if name in ("current_user", "session_user", "user", "current_role"):
        return exp.Literal.string(info.user)
    if name in ("current_catalog", "current_database"):
        return exp.Literal.string(info.database)
    if name == "current_schema":
        return exp.Literal.string("public")
    if name == "version":
        return exp.Literal.string(info.version)
    if name == "pg_backend_pid":
        return exp.Literal.number(info.pid)
    if name in ("inet_server_addr", "inet_client_addr"):
        return exp.Literal.string("127.0.0.1")
    if name in ("inet_server_port", "inet_client_port"):
        return exp.Null()
    if name == "pg_postmaster_start_time":
        return exp.cast(exp.Literal.string(info.start_time.isoformat(sep=" ")), "TIMESTAMPTZ")
    return None


def _function(node: exp.Func, info: SessionInfo) -> exp.Expr:
    name = function_name(node)
    value = _session_value(name, info)
    if value is not None:
        return value
    args = node.expressions if isinstance(node, exp.Anonymous) else \
        [a for a in node.args.values() if isinstance(a, exp.Expression)]
    if isinstance(node, exp.Format):  # the format string, then its values
        args = [node.this, *node.expressions]
    if name == "current_setting":  # the session's settings, never the catalog engine's
        if not args or not isinstance(args[0], exp.Literal):
            return exp.Null()
        setting = info.settings.get(args[0].name.lower())
        return exp.Literal.string(setting) if setting is not None else exp.Null()
    if name == "current_schemas":
        implicit = bool(args) and isinstance(args[0], exp.Boolean) and args[0].this
        schemas = ["pg_catalog", "public"] if implicit else ["public"]
        return exp.Array(expressions=[exp.Literal.string(s) for s in schemas])
    if name == "format":
        return _format(node, args)
    if name == "json_build_object":  # variadic, so no macro: DuckDB's json_object
        return exp.Anonymous(this="json_object", expressions=[a.copy() for a in args])
    if name in _MACROS:
        call = node.copy() if isinstance(node, exp.Anonymous) else exp.Anonymous(
            this=name, expressions=[a.copy() for a in args])
        return exp.Dot(this=exp.to_identifier(PG_SCHEMA), expression=call)
    return node


def _format(node: exp.Func, args: list[exp.Expression]) -> exp.Expr:
    """PostgreSQL's ``format('%I.%I', a, b)`` as a concatenation: ``%s`` the value as text
    (NULL as nothing), ``%I`` quoted as an identifier where needed, ``%L`` as a literal,
    ``%%`` a percent sign. Only a constant format string (Metabase's field sync)."""
    if not args or not isinstance(args[0], exp.Literal) or not args[0].is_string:
        raise CatalogError("format() with a format string that is not a constant is not "
                           "supported in dpsql's catalog")
    text, values = args[0].name, list(args[1:])
    parts: list[exp.Expression] = []
    for literal, spec in re.findall(r"([^%]*)(%.|$)", text):
        if literal:
            parts.append(exp.Literal.string(literal))
        if spec == "%%":
            parts.append(exp.Literal.string("%"))
        elif spec in ("%s", "%I", "%L"):
            if not values:
                raise CatalogError("too few arguments for format()", "22023")
            value: exp.Expression = exp.cast(values.pop(0).copy(), "VARCHAR")
            if spec != "%s":
                macro = "quote_ident" if spec == "%I" else "quote_literal"
                value = exp.Dot(this=exp.to_identifier(PG_SCHEMA),
                                expression=exp.Anonymous(this=macro, expressions=[value]))
            parts.append(value)
        elif spec:
            raise CatalogError(f"format() specifier {spec} is not supported in dpsql's "
                               "catalog")
    return exp.Anonymous(this="concat", expressions=parts or [exp.Literal.string("")])
