"""The reference model of the semantic oracle (:mod:`dpsql.audit.oracle`): the answer the analyst's
query is meant to have, as plain SQL over the world's rows, with each rule where dpsql's answer
is *meant* to differ from plain SQL written once, as a named function here.

The analyst's query is split as dpsql splits it, but in SQL: the **grouped part**
(``SELECT keys, aggregates FROM ... WHERE ... GROUP BY keys``) and the **outer part** (the
select list's arithmetic over the aggregates, HAVING, ORDER BY, LIMIT and OFFSET, windows over
the aggregates), evaluated over the grouped part's rows. Between the two sit the rules of key
release. Rules (each one function below; change a rule in one place):

* :func:`read_value` -- what a stored value reads as: NaN as NULL (the reference world's data
  is transformed so);
* :func:`clamped` -- an aggregate's argument and a group key read bounded columns clamped to
  their declared bounds; filters (WHERE, ON, FILTER) read them as stored;
* :func:`without_unit` -- rows that reach no privacy unit (a NULL unit, a dangling or NULL
  ``unit_path``) are dropped from a relation that is bounded; in a ``one_row_per_unit`` table
  alone every row is its own unit;
* :func:`total` -- row-level SQL is total: a division or modulo by zero, a failed cast, NULL;
* :func:`semi_join` -- ``[NOT] IN (SELECT unit ...)`` reads the subquery's non-NULL units, and
  NOT IN drops a NULL outer unit (:mod:`dpsql.query.joins`);
* :func:`units_of_group` -- the number of units in a group, which thresholding compares with
  tau (noise-free: a key is released iff its units reach tau);
* :func:`empty_aggregate` -- what an aggregate over no rows, or only NULLs, releases
  (``COALESCE(SUM(x), 0)``: a released cell is always a number);
* :func:`empty_group` -- a public domain's key with no rows is released, its cells those of
  :func:`empty_aggregate` over no rows;
* :data:`AGGREGATE_RULES` -- per aggregate, the SQL it means (plain SQL's own by default;
  BigQuery's per-person ``PERSON_SUM`` and ``PERSON_AVG`` of :mod:`dpsql.audit.oracle_clause`
  per row where each row is its own unit, :func:`person_rows`; over several rows per unit
  :mod:`dpsql.audit.oracle_bounds` answers them, as every query where a bound bites).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import sqlglot
import sqlglot.errors
from sqlglot import exp

from dpsql.metadata.metadata import Metadata

#: Aggregates drawn by the exponential mechanism: noise-free is not exact for them (the
#: "approximate" class: their columns are not compared, see :mod:`dpsql.audit.oracle`).
APPROXIMATE = (exp.Median, exp.Quantile, exp.PercentileCont, exp.PercentileDisc, exp.Min,
               exp.Max, exp.ApproxQuantile, exp.ApproxQuantiles)


class PersonSum(exp.Expression, exp.AggFunc):
    """``PERSON_SUM(x, lo, hi)``: the sum over units of each unit's total of ``x`` in the
    group, clamped to ``[lo, hi]``; a unit with no non-NULL value contributes nothing
    (ZetaSQL's per-group SUM, :mod:`dpsql.audit.oracle_clause`)."""

    arg_types = {"this": True, "expressions": True}  # noqa: RUF012 (sqlglot's own shape)


class PersonAvg(exp.Expression, exp.AggFunc):
    """``PERSON_AVG(x[, lo, hi])``: the average over units of each unit's average of ``x``
    in the group (clamped to ``[lo, hi]``), over the units with a non-NULL value (ZetaSQL's
    AVG)."""

    arg_types = {"this": True, "expressions": False}  # noqa: RUF012


#: The per-person aggregates: answered on each unit's partials (:mod:`dpsql.audit.
#: oracle_bounds`), never by one GROUP BY.
PER_PERSON = {"PERSON_SUM": PersonSum, "PERSON_AVG": PersonAvg}


@dataclass(frozen=True)
class Release:
    """How the plan releases its groups: every key of ``domain``, those whose units reach
    ``tau``, or the one row of a global aggregate (both None)."""

    domain: tuple[tuple[object, ...], ...] | None
    tau: int | None
    bounded: bool  # the relation is bounded (not each row its own unit)


# ------------------------------------------------------------------------------- the rules


def read_value(value: object, lower: float | None, upper: float | None) -> object:
    """A stored value as every query reads it: NaN as NULL (``lower`` and ``upper`` are for
    readings that clamp; filters and keys read values as stored, :func:`clamped`)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def clamped(argument: exp.Expression, metadata: Metadata) -> exp.Expression:
    """An aggregate's argument and a group key read each bounded column clamped to its
    declared bounds (NULL stays NULL); filters (WHERE, ON, a FILTER clause) read it as
    stored."""
    bounds = {name: (c.lower, c.upper) for t in metadata.tables.values()
              for name, c in t.columns.items()
              if c.type in ("int", "float") and c.lower is not None and c.upper is not None}

    def clamp(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.name in bounds and \
                node.find_ancestor(exp.Subquery, exp.Exists) is None:
            lo, hi = bounds[node.name]
            return exp.Case(ifs=[exp.If(this=node.copy() < lo, true=exp.convert(lo)),
                                 exp.If(this=node.copy() > hi, true=exp.convert(hi))],
                            default=node.copy())
        return node

    return argument.transform(clamp)


def without_unit(unit: exp.Expression) -> exp.Expression:
    """The condition that keeps a row of a bounded relation: it reaches a unit."""
    return exp.Not(this=exp.Is(this=unit, expression=exp.Null()))


def units_of_group(unit: exp.Expression, bounded: bool) -> exp.Expression:
    """The units of a group: distinct units, or rows where each row is its own unit."""
    if not bounded:
        return exp.Count(this=exp.Star())
    return exp.Count(this=exp.Distinct(expressions=[unit.copy()]))


def empty_aggregate(node: exp.Expression) -> exp.Expression:
    """A SUM, COUNT_IF (and COUNT) over no rows or only NULLs releases 0, not NULL."""
    inner = node.this if isinstance(node, exp.Filter) else node
    if isinstance(inner, exp.Sum | exp.CountIf | exp.Count | PersonSum):
        return exp.Coalesce(this=node, expressions=[exp.Literal.number(0)])
    return node


def empty_group(node: exp.Expression, column: exp.Expression) -> exp.Expression:
    """A cell of a public domain's empty group: the aggregate over no rows (the rule of
    :func:`empty_aggregate`), NULL where that is NULL."""
    ruled = empty_aggregate(node)
    if ruled is node:
        return column
    return exp.Coalesce(this=column, expressions=[exp.Literal.number(0)])


#: Aggregates SQL leaves NULL over too few values (AVG over none, a sample VAR or STDDEV over
#: one) where a released cell is always a number (:func:`undefined_moment`).
MOMENTS = (exp.Avg, PersonAvg, exp.Stddev, exp.StddevSamp, exp.StddevPop, exp.Variance,
           exp.VariancePop)


def undefined_moment(reference: object) -> bool:
    """Whether a moment's reference value is SQL's NULL of too few values: dpsql releases a
    number there (the midpoint of the bounds for AVG, 0 for a spread), which any number
    matches (rule: a released cell is always a number; its value carries no information)."""
    return reference is None


def moment_columns(sql: str) -> list[bool]:
    """Per output column, whether it reads a moment (:data:`MOMENTS`)."""
    return [any(True for _ in e.find_all(*MOMENTS)) for e in _parse(sql).expressions]


def total(node: exp.Expression) -> exp.Expression:
    """Row-level SQL made total (:mod:`dpsql.query.total_expressions`): a division or modulo
    by zero is NULL (not an error, inf or NaN), a cast that fails is NULL."""
    if isinstance(node, exp.Div | exp.IntDiv | exp.Mod):
        divisor = exp.Nullif(this=node.expression.copy(), expression=exp.Literal.number(0))
        return node.__class__(this=node.this.copy(), expression=divisor)
    # A literal's cast is left to fail: a spelling DuckDB does not read (PostgreSQL's
    # '{20,30}'::int[]) then skips the case instead of reading NULL.
    if isinstance(node, exp.Cast) and not isinstance(node, exp.TryCast) and \
            not isinstance(node.this, exp.Literal):
        return exp.TryCast(this=node.this.copy(), to=node.args["to"].copy())
    if isinstance(node, exp.StrToTime):
        return exp.func("try_strptime", node.this.copy(), node.args["format"].copy())
    return node


def semi_join(node: exp.Expression) -> exp.Expression:
    """``outer [NOT] IN (SELECT unit ...)`` over the subquery's non-NULL units, and a NULL
    outer unit dropped by NOT IN too (:mod:`dpsql.query.joins`, "Semi- and anti-joins": the
    row's fate must not depend on whether anyone else's rows match)."""
    if isinstance(node, exp.In) and isinstance(node.args.get("query"), exp.Expression):
        query = node.args["query"]
        subquery = query.this if isinstance(query, exp.Subquery) else query
        if isinstance(subquery, exp.Select) and len(subquery.expressions) == 1:
            column = subquery.expressions[0].unalias().copy()
            query = query.copy()
            target = query.this if isinstance(query, exp.Subquery) else query
            target.where(exp.Not(this=exp.Is(this=column, expression=exp.Null())), copy=False)
            return exp.In(this=node.this.copy(), query=query)
    if isinstance(node, exp.Not) and isinstance(node.this, exp.In) and \
            node.this.args.get("query") is not None:
        outer = node.this.this.copy()
        return exp.and_(exp.Not(this=exp.Is(this=outer, expression=exp.Null())),
                        exp.Not(this=semi_join(node.this)))
    return node


def _plain(node: exp.Expression) -> exp.Expression:
    return node


def _row_clamp(x: exp.Expression, bounds: Sequence[exp.Expression]) -> exp.Expression:
    if not bounds:
        return x.copy()
    lo, hi = bounds
    return exp.Case(ifs=[exp.If(this=x.copy() < lo.copy(), true=lo.copy()),
                         exp.If(this=x.copy() > hi.copy(), true=hi.copy())], default=x.copy())


def person_rows(node: exp.Expression) -> exp.Expression:
    """A per-person aggregate (:data:`PER_PERSON`) where each row is its own unit (a
    ``one_row_per_unit`` table): the unit's total or average is its row, clamped; a NULL row
    adds nothing. Over several rows per unit, :mod:`dpsql.audit.oracle_bounds` answers it."""
    inner = node.this if isinstance(node, exp.Filter) else node
    kind = exp.Sum if isinstance(inner, PersonSum) else exp.Avg
    call = kind(this=_row_clamp(inner.this, inner.expressions))
    if isinstance(node, exp.Filter):
        return exp.Filter(this=call, expression=node.expression.copy())
    return call


#: Aggregate class -> the SQL it means in the reference (the argument already read by
#: :func:`read_value`). Plain SQL's meaning unless listed.
AGGREGATE_RULES: dict[type[exp.Expression], Callable[[exp.Expression], exp.Expression]] = {
    PersonSum: person_rows, PersonAvg: person_rows}


# ---------------------------------------------------------------------- the split in SQL


def _aggregates(select: exp.Select) -> list[exp.Expression]:
    """The aggregates of ``select``'s own select list, HAVING and ORDER BY (a FILTER clause
    with its aggregate; not a window's own function, not inside a subquery)."""
    found: list[exp.Expression] = []
    parts = [*select.expressions, select.args.get("having"), select.args.get("order"),
             select.args.get("qualify")]
    for part in parts:
        if part is None:
            continue
        for node in part.find_all(exp.AggFunc):
            if isinstance(node.parent, exp.Window) or node.parent_select is not select:
                continue
            if any(isinstance(a, exp.AggFunc) and not isinstance(a.parent, exp.Window)
                   for a in _ancestors(node, part)):
                continue
            target = node.parent if isinstance(node.parent, exp.Filter | exp.WithinGroup) \
                else node
            if not any(target is f for f in found):
                found.append(target)
    return found


