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

import dpsql.execution.postprocess
import dpsql.execution.rewrite
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
