"""Interval rules for arithmetic and numeric functions."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from sqlglot import exp

from dpsql.errors import UnboundedExpression
from dpsql.metadata.metadata import Table
from dpsql.query.bounds.core import INF, INT_LIMIT, Bound, apply, bound, literal_value, num, union
from dpsql.query.dates import written


def _arith(op: Callable[[float, float], float], int_result: bool = True
           ) -> Callable[[exp.Expression, Table], Bound]:
    def rule(node: exp.Expression, table: Table) -> Bound:
        a, b = num(node.this, table), num(node.expression, table)
        corners = [_safe(op, x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
        kind = "int" if int_result and a.kind != "float" and b.kind != "float" else "float"
        return Bound(kind, min(corners), max(corners), a.nullable or b.nullable)
    return rule


def _safe(op: Callable[[float, float], float], x: float, y: float) -> float:
    if (x == 0 and math.isinf(y)) or (y == 0 and math.isinf(x)):
        return 0.0  # 0 * inf is 0 in interval arithmetic
    result = op(x, y)
    return 0.0 if math.isnan(result) else result


def _div(node: exp.Expression, table: Table) -> Bound:
    a, b = num(node.this, table), num(node.expression, table)
    if isinstance(node, exp.IntDiv):
        _no_overflow_by_minus_one(node, a, b)
    if b.lo <= 0 <= b.hi:  # dividing by a value near zero: unbounded, NULL at zero exactly
        return Bound("float", nullable=True)
    corners = [_safe(lambda x, y: x / y, x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    kind = "int" if isinstance(node, exp.IntDiv) and a.kind == b.kind == "int" else "float"
    lo, hi = min(corners), max(corners)
    if kind == "int":  # an infinite corner stays infinite (and bound() refuses it if needed)
        lo, hi = apply(math.floor, lo), apply(math.ceil, hi)
    return Bound(kind, lo, hi, a.nullable or b.nullable)


def _no_overflow_by_minus_one(node: exp.Expression, a: Bound, b: Bound) -> None:
    """The engine overflows on (smallest 64-bit integer) // -1 and % -1: an error that only the
    rows holding that value cause. Refused when the dividend has no lower bound."""
    if a.kind == "int" and a.lo < -INT_LIMIT and b.lo <= -1 <= b.hi:
        raise UnboundedExpression(
            f"{written(node)}: the divisor can be -1 and the dividend has no lower "
            "bound; declare bounds for its columns in the metadata or use a positive divisor")


def _mod(node: exp.Expression, table: Table) -> Bound:
    a, b = num(node.this, table), num(node.expression, table)
    _no_overflow_by_minus_one(node, a, b)
    m = b.magnitude
    lo = 0.0 if a.lo >= 0 else -m
    hi = 0.0 if a.hi <= 0 else m
    return Bound("int" if a.kind == b.kind == "int" else "float", lo, hi, True)


def _neg(node: exp.Expression, table: Table) -> Bound:
    a = num(node.this, table)
    return replace(a, kind="int" if a.kind == "bool" else a.kind, lo=-a.hi, hi=-a.lo)


def _abs(node: exp.Expression, table: Table) -> Bound:
    a = num(node.this, table)
    lo = 0.0 if a.lo <= 0 <= a.hi else min(abs(a.lo), abs(a.hi))
    return replace(a, kind="int" if a.kind == "bool" else a.kind, lo=lo, hi=a.magnitude)


def _monotone(f: Callable[[float], float], kind: str | None = None, domain_lo: float = -INF
              ) -> Callable[[exp.Expression, Table], Bound]:
    """A non-decreasing function; inputs below ``domain_lo`` give NULL."""
    def rule(node: exp.Expression, table: Table) -> Bound:
        a = num(node.this, table)
        lo, hi = apply(f, max(a.lo, domain_lo)), apply(f, max(a.hi, domain_lo))
        return Bound(kind or ("float" if a.kind == "float" else "int"), lo, hi,
                     a.nullable or a.lo < domain_lo)
    return rule


def _round(node: exp.Expression, table: Table) -> Bound:
    a = num(node.this, table)
    digits = node.args.get("decimals")
    places = 0
    if digits is not None:
        value = literal_value(digits, "ROUND's number of digits")
        if not float(value).is_integer():
            raise UnboundedExpression("ROUND's number of digits must be a whole-number literal")
        places = int(value)
    if abs(places) > 300:
        raise UnboundedExpression("ROUND's number of digits must be between -300 and 300")
    step = 10.0 ** -places
    return Bound(a.kind if places <= 0 or a.kind == "int" else "float",
                 apply(lambda x: math.floor(x / step) * step, a.lo),
                 apply(lambda x: math.ceil(x / step) * step, a.hi), a.nullable)


def _log(node: exp.Expression, table: Table) -> Bound:
    base_node, arg = (node.this, node.expression) if node.expression else (None, node.this)
    base = 10.0 if base_node is None else literal_value(base_node, "LOG's base")
    if base <= 1:
        raise UnboundedExpression("LOG's base must be a literal greater than 1")
    sub = exp.Ln(this=arg)
    b = _monotone(math.log, "float", 0.0)(sub, table)
    return replace(b, lo=b.lo / math.log(base), hi=b.hi / math.log(base))


def _pow(node: exp.Expression, table: Table) -> Bound:
    a = num(node.this, table)
    p = literal_value(node.expression, "the exponent of POWER")
    if float(p).is_integer() and 0 <= p <= 16:
        values = [apply(lambda x: x**p, v) for v in (a.lo, a.hi)]
        lo = 0.0 if p % 2 == 0 and a.lo <= 0 <= a.hi else min(values)
        return Bound("float", lo, max(values), a.nullable)
    if a.lo >= 0 and p > 0:
        return Bound("float", apply(lambda x: x**p, a.lo), apply(lambda x: x**p, a.hi),
                     a.nullable)
    raise UnboundedExpression("POWER needs a whole-number exponent from 0 to 16, or a "
                              "non-negative base and a positive exponent")


def _sign(node: exp.Expression, table: Table) -> Bound:
    a = num(node.this, table)
    return Bound("int", -1.0 if a.lo < 0 else 0.0 if a.lo == 0 else 1.0,
                 1.0 if a.hi > 0 else 0.0 if a.hi == 0 else -1.0, a.nullable)


def _extremum(node: exp.Expression, table: Table) -> Bound:
    parts = [bound(e, table) for e in [node.this, *node.expressions]]
    if not all(p.numeric for p in parts):
        return union(parts)
    pick = max if isinstance(node, exp.Greatest) else min
    kind = "float" if any(p.kind == "float" for p in parts) else "int"
    return Bound(kind, pick(p.lo for p in parts), pick(p.hi for p in parts),
                 all(p.nullable for p in parts))


RULES: dict[type, Callable[[exp.Expression, Table], Bound]] = {
    exp.Add: _arith(lambda x, y: x + y),
    exp.Sub: _arith(lambda x, y: x - y),
    exp.Mul: _arith(lambda x, y: x * y),
    exp.Div: _div,
    exp.IntDiv: _div,
    exp.Mod: _mod,
    exp.Neg: _neg,
    exp.Abs: _abs,
    exp.Round: _round,
    exp.Floor: _monotone(math.floor),
    exp.Ceil: _monotone(math.ceil),
    exp.Sqrt: _monotone(math.sqrt, "float", 0.0),
    exp.Ln: _monotone(math.log, "float", 0.0),
    exp.Log: _log,
    exp.Exp: _monotone(math.exp, "float"),
    exp.Pow: _pow,
    exp.Sign: _sign,
    exp.Least: _extremum,
    exp.Greatest: _extremum,
}
