"""Interval rules for text, date and timestamp functions.

Every date and timestamp a row yields is read clamped to its column's bounds, or to the years
1 to 9999 (:mod:`dpsql.query.total_expressions`), so a part of one (YEAR, EPOCH, DATE_DIFF) has a
finite bound, and shifting one by a constant INTERVAL of at most :data:`MAX_SHIFT_YEARS` years stays
inside what every engine represents (the result is clamped back to the years 1 to 9999)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import replace

from sqlglot import exp

from dpsql.errors import UnboundedExpression
from dpsql.metadata.metadata import Table
from dpsql.query.bounds import numbers
from dpsql.query.bounds.core import INF, TEMPORAL, Bound, bound, num, predicate
from dpsql.query.dates import check_format, written

_DATE_PARTS: dict[str, tuple[float, float] | None] = {
    "year": None, "month": (1, 12), "day": (1, 31), "dayofweek": (0, 6), "dow": (0, 6),
    "isodow": (1, 7), "dayofyear": (1, 366), "doy": (1, 366), "quarter": (1, 4),
    "week": (1, 53), "hour": (0, 23), "minute": (0, 59), "second": (0, 59)}


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
                f"{written(node)}: the {key} of SUBSTRING must stay within "
                f"+-{_SUBSTRING_LIMIT:.0f}; use constants or columns with declared bounds")
    return _text_function(node, table)


def _text_function(node: exp.Expression, table: Table) -> Bound:
    return replace(predicate(node, table), kind="text", lo=-INF, hi=INF)


def _length(node: exp.Expression, table: Table) -> Bound:
    return replace(predicate(node, table), kind="int", lo=0.0, hi=INF)


def _date_part(part: str) -> Callable[[exp.Expression, Table], Bound]:
    def rule(node: exp.Expression, table: Table) -> Bound:
        a = bound(node.this, table)
        if a.kind not in TEMPORAL:
            raise UnboundedExpression(f"{part.upper()}() needs a date or a timestamp, not "
                                      f"{written(node.this)} ({a.kind})")
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
    return 1, 9999  # every date and timestamp is read within the years 1 to 9999


def _extract(node: exp.Expression, table: Table) -> Bound:
    part = node.this.name.lower()
    if part == "epoch":
        return _epoch(exp.TimeToUnix(this=node.expression), table)
    if part not in _DATE_PARTS:
        raise UnboundedExpression(f"EXTRACT({part.upper()} ...) is not supported; use one of "
                                  f"{', '.join(sorted(_DATE_PARTS))}")
    return _date_part(part)(exp.Year(this=node.expression), table)


def _date_trunc(node: exp.Expression, table: Table) -> Bound:
    unit = node.args.get("unit")
    if unit is not None and not (isinstance(unit, exp.Var) or (
            isinstance(unit, exp.Literal) and unit.is_string)):
        # A part computed from a row would be checked, and refused, row by row.
        raise UnboundedExpression(f"{written(node)}: the part of DATE_TRUNC must "
                                  "be a constant such as 'month'")
    a = bound(node.this, table)
    if a.kind not in TEMPORAL:
        raise UnboundedExpression(f"{written(node)}: DATE_TRUNC needs a date or a timestamp")
    return a


def _strptime(node: exp.Expression, table: Table) -> Bound:
    """TO_DATE / TO_TIMESTAMP / STRPTIME of a text: a date, NULL when the text does not match
    (the engine reads TRY_STRPTIME, clamped to the dates every engine function handles)."""
    check_format(node.args.get("format"), written(node), translated=True)
    a = bound(node.this, table)
    if a.kind not in ("text", "null"):
        raise UnboundedExpression(f"{written(node)}: the first argument must be text")
    return Bound("date" if isinstance(node, exp.StrToDate) else "timestamp", nullable=True)


#: How many years a unit of an INTERVAL or of DATE_DIFF spans (at most).
_UNIT_YEARS = {"year": 1.0, "quarter": 0.25, "month": 31 / 366, "week": 7 / 365,
               "day": 1 / 365, "hour": 1 / 8760, "minute": 1 / 525600,
               "second": 1 / 31536000, "millisecond": 1e-3 / 31536000,
               "microsecond": 1e-6 / 31536000}
#: The largest constant INTERVAL a date or a timestamp may be shifted by.
MAX_SHIFT_YEARS = 10_000
#: The span of every date and timestamp a row can yield, in years (the years 1 to 9999).
_SPAN_YEARS = 10_000


def unit_name(text: str) -> str | None:
    """'days', 'DAY', 'd'... as a unit of :data:`_UNIT_YEARS`, or None."""
    name = text.strip().lower()
    name = {"d": "day", "h": "hour", "m": "minute", "s": "second", "ms": "millisecond",
            "us": "microsecond", "y": "year", "mon": "month", "min": "minute"}.get(name, name)
    return name if name in _UNIT_YEARS else name[:-1] if name[:-1] in _UNIT_YEARS else None


def _interval_years(node: exp.Expression) -> float | None:
    """The length in years of a constant INTERVAL such as INTERVAL 3 DAY or INTERVAL '1 hour',
    or None when it is not one."""
    if not isinstance(node, exp.Interval) or not isinstance(node.this, exp.Literal):
        return None
    text, unit = node.this.name, node.args.get("unit")
    if unit is not None:
        text = f"{text} {unit.name}"
    match = re.fullmatch(r"\s*(-?\d{1,9})\s*([a-zA-Z]+)\s*", text)
    name = unit_name(match.group(2)) if match else None
    if match is None or name is None:
        return None
    return abs(float(match.group(1))) * _UNIT_YEARS[name]


def _shift(node: exp.Expression, table: Table) -> Bound:
    """d + INTERVAL ..., d - INTERVAL ...: a timestamp (DuckDB and PostgreSQL make a date
    plus an interval a timestamp), read clamped back to the years 1 to 9999
    (dpsql.query.total_expressions). Any other + or - is arithmetic
    (:mod:`dpsql.query.bounds.numbers`)."""
    if not isinstance(node.expression, exp.Interval) and not isinstance(node.this, exp.Interval):
        return numbers.RULES[type(node)](node, table)
    value, shift = ((node.this, node.expression) if isinstance(node.expression, exp.Interval)
                    else (node.expression, node.this))
    a = bound(value, table)
    years = _interval_years(shift)
    if a.kind not in TEMPORAL or years is None or years > MAX_SHIFT_YEARS or (
            isinstance(node.this, exp.Interval) and isinstance(node, exp.Sub)):
        raise UnboundedExpression(
            f"{written(node)}: a date or a timestamp may be shifted by a constant interval of "
            f"at most {MAX_SHIFT_YEARS} years, such as ts - INTERVAL 7 DAY")
    return Bound("timestamp", nullable=a.nullable)


def _temporal_arg(node: exp.Expression, table: Table, what: str) -> Bound:
    a = bound(node, table)
    if a.kind not in TEMPORAL:
        raise UnboundedExpression(f"{what} needs a date or a timestamp, not {written(node)} "
                                  f"({a.kind})")
    return a


def _epoch(node: exp.Expression, table: Table) -> Bound:
    """EPOCH(ts): seconds since 1970-01-01 UTC, bounded by the years the value is read in."""
    a = _temporal_arg(node.this, table, written(node))
    lo, hi = _instants(node.this, table)
    epoch = dt.datetime(1970, 1, 1)
    return Bound("float", (lo - epoch).total_seconds(), (hi - epoch).total_seconds() + 1,
                 a.nullable)


def _instants(node: exp.Expression, table: Table) -> tuple[dt.datetime, dt.datetime]:
    """The first and last instants a temporal expression can take: its column's bounds, else
    the years 1 to 9999."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        try:  # a typed literal such as TIMESTAMP '2025-01-01' (fold_constants checks it)
            day = dt.datetime.fromisoformat(node.this.name.strip()).replace(tzinfo=None)
            return (max(day, _FIRST + _ZONES) - _ZONES,  # the instant in any zone
                    min(day, _LAST - _ZONES) + _ZONES)
        except ValueError:
            pass
    if isinstance(node, exp.Column):
        meta = table.column(node.name)
        if meta is not None and meta.bounded and isinstance(meta.lower, dt.date):
            lo, hi = meta.lower, meta.upper
            assert isinstance(hi, dt.date)
            return _as_instant(lo), _as_instant(hi) + (
                dt.timedelta(days=1) if not isinstance(hi, dt.datetime) else dt.timedelta(0))
    return _FIRST, _LAST


