"""The core of :mod:`dpsql.query.bounds`: :class:`Bound`, the dispatcher :func:`bound`, and the
rules for columns, literals, predicates and conditions. The rule table :data:`RULES` is completed
by the other families in :mod:`dpsql.query.bounds` (its ``__init__`` lists them)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from dpsql.errors import ForbiddenFunction, UnboundedExpression
from dpsql.metadata.metadata import ColumnType, Table
from dpsql.query.dates import written

INF = math.inf
#: The kinds of dates and instants: comparable with each other, not with numbers.
TEMPORAL = frozenset({"date", "timestamp"})
INT_LIMIT = 2.0**62  # integer expressions must stay well inside int64
#: Largest magnitude of an aggregated value: its square times 1e100 rows still fits a double.
MAX_AGGREGATED = 1e100


@dataclass(frozen=True)
class Bound:
    kind: str  # "int", "float", "bool", "text", "date", "timestamp", "null"
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
    rule = RULES.get(type(node))
    if rule is None:
        raise ForbiddenFunction(
            f"{_name(node)} is not allowed in dpsql queries (in {written(node)}); "
            "use arithmetic, CASE, COALESCE, CAST, comparisons, LEAST/GREATEST, ABS, ROUND and "
            "the other documented row-level functions")
    result = rule(node, table)
    if result.kind == "int" and (result.lo < -INT_LIMIT or result.hi > INT_LIMIT) and \
            _is_arithmetic(node):
        if not result.finite and _unbounded_columns(node, table):
            # Name the column that needs bounds, as for any expression without a bound.
            raise UnboundedExpression(
                f"the range of {written(node)} cannot be derived from the declared "
                f"bounds{_missing_bounds(node, table)}")
        raise UnboundedExpression(
            f"{written(node)} can exceed the 64-bit integer range; declare bounds "
            "for its columns in the metadata or CAST it to DOUBLE")
    return result


def numeric_bound(node: exp.Expression, table: Table, what: str) -> Bound:
    """The bound of an expression that an aggregate sums: it must be numeric and finite."""
    b = bound(node, table)
    if not b.numeric:
        raise UnboundedExpression(f"{what}: {written(node)} is {b.kind}, "
                                  "not a number; aggregate a numeric expression")
    if not b.finite:
        raise UnboundedExpression(
            f"{what}: the range of {written(node)} cannot be derived from the "
            f"declared bounds{_missing_bounds(node, table)}; clamp it with LEAST/GREATEST")
    if b.magnitude > MAX_AGGREGATED:
        # A sum (of squares, for VAR) of such values overflows a double on some data only:
        # the engine would return an infinity, and the answer an error, that depend on the data.
        raise UnboundedExpression(
            f"{what}: {written(node)} can reach {b.magnitude:.3g}, beyond the "
            f"{MAX_AGGREGATED:.0e} that an aggregate accepts; scale it down (e.g. divide it)")
    return b


def _unbounded_columns(node: exp.Expression, table: Table) -> list[str]:
    missing = []
    for col in node.find_all(exp.Column):
        meta = table.column(col.name)
        if meta is not None and meta.numeric and not meta.bounded:
            missing.append(written(col))
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


def union(parts: list[Bound]) -> Bound:
    real = [p for p in parts if p.kind != "null"]
    nullable = any(p.nullable or p.kind == "null" for p in parts)
    if not real:
        return Bound("null", 0.0, 0.0, True)
    kinds = {p.kind for p in real}
    if kinds <= {"int", "float", "bool"}:
        kind = "float" if "float" in kinds else "int" if "int" in kinds else "bool"
        return Bound(kind, min(p.lo for p in real), max(p.hi for p in real), nullable)
    if kinds == TEMPORAL:  # DuckDB and PostgreSQL read the dates as their midnights
        kinds = {"timestamp"}
    if len(kinds) == 1:
        return Bound(kinds.pop(), nullable=nullable)
    raise UnboundedExpression(f"the branches mix types {sorted(kinds)}; CAST them to one type")


def apply(f: Callable[[float], float], x: float) -> float:
    if math.isinf(x):
        return x if f is not math.exp or x > 0 else 0.0
    try:
        return f(x)
    except OverflowError:
        return INF
    except ValueError:  # log(0)
        return -INF


# ----------------------------------------------------------------------------- rules


def _column(node: exp.Expression, table: Table) -> Bound:
    meta = table.column(node.name)
    if meta is None:  # bind resolved every column; anything left is an output alias
        raise UnboundedExpression(f"{written(node)} is not a column of "
                                  f"{table.name!r} here")
    nullable = meta.nullable or meta.type == ColumnType.FLOAT  # NaN is read as NULL
    if meta.type in (ColumnType.INT, ColumnType.FLOAT):
        lo, hi = (meta.lower, meta.upper) if meta.bounded else (-INF, INF)
        return Bound(meta.type, float(lo), float(hi), nullable)  # type: ignore[arg-type]
    if meta.type == ColumnType.BOOL:
        return Bound("bool", 0.0, 1.0, nullable)
    return Bound(meta.type, nullable=nullable)


def _literal(node: exp.Expression, table: Table) -> Bound:
    if node.is_string:
        return Bound("text")
    value = float(node.this)
    kind = "int" if node.is_int else "float"
    return Bound(kind, value, value)


def predicate(node: exp.Expression, table: Table) -> Bound:
    children = [c for c in node.iter_expressions() if not isinstance(c, exp.DataType)]
    parts = [bound(child, table) for child in children]
    kinds = {p.kind for p in parts} - {"null"}
    # A text literal is cast once, when the query is bound; a text column would be cast per row.
    text_rows = any(p.kind == "text" and not isinstance(c, exp.Literal)
                    for c, p in zip(children, parts, strict=True))
    if isinstance(node, COMPARISONS) and text_rows and kinds & {"int", "float", "bool",
                                                                  *TEMPORAL}:
        # The engine would cast the text side row by row, and fail on some rows only.
        raise UnboundedExpression(
            f"{written(node)} compares text with a number, date or boolean; "
            "compare like with like, for example CAST(column AS INTEGER) or a quoted value")
    if isinstance(node, exp.And | exp.Or | exp.Not | exp.Xor) or (
            isinstance(node, exp.Is) and isinstance(node.expression, exp.Boolean)):
        for child, part in zip(children, parts, strict=True):
            _require_condition(child, part)
    if isinstance(node, COMPARISONS):
        _check_comparable(node, children, parts)
    if isinstance(node, exp.Like | exp.ILike) and kinds - {"text"}:
        raise UnboundedExpression(
            f"{written(node)}: LIKE and ILIKE match text only; CAST the "
            "value to VARCHAR first")
    return Bound("bool", 0.0, 1.0, any(p.nullable for p in parts))


def _check_comparable(node: exp.Expression, children: list[exp.Expression],
                      parts: list[Bound]) -> None:
    """Refuse a comparison of a date with a number, which the engine could not evaluate. (A
    text literal compared with a number, a date or a boolean is converted when the query is
    planned, by :mod:`dpsql.query.fold_constants`.)"""
    others = {p.kind for c, p in zip(children, parts, strict=True)
              if not (isinstance(c, exp.Literal) and c.is_string)}
    if others & TEMPORAL and others & {"int", "float"}:
        raise UnboundedExpression(
            f"{written(node)} compares a date or a timestamp with a number; compare "
            "it with a date (DATE 'YYYY-MM-DD') or a timestamp (TIMESTAMP 'YYYY-MM-DD "
            "HH:MM:SS'), or a number with a part of it, e.g. YEAR(column) or EPOCH(column)")


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
            f"{written(node)} is {b.kind}, not a condition; compare it with a "
            f"value, for example {written(node)} = '...'")


def _paren(node: exp.Expression, table: Table) -> Bound:
    return bound(node.this, table)


def num(node: exp.Expression, table: Table) -> Bound:
    b = bound(node, table)
    if b.kind == "null":
        return Bound("int", 0.0, 0.0, True)
    if b.kind in TEMPORAL:
        raise UnboundedExpression(
            f"{written(node)} is a {b.kind}, not a number; use DATE_DIFF('day', "
            "a, b) for a difference, EPOCH(x) for seconds, or x + INTERVAL 1 DAY for a shift")
    if not b.numeric:
        raise UnboundedExpression(f"{written(node)} is {b.kind}, not a number; "
                                  "arithmetic needs numbers (CAST it first)")
    return b


def literal_value(node: exp.Expression, what: str) -> float:
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return -literal_value(node.this, what)
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.this)
    raise UnboundedExpression(f"{what} must be a number literal")


RULES: dict[type, Callable[[exp.Expression, Table], Bound]] = {
    exp.Column: _column,
    exp.Literal: _literal,
    exp.Null: lambda n, t: Bound("null", 0.0, 0.0, True),
    exp.Boolean: lambda n, t: Bound("bool", 0.0, 1.0),
    exp.Paren: _paren,
}


#: Predicates that compare operands (whose types must match, see predicate).
COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.In, exp.Between,
               exp.NullSafeEQ, exp.NullSafeNEQ)
for _pred in (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Is, exp.In, exp.Between,
              exp.Like, exp.ILike, exp.Not, exp.And, exp.Or, exp.StartsWith, exp.NullSafeEQ,
              exp.NullSafeNEQ, exp.Xor):
    RULES[_pred] = predicate