def _ancestors(node: exp.Expression, top: exp.Expression) -> Iterable[exp.Expression]:
    parent = node.parent
    while parent is not None and parent is not top:
        yield parent
        parent = parent.parent
    if parent is top:
        yield top


def _keys(select: exp.Select) -> list[exp.Expression]:
    """The GROUP BY keys as expressions (ordinals and select aliases resolved); the select
    list of a DISTINCT without GROUP BY."""
    group = select.args.get("group")
    if group is not None and group.args.get("all"):
        return [e.unalias() for e in select.expressions
                if not any(True for _ in e.find_all(exp.AggFunc))]
    if group is None:
        return [e.unalias() for e in select.expressions] if select.args.get("distinct") else []
    aliases = {e.alias: e.unalias() for e in select.expressions if isinstance(e, exp.Alias)}
    out = []
    for key in group.expressions:
        if isinstance(key, exp.Literal) and key.is_int:
            out.append(select.expressions[int(key.this) - 1].unalias())
        elif isinstance(key, exp.Column) and not key.table and key.name in aliases:
            out.append(aliases[key.name])
        else:
            out.append(key)
    return out


def approximate(sql: str) -> bool:
    """Whether ``sql`` asks for an aggregate of the exponential mechanism."""
    return any(True for _ in _parse(sql).find_all(*APPROXIMATE))


