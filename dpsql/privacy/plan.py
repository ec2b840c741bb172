"""Pass 6, plan: bounds, sensitivities, key release, the split of the budget, noise per cell.

The plan is computed from the query and the metadata only, never from data, so its cost is
known before anything runs.

**Budget split.** A query has m distinct measurements (see :mod:`dpsql.privacy.aggregates`; AVG
needs two, VAR three, and key release by thresholding one more, shared with a COUNT of units when
the two coincide; COUNT(*) and the count inside AVG/VAR of a NOT NULL column are one). Each
gets a share ``eps_i`` with ``sum_i eps_i = epsilon`` (the shares are scaled down by an ulp if
their float sum exceeds it), so sequential composition over the m measurements costs exactly
``epsilon``. The shares follow each measurement's part of the error (issue 21): a measurement's
noise, in units of its own per-row bound, has standard deviation ``sqrt(2) k / eps_i`` (Laplace,
``Delta_i = k T_i``; the exponential mechanism's rank error is ``~ k / eps_i`` too), and it
enters each cell that uses it with a worst-case coefficient ``a_ci`` (``Aggregate.weights``: 1
for COUNT, SUM, a quantile and AVG's two parts, (1, 2, 1) for VAR's n, S1, S2). Minimising the
cells' summed normalised variance ``sum_i w_i / eps_i^2``, ``w_i = sum_c a_ci^2``, subject to
``sum_i eps_i = epsilon`` (Lagrange: ``w_i / eps_i^3`` equal) gives

    eps_i = epsilon * w_i^(1/3) / sum_j w_j^(1/3):

a measurement serving two cells (COUNT(*) beside AVG) gets 2^(1/3) = 1.26 times the share of
one serving one; equal weights give the equal split. Delta goes to what needs it: to
thresholding when keys have no public domain, to the Gaussian measurements when the Gaussian
mechanism is asked for, and half to each when both. The Gaussian measurements of one query
share their part ``(eps_G, delta_G)``, ``eps_G`` the sum of their shares, as zero-concentrated
DP: ``rho = (sqrt(ln(1/delta_G) + eps_G) - sqrt(ln(1/delta_G)))^2``, split as ``rho_i = rho
sqrt(w_i) / sum_j sqrt(w_j)`` (the minimum of ``sum_i w_i / rho_i``),
``sigma_i = Delta_2 / sqrt(2 rho_i)``. The query's cost is ``(epsilon, delta actually used)``;
``dpsql explain`` shows every share.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from sqlglot import exp

from dpsql.errors import (
    InvalidPrivacyParameter,
    KeyReleaseRefused,
    Remedy,
    UnboundedExpression,
)
from dpsql.metadata.metadata import MAX_DOMAIN_SIZE, Table
from dpsql.privacy.aggregates import (
    Cell,
    Measurement,
    MeasurementSpec,
    cell_for,
    check_per_group_sums,
    groups_cap,
    units_measurement,
    weight_bits,
    weighted,
)
from dpsql.privacy.domains import key_domain
from dpsql.privacy.key_filters import Filters, key_filters
from dpsql.privacy.keys import distinct
from dpsql.privacy.mechanisms import (
    WELL_FORMED,
    Mechanism,
    calibrate_gaussian,
    calibrate_laplace,
    rho_for,
    validate_privacy_parameters,
)
from dpsql.privacy.thresholds import tau_for
from dpsql.query.bounds import Bound, bound
from dpsql.query.check import CheckedQuery
from dpsql.query.dates import written


@dataclass(frozen=True)
class Key:
    expression: exp.Expression  # over base columns
    name: str  # __k{i}
    bound: Bound
    domain: tuple[object, ...] | None  # public domain of this key, or None


@dataclass(frozen=True)
class Threshold:
    """Key release by thresholding: a group is released when its noisy number of units,
    ``measurement`` perturbed with its own calibrated noise, reaches ``tau``."""

    measurement: Measurement  # noisy number of distinct units per group
    tau: int  # from the measurement's calibrated noise (thresholds.tau_for)
    delta: float


@dataclass(frozen=True)
class AutoRows:
    """k chosen from the data (:mod:`dpsql.privacy.auto_bounds`): ``epsilon`` spent on the
    choice, ``rest`` on the measurements (``epsilon + rest <=`` the query's epsilon), k in
    ``[1, cap]`` aimed where about ``above`` units have more rows than k; ``k``: the released
    choice (None until the query runs)."""

    epsilon: float
    rest: float
    share: float
    cap: int
    above: int
    k: int | None = None


@dataclass(frozen=True)
class AutoValue:
    """A column's ``side`` (``lower`` or ``upper``) bound chosen from the data for its SUM, AVG,
    VAR and STDDEV (:mod:`dpsql.privacy.auto_values`): ``epsilon`` spent on the choice,
    ``rest`` the measurements' epsilon (as :attr:`AutoRows.rest`), drawn within the declared
    ``[lower, upper]`` and aimed where about ``above`` units have a value beyond it; ``value``:
    the released bound (None until the query runs)."""

    column: str
    side: str
    epsilon: float
    rest: float
    share: float
    lower: float
    upper: float
    above: int
    value: float | None = None


@dataclass(frozen=True)
class Plan:
    """Everything that will happen to a query, fixed before anything runs. Frozen: a plan is
    cached and shared by threads; randomness enters only when it is answered."""

    query: CheckedQuery
    table: Table
    keys: tuple[Key, ...]
    domain: tuple[tuple[object, ...], ...] | None  # every released key tuple, if all public
    cells: tuple[Cell, ...]  # their measurements are the calibrated ones below
    measurements: tuple[Measurement, ...]  # in engine column order (Measurement.index)
    threshold: Threshold | None
    epsilon: float
    delta: float
    mechanism: Mechanism
    cost_epsilon: float
    cost_delta: float
    rho: float = 0.0  # zCDP spent by the Gaussian measurements (0 for Laplace)
    # g' when the rewrite caps the groups per unit, None when a unit keeps its k rows across
    # all its groups (aggregates.groups_cap: the cap only where it lowers what is released)
    group_cap: int | None = None
    # The table's k is chosen from the data as the query runs (None: k is fixed now)
    auto: AutoRows | None = None
    # Column bounds chosen from the data as the query runs, after k (empty: all declared)
    values: tuple[AutoValue, ...] = ()
    # F > 0 when each unit's rows are weighted instead of capped (aggregates.weight_bits)
    weight_bits: int = 0

    @property
    def groups_per_unit(self) -> int:
        """The GROUP BY groups one unit can reach: the cap g' when applied, every public key
        with weighted rows, else min(k, the number of public keys); 1 without GROUP BY."""
        return _reach(self.table, self.keys, self.group_cap,
                      len(self.domain) if self.domain is not None else None, self.weight_bits)


def plan(query: CheckedQuery, epsilon: float, delta: float = 0.0,
         mechanism: str = "laplace") -> Plan:
    """Plan ``query`` for a budget of (epsilon, delta) with the given mechanism."""
    # The form alone: the owner's limits were checked where the query entered (planner).
    validate_privacy_parameters(epsilon, delta, mechanism, WELL_FORMED)
    mechanism = Mechanism(mechanism)
    table = query.table
    filters = key_filters(query.where)  # the analyst's constants narrow public domains
    keys = tuple(_key(e, i, table, filters) for i, e in enumerate(query.keys))
    domain = _full_domain(list(keys))
    if keys and domain is None and delta == 0:
        refused = KeyReleaseRefused(_thresholding_needed(list(keys)))
        refused.remedies = (Remedy("delta", 1e-6),)
        raise refused
    if ((keys and domain is None) or mechanism == Mechanism.GAUSSIAN) and delta >= 1:
        # An owner may allow delta = 1 (a compliance suite's), where only pure measurements
        # keep a guarantee: a released key or Gaussian noise at delta 1 would promise nothing.
        raise InvalidPrivacyParameter(
            "delta = 1 allows a total failure: releasing which groups exist (a GROUP BY "
            "without a public domain) or Gaussian noise needs delta < 1, such as 1e-6")
    cells = [cell_for(call, table, bool(keys), mechanism) for call in query.aggregates]
    specs = _distinct_specs(cells)
    units = None
    if keys and domain is None:
        units = units_measurement(table, table.groups_per_unit, Mechanism.LAPLACE)
        specs = _distinct_specs([], [*specs, units])
    check_per_group_sums(table, specs)
    cap = groups_cap(table, specs, thresholded=units is not None)
    bits = weight_bits(table, bool(keys), domain is not None, cap, specs)
    if bits:  # bounding by weights (aggregates, "Bounding by weights"): real-valued sums
        by_key = {s.key: weighted(s, bits) for s in specs}
        specs = list(by_key.values())
        cells = [replace(c, measurements=tuple(by_key[m.key] for m in c.measurements))
                 for c in cells]
    split = _split_budget(specs, _weights(cells, specs), epsilon, delta, units is not None,
                          _reach(table, keys, cap, len(domain) if domain is not None else None,
                                 bits))
    calibrated = {m.key: m for m in split.measurements}
    thresholding = None
    if units is not None:
        m = calibrated[units.key]
        assert m.noise is not None  # a Laplace measurement
        thresholding = Threshold(m, tau_for(m.noise, split.delta_threshold,
                                            table.groups_per_unit), split.delta_threshold)
    return Plan(query=query, table=table, keys=keys,
                domain=tuple(domain) if domain is not None else None,
                cells=tuple(replace(c, measurements=tuple(calibrated[m.key] for m in
                                                          c.measurements)) for c in cells),
                measurements=split.measurements, threshold=thresholding, epsilon=epsilon,
                delta=delta, mechanism=mechanism, cost_epsilon=epsilon,
                cost_delta=split.delta_threshold + split.delta_gaussian, rho=split.rho,
                group_cap=cap, weight_bits=bits)


def calibrated(cell: Cell) -> tuple[Measurement, ...]:
    """A planned cell's measurements, as the plan calibrated them (shared with other cells
    that need the same measurement)."""
    out = tuple(m for m in cell.measurements if isinstance(m, Measurement))
    assert len(out) == len(cell.measurements), "a cell of a plan holds calibrated measurements"
    return out


def _reach(table: Table, keys: tuple[Key, ...], cap: int | None, domain: int | None,
           bits: int = 0) -> int:
    """Cells one unit can change (rounding real cells to the noise grid costs one grid step
    in each): the groups cap g' when applied, every public key with weighted rows (a unit's
    weighted rows reach all its groups), else min(k, number of public keys)."""
    if not keys or not table.needs_bounding:
        return 1
    if cap is not None:
        return cap
    if bits and domain is not None:
        return max(1, domain)
    return max(1, min(table.rows_per_unit, domain if domain is not None else
                      table.rows_per_unit))


def _key(expression: exp.Expression, index: int, table: Table, filters: Filters) -> Key:
    b = bound(expression, table)
    return Key(expression, f"__k{index}", b, key_domain(expression, table, filters))


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
    private = [written(k.expression) for k in keys if k.domain is None]
    what = ", ".join(private) if private else "the keys (too many combinations)"
    return (f"GROUP BY {what} has no public domain, so releasing which groups exist needs "
            "delta > 0 (thresholding, e.g. delta = 1e-6), or the data owner can declare "
            "the column's values (or public_range) in the metadata")


def _distinct_specs(cells: list[Cell], more: Sequence[MeasurementSpec] = ()
                    ) -> list[MeasurementSpec]:
    """The cells' measurement specs (and ``more``) without repeats, in first-use order: two
    cells that need the same measurement (COUNT(x) and AVG(x)) share one noisy value."""
    seen: dict[tuple[object, ...], MeasurementSpec] = {}
    for spec in [*(m for c in cells for m in c.measurements), *more]:
        seen.setdefault(spec.key, spec)
    return list(seen.values())


@dataclass(frozen=True)
class _Split:
    measurements: tuple[Measurement, ...]
    rho: float
    delta_threshold: float
    delta_gaussian: float


def _weights(cells: list[Cell], specs: list[MeasurementSpec]) -> list[float]:
    """``w_i = sum_c a_ci^2`` per measurement (module docstring, "Budget split"); a
    measurement of no cell (the key release's count of units) weighs 1."""
    w = {spec.key: 0.0 for spec in specs}
    for cell in cells:
        for position, spec in enumerate(cell.measurements):
            w[spec.key] += cell.aggregate.weight(position)
    return [w[spec.key] or 1.0 for spec in specs]


def _shares(epsilon: float, weights: list[float], power: float) -> list[float]:
    """``epsilon * w_i^power / sum_j w_j^power``, their float sum never above ``epsilon``.

    Each share is ``epsilon`` times a fraction at most 1, so it is finite for every finite
    ``epsilon`` the owner may allow (``epsilon * w`` first overflowed to inf at the largest
    doubles, and the loop below never ended); a share that underflows to 0 (``epsilon`` near
    the smallest double) is refused, as no noise can be calibrated for it."""
    parts = [w ** power for w in weights]
    total = sum(parts)
    shares = [epsilon * (p / total) for p in parts]
    if not all(0.0 < s < math.inf for s in shares):
        raise InvalidPrivacyParameter(
            f"the privacy budget {epsilon!r} (epsilon, or rho for the Gaussian) cannot be split "
            f"between this query's {len(shares)} "
            "measurements (a share would be 0 or infinite): ask for a larger epsilon, or "
            "fewer aggregates")
    while math.fsum(shares) > epsilon:  # an ulp of rounding must not overspend
        shares = [s * (1 - 2.0**-52) for s in shares]
    return shares


def _split_budget(specs: list[MeasurementSpec], weights: list[float], epsilon: float,
                  delta: float, thresholding: bool, cells_per_unit: int) -> _Split:
    """Each measurement's share of (epsilon, delta) and its calibrated noise (module docstring).
    No measurement at all (SELECT DISTINCT over public keys): the answer is the public domain."""
    shares = _shares(epsilon, weights, 1 / 3) if specs else []
    gaussian = [i for i, m in enumerate(specs) if m.mechanism == Mechanism.GAUSSIAN]
    delta_threshold = (delta / 2 if gaussian else delta) if thresholding else 0.0
    delta_gaussian = delta - delta_threshold if gaussian else 0.0
    rho = rho_for(math.fsum(shares[i] for i in gaussian), delta_gaussian) if gaussian else 0.0
    rhos = dict(zip(gaussian, _shares(rho, [weights[i] for i in gaussian], 0.5), strict=True))
    measurements = []
    for index, spec in enumerate(specs):
        if not (math.isfinite(spec.l1) and math.isfinite(spec.l2)):
            # bounds a double holds whose product with k or g' does not (per-group bounds
            # of +-1e308): a refusal, never a bare error
            what = spec.arg.sql(dialect="duckdb") if spec.arg is not None else "*"
            raise UnboundedExpression(
                f"the bounds on {spec.kind.value}({what}) are too wide: what one unit can "
                "change is beyond the largest number; write or declare narrower bounds")
        noise = None
        if spec.mechanism == Mechanism.LAPLACE:
            noise = calibrate_laplace(spec.l1, shares[index], spec.integer,
                                      cells_per_unit=cells_per_unit)
        elif spec.mechanism == Mechanism.GAUSSIAN:
            noise = calibrate_gaussian(spec.l2, rhos[index], spec.integer,
                                       cells_per_unit=cells_per_unit)
        measurements.append(Measurement(**_fields(spec), name=f"__m{index}", index=index,
                                        epsilon=shares[index], noise=noise))
    return _Split(tuple(measurements), rho, delta_threshold, delta_gaussian)


def _fields(spec: MeasurementSpec) -> dict[str, Any]:
    return {f.name: getattr(spec, f.name) for f in fields(MeasurementSpec)}
