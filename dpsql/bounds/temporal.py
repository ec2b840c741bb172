"""Interval rules for text and date functions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sqlglot import exp

from dpsql.bounds.core import (
    INF,
    Bound,
    bound,
    num,
    predicate,
)
from dpsql.dates import check_format, written
from dpsql.errors import UnboundedExpression
from dpsql.metadata import Table

_DATE_PARTS: dict[str, tuple[float, float] | None] = {
    "year": None, "month": (1, 12), "day": (1, 31), "dayofweek": (0, 6), "dow": (0, 6),
    "isodow": (1, 7), "dayofyear": (1, 366), "doy": (1, 366), "quarter": (1, 4),
    "week": (1, 53), "hour": (0, 23), "minute": (0, 59)}


#: DuckDB refuses SUBSTRING offsets and lengths beyond 32 bits, on the rows that have them.
_SUBSTRING_LIMIT = 2.0**31 - 1


def _substring(node: exp.Expression, table: Table) -> Bound:
    for key in ("start", "length"):
        arg = node.args.get(key)
        if arg is None:
            continue
        b = num(arg, table)
        if not (b.lo >= -_SUBSTRING_LIMIT and b.hi <= _SUBSTRING_LIMIT):
            raise UnboundedExpression(
                f"{node.sql(dialect='duckdb')}: the {key} of SUBSTRING must stay within "
                f"+-{_SUBSTRING_LIMIT:.0f}; use constants or columns with declared bounds")
    return _text_function(node, table)


def _text_function(node: exp.Expression, table: Table) -> Bound:
    return replace(predicate(node, table), kind="text", lo=-INF, hi=INF)


def _length(node: exp.Expression, table: Table) -> Bound:
    return replace(predicate(node, table), kind="int", lo=0.0, hi=INF)


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
        if meta is not None:  # read clamped to DATE_RANGE (dpsql.total)
            return 1, 9999
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


def _strptime(node: exp.Expression, table: Table) -> Bound:
    """TO_DATE / TO_TIMESTAMP / STRPTIME of a text: a date, NULL when the text does not match
    (the engine reads TRY_STRPTIME, clamped to the dates every engine function handles)."""
    check_format(node.args.get("format"), written(node), translated=True)
    a = bound(node.this, table)
    if a.kind not in ("text", "null"):
        raise UnboundedExpression(f"{written(node)}: the first argument must be text")
    return Bound("date", nullable=True)


RULES: dict[type, Callable[[exp.Expression, Table], Bound]] = {
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
    exp.StrToDate: _strptime,
    exp.StrToTime: _strptime,
}