def approximate_columns(sql: str) -> list[bool]:
    """Per output column, whether it depends on an aggregate of the exponential mechanism."""
    select = _parse(sql)
    return [any(True for _ in e.find_all(*APPROXIMATE)) for e in select.expressions]


def order_is_approximate(sql: str) -> bool:
    """Whether HAVING, ORDER BY or a window reads an approximate aggregate."""
    select = _parse(sql)
    parts = [select.args.get("having"), select.args.get("order"),
             *(w for e in select.expressions for w in e.find_all(exp.Window))]
    return any(p is not None and any(True for _ in p.find_all(*APPROXIMATE)) for p in parts)


def having_is_approximate(sql: str) -> bool:
    """Whether HAVING or QUALIFY reads an approximate aggregate: which groups pass is then
    itself approximate, so the rows are not compared (their number may differ either way)."""
    select = _parse(sql)
    parts = [select.args.get("having"), select.args.get("qualify")]
    return any(p is not None and any(True for _ in p.find_all(*APPROXIMATE)) for p in parts)


def sort_columns(sql: str) -> list[int] | None:
    """The output columns ORDER BY sorts by (ordinals, aliases, or select items repeated);
    None without ORDER BY or when it sorts by anything else."""
    select = _parse(sql)
    order = select.args.get("order")
    if order is None:
        return None
    items = [e.unalias() for e in select.expressions]
    aliases = [e.alias for e in select.expressions]
    out = []
    for o in order.expressions:
        key = o.this
        if isinstance(key, exp.Literal) and key.is_int:
            out.append(int(key.this) - 1)
        elif isinstance(key, exp.Column) and not key.table and key.name in aliases:
            out.append(aliases.index(key.name))
        elif any(key == i for i in items):
            out.append(next(n for n, i in enumerate(items) if key == i))
        else:
            return None
    return out


