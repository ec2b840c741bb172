"""Interval arithmetic over row-level SQL expressions, from the declared column bounds.

``bound(expression, table)`` returns a :class:`Bound`: the kind of value (int, float, bool, text,
date), an interval [lo, hi] that contains every value the expression can take on a row whose
columns were clamped to their declared bounds, and whether it can be NULL. It never reads data.

This module is also the allow list of row-level SQL: a node type without a rule here is refused
with :class:`ForbiddenFunction`. The rewrite pass makes each allowed node *total* (no error for any
row: TRY_CAST, NULL on division by zero), so the intervals below hold for all rows, and an error
can never depend on private values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from sqlglot import exp

from dpsql.errors import ForbiddenFunction, UnboundedExpression
from dpsql.metadata import Table

INF = math.inf
INT_LIMIT = 2.0**62  # integer expressions must stay well inside int64
#: Largest magnitude of an aggregated value: its square times 1e100 rows still fits a double.
MAX_AGGREGATED = 1e100
_INT_TYPES = {"TINYINT", "SMALLINT", "INT", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
              "UINT", "UBIGINT", "UHUGEINT"}
_FLOAT_TYPES = {"FLOAT", "DOUBLE", "DECIMAL", "REAL"}
_TEXT_TYPES = {"VARCHAR", "TEXT", "CHAR", "NVARCHAR", "NCHAR", "STRING"}
_DATE_PARTS: dict[str, tuple[float, float] | None] = {
    "year": None, "month": (1, 12), "day": (1, 31), "dayofweek": (0, 6), "dow": (0, 6),
    "isodow": (1, 7), "dayofyear": (1, 366), "doy": (1, 366), "quarter": (1, 4),
    "week": (1, 53), "hour": (0, 23), "minute": (0, 59)}


@dataclass(frozen=True)
class Bound:
    kind: str  # "int", "float", "bool", "text", "date", "null"
    lo: float = -INF
    hi: float = INF
    nullable: bool = False

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "float", "bool")

    @property
    def finite(self) -> bool:
        return math.isfinite(self.lo) and math.isfinite(self.hi)

    @property
    def magnitude(self) -> float:
        """max |v| over the interval."""
        return max(abs(self.lo), abs(self.hi))


def bound(node: exp.Expression, table: Table) -> Bound:
    """The bound of a row-level expression over ``table``'s (clamped) columns."""
    rule = _RULES.get(type(node))
    if rule is None:
        raise ForbiddenFunction(
            f"{_name(node)} is not allowed in dpsql queries (in {node.sql(dialect='duckdb')}); "
            "use arithmetic, CASE, COALESCE, CAST, comparisons, LEAST/GREATEST, ABS, ROUND and "
            "the other documented row-level functions")
    result = rule(node, table)
    if result.kind == "int" and (result.lo < -INT_LIMIT or result.hi > INT_LIMIT) and \
            _is_arithmetic(node):
        if not result.finite and _unbounded_columns(node, table):
            # Name the column that needs bounds, as for any expression without a bound.
            raise UnboundedExpression(
                f"the range of {node.sql(dialect='duckdb')} cannot be derived from the declared "
                f"bounds{_missing_bounds(node, table)}")
        raise UnboundedExpression(
            f"{node.sql(dialect='duckdb')} can exceed the 64-bit integer range; declare bounds "
            "for its columns in the metadata or CAST it to DOUBLE")
    return result


def numeric_bound(node: exp.Expression, table: Table, what: str) -> Bound:
    """The bound of an expression that an aggregate sums: it must be numeric and finite."""
    b = bound(node, table)
    if not b.numeric:
        raise UnboundedExpression(f"{what}: {node.sql(dialect='duckdb')} is {b.kind}, "
                                  "not a number; aggregate a numeric expression")
    if not b.finite:
        raise UnboundedExpression(
            f"{what}: the range of {node.sql(dialect='duckdb')} cannot be derived from the "
            f"declared bounds{_missing_bounds(node, table)}; clamp it with LEAST/GREATEST")
    if b.magnitude > MAX_AGGREGATED:
        # A sum (of squares, for VAR) of such values overflows a double on some data only:
        # the engine would return an infinity, and the answer an error, that depend on the data.
        raise UnboundedExpression(
            f"{what}: {node.sql(dialect='duckdb')} can reach {b.magnitude:.3g}, beyond the "
            f"{MAX_AGGREGATED:.0e} that an aggregate accepts; scale it down (e.g. divide it)")
    return b


