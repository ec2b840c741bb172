"""Pass 5, rewrite: the plan -> one SQL query (a sqlglot tree) that computes every measurement
per group inside the engine, so that only aggregated cells ever reach Python.

The query has three steps, each a CTE:

1. ``__rows``: the declared table, filtered by WHERE, projected to the privacy unit, the group
   keys and one input column per aggregated expression. Every column is read clamped to its
   declared bounds (NaN read as NULL), every aggregated expression is clamped again to its
   derived interval, and every operation is made total (TRY_CAST, NULL for a division by zero),
   so no row can make the query fail.
   With joins, the table is the joined rows (:mod:`dpsql.joins`), so that everything after
   ``__rows`` -- bounding included -- runs on the joined rows, after the join.
2. ``__bounded``: contribution bounding, unless each row is already its own unit: each unit
   keeps at most g groups, then at most k rows, chosen by a hash salted with 64 secret random
   bits drawn per query (so the analyst cannot predict or steer the sample).
3. the final aggregate per group: one column per measurement.

**Rows whose privacy unit is NULL** belong to no identifiable unit. In a table that needs
bounding they are dropped from every query, in the WHERE of ``__rows`` (before bounding):
bounded together they would form one partition, one "unit" of arbitrarily many rows whose k
sampled rows could stand in for different people from query to query, and which one person
could join (by writing rows without an id) to displace others from the sample. Dropping them
is the conservative choice: the neighbouring relation is over identified units only, and a
row without one contributes nothing. In a ``one_row_per_unit`` table (no bounding) each row is
its own unit, NULL unit included, exactly as in a table without ``privacy_unit``: one row
changes a count by at most 1 either way; there ``COUNT(DISTINCT unit)`` counts rows (it is
planned as ``COUNT(*)``), so it includes rows whose unit is NULL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from dpsql.aggregates import EPOCH_DAY, Measurement
from dpsql.bounds import bound
from dpsql.joins import relation_sql
from dpsql.metadata import Table
from dpsql.plan import Plan
from dpsql.total import Reader, clamp, number, total

SALT = exp.Placeholder(this="1")  # $1: the secret salt, bound when the query runs


def rewrite(plan: Plan, physical: Mapping[str, str] | None = None) -> exp.Select:
    """The engine query for ``plan``. Its parameter $1 is the salt that keys the
    contribution-bounding sample: a fresh secret for every execution. ``physical`` maps the
    table's columns to their DuckDB types; casts that cannot fail are then plain casts."""
    table = plan.table
    reader = Reader(table, physical or {})
    inputs = _inputs(plan)
    rows = exp.select(*_row_projections(plan, inputs, reader), copy=False).from_(
        _source(plan, reader), copy=False)
    if table.needs_bounding:
        assert table.privacy_unit is not None  # needs_bounding implies a privacy unit
        # Rows of no identifiable unit are dropped (see the module docstring).
        rows = rows.where(exp.column(table.privacy_unit, quoted=True).is_(exp.null()).not_(),
                          copy=False)
    if plan.query.where is not None:
        rows = rows.where(total(plan.query.where, table, reader, filtering=True), copy=False)
    if table.needs_bounding and _counts_rows_only(plan):
        return _counted_per_unit(plan, rows)
    source = "__rows"
    query = exp.select(*[exp.column(k.name) for k in plan.keys],
                       *[_measure(m, inputs) for m in plan.measurements], copy=False)
    query = query.with_("__rows", as_=rows, copy=False)
    if table.needs_bounding:
        query = query.with_("__bounded", as_=_bounded(plan, inputs), copy=False)
        source = "__bounded"
    query = query.from_(exp.to_identifier(source), copy=False)
    if plan.keys:
        query = query.group_by(*[exp.column(k.name) for k in plan.keys], copy=False)
    return query


def _counts_rows_only(plan: Plan) -> bool:
    """A query without GROUP BY whose only measurements count rows or units."""
    return not plan.keys and all(
        (m.kind == "count" and m.arg is None) or m.kind == "units" for m in plan.measurements)


def _counted_per_unit(plan: Plan, rows: exp.Select) -> exp.Select:
    """COUNT(*) under contribution bounding without sampling rows: a unit with n rows keeps
    min(n, k) of them in any k-row sample, so the bounded count is SUM(LEAST(n, k)) over the
    units, exactly what the sample would give, with the same sensitivity k, and one hash
    aggregate instead of a sort of every row by unit (benchmarks/bench_bounding.py)."""
    k = plan.table.max_rows_per_unit
    per_unit = exp.select(exp.alias_(exp.Anonymous(this="least", expressions=[
        exp.Count(this=exp.Star()), exp.Literal.number(k)]), "__n"), copy=False).from_(
        exp.to_identifier("__rows"), copy=False).group_by(exp.column("__unit"), copy=False)
    measures = []
    for m in plan.measurements:
        value: exp.Expression = exp.Count(this=exp.Star()) if m.kind == "units" else \
            exp.Coalesce(this=exp.Sum(this=exp.column("__n")),
                         expressions=[exp.Literal.number(0)])
        measures.append(exp.alias_(value, m.name))
    return exp.select(*measures, copy=False).with_("__rows", as_=rows, copy=False).with_(
        "__units", as_=per_unit, copy=False).from_(exp.to_identifier("__units"), copy=False)


