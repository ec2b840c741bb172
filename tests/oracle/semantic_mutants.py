"""Mutants of dpsql that answer a different question than the one asked, each of which the
semantic oracle (:mod:`dpsql.audit.oracle`) must catch (tests/oracle/test_oracle.py asserts
it): as tests/neighbours/leak_mutants.py keeps the leaks the neighbour harness must find.

Each mutant is a monkeypatch of one place in the pipeline and a few probe queries of the
neighbour generator's metadata that reach it; the generator's own queries are checked too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest
from sqlglot import exp

import dpsql.execution.per_person
import dpsql.execution.postprocess
import dpsql.execution.rewrite
import dpsql.query.dp_clause
import dpsql.query.total_expressions
from dpsql.privacy.aggregates import AVG, Cell
from dpsql.query.total_expressions import Reader


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


#: name -> (the patch, probe queries (SQL, delta)).
MUTANTS: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], list[tuple[str, float]]]] = {
    "null_becomes_lower_bound": (null_becomes_lower_bound, [
        ("SELECT SUM(amount) FROM visits", 0.0),
        ("SELECT grp, COUNT(amount), AVG(amount) FROM visits GROUP BY grp", 0.0),
        ("SELECT SUM(income) FROM people", 0.0)]),
    "null_unit_is_a_person": (null_unit_is_a_person, [
        ("SELECT COUNT(*) FROM visits", 0.0),
        ("SELECT grp, SUM(qty) FROM visits GROUP BY grp", 0.0)]),
    "avg_without_centre": (avg_without_centre, [
        ("SELECT AVG(qty) FROM visits", 0.0),
        ("SELECT sex, AVG(age) FROM people GROUP BY sex", 0.0)]),
    "having_dropped": (_outer_without("having"), [
        ("SELECT grp, COUNT(*) FROM visits GROUP BY grp HAVING COUNT(*) > 3", 0.0),
        ("SELECT sex, SUM(age) FROM people GROUP BY sex HAVING SUM(age) < 10", 0.0)]),
    "order_by_dropped": (_outer_without("order"), [
        ("SELECT grp, COUNT(*) AS n FROM visits GROUP BY grp ORDER BY n DESC", 0.0),
        ("SELECT drug, COUNT(*) FROM rx GROUP BY drug ORDER BY COUNT(*) LIMIT 1", 0.0),
        ("SELECT age, COUNT(*) FROM people GROUP BY age ORDER BY COUNT(*) DESC LIMIT 2",
         0.0)]),
}


# ------------------------------------------- where bounds bite, and BigQuery's clause


def k_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each unit's rows not capped at k (the per-unit and weights forms' k)."""
    monkeypatch.setattr(dpsql.execution.rewrite, "row_cap", lambda table: 10**6)


def groups_cap_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit keeps all its groups where the plan caps them at g'."""
    monkeypatch.setattr(dpsql.execution.rewrite, "group_cap", lambda plan: None)


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


_DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
MUTANTS.update({
    "k_ignored": (k_ignored, [
        ("SELECT COUNT(*) FROM visits", 0.0),
        ("SELECT grp, COUNT(*) FROM visits GROUP BY grp", 0.0),
        ("SELECT SUM(qty) FROM visits", 0.0)]),
    "groups_cap_ignored": (groups_cap_ignored, [
        ("SELECT grp, COUNT(DISTINCT pid) FROM visits GROUP BY grp", 0.0)]),
    "weights_per_group": (weights_per_group, [
        ("SELECT grp, COUNT(*) FROM visits GROUP BY grp", 0.0),
        ("SELECT grp, SUM(qty) FROM visits GROUP BY grp", 0.0)]),
    "scaled_null_is_lower_bound": (scaled_null_is_lower_bound, [
        ("SELECT AVG(amount) FROM visits", 0.0),
        ("SELECT SUM(amount - 50) FROM visits", 0.0),
        ("SELECT AVG(p.income) FROM visits v JOIN people p ON v.pid = p.pid", 0.0)]),
    "per_group_null_person": (per_group_null_person, [
        (_DP + "grp, SUM(amount, contribution_bounds_per_group => (2, 3)) FROM visits "
         "GROUP BY grp", 0.0),
        (_DP + "SUM(income, contribution_bounds_per_group => (5, 9)) FROM people", 0.0)]),
    "avg_by_rows": (avg_by_rows, [
        (_DP + "grp, AVG(amount) FROM visits GROUP BY grp", 0.0),
        (_DP + "AVG(qty) FROM visits", 0.0)]),
    "per_row_null_is_lower": (per_row_null_is_lower, [
        (_DP + "SUM(amount, contribution_bounds_per_row => (2, 3)) FROM visits", 0.0),
        (_DP + "grp, SUM(income, contribution_bounds_per_row => (2, 3)) FROM people p JOIN "
         "visits v ON v.pid = p.pid GROUP BY grp", 0.0)]),
})

#: The mutants whose probes need a world where k and g bite (oracle_world's bounds_bite).
BOUNDS_BITE = {"k_ignored", "groups_cap_ignored", "weights_per_group",
               "scaled_null_is_lower_bound"}
