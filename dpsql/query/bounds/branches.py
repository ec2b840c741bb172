"""Interval rules for CASE, IF, COALESCE, NULLIF and CAST: the union of what the branches can be."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from sqlglot import exp

from dpsql.errors import UnboundedExpression
from dpsql.metadata.metadata import Table
from dpsql.query.bounds.core import INF, Bound, apply, bound, condition, predicate, union

_INT_TYPES = {"TINYINT", "SMALLINT", "INT", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
              "UINT", "UBIGINT", "UHUGEINT"}
_FLOAT_TYPES = {"FLOAT", "DOUBLE", "DECIMAL", "REAL"}
_TEXT_TYPES = {"VARCHAR", "TEXT", "CHAR", "NVARCHAR", "NCHAR", "STRING"}


def _case(node: exp.Expression, table: Table) -> Bound:
    if node.this is not None:
        bound(node.this, table)
    for branch in node.args.get("ifs") or []:
        if node.this is not None:  # CASE x WHEN v: the engine compares x = v on every row
            predicate(exp.EQ(this=node.this.copy(), expression=branch.this.copy()), table)
        else:
            condition(branch.this, table)
    results = [bound(branch.args["true"], table) for branch in node.args.get("ifs") or []]
    default = node.args.get("default")
    results.append(bound(default, table) if default is not None else Bound("null"))
    return union(results)


def _if(node: exp.Expression, table: Table) -> Bound:
    condition(node.this, table)
    false = node.args.get("false")
    return union([bound(node.args["true"], table),
                   bound(false, table) if false is not None else Bound("null")])


def _coalesce(node: exp.Expression, table: Table) -> Bound:
    parts = [bound(e, table) for e in [node.this, *node.expressions]]
    merged = union(parts)
    return replace(merged, nullable=all(p.nullable for p in parts))


def _nullif(node: exp.Expression, table: Table) -> Bound:
    # NULLIF(a, b) compares a = b on every row: the same type rules as a comparison.
    predicate(exp.EQ(this=node.this.copy(), expression=node.expression.copy()), table)
    return replace(bound(node.this, table), nullable=True)


def _cast(node: exp.Expression, table: Table) -> Bound:
    assert isinstance(node, exp.Cast)  # dispatched from _RULES on exp.Cast / exp.TryCast only
    a = bound(node.this, table)
    target = node.to.this.value if isinstance(node.to.this, exp.DataType.Type) else str(node.to)
    target = str(target).upper()
    nullable = True  # TRY_CAST: a value that does not convert becomes NULL
    if target in _INT_TYPES:
        if a.kind == "text":
            return Bound("int", -INF, INF, nullable)
        return Bound("int", apply(math.floor, a.lo), apply(math.ceil, a.hi), nullable)
    if target in _FLOAT_TYPES:
        return Bound("float", a.lo, a.hi, nullable) if a.numeric else Bound("float", -INF, INF,
                                                                            nullable)
    if target in _TEXT_TYPES:
        return Bound("text", nullable=nullable)
    if target == "BOOLEAN":
        return Bound("bool", 0.0, 1.0, nullable)
    if target in ("DATE", "TIMESTAMP"):
        return Bound(target.lower(), nullable=nullable)
    if target == "TIMESTAMPTZ":
        raise UnboundedExpression(
            "CAST to TIMESTAMPTZ (TIMESTAMP WITH TIME ZONE) is not supported: its value would "
            "depend on the session's time zone; dpsql reads every timestamp in UTC, so cast to "
            "TIMESTAMP instead")
    raise UnboundedExpression(f"CAST to {target} is not supported; cast to INTEGER, BIGINT, "
                              "DOUBLE, DECIMAL, VARCHAR, BOOLEAN, DATE or TIMESTAMP")


RULES: dict[type, Callable[[exp.Expression, Table], Bound]] = {
    exp.Case: _case,
    exp.If: _if,
    exp.Coalesce: _coalesce,
    exp.Nullif: _nullif,
    exp.Cast: _cast,
    exp.TryCast: _cast,
}
