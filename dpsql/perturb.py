"""Pass 7, perturb: exact per-group measurements -> released groups with noisy cells.

This is the only pass that sees exact aggregates. It decides which groups are released (every
key of a public domain, empty groups included; otherwise the groups whose noisy number of units
reaches the threshold tau), perturbs each measurement once for all released groups together
(vectorised), draws quantiles with the exponential mechanism, and combines the noisy
measurements into the cells of the query (post-processing). Exact values never leave it.

Real-valued sums arrive as exact integers (HUGEINT) in units of their measurement's ``step``
(dpsql.aggregates, "Exact sums") and go to :func:`dpsql.mechanisms.perturb_fixed`, which
reaches the noise grid by integer arithmetic: no float rounding happens before the noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dpsql.aggregates import Cell, Measurement
from dpsql.keys import canonical
from dpsql.keys import order as key_order
from dpsql.mechanisms import (
    NoiseSpec,
    accuracy,
    perturb,
    perturb_fixed,
)
from dpsql.plan import Plan
from dpsql.quantiles import quantile_from_histogram, quantile_rank_accuracy


@dataclass
class NoisyCells:
    """The released groups: key tuples, and per cell placeholder its noisy values and their
    95% accuracy half-widths."""

    keys: list[tuple[object, ...]]
    values: dict[str, np.ndarray]
    accuracy: dict[str, np.ndarray]


def perturb_cells(plan: Plan, rows: Sequence[tuple[object, ...]]) -> NoisyCells:
    """Release groups and noisy cells from the engine's exact rows (keys, then measurements)."""
    nkeys = len(plan.keys)
    exact = {canonical(r[:nkeys]): r[nkeys:] for r in rows}
    noisy: dict[str, np.ndarray] = {}
    if plan.domain is not None:
        keys = list(plan.domain)
    elif plan.threshold is not None:
        keys = list(exact)
        units = plan.threshold.measurement
        counts = perturb(_column(keys, exact, plan, units), _noise(units))
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
        if m.kind == "histogram":
            noisy[m.name] = _quantiles(m, column, _quantile_of(plan, m))
        elif m.step:  # an exact fixed-point sum: integers in units of m.step
            noisy[m.name] = perturb_fixed(list(column), m.step, _noise(m))
        else:
            noisy[m.name] = perturb(column, _noise(m))
    values: dict[str, np.ndarray] = {}
    accuracies: dict[str, np.ndarray] = {}
    for cell in plan.cells:
        parts = [noisy[m.name] for m in cell.measurements]
        values[cell.call.placeholder] = _typed(cell.combine(parts), cell.type)
        accuracies[cell.call.placeholder] = cell_accuracy(cell, parts, len(keys))
    return NoisyCells(keys=keys, values=values, accuracy=accuracies)


def _noise(m: Measurement) -> NoiseSpec:
    # The plan (_split_budget) sets the noise of every Laplace and Gaussian measurement; only
    # histograms (the exponential mechanism) have none, and they are never perturbed here.
    assert m.noise is not None
    return m.noise


def _column(keys: list[tuple[object, ...]],
            exact: Mapping[tuple[object, ...], Sequence[object]],
            plan: Plan, m: Measurement) -> np.ndarray:
    index = int(m.name.removeprefix("__m"))  # rows hold measurements in plan order
    if m.kind == "histogram":
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
    if value is None:
        return 0
    return value if isinstance(value, int) else float(value)  # type: ignore[arg-type]


def _quantile_of(plan: Plan, m: Measurement) -> float:
    for cell in plan.cells:
        if m in cell.measurements and cell.quantile is not None:
            return cell.quantile
    raise AssertionError("a histogram measurement without a quantile cell")


def _quantiles(m: Measurement, histograms: np.ndarray, q: float) -> np.ndarray:
    lo, hi = m.histogram_range
    out = np.empty(len(histograms), dtype=np.float64)
    for i, histogram in enumerate(histograms):
        counts = np.zeros(m.buckets, dtype=np.float64)
        for bucket, count in histogram.items():
            if 0 <= int(bucket) < m.buckets:
                counts[int(bucket)] = count
        value = quantile_from_histogram(counts, lo, hi, q, m.epsilon, m.l1)
        out[i] = min(float(np.floor(value)), m.hi) if m.integer else value
    return out


def _typed(values: np.ndarray, sql_type: str) -> np.ndarray:
    if sql_type == "BIGINT":
        return np.asarray(values, dtype=np.int64)
    return np.asarray(values, dtype=np.float64)


def cell_accuracy(cell: Cell, parts: Sequence[np.ndarray], n: int) -> np.ndarray:
    """95% half-widths per group. Counts and sums: exact, from the noise distribution. AVG and
    VAR: a first-order propagation of the parts' half-widths through the combination, computed
    from noisy values only. Quantiles: the exponential mechanism's rank error."""
    ms = cell.measurements
    if cell.accuracy_unit == "rank":
        m = ms[0]
        return np.full(n, quantile_rank_accuracy(m.buckets, m.epsilon, m.l1))
    widths = [accuracy(_noise(m)) for m in ms]
    if len(ms) == 1:
        return np.full(n, widths[0])
    count = np.maximum(np.asarray(parts[0], dtype=np.float64), 1.0)
    if len(ms) == 2:  # AVG = c + S/n
        centered = np.asarray(parts[1], dtype=np.float64) / count
        return (widths[1] + np.abs(centered) * widths[0]) / count
    mean = np.asarray(parts[1], dtype=np.float64) / count
    second = np.asarray(parts[2], dtype=np.float64) / count
    var_width = (widths[2] + 2 * np.abs(mean) * widths[1] + np.abs(second) * widths[0]) / count
    if cell.call.kind.startswith("stddev"):
        var = np.maximum(second - mean * mean, 0.0)
        return (np.sqrt(var + var_width) - np.sqrt(np.maximum(var - var_width, 0.0))) / 2
    return var_width