class NotModelled(ValueError):
    """A query the reference model does not read (not one plain SELECT): not compared."""


def _parse(sql: str) -> exp.Select:
    try:
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except sqlglot.errors.SqlglotError as e:
        raise NotModelled(f"not DuckDB SQL: {e}") from None
    if len(trees) != 1 or not isinstance(trees[0], exp.Select):
        raise NotModelled("not one SELECT")
    return trees[0].transform(_person)  # type: ignore[return-value]


def _person(node: exp.Expression) -> exp.Expression:
    """A per-person aggregate's call (PERSON_SUM, PERSON_AVG) as its class."""
    if isinstance(node, exp.Anonymous) and str(node.this).upper() in PER_PERSON:
        args = node.expressions
        return PER_PERSON[str(node.this).upper()](this=args[0].copy(),
                                                  expressions=[a.copy() for a in args[1:]])
    return node


def per_person(sql: str) -> bool:
    """Whether ``sql`` (its plain form) asks for a per-person aggregate."""
    return any(True for _ in _parse(sql).find_all(PersonSum, PersonAvg))


def unit_expression(select: exp.Select, metadata: Metadata) -> exp.Expression | None:
    """The privacy unit of ``select``'s rows: COALESCE of every private table's unit in its
    FROM (a ``unit_path`` table's through its path's target), None with no private table."""
    ctes = {c.alias: c.this for c in select.find_all(exp.CTE)}
    units: list[exp.Expression] = []
    sources = [select.args.get("from_"), *select.args.get("joins", [])]
    for source in sources:
        node = source.this if source is not None else None
        table = _table_of(node, ctes)
        if node is None or table is None:
            continue
        alias = node.alias_or_name
        declared = metadata.table(table)
        if declared is None or declared.public:
            continue
        if declared.privacy_unit is not None:
            units.append(exp.column(declared.privacy_unit, table=alias))
        elif declared.unit_path is not None:
            column, target, target_column = declared.unit_path
            unit = metadata.tables[target].privacy_unit
            units.append(exp.Subquery(this=sqlglot.select(exp.column(unit, table="__t"))
                                      .from_(exp.to_table(target).as_("__t"))
                                      .where(exp.column(target_column, table="__t").eq(
                                          exp.column(column, table=alias))).limit(1)))
    if not units:
        return None
    return units[0] if len(units) == 1 else exp.Coalesce(this=units[0], expressions=units[1:])


