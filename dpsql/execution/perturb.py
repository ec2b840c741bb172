"""Pass 9, perturb: exact per-group measurements -> released groups with noisy cells.

This is the only pass that sees exact aggregates. It decides which groups are released (every
key of a public domain, empty groups included; otherwise the groups whose noisy number of units
reaches the threshold tau), perturbs each measurement once for all released groups together
(vectorised), draws quantiles with the exponential mechanism, and combines the noisy
measurements into the cells of the query (post-processing). Exact values never leave it.

Real-valued sums arrive as exact integers (HUGEINT) in units of their measurement's ``step``
(dpsql.privacy.aggregates, "Exact sums") and go to :func:`dpsql.privacy.mechanisms.perturb_fixed`,
which reaches the noise grid by integer arithmetic: no float rounding happens before the noise.

**Empty and all-NULL aggregates are 0** (:func:`_number`; docs/sql.md, "NULL, NaN and empty
groups"): the engine's NULL for a count or sum over no rows or only NULLs (SQL's ``SUM``, DuckDB's
``COUNT_IF``), and a released group the engine has no row for (a public domain's empty group),
are perturbed as 0, on every path, never released as NULL: whether a group holds a non-NULL
value is a function of the data, so releasing NULL exactly where SQL has one would tell, for a
group of one person, whether their value is NULL. Post-processing (HAVING, ORDER BY, outer
expressions) then reads the released number. NULL units and NaN never reach the engine's
aggregates (:mod:`dpsql.execution.rewrite`, :mod:`dpsql.query.total_expressions`).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dpsql.privacy.aggregates import EPOCH_DAY, Measurement, MeasurementKind
from dpsql.privacy.keys import canonical
from dpsql.privacy.keys import order as key_order
from dpsql.privacy.mechanisms import NoiseSpec, accuracy, perturb, perturb_fixed
from dpsql.privacy.plan import Plan, calibrated
from dpsql.privacy.quantile_grid import Grid
from dpsql.privacy.quantiles import (
    quantile_from_buckets,
    quantile_from_intervals,
    quantile_rank_accuracy,
)
from dpsql.privacy.randomness import Randomness


@dataclass
class NoisyCells:
    """The released groups: key tuples, and per cell placeholder its noisy values and their
    95% accuracy half-widths."""

    keys: list[tuple[object, ...]]
    values: dict[str, np.ndarray]
    accuracy: dict[str, np.ndarray]


def perturb_cells(plan: Plan, rows: Sequence[tuple[object, ...]], rng: Randomness
                  ) -> NoisyCells:
    """Release groups and noisy cells from the engine's exact rows (keys, then measurements),
    every draw from ``rng``."""
    nkeys = len(plan.keys)
    exact = _by_key(rows, nkeys)
    noisy: dict[str, np.ndarray] = {}
    if plan.domain is not None:
        keys = list(plan.domain)
    elif plan.threshold is not None:
        keys = list(exact)
        units = plan.threshold.measurement
        counts = perturb(_column(keys, exact, plan, units), _noise(units), rng)
        released = counts >= plan.threshold.tau
        # Released groups in key order: the engine's row order may depend on private data.
        order = sorted(np.flatnonzero(released), key=lambda i: key_order(keys[i]))
        keys = [keys[i] for i in order]
        noisy[units.name] = counts[np.array(order, dtype=np.int64)]
    else:
        keys = [()]  # a global aggregate: always exactly one row
    for m in plan.measurements:
        if m.name in noisy:
            continue
        column = _column(keys, exact, plan, m)
        if m.kind == MeasurementKind.HISTOGRAM:
            assert m.quantile is not None  # a histogram is drawn for one quantile
            noisy[m.name] = _quantiles(m, column, m.quantile, rng)
        elif m.step:  # an exact fixed-point sum: integers in units of m.step
            noisy[m.name] = perturb_fixed(list(column), m.step, _noise(m), rng)
        else:
            noisy[m.name] = perturb(column, _noise(m), rng)
    values: dict[str, np.ndarray] = {}
    accuracies: dict[str, np.ndarray] = {}
    for cell in plan.cells:
        measurements = calibrated(cell)
        parts = [noisy[m.name] for m in measurements]
        values[cell.call.placeholder] = typed(cell.combine(parts), cell.type)
        widths = [measurement_width(m) for m in measurements]
        accuracies[cell.call.placeholder] = cell.accuracy(parts, widths)
    return NoisyCells(keys=keys, values=values, accuracy=accuracies)


def _by_key(rows: Sequence[tuple[object, ...]], nkeys: int
            ) -> dict[tuple[object, ...], Sequence[object]]:
    """The engine's rows by canonical key. Two engine groups whose keys are one released value
    (values the engine keeps apart but the client converts alike) are merged by adding their
    measurements: what grouping by the released value would have computed, with the same
    sensitivity (a unit's contributions to the two groups move the merged one by their sum),
    so no group silently replaces another."""
    exact: dict[tuple[object, ...], Sequence[object]] = {}
    for row in rows:
        key = canonical(row[:nkeys])
        seen = exact.get(key)
        exact[key] = row[nkeys:] if seen is None else [_add(a, b) for a, b in
                                                       zip(seen, row[nkeys:], strict=True)]
    return exact


def _add(a: object, b: object) -> object:
    if a is None or b is None:
        return b if a is None else a
    if isinstance(a, (dict, list)) and isinstance(b, (dict, list)):  # histograms
        merged = dict(zip(*histogram_arrays(a), strict=True))
        for bucket, count in zip(*histogram_arrays(b), strict=True):
            merged[bucket] = merged.get(bucket, 0) + count
        return merged
    return a + b  # type: ignore[operator]


def _noise(m: Measurement) -> NoiseSpec:
    # The plan (_split_budget) sets the noise of every Laplace and Gaussian measurement; only
    # histograms (the exponential mechanism) have none, and they are never perturbed here.
    assert m.noise is not None
    return m.noise


def _column(keys: list[tuple[object, ...]],
            exact: Mapping[tuple[object, ...], Sequence[object]],
            plan: Plan, m: Measurement) -> np.ndarray:
    index = m.index  # rows hold the keys, then the measurements in plan order
    if m.kind == MeasurementKind.HISTOGRAM:
        out = np.empty(len(keys), dtype=object)
        for i, k in enumerate(keys):
            row = exact.get(k)
            out[i] = row[index] if row is not None and row[index] is not None else {}
        return out
    values = [_number(exact[k][index]) if k in exact else 0 for k in keys]
    if m.step:  # HUGEINT sums as Python ints; perturb_fixed refuses anything else
        return np.array(values, dtype=object)
    if m.integer:
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:  # SUMs of BIGINT can exceed int64 before noise
            return np.array(values, dtype=object)
    return np.array(values, dtype=np.float64)


def _number(value: object) -> int | float:
    """An exact measurement as a number: the engine's NULL (no rows, only NULLs) is 0."""
    if value is None:
        return 0
    return value if isinstance(value, int) else float(value)  # type: ignore[arg-type]


def histogram_arrays(value: object) -> tuple[np.ndarray, np.ndarray]:
    """An engine's histogram as (buckets, counts) arrays: a MAP or JSON object bucket -> count
    (Spark, PostgreSQL, whose keys are text), or DuckDB's two parallel lists
    (:func:`dpsql.engines.histograms.duckdb_gather`); NULL is the empty histogram."""
    if isinstance(value, dict):
        buckets = np.fromiter((int(b) for b in value), dtype=np.int64, count=len(value))
        return buckets, np.fromiter(value.values(), dtype=np.float64, count=len(value))
    if isinstance(value, (list, tuple)) and len(value) == 2 and None not in value:
        # A group whose gathered lists are NULL (no bounded row reached it, the LEFT JOIN
        # of dpsql.engines.histograms) is the empty histogram too, never an error.
        return np.asarray(value[0], dtype=np.int64), np.asarray(value[1], dtype=np.float64)
    return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)


