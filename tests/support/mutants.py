"""Every mutant the tests plant in dpsql, in one registry: :data:`MUTANTS`, by name.

A mutant puts a known bug back into dpsql, so that a test can show that a harness finds that
class of bug: the statistical audit (tests/audit/test_audit.py, which lists each mutant with
the scenarios it must be caught on), the neighbour harness (tests/neighbours/leak_mutants.py:
issue 17's leak classes, issue 21's groups cap) and the semantic oracle
(tests/oracle/semantic_mutants.py, each mutant with its probe queries). They all plant their
mutants from here, by name.

Each mutant monkeypatches a function dpsql really calls; dpsql keeps no seam for them. Where
a mutant is "the engine query of another plan than the one the noise was calibrated to" (k
or the groups cap ignored), :func:`rewrite_on` runs the rewrite pass on the changed plan,
wherever a module of dpsql calls it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import pytest
from sqlglot import exp

import dpsql.execution.per_person
import dpsql.execution.postprocess
import dpsql.execution.rewrite
import dpsql.privacy.aggregates
import dpsql.query.bind
import dpsql.query.dp_clause
import dpsql.query.joins
import dpsql.query.total_expressions
from dpsql.privacy.aggregates import AVG, Cell
from dpsql.privacy.plan import Plan
from dpsql.query.total_expressions import Reader

Mutant = Callable[[pytest.MonkeyPatch], None]


def rewrite_on(monkeypatch: pytest.MonkeyPatch, change: Callable[[Plan], Plan]) -> None:
    """The rewrite pass run on ``change(plan)`` instead of the plan, wherever a module of dpsql
    holds it: the engine query of another plan than the one the noise is calibrated to."""
    original = dpsql.execution.rewrite.rewrite

    def mutant(plan: Plan, physical: object = None) -> exp.Select:
        return original(change(plan), physical)  # type: ignore[arg-type]

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("dpsql") and \
                getattr(module, "rewrite", None) is original:
            monkeypatch.setattr(module, "rewrite", mutant)


# ---------------------------------------------- broken mechanisms (the statistical audit)


def noise_halved(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsql.privacy.plan

    original = dpsql.privacy.plan.calibrate_laplace

    def halved(sensitivity, epsilon, integer, **kw):  # type: ignore[no-untyped-def]
        return original(sensitivity, 2 * epsilon, integer, **kw)

    monkeypatch.setattr(dpsql.privacy.plan, "calibrate_laplace", halved)


def gaussian_noise_eighth(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsql.privacy.plan

    original = dpsql.privacy.plan.calibrate_gaussian

    def smaller(sensitivity, rho, integer, **kw):  # type: ignore[no-untyped-def]
        return original(sensitivity, 64 * rho, integer, **kw)  # sigma / 8

    monkeypatch.setattr(dpsql.privacy.plan, "calibrate_gaussian", smaller)


def clamping_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsql.execution.rewrite
    import dpsql.query.total_expressions

    def unclamped(value: exp.Expression, *_: object, **__: object) -> exp.Expression:
        return value.copy()

    # aggregated inputs, and columns as read
    for module in (dpsql.execution.rewrite, dpsql.query.total_expressions):
        monkeypatch.setattr(module, "clamp", unclamped)


def threshold_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsql.privacy.plan

    monkeypatch.setattr(dpsql.privacy.plan, "tau_for", lambda noise, delta, groups: 1)


def bounding_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsql.execution.rewrite
    import dpsql.query.joins

    # Noise is still calibrated to k rows in g groups, but every row of a unit is kept (the
    # salt parameter $1 stays in the query, unused).
    salt_used = exp.Not(this=exp.Is(this=dpsql.execution.rewrite.SALT.copy(),
                                    expression=exp.Null()))
    monkeypatch.setattr(dpsql.execution.rewrite, "_bounded", lambda plan, inputs, *a: exp.select(
        "*").from_("__rows").where(salt_used.copy()))
    # Counts and sums are bounded on per-unit aggregates without sampling: route them through
    # the unbounded sample too.
    monkeypatch.setattr(dpsql.execution.rewrite, "aggregated", lambda plan: False)
    # Counts and sums over public keys weigh a unit's rows by min(1, k / t): weight 1.
    monkeypatch.setattr(dpsql.execution.rewrite, "_weight",
                        lambda plan: exp.Literal.number(2 ** plan.weight_bits))
    # Joins of private tables also sample each table before the join (bounding the work).
    monkeypatch.setattr(dpsql.query.joins, "prebound", lambda select, source, *a: select)


def bounded_before_join(monkeypatch: pytest.MonkeyPatch) -> None:
    """Contributions bounded on the private table's own rows, before the join, and the noise
    calibrated to them: the join's multiplication of a unit's rows is ignored. For a table of
    one row per person that is no bounding at all after the join."""
    import dpsql.query.joins

    monkeypatch.setattr(dpsql.query.joins, "_multiplicity", lambda *a: 1)


def rows_uncapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each unit contributes all its rows: the engine query written for k = 10^9, the noise
    still calibrated to the declared k."""
    rewrite_on(monkeypatch, lambda p: replace(p, table=replace(p.table, max_rows_per_unit=10**9)))