def _table_of(node: exp.Expression | None, ctes: dict[str, exp.Expression]) -> str | None:
    """The declared table a FROM item reads: a table, a CTE or subquery ``SELECT * FROM t``."""
    if isinstance(node, exp.Table):
        if node.name in ctes:
            return _table_of(ctes[node.name].args.get("from_").this, ctes)  # type: ignore[union-attr]
        return node.name
    if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select):
        inner = node.this.args.get("from_")
        return _table_of(inner.this if inner is not None else None, ctes)
    return None


def reference_sql(sql: str, metadata: Metadata, release: Release) -> str:
    """The reference query of ``sql`` (module docstring), in DuckDB's dialect."""
    select = _parse(sql)
    keys = _keys(select)
    aggregates = _aggregates(select)
    unit = unit_expression(select, metadata)
    inner = grouped_rows(select, keys, unit, metadata)
    read_keys = [clamped(k.copy(), metadata) for k in keys]  # keys read clamped too
    columns: list[exp.Expression] = [k.as_(f"__k{i}") for i, k in enumerate(read_keys)]
    for j, a in enumerate(aggregates):
        columns.append(_meant(a, metadata).as_(f"__a{j}"))
    if release.tau is not None and unit is not None:
        columns.append(units_of_group(unit, release.bounded).as_("__units"))
    inner.set("expressions", columns)
    if keys:
        inner.set("group", exp.Group(expressions=[k.copy() for k in read_keys]))
    inner = inner.transform(_semi_joins).transform(total)
    return outer_sql(select, keys, aggregates, unit is not None, release, inner).sql("duckdb")


def grouped_rows(select: exp.Select, keys: Sequence[exp.Expression],
                 unit: exp.Expression | None, metadata: Metadata) -> exp.Select:
    """``select`` without its outer part (HAVING, ORDER BY, LIMIT, ...), its rows those that
    reach a unit (:func:`without_unit`): the grouped part's FROM and WHERE."""
    inner = select.copy()
    for arg in ("having", "order", "limit", "offset", "distinct", "qualify", "group"):
        inner.set(arg, None)
    inner.set("with", None)
    if unit is not None:  # a row without a unit is read by no path, bounded or not
        inner = inner.where(without_unit(unit.copy()))
    return inner


def outer_sql(select: exp.Select, keys: Sequence[exp.Expression],
              aggregates: Sequence[exp.Expression], has_unit: bool, release: Release,
              inner: exp.Select, extra: Sequence[exp.Expression] = ()) -> exp.Select:
    """The outer part of ``select`` over the grouped part ``inner`` (columns ``__k{i}``,
    ``__a{j}``, ``__units``), with the rules of key release; ``extra`` columns after the
    query's own (read from the grouped part's ``__g``)."""
    source, key_ref, agg_ref, join = _released(inner, keys, aggregates, release)
    outer = exp.Select()
    if select.args.get("with") is not None:
        outer.set("with", select.args["with"].copy())
    projections = []
    for i, e in enumerate(select.expressions):
        replaced = _replace(e.unalias().copy(), keys, aggregates, key_ref, agg_ref)
        projections.append(replaced.as_(e.alias or f"__c{i}"))
    outer.set("expressions", [*projections, *extra])
    outer.set("from_", exp.From(this=source))
    if join is not None:
        outer.set("joins", [join])
    where = []
    if release.tau is not None and has_unit:
        where.append(exp.column("__units", table="__g") >= release.tau)
    if release.domain is not None and keys and not release.domain:
        where.append(exp.false())  # a domain narrowed to nothing: no group is released
    if select.args.get("having") is not None:
        where.append(_replace(select.args["having"].this.copy(), keys, aggregates, key_ref,
                              agg_ref))
    if where:
        outer.set("where", exp.Where(this=exp.and_(*where)))
    for arg in ("order", "qualify"):
        if select.args.get(arg) is not None:
            outer.set(arg, _replace(select.args[arg].copy(), keys, aggregates, key_ref,
                                    agg_ref))
    outer.set("distinct", select.args.get("distinct"))
    for arg in ("limit", "offset"):
        if select.args.get(arg) is not None:
            outer.set(arg, select.args[arg].copy())
    return outer


