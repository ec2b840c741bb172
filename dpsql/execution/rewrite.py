"""Pass 7, rewrite: the plan -> one SQL query (a sqlglot tree) that computes every measurement
per group inside the engine, so that only aggregated cells ever reach Python.

The query has three steps, each one or more CTEs:

1. ``__rows``: the declared table, filtered by WHERE, projected to the privacy unit, the group
   keys and one input column per aggregated expression. Every column is read clamped to its
   declared bounds (NaN read as NULL), every aggregated expression is clamped again to its
   derived interval, and every operation is made total (TRY_CAST, NULL for a division by zero),
   so no row can make the query fail.
2. contribution bounding, unless each row is already its own unit, in one of three forms
   below: by weights (counts and sums over public keys without a groups cap), on per-unit
   aggregates (the other counts and sums) or on a sample of rows (everything else).
   With joins, the table is the joined rows (:mod:`dpsql.query.joins`), so that everything after
   ``__rows`` -- bounding included -- runs on the joined rows, after the join.
3. the final aggregate per group: one column per measurement.

**Bounding by weights** (``Plan.weight_bits = F > 0``, :func:`dpsql.privacy.aggregates.
weight_bits`: every measurement a count or a sum, public keys, no groups cap; issue 23).
``__tot`` counts each unit's rows ``t`` (after WHERE, in all its groups); ``__by`` joins the
rows to their unit's ``t`` and groups them by (keys, ``t``): per measurement the exact
aggregate ``p`` of the rows' terms (COUNT, or the HUGEINT sum of the quantised terms on the
row grid ``Measurement.row_step``); the final query sums ``p * W(t)`` per group, ``W(t) =
min(2**F, floor(k 2**F / t))`` an integer. Grouping by ``t`` is exact because ``W`` depends on
``t`` alone: ``sum_t W(t) sum_{units with t} p_u = sum_u W(t_u) p_u``. The argument: unit u's
rows each weigh ``W(t_u) / 2**F``, so it adds ``n_j W`` to group j's count (``sum_j n_j W =
t W <= k 2**F``: at most k rows in total) and ``q_j W`` to a sum (``|sum_j q_j W| <= t T W <=
k T 2**F`` in grid units), all exact integers; ``W`` is a function of the unit's own rows, so
adding or removing it moves each measurement by exactly its own vector: L1 <= k (counts), k T
(sums), L2 <= L1, the sensitivities of :mod:`dpsql.privacy.aggregates`. Nothing is sampled or
ranked (no salt, no window, no sort): the unit's total is one GROUP BY of its rows, joined
back, and the keys are grouped with ``t`` (a few thousand values), not with the unit. A unit
reaches every group it has rows in: the noise grid pays one step per public key
(``Plan.groups_per_unit``). Measurements are in units of ``2**-F`` rows (counts) or
``row_step 2**-F`` (sums): real-valued, noised on their grid; the expected share is ``k n_j /
t`` rows, the allocation's and the sample's (the same bias). With a quantile's histogram
(MEDIAN, MIN, MAX, quantiles; :func:`_weighted_rows_query`) the rows themselves are joined to
``__tot`` and carry ``__w = W(t)``: each histogram sums ``__w`` per bucket, counts ``SUM(__w)``
and sums ``SUM(term * __w)``, the same integers per unit as above, without the row sample's
sort of every row by (unit, salted hash).

**Bounding by per-unit aggregates** (:func:`aggregated`: every measurement is a count, a
count of units or a sum, and the keys, if any, have a public domain). ``__units`` groups the
rows once by (unit, keys): ``n`` rows and, per measurement, the exact aggregate ``p`` of the
group's row terms (COUNT(x); the HUGEINT sum of the clamped, fixed-point terms). When the plan
caps the groups (``Plan.group_cap``: thresholded keys, a count of units; see
:func:`dpsql.privacy.aggregates.groups_cap`), a unit keeps
its first ``g' = min(g, k)`` groups in a random order keyed by the secret salt
(``row_number()`` over its *groups*, never its rows); otherwise it keeps all its groups
(:func:`_all_groups`, no ranking: its groups in key order, the order only deciding which
round up). It contributes ``K = min(tot, k)`` rows,
``tot`` its rows in the kept groups, allocated to them as ``c_j`` in proportion to their rows
(systematic rounding with a secret offset, :func:`_allocated`): ``c_j >= 0`` and ``sum_j c_j =
K <= k`` exactly. A kept group contributes ``c_j`` to COUNT(*), 1 to COUNT(DISTINCT unit), and
``p`` scaled by ``c_j / n_j`` to the others, rounded and clamped to ``[c_j lo, c_j hi]`` where
``[lo, hi]`` bounds one row's term (:func:`_scaled`; ``p`` itself when ``c_j = n_j``). Without
GROUP BY there is one group per unit and ``c = min(n, k)``: no salt at all. A unit's
contribution is a deterministic function of its own rows and the salt, so adding or removing
it moves each measurement by exactly its contribution vector, and per kind (``T`` the bound of
one row's term, as in :mod:`dpsql.privacy.aggregates`):

- COUNT(*): ``sum_j c_j = K <= k``: L1 <= k, L2 <= k;
- COUNT(x): ``round(p c_j / n_j)`` clamped to ``[0, c_j]``: L1 <= k, L2 <= k;
- COUNT(DISTINCT unit) (always with the cap): 1 in each of at most g' kept groups: L1 <= g',
  L2 <= sqrt(g');
- SUM, the centred sums of AVG/VAR and the squared one: ``|contribution_j| <= c_j T``, so
  L1 <= K T <= k T = the measurement's ``l1``, L2 <= L1;
- SUM with BigQuery's per-group bounds (``Measurement.per_group``, always with the cap):
  ``clamp(p, lo, hi)``, the unit's whole exact total in each kept group, not scaled by ``c_j``
  (no row cap): at most ``P = max(|lo|, |hi|)`` in each of at most g' groups, L1 <= g' P,
  L2 <= sqrt(g') P; with these keys released by thresholding too (this path is taken for
  any keys when such a sum is asked);

exactly the sensitivities of :mod:`dpsql.privacy.aggregates`, and at most g' groups (with the
cap) or ``min(k, keys)`` groups (without: only groups with ``c_j >= 1`` move) are touched (the
noise grid's ``cells_per_unit``, ``Plan.groups_per_unit``). A kept group's share is the
expected value of a uniform ``c_j``-row sample of its rows, and ``E[c_j] = K n_j / tot``,
the expected share of a uniform K-row sample of the kept groups: the same answer in
expectation as the sample of rows, with less variance, from one hash aggregate of the rows and
one sort of the (unit, group) pairs instead of sorts of every row. Rows are never sampled, so
every row that WHERE keeps counts.

**Bounding by a sample of rows** (``__bounded``; MEDIAN, quantiles, MIN, MAX and COUNT(DISTINCT
x) need rows, and keys released by thresholding typically have as many (unit, key) pairs as
rows): each unit keeps at most g groups when the plan caps them, then at most k rows, chosen
by a hash salted with 64 secret random bits drawn per query (so the analyst cannot predict or
steer the sample).

**Rows whose privacy unit is NULL** belong to no identifiable unit. In a table that needs
bounding they are dropped from every query, in the WHERE of ``__rows`` (before bounding):
bounded together they would form one partition, one "unit" of arbitrarily many rows whose k
sampled rows could stand in for different people from query to query, and which one person
could join (by writing rows without an id) to displace others from the sample. Dropping them
is the conservative choice: the neighbouring relation is over identified units only, and a
row without one contributes nothing. A ``one_row_per_unit`` table (no bounding) drops them too:
a NULL unit never counts as a person, on any path, so that the owner's promise changes how
rows are bounded and nothing else -- the same data with or without the promise gives the same
answers (``COUNT(DISTINCT unit)``, planned there as ``COUNT(*)``, counts SQL's non-NULL units,
and ``COUNT(*)`` the rows of identified units, as in a bounded table). A table without
``privacy_unit`` has no unit column: each row is its own unit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from fractions import Fraction

from sqlglot import exp

from dpsql.engines import ir
from dpsql.errors import UnsupportedQuery
from dpsql.execution import per_person, quantile_sql
from dpsql.metadata.metadata import Table
from dpsql.privacy import auto_values
from dpsql.privacy.aggregates import Measurement, MeasurementKind
from dpsql.privacy.plan import AutoValue, Plan
from dpsql.query.bounds import bound
from dpsql.query.joins import relation_sql
from dpsql.query.total_expressions import Reader, clamp, clamped_column, number, real, total

#: sqlglot's type names: a cast built from one is not parsed (from a string it is, ~0.1 ms).
DType = exp.DataType.Type

SALT = exp.Placeholder(this="1")  # $1: the secret salt, bound when the query runs


def rewrite(plan: Plan, physical: Mapping[str, str] | None = None,
            totals: str | None = None) -> exp.Select:
    """The engine query for ``plan``. Its parameter $1 is the salt that keys the
    contribution-bounding sample: a fresh secret for every execution. ``physical`` maps the
    table's columns to their DuckDB types; casts that cannot fail are then plain casts.
    ``totals``: a table of each unit's rows (``__unit``, ``__n``) over the very rows the
    query reads, already computed (:func:`shares_totals`), read instead of counting them
    again."""
    table = plan.table
    inputs = _inputs(plan)
    rows = query_rows(plan, physical, inputs)
    if totals is not None and not shares_totals(plan):
        raise ValueError("only bounding by weights reads a table of per-unit totals")
    if table.needs_bounding and plan.weight_bits:
        if any(m.kind == MeasurementKind.HISTOGRAM for m in plan.measurements):
            return _weighted_rows_query(plan, inputs, rows, totals)
        return _weighted_query(plan, inputs, rows, totals)
    if table.needs_bounding and aggregated(plan):
        return _aggregated_query(plan, inputs, rows)
    if table.needs_bounding and any(m.per_group is not None for m in plan.measurements):
        # Its sensitivity holds on the per-(unit, group) totals only (dpsql.privacy.aggregates)
        raise UnsupportedQuery("contribution_bounds_per_group on SUM is computed on each unit's "
                               "totals, which this query's other aggregates or bounds do not "
                               "allow; write contribution_bounds_per_row => (lower, upper)")
    source = "__rows"
    query = exp.select(*[exp.column(k.name) for k in plan.keys],
                       *[_measure(m, inputs, _on_grid_allowed(plan))
                         for m in plan.measurements], copy=False)
    query = query.with_("__rows", as_=rows, copy=False)
    if table.needs_bounding:
        query = query.with_("__bounded", as_=_bounded(plan, inputs), copy=False)
        source = "__bounded"
    query = query.from_(exp.to_identifier(source), copy=False)
    if plan.keys:
        query = query.group_by(*[exp.column(k.name) for k in plan.keys], copy=False)
    return query


def query_rows(plan: Plan, physical: Mapping[str, str] | None = None,
               inputs: dict[str, str] | None = None) -> exp.Select:
    """``__rows``: the rows the query reads (WHERE applied, rows of no identifiable unit
    dropped), each with its canonical unit ``__unit`` (tables that need bounding), its keys
    and its aggregated inputs; what bounding then samples from."""
    table = plan.table
    reader = Reader(table, physical or {})
    rows = exp.select(*_row_projections(plan, _inputs(plan) if inputs is None else inputs,
                                        reader), copy=False).from_(_source(plan, reader),
                                                                    copy=False)
    if table.privacy_unit is not None:
        # Rows of no identifiable unit are dropped, bounded or not (see the module docstring).
        rows = rows.where(reader.unit(table.privacy_unit).is_(exp.null()).not_(), copy=False)
    if plan.query.where is not None:
        rows = rows.where(total(plan.query.where, table, reader, filtering=True), copy=False)
    return rows


def unit_counts(plan: Plan, cap: int, physical: Mapping[str, str] | None = None
                ) -> exp.Select:
    """The engine query of an automatic k (:mod:`dpsql.privacy.auto_bounds`): how many units
    have ``c`` rows among the rows the query reads (``__rows``: its WHERE, units not NULL),
    ``c`` clamped to ``cap``; one row per ``c`` that occurs, no salt."""
    per_unit = exp.select(exp.alias_(exp.Count(this=exp.Star()), "__n"), copy=False).from_(
        "__rows", copy=False).group_by(exp.column("__unit"), copy=False)
    clamped = exp.Least(this=exp.column("__n"), expressions=[exp.Literal.number(cap)])
    return exp.select(exp.alias_(clamped, "__c"),
                      exp.alias_(exp.Count(this=exp.Star()), "__units"), copy=False).with_(
        "__rows", as_=query_rows(plan, physical), copy=False).with_(
        "__per_unit", as_=per_unit, copy=False).from_("__per_unit", copy=False).group_by(
        clamped.copy(), copy=False)


def unit_values(plan: Plan, v: AutoValue, physical: Mapping[str, str] | None = None
                ) -> exp.Select:
    """The engine query of an automatic value bound (:mod:`dpsql.privacy.auto_values`): how
    many units have their largest (``upper``) or smallest (``lower``) value of ``v.column``,
    read clamped to its declared bounds, in each geometric bucket ``__b``, among the rows the
    query reads (``__rows``: its WHERE, units not NULL); one row per bucket that occurs, no
    salt. Each unit is one value: a table without bounding has one row per unit."""
    reads, names = reading(plan, [v.column])
    value = exp.column(names[v.column])
    extreme = (exp.Max if v.side == "upper" else exp.Min)(this=value)
    per_unit = exp.select(exp.alias_(extreme if plan.table.needs_bounding else value, "__v"),
                          copy=False).from_("__rows", copy=False).where(
        value.is_(exp.null()).not_(), copy=False)
    if plan.table.needs_bounding:
        per_unit = per_unit.group_by(exp.column("__unit"), copy=False)
    stepped = exp.select(exp.alias_(value_steps(v, exp.column("__v")), "__s"), copy=False
                         ).from_("__per_unit", copy=False)
    bucket = step_bucket(exp.column("__s"))
    return exp.select(exp.alias_(bucket, "__b"), exp.alias_(exp.Count(this=exp.Star()),
                                                              "__units"), copy=False).with_(
        "__rows", as_=query_rows(reads, physical), copy=False).with_(
        "__per_unit", as_=per_unit, copy=False).with_("__stepped", as_=stepped, copy=False
                                                      ).from_("__stepped", copy=False).group_by(
        bucket.copy(), copy=False)


def reading(plan: Plan, columns: Sequence[str]) -> tuple[Plan, dict[str, str]]:
    """``plan`` reduced to the rows an automatic choice reads (:func:`query_rows` of it: the
    query's WHERE, units not NULL, no keys) and one input per column of ``columns``, read
    clamped to its declared bounds; with each column's input name."""
    args = [exp.column(c) for c in dict.fromkeys(columns)]
    reads = replace(plan, keys=(), measurements=tuple(replace(plan.measurements[0], arg=a)
                                                      for a in args))
    names = _inputs(reads)
    return reads, {a.name: names[a.sql(dialect="duckdb")] for a in args}


def value_steps(v: AutoValue, value: exp.Expression) -> exp.Expression:
    """``__s``: how many :data:`~dpsql.privacy.auto_values.RATIO` steps below the span of
    side ``v`` the distance of ``value`` (one unit's extreme) from the origin is; NULL at or
    below the origin."""
    o = auto_values.origin(v.lower, v.upper, v.side)
    span = (v.upper - o) if v.side == "upper" else (o - v.lower)
    # The distance in DOUBLE, and its steps as ln(span) - LN(distance): finite for every
    # positive double, where span / distance overflows for a tiny distance (Infinity, which
    # no BIGINT holds; PostgreSQL raises on the division itself). One unit's value must never
    # fail the query.
    read = exp.cast(value, DType.DOUBLE)
    distance = exp.Sub(this=read, expression=number(o)) if v.side == "upper" \
        else exp.Sub(this=number(o), expression=read)
    return exp.Case(ifs=[exp.If(this=exp.GT(this=distance, expression=number(0)), true=exp.cast(
        exp.Floor(this=exp.Div(this=exp.Paren(this=exp.Sub(
            this=number(math.log(span) if span > 0 else 0.0),
            expression=exp.Ln(this=exp.Paren(this=distance.copy())))),
            expression=number(math.log(auto_values.RATIO)))), DType.BIGINT))])


def step_bucket(s: exp.Column) -> exp.Expression:
    """The geometric bucket of ``s`` steps (:func:`value_steps`): ``B - 1 - s`` within ``[0, B
    - 1]`` (an ulp above the span: ``B - 1``; NULL, at or below the origin: 0)."""
    last = exp.Literal.number(auto_values.BUCKETS - 1)
    return exp.Case(ifs=[
        exp.If(this=exp.Or(this=s.is_(exp.null()), expression=exp.GTE(this=s.copy(),
                                                                       expression=last.copy())),
               true=exp.Literal.number(0)),
        exp.If(this=exp.LTE(this=s.copy(), expression=exp.Literal.number(0)), true=last.copy())],
        default=exp.Sub(this=last.copy(), expression=s.copy()))


def _source(plan: Plan, reader: Reader) -> exp.Expression:
    """What ``__rows`` reads: the declared table, or the joined rows (:mod:`dpsql.query.joins`: the
    joined table's columns, its unit ``__join_unit``; bounding then runs after the join)."""
    relation = plan.query.relation
    if relation is None:
        return _table_ref(plan.table)
    return relation_sql(relation, lambda c: total(c, plan.table, reader, filtering=True),
                        reader)


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
        # The canonical unit (Reader.unit): what bounding partitions by and COUNT(DISTINCT
        # unit) counts, the unit filters and joins see.
        projections.append(exp.alias_(reader.unit(table.privacy_unit), "__unit"))
    # (total() and _input() build fresh trees: aliased as they are, not copied again)
    for k in plan.keys:
        projections.append(exp.alias_(total(k.expression, table, reader), k.name, copy=False))
    done: set[str] = set()
    for m in plan.measurements:
        name = inputs[m.arg.sql(dialect="duckdb")] if m.arg is not None else None
        if m.arg is None or name is None or name in done:
            continue
        done.add(name)
        projections.append(exp.alias_(_input(m.arg, table, reader), name, copy=False))
    if len(projections) == 0:
        projections.append(exp.alias_(exp.Literal.number(1), "__one", copy=False))
    return projections


def _input(arg: exp.Expression, table: Table, reader: Reader) -> exp.Expression:
    """An aggregated expression, made total and clamped to its derived interval."""
    value = total(arg, table, reader)
    b = bound(arg, table)
    if isinstance(arg, exp.Column) or clamped_column(arg, table) is not None or not (
            b.numeric and b.finite):
        # A bare column is already read clamped to its declared bounds, which are its bound
        # (or, clamped by constants, to their intersection: the bound of LEAST(GREATEST(..))).
        return value  # or only counted (COUNT, COUNT DISTINCT): it never enters a sum
    if b.kind == "bool":
        value = exp.cast(value, DType.INT)
    return clamp(value, b.lo, b.hi, nan=b.kind == "float")


def _bounded(plan: Plan, inputs: dict[str, str]) -> exp.Select:
    table = plan.table
    keys = [exp.column(k.name) for k in plan.keys]
    salt_literal = SALT
    source: exp.Expression = exp.to_identifier("__rows")
    cap = plan.group_cap
    if keys and cap is not None and cap < shape_rows(plan):
        group_rank = exp.Window(
            this=exp.DenseRank(),
            partition_by=[exp.column("__unit")],
            # The unit is hashed too: each unit keeps its own random g groups, not the same
            # g keys for every unit (which would bias some groups' answers towards zero).
            order=exp.Order(expressions=[exp.Ordered(this=_hash([salt_literal,
                                                                 exp.column("__unit"), *keys])),
                                         *[exp.Ordered(this=k.copy()) for k in keys]]))
        ranked = _select_all(exp.to_identifier("__rows")).qualify(
            exp.LTE(this=group_rank, expression=exp.Literal.number(cap)),
            copy=False)
        source = exp.Subquery(this=ranked, alias=exp.TableAlias(this=exp.to_identifier("__g")))
    row_columns = [exp.column("__unit"), *keys, *[exp.column(n) for n in sorted(set(
        inputs.values()))]]
    row_rank = exp.Window(
        this=exp.RowNumber(),
        partition_by=[exp.column("__unit")],
        order=exp.Order(expressions=[exp.Ordered(this=_hash([salt_literal, *row_columns]))]))
    return _select_all(source).qualify(
        exp.LTE(this=row_rank, expression=exp.Literal.number(table.max_rows_per_unit)),
        copy=False)


#: Measurement kinds answered from per-unit aggregates (the module docstring, "Bounding by
#: per-unit aggregates"); the others (distinct values, histograms) need the sampled rows.
PER_UNIT_KINDS = (MeasurementKind.COUNT, MeasurementKind.UNITS, MeasurementKind.SUM)


def aggregated(plan: Plan) -> bool:
    """Whether each unit's contribution is bounded on its per-(unit, group) aggregates rather
    than by sorting its rows: when every measurement is a count or a sum, and the keys, if
    any, have a public domain. Keys released by thresholding (dates, free text) typically have
    nearly as many (unit, key) pairs as rows, where grouping the pairs and ranking them costs
    more than sampling the rows (benchmarks/README.md); the choice reads the plan only."""
    return (all(m.kind in PER_UNIT_KINDS and _fits(m, shape_rows(plan))
                for m in plan.measurements)
            and (not plan.keys or plan.domain is not None
                 or any(m.per_group is not None for m in plan.measurements)))


def _fits(m: Measurement, k: int) -> bool:
    """Whether k rows' worth of ``m``'s term bounds fit a HUGEINT with room to spare, so that
    the clamp of a scaled sum (:func:`_scaled`) can never overflow (and fail on one row)."""
    if m.kind != MeasurementKind.SUM:
        return True
    lo, hi = _term_range(m)
    return k * max(abs(lo), abs(hi)) < 2**120


def _term_range(m: Measurement) -> tuple[int, int]:
    """One row's term of sum measurement ``m``, in the integers the engine sums."""
    return m.units if m.step else (int(m.lo), int(m.hi))


def shape_rows(plan: Plan) -> int:
    """The k that the query's shape is chosen for: the cap of an automatic k
    (:mod:`dpsql.privacy.auto_bounds`), else k. The plan of the k drawn after the charge then
    has the shape of the cap's plan, whose SQL was checked and compiled before it, and
    differs from it in constants only (tests/privacy/test_auto_sql.py): a groups rank that
    min(g, k) = k makes redundant is kept, and a sum's path is the one chosen at the cap."""
    return plan.auto.cap if plan.auto is not None else plan.table.max_rows_per_unit


def _aggregated_query(plan: Plan, inputs: dict[str, str], rows: exp.Select) -> exp.Select:
    """``__rows`` -> ``__units`` (one row per unit and group: its row count ``__n`` and one
    exact aggregate ``__p{i}`` per measurement) -> ``__contrib`` (the groups the unit keeps and
    ``__c``, the rows it contributes to each) -> one column per measurement per group."""
    keys = [exp.column(k.name) for k in plan.keys]
    per_unit = exp.select(exp.column("__unit"), *keys,
                          _as(exp.Count(this=exp.Star()), "__n"),
                          *_pre_aggregates(plan, inputs), copy=False).from_(
        exp.to_identifier("__rows"), copy=False).group_by(exp.column("__unit"),
                                                          *[k.copy() for k in keys], copy=False)
    query = exp.select(*[k.copy() for k in keys], *[_as(_contribution(m), m.name)
                                                     for m in plan.measurements], copy=False)
    query = query.with_("__rows", as_=rows, copy=False).with_("__units", as_=per_unit,
                                                               copy=False)
    if keys and plan.group_cap is None:
        # No groups cap (Laplace or Gaussian over public keys: it would lower no sensitivity,
        # dpsql.privacy.aggregates): the unit's k rows are allocated over all its groups.
        query = query.with_("__kept", as_=_all_groups(plan), copy=False)
        contrib = _select_all(exp.to_identifier("__kept"))
        contrib.expressions.append(_as(_allocated(plan.table.max_rows_per_unit), "__c"))
    elif keys:
        query = query.with_("__ranked", as_=_ranked(plan), copy=False).with_(
            "__kept", as_=_kept(plan), copy=False)
        contrib = _select_all(exp.to_identifier("__kept"))
        contrib.expressions.append(_as(_allocated(plan.table.max_rows_per_unit), "__c"))
    else:
        contrib = _select_all(exp.to_identifier("__units"))
        contrib.expressions.append(_as(_least(exp.column("__n"), exp.Literal.number(
            plan.table.max_rows_per_unit)), "__c"))
    query = query.with_("__contrib", as_=contrib, copy=False).from_(
        exp.to_identifier("__contrib"), copy=False)
    if keys:
        query = query.group_by(*[k.copy() for k in keys], copy=False)
    return query


def shares_totals(plan: Plan) -> bool:
    """Whether ``plan``'s query counts each unit's rows as a step of its own (``__tot`` of
    bounding by weights, partitioned by the unit), which :func:`rewrite` can read from a
    table instead (``totals``)."""
    return (plan.table.needs_bounding and plan.weight_bits > 0
            and [p.name for p in weight_partition(plan)] == ["__unit"])


def _weighted_query(plan: Plan, inputs: dict[str, str], rows: exp.Select,
                    totals: str | None = None) -> exp.Select:
    """Bounding by weights (module docstring): ``__tot``, each unit's rows ``__t``; ``__by``,
    the rows joined to their unit's ``__t`` and grouped by (keys, ``__t``), one exact
    aggregate ``__p{i}`` per measurement; then per group ``SUM(__p{i} * W(__t))``. The rows are
    a subquery in both places, not one CTE: DuckDB would materialise a CTE read twice."""
    keys = [exp.column(k.name) for k in plan.keys]
    units = exp.Subquery(this=rows.copy(), alias=exp.TableAlias(this=exp.to_identifier("__r")))
    parts = weight_partition(plan)
    tot = _unit_totals(parts, units, totals)
    joined = exp.Join(this=exp.to_identifier("__tot"), on=exp.and_(*[exp.EQ(
        this=exp.column(p.name, table="__rows"), expression=exp.column(p.name, table="__tot"))
        for p in parts]))
    mine = [exp.column(k.name, table="__rows") for k in plan.keys]
    by = exp.select(*[_as(k, k.name) for k in mine], exp.column("__t", table="__tot"),
                    *[_as(_row_aggregate(m, inputs, _on_grid_allowed(plan)), f"__p{m.index}")
                      for m in plan.measurements], copy=False)
    by = by.from_(exp.Subquery(this=rows, alias=exp.TableAlias(this=exp.to_identifier(
        "__rows"))), copy=False)
    by.append("joins", joined)
    by = by.group_by(*[k.copy() for k in mine], exp.column("__t", table="__tot"), copy=False)
    weight = _weight(plan)
    query = exp.select(*[k.copy() for k in keys], *[_as(_or_zero(exp.Sum(this=exp.Mul(
        this=_cast(exp.column(f"__p{m.index}"), "HUGEINT"),
        expression=_cast(weight.copy(), "HUGEINT")))), m.name) for m in plan.measurements],
        copy=False)
    query = query.with_("__tot", as_=tot, copy=False).with_("__by", as_=by, copy=False)
    return query.from_(exp.to_identifier("__by"), copy=False).group_by(
        *[k.copy() for k in keys], copy=False)


def _unit_totals(parts: list[exp.Column], units: exp.Subquery,
                 totals: str | None) -> exp.Select:
    """Each unit's rows ``__t``: counted over ``units``, or read from ``totals`` (counted
    already over the same rows, :func:`shares_totals`)."""
    if totals is not None:
        return exp.select(exp.column("__unit"), _as(exp.column("__n"), "__t"), copy=False
                          ).from_(exp.to_identifier(totals), copy=False)
    return exp.select(*parts, _as(exp.Count(this=exp.Star()), "__t"), copy=False).from_(
        units, copy=False).group_by(*[p.copy() for p in parts], copy=False)


def _weighted_rows_query(plan: Plan, inputs: dict[str, str], rows: exp.Select,
                         totals: str | None = None) -> exp.Select:
    """Bounding by weights with a quantile (module docstring): each row of ``__rows`` joined to
    its unit's weight ``__w = W(__t)`` (``__tot``); per group a histogram summing ``__w``
    per bucket, counts ``SUM(__w)`` and sums ``SUM(term * __w)``, exact integers. No sort."""
    keys, parts = [exp.column(k.name) for k in plan.keys], weight_partition(plan)
    counts = _unit_totals(parts, exp.Subquery(this=rows.copy(), alias=exp.TableAlias(
        this=exp.to_identifier("__r"))), totals)
    tot = exp.select(*[p.copy() for p in parts], _as(_weight(plan), "__w"), copy=False).from_(
        counts.subquery("__c", copy=False), copy=False)  # W once a unit, not once a row
    weighted = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("__rows")),
                          exp.column("__w", table="__tot"), copy=False).from_(
        rows.subquery("__rows", copy=False), copy=False)
    weighted.append("joins", exp.Join(this=exp.to_identifier("__tot"), on=exp.and_(*[exp.EQ(
        this=exp.column(p.name, table="__rows"), expression=exp.column(p.name, table="__tot"))
        for p in parts])))
    w, measures = exp.column("__w"), []
    for m in plan.measurements:
        x = exp.column(inputs[m.arg.sql(dialect="duckdb")]) if m.arg is not None else None
        if m.kind == MeasurementKind.HISTOGRAM and x is not None:
            value: exp.Expression = ir.Histogram(this=quantile_sql.bucket(m, x), weight=w.copy())
        elif m.kind == MeasurementKind.COUNT:
            value = _or_zero(ir.ExactSum(this=w.copy() if x is None else exp.Case(ifs=[exp.If(
                this=exp.Not(this=exp.Is(this=x, expression=exp.Null())), true=w.copy())])))
        else:  # a sum: the row's term on its row grid, times its weight
            row = replace(m, step=m.row_step, units=(m.units[0] >> m.weight_bits,
                                                     m.units[1] >> m.weight_bits))
            # m.units bounds the weighted term: up to 2**52 times 2**F, beyond BIGINT
            value = _or_zero(ir.ExactSum(this=exp.Mul(this=_cast(_sum_term(
                row, x, _on_grid_allowed(plan)), "HUGEINT"), expression=w.copy()),
                wide=max(map(abs, m.units)) >= 2**63))
        measures.append(_as(value, m.name))
    query = exp.select(*[k.copy() for k in keys], *measures, copy=False).with_(
        "__tot", as_=tot, copy=False).with_("__weighted", as_=weighted, copy=False)
    return query.from_(exp.to_identifier("__weighted"), copy=False).group_by(
        *[k.copy() for k in keys], copy=False)


