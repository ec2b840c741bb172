"""What each output aggregate's accuracy will be, in its column's own units, before any data is
read: what ``dpsql explain`` tells an analyst (:class:`dpsql.explanation.explanation.Explanation`'s
``outputs``).

Each cell's 95% half-width is computed by the aggregate's own accuracy function
(:meth:`dpsql.privacy.aggregates.Cell.accuracy`, the one the answer's ± comes from) from its
measurements' half-widths (:func:`dpsql.execution.perturb.measurement_width`):

* one measurement (COUNT, SUM, COUNT(DISTINCT)): the same ± in every group;
* AVG, VAR, STDDEV: a ratio over the group's count ``n``, so the ± depends on ``n``. It is
  given at :data:`EXAMPLE_ROWS` rows, with the parts the accuracy function reads set to their
  worst case under the bounds (the centred sum at ``h * n``, the sum of squares at
  ``h^2 * n``, ``h`` the half-width of the clamp): AVG's ± is ``(w_S + h * w_n) / n``;
* a quantile (MEDIAN, PERCENTILE_CONT, MIN, MAX): the exponential mechanism's error is in
  ranks, ``R`` rows of the group's sorted values (:func:`dpsql.privacy.quantiles.
  quantile_rank_accuracy`). In values that is the spread of the ``2R`` values around the true
  quantile, which depends on the data; given here for ``n`` rows spread evenly over the
  bounds, ``(hi - lo) * R / n``, and never finer than the draw's step (one bucket).

Everything here is read from the plan (the metadata's bounds, the query, epsilon): nothing
private, no charge.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpsql.execution.perturb import measurement_width
from dpsql.privacy.aggregates import Cell, MeasurementKind
from dpsql.privacy.plan import Plan, calibrated

#: The group sizes at which an accuracy that depends on the group's rows is shown.
EXAMPLE_ROWS = (1_000, 100_000)
#: What the accuracies that depend on a group's rows mean, said once under them.
READING = ("± at n rows: an AVG, VAR or STDDEV at the worst case its bounds allow (n its "
           "group's count); a quantile within so many ranks of the true one, in values for n "
           "rows spread evenly over its bounds (a tenth of the range needs about 10 x ranks "
           "rows).")


@dataclass(frozen=True)
class Expected:
    """One output aggregate's 95% accuracy, in its column's units (module docstring)."""

    output: str  # the aggregate as written
    kind: str  # the registry kind: count, sum, avg, quantile, var_pop, ...
    bounds: tuple[float, float] | None  # what its values are clamped to (None: counted only)
    fixed: float | None  # the ± in every group, when it does not depend on the group's rows
    at_rows: tuple[tuple[int, float], ...]  # (n, ±) at n rows otherwise
    ranks: float | None = None  # a quantile's error in ranks
    step: float | None = None  # a quantile's finest step (one bucket of its draw)
    unit: str = ""  # "days" or "seconds" for date and timestamp quantiles

    def text(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        if self.fixed is not None:
            return f"±{self.fixed:.4g}{unit}"
        shown = ", ".join(f"±{w:.4g}{unit} at {n:,} rows" for n, w in self.at_rows)
        if self.ranks is not None:
            return f"within {self.ranks:,.0f} ranks: {shown}"
        return shown

    def as_json(self) -> dict[str, object]:
        return {"aggregate": self.output, "kind": self.kind,
                "bounds": list(self.bounds) if self.bounds is not None else None,
                "half_width": self.fixed,
                "half_width_at_rows": {str(n): w for n, w in self.at_rows} or None,
                "ranks": self.ranks, "step": self.step, "unit": self.unit or None}


def expected(p: Plan) -> list[Expected]:
    """Each output aggregate of ``p``, in the query's order."""
    return [_expected(cell) for cell in p.cells]


def _expected(cell: Cell) -> Expected:
    measurements = calibrated(cell)
    widths = [measurement_width(m) for m in measurements]
    b = cell.bound
    bounds = (float(b.lo), float(b.hi)) if b is not None and b.numeric and \
        cell.call.kind != "count" else None
    first = measurements[0]
    if first.kind == MeasurementKind.HISTOGRAM:
        return _quantile(cell, widths[0])
    if len(measurements) == 1:
        return Expected(cell.call.text, cell.call.kind, bounds, widths[0], ())
    h = (b.hi - b.lo) / 2 if b is not None else 0.0
    at_rows = []
    for n in EXAMPLE_ROWS:
        parts = [np.array([_worst_part(m.kind, m.power, h, n)]) for m in measurements]
        at_rows.append((n, float(cell.accuracy(parts, widths)[0])))
    return Expected(cell.call.text, cell.call.kind, bounds, None, tuple(at_rows))


def _worst_part(kind: MeasurementKind, power: int, h: float, n: int) -> float:
    """A measurement's noisy value in a group of ``n`` rows at the bounds' worst case."""
    if kind != MeasurementKind.SUM:
        return float(n)
    return (h ** power) * n


def _quantile(cell: Cell, ranks: float) -> Expected:
    m = calibrated(cell)[0]
    span = m.hi - m.lo
    step = 1.0 if m.integer else span / m.buckets
    unit = "days" if m.dates else "seconds" if m.instants else ""
    at_rows = tuple((n, min(span, max(step, span * ranks / n))) for n in EXAMPLE_ROWS)
    bounds = None if m.dates or m.instants else (m.lo, m.hi)
    return Expected(cell.call.text, cell.call.kind, bounds, None, at_rows, ranks, step, unit)