def _unbounded_columns(node: exp.Expression, table: Table) -> list[str]:
    missing = []
    for col in node.find_all(exp.Column):
        meta = table.column(col.name)
        if meta is not None and meta.numeric and not meta.bounded:
            missing.append(col.name)
    return missing


def _missing_bounds(node: exp.Expression, table: Table) -> str:
    missing = _unbounded_columns(node, table)
    if missing:
        return (f" (column {', '.join(sorted(set(missing)))} of table {table.name!r} needs "
                "lower and upper bounds in the metadata)")
    return " (a division by a range that contains zero, or a log of zero, is unbounded)"


def _name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return f"function {str(node.this).upper()}()"
    if isinstance(node, exp.Func):
        return f"function {node.sql_name()}()"
    return f"{type(node).__name__} expression"


def _is_arithmetic(node: exp.Expression) -> bool:
    # ROUND(x, -k) of an integer overflows when it rounds past the 64-bit range.
    return isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Neg | exp.Abs | exp.Pow |
                      exp.IntDiv | exp.Mod | exp.Round)


# ----------------------------------------------------------------------------- rules


def _column(node: exp.Expression, table: Table) -> Bound:
    meta = table.column(node.name)
    if meta is None:  # bind resolved every column; anything left is an output alias
        raise UnboundedExpression(f"{node.sql(dialect='duckdb')} is not a column of "
                                  f"{table.name!r} here")
    nullable = meta.nullable or meta.type == "float"  # NaN is read as NULL
    if meta.type in ("int", "float"):
        lo, hi = (meta.lower, meta.upper) if meta.bounded else (-INF, INF)
        return Bound(meta.type, float(lo), float(hi), nullable)  # type: ignore[arg-type]
    if meta.type == "bool":
        return Bound("bool", 0.0, 1.0, nullable)
    return Bound(meta.type, nullable=nullable)


def _literal(node: exp.Expression, table: Table) -> Bound:
    if node.is_string:
        return Bound("text")
    value = float(node.this)
    kind = "int" if node.is_int else "float"
    return Bound(kind, value, value)