def weight_partition(plan: Plan) -> list[exp.Column]:
    """What a weight's total ``t`` counts the rows of: the unit (a seam for the audit's
    mutants: per unit and group would give each group its own k rows)."""
    return [exp.column("__unit")]


def _weight(plan: Plan) -> exp.Expression:
    """``W = min(2**F, floor(k 2**F / __t))``: a unit's weight in units of 2**-F rows."""
    one = 2 ** plan.weight_bits
    share = exp.IntDiv(this=exp.Literal.number(plan.table.max_rows_per_unit * one),
                       expression=exp.column("__t"))
    return _least(exp.Literal.number(one), share)


def _row_aggregate(m: Measurement, inputs: dict[str, str], shortcut: bool) -> exp.Expression:
    """A weighted measurement's exact aggregate of its rows' terms (before the weight): the
    rows counted, or the sum of the terms on the row grid (``Measurement.row_step``)."""
    x = exp.column(inputs[m.arg.sql(dialect="duckdb")]) if m.arg is not None else None
    if m.kind == MeasurementKind.COUNT:
        return exp.Count(this=x if x is not None else exp.Star())
    bits = m.weight_bits
    row = replace(m, step=m.row_step, units=(m.units[0] >> bits, m.units[1] >> bits))
    # ExactSum: the __by step sums the terms of every unit with the same total (Spark's SUM of
    # BIGINTs overflowed there on two corpus joins)
    return ir.ExactSum(this=_sum_term(row, x, shortcut))


