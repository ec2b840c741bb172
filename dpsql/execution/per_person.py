"""Each unit's own term in ZetaSQL's per-group aggregates, on the per-(unit, group) rows of
:mod:`dpsql.execution.rewrite` (``__units``: per measurement ``__p{i}``, and ``__q{i}`` for an
average): what one unit adds to a group's measurement, a deterministic function of its own
rows, NULL (nothing) for a unit without a non-NULL value there. The sensitivities are in
:mod:`dpsql.privacy.aggregates` (``_per_group_sum``, ``_per_person_avg``)."""

from __future__ import annotations

from sqlglot import exp

from dpsql.engines import ir
from dpsql.privacy.aggregates import Measurement
from dpsql.query.total_expressions import number, real


def pre_aggregates(m: Measurement, x: exp.Expression) -> list[exp.Expression]:
    """ZetaSQL's AVG (``m.person == "mean"``): the unit's exact integer sum of its row terms
    ``__p{i}`` and its count of non-NULL values ``__q{i}``, its average being their ratio."""
    return [exp.Alias(this=ir.ExactSum(this=_row_term(m, x)),
                      alias=exp.to_identifier(f"__p{m.index}")),
            exp.Alias(this=exp.Count(this=x.copy()), alias=exp.to_identifier(f"__q{m.index}"))]


def term(m: Measurement, p: exp.Expression) -> exp.Expression:
    """The unit's term of per-group measurement ``m`` (``m.per_group`` set), ``p`` its
    ``__p{i}``: SUM, its total clamped to ``m.per_group`` (in the integers summed); AVG's
    count, 1 for a unit with a non-NULL value; AVG's sum, its clamped centred average."""
    if m.person == "present":
        return exp.Case(ifs=[exp.If(this=exp.GT(this=p, expression=exp.Literal.number(0)),
                                    true=exp.Literal.number(1))])
    if m.person == "mean":
        return _mean_term(m, p)
    assert m.per_group is not None
    clamped = ir.least(ir.greatest(p, _integer(m.per_group[0])), _integer(m.per_group[1]))
    # a unit whose values in the group are all NULL (its total NULL) contributes nothing
    return exp.Case(ifs=[exp.If(this=_present(p), true=clamped)])


def _row_term(m: Measurement, x: exp.Expression) -> exp.Expression:
    """One row's term: the row itself (integer rows) or its value on the rows' grid
    ``m.row_grid``, an integer (dpsql.privacy.aggregates, "Exact sums"), NULL kept."""
    if m.row_grid is None:
        return x
    step, lo, hi = m.row_grid
    scaled = exp.Div(this=exp.Paren(this=x.copy()), expression=real(step))
    rounded = exp.cast(ir.RoundHalfAway(this=scaled), "BIGINT")
    return exp.Case(ifs=[exp.If(this=_present(x), true=ir.least(
        ir.greatest(rounded, number(lo)), number(hi)))])


def _mean_term(m: Measurement, p: exp.Expression) -> exp.Expression:
    """The unit's average ``p * row_step / q`` clamped to ``[m.lo, m.hi]``, centred on
    ``m.center``, rounded onto the sum's grid ``m.step`` and clamped there to ``m.units``;
    NULL for a unit without a non-NULL value (``q = 0``)."""
    q = exp.column(f"__q{m.index}")
    row_step = m.row_grid[0] if m.row_grid is not None else 1.0
    double = exp.Cast(this=ir.Whole(this=p.copy()),
                      to=exp.DataType(this=exp.DataType.Type.DOUBLE))
    mean = exp.Div(this=exp.Mul(this=double, expression=real(row_step)), expression=q.copy())
    clamped = ir.least(ir.greatest(mean, real(m.lo)), real(m.hi))
    centred = exp.Sub(this=clamped, expression=real(m.center))
    rounded = exp.cast(ir.RoundHalfAway(this=exp.Div(this=exp.Paren(this=centred),
                                                     expression=real(m.step))), "BIGINT")
    bounded = ir.least(ir.greatest(rounded, number(m.units[0])), number(m.units[1]))
    return exp.Case(ifs=[exp.If(this=exp.GT(this=q, expression=exp.Literal.number(0)),
                                true=bounded)])


def _present(value: exp.Expression) -> exp.Expression:
    return exp.Not(this=exp.Is(this=value.copy(), expression=exp.Null()))


def _integer(value: int) -> exp.Expression:
    """An exact integer literal of any size (a HUGEINT beyond BIGINT), never a DOUBLE."""
    literal = exp.Literal.number(value)
    return exp.Paren(this=literal) if value < 0 else literal