def _semi_joins(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Not) or (isinstance(node, exp.In) and
                                     not isinstance(node.parent, exp.Not)):
        return semi_join(node)
    return node


def _meant(aggregate: exp.Expression, metadata: Metadata) -> exp.Expression:
    aggregate = read_arguments(aggregate, metadata)
    inner = aggregate.this if isinstance(aggregate, exp.Filter | exp.WithinGroup) else \
        aggregate
    rule = AGGREGATE_RULES.get(type(inner), _plain)
    return empty_aggregate(aggregate) if rule is _plain else \
        exp.Coalesce(this=rule(aggregate), expressions=[exp.Literal.number(0)]) \
        if isinstance(inner, PersonSum) else rule(aggregate)


def read_arguments(aggregate: exp.Expression, metadata: Metadata) -> exp.Expression:
    """A copy of ``aggregate`` whose arguments read bounded columns :func:`clamped`."""
    aggregate = aggregate.copy()
    inner = aggregate.this if isinstance(aggregate, exp.Filter | exp.WithinGroup) else \
        aggregate
    for arg in ("this", "expressions"):  # the arguments, not a FILTER's condition
        value = inner.args.get(arg)
        if isinstance(value, exp.Expression):
            inner.set(arg, clamped(value, metadata))
        elif isinstance(value, list):
            inner.set(arg, [clamped(v, metadata) for v in value])
    if isinstance(aggregate, exp.WithinGroup):  # PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x)
        aggregate.set("expression", clamped(aggregate.expression, metadata))
    return aggregate


Ref = Callable[[int], exp.Expression]


def _released(inner: exp.Select, keys: Sequence[exp.Expression],
              aggregates: Sequence[exp.Expression], release: Release
              ) -> tuple[exp.Expression, Ref, Ref, exp.Join | None]:
    """The grouped part as the outer part's FROM, with the rule of key release: a public
    domain's every key (FULL JOIN: a group outside the domain still shows), thresholded keys
    (the WHERE on ``__units``), or the one row of a global aggregate."""
    grouped = exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("__g")))
    if release.domain is None or not keys:
        return (grouped, lambda i: exp.column(f"__k{i}", table="__g"),
                lambda j: exp.column(f"__a{j}", table="__g"), None)
    names = [exp.to_identifier(f"__k{i}") for i in range(len(keys))]
    rows = release.domain or [tuple(None for _ in keys)]  # an empty domain: see reference_sql
    values = exp.Values(expressions=[exp.Tuple(expressions=[exp.convert(v) for v in row])
                                     for row in rows],
                        alias=exp.TableAlias(this=exp.to_identifier("__d"), columns=names))
    on = exp.and_(*(exp.NullSafeEQ(this=exp.column(f"__k{i}", table="__d"),
                                   expression=exp.column(f"__k{i}", table="__g"))
                    for i in range(len(keys))))
    join = exp.Join(this=grouped, on=on, kind="FULL")
    return (values, lambda i: exp.Coalesce(this=exp.column(f"__k{i}", table="__d"),
                                           expressions=[exp.column(f"__k{i}", table="__g")]),
            lambda j: empty_group(aggregates[j], exp.column(f"__a{j}", table="__g")), join)


def _replace(node: exp.Expression, keys: Sequence[exp.Expression],
             aggregates: Sequence[exp.Expression], key_ref: Ref, agg_ref: Ref
             ) -> exp.Expression:
    """``node`` with each aggregate and then each key replaced by its column."""
    def swap(n: exp.Expression) -> exp.Expression:
        for j, a in enumerate(aggregates):
            if n == a:
                return agg_ref(j)
        return n

    def swap_key(n: exp.Expression) -> exp.Expression:
        for i, k in enumerate(keys):
            if n == k:
                return key_ref(i)
        return n

    return node.transform(swap).transform(swap_key)