def _pre_aggregates(plan: Plan, inputs: dict[str, str]) -> list[exp.Expr]:
    """Per unit and group, per measurement: COUNT(x) for a count of values, the exact SUM of
    the row terms for a sum (integers, see :func:`_sum_term`)."""
    out: list[exp.Expr] = []
    for m in plan.measurements:
        x = exp.column(inputs[m.arg.sql(dialect="duckdb")]) if m.arg is not None else None
        if m.kind == MeasurementKind.COUNT and x is not None:
            out.append(_as(exp.Count(this=x), f"__p{m.index}"))
        elif m.person == "mean":  # ZetaSQL's AVG: the unit's exact sum and count (its average)
            assert x is not None
            out.extend(per_person.pre_aggregates(m, x))
        elif m.kind == MeasurementKind.SUM:
            out.append(_as(ir.ExactSum(this=_sum_term(m, x, _on_grid_allowed(plan))),
                           f"__p{m.index}"))
    return out


def _unit_order(plan: Plan) -> exp.Order:
    """A unit's groups in a secret random order: by a hash of the salt, the unit and the key
    (ties, impossible but for hash collisions, broken by the keys: a total order)."""
    keys = [exp.column(k.name) for k in plan.keys]
    return exp.Order(expressions=[exp.Ordered(this=_hash([SALT, exp.column("__unit"), *keys])),
                                  *[exp.Ordered(this=k) for k in keys]])


