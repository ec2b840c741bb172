"""The bucket of one row of a quantile's histogram, in SQL: equal buckets of the clamp interval
(one per value for integers, days for dates, seconds for timestamps) or the fine grid of
:mod:`dpsql.privacy.quantile_grid`. Each row's bucket is a function of its own clamped value
(NULL for NULL, never an error): what the histogram's sensitivity needs
(:mod:`dpsql.privacy.aggregates`)."""

from __future__ import annotations

import math

from sqlglot import exp

from dpsql.engines import ir
from dpsql.privacy.aggregates import Measurement
from dpsql.privacy.quantile_grid import EQUAL, Grid
from dpsql.query.total_expressions import number, real


def bucket(m: Measurement, x: exp.Expression) -> exp.Expression:
    """Row value ``x`` -> its bucket: ``min(floor((x - lo) B / (hi - lo)), B - 1)`` of the
    measurement's ``B`` equal buckets, or its key on the fine grid (:func:`fine_bucket`)."""
    lo, hi = m.histogram_range
    if hi <= lo:
        return exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=x, expression=exp.Null())),
                                    true=exp.Literal.number(0))])
    if m.fine:
        return fine_bucket(Grid(lo, hi), x)
    if m.dates:  # a date's day number
        x = ir.DaysSinceEpoch(this=x)
    if m.instants:  # a timestamp's seconds since 1970-01-01 (a DOUBLE in DuckDB)
        x = exp.TimeToUnix(this=x)
    return _equal(x, lo, hi, m.buckets)


def _equal(x: exp.Expression, lo: float, hi: float, buckets: int) -> exp.Expression:
    """The equal bucket of ``x``, NULL for NULL."""
    scaled = exp.Mul(this=exp.Paren(this=exp.Sub(this=exp.cast(x, "DOUBLE"),
                                                 expression=number(lo))),
                     expression=number(buckets / (hi - lo)))
    index = exp.cast(exp.Floor(this=scaled), "BIGINT")
    return ir.StrictLeast(this=index, expressions=[exp.Literal.number(buckets - 1)])


def fine_bucket(grid: Grid, x: exp.Expression) -> exp.Expression:
    """``e * G + g`` (:mod:`dpsql.privacy.quantile_grid`): ``e`` the equal bucket, ``g`` the
    geometric one of the distance ``d = x - o``:

        S + steps(d)               when d >= 0 (the only case when o is the lower bound)
        S - 1 - steps(-d)          when d < 0
        steps(t) = min(max(floor((LN(max(t, tau)) - LN(tau)) / LN(r)), 0), S - 1)

    LN is taken of at least tau > 0 (finite). A NULL value has a NULL key (the outer CASE).

    Every row computes this (a third of a MEDIAN's engine time at 10M rows), so it is spelled
    with the fewest operations that give the same integers (:func:`_equal_real`, no ``- 0``):
    ``e``, ``g`` and ``e * G + g`` stay DOUBLEs holding whole numbers below ``2**53`` (exact:
    FLOOR's result is whole, the clamps' ends are whole, products and sums of such numbers
    are exact), cast to BIGINT once, at the end."""
    s = grid.side
    d = _minus(exp.cast(x.copy(), "DOUBLE"), grid.origin)

    def steps(t: exp.Expression) -> exp.Expression:
        near = ir.greatest(t, number(grid.tau))
        ratio = exp.Div(this=exp.Paren(this=exp.Sub(this=exp.Ln(this=near), expression=number(
            math.log(grid.tau)))), expression=number(grid.ln_ratio))
        return ir.least(ir.greatest(exp.Floor(this=ratio), real(0.0)), real(s - 1))

    g: exp.Expression = exp.Add(this=exp.Literal.number(s), expression=steps(d.copy()))
    if grid.lo < grid.origin:
        g = exp.Case(ifs=[exp.If(this=exp.GTE(this=d.copy(), expression=exp.Literal.number(0)),
                                 true=g)],
                     default=exp.Sub(this=exp.Literal.number(s - 1), expression=steps(exp.Neg(
                         this=d.copy()))))
    e = _equal_real(x, grid.lo, grid.hi, EQUAL)
    key = exp.cast(exp.Add(this=exp.Mul(this=e, expression=exp.Literal.number(grid.geometric)),
                           expression=exp.Paren(this=g)), "BIGINT")
    return exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())),
                                true=key)])


def _equal_real(x: exp.Expression, lo: float, hi: float, buckets: int) -> exp.Expression:
    """:func:`_equal`'s bucket as a whole DOUBLE, NULL-skipping (the caller tests for NULL): the
    same FLOOR, clamped to ``buckets - 1`` before a cast instead of after it (the cast of a
    whole number is exact and monotone, so the two commute)."""
    scaled = exp.Mul(this=_minus(exp.cast(x.copy(), "DOUBLE"), lo),
                     expression=number(buckets / (hi - lo)))
    return ir.least(exp.Floor(this=scaled), real(buckets - 1))


def _minus(x: exp.Expression, c: float) -> exp.Expression:
    """``x - c``, or ``x`` itself when ``c`` is 0: ``x - 0.0`` is ``x`` for every DOUBLE
    (-0.0 included), one operation a row fewer."""
    return x if c == 0 else exp.Paren(this=exp.Sub(this=x, expression=number(c)))
