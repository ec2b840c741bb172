"""Public domains narrowed by the analyst's own constant filters on the key columns.

A GROUP BY key with a public domain releases every key of the domain, empty ones included. When
the WHERE clause says ``day BETWEEN '2025-03-04' AND '2025-03-06'`` or ``category IN ('lab',
'dental')``, a key value that fails the filter can hold no row that reaches the aggregate: the
released domain is then the declared one *restricted by the filter* (3 days, not 365).

**Why it is private.** The restriction reads the SQL text and the metadata, never the data:
a conjunct of the WHERE clause (top-level AND) that reads one column and nothing else
(constants, operators, the allow-listed row-level functions; no subquery, no aggregate) is
evaluated on each *declared* value of that column, made total exactly as in the engine query
(:func:`dpsql.query.total_expressions.total` with ``filtering``), in the scratch engine; values
where it is not TRUE are dropped. The released keys are thus a function of the query text and the
metadata: the same on every pair of neighbouring databases, as a declared domain is. Constants
are folded first (:mod:`dpsql.query.fold_constants`), the clock included (``NOW()``,
``CURRENT_DATE``: the time is public), so the filter's value is fixed when the query is planned.

What it may cost is accuracy only: a row stored outside the column's declared bounds is
clamped to a bound for its key and compared as stored in the filter, so it may fall in a key
the filter dropped (then it is not released, as any row outside a public domain).

For a long public date or timestamp range, whose keys are reached through witnesses
(:mod:`dpsql.privacy.domains`), the filter's own constants (and the instant just after each) are
added as witnesses, and a filter made only of direct comparisons of the bare column with
constants narrows the range itself (:func:`narrowed_range`), so that an hourly series over
three days of a ten-year range has a public domain.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import cast

import duckdb
import numpy as np
from sqlglot import exp

from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.errors import EngineError
from dpsql.metadata.metadata import Column, Table
from dpsql.query.local_evaluator import run_over, scratch
from dpsql.query.total_expressions import total

Filters = Mapping[str, tuple[exp.Expression, ...]]

_DIRECT = (exp.EQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In)
_COMPARISONS = (*_DIRECT, exp.NEQ)
_NOT_ROW_LEVEL = (exp.AggFunc, exp.Window, exp.Subquery, exp.Select, exp.Placeholder,
                  exp.Parameter)


def key_filters(where: exp.Expression | None) -> Filters:
    """The conjuncts of ``where`` that read exactly one column, by its lower-case name."""
    if where is None:
        return {}
    conjuncts = where.flatten() if isinstance(where, exp.And) else [where]
    out: dict[str, list[exp.Expression]] = {}
    for conjunct in conjuncts:
        if not isinstance(conjunct, exp.Expression) or conjunct.find(*_NOT_ROW_LEVEL):
            continue
        names = {c.name.lower() for c in conjunct.find_all(exp.Column)}
        if len(names) == 1:
            out.setdefault(names.pop(), []).append(conjunct)
    return {name: tuple(found) for name, found in out.items()}


def restrict(values: Sequence[object], column: Column, conjuncts: Sequence[exp.Expression],
             table: Table) -> tuple[object, ...]:
    """The ``values`` of ``column`` at which every conjunct is TRUE, in their order."""
    if not conjuncts or not values:
        return tuple(values)
    data = {column.name.lower(): np.array(list(values), dtype=object),
            "__i": np.arange(len(values), dtype=np.int64)}
    test = " AND ".join(f"({total(c, table, filtering=True).sql(dialect=DuckDBDialect)})"
                        for c in conjuncts)
    try:
        _, _, rows = run_over(f"SELECT __i FROM __domain WHERE {test}", "__domain", data)
    except EngineError:  # a filter the scratch engine cannot evaluate: no narrowing
        return tuple(values)
    keep = {int(r[0]) for r in rows}  # type: ignore[call-overload]
    return tuple(v for i, v in enumerate(values) if i in keep)


def filter_witnesses(column: Column, conjuncts: Sequence[exp.Expression]
                     ) -> tuple[dt.date, ...]:
    """The constants a temporal column is compared with, as its type, and the instants just
    before and after each (a day for dates, a microsecond for timestamps): where a filter's
    edges are, inclusive or not."""
    sql_type = "DATE" if column.type == "date" else "TIMESTAMP"
    step = dt.timedelta(days=1) if column.type == "date" else dt.timedelta(microseconds=1)
    out: list[dt.date] = []
    for conjunct in conjuncts:
        for node in conjunct.find_all(*_COMPARISONS):
            for side in _constant_sides(cast(exp.Expression, node)):
                value = _evaluate(side, sql_type)
                if isinstance(value, dt.date):
                    out.extend(_near(value, step))
    return tuple(out)


def narrowed_range(column: Column, conjuncts: Sequence[exp.Expression], table: Table
                   ) -> tuple[dt.date, dt.date] | None:
    """[lower, upper] of a public temporal range narrowed by filters that compare the bare
    column with constants only (``ts BETWEEN a AND b``, ``day >= a``): every value that passes
    lies between the least and the greatest passing candidate among the bounds and the
    filters' edges, because such a filter changes its truth only at its constants. None when
    a filter is of another shape (``DATE_TRUNC('month', d) >= a`` changes at month starts)."""
    if not conjuncts or not all(_direct(c) for c in conjuncts):
        return None
    lower, upper = column.lower, column.upper
    assert isinstance(lower, dt.date) and isinstance(upper, dt.date)
    candidates = sorted({lower, upper, *(w for w in filter_witnesses(column, conjuncts)
                                         if lower <= w <= upper)})
    passing = restrict(candidates, column, conjuncts, table)
    if not passing:
        return None  # nothing passes: restrict() then leaves no key
    first, last = passing[0], passing[-1]
    assert isinstance(first, dt.date) and isinstance(last, dt.date)
    return first, last


def _near(value: dt.date, step: dt.timedelta) -> list[dt.date]:
    out = [value]
    for move in (-step, step):
        with contextlib.suppress(OverflowError):  # year 1 or 9999: no neighbour there
            out.append(value + move)
    return out


def _direct(conjunct: exp.Expression) -> bool:
    node = conjunct.this if isinstance(conjunct, exp.Paren) else conjunct
    if not isinstance(node, _DIRECT):
        return False
    others = _operands(node)[1:]
    return isinstance(node.this, exp.Column) and bool(others) and not any(
        side.find(exp.Column) for side in others)


def _operands(node: exp.Expression) -> list[exp.Expression]:
    """A comparison's operands, its first (``this``) first."""
    if isinstance(node, exp.Between):
        sides = [node.this, node.args.get("low"), node.args.get("high")]
    elif isinstance(node, exp.In):
        sides = [node.this, *node.expressions]
    else:
        sides = [node.this, node.args.get("expression")]
    return [s for s in sides if isinstance(s, exp.Expression)]


def _constant_sides(node: exp.Expression) -> list[exp.Expression]:
    """The operands of a comparison that read no column."""
    return [s for s in _operands(node) if s.find(exp.Column) is None]


def _evaluate(node: exp.Expression, sql_type: str) -> object:
    try:
        rows = scratch().execute(f"SELECT TRY_CAST(({node.sql(dialect=DuckDBDialect)}) AS "
                                 f"{sql_type})").fetchall()
    except duckdb.Error:  # not a constant of this type: no witness
        return None
    return rows[0][0] if rows else None
