"""Casts and literals of a catalog query: ``regclass``/``regtype``/``oid``/``name`` casts as
lookups or plain types, PostgreSQL array literals as DuckDB lists."""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from dpsql.query.parameters import parse_array_literal
from dpsql.server.catalog.functions import _REG_NAMESPACE_TYPES, _duck_type
from dpsql.server.catalog.model import CatalogError
from dpsql.server.catalog.names import _type_name
from dpsql.server.catalog.tables import PG_SCHEMA


def _cast(node: exp.Cast) -> exp.Expr:
    """Casts to PostgreSQL's catalog types. Runs bottom-up: a cast to regclass (or regtype,
    regnamespace) becomes an oid and remembers it in ``meta``, so that an enclosing cast to text
    can turn the oid back into the name."""
    to = node.args.get("to")
    if to is None:
        return node
    target = _type_name(to)
    inner = node.this
    reg = inner.meta.get("reg") if isinstance(inner, exp.Expression) else None
    if target in ("text", "varchar", "name", "character varying") and reg:
        if "reg_literal" in inner.meta:
            return exp.Literal.string(inner.meta["reg_literal"])
        original = inner.meta["reg_source"]
        if reg == "regclass":
            return _lookup_name(original, "pg_class", "relname")
        if reg == "regtype":
            return _format_type(original)
        if reg == "regnamespace":
            return _lookup_name(original, "pg_namespace", "nspname")
        return exp.cast(original, "VARCHAR")
    new: exp.Expr
    if target in ("regclass", "regnamespace", "regtype"):
        if isinstance(inner, exp.Literal) and inner.is_string:
            table, column = {"regclass": ("pg_class", "relname"),
                             "regnamespace": ("pg_namespace", "nspname"),
                             "regtype": ("pg_type", "typname")}[target]
            name = _unqualify(inner.name)
            new = _lookup_oid(name, table, column)
            new.meta["reg_literal"] = name
        elif _is_text(inner):  # format('%I.%I', schema, name)::regclass (Metabase)
            table, column = {"regclass": ("pg_class", "relname"),
                             "regnamespace": ("pg_namespace", "nspname"),
                             "regtype": ("pg_type", "typname")}[target]
            new = _lookup_oid_of(inner, table, column)
            new.meta["reg_source"] = inner.copy()
        else:
            new = exp.cast(inner.copy(), "BIGINT")
            new.meta["reg_source"] = inner.copy()
        new.meta["reg"] = target
        return new
    if target in ("regproc", "regprocedure"):
        if isinstance(inner, exp.Literal) and inner.is_string:
            return exp.Literal.string(_unqualify(inner.name))
        return exp.cast(inner, "VARCHAR")
    if target in _REG_NAMESPACE_TYPES:
        return exp.cast(inner, "BIGINT")
    duck = _duck_type(target)
    if duck is not None:
        return exp.cast(inner, duck)
    return node


def _array_cast(node: exp.Cast) -> exp.Expr | None:
    """``'{r,p}'::char[]``: a PostgreSQL array literal, as a DuckDB list of that type."""
    to = node.args.get("to")
    if to is None or not _is_string(node.this):
        return None
    target = _type_name(to)
    if not target.endswith("[]") and not (isinstance(to, exp.DataType) and
                                          to.is_type(exp.DataType.Type.ARRAY)):
        return None
    return exp.cast(_array(node.this.name), _duck_type(target) or "VARCHAR[]")


def _is_quantified(node: exp.Expr) -> bool:
    return isinstance(node, exp.Any | exp.All) or (
        isinstance(node, exp.Anonymous) and node.name.upper() in ("ANY", "ALL", "SOME"))


def _quantified(node: exp.Expr) -> exp.Expr:
    """``= ANY('{r,p}')`` (a literal, or a parameter bound as one): the text is an array
    literal, as in PostgreSQL, not a string to unnest (DuckDB refuses that, and the refusal used
    to turn into an empty answer)."""
    args = node.expressions if isinstance(node, exp.Anonymous) else [node.this]
    for arg in args:
        inner = arg.this if isinstance(arg, exp.Paren) else arg
        if _is_string(inner):
            inner.replace(_array(inner.name))
    return node


def _is_string(node: object) -> bool:
    return isinstance(node, exp.Literal) and node.is_string


def _array(text: str) -> exp.Expression:
    try:
        items = parse_array_literal(text)
    except ValueError as e:
        raise CatalogError(f"malformed array literal: {e}", "22P02") from None
    return _array_of(items)


def _array_of(items: list[Any]) -> exp.Expression:
    return exp.Array(expressions=[
        exp.Null() if item is None else _array_of(item) if isinstance(item, list)
        else exp.Literal.string(item) for item in items])


def _unqualify(name: str) -> str:
    last = name.split(".")[-1].strip()
    if last.startswith('"') and last.endswith('"'):
        return last[1:-1].replace('""', '"')
    return last.lower()


def _lookup_oid(name: str, table: str, column: str) -> exp.Expr:
    return sqlglot.parse_one(
        f"(SELECT x.oid FROM {PG_SCHEMA}.{table} x WHERE x.{column} = "
        f"{exp.Literal.string(name).sql('duckdb')} LIMIT 1)", read="duckdb")


def _is_text(node: exp.Expression) -> bool:
    """Whether a catalog query's expression is text by its form (a concatenation, or a cast
    to text): cast to regclass, it names a relation rather than giving its oid."""
    if isinstance(node, exp.DPipe | exp.Concat) or (
            isinstance(node, exp.Anonymous) and node.name.lower() == "concat"):
        return True
    to = node.args.get("to") if isinstance(node, exp.Cast) else None
    return to is not None and _type_name(to) in ("text", "varchar", "name")


def _lookup_oid_of(text: exp.Expression, table: str, column: str) -> exp.Expr:
    """The oid of the object a text names (``schema.name``, either part quoted): the last
    part, unquoted; NULL when there is none."""
    query = sqlglot.parse_one(
        f"(SELECT x.oid FROM {PG_SCHEMA}.{table} x WHERE x.{column} = "
        "replace(trim(regexp_extract(__t, '(\"(?:[^\"]|\"\")*\"|[^.]*)$'), '\"'), "
        "'\"\"', '\"') LIMIT 1)", read="duckdb")
    for col in list(query.find_all(exp.Column)):
        if col.name == "__t":
            col.replace(text.copy())
    return query


def _lookup_name(oid: exp.Expression, table: str, column: str) -> exp.Expr:
    if isinstance(oid, exp.Literal) and oid.is_string:
        return exp.Literal.string(_unqualify(oid.name))
    query = sqlglot.parse_one(
        f"(SELECT coalesce(max(x.{column}), CAST(__o AS VARCHAR)) FROM {PG_SCHEMA}.{table} x "
        f"WHERE x.oid = __o)", read="duckdb")
    for col in list(query.find_all(exp.Column)):
        if col.name == "__o":
            col.replace(oid.copy())
    return query


def _format_type(oid: exp.Expression) -> exp.Expression:
    if isinstance(oid, exp.Literal) and oid.is_string:
        return exp.Literal.string(_unqualify(oid.name))
    return exp.Dot(this=exp.to_identifier(PG_SCHEMA), expression=exp.Anonymous(
        this="format_type", expressions=[oid.copy(), exp.Null()]))