def _arith(op: Callable[[float, float], float], int_result: bool = True
           ) -> Callable[[exp.Expression, Table], Bound]:
    def rule(node: exp.Expression, table: Table) -> Bound:
        a, b = _num(node.this, table), _num(node.expression, table)
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
    a, b = _num(node.this, table), _num(node.expression, table)
    if b.lo <= 0 <= b.hi:  # dividing by a value near zero: unbounded, NULL at zero exactly
        return Bound("float", nullable=True)
    corners = [_safe(lambda x, y: x / y, x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    kind = "int" if isinstance(node, exp.IntDiv) and a.kind == b.kind == "int" else "float"
    lo, hi = min(corners), max(corners)
    if kind == "int":
        lo, hi = math.floor(lo), math.ceil(hi)
    return Bound(kind, lo, hi, a.nullable or b.nullable)


def _mod(node: exp.Expression, table: Table) -> Bound:
    a, b = _num(node.this, table), _num(node.expression, table)
    if a.kind == "int" and a.lo < -INT_LIMIT and b.lo <= -1 <= b.hi:
        # The engine overflows on (smallest 64-bit integer) % -1: an error only some rows cause.
        raise UnboundedExpression(
            f"{node.sql(dialect='duckdb')}: the divisor can be -1 and the dividend has no lower "
            "bound; declare bounds for its columns in the metadata or use a positive divisor")
    m = b.magnitude
    lo = 0.0 if a.lo >= 0 else -m
    hi = 0.0 if a.hi <= 0 else m
    return Bound("int" if a.kind == b.kind == "int" else "float", lo, hi, True)


def _neg(node: exp.Expression, table: Table) -> Bound:
    a = _num(node.this, table)
    return replace(a, kind="int" if a.kind == "bool" else a.kind, lo=-a.hi, hi=-a.lo)


def _abs(node: exp.Expression, table: Table) -> Bound:
    a = _num(node.this, table)
    lo = 0.0 if a.lo <= 0 <= a.hi else min(abs(a.lo), abs(a.hi))
    return replace(a, kind="int" if a.kind == "bool" else a.kind, lo=lo, hi=a.magnitude)


def _monotone(f: Callable[[float], float], kind: str | None = None, domain_lo: float = -INF
              ) -> Callable[[exp.Expression, Table], Bound]:
    """A non-decreasing function; inputs below ``domain_lo`` give NULL."""
    def rule(node: exp.Expression, table: Table) -> Bound:
        a = _num(node.this, table)
        lo, hi = _apply(f, max(a.lo, domain_lo)), _apply(f, max(a.hi, domain_lo))
        return Bound(kind or ("float" if a.kind == "float" else "int"), lo, hi,
                     a.nullable or a.lo < domain_lo)
    return rule


def _apply(f: Callable[[float], float], x: float) -> float:
    if math.isinf(x):
        return x if f is not math.exp or x > 0 else 0.0
    try:
        return f(x)
    except OverflowError:
        return INF
    except ValueError:  # log(0)
        return -INF


def _round(node: exp.Expression, table: Table) -> Bound:
    a = _num(node.this, table)
    digits = node.args.get("decimals")
    places = 0
    if digits is not None:
        value = _literal_value(digits, "ROUND's number of digits")
        if not float(value).is_integer():
            raise UnboundedExpression("ROUND's number of digits must be a whole-number literal")
        places = int(value)
    if abs(places) > 300:
        raise UnboundedExpression("ROUND's number of digits must be between -300 and 300")
    step = 10.0 ** -places
    return Bound(a.kind if places <= 0 or a.kind == "int" else "float",
                 _apply(lambda x: math.floor(x / step) * step, a.lo),
                 _apply(lambda x: math.ceil(x / step) * step, a.hi), a.nullable)


def _log(node: exp.Expression, table: Table) -> Bound:
    base_node, arg = (node.this, node.expression) if node.expression else (None, node.this)
    base = 10.0 if base_node is None else _literal_value(base_node, "LOG's base")
    if base <= 1:
        raise UnboundedExpression("LOG's base must be a literal greater than 1")
    sub = exp.Ln(this=arg)
    b = _monotone(math.log, "float", 0.0)(sub, table)
    return replace(b, lo=b.lo / math.log(base), hi=b.hi / math.log(base))


def _pow(node: exp.Expression, table: Table) -> Bound:
    a = _num(node.this, table)
    p = _literal_value(node.expression, "the exponent of POWER")
    if float(p).is_integer() and 0 <= p <= 16:
        values = [_apply(lambda x: x**p, v) for v in (a.lo, a.hi)]
        lo = 0.0 if p % 2 == 0 and a.lo <= 0 <= a.hi else min(values)
        return Bound("float", lo, max(values), a.nullable)
    if a.lo >= 0 and p > 0:
        return Bound("float", _apply(lambda x: x**p, a.lo), _apply(lambda x: x**p, a.hi),
                     a.nullable)
    raise UnboundedExpression("POWER needs a whole-number exponent from 0 to 16, or a "
                              "non-negative base and a positive exponent")


def _sign(node: exp.Expression, table: Table) -> Bound:
    a = _num(node.this, table)
    return Bound("int", -1.0 if a.lo < 0 else 0.0 if a.lo == 0 else 1.0,
                 1.0 if a.hi > 0 else 0.0 if a.hi == 0 else -1.0, a.nullable)


def _extremum(node: exp.Expression, table: Table) -> Bound:
    parts = [bound(e, table) for e in [node.this, *node.expressions]]
    if not all(p.numeric for p in parts):
        return _union(parts)
    pick = max if isinstance(node, exp.Greatest) else min
    kind = "float" if any(p.kind == "float" for p in parts) else "int"
    return Bound(kind, pick(p.lo for p in parts), pick(p.hi for p in parts),
                 all(p.nullable for p in parts))


def _case(node: exp.Expression, table: Table) -> Bound:
    if node.this is not None:
        bound(node.this, table)
    for branch in node.args.get("ifs") or []:
        if node.this is not None:  # CASE x WHEN v: the engine compares x = v on every row
            _predicate(exp.EQ(this=node.this.copy(), expression=branch.this.copy()), table)
        else:
            condition(branch.this, table)
    results = [bound(branch.args["true"], table) for branch in node.args.get("ifs") or []]
    default = node.args.get("default")
    results.append(bound(default, table) if default is not None else Bound("null"))
    return _union(results)


def _if(node: exp.Expression, table: Table) -> Bound:
    condition(node.this, table)
    false = node.args.get("false")
    return _union([bound(node.args["true"], table),
                   bound(false, table) if false is not None else Bound("null")])


def _coalesce(node: exp.Expression, table: Table) -> Bound:
    parts = [bound(e, table) for e in [node.this, *node.expressions]]
    merged = _union(parts)
    return replace(merged, nullable=all(p.nullable for p in parts))


def _nullif(node: exp.Expression, table: Table) -> Bound:
    # NULLIF(a, b) compares a = b on every row: the same type rules as a comparison.
    _predicate(exp.EQ(this=node.this.copy(), expression=node.expression.copy()), table)
    return replace(bound(node.this, table), nullable=True)


def _union(parts: list[Bound]) -> Bound:
    real = [p for p in parts if p.kind != "null"]
    nullable = any(p.nullable or p.kind == "null" for p in parts)
    if not real:
        return Bound("null", 0.0, 0.0, True)
    kinds = {p.kind for p in real}
    if kinds <= {"int", "float", "bool"}:
        kind = "float" if "float" in kinds else "int" if "int" in kinds else "bool"
        return Bound(kind, min(p.lo for p in real), max(p.hi for p in real), nullable)
    if len(kinds) == 1:
        return Bound(kinds.pop(), nullable=nullable)
    raise UnboundedExpression(f"the branches mix types {sorted(kinds)}; CAST them to one type")


def _cast(node: exp.Expression, table: Table) -> Bound:
    assert isinstance(node, exp.Cast)  # dispatched from _RULES on exp.Cast / exp.TryCast only
    a = bound(node.this, table)
    target = node.to.this.value if isinstance(node.to.this, exp.DataType.Type) else str(node.to)
    target = str(target).upper()
    nullable = True  # TRY_CAST: a value that does not convert becomes NULL
    if target in _INT_TYPES:
        if a.kind == "text":
            return Bound("int", -INF, INF, nullable)
        return Bound("int", _apply(math.floor, a.lo), _apply(math.ceil, a.hi), nullable)
    if target in _FLOAT_TYPES:
        return Bound("float", a.lo, a.hi, nullable) if a.numeric else Bound("float", -INF, INF,
                                                                            nullable)
    if target in _TEXT_TYPES:
        return Bound("text", nullable=nullable)
    if target == "BOOLEAN":
        return Bound("bool", 0.0, 1.0, nullable)
    if target in ("DATE", "TIMESTAMP"):
        return Bound("date", nullable=nullable)
    raise UnboundedExpression(f"CAST to {target} is not supported; cast to INTEGER, BIGINT, "
                              "DOUBLE, DECIMAL, VARCHAR, BOOLEAN or DATE")


def _predicate(node: exp.Expression, table: Table) -> Bound:
    children = [c for c in node.iter_expressions() if not isinstance(c, exp.DataType)]
    parts = [bound(child, table) for child in children]
    kinds = {p.kind for p in parts} - {"null"}
    # A text literal is cast once, when the query is bound; a text column would be cast per row.
    text_rows = any(p.kind == "text" and not isinstance(c, exp.Literal)
                    for c, p in zip(children, parts, strict=True))
    if isinstance(node, COMPARISONS) and text_rows and kinds & {"int", "float", "date",
                                                                  "bool"}:
        # The engine would cast the text side row by row, and fail on some rows only.
        raise UnboundedExpression(
            f"{node.sql(dialect='duckdb')} compares text with a number, date or boolean; "
            "compare like with like, for example CAST(column AS INTEGER) or a quoted value")
    if isinstance(node, exp.And | exp.Or | exp.Not | exp.Xor) or (
            isinstance(node, exp.Is) and isinstance(node.expression, exp.Boolean)):
        for child, part in zip(children, parts, strict=True):
            _require_condition(child, part)
    if isinstance(node, COMPARISONS):
        _check_comparable(node, children, parts)
    if isinstance(node, exp.Like | exp.ILike) and kinds - {"text"}:
        raise UnboundedExpression(
            f"{node.sql(dialect='duckdb')}: LIKE and ILIKE match text only; CAST the "
            "value to VARCHAR first")
    return Bound("bool", 0.0, 1.0, any(p.nullable for p in parts))


def _check_comparable(node: exp.Expression, children: list[exp.Expression],
                      parts: list[Bound]) -> None:
    """Refuse a comparison of a date with a number, which the engine could not evaluate. (A
    text literal compared with a number, a date or a boolean is converted when the query is
    planned, by :mod:`dpsql.constants`.)"""
    others = {p.kind for c, p in zip(children, parts, strict=True)
              if not (isinstance(c, exp.Literal) and c.is_string)}
    if "date" in others and others & {"int", "float"}:
        raise UnboundedExpression(
            f"{node.sql(dialect='duckdb')} compares a date with a number; compare a date with "
            "a date (DATE 'YYYY-MM-DD') or a number with a part of it, e.g. YEAR(column)")


#: What may stand where a condition is expected: casting a number to BOOLEAN cannot fail.
_CONDITION_KINDS = {"bool", "int", "float", "null"}


def condition(node: exp.Expression, table: Table) -> Bound:
    """The bound of a row-level condition (WHERE, CASE WHEN, IF, AND, OR, NOT): a boolean or a
    number. Text or a date would be cast to BOOLEAN row by row by the engine, and fail on some
    rows only, with an error that quotes the row's value."""
    b = bound(node, table)
    _require_condition(node, b)
    return b


def _require_condition(node: exp.Expression, b: Bound) -> None:
    if b.kind not in _CONDITION_KINDS:
        raise UnboundedExpression(
            f"{node.sql(dialect='duckdb')} is {b.kind}, not a condition; compare it with a "
            f"value, for example {node.sql(dialect='duckdb')} = '...'")


#: DuckDB refuses SUBSTRING offsets and lengths beyond 32 bits, on the rows that have them.
_SUBSTRING_LIMIT = 2.0**31 - 1


def _substring(node: exp.Expression, table: Table) -> Bound:
    for key in ("start", "length"):
        arg = node.args.get(key)
        if arg is None:
            continue
        b = _num(arg, table)
        if not (b.lo >= -_SUBSTRING_LIMIT and b.hi <= _SUBSTRING_LIMIT):
            raise UnboundedExpression(
                f"{node.sql(dialect='duckdb')}: the {key} of SUBSTRING must stay within "
                f"+-{_SUBSTRING_LIMIT:.0f}; use constants or columns with declared bounds")
    return _text_function(node, table)


def _text_function(node: exp.Expression, table: Table) -> Bound:
    return replace(_predicate(node, table), kind="text", lo=-INF, hi=INF)


def _length(node: exp.Expression, table: Table) -> Bound:
    return replace(_predicate(node, table), kind="int", lo=0.0, hi=INF)


def _date_part(part: str) -> Callable[[exp.Expression, Table], Bound]:
    def rule(node: exp.Expression, table: Table) -> Bound:
        a = bound(node.this, table)
        if a.kind != "date":
            raise UnboundedExpression(f"{part.upper()}() needs a date column")
        limits = _DATE_PARTS.get(part)
        if limits is None:  # year: from the column's declared date bounds
            limits = _year_limits(node.this, table)
        return Bound("int", float(limits[0]), float(limits[1]), a.nullable)
    return rule


def _year_limits(node: exp.Expression, table: Table) -> tuple[float, float]:
    if isinstance(node, exp.Column):
        meta = table.column(node.name)
        if meta is not None and meta.bounded:
            return meta.lower.year, meta.upper.year  # type: ignore[union-attr]
    return -INF, INF


def _extract(node: exp.Expression, table: Table) -> Bound:
    part = node.this.name.lower()
    if part not in _DATE_PARTS:
        raise UnboundedExpression(f"EXTRACT({part.upper()} ...) is not supported; use one of "
                                  f"{', '.join(sorted(_DATE_PARTS))}")
    return _date_part(part)(exp.Year(this=node.expression), table)


def _date_trunc(node: exp.Expression, table: Table) -> Bound:
    unit = node.args.get("unit")
    if unit is not None and not (isinstance(unit, exp.Var) or (
            isinstance(unit, exp.Literal) and unit.is_string)):
        # A part computed from a row would be checked, and refused, row by row.
        raise UnboundedExpression(f"{node.sql(dialect='duckdb')}: the part of DATE_TRUNC must "
                                  "be a constant such as 'month'")
    return replace(bound(node.this, table), kind="date")


def _paren(node: exp.Expression, table: Table) -> Bound:
    return bound(node.this, table)


def _num(node: exp.Expression, table: Table) -> Bound:
    b = bound(node, table)
    if b.kind == "null":
        return Bound("int", 0.0, 0.0, True)
    if not b.numeric:
        raise UnboundedExpression(f"{node.sql(dialect='duckdb')} is {b.kind}, not a number; "
                                  "arithmetic needs numbers (CAST it first)")
    return b


def _literal_value(node: exp.Expression, what: str) -> float:
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return -_literal_value(node.this, what)
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.this)
    raise UnboundedExpression(f"{what} must be a number literal")


_RULES: dict[type, Callable[[exp.Expression, Table], Bound]] = {
    exp.Column: _column,
    exp.Literal: _literal,
    exp.Null: lambda n, t: Bound("null", 0.0, 0.0, True),
    exp.Boolean: lambda n, t: Bound("bool", 0.0, 1.0),
    exp.Paren: _paren,
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
    exp.Case: _case,
    exp.If: _if,
    exp.Coalesce: _coalesce,
    exp.Nullif: _nullif,
    exp.Cast: _cast,
    exp.TryCast: _cast,
    exp.Lower: _text_function,
    exp.Upper: _text_function,
    exp.Trim: _text_function,
    exp.Substring: _substring,
    exp.Concat: _text_function,
    exp.DPipe: _text_function,
    exp.Length: _length,
    exp.Year: _date_part("year"),
    exp.Month: _date_part("month"),
    exp.Day: _date_part("day"),
    exp.DayOfWeek: _date_part("dayofweek"),
    exp.Quarter: _date_part("quarter"),
    exp.Extract: _extract,
    exp.TimestampTrunc: _date_trunc,
    exp.DateTrunc: _date_trunc,
}
#: Predicates that compare operands (whose types must match, see _predicate).
COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.In, exp.Between,
               exp.NullSafeEQ, exp.NullSafeNEQ)
for _pred in (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Is, exp.In, exp.Between,
              exp.Like, exp.ILike, exp.Not, exp.And, exp.Or, exp.StartsWith, exp.NullSafeEQ,
              exp.NullSafeNEQ, exp.Xor):
    _RULES[_pred] = _predicate
