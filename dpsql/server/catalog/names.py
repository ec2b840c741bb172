"""PostgreSQL's names: of a function call as sqlglot parsed it, of a query's output columns."""

from __future__ import annotations

import re

from sqlglot import exp

_FUNCTION_NAMES: dict[type, str] = {
    exp.CurrentUser: "current_user", exp.CurrentSchema: "current_schema",
    exp.SessionUser: "session_user", exp.CurrentDatabase: "current_database",
    exp.CurrentCatalog: "current_catalog", exp.CurrentVersion: "version",
    exp.GroupConcat: "string_agg",
}


def function_name(node: exp.Func) -> str:
    """The PostgreSQL name of a function call as sqlglot parsed it."""
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    for cls, name in _FUNCTION_NAMES.items():
        if isinstance(node, cls):
            return name
    return node.sql_name().lower()


def _type_name(to: exp.Expression) -> str:
    text = to.sql(dialect="postgres").lower()
    text = re.sub(r"\bpg_catalog\.", "", text)
    return text.strip()


# -- names -----------------------------------------------------------------------------------


def pg_column_names(tree: exp.Expression) -> list[str] | None:
    """PostgreSQL's output column names of a SELECT (None when a * is involved)."""
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    if not isinstance(select, exp.Select):
        return None
    names = []
    for projection in select.expressions:
        name = pg_name(projection)
        if name is None:
            return None
        names.append(name)
    return names


def pg_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Star) or (isinstance(node, exp.Column) and
                                      isinstance(node.this, exp.Star)):
        return None
    if isinstance(node, exp.Alias):
        return _identifier(node.args["alias"])
    if isinstance(node, exp.Column):
        return _identifier(node.this)
    if isinstance(node, exp.Dot):
        return pg_name(node.expression)
    if isinstance(node, exp.Cast):
        inner = pg_name(node.this)
        if inner and inner != "?column?":
            return inner
        to = node.args.get("to")
        return _PG_TYPE_COLUMN.get(_type_name(to), "?column?") if to is not None else "?column?"
    if isinstance(node, exp.Paren):
        return pg_name(node.this)
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Boolean):
        return "bool"
    if isinstance(node, exp.Func):
        return function_name(node)
    return "?column?"


_PG_TYPE_COLUMN = {"int": "int4", "integer": "int4", "bigint": "int8", "smallint": "int2",
                   "text": "text", "varchar": "varchar", "boolean": "bool", "date": "date",
                   "double precision": "float8", "real": "float4", "numeric": "numeric"}


def _identifier(node: exp.Expression) -> str:
    if isinstance(node, exp.Identifier):
        return node.name if node.quoted else node.name.lower()
    return node.name.lower()

