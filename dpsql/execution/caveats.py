"""Caveats: the notes that say when an answer is not worth reading, and why, and what helps.

A table of 40 noisy cells is read for its values, not for its ±95% column. So an answer says,
in one short note per cause, when:

* **the noise exceeds the value** in some cells: a cell's 95% half-width (its ``accuracy``,
  value-unit cells only) is larger than the absolute value released ("the noise exceeds the
  value in 8 of 12 cells"): a negative count or a sum of the wrong sign is the noise speaking.
  Fix: coarser groups (fewer, larger ones) or a larger epsilon; where a unit may contribute
  k > 1 rows (a declared k, not one chosen from the data), also a smaller
  ``max_rows_contributed``: the noise of a count or sum grows with k;
* **an AVG, a quantile, MIN or MAX sits at a bound**: an AVG is clamped to the bounds of its
  argument (:func:`dpsql.privacy.aggregates._combine_avg`), so a noisy count near zero pins it
  there (coarser groups, a larger epsilon); a quantile is drawn among the declared bounds, so
  one in the first or last of its buckets may be a clamped value (the owner's bounds);
* **the bounds dropped a large share of rows**, where that is already known: only from a
  retention estimate the analyst asked for (:mod:`dpsql.execution.retention`, already released and
  charged); nothing is estimated here. Fix: a larger ``max_rows_contributed``.

**Privacy.** These notes are post-processing: they read the released answer (values and their
accuracies, which are functions of the noise scales and of noisy parts only), the released
retention estimate, and the plan (the query text, the metadata's public bounds). They read no
private value and no exact aggregate, so they cost nothing and leak nothing; they are computed
here, once, for every door (:meth:`dpsql.Database.run` appends them to ``Result.notes`` and
``Result.caveats``; ``caveats=False`` there leaves them out).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

from sqlglot import exp

from dpsql.execution.postprocess import Result
from dpsql.execution.retention import Retention
from dpsql.privacy.aggregates import EPOCH_DAY, Cell, MeasurementKind
from dpsql.privacy.plan import Plan

#: How each caveat begins (tests and doors recognise them so).
NOISE = "The noise exceeds the value"
AVG_AT_BOUND = "AVG at a bound"
QUANTILE_AT_BOUND = "At a declared bound"
DROPPED = "The contribution bounds left out"
#: A retention estimate whose 95% interval lies below this share of a unit's rows kept.
KEPT_AT_MOST = 0.8


def caveats(plan: Plan, result: Result, retention: Retention | None = None) -> list[str]:
    """The caveats of ``result``, the answer to ``plan`` (module docstring), in order: noise,
    AVGs at a bound, quantiles at a bound, rows dropped. Empty when the answer reads well."""
    cells: list[Cell | None] = [None] * len(result.columns)
    if plan.query.post is None:  # a query over the answer computes its columns: none direct
        cells = (_direct_cells(plan) + cells)[:len(cells)]
    notes = [_noise(result, cells, plan), _avg_bounds(result, cells),
             _quantile_bounds(result, cells), _dropped(retention)]
    return [n for n in notes if n is not None]


def attach_caveats(plan: Plan, result: Result, retention: Retention | None) -> None:
    """Put the caveats of ``result``, the answer to ``plan``, in its ``caveats`` and ``notes``
    (a plan of private cells only: public reads, free answers and local rows have none, and
    their routes do not ask: :meth:`dpsql.routes.route.Route.caveats`). Called after the answer
    was stored: they are computed afresh whenever it is answered."""
    result.caveats = caveats(plan, result, retention)
    result.notes.extend(n for n in result.caveats if n not in result.notes)


def _direct_cells(plan: Plan) -> list[Cell | None]:
    """The cell each output column merely shows (a renamed placeholder), else None."""
    by_placeholder = {cell.call.placeholder: cell for cell in plan.cells}
    nodes = [e.unalias() for e in plan.query.outer.expressions]
    return [by_placeholder.get(n.name) if isinstance(n, exp.Column) else None for n in nodes]


def _values(result: Result, index: int) -> list[tuple[float, float | None]]:
    """Column ``index``'s numeric released values (NULL and non-numbers left out) and their
    95% half-widths."""
    out = []
    for row, acc in zip(result.rows, result.accuracy, strict=True):
        value = _number(row[index])
        if value is not None:
            out.append((value, acc[index] if index < len(acc) else None))
    return out


def _number(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, dt.datetime):
        return (value - dt.datetime.combine(EPOCH_DAY, dt.time())).total_seconds()
    if isinstance(value, dt.date):
        return float((value - EPOCH_DAY).days)
    try:
        number = float(value)  # type: ignore[arg-type]  # int, float, Decimal
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _noise(result: Result, cells: Sequence[Cell | None], plan: Plan) -> str | None:
    over = total = 0
    where = []
    for i, (column, cell) in enumerate(zip(result.columns, cells, strict=True)):
        if cell is None or column.accuracy_unit != "value":
            continue
        pairs = [(v, a) for v, a in _values(result, i) if a is not None]
        bad = sum(1 for v, a in pairs if a > abs(v))
        over, total = over + bad, total + len(pairs)
        if bad:
            where.append(f"{column.name}: {bad} of {len(pairs)}")
    if not over:
        return None
    detail = f" ({'; '.join(where)})" if len(where) > 1 else f" ({where[0].split(':')[0]})"
    k = plan.table.rows_per_unit
    fewer = "" if k <= 1 or plan.auto is not None else (
        f"; so does a smaller max_rows_contributed (each unit counts with up to {k} rows here: "
        "fewer means less noise, and more of a heavy unit's rows left out)")
    return (f"{NOISE} in {over} of {total} cell(s){detail}: their ±95% is wider than the "
            "value, which is then mostly noise. Coarser groups (fewer, larger ones) or a larger "
            f"epsilon help{fewer}.")


def _at_bound(result: Result, index: int, lo: float, hi: float, width: float
              ) -> tuple[int, int, int]:
    """(at the lower bound, at the upper, numeric values) of column ``index``: within
    ``width`` of a bound (a quantile's bucket), or at it (``width`` 0)."""
    low = high = count = 0
    for value, _ in _values(result, index):
        count += 1
        if value <= lo or (width and value < lo + width):
            low += 1
        elif value >= hi or (width and value > hi - width):
            high += 1
    return low, high, count


def _where(name: str, low: int, high: int, count: int, lo: str, hi: str) -> str:
    sides = [f"at {lo} in {low}" if low else "", f"at {hi} in {high}" if high else ""]
    return f"{name} {' and '.join(s for s in sides if s)} of {count} row(s)"


def _avg_bounds(result: Result, cells: Sequence[Cell | None]) -> str | None:
    found = []
    for i, cell in enumerate(cells):
        if cell is None or cell.call.kind != "avg" or cell.bound is None:
            continue
        lo, hi = _avg_clamp(cell, result)
        low, high, count = _at_bound(result, i, lo, hi, 0.0)
        if low or high:
            found.append(_where(result.columns[i].name, low, high, count, f"{lo:g}", f"{hi:g}"))
    if not found:
        return None
    return (f"{AVG_AT_BOUND}: {'; '.join(found)}: an AVG is clamped to its argument's bounds, "
            "where a small noisy count pins it (coarser groups or a larger epsilon help) or "
            "values beyond them (the owner's bounds).")


def _avg_clamp(cell: Cell, result: Result) -> tuple[float, float]:
    """The interval an AVG is clamped to: its bound, or the one chosen from the data (a DP
    release carried by the result) where its argument is a column whose bounds were chosen."""
    assert cell.bound is not None
    lo, hi = float(cell.bound.lo), float(cell.bound.hi)
    arg = cell.call.arg
    chosen = (result.chosen_bounds or {}).get(arg.name) if isinstance(arg, exp.Column) and \
        cell.call.per_group is None else None
    return (float(chosen[0]), float(chosen[1])) if chosen is not None else (lo, hi)


def _quantile_bounds(result: Result, cells: Sequence[Cell | None]) -> str | None:
    found = []
    for i, cell in enumerate(cells):
        if cell is None or cell.call.kind != "quantile":
            continue
        m = cell.measurements[0]
        if m.kind != MeasurementKind.HISTOGRAM or not m.buckets:
            continue
        width = 1.0 if m.integer else (m.hi - m.lo) / m.buckets
        low, high, count = _at_bound(result, i, m.lo, m.hi, width)
        if low or high:
            found.append(_where(result.columns[i].name, low, high, count,
                                "its lower bound", "its upper bound"))
    if not found:
        return None
    return (f"{QUANTILE_AT_BOUND}: {'; '.join(found)}: values beyond the declared bounds count "
            "as the bound, so the true value may lie further out (the owner's bounds), or with "
            "few rows the draw is mostly noise (coarser groups or a larger epsilon help).")


def _dropped(retention: Retention | None) -> str | None:
    if retention is None or retention.epsilon == 0 or retention.high >= KEPT_AT_MOST:
        return None
    return (f"{DROPPED} about {1 - retention.kept:.0%} of a unit's rows on average (the "
            f"retention estimate; at least {1 - retention.high:.0%} at 95%), a bias the ± does "
            "not cover: a larger max_rows_contributed (within the owner's caps) keeps more, at "
            "more noise.")