def _quantiles(m: Measurement, histograms: np.ndarray, q: float, rng: Randomness
               ) -> np.ndarray:
    """One exponential-mechanism draw per group over its sparse histogram: only its non-empty
    buckets are read (:func:`dpsql.privacy.quantiles.quantile_from_buckets`, or
    :func:`~dpsql.privacy.quantiles.quantile_from_intervals` for the fine grid). Weighted
    counts are in units of ``m.step`` rows (aggregates, "Bounding by weights")."""
    lo, hi = m.histogram_range
    grid = Grid(lo, hi) if m.fine else None
    out = np.empty(len(histograms), dtype=np.float64)
    for i, histogram in enumerate(histograms):
        buckets, counts = histogram_arrays(histogram)
        if m.step:
            counts = counts * m.step  # a power of two: exact
        if grid is not None:
            keep = (buckets >= 0) & (buckets < grid.keys) & (counts > 0)
            lows, highs = grid.intervals(buckets[keep])
            value = quantile_from_intervals(lows, highs, counts[keep], lo, hi, q, m.epsilon,
                                            m.l1, rng)
        else:
            keep = (buckets >= 0) & (buckets < m.buckets) & (counts > 0)
            value = quantile_from_buckets(buckets[keep], counts[keep], m.buckets, lo, hi, q,
                                          m.epsilon, m.l1, rng)
        out[i] = min(float(np.floor(value)), m.hi) if m.integer else value
    return out


def typed(values: np.ndarray, sql_type: str) -> np.ndarray:
    if sql_type == "DATE":
        return dated(values)
    if sql_type == "TIMESTAMP":
        return instants(values)
    if sql_type == "BIGINT":
        # A count on weighted rows is real-valued (aggregates, "Bounding by weights"): the
        # noisy value is rounded; integer measurements are integers already.
        values = np.asarray(values)
        return np.asarray(np.rint(values) if values.dtype.kind == "f" else values,
                          dtype=np.int64)
    return np.asarray(values, dtype=np.float64)


def dated(days: np.ndarray) -> np.ndarray:
    """Day numbers since EPOCH_DAY (drawn among the declared bounds' days) as dates: the day
    a drawn real number falls in."""
    return np.array([EPOCH_DAY + dt.timedelta(days=math.floor(d)) if math.isfinite(d)
                     else None for d in np.asarray(days, dtype=np.float64)], dtype=object)


def instants(seconds: np.ndarray) -> np.ndarray:
    """Seconds since EPOCH_DAY (drawn between the declared bounds) as timestamps, to the
    second the drawn real number falls in."""
    epoch = dt.datetime.combine(EPOCH_DAY, dt.time())
    return np.array([epoch + dt.timedelta(seconds=math.floor(s)) if math.isfinite(s)
                     else None for s in np.asarray(seconds, dtype=np.float64)], dtype=object)


def measurement_width(m: Measurement) -> float:
    """A measurement's 95% half-width: from its noise, or the exponential mechanism's rank
    error for a quantile."""
    if m.kind == MeasurementKind.HISTOGRAM:
        return quantile_rank_accuracy(m.buckets, m.epsilon, m.l1)
    return accuracy(_noise(m))