_FIRST, _LAST = dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)
_ZONES = dt.timedelta(days=1)


def _as_instant(day: dt.date) -> dt.datetime:
    return day if isinstance(day, dt.datetime) else dt.datetime(day.year, day.month, day.day)


def _date_diff(node: exp.Expression, table: Table) -> Bound:
    """DATE_DIFF(part, a, b): the number of part boundaries between two dates or timestamps,
    at most the span of their bounds in that part (plus one boundary)."""
    unit = node.args.get("unit")
    name = unit_name(unit.name) if isinstance(unit, exp.Var | exp.Literal) else None
    if name is None:
        raise UnboundedExpression(f"{written(node)}: the part of DATE_DIFF must be a constant "
                                  f"such as 'day', one of {', '.join(_UNIT_YEARS)}")
    a = _temporal_arg(node.this, table, written(node))
    b = _temporal_arg(node.expression, table, written(node))
    (lo_a, hi_a), (lo_b, hi_b) = _instants(node.this, table), _instants(node.expression, table)
    span = max(hi_a, hi_b) - min(lo_a, lo_b)
    count = float(int(span.total_seconds() / 31536000 / _UNIT_YEARS[name]) + 2)
    return Bound("int", -count, count, a.nullable or b.nullable)


def _from_epoch(node: exp.Expression, table: Table) -> Bound:
    """TO_TIMESTAMP(seconds): a timestamp; the seconds are read clamped to the years 1 to 9999
    (dpsql.query.total_expressions), so any number converts."""
    a = bound(node.this, table)
    if not a.numeric and a.kind != "null":
        raise UnboundedExpression(f"{written(node)}: TO_TIMESTAMP(x) takes a number of seconds "
                                  "since 1970-01-01, or TO_TIMESTAMP(text, format)")
    return Bound("timestamp", nullable=True)


def _time_zone(node: exp.Expression, table: Table) -> Bound:
    raise UnboundedExpression(
        f"{written(node)}: AT TIME ZONE is not supported, as its value would depend on time "
        "zone rules; dpsql reads every timestamp in UTC, so use the timestamp as it is")


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
    exp.Hour: _date_part("hour"),
    exp.Minute: _date_part("minute"),
    exp.Second: _date_part("second"),
    exp.Week: _date_part("week"),
    exp.DayOfYear: _date_part("dayofyear"),
    exp.Add: _shift,
    exp.Sub: _shift,
    exp.TimeToUnix: _epoch,
    exp.UnixToTime: _from_epoch,
    exp.DateDiff: _date_diff,
    exp.AtTimeZone: _time_zone,
    exp.Extract: _extract,
    exp.TimestampTrunc: _date_trunc,
    exp.DateTrunc: _date_trunc,
    exp.StrToDate: _strptime,
    exp.StrToTime: _strptime,
}