def _ranked(plan: Plan) -> exp.Select:
    """Each (unit, group) with its rank ``__r`` in the unit's random order of groups and the
    unit's rows up to it, ``__cum`` (one sort of the unit's groups, not of its rows)."""
    rank = exp.Window(this=exp.RowNumber(),
                      partition_by=[exp.column("__unit")], order=_unit_order(plan))
    cum = _cast(exp.Window(
        this=exp.Sum(this=exp.column("__n")), partition_by=[exp.column("__unit")],
        order=_unit_order(plan), spec=exp.WindowSpec(
            kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW")),
        "BIGINT")  # a count of rows: a BIGINT, cheaper than the HUGEINT of SUM
    out = _select_all(exp.to_identifier("__units"))
    out.expressions.extend([_as(rank, "__r"), _as(cum, "__cum")])
    return out


def _kept(plan: Plan) -> exp.Select:
    """The unit's first g' groups, with ``__tot``, its rows in them."""
    cap = plan.group_cap
    assert cap is not None  # _kept is the capped form
    out = _select_all(exp.to_identifier("__ranked")).where(exp.LTE(
        this=exp.column("__r"), expression=exp.Literal.number(cap)), copy=False)
    out.expressions.extend([_as(_unit_total(), "__tot"), _as(_offset(), "__u")])
    return out


def _all_groups(plan: Plan) -> exp.Select:
    """Every (unit, group) of ``__units`` with ``__cum``, the unit's rows up to this group in
    the order of the keys, ``__tot``, all its rows, and its secret offset ``__u``. The order
    need not be secret: it only decides which groups round up, and each ``c_j`` has the mean
    ``K n_j / tot`` over the secret offset whatever the order (:func:`_allocated`)."""
    order = exp.Order(expressions=[exp.Ordered(this=exp.column(k.name)) for k in plan.keys])
    cum = _cast(exp.Window(
        this=exp.Sum(this=exp.column("__n")), partition_by=[exp.column("__unit")],
        order=order, spec=exp.WindowSpec(
            kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW")),
        "BIGINT")
    out = _select_all(exp.to_identifier("__units"))
    out.expressions.extend([_as(cum, "__cum"), _as(_unit_total(), "__tot"),
                            _as(_offset(), "__u")])
    return out


def _unit_total() -> exp.Expression:
    """The unit's rows in the groups it keeps (a BIGINT: cheaper than SUM's HUGEINT)."""
    return _cast(exp.Window(this=exp.Sum(this=exp.column("__n")),
                            partition_by=[exp.column("__unit")]), "BIGINT")


def _offset() -> exp.Expression:
    """The unit's secret offset in [0, 1] for :func:`_allocated`, from the salted hash of the
    unit."""
    return exp.Div(this=_cast(_hash([SALT, exp.column("__unit")]), "DOUBLE"),
                   expression=_cast(exp.Literal.number(2**64), "DOUBLE"))


def _allocated(k: int) -> exp.Expression:
    """The rows a kept group contributes: ``K = min(tot, k)`` split over the unit's kept groups
    in proportion to their rows, by systematic rounding with a secret offset ``U`` in [0, 1)
    (from the salted hash of the unit): ``c_j = F(cum_j) - F(cum_j - n_j)`` with

        F(0) = 0,  F(tot) = K,  else F(x) = clamp(floor(K * x / tot + U), 0, K)

    ``F`` is one deterministic, non-decreasing function (IEEE operations are monotone), so
    every ``c_j >= 0`` and the sum over the kept groups telescopes to ``F(tot) - F(0) = K``
    exactly, whatever the rounding of the DOUBLE arithmetic. Each ``c_j`` is ``floor`` or
    ``ceil`` of ``K n_j / tot`` (up to that rounding) and its mean over ``U`` is ``K n_j /
    tot``: the expected count of a uniform K-row sample of the kept groups' rows."""
    tot, big_k = exp.column("__tot"), _least(exp.column("__tot"), exp.Literal.number(k))

    def f(x: exp.Expression) -> exp.Expression:
        # Whole numbers (ir.Whole): PostgreSQL's product needs no guard against underflow.
        share = exp.Div(this=exp.Mul(this=_cast(ir.Whole(this=big_k.copy()), "DOUBLE"),
                                     expression=ir.Whole(this=x)), expression=tot.copy())
        floor = _cast(exp.Floor(this=exp.Add(this=share, expression=exp.column("__u"))),
                         "BIGINT")
        middle = _least(ir.greatest(floor, exp.Literal.number(0)), big_k.copy())
        return exp.Case(ifs=[
            exp.If(this=exp.EQ(this=x.copy(), expression=exp.Literal.number(0)),
                   true=exp.Literal.number(0)),
            exp.If(this=exp.EQ(this=x.copy(), expression=tot.copy()), true=big_k.copy())],
            default=middle)

    before = exp.Paren(this=exp.Sub(this=exp.column("__cum"), expression=exp.column("__n")))
    return exp.Sub(this=f(exp.column("__cum")), expression=f(before))


def _contribution(m: Measurement) -> exp.Expression:
    """Measurement ``m`` over the kept (unit, group) rows of ``__contrib``: each contributes
    ``__c`` rows, its aggregates scaled by ``__c / __n`` when it has more (module docstring)."""
    if m.kind == MeasurementKind.UNITS:
        return exp.Count(this=exp.Star())
    if m.kind == MeasurementKind.COUNT and m.arg is None:
        return _or_zero(exp.Sum(this=exp.column("__c")))
    p = exp.column(f"__p{m.index}")
    if m.per_group is not None:  # ZetaSQL's per-group bounds: the unit's own aggregate
        return _or_zero(exp.Sum(this=per_person.term(m, p)))
    if m.kind == MeasurementKind.COUNT:
        return _or_zero(exp.Sum(this=_scaled(p, "BIGINT", 0, 1)))
    lo, hi = _term_range(m)
    return _or_zero(exp.Sum(this=_scaled(p, "HUGEINT", lo, hi)))


def _scaled(p: exp.Expression, kind: str, lo: int, hi: int) -> exp.Expression:
    """``p`` (an exact aggregate of a group's ``__n`` rows, each row's term in [lo, hi]) as the
    contribution of ``__c`` of them: ``p`` itself when ``__c = __n``, else
    ``clamp(round(p * __c / __n), __c * lo, __c * hi)``: a deterministic integer in the range
    of any ``__c`` rows' terms, whatever the rounding of the DOUBLE product; NULL (nothing) when
    ``p`` is, a group whose terms are all NULL (GREATEST skips a NULL: it would read as ``__c *
    lo``, found by the semantic oracle)."""
    c, n = exp.column("__c"), exp.column("__n")
    # Whole numbers (ir.Whole): PostgreSQL's product needs no guard against underflow.
    ratio = exp.Div(this=exp.Mul(this=_cast(ir.Whole(this=p.copy()), "DOUBLE"),
                                 expression=ir.Whole(this=c.copy())), expression=n.copy())
    rounded = _cast(ir.RoundHalfAway(this=ratio), kind)
    wide_c = _cast(c.copy(), "HUGEINT")
    low = ir.greatest(rounded, exp.Mul(this=wide_c, expression=_integer(lo)))
    bounded = _least(low, exp.Mul(this=wide_c.copy(), expression=_integer(hi)))
    return exp.Case(ifs=[exp.If(this=exp.EQ(this=c.copy(), expression=n.copy()), true=p),
                         exp.If(this=exp.Is(this=p.copy(), expression=exp.Null()),
                                true=exp.Null())], default=bounded)


def _integer(value: int) -> exp.Expression:
    """An exact integer literal of any size (a HUGEINT beyond BIGINT), never a DOUBLE: the
    scaled sums must stay integer sums (dpsql.privacy.aggregates, "Exact sums")."""
    literal = exp.Literal.number(value)
    return exp.Paren(this=literal) if value < 0 else literal


def _as(value: exp.Expression, name: str) -> exp.Expression:
    """value AS name, without sqlglot's copy of ``value``."""
    return exp.Alias(this=value, alias=exp.to_identifier(name))


def _cast(value: exp.Expression, to: str) -> exp.Expression:
    """CAST(value AS to) without sqlglot's copy and type parsing (a fixed-cost saving)."""
    if to == "HUGEINT":
        return ir.ExactInteger(this=value)
    return exp.Cast(this=value, to=exp.DataType(this=_TYPES[to]))


_TYPES = {"DOUBLE": DType.DOUBLE, "BIGINT": DType.BIGINT}
_least = ir.least  # NULL-skipping, as every engine's own LEAST


def _or_zero(value: exp.Expression) -> exp.Expression:
    return exp.Coalesce(this=value, expressions=[exp.Literal.number(0)])


def _select_all(source: exp.Expression) -> exp.Select:
    """SELECT * FROM source, built without parsing text."""
    return exp.Select(expressions=[exp.Star()], from_=exp.From(this=source))


def _hash(parts: list[exp.Expression]) -> exp.Expression:
    """The salted hash of ``parts`` (the salt first): an integer in [0, 2^64)."""
    return ir.SaltedHash(expressions=[p.copy() for p in parts])


def _measure(m: Measurement, inputs: dict[str, str], shortcut: bool = True) -> exp.Expr:
    """The engine's column for measurement ``m``, by its kind (:data:`MEASURES`)."""
    x = exp.column(inputs[m.arg.sql(dialect="duckdb")]) if m.arg is not None else None
    if m.kind == MeasurementKind.SUM:
        return exp.alias_(_sum(m, x, shortcut), m.name)
    return exp.alias_(MEASURES[m.kind](m, x), m.name)


def _count(m: Measurement, x: exp.Expression | None) -> exp.Expression:
    return exp.Count(this=x if x is not None else exp.Star())


def _units(m: Measurement, x: exp.Expression | None) -> exp.Expression:
    return exp.Count(this=exp.Distinct(expressions=[exp.column("__unit")]))


def _distinct(m: Measurement, x: exp.Expression | None) -> exp.Expression:
    return exp.Count(this=exp.Distinct(expressions=[x]))


def _sum(m: Measurement, x: exp.Expression | None, shortcut: bool = True) -> exp.Expression:
    return exp.Coalesce(this=exp.Sum(this=_sum_term(m, x, shortcut)),
                        expressions=[exp.Literal.number(0)])


def _sum_term(m: Measurement, x: exp.Expression | None, shortcut: bool) -> exp.Expression:
    """One row's term of a sum measurement: the clamped input, centred and squared when asked,
    on the fixed-point grid when the sum is real-valued (an integer in ``m.units``)."""
    # Sum and histogram measurements are built (dpsql.privacy.aggregates) only for arguments that
    # numeric_bound accepted, so never for a missing one.
    assert x is not None
    term: exp.Expression = x
    if m.center or m.power != 1:
        # Centred and squared sums are real-valued: in DOUBLE, so that a narrow integer
        # input cannot overflow on (x - c) * (x - c).
        term = exp.Sub(this=exp.cast(x, DType.DOUBLE), expression=real(m.center))
    if m.power == 2:
        term = exp.Mul(this=exp.Paren(this=term), expression=exp.Paren(this=term.copy()))
    if m.step:
        term = _quantised(term, x, m, shortcut)
    return term


def _histogram(m: Measurement, x: exp.Expression | None) -> exp.Expression:
    assert x is not None  # a histogram's argument, as for a sum
    return ir.Histogram(this=quantile_sql.bucket(m, x))


#: How the engine computes each kind of measurement (MeasurementSpec.kind), per group.
MEASURES: dict[MeasurementKind, Callable[[Measurement, exp.Expression | None],
                                          exp.Expression]] = {
    MeasurementKind.COUNT: _count, MeasurementKind.UNITS: _units,
    MeasurementKind.DISTINCT: _distinct, MeasurementKind.SUM: _sum,
    MeasurementKind.HISTOGRAM: _histogram}


def _quantised(term: exp.Expression, x: exp.Expression, m: Measurement, shortcut: bool
               ) -> exp.Expression:
    """A real term on the measurement's fixed-point grid, as a BIGINT in [units]:

        CASE WHEN x IS NOT NULL
             THEN LEAST(GREATEST(CAST(ROUND(term / step) AS BIGINT), lo_units), hi_units) END

    so that SUM adds integers in HUGEINT, exactly and in any order (the argument is in
    dpsql.privacy.aggregates, "Exact sums"). Dividing by a power of two is exact. DuckDB's GREATEST
    and LEAST skip NULLs, so NULL is kept by the CASE instead: the term is NULL exactly when
    the input is (it is finite arithmetic on the clamped, NaN-free input)."""
    # An automatic bound's step is drawn after the charge: ir.Chosen keeps the SQL's shape.
    step = real(m.step) if shortcut else ir.Chosen(this=real(m.step))
    scaled = exp.Div(this=exp.Paren(this=term), expression=step)
    rounded = exp.cast(ir.RoundHalfAway(this=scaled), DType.BIGINT)
    if shortcut and _on_grid(m):
        return rounded  # NULL for NULL, and within [units] for every input: no clamp needed
    low = ir.greatest(rounded, number(m.units[0]))
    clamped = _least(low, number(m.units[1]))
    present = exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null()))
    return exp.Case(ifs=[exp.If(this=present, true=clamped)])


def _on_grid_allowed(plan: Plan) -> bool:
    """Whether the clamp may be dropped where :func:`_on_grid` holds: not for a plan with
    automatic value bounds (:mod:`dpsql.privacy.auto_values`), whose bounds are drawn after
    the charge. Whether a drawn bound is on the grid depends on its value (5000 is, 0.0907
    is not), and the SQL that runs after the charge must be the one compiled before it, up
    to its constants (tests/privacy/test_auto_sql.py)."""
    return not plan.values


def _on_grid(m: Measurement) -> bool:
    """Whether every input the engine can sum rounds into ``m.units`` without the integer
    clamp (a third of a SUM's time at 10M rows). The input is clamped to ``[m.lo, m.hi]``
    (doubles: its DOUBLE value too, rounding being monotone), the term ``x`` or ``x - c``
    (``power`` 1) is a monotone function of it in IEEE arithmetic, as are the division by the
    power-of-two step and the rounding: so the term's grid value lies between those of the
    interval's ends, computed here with the engine's own double arithmetic."""
    if m.power != 1:
        return False
    ends = [float(m.lo), float(m.hi)]
    if m.center:
        ends = [e - float(m.center) for e in ends]
    q = [_round_half_away(Fraction(e / m.step)) for e in ends]
    return m.units[0] <= q[0] and q[1] <= m.units[1]


def _round_half_away(v: Fraction) -> int:
    """ir.RoundHalfAway of an exact value."""
    magnitude = math.floor(abs(v) + Fraction(1, 2))
    return magnitude if v >= 0 else -magnitude
