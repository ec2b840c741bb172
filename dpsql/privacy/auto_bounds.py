"""Bounds chosen from the data under differential privacy (issue 21, item 2): the first step of
a query whose table declares ``max_rows_per_unit = { auto = true, max = N, share = s }``
(:mod:`dpsql.metadata.auto`). The plan (:func:`planned`) fixes everything but k; when the
query runs, the engine counts the units per number of rows (:func:`dpsql.execution.rewrite.
unit_counts`), :func:`auto_rows_per_unit` draws k, and :func:`with_rows` calibrates the
measurements to it (:func:`dpsql.routes.pipeline.answer`).

**The choice of k.** Each privacy unit with a row that the query reads (its WHERE, its unit not
NULL) contributes one value, its number of rows ``c_u`` clamped to ``[1, N]``; k is drawn by the
exponential mechanism over the N values, one bucket each
(:func:`dpsql.privacy.quantiles.quantile_from_buckets`), aiming at the rank ``n - a``: the k
above which about ``a`` units have rows (``a`` = :attr:`~dpsql.privacy.plan.AutoRows.above`,
clipped at rank 0). Why that rank: lowering k by one drops a row from each unit above it
(``U(k)`` rows of bias over the released counts) and lowers the noise standard deviation of
each of the ``G`` released cells by ``sqrt(2) / eps_m`` (Laplace, the smallest measurement
share ``eps_m``), so ``|bias| + noise`` over the cells is smallest where ``U(k) = G sqrt(2) /
eps_m`` (:func:`_above`). The exponential mechanism misses its rank by about ``2 ln(N) /
epsilon_auto``, and the values above every unit's count (empty buckets up to ``N``) all sit
only ``a`` ranks from the target, so the target is moved down by a margin ``2 ln(N / beta) /
epsilon_auto``: k then lands above every unit's count with probability about ``beta`` at most,
and errs towards a smaller k (more bias, less noise) rather than a random large one. ``a`` is
public (from the plan): the data only places k. For a SUM the same rule keeps more rows than
its own optimum (its noise per row is the bound, its bias per row the mean), which the cap
``N`` limits.

*Sensitivity.* Neighbours differ by one unit, so the multiset of per-unit values gains or
loses one element: ``n`` and every rank ``r_j`` move by at most 1, in the same direction, and
so does the target ``max(n - a, 0)``; every utility ``-dist(target, [r_j, r_{j+1}])`` moves by
at most 1, whatever the unit's rows: ``Delta = 1``. The step is ``epsilon_auto``-DP. The exact
counts never enter a sensitivity: only the released k does.

*Composition.* The query's epsilon is split before anything runs: ``epsilon_auto = s *
epsilon`` for the choice, ``epsilon_rest = epsilon - epsilon_auto`` for the measurements,
which are planned as usual (every sensitivity of :mod:`dpsql.privacy.aggregates` holds for any
k >= 1) with the released k in place of the declared one. By sequential (adaptive)
composition the query is ``(epsilon_auto + epsilon_rest, delta)``-DP, its declared epsilon,
charged once before the step runs. A neighbour test of the final measurements conditions on
the released k (both databases measured with the same k), as the composition theorem does;
the choice itself is audited as a mechanism of its own (:mod:`dpsql.audit.scenarios`). An
analyst's own k (``SET dpsql.max_rows``, ``OPTIONS(max_rows_contributed)``) replaces the
automatic one and the whole epsilon goes to the measurements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from dpsql.errors import UnsupportedQuery
from dpsql.privacy.auto_values import sides_for, value_sides, with_rows_above
from dpsql.privacy.mechanisms import _check_positive_finite
from dpsql.privacy.plan import AutoRows, Plan, plan
from dpsql.privacy.quantiles import quantile_from_buckets
from dpsql.privacy.randomness import Randomness
from dpsql.query.check import CheckedQuery

#: The utility's sensitivity: one unit is one value of the per-unit counts.
AUTO_SENSITIVITY = 1.0
#: The margin's bound on the chance that k lands in the empty values above every unit's count
#: (each of at most ``cap`` of them weighs ``exp(-epsilon_auto * margin / 2) = beta / cap``
#: against the target's bucket).
OVERSHOOT = 0.1


def auto_rows_per_unit(units_by_count: Mapping[int, int], cap: int, above: int,
                       epsilon: float, rng: Randomness) -> int:
    """A private k in ``[1, cap]`` aimed where ``above`` units have more rows.

    ``units_by_count[c]`` is the number of units with ``c`` rows (counts above ``cap`` are read
    as ``cap``, below 1 as 1). Bucket ``c - 1`` of ``cap`` per-value buckets holds them; the
    target rank is ``max(n - above, 0)`` and the draw is floored to its value (module
    docstring: sensitivity 1)."""
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ValueError(f"cap must be a positive integer, got {cap!r}")
    if isinstance(above, bool) or not isinstance(above, int) or above < 0:
        raise ValueError(f"above must be a whole number >= 0, got {above!r}")
    _check_positive_finite(epsilon, "epsilon")
    counts = np.zeros(cap, dtype=np.float64)
    for rows, units in units_by_count.items():
        if units < 0 or not math.isfinite(units):
            raise ValueError(f"a number of units must be finite and >= 0, got {units!r}")
        counts[min(max(int(rows), 1), cap) - 1] += units
    n = float(counts.sum())
    # q n = max(n - above, 0): the target rank (quantile_from_buckets aims at q * n)
    q = max(n - above, 0.0) / n if n > 0 else 1.0
    nonempty = np.flatnonzero(counts)
    value = quantile_from_buckets(nonempty, counts[nonempty], cap, 1.0, float(cap + 1), q,
                                  epsilon, AUTO_SENSITIVITY, rng)
    return min(max(math.floor(value), 1), cap)


def planned(query: CheckedQuery, epsilon: float, delta: float = 0.0,
            mechanism: str = "laplace") -> Plan:
    """The plan of ``query``: :func:`dpsql.privacy.plan.plan`, or, for a table whose k or
    value bounds are automatic, that plan at ``epsilon_rest`` with k and the bounds at their
    caps (what ``explain`` shows before the data chooses), carrying the choices to make
    (:class:`~dpsql.privacy.plan.AutoRows`, :class:`~dpsql.privacy.plan.AutoValue`:
    :mod:`dpsql.privacy.auto_values`). Its cost is the whole ``epsilon``."""
    rows = query.table.rows_auto if _rows_automatic(query) else None
    sides = _value_sides(query)
    if rows is None and not sides:
        return plan(query, epsilon, delta, mechanism)
    spent = epsilon * rows.share if rows is not None else 0.0
    rest = epsilon - spent - sum(epsilon * share for *_, share in sides)
    while spent + sum(epsilon * share for *_, share in sides) + rest > epsilon:
        rest = math.nextafter(rest, 0.0)  # an ulp of rounding must not overspend
    p = plan(query, rest, delta, mechanism)
    if not p.measurements:  # the answer is the public domain: nothing is calibrated to k
        return plan(query, epsilon, delta, mechanism)
    auto = None if rows is None else AutoRows(spent, rest, rows.share, rows.cap,
                                              _above(p, spent, rows.cap))
    return replace(p, epsilon=epsilon, cost_epsilon=epsilon, auto=auto,
                   values=sides_for(query, p, epsilon, rest))


def automatic(query: CheckedQuery) -> bool:
    """Whether ``query``'s k or a value bound is chosen from the data (a join reading a table
    with an automatic k is refused: :func:`dpsql.routes.pipeline.bind_in_force`; one whose sums read
    a column with an automatic bound: :func:`_value_sides`)."""
    return _rows_automatic(query) or bool(_value_sides(query))


def _rows_automatic(query: CheckedQuery) -> bool:
    table = query.table
    return table.rows_auto is not None and query.relation is None and table.needs_bounding


def _value_sides(query: CheckedQuery) -> list[tuple[str, str, float]]:
    sides = value_sides(query)
    if sides and query.relation is not None:
        column, side, _ = sides[0]
        raise UnsupportedQuery(
            f"column {column}: its {side} bound is chosen from the data (auto) only for a "
            "query of its table alone; in a join give the bounds yourself: "
            f"SUM(LEAST(GREATEST({column}, lo), hi)), or contribution_bounds_per_row => "
            "(lo, hi) in a SELECT WITH DIFFERENTIAL_PRIVACY")
    return sides


def _above(p: Plan, epsilon_auto: float, cap: int) -> int:
    """``a = G sqrt(2) / eps_m`` plus the mechanism's margin ``2 ln(cap / beta) / epsilon_auto``
    (``beta`` = :data:`OVERSHOOT`), rounded up (module docstring): ``G`` the released cells
    (the public keys, else the groups a unit reaches), ``eps_m`` the smallest measurement
    share."""
    cells = len(p.domain) if p.domain is not None else p.groups_per_unit
    smallest = min(m.epsilon for m in p.measurements)
    margin = 2.0 * math.log(cap / OVERSHOOT) / epsilon_auto
    return math.ceil(cells * math.sqrt(2.0) / smallest + margin)


def with_rows(p: Plan, k: int) -> Plan:
    """``p`` with its measurements calibrated to the released ``k`` at ``epsilon_rest``; the
    cost is unchanged (module docstring, composition). Automatic value bounds, still to
    choose, aim for that k (:func:`dpsql.privacy.auto_values.with_rows_above`)."""
    auto = p.auto
    assert auto is not None and 1 <= k <= auto.cap
    table = replace(p.table, max_rows_per_unit=k, rows_auto=None)
    chosen = plan(replace(p.query, table=table), auto.rest, p.delta, p.mechanism)
    return with_rows_above(replace(chosen, epsilon=p.epsilon, cost_epsilon=p.cost_epsilon,
                                   auto=replace(auto, k=k), values=p.values))


def choose_k(p: Plan, units_by_count: Mapping[int, int], rng: Randomness) -> int:
    """Draw k from the engine's counts of units per number of rows (plan with it:
    :func:`with_rows`)."""
    auto = p.auto
    assert auto is not None
    return auto_rows_per_unit(units_by_count, auto.cap, auto.above, auto.epsilon, rng)
