"""The rewrite of a catalog query (PostgreSQL, parsed by sqlglot) into DuckDB SQL over the
catalog: ``pg_catalog.X`` and ``information_schema.X`` name the tables here, per-session tables
become VALUES lists, casts and functions become lookups, macros or literals."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from dpsql.server.catalog.casts import _array_cast, _cast, _is_quantified, _quantified
from dpsql.server.catalog.functions import INFO_MACROS, TABLE_MACROS, _function, _session_value
from dpsql.server.catalog.model import CatalogError, SessionInfo
from dpsql.server.catalog.tables import (
    ANALYST_OID,
    DATABASE_OID,
    INFO_TABLES,
    IS_SCHEMA,
    OWNER,
    OWNER_OID,
    PG_SCHEMA,
    SESSION_TABLES,
    TABLES,
)
from dpsql.server.wire import types as t


def rewrite(tree: exp.Expr, info: SessionInfo) -> exp.Expr:
    """Rewrite bottom-up (children before their parents)."""
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for node in reversed(list(tree.dfs())):
        new = _rewrite_node(node, ctes, info)
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


def _rewrite_node(node: exp.Expr, ctes: set[str],
                  info: SessionInfo) -> exp.Expr:
    if isinstance(node, exp.Table):
        return _table(node, ctes, info)
    if isinstance(node, exp.Cast):  # (a Cast is a Func too)
        return _array_cast(node) or _cast(node)
    if _is_quantified(node):
        return _quantified(node)
    if isinstance(node, exp.Dot) and isinstance(node.this, exp.Identifier) and \
            node.this.name.lower() == "pg_catalog" and isinstance(node.expression, exp.Func):
        return _function(node.expression, info)
    if isinstance(node, exp.Dot) and isinstance(node.this, exp.Identifier) and \
            node.this.name.lower() == "information_schema" and \
            isinstance(node.expression, exp.Anonymous) and \
            node.expression.name.lower() in INFO_MACROS:
        node.set("this", exp.to_identifier(IS_SCHEMA))
        return node
    if isinstance(node, exp.Func) and not isinstance(node.parent, exp.Dot):
        return _function(node, info)
    if isinstance(node, exp.Collate):
        collated: exp.Expr = node.this
        return collated
    if isinstance(node, exp.Column):
        return _column(node, info)
    return node


def _table(node: exp.Table, ctes: set[str], info: SessionInfo) -> exp.Expression:
    schema, name = node.db.lower(), node.name.lower()
    function = node.this.name.lower() if isinstance(node.this, exp.Anonymous) else None
    if function in TABLE_MACROS and schema in ("", "pg_catalog"):  # pg_get_keywords()
        node.set("db", exp.to_identifier(PG_SCHEMA))
        node.set("catalog", None)
        return node
    if not name and schema == "pg_catalog":  # a table function: generate_series, unnest
        node.set("db", None)
        node.set("catalog", None)
        return node
    if not name or (not schema and name in ctes):
        return node
    if schema in ("", "pg_catalog") and name in TABLES:
        if name in SESSION_TABLES:
            return _session_table(name, node, info)
        node.set("db", exp.to_identifier(PG_SCHEMA))
        node.set("catalog", None)
    elif schema == "information_schema" and name in INFO_TABLES:
        return _info_table(name, node, info)
    elif schema in ("pg_catalog", "information_schema"):
        # decided here, before running: pg_stats and its kin would hold data
        raise CatalogError(f"{schema}.{name} is not supported in dpsql's catalog")
    return node


# -- rewriting pieces ------------------------------------------------------------------------

_BARE_FUNCTIONS = {"current_user", "session_user", "user", "current_role", "current_catalog",
                   "current_schema"}


def _column(node: exp.Column, info: SessionInfo) -> exp.Expression:
    if not node.table and isinstance(node.this, exp.Identifier) and not node.this.quoted and \
            node.name.lower() in _BARE_FUNCTIONS:
        return _session_value(node.name.lower(), info) or node
    schema = node.db.lower()
    if schema in ("pg_catalog", "information_schema"):
        if node.table.lower() in (SESSION_TABLES if schema == "pg_catalog" else INFO_TABLES):
            node.set("db", None)
        else:
            node.set("db", exp.to_identifier(PG_SCHEMA if schema == "pg_catalog" else IS_SCHEMA))
        node.set("catalog", None)
    return node


def _session_table(name: str, node: exp.Table, info: SessionInfo) -> exp.Expression:
    columns = [c.split()[0] for c in _split_columns(TABLES[name])]
    types = [" ".join(c.split()[1:]) for c in _split_columns(TABLES[name])]
    rows = _session_rows(name, info)
    selects = []
    for row in rows or [tuple(None for _ in columns)]:
        values = ", ".join(f"CAST({_sql_value(v)} AS {ty}) AS {c}"
                           for v, c, ty in zip(row, columns, types, strict=True))
        selects.append(f"SELECT {values}")
    body = " UNION ALL ".join(selects)
    if not rows:
        body += " LIMIT 0"
    alias = node.alias or name
    subquery = sqlglot.parse_one(f"({body})", read="duckdb")
    return exp.Subquery(this=subquery.this if isinstance(subquery, exp.Subquery) else subquery,
                        alias=exp.TableAlias(this=exp.to_identifier(alias)))


# information_schema columns naming the database ("catalog" in SQL's words) of an object.
_CATALOG_COLUMNS = {"catalog_name", "table_catalog", "constraint_catalog", "udt_catalog",
                    "unique_constraint_catalog", "specific_catalog", "routine_catalog",
                    "sequence_catalog", "trigger_catalog", "event_object_catalog"}


def _info_table(name: str, node: exp.Table, info: SessionInfo) -> exp.Expression:
    """An information_schema view with its catalog columns (``table_catalog``, ...) set to the
    session's database, as PostgreSQL does: the catalog is shared by sessions that connected to
    databases of different names, and tools (harlequin) build their tree from these columns
    and compare them with ``current_database()``."""
    columns = [c.split()[0] for c in _split_columns(INFO_TABLES[name])]
    database = t.string_literal(info.database)
    replaced = ", ".join(f"{database} AS {c}" for c in columns if c in _CATALOG_COLUMNS)
    star = f"* REPLACE ({replaced})" if replaced else "*"
    subquery = sqlglot.parse_one(f"(SELECT {star} FROM {IS_SCHEMA}.{name})", read="duckdb")
    return exp.Subquery(this=subquery.this if isinstance(subquery, exp.Subquery) else subquery,
                        alias=exp.TableAlias(this=exp.to_identifier(node.alias or name)))


def _split_columns(spec: str) -> list[str]:
    return [c.strip() for c in spec.split(",")]


def _sql_value(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return t.string_literal(str(value))


def _session_rows(name: str, info: SessionInfo) -> list[tuple[object, ...]]:
    if name == "pg_database":
        return [(DATABASE_OID, info.database, OWNER_OID, 6, "c", False, True, -1, 0, 0, 1663,
                 "C", "C", None, None, None, None)]
    if name in ("pg_roles", "pg_authid"):
        # the analyst, and the owner of every table (pg_class.relowner)
        return [(ANALYST_OID, info.user, False, True, False, False, True, False, -1,
                 "********", None, False, None),
                (OWNER_OID, OWNER, False, True, False, False, False, False, -1, "********",
                 None, False, None)]
    if name == "pg_user":
        return [(info.user, ANALYST_OID, False, False, False, False, "********", None, None)]
    if name == "pg_settings":
        return [(k, v, None, "dpsql", "", None, "user", "string", "session", None, None, None,
                 v, v, None, None, False) for k, v in sorted(info.settings.items())]
    if name == "pg_stat_activity":
        return [(DATABASE_OID, info.database, info.pid, ANALYST_OID, info.user,
                 info.settings.get("application_name", ""), None, None, "active", "",
                 "client backend")]
    return []

