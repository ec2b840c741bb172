"""PostgreSQL's names: of a function call as sqlglot parsed it, of a query's output columns.

Every door names a select item the analyst gave no alias as PostgreSQL does (``count``,
``sum``, ``date_trunc``, ``?column?`` for arithmetic): the library's results (the command
line's header, the DB-API's description, stored answers) through :func:`output_name`, the
server's row descriptions through :func:`pg_column_names`. A function is named as it was
written (:func:`remember_names` at parse time: ``VAR_SAMP`` and ``VARIANCE`` are one node
in sqlglot, two names in PostgreSQL); an alias or a bare column keeps its own name.
"""

from __future__ import annotations

import re

from sqlglot import exp

_FUNCTION_NAMES: dict[type, str] = {
    exp.CurrentUser: "current_user", exp.CurrentSchema: "current_schema",
    exp.SessionUser: "session_user", exp.CurrentDatabase: "current_database",
    exp.CurrentCatalog: "current_catalog", exp.CurrentVersion: "version",
    exp.GroupConcat: "string_agg", exp.TimestampTrunc: "date_trunc",
    exp.DateTrunc: "date_trunc",
}


#: The meta key of a function's name as written (:func:`remember_names`).
_WRITTEN = "written_name"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def remember_names(tree: exp.Expr, sql: str) -> None:
    """Keep, on each function call of ``tree`` (parsed from ``sql``), its name as written,
    lower case: sqlglot keeps where the name's token was, not the name."""
    for node in tree.find_all(exp.Func):
        meta = getattr(node, "_meta", None)  # read without creating it (node.meta would)
        start, end = (meta.get("start"), meta.get("end")) if meta else (None, None)
        if isinstance(start, int) and isinstance(end, int):
            name = sql[start:end + 1]
            if _IDENTIFIER.fullmatch(name):
                node.meta[_WRITTEN] = name.lower()


def function_name(node: exp.Func) -> str:
    """The PostgreSQL name of a function call as sqlglot parsed it (as written, when
    :func:`remember_names` saw it)."""
    meta = getattr(node, "_meta", None)
    if meta and meta.get(_WRITTEN):
        return str(meta[_WRITTEN])
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


def readable_names(tree: exp.Expression, described: list[str]) -> list[str]:
    """The names of ``tree``'s output columns read by the engine as written (DuckDB's
    ``described``: ``count_star()``, ``(age + 1)``), each select item without an alias named
    by :func:`output_name` instead, as every other answer's; ``described`` as it is when a
    ``*`` is involved (the engine expanded it)."""
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    if not isinstance(select, exp.Select) or len(select.expressions) != len(described) or \
            pg_column_names(select) is None:
        return list(described)
    return [output_name(e) for e in select.expressions]


def output_name(projection: exp.Expression) -> str:
    """A select item's column name in a library result: its alias or its column's name as
    written, else PostgreSQL's name for it (``count``, ``avg``, ``?column?``)."""
    if isinstance(projection, exp.Alias | exp.Column) and not isinstance(projection.this,
                                                                          exp.Star):
        return projection.alias_or_name
    return pg_name(projection) or projection.sql(dialect="duckdb")


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

