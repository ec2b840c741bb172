"""The one engine query of a plan's choices from the data (issue 39, item 2): an automatic k
(:mod:`dpsql.privacy.auto_bounds`) and automatic value bounds (:mod:`dpsql.privacy.auto_values`)
read their inputs in a single pass over the rows, one ``GROUP BY`` unit for all of them.

Each choice's input is a histogram of one value per unit, computed exactly as its own query
computes it (:func:`dpsql.execution.rewrite.unit_counts`, :func:`dpsql.execution.rewrite.
unit_values`, which the neighbour harness audits one by one): the same rows (``__rows``: the
query's WHERE, units not NULL), each unit's number of rows clamped to the cap, its largest
(smallest) value of the column read clamped to the declared bounds, in the same geometric
buckets, units without a value left out. Only the pass is shared: ``__per_unit`` holds every
unit's count and extremes together, and each histogram is one ``GROUP BY`` of it, the parts
joined by ``UNION ALL`` and told apart by ``__part`` (0 for k, ``1 + i`` for the plan's side
``i``). The output is the multiset of the separate queries' outputs, so each histogram keeps its
sensitivity (one unit moves each by at most one) and the draws that read them are the same
mechanisms on the same inputs (tests/privacy/test_auto_choices.py checks the equality on the
neighbour worlds). The draws themselves still happen in Python, in order (k, then each bound
given the released k), from the operating system's randomness: no random bit comes from the
engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp

from dpsql.execution.rewrite import query_rows, reading, step_bucket, value_steps
from dpsql.privacy.plan import AutoValue, Plan

#: ``__part`` of the counts of units per number of rows (an automatic k's input).
ROWS_PART = 0
#: The per-unit table that a run on DuckDB keeps between the choices and the query
#: (:func:`unit_table`): a temporary table of the engine cursor's own session.
UNITS_TABLE = "__dpsql_units"


def unit_choices(plan: Plan, cap: int | None, sides: Sequence[AutoValue],
                 physical: Mapping[str, str] | None = None) -> exp.Select:
    """The engine query of every choice ``plan`` has still to make: with ``cap``, how many
    units have ``c`` rows (``c`` clamped to ``cap``); for each side ``i`` of ``sides``, how
    many units have their extreme value in bucket ``b``. Rows ``(__part, __b, __units)``, one
    per value that occurs; no salt (module docstring). The per-unit aggregate is a CTE here;
    :func:`choices_from` reads it from a table."""
    reads = reading(plan, [v.column for v in sides])[0]
    return choices_from("__per_unit", cap, sides, [
        ("__rows", query_rows(reads, physical)), ("__per_unit", _per_unit(plan, sides))])


def unit_table(plan: Plan, sides: Sequence[AutoValue],
               physical: Mapping[str, str] | None = None) -> exp.Select:
    """The per-unit aggregate of the choices as a query of its own, for a table that needs
    bounding: per unit ``__unit``, its rows ``__n`` and its extreme ``__v{i}`` of each side.
    Its ``__n`` are a query's per-unit totals too (``__tot`` of bounding by weights:
    :func:`dpsql.execution.rewrite.rewrite`'s ``totals``), over the same rows."""
    assert plan.table.needs_bounding
    reads = reading(plan, [v.column for v in sides])[0]
    units = _per_unit(plan, sides)
    units.expressions.insert(0, exp.column("__unit"))
    return units.with_("__rows", as_=query_rows(reads, physical), copy=False)


def choices_from(source: str, cap: int | None, sides: Sequence[AutoValue],
                 before: Sequence[tuple[str, exp.Select]] = ()) -> exp.Select:
    """The histograms of :func:`unit_choices` over the per-unit aggregate ``source`` (the
    CTE, among the CTEs ``before``, or :data:`UNITS_TABLE`)."""
    assert cap is not None or sides
    stepped: list[exp.Expr] = []
    if cap is not None:
        stepped.append(exp.alias_(exp.Least(this=exp.column("__n"), expressions=[
            exp.Literal.number(cap)]), "__c"))
    for i, v in enumerate(sides):
        stepped.extend([exp.column(f"__v{i}"),
                        exp.alias_(value_steps(v, exp.column(f"__v{i}")), f"__s{i}")])
    parts = [] if cap is None else [_part(ROWS_PART, exp.column("__c"), None)]
    parts += [_part(1 + i, step_bucket(exp.column(f"__s{i}")), exp.column(f"__v{i}"))
              for i in range(len(sides))]
    union: exp.Query = parts[0]
    for part in parts[1:]:
        union = exp.union(union, part, distinct=False, copy=False)
    # one SELECT, as every engine's compile takes (the parts in a subquery, the CTEs outside)
    query = exp.select(*[exp.column(c) for c in ("__part", "__b", "__units")], copy=False
                       ).from_(exp.Subquery(this=union, alias=exp.TableAlias(
                           this=exp.to_identifier("__parts"))), copy=False)
    for name, cte in [*before, ("__stepped", exp.select(*stepped, copy=False).from_(
            source, copy=False))]:
        query = query.with_(name, as_=cte, copy=False)
    return query


def _per_unit(plan: Plan, sides: Sequence[AutoValue]) -> exp.Select:
    """Per unit (per row on a table without bounding): its rows ``__n`` and its extreme
    ``__v{i}`` of each side, from ``__rows``."""
    bounding = plan.table.needs_bounding
    names = reading(plan, [v.column for v in sides])[1]
    per_unit: list[exp.Expr] = [exp.alias_(exp.Count(this=exp.Star()), "__n")] if bounding \
        else []
    for i, v in enumerate(sides):
        value = exp.column(names[v.column])
        extreme = (exp.Max if v.side == "upper" else exp.Min)(this=value)
        per_unit.append(exp.alias_(extreme if bounding else value, f"__v{i}"))
    units = exp.select(*per_unit, copy=False).from_("__rows", copy=False)
    return units.group_by(exp.column("__unit"), copy=False) if bounding else units


def _part(index: int, bucket: exp.Expression, value: exp.Column | None) -> exp.Select:
    """One histogram of ``__stepped``: units per ``bucket``, those without a value (every
    value NULL, as the separate query's ``WHERE``) left out."""
    part = exp.select(exp.alias_(exp.Literal.number(index), "__part"),
                      exp.alias_(bucket, "__b"), exp.alias_(exp.Count(this=exp.Star()),
                                                            "__units"), copy=False).from_(
        "__stepped", copy=False)
    if value is not None:
        part = part.where(value.is_(exp.null()).not_(), copy=False)
    return part.group_by(bucket.copy(), copy=False)


def split(rows: Sequence[Sequence[object]], sides: int
          ) -> tuple[dict[int, int], list[dict[int, int]]]:
    """The engine's rows of :func:`unit_choices` as the separate histograms: units per
    number of rows (empty without an automatic k), then units per bucket for each side."""
    parts: list[dict[int, int]] = [{} for _ in range(1 + sides)]
    for part, bucket, units in rows:
        parts[int(part)][int(bucket)] = int(units)  # type: ignore[call-overload]
    return parts[0], parts[1:]