def groups_uncapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each unit keeps all its groups (its k rows still allocated): the engine query written
    for a groups cap of 10^9."""
    rewrite_on(monkeypatch, lambda p: replace(p, group_cap=10**9))


def scaling_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsql.execution.rewrite

    # Per-unit aggregates: counts capped at k, but a unit's sums not scaled down to k rows.
    monkeypatch.setattr(dpsql.execution.rewrite, "_scaled", lambda p, kind, lo, hi: p)


def retention_rows_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsql.execution.retention

    # The retention estimate sums each unit's rows kept, min(n, k), not its share kept: one
    # unit moves S by up to k, against the sensitivity 1 its noise is calibrated to.
    monkeypatch.setattr(dpsql.execution.retention, "share", lambda p: exp.Least(
        this=exp.column("__n"), expressions=[exp.Literal.number(p.table.max_rows_per_unit)]))


def k_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """An automatic k read from the data without noise: the exact value at the target rank."""
    import dpsql.privacy.auto_bounds

    def exact(buckets, counts, n_buckets, lower, upper, q, *rest):  # type: ignore[no-untyped-def]
        values = np.sort(np.repeat(np.asarray(buckets), np.asarray(counts).astype(int)))
        return lower + float(values[min(round(q * len(values)), len(values) - 1)])

    monkeypatch.setattr(dpsql.privacy.auto_bounds, "quantile_from_buckets", exact)


def bound_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """An automatic value bound read from the data without noise: the exact bucket at the
    target rank (as :func:`k_exact`)."""
    import dpsql.privacy.auto_values

    def exact(buckets, counts, n_buckets, lower, upper, q, *rest):  # type: ignore[no-untyped-def]
        values = np.sort(np.repeat(np.asarray(buckets), np.asarray(counts).astype(int)))
        return lower + float(values[min(round(q * len(values)), len(values) - 1)])

    monkeypatch.setattr(dpsql.privacy.auto_values, "quantile_from_buckets", exact)


# ------------------------------------- issue 17's leak classes, issue 21's groups cap and
# ------------------------------------- issue 21.5's quantile histogram (the neighbour harness)


def anti_join_null_outer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leak class 1: a row whose outer unit is NULL kept by ``NOT (unit IN (...))``."""
    monkeypatch.setattr(dpsql.query.joins, "null_outer",
                        lambda j, outer, test: exp.Not(this=test) if j.anti else test)


def unit_as_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leak class 2: the unit read as stored, and unit equalities in ON read clamped."""
    monkeypatch.setattr(Reader, "unit", lambda self, name: exp.column(name, quoted=True))
    monkeypatch.setattr(dpsql.query.joins, "identity_on",
                        lambda on, identity, condition, reader: condition(on))


def unit_path_through_subquery(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leak class 3: a ``unit_path`` table read through a CTE or a subquery in FROM."""
    monkeypatch.setattr(dpsql.query.bind, "refuse_unit_path", lambda table: None)


