"""Pass 3, check: split the bound query into its private part and its post-processing part.

The private part is what touches rows: the WHERE filter, the GROUP BY keys and the argument of
each aggregate, all row-level expressions on the allow list of :mod:`dpsql.query.bounds`. The
post-processing part is the rest of the SELECT (outer expressions, HAVING, ORDER BY, LIMIT,
windows over aggregates) rewritten to read only placeholder columns: ``__k{i}`` for the i-th
group key and ``__a{j}`` for the j-th noisy aggregate. A private column that is left over in the
post-processing part is refused: it would reach the output without noise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from sqlglot import exp

from dpsql.errors import (
    ForbiddenFunction,
    KeyReleaseRefused,
    NestedAggregate,
    NonAggregatedColumn,
    QueryRefused,
    UnsupportedAggregate,
    UnsupportedQuery,
    WindowOverPrivateRows,
)
from dpsql.metadata.metadata import Table
from dpsql.query.aggregate_calls import AggregateCall, kind_of
from dpsql.query.bind import BoundQuery
from dpsql.query.bounds import bound, condition
from dpsql.query.bounds.core import literal_value
from dpsql.query.dates import written
from dpsql.query.denied import RANDOM, denied
from dpsql.query.dp_clause import AVG_PER_GROUP, SUM_PER_GROUP
from dpsql.query.joins import Relation

SUPPORTED = ("COUNT(*), COUNT(x), COUNT(DISTINCT x), COUNT_IF, SUM, AVG, VAR/VARIANCE/VAR_SAMP/"
             "VAR_POP, STDDEV/STDDEV_SAMP/STDDEV_POP, MEDIAN, QUANTILE_CONT/PERCENTILE_CONT, "
             "MIN, MAX")
# The quantile that MEDIAN, MIN and MAX stand for.
_FIXED_QUANTILES: dict[type, float] = {exp.Median: 0.5, exp.Min: 0.0, exp.Max: 1.0}
# DuckDB aggregates that sqlglot does not know (it parses them as anonymous functions): refused
# as aggregates, so that the message names the aggregate rather than a bare column.
_OTHER_AGGREGATES = {"MEAN", "PRODUCT", "HISTOGRAM", "FSUM", "KAHAN_SUM", "SUMKAHAN", "FAVG",
                     "ENTROPY", "KURTOSIS_POP", "MAD", "BITSTRING_AGG", "QUANTILE_DISC",
                     "RESERVOIR_QUANTILE", "ARBITRARY", "BOOL_OR", "GEOMEAN", "GEOMETRIC_MEAN",
                     "WEIGHTED_AVG", "AVG_WEIGHTED", "SEM"}


@dataclass
class CheckedQuery:
    table: Table
    where: exp.Expression | None
    keys: list[exp.Expression]
    aggregates: list[AggregateCall]
    outer: exp.Select  # reads __k{i} and __a{j} from the table of noisy cells
    output_names: list[str]
    relation: Relation | None = None  # joins: ``table`` is the joined table (dpsql.query.joins)
    # A query over this one's answer, run after ``outer`` (dpsql.query.over_released), and the
    # names of ``outer``'s columns, which it reads.
    post: exp.Select | None = None
    released_names: list[str] | None = None


def check(query: BoundQuery) -> CheckedQuery:
    """Check the bound query and separate the private part from post-processing."""
    select, table = query.select.copy(), query.table
    if select.args.get("windows"):
        raise UnsupportedQuery("named WINDOW clauses are not supported; write OVER (...) inline")
    if query.where is not None:
        check_condition(query.where, table, "WHERE")
    for on in query.relation.conditions() if query.relation is not None else []:
        check_condition(on, table, "ON")
    keys = _group_keys(select, table)
    aggregates: list[AggregateCall] = []
    for key in ("expressions", "having", "order", "qualify"):
        _replace_in(select, key, lambda n: _extract_aggregate(n, table, aggregates))
    placeholders = {k.sql(dialect="duckdb"): f"__k{i}" for i, k in enumerate(keys)}
    for key in ("expressions", "having", "order", "qualify") if placeholders else ():
        # (each node written to be looked up: with no GROUP BY key, none is replaced)
        _replace_in(select, key, lambda n: _key_placeholder(n, placeholders))
    if not aggregates and not keys:
        window = select.find(exp.Window)
        if window is not None:  # no aggregate: the window would run over the private rows
            raise WindowOverPrivateRows(
                f"{written(window)} runs over private rows; dpsql answers "
                "aggregate queries, and a window may only read aggregates and GROUP BY keys")
        raise NonAggregatedColumn(_no_aggregate_message(select))
    _check_outer(select)
    select.set("group", None)
    return CheckedQuery(table=table, where=query.where, keys=keys, aggregates=aggregates,
                        outer=select, output_names=query.output_names, relation=query.relation,
                        post=query.post, released_names=query.released_names)


def check_condition(node: exp.Expression, table: Table, where: str) -> None:
    """Refuse the filter ``node`` (a WHERE or ON condition) unless it is row-level and boolean:
    text in a filter would be cast to BOOLEAN row by row. The checker's only reads of a
    filter's constants (:mod:`dpsql.routes.templates` re-runs it on a reused plan's new ones)."""
    _row_level(node, table, where)
    condition(node, table)


def _row_level(node: exp.Expression, table: Table, where: str) -> None:
    for sub in node.find_all(exp.AggFunc, exp.Window):
        kind = WindowOverPrivateRows if isinstance(sub, exp.Window) else UnsupportedQuery
        raise kind(f"{where} cannot contain {written(sub)}; filter rows with "
                   "row-level predicates and put conditions on aggregates in HAVING")
    bound(node, table)


def _group_keys(select: exp.Select, table: Table) -> list[exp.Expression]:
    group = select.args.get("group")
    items = list(group.expressions) if group is not None else []
    if group is not None and group.args.get("all"):
        items = [e for e in select.expressions if not e.find(exp.AggFunc)]
    if not items and select.args.get("distinct") and not any(
            e.find(exp.AggFunc) for e in select.expressions):
        items = list(select.expressions)  # SELECT DISTINCT a, b is GROUP BY a, b
        select.set("distinct", None)
    keys: list[exp.Expression] = []
    for item in items:
        if isinstance(item, exp.GroupingSets | exp.Rollup | exp.Cube):
            raise UnsupportedQuery(
                f"GROUP BY {written(item)} is not supported; ask one GROUP BY "
                "per grouping instead")
        key = _resolve_key(item, select)
        _row_level(key, table, "GROUP BY")
        units = {*table.unit_columns, table.privacy_unit}
        unit = next((c for c in key.find_all(exp.Column) if c.name.lower() in units), None)
        if unit is not None:
            raise KeyReleaseRefused(
                f"GROUP BY {written(key)} groups by the privacy unit "
                f"{written(unit).lower()!r}: every group would be one person. Group by a "
                "coarser column instead")
        if key.sql(dialect="duckdb") not in {k.sql(dialect="duckdb") for k in keys}:
            keys.append(key)
    return keys


def _resolve_key(item: exp.Expression, select: exp.Select) -> exp.Expression:
    """GROUP BY 2 and GROUP BY alias name a select item; return its expression."""
    if isinstance(item, exp.Literal) and item.is_int:
        position = int(item.this)
        if not 1 <= position <= len(select.expressions):
            raise UnsupportedQuery(f"GROUP BY {position} is out of range: the SELECT list has "
                                   f"{len(select.expressions)} items")
        item = select.expressions[position - 1]
    elif isinstance(item, exp.Column) and not item.table:
        for projection in select.expressions:
            if isinstance(projection, exp.Alias) and projection.alias.lower() == item.name:
                item = projection
                break
    item = item.this if isinstance(item, exp.Alias) else item
    if item.find(exp.AggFunc):
        raise NestedAggregate(f"GROUP BY {written(item)} contains an aggregate; "
                              "group by row-level expressions only")
    return item.copy()


def _replace_in(select: exp.Select, key: str, fn: object) -> None:
    node = select.args.get(key)
    if node is None:
        return
    if isinstance(node, list):
        select.set(key, [n.transform(fn, copy=False) for n in node])
    else:
        select.set(key, node.transform(fn, copy=False))


def _extract_aggregate(node: exp.Expression, table: Table,
                       found: list[AggregateCall]) -> exp.Expression:
    condition = None
    call = node
    if isinstance(node, exp.Filter):
        call, condition = node.this, node.expression.this
    if not _is_aggregate(call) or isinstance(node.parent, exp.Window | exp.Filter):
        return node
    if isinstance(node.parent, exp.WithinGroup):
        return node  # handled with the WITHIN GROUP node itself
    aggregate = _aggregate_call(node, call, condition, table, len(found))
    for existing in found:
        if (existing.kind, existing.arg, existing.distinct, existing.quantile,
                existing.per_group, existing.per_person) == (
                    aggregate.kind, aggregate.arg, aggregate.distinct, aggregate.quantile,
                    aggregate.per_group, aggregate.per_person):
            return exp.column(existing.placeholder)
    found.append(aggregate)
    return exp.column(aggregate.placeholder)


def is_aggregate(node: exp.Expression) -> bool:
    """Whether ``node`` is an aggregate call, as the checker reads it (the local path's test of
    a row-level query too: :mod:`dpsql.execution.local_rows`)."""
    return _is_aggregate(node)


def _is_aggregate(node: exp.Expression) -> bool:
    if isinstance(node, exp.WithinGroup):
        return True
    if isinstance(node, exp.Anonymous):
        return kind_of(node) is not None or str(node.this).upper() in _OTHER_AGGREGATES
    return isinstance(node, exp.AggFunc)


def _aggregate_call(node: exp.Expression, call: exp.Expression,
                    condition: exp.Expression | None, table: Table, index: int) -> AggregateCall:
    text = written(node)
    kind, arg, quantile = _kind_and_arg(call, text)
    distinct = isinstance(arg, exp.Distinct)
    if isinstance(arg, exp.Distinct):  # i.e. `if distinct`, spelled so that mypy narrows arg
        if len(arg.expressions) != 1 or kind != "count":
            raise UnsupportedAggregate(f"{text}: DISTINCT is supported in COUNT(DISTINCT x) "
                                       "only, with one expression")
        arg = arg.expressions[0]
    if arg is not None:
        for sub in arg.find_all(exp.AggFunc, exp.Window):
            error = NestedAggregate if isinstance(sub, exp.AggFunc) else WindowOverPrivateRows
            raise error(f"{text} contains {written(sub)}; aggregates cannot be "
                        "nested and windows cannot run over private rows")
        if isinstance(arg, exp.Star):
            arg = None
    if arg is None and kind != "count":
        raise UnsupportedAggregate(f"{text}: only COUNT takes *; give {kind.split('_')[0].upper()}"
                                   " a column or an expression, e.g. SUM(amount)")
    if condition is not None:
        _row_level(condition, table, "FILTER (WHERE ...)")
        value = arg if arg is not None else exp.Literal.number(1)
        arg = exp.Case(ifs=[exp.If(this=condition.copy(), true=value.copy())])
    if arg is not None:
        bound(arg, table)  # the allow list for row-level expressions
    return AggregateCall(kind=kind, arg=arg, distinct=distinct, quantile=quantile, text=text,
                         placeholder=f"__a{index}", per_group=_per_group(call, text),
                         per_person=_function_name(call) == AVG_PER_GROUP)


def _per_group(call: exp.Expression, text: str) -> tuple[float, float] | None:
    """BigQuery's ``contribution_bounds_per_group => (lo, hi)`` of a SUM or an AVG
    (:data:`dpsql.query.dp_clause.SUM_PER_GROUP`, ``AVG_PER_GROUP``): its two number literals,
    or None for any other call (and ZetaSQL's AVG without bounds, ``AVG_PER_GROUP(x)``)."""
    name = _function_name(call)
    if name not in (SUM_PER_GROUP, AVG_PER_GROUP):
        return None
    if name == AVG_PER_GROUP and len(call.expressions) == 1:
        return None
    values = [_number(a) for a in call.expressions[1:]]
    if len(call.expressions) != 3 or None in values:
        raise UnsupportedAggregate(f"{text}: contribution_bounds_per_group => (lower, upper) "
                                   "takes two numbers")
    lo, hi = cast(list[float], values)
    return lo, hi


def _function_name(call: exp.Expression) -> str | None:
    return str(call.this).upper() if isinstance(call, exp.Anonymous) else None


def _number(node: exp.Expression) -> float | None:
    negative = isinstance(node, exp.Neg)
    inner = node.this if negative else node
    if not (isinstance(inner, exp.Literal) and not inner.is_string):
        return None
    return -float(inner.this) if negative else float(inner.this)


def _kind_and_arg(call: exp.Expression, text: str
                  ) -> tuple[str, exp.Expression | None, float | None]:
    if isinstance(call, exp.WithinGroup):
        inner, order = call.this, call.expression
        if not isinstance(inner, exp.PercentileCont) or not order.expressions:
            raise UnsupportedAggregate(f"{text} is not supported; use PERCENTILE_CONT(q) "
                                       "WITHIN GROUP (ORDER BY x)")
        return "quantile", order.expressions[0].this, _fraction(inner.this, text)
    if isinstance(call, exp.Anonymous):
        anonymous_kind = kind_of(call)
        if anonymous_kind is None:
            raise UnsupportedAggregate(
                f"{text}: {str(call.this).upper()} has no differentially private implementation "
                f"here; supported aggregates: {SUPPORTED}")
        args = call.expressions
        q = _fraction(args[1], text) if anonymous_kind == "quantile" and len(args) > 1 else None
        return anonymous_kind, args[0] if args else None, q
    kind = kind_of(call)
    if kind is None:
        # _is_aggregate: neither WITHIN GROUP nor an anonymous function, so an exp.AggFunc
        assert isinstance(call, exp.Func)
        raise UnsupportedAggregate(
            f"{text}: {call.sql_name()} has no differentially private implementation here; "
            f"supported aggregates: {SUPPORTED}")
    if isinstance(call, exp.CountIf):
        return "count", exp.Case(ifs=[exp.If(this=call.this.copy(),
                                             true=exp.Literal.number(1))]), None
    quantile = None
    if kind == "quantile":
        quantile = _FIXED_QUANTILES.get(type(call))
        if quantile is None:
            fraction = call.args.get("quantile") or call.args.get("expression")
            if isinstance(fraction, exp.Order):  # QUANTILE_CONT(x, q ORDER BY x): the order
                fraction = fraction.this  # is irrelevant (sqlglot's text of WITHIN GROUP)
            if fraction is None:
                raise UnsupportedAggregate(f"{text}: give the quantile, e.g. "
                                           "QUANTILE_CONT(x, 0.9)")
            quantile = _fraction(fraction, text)
    if isinstance(call, exp.Min | exp.Max) and call.expressions:
        raise UnsupportedAggregate(f"{text}: MIN/MAX take one argument")
    return kind, call.this, quantile


def _fraction(node: exp.Expression, text: str) -> float:
    if isinstance(node, exp.Literal) and not node.is_string and 0 <= float(node.this) <= 1:
        return float(node.this)
    raise UnsupportedAggregate(f"{text}: the quantile must be a number literal from 0 to 1")


def _key_placeholder(node: exp.Expression, placeholders: dict[str, str]) -> exp.Expression:
    if isinstance(node, exp.Column) and node.name.startswith("__"):
        return node
    name = placeholders.get(node.sql(dialect="duckdb")) if isinstance(node, exp.Expression) \
        else None
    return exp.column(name) if name else node


def _check_outer(select: exp.Select) -> None:
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    for key in ("expressions", "having", "order", "qualify"):
        node = select.args.get(key)
        for part in node if isinstance(node, list) else [node] if node is not None else []:
            _check_outer_part(part, key, aliases)


def _check_outer_part(node: exp.Expression, clause: str, aliases: set[str]) -> None:
    for sub in node.walk():
        private = isinstance(sub, exp.Star) or (
            isinstance(sub, exp.Column) and not sub.name.startswith("__")
            and not (clause != "expressions" and sub.name.lower() in aliases))
        if private and (window := sub.find_ancestor(exp.Window)) is not None:
            raise WindowOverPrivateRows(
                f"{written(window)} runs over private rows; "
                "a window may only read aggregates and GROUP BY keys, as in "
                "SUM(COUNT(*)) OVER ()")
        if isinstance(sub, exp.Star):
            raise NonAggregatedColumn("SELECT * would release private rows; select aggregates "
                                      "such as COUNT(*) and GROUP BY keys")
        if isinstance(sub, exp.Column) and not sub.name.startswith("__"):
            if clause != "expressions" and sub.name.lower() in aliases:
                continue
            raise NonAggregatedColumn(
                f"column {written(sub)} appears outside an aggregate; aggregate it "
                f"(for example AVG({written(sub)})) or add it to GROUP BY")
        name = function_name(sub)
        # Not even in the post-processing query over noisy cells (dpsql.query.denied), nor the
        # engine's random numbers there.
        if denied(name) or name in RANDOM:
            raise ForbiddenFunction(f"function {name}() is not allowed in dpsql queries")


def function_name(node: exp.Expr) -> str | None:
    """The upper-case name of a function call (also of one sqlglot does not know), else None."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).upper()
    if isinstance(node, exp.Func):
        return node.sql_name().upper()
    return None


def _no_aggregate_message(select: exp.Select) -> str:
    if any(e.find(exp.Star) for e in select.expressions):
        return ("SELECT * would release private rows; dpsql answers aggregate queries: select "
                "aggregates such as COUNT(*) or AVG(age), with GROUP BY keys")
    first = written(select.expressions[0]) if select.expressions else "?"
    return (f"the query releases {first} without aggregating it; dpsql answers aggregate "
            "queries: use COUNT, SUM, AVG, ... and GROUP BY")


def refuse_float_overflow(expressions: Iterable[exp.Expression | None], table: Table,
                          engine: str) -> None:
    """For an engine that raises where DOUBLE arithmetic overflows (its
    ``raises_on_float_overflow``; DuckDB and Spark give Infinity, which the clamps handle),
    every such operation of the private part must have a finite bound, derived from the
    declared bounds (:mod:`dpsql.query.bounds`); otherwise the query is refused before any charge,
    naming the expression: an error on some rows only would tell whether they exist.

    A division needs no bound of its own when it divides a finite dividend by an integer: the
    rewrite NULLs a zero divisor, so ``|divisor| >= 1`` and ``|quotient| <= |dividend|``.
    ``//`` of a double divides as ``/`` (DuckDB's semantics, made so by
    :func:`dpsql.query.total_expressions.total`); ``ROUND(x, d)`` of a double multiplies ``x``
    by ``10^d`` first (:func:`~dpsql.query.total_expressions.round_digits`): that product
    needs a finite bound too."""
    for expression in expressions:
        if expression is None:
            continue
        for node in expression.find_all(exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv,
                                        exp.Pow, exp.Round):
            try:
                computed = _computed(cast(exp.Expression, node), table)
                if computed is None:
                    continue
                b = bound(computed, table)
                if isinstance(node, exp.Div | exp.IntDiv) and not b.finite and \
                        _int_divisor(node, table):
                    continue
            except QueryRefused:
                continue
            if b.kind == "float" and not b.finite:
                raise UnsupportedQuery(
                    f"on {engine}, {written(node)} could overflow a double (its "
                    "range cannot be bounded from the declared bounds); declare lower and upper "
                    "bounds on its columns, or compute with smaller constants")


def _computed(node: exp.Expression, table: Table) -> exp.Expression | None:
    """The arithmetic the engine computes for ``node`` whose bound must be finite, None when
    it cannot overflow: ``ROUND(x, d)`` of a double with ``d > 0`` computes ``x * 10^d`` (the
    ROUND's own bound, multiples of ``10^-d`` next to ``x``, hides that), with ``d < 0``
    ``round(x / 10^-d) * 10^-d`` (its own bound); ``ROUND(x)`` rounds in place."""
    if not isinstance(node, exp.Round):
        return node
    digits = node.args.get("decimals")
    places = 0 if digits is None else int(literal_value(digits, "ROUND's number of digits"))
    if places == 0:
        return None
    if places < 0 or bound(node.this, table).kind != "float":
        return node
    return exp.Mul(this=node.this.copy(), expression=exp.Literal.number(f"1e{places}"))


def _int_divisor(node: exp.Div | exp.IntDiv, table: Table) -> bool:
    dividend, divisor = bound(node.this, table), bound(node.expression, table)
    return divisor.kind in ("int", "bool") and dividend.finite