def _source(plan: Plan, reader: Reader) -> exp.Expression:
    """What ``__rows`` reads: the declared table, or the joined rows (:mod:`dpsql.joins`: the
    joined table's columns, its unit ``__join_unit``; bounding then runs after the join)."""
    relation = plan.query.relation
    if relation is None:
        return _table_ref(plan.table)
    return relation_sql(relation, lambda c: total(c, plan.table, reader, filtering=True))


def _table_ref(table: Table) -> exp.Table:
    return exp.Table(this=exp.to_identifier(table.name, quoted=True))


def _inputs(plan: Plan) -> dict[str, str]:
    """One input column per distinct aggregated expression: its SQL -> __x{i}."""
    names: dict[str, str] = {}
    for m in plan.measurements:
        if m.arg is not None:
            names.setdefault(m.arg.sql(dialect="duckdb"), f"__x{len(names)}")
    return names


def _row_projections(plan: Plan, inputs: dict[str, str], reader: Reader
                     ) -> list[exp.Expr]:
    table = plan.table
    projections: list[exp.Expr] = []
    if table.needs_bounding:
        assert table.privacy_unit is not None  # needs_bounding implies a privacy unit
        projections.append(exp.alias_(exp.column(table.privacy_unit, quoted=True), "__unit"))
    for k in plan.keys:
        projections.append(exp.alias_(total(k.expression, table, reader), k.name))
    done: set[str] = set()
    for m in plan.measurements:
        if m.arg is None or inputs[m.arg.sql(dialect="duckdb")] in done:
            continue
        name = inputs[m.arg.sql(dialect="duckdb")]
        done.add(name)
        projections.append(exp.alias_(_input(m.arg, table, reader), name))
    if len(projections) == 0:
        projections.append(exp.alias_(exp.Literal.number(1), "__one"))
    return projections


def _input(arg: exp.Expression, table: Table, reader: Reader) -> exp.Expression:
    """An aggregated expression, made total and clamped to its derived interval."""
    value = total(arg, table, reader)
    b = bound(arg, table)
    if isinstance(arg, exp.Column) or not (b.numeric and b.finite):
        # A bare column is already read clamped to its declared bounds, which are its bound.
        return value  # or only counted (COUNT, COUNT DISTINCT): it never enters a sum
    if b.kind == "bool":
        value = exp.cast(value, "INTEGER")
    return clamp(value, b.lo, b.hi, nan=b.kind == "float")


def _bounded(plan: Plan, inputs: dict[str, str]) -> exp.Select:
    table = plan.table
    keys = [exp.column(k.name) for k in plan.keys]
    salt_literal = SALT
    source: exp.Expression = exp.to_identifier("__rows")
    if keys and table.max_groups_per_unit < table.max_rows_per_unit:
        group_rank = exp.Window(
            this=exp.Anonymous(this="dense_rank"),
            partition_by=[exp.column("__unit")],
            # The unit is hashed too: each unit keeps its own random g groups, not the same
            # g keys for every unit (which would bias some groups' answers towards zero).
            order=exp.Order(expressions=[exp.Ordered(this=_hash([salt_literal,
                                                                 exp.column("__unit"), *keys])),
                                         *[exp.Ordered(this=k.copy()) for k in keys]]))
        ranked = _select_all(exp.to_identifier("__rows")).qualify(
            exp.LTE(this=group_rank, expression=exp.Literal.number(table.max_groups_per_unit)),
            copy=False)
        source = exp.Subquery(this=ranked, alias=exp.TableAlias(this=exp.to_identifier("__g")))
    row_columns = [exp.column("__unit"), *keys, *[exp.column(n) for n in sorted(set(
        inputs.values()))]]
    row_rank = exp.Window(
        this=exp.Anonymous(this="row_number"),
        partition_by=[exp.column("__unit")],
        order=exp.Order(expressions=[exp.Ordered(this=_hash([salt_literal, *row_columns]))]))
    return _select_all(source).qualify(
        exp.LTE(this=row_rank, expression=exp.Literal.number(table.max_rows_per_unit)),
        copy=False)