def groups_never_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cap dropped everywhere, also for a count of units (sensitivity g') and for keys
    released by thresholding (tau computed from g)."""
    import dpsql.privacy.plan

    monkeypatch.setattr(dpsql.privacy.plan, "groups_cap", lambda table, specs, thresholded: None)


def k_per_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the cap, k rows kept in *each* of a unit's groups instead of k across them (the
    mistake "no groups cap" invites): L1 becomes k times the groups. Both forms: the
    allocation over a unit's groups, and the weights of counts and sums over public keys
    (each group's rows weighted by their own total)."""
    import dpsql.execution.rewrite

    monkeypatch.setattr(dpsql.execution.rewrite, "_allocated",
                        lambda k: dpsql.execution.rewrite._least(exp.column("__n"),
                                                                 exp.Literal.number(k)))
    monkeypatch.setattr(dpsql.execution.rewrite, "weight_partition",
                        lambda plan: [exp.column("__unit"),
                                      *[exp.column(k.name) for k in plan.keys]])


def quantile_sensitivity_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rank utility's sensitivity declared as one row instead of k."""
    monkeypatch.setattr(dpsql.privacy.aggregates, "quantile_sensitivity", lambda table: 1.0)


# --------------------------------------- another question than the one asked (the oracle)


def null_becomes_lower_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clamp spliced as ``GREATEST(COALESCE(x, lo), lo)``: NULL reads as the lower bound
    (issue 35's first example: an all-NULL person counted at the bound)."""
    clamp = dpsql.query.total_expressions.clamp

    def mutant(value: exp.Expression, lo: float, hi: float, nan: bool = True
               ) -> exp.Expression:
        lower = dpsql.query.total_expressions.real(lo) if nan else \
            dpsql.query.total_expressions.whole(lo)
        return clamp(exp.Coalesce(this=value, expressions=[lower]), lo, hi, nan)

    monkeypatch.setattr(dpsql.query.total_expressions, "clamp", mutant)
    monkeypatch.setattr(dpsql.execution.rewrite, "clamp", mutant)


def null_unit_is_a_person(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows whose unit is NULL read as one unit of their own (-1), so they are counted."""
    unit = Reader.unit

    def mutant(self: Reader, name: str) -> exp.Expression:
        return exp.Coalesce(this=unit(self, name), expressions=[exp.Literal.number(-1)])

    monkeypatch.setattr(Reader, "unit", mutant)


def avg_without_centre(monkeypatch: pytest.MonkeyPatch) -> None:
    """AVG released as the centred sum over the count, its centre forgotten: another
    estimator than the average asked for."""
    combine = Cell.combine

    def mutant(self: Cell, parts: Sequence[np.ndarray]) -> np.ndarray:
        if self.aggregate is AVG:
            return np.asarray(parts[1] / np.maximum(parts[0].astype(float), 1.0))
        return combine(self, parts)

    monkeypatch.setattr(Cell, "combine", mutant)


def _outer_without(arg: str) -> Callable[[pytest.MonkeyPatch], None]:
    def patch(monkeypatch: pytest.MonkeyPatch) -> None:
        outer_sql = dpsql.execution.postprocess.outer_sql

        def mutant(plan: object, carry: list[str]) -> exp.Select:
            out = outer_sql(plan, carry)  # type: ignore[arg-type]
            if arg == "having":
                out.set("where", None)  # HAVING runs as the outer WHERE over the cells
            else:
                out.set(arg, None)
            return out

        monkeypatch.setattr(dpsql.execution.postprocess, "outer_sql", mutant)
    return patch


def k_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each unit's rows not capped at k: the engine query written for k = 10^6."""
    rewrite_on(monkeypatch, lambda p: replace(p, table=replace(p.table, max_rows_per_unit=10**6)))


def groups_cap_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit keeps all its groups where the plan caps them at g': the engine query written
    without the cap."""
    rewrite_on(monkeypatch, lambda p: replace(p, group_cap=None))


def weights_per_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """A weight's total counted per (unit, group): each group gets its own k rows."""
    monkeypatch.setattr(dpsql.execution.rewrite, "weight_partition",
                        lambda plan: [exp.column("__unit"), *(exp.column(k.name)
                                                              for k in plan.keys)])


def scaled_null_is_lower_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit's scaled sum (k bites) over only NULL terms read as ``c * lo`` (GREATEST skips
    the NULL): the class the oracle found, fixed in ``rewrite._scaled``."""
    scaled = dpsql.execution.rewrite._scaled

    def mutant(p: exp.Expression, kind: str, lo: int, hi: int) -> exp.Expression:
        out = scaled(p, kind, lo, hi)
        out.set("ifs", [i for i in out.args["ifs"] if not isinstance(i.this, exp.Is)])
        return out

    monkeypatch.setattr(dpsql.execution.rewrite, "_scaled", mutant)


def per_group_null_person(monkeypatch: pytest.MonkeyPatch) -> None:
    """ZetaSQL's per-group SUM with an all-NULL unit clamped up to the lower bound (issue 35's
    first example: 22 where ZetaSQL gives 18)."""
    term = dpsql.execution.per_person.term

    def mutant(m: object, p: exp.Expression) -> exp.Expression:
        out = term(m, p)  # type: ignore[arg-type]
        if getattr(m, "person", "") == "" and isinstance(out, exp.Case):
            return out.args["ifs"][0].args["true"]  # without the unit's presence test
        return out

    monkeypatch.setattr(dpsql.execution.per_person, "term", mutant)
    monkeypatch.setattr(dpsql.execution.rewrite.per_person, "term", mutant)


def avg_by_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """AVG inside the clause averaged over rows, not over each unit's average (issue 35's
    second example: 1.375 where ZetaSQL gives 1.333)."""
    lowered = dpsql.query.dp_clause.lowered

    def mutant(tree: exp.Expr) -> tuple[exp.Expr, object]:
        out, options = lowered(tree)
        for node in list(out.find_all(exp.Anonymous)):
            if node.name == dpsql.query.dp_clause.AVG_PER_GROUP and len(node.expressions) == 1:
                node.replace(exp.Avg(this=node.expressions[0].copy()))
        return out, options

    monkeypatch.setattr(dpsql.query.dp_clause, "lowered", mutant)


def per_row_null_is_lower(monkeypatch: pytest.MonkeyPatch) -> None:
    """``contribution_bounds_per_row`` reads a NULL row as the lower bound (issue 35's first
    example: 2.0 for every NULL)."""
    def mutant(arg: exp.Expr, lo: exp.Expr, hi: exp.Expr) -> exp.Expr:
        return exp.Least(this=exp.Greatest(this=exp.Coalesce(this=arg, expressions=[
            lo.copy()]), expressions=[lo.copy()]), expressions=[hi.copy()])

    monkeypatch.setattr(dpsql.query.dp_clause, "row_clamp", mutant)


#: Every mutant, by name.
MUTANTS: dict[str, Mutant] = {
    # the statistical audit's
    "noise_halved": noise_halved,
    "gaussian_noise_eighth": gaussian_noise_eighth,
    "clamping_removed": clamping_removed,
    "threshold_removed": threshold_removed,
    "bounding_removed": bounding_removed,
    "bounded_before_join": bounded_before_join,
    "rows_uncapped": rows_uncapped,
    "groups_uncapped": groups_uncapped,
    "scaling_removed": scaling_removed,
    "retention_rows_kept": retention_rows_kept,
    "k_exact": k_exact,
    "bound_exact": bound_exact,
    # the neighbour harness's
    "anti_join_null_outer": anti_join_null_outer,
    "unit_as_stored": unit_as_stored,
    "unit_path_through_subquery": unit_path_through_subquery,
    "groups_never_capped": groups_never_capped,
    "k_per_group": k_per_group,
    "quantile_sensitivity_one": quantile_sensitivity_one,
    # the semantic oracle's
    "null_becomes_lower_bound": null_becomes_lower_bound,
    "null_unit_is_a_person": null_unit_is_a_person,
    "avg_without_centre": avg_without_centre,
    "having_dropped": _outer_without("having"),
    "order_by_dropped": _outer_without("order"),
    "k_ignored": k_ignored,
    "groups_cap_ignored": groups_cap_ignored,
    "weights_per_group": weights_per_group,
    "scaled_null_is_lower_bound": scaled_null_is_lower_bound,
    "per_group_null_person": per_group_null_person,
    "avg_by_rows": avg_by_rows,
    "per_row_null_is_lower": per_row_null_is_lower,
}
