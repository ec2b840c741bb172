"""Public domains of GROUP BY keys: which keys are released without thresholding.

A key has a public domain when it is a column with declared values (or a public range), a CASE
whose results are all constants, or a row-level expression of such columns only (GROUP BY
age // 10), whose image is computed by evaluating the expression, made total exactly as in the
engine query (:func:`dpsql.query.total_expressions.total`), on the cross product of the declared
domains in the scratch engine. Nothing here reads data. Keys are canonical and de-duplicated
(:mod:`dpsql.privacy.keys`).
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Sequence
from typing import cast

import numpy as np
from sqlglot import exp

from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.metadata.metadata import MAX_DOMAIN_SIZE, Column, ColumnType, Table
from dpsql.privacy.key_filters import Filters, filter_witnesses, narrowed_range, restrict
from dpsql.privacy.keys import distinct
from dpsql.query.local_evaluator import run_over
from dpsql.query.total_expressions import total


def key_domain(expression: exp.Expression, table: Table, filters: Filters | None = None
               ) -> tuple[object, ...] | None:
    """The public domain of a GROUP BY key: a column's declared domain, or a CASE whose results
    are all constants (its branches), narrowed by the WHERE clause's ``filters`` on its
    columns (:mod:`dpsql.privacy.key_filters`)."""
    filters = filters or {}
    if isinstance(expression, exp.Paren):
        return key_domain(expression.this, table, filters)
    if isinstance(expression, exp.Column):
        column = table.column(expression.name)
        if column is None:
            return None
        conjuncts = filters.get(column.name.lower(), ())
        if conjuncts and column.domain is None:
            return _image_of_domains(expression, table, filters)  # a long range, narrowed
        return restrict(column.domain, column, conjuncts, table) \
            if column.domain is not None else None
    if isinstance(expression, exp.Case | exp.If):
        branches = _constant_branches(expression)
        if branches is not None:
            return branches
    return _image_of_domains(expression, table, filters)


def _image_of_domains(expression: exp.Expression, table: Table, filters: Filters
                      ) -> tuple[object, ...] | None:
    """The image of the declared domains under a row-level expression (GROUP BY age // 10):
    the expression, made total as in the engine query, is evaluated on the cross product of
    its columns' public domains (each narrowed by its filters), in the scratch engine. It
    reads no data."""
    names = sorted({c.name.lower() for c in expression.find_all(exp.Column)})
    columns = [c for c in (table.column(n) for n in names) if c is not None]
    if not names or len(columns) != len(names):
        return None
    domains = [_filtered_inputs(c, expression, filters.get(c.name.lower(), ()), table)
               for c in columns]
    combos = 1
    for d in domains:
        if d is None:
            return None
        combos *= len(d)
    if combos > _MAX_INPUTS:
        return None
    product = list(itertools.product(*(d or () for d in domains)))
    data = {n: np.array([row[i] for row in product], dtype=object) for i, n in enumerate(names)}
    sql = (f"SELECT DISTINCT {total(expression, table).sql(dialect=DuckDBDialect)} AS k "
           "FROM __domain ORDER BY k NULLS LAST")
    _, _, rows = run_over(sql, "__domain", data)
    image = tuple(v for (v,) in distinct((r[0],) for r in rows))
    return image if len(image) <= MAX_DOMAIN_SIZE else None


#: Inputs evaluated to compute an image; the image itself must stay within MAX_DOMAIN_SIZE.
_MAX_INPUTS = 4 * MAX_DOMAIN_SIZE

#: Row-level shapes f(d) of a date column d whose image over a long public range is reached by
#: :func:`_date_witnesses` (grain starts, and every day of the first years for the cyclic parts).
_GRAINS = (exp.TimestampTrunc, exp.DateTrunc, exp.Year, exp.Month, exp.Quarter, exp.Day,
           exp.DayOfWeek, exp.Extract, exp.Hour, exp.Minute, exp.Second, exp.Week,
           exp.DayOfYear)

#: Every day of this many years from the lower bound reaches each cyclic part (month, day,
#: day of week and of year, ISO week 53, which some year of any 7 consecutive ones has).
_CYCLE_YEARS = 8


def _filtered_inputs(column: Column, expression: exp.Expression,
                     conjuncts: Sequence[exp.Expression], table: Table
                     ) -> tuple[object, ...] | None:
    """:func:`_inputs` narrowed by the column's filters (:mod:`dpsql.privacy.key_filters`): a
    temporal range first narrowed by direct comparisons, its witnesses completed by the
    filters' edges, then every input the filters reject dropped."""
    span = narrowed_range(column, conjuncts, table) if column.domain is None and \
        column.temporal and column.public_range else None
    inputs = _inputs(column, expression, span)
    if inputs is None or not conjuncts:
        return inputs
    if column.domain is None:  # witnesses: add the filters' edges within the bounds
        lower, upper = span or (column.lower, column.upper)
        extra = [w for w in filter_witnesses(column, conjuncts)
                 if lower <= w <= upper and w not in inputs]  # type: ignore[operator]
        inputs = (*inputs, *extra)
    return restrict(inputs, column, conjuncts, table)


def _inputs(column: Column, expression: exp.Expression,
            span: tuple[dt.date, dt.date] | None = None) -> tuple[object, ...] | None:
    """The values of ``column`` on which ``expression`` is evaluated: its public domain, or
    for a long public date range (``span`` when narrowed by filters) under a grain shape,
    days that reach every value of the image (:func:`_date_witnesses`); a bare column over a
    span whose days or instants are few enough: each of them."""
    domain = column.domain
    if domain is not None or not (column.temporal and column.public_range):
        return domain
    lower, upper = span or (column.lower, column.upper)
    assert isinstance(lower, dt.date) and isinstance(upper, dt.date)
    if isinstance(expression, exp.Column) and not isinstance(lower, dt.datetime):
        days = (upper - lower).days + 1
        if days > MAX_DOMAIN_SIZE:
            return None
        every = tuple(lower + dt.timedelta(days=i) for i in range(days))
        return (*every, None) if column.nullable else every
    bucket = _epoch_bucket(expression)
    if bucket is not None and isinstance(lower, dt.datetime) and isinstance(upper, dt.datetime):
        buckets = _bucket_witnesses(lower, upper, bucket)
        return None if buckets is None else (*buckets, None) if column.nullable else buckets
    step = _grain_step(expression)
    if step is None or (step in _INSTANT_STEPS and column.type != ColumnType.TIMESTAMP):
        return None
    witnesses: tuple[object, ...] | None = (
        _instant_witnesses(lower, upper, step) if isinstance(lower, dt.datetime) and
        isinstance(upper, dt.datetime) else _date_witnesses(lower, upper, step))
    if witnesses is None:
        return None
    return (*witnesses, None) if column.nullable else witnesses


def _grain_step(expression: exp.Expression) -> str | None:
    """For DATE_TRUNC(part, d), YEAR(d), MONTH(d), EXTRACT(part FROM d)... of a bare column d,
    the starts that reach every grain: "week" (Mondays), "year" (firsts of January) or
    "month" (firsts of months); None for any other expression. An expression of one such
    grain alone (``EXTRACT(EPOCH FROM DATE_TRUNC('hour', ts))``, Grafana's epoch of a grain)
    takes that grain's step: witnesses that reach every value of the grain g reach every
    value of f(g)."""
    while isinstance(expression, exp.Paren):
        expression = expression.this
    inner = _only_grain(expression)
    if inner is not None and inner is not expression:
        return _grain_step(inner)
    if not isinstance(expression, _GRAINS):
        return None
    arg = expression.expression if isinstance(expression, exp.Extract) else expression.this
    if not isinstance(arg, exp.Column):
        return None
    unit = expression.args.get("unit")
    part = (unit.name.lower() if unit is not None else "") if not isinstance(
        expression, exp.Extract) else expression.this.name.lower()
    if isinstance(expression, exp.TimestampTrunc | exp.DateTrunc):
        return _TRUNC_STEPS.get(part)  # a day or finer: every day is a key, no shortcut
    if isinstance(expression, exp.Extract) and part not in _CYCLIC_PARTS:
        return None  # EPOCH, MICROSECONDS...: the witnesses would not reach the whole image
    return "year" if isinstance(expression, exp.Year) or part == "year" else "month"


def _only_grain(expression: exp.Expression) -> exp.Expression | None:
    """The one grain node of a bare column in ``expression`` when the column appears nowhere
    else in it (so the expression is a function of that grain), else None."""
    grains = [g for g in expression.find_all(*_GRAINS)
              if isinstance(g.expression if isinstance(g, exp.Extract) else g.this,
                            exp.Column)]
    if len(grains) != 1 or len(list(expression.find_all(exp.Column))) != 1:
        return None
    return cast(exp.Expression, grains[0])


def _epoch_bucket(expression: exp.Expression) -> int | None:
    """N for ``FLOOR(EXTRACT(EPOCH FROM ts) / N) * N`` (Grafana's ``$__timeGroup(ts, N s)``)
    of a bare column, N a positive whole number of seconds; None for any other expression."""
    node = _unparen(expression)
    if not isinstance(node, exp.Mul):
        return None
    for floor, factor in ((node.this, node.expression), (node.expression, node.this)):
        floor, n = _unparen(floor), _whole(factor)
        if isinstance(floor, exp.Floor) and n and not floor.args.get("decimals"):
            div = _unparen(floor.this)
            if isinstance(div, exp.Div) and _whole(div.expression) == n:
                epoch = _unparen(div.this)
                if isinstance(epoch, exp.Extract) and epoch.this.name.lower() == "epoch" and \
                        isinstance(epoch.expression, exp.Column):
                    return n
    return None


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _whole(node: exp.Expression) -> int | None:
    node = _unparen(node)
    if isinstance(node, exp.Literal) and not node.is_string:
        value = float(node.this)
        if value.is_integer() and value >= 1:
            return int(value)
    return None


def _bucket_witnesses(lower: dt.datetime, upper: dt.datetime, seconds: int
                      ) -> tuple[dt.datetime, ...] | None:
    """``lower`` and every multiple of ``seconds`` since 1970 in (lower, upper]: one instant
    in each bucket of the range; None when there are more than _MAX_INPUTS."""
    epoch = dt.datetime(1970, 1, 1)
    first = (lower - epoch) // dt.timedelta(seconds=seconds) + 1
    last = (upper - epoch) // dt.timedelta(seconds=seconds)
    if last - first + 1 > _MAX_INPUTS:
        return None
    step = dt.timedelta(seconds=seconds)
    return (lower, *(epoch + step * k for k in range(first, last + 1)))


#: The parts of EXTRACT whose whole image the witnesses reach (the grains and cycles).
_CYCLIC_PARTS = {"year", "quarter", "month", "week", "day", "dayofweek", "dow", "isodow",
                 "dayofyear", "doy", "hour", "minute", "second"}


_TRUNC_STEPS = {"week": "week", "month": "month", "quarter": "month", "year": "year",
                "decade": "year", "century": "year", "millennium": "year", "day": "day",
                "hour": "hour"}
#: Steps finer than a week, for timestamps only (a date's days are its own domain).
_INSTANT_STEPS = {"day": 86400, "hour": 3600}


def _instant_witnesses(lower: dt.datetime, upper: dt.datetime, step: str
                       ) -> tuple[dt.datetime, ...] | None:
    """Instants of [lower, upper] whose images under a grain shape are its whole image: both
    bounds, every start of a day or an hour for those steps (None when there are more than
    _MAX_INPUTS), the midnights of :func:`_date_witnesses` for coarser ones, and every minute
    of the first day and second of the first minute (HOUR, MINUTE, SECOND)."""
    instants = {lower, upper}
    first = dt.datetime(lower.year, lower.month, lower.day)
    seconds = _INSTANT_STEPS.get(step)
    if seconds is not None:
        if (upper - first).total_seconds() / seconds > _MAX_INPUTS:
            return None
        count = int((upper - first).total_seconds() // seconds) + 1
        instants.update(first + dt.timedelta(seconds=seconds * i) for i in range(count))
    else:
        days = _date_witnesses(lower.date(), upper.date(), step)
        if days is None:
            return None
        instants.update(dt.datetime(d.year, d.month, d.day) for d in days)
    instants.update(lower + dt.timedelta(minutes=i) for i in range(1440))
    instants.update(lower + dt.timedelta(seconds=i) for i in range(60))
    return tuple(sorted(i for i in instants if lower <= i <= upper))


def _date_witnesses(lower: dt.date, upper: dt.date, step: str) -> tuple[dt.date, ...] | None:
    """Days of [lower, upper] whose images under a grain shape are its whole image, without
    enumerating every day of a long range: both bounds, every start of a ``step`` (Monday,
    first of a month or of a year) and every day of the first :data:`_CYCLE_YEARS` years (the
    cyclic parts: day, day of week and of year, ISO week). None when there are too many."""
    months = (upper.year - lower.year) * 12 + upper.month - lower.month + 1
    count = {"week": (upper - lower).days // 7, "year": upper.year - lower.year,
             "month": months}[step]
    if count > _MAX_INPUTS:
        return None
    days = {lower, upper}
    if step == "week":
        first = lower + dt.timedelta(days=(7 - lower.weekday()) % 7)
        days.update(first + dt.timedelta(weeks=i) for i in range((upper - first).days // 7 + 1))
    else:
        per = 12 if step == "year" else 1
        for i in range(0, months, per):
            index = lower.year * 12 + (lower.month - 1 if step == "month" else 0) + i
            days.add(dt.date(index // 12, index % 12 + 1, 1))
    cycle = min((upper - lower).days + 1, 366 * _CYCLE_YEARS)
    days.update(lower + dt.timedelta(days=i) for i in range(cycle))
    return tuple(sorted(d for d in days if lower <= d <= upper))


def _constant_branches(expression: exp.Expression) -> tuple[object, ...] | None:
    if isinstance(expression, exp.If):
        results = [expression.args.get("true"), expression.args.get("false")]
    else:
        results = [b.args.get("true") for b in expression.args.get("ifs") or []]
        results.append(expression.args.get("default"))
    values: list[object] = []
    for result in results:
        value = _constant(result)
        if value is _NOT_CONSTANT:
            return None
        values.append(value)
    return tuple(v for (v,) in distinct((v,) for v in values))


_NOT_CONSTANT = object()


def _constant(node: exp.Expression | None) -> object:
    if node is None or isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Paren):
        return _constant(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        return int(node.this) if node.is_int else float(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        value = _constant(node.this)
        return -value  # type: ignore[operator]
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    return _NOT_CONSTANT