def _select_all(source: exp.Expression) -> exp.Select:
    """SELECT * FROM source, built without parsing text."""
    return exp.Select(expressions=[exp.Star()], from_=exp.From(this=source))


def _hash(parts: list[exp.Expression]) -> exp.Expression:
    return exp.Anonymous(this="hash", expressions=[p.copy() for p in parts])


def _measure(m: Measurement, inputs: dict[str, str]) -> exp.Expr:
    """The engine's column for measurement ``m``, by its kind (:data:`MEASURES`)."""
    x = exp.column(inputs[m.arg.sql(dialect="duckdb")]) if m.arg is not None else None
    return exp.alias_(MEASURES[m.kind](m, x), m.name)


def _count(m: Measurement, x: exp.Expression | None) -> exp.Expression:
    return exp.Count(this=x if x is not None else exp.Star())


def _units(m: Measurement, x: exp.Expression | None) -> exp.Expression:
    return exp.Count(this=exp.Distinct(expressions=[exp.column("__unit")]))


def _distinct(m: Measurement, x: exp.Expression | None) -> exp.Expression:
    return exp.Count(this=exp.Distinct(expressions=[x]))


def _sum(m: Measurement, x: exp.Expression | None) -> exp.Expression:
    # Sum and histogram measurements are built (dpsql.aggregates) only for arguments that
    # numeric_bound accepted, so never for a missing one.
    assert x is not None
    term: exp.Expression = x
    if m.center or m.power != 1:
        # Centred and squared sums are real-valued: in DOUBLE, so that a narrow integer
        # input cannot overflow on (x - c) * (x - c).
        term = exp.Sub(this=exp.cast(x, "DOUBLE"), expression=number(m.center))
    if m.power == 2:
        term = exp.Mul(this=exp.Paren(this=term), expression=exp.Paren(this=term.copy()))
    if m.step:
        term = _quantised(term, x, m)
    return exp.Coalesce(this=exp.Sum(this=term), expressions=[exp.Literal.number(0)])


def _histogram(m: Measurement, x: exp.Expression | None) -> exp.Expression:
    assert x is not None  # a histogram's argument, as for a sum
    return exp.Anonymous(this="histogram", expressions=[_bucket(m, x)])


#: How the engine computes each kind of measurement (MeasurementSpec.kind), per group.
MEASURES: dict[str, Callable[[Measurement, exp.Expression | None], exp.Expression]] = {
    "count": _count, "units": _units, "distinct": _distinct, "sum": _sum,
    "histogram": _histogram}


def _quantised(term: exp.Expression, x: exp.Expression, m: Measurement) -> exp.Expression:
    """A real term on the measurement's fixed-point grid, as a BIGINT in [units]:

        CASE WHEN x IS NOT NULL
             THEN LEAST(GREATEST(CAST(ROUND(term / step) AS BIGINT), lo_units), hi_units) END

    so that SUM adds integers in HUGEINT, exactly and in any order (the argument is in
    dpsql.aggregates, "Exact sums"). Dividing by a power of two is exact. DuckDB's GREATEST
    and LEAST skip NULLs, so NULL is kept by the CASE instead: the term is NULL exactly when
    the input is (it is finite arithmetic on the clamped, NaN-free input)."""
    scaled = exp.Div(this=exp.Paren(this=term), expression=number(m.step))
    rounded = exp.cast(exp.Anonymous(this="round", expressions=[scaled]), "BIGINT")
    low = exp.Anonymous(this="greatest", expressions=[rounded, number(m.units[0])])
    clamped = exp.Anonymous(this="least", expressions=[low, number(m.units[1])])
    present = exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null()))
    return exp.Case(ifs=[exp.If(this=present, true=clamped)])


def _bucket(m: Measurement, x: exp.Expression) -> exp.Expression:
    lo, hi = m.histogram_range
    if hi <= lo:
        return exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=x, expression=exp.Null())),
                                    true=exp.Literal.number(0))])
    if m.dates:  # a date's day number: DATE minus DATE is a BIGINT in DuckDB
        x = exp.Paren(this=exp.Sub(this=x, expression=exp.cast(
            exp.Literal.string(EPOCH_DAY.isoformat()), "DATE")))
    if m.instants:  # a timestamp's seconds since 1970-01-01 (a DOUBLE in DuckDB)
        x = exp.TimeToUnix(this=x)
    scaled = exp.Mul(this=exp.Paren(this=exp.Sub(this=exp.cast(x, "DOUBLE"),
                                                 expression=number(lo))),
                     expression=number(m.buckets / (hi - lo)))
    index = exp.cast(exp.Floor(this=scaled), "BIGINT")
    return exp.Least(this=index, expressions=[exp.Literal.number(m.buckets - 1)])
