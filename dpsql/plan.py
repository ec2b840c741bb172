"""Pass 4, plan: bounds, sensitivities, key release, the split of the budget, noise per cell.

The plan is computed from the query and the metadata only, never from data, so its cost is
known before anything runs.

**Budget split.** A query with m distinct measurements (see :mod:`dpsql.aggregates`; AVG needs
two, VAR three, and key release by thresholding one more, shared with a COUNT of units when the
two coincide) gives each measurement ``epsilon / m``. Sequential composition over the m
measurements then costs exactly ``epsilon``. Delta goes to what needs it: to thresholding when
keys have no public domain, to the Gaussian measurements when the Gaussian mechanism is asked
for, and half to each when both. The Gaussian measurements of one query share their part
``(eps_G, delta_G)`` as zero-concentrated DP: ``rho = (sqrt(ln(1/delta_G) + eps_G) -
sqrt(ln(1/delta_G)))^2``, split equally, ``sigma_i = Delta_2 / sqrt(2 rho_i)``. The query's cost
is ``(epsilon, delta actually used)``; ``dpsql explain`` shows every share.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from sqlglot import exp

from dpsql.aggregates import Cell, Measurement, cell_for, units_measurement
from dpsql.bounds import Bound, bound
from dpsql.check import CheckedQuery
from dpsql.domains import key_domain
from dpsql.errors import KeyReleaseRefused
from dpsql.keys import distinct
from dpsql.mechanisms import (
    calibrate_gaussian,
    calibrate_laplace,
    rho_for,
    threshold,
    validate_privacy_parameters,
)
from dpsql.metadata import MAX_DOMAIN_SIZE, Table


@dataclass
class Key:
    expression: exp.Expression  # over base columns
    name: str  # __k{i}
    bound: Bound
    domain: tuple[object, ...] | None  # public domain of this key, or None


@dataclass
class Threshold:
    measurement: Measurement  # noisy number of distinct units per group
    tau: int
    delta: float


@dataclass
class Plan:
    query: CheckedQuery
    table: Table
    keys: list[Key]
    domain: list[tuple[object, ...]] | None  # every released key tuple, when all are public
    cells: list[Cell]
    measurements: list[Measurement]
    threshold: Threshold | None
    epsilon: float
    delta: float
    mechanism: str
    cost_epsilon: float
    cost_delta: float
    rho: float = 0.0  # zCDP spent by the Gaussian measurements (0 for Laplace)


def plan(query: CheckedQuery, epsilon: float, delta: float = 0.0,
         mechanism: str = "laplace") -> Plan:
    """Plan ``query`` for a budget of (epsilon, delta) with the given mechanism."""
    validate_privacy_parameters(epsilon, delta, mechanism)
    table = query.table
    keys = [_key(e, i, table) for i, e in enumerate(query.keys)]
    domain = _full_domain(keys)
    if keys and domain is None and delta == 0:
        raise KeyReleaseRefused(_thresholding_needed(keys))
    grouped = bool(keys)
    cells = [cell_for(call, table, grouped, mechanism) for call in query.aggregates]
    measurements = _dedupe(cells)
    thresholding = None
    if keys and domain is None:
        units = _shared(units_measurement(table, table.groups_per_unit, "laplace"), measurements)
        thresholding = Threshold(units, tau=0, delta=0.0)
    result = Plan(query=query, table=table, keys=keys, domain=domain, cells=cells,
                  measurements=measurements, threshold=thresholding, epsilon=epsilon,
                  delta=delta, mechanism=mechanism, cost_epsilon=epsilon, cost_delta=0.0)
    _split_budget(result)
    return result


def _key(expression: exp.Expression, index: int, table: Table) -> Key:
    b = bound(expression, table)
    return Key(expression, f"__k{index}", b, key_domain(expression, table))


def _full_domain(keys: list[Key]) -> list[tuple[object, ...]] | None:
    if not keys or any(k.domain is None for k in keys):
        return None
    size = 1
    for k in keys:
        size *= len(k.domain or ())
    if size > MAX_DOMAIN_SIZE:
        return None  # too many public keys to list: fall back to thresholding
    return distinct(itertools.product(*(k.domain or () for k in keys)))


def _thresholding_needed(keys: list[Key]) -> str:
    private = [k.expression.sql(dialect="duckdb") for k in keys if k.domain is None]
    what = ", ".join(private) if private else "the keys (too many combinations)"
    return (f"GROUP BY {what} has no public domain, so releasing which groups exist needs "
            "delta > 0 (thresholding: pass --delta, e.g. 1e-6), or the data owner can declare "
            "the column's values (or public_range) in the metadata")


def _dedupe(cells: list[Cell]) -> list[Measurement]:
    measurements: list[Measurement] = []
    for cell in cells:
        cell.measurements = [_shared(m, measurements) for m in cell.measurements]
    return measurements


def _shared(m: Measurement, measurements: list[Measurement]) -> Measurement:
    for existing in measurements:
        if existing.key == m.key:
            return existing
    m.name = f"__m{len(measurements)}"
    measurements.append(m)
    return m


def _split_budget(p: Plan) -> None:
    # No measurement at all (SELECT DISTINCT over public keys): the answer is the public domain.
    share = p.epsilon / max(len(p.measurements), 1)
    gaussian = [m for m in p.measurements if m.mechanism == "gaussian"]
    delta_threshold = delta_gaussian = 0.0
    if p.threshold is not None:
        delta_threshold = p.delta / 2 if gaussian else p.delta
    if gaussian:
        delta_gaussian = p.delta - delta_threshold
        p.rho = rho_for(share * len(gaussian), delta_gaussian)
    # Rounding real cells to the noise grid costs one grid step in each group a unit reaches.
    cells = p.table.groups_per_unit if p.keys else 1
    for m in p.measurements:
        m.epsilon = share
        if m.mechanism == "laplace":
            m.noise = calibrate_laplace(m.l1, share, m.integer, cells_per_unit=cells)
        elif m.mechanism == "gaussian":
            m.noise = calibrate_gaussian(m.l2, p.rho / len(gaussian), m.integer,
                                         cells_per_unit=cells)
    if p.threshold is not None:
        _, tau = threshold(share, delta_threshold, p.table.groups_per_unit)
        p.threshold.tau, p.threshold.delta = tau, delta_threshold
    p.cost_delta = delta_threshold + delta_gaussian
