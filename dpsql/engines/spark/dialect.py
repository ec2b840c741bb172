"""Spark's spelling of the engine IR (:mod:`dpsql.engines.ir`) and of the rewritten query (a
DuckDB-flavoured sqlglot tree), with the same total, error-free semantics (design section
"Engines": where an engine differs, the engine's dialect compensates).

:func:`spark_tree` restructures the query (histograms, exact sums, QUALIFY);
:class:`SparkDialect` spells the IR nodes (``TRANSFORMS``) and fixes the few operations whose
Spark semantics differ (:func:`_node`, in ``preprocess``);
:class:`dpsql.engines.spark.engine.SparkEngine` generates its text and runs it in **ANSI mode**
(``spark.sql.ansi.enabled = true``, Spark 4's default, set deliberately). Each difference,
and what this module does about it:

* **Overflow.** ANSI Spark raises on integer overflow and on a DECIMAL sum beyond 38 digits;
  non-ANSI Spark wraps integers silently and turns decimal overflow into NULL. The rewrite
  keeps every row-level value inside BIGINT or DOUBLE (:mod:`dpsql.query.bounds`), so nothing
  overflows; ANSI mode is the second wall: a bug fails loudly (the analyst gets the generic
  EngineFailure, the owner the detail) instead of releasing a wrapped sum whose sensitivity is
  wrong. DuckDB sums integers into HUGEINT; Spark's SUM of BIGINT is a BIGINT, so every integer
  SUM of the final SELECT is made exact here, as the rewrite's SUMs inside CTEs
  (:class:`~dpsql.engines.ir.ExactSum`) are: three BIGINT sums of the terms' 21-bit slices,
  joined in DECIMAL(38, 0) once per group (:func:`_exact_sum`; exact below 2^42 rows a group,
  beyond which ANSI raises), not a DECIMAL(38, 0) sum, which Spark adds as Java BigDecimals
  (2-3x the whole query's time). :class:`~dpsql.engines.ir.ExactInteger` is DECIMAL(38, 0).
* **Casts.** sqlglot writes ``TRY_CAST`` as ``CAST`` for Spark (right only without ANSI);
  here every :class:`~dpsql.engines.ir.SafeCast` (and TryCast) is a ``TRY_CAST`` (Spark 3.4+),
  NULL where the value does not convert.
* **Division by zero** is NULL already (``NULLIF(divisor, 0)``); integer division ``//`` is
  Spark's ``DIV``, which truncates towards zero as DuckDB's does; ``/`` is real division in
  both.
* **NaN**: in both engines NaN = NaN and NaN sorts above every number, so the clamps of
  :mod:`dpsql.query.total_expressions` (``isnan`` on the branch above the upper bound) hold
  unchanged.
* **The bounding hash** (:class:`~dpsql.engines.ir.SaltedHash`) is Spark's
  ``xxhash64(salt, ...)`` shifted into [0, 2^64), as a DECIMAL(20, 0); as a sort key (the
  ORDER BY of a bounding window) it is the signed BIGINT itself, in the same order and sorted
  faster. The salt is the named parameter ``:dpsql_salt`` (never text in the query).
* **QUALIFY** (not in Spark) becomes a subquery filtered on the window's value.
* :class:`~dpsql.engines.ir.Histogram` (a MAP per group) has no Spark counterpart: each
  histogram is computed as ``GROUP BY keys, bucket`` (``COUNT(*)``), gathered per group with
  ``map_from_entries(collect_list(struct(...)))``, and LEFT JOINed to the other measurements
  on the keys with NULL-safe equality (a missing group is the empty histogram, as in DuckDB).
* **Dates**: ``date - DATE '1970-01-01'`` (a day count in DuckDB, an interval in Spark) is
  ``DATEDIFF`` (so is :class:`~dpsql.engines.ir.DaysSinceEpoch`); TRY_STRPTIME is
  ``TRY_TO_TIMESTAMP`` with the format in Java's letters
  (sqlglot's mapping; Java's parser may accept a malformed text DuckDB rejects or the reverse:
  a different, still total answer); the day of week counts from 0 (Sunday) as in DuckDB.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.generator import Generator

try:
    from sqlglot.generators.spark import SparkGenerator
except ImportError:  # sqlglot < 30 (Superset 6.1's environment pins < 29): on the dialect
    SparkGenerator = Spark.Generator  # type: ignore[misc]

from dpsql.engines import ir
from dpsql.engines.histograms import joined_histograms, spark_gather

_SPARK = Spark().generator()  # for its format_time: DuckDB's strptime formats in Java's
SALT_NAME = "dpsql_salt"  # the salt's named parameter (:dpsql_salt)
EXACT_SUM = exp.DataType.build("DECIMAL(38, 0)")


def spark_tree(tree: exp.Select, integral_sums: Collection[str] = ()) -> exp.Expression:
    """The rewritten query for Spark. ``integral_sums`` names the output columns whose SUM
    adds integers (found by analysing the query once, see ``SparkEngine.generate``): their
    terms are summed as DECIMAL(38, 0)."""
    tree = tree.copy()
    _exact_sums(tree, set(integral_sums))
    tree = joined_histograms(tree, spark_gather)
    for i, select in enumerate(reversed(list(tree.find_all(exp.Select)))):
        _no_qualify(select, f"__r{i}")
    return tree


def _no_qualify(select: exp.Select, name: str) -> None:
    """``SELECT * FROM s QUALIFY w <= n`` (the rewrite's only use of QUALIFY) ->
    ``SELECT * FROM (SELECT *, w AS name FROM s) WHERE name <= n``. sqlglot's own
    eliminate_qualify names every window ``_w``, ambiguous when two are nested."""
    qualify = select.args.get("qualify")
    if qualify is None:
        return
    condition = qualify.this
    assert isinstance(condition, exp.LTE) and isinstance(select.expressions[0], exp.Star)
    inner = exp.Select(expressions=[exp.Star(), exp.alias_(condition.this, name)],
                       from_=select.args["from_"].copy())
    select.set("qualify", None)
    select.set("from_", exp.From(this=exp.Subquery(this=inner, alias=exp.TableAlias(
        this=exp.to_identifier(f"{name}_t")))))
    select.set("where", exp.Where(this=exp.LTE(this=exp.column(name),
                                               expression=condition.expression)))


def _node(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Table) and isinstance(node.this, exp.ExplodingGenerateSeries):
        # No table functions: the series as a LATERAL VIEW (sqlglot's UNNEST in Spark).
        series = node.this
        return exp.Unnest(expressions=[exp.GenerateSeries(
            start=_spark(series.args["start"]), end=_spark(series.args["end"]))],
            alias=node.args.get("alias"))
    if isinstance(node, exp.CTE) and node.args.get("materialized"):
        node.set("materialized", None)  # Spark inlines every CTE; it has no such keyword
    if type(node) is exp.Cast and node.to.is_type(exp.DataType.Type.BIGINT) and \
            isinstance(node.this, ir.RoundHalfAway):
        return _whole_half_away(_spark(node.this.this))
    if isinstance(node, exp.Round) and _positive_literal(node.args.get("decimals")):
        # DuckDB: round(x * 10^d) / 10^d in binary floating point; Spark rounds the decimal
        # text of x (ROUND(1.005, 2) is 1.0 in DuckDB, 1.01 in Spark): DuckDB's way here.
        scale = exp.Pow(this=exp.Literal.number(10), expression=node.args["decimals"].copy())
        return exp.Paren(this=exp.Div(this=exp.Round(this=exp.Mul(
            this=exp.Paren(this=_spark(node.this)), expression=scale)),
            expression=scale.copy()))
    if isinstance(node, exp.Extract) and node.name.upper() in ("DOW", "DAYOFWEEK"):
        # Spark's day of week is 1 (Sunday) to 7, DuckDB's 0 (Sunday) to 6.
        return exp.Paren(this=exp.Sub(this=exp.Extract(this=node.this, expression=_spark(
            node.expression)), expression=exp.Literal.number(1)))
    elif isinstance(node, exp.Extract) and node.name.upper() == "EPOCH":
        # Spark extracts no EPOCH: DuckDB's seconds since 1970-01-01 UTC (a DOUBLE, to the
        # microsecond) from the microseconds (the session is in UTC: a DATE is its midnight).
        micros = exp.Anonymous(this="unix_micros",
                               expressions=[exp.cast(_spark(node.expression), "TIMESTAMP")])
        return exp.Paren(this=exp.Div(this=exp.cast(micros, "DOUBLE"),
                                      expression=exp.Literal.number(1_000_000)))
    elif isinstance(node, exp.Extract) and node.name.upper() == "SECOND":
        # Spark's SECOND is a DECIMAL(8, 6) with the fraction, DuckDB's the whole seconds
        # (bounds read it as an integer in [0, 59], summed without a grid).
        return exp.cast(exp.Floor(this=exp.Extract(this=node.this, expression=_spark(
            node.expression))), "INT")
    elif isinstance(node, exp.DayOfWeek):
        return exp.Paren(this=exp.Sub(this=exp.DayOfWeek(this=_spark(node.this)),
                                      expression=exp.Literal.number(1)))
    elif isinstance(node, exp.Sub) and _is_date_literal(node.expression):
        return exp.DateDiff(this=_spark(node.this), expression=node.expression,
                            unit=exp.var("DAY"))
    return node


def _whole_half_away(value: exp.Expression) -> exp.Expression:
    """``CAST(RoundHalfAway(x) AS BIGINT)`` (every term of a fixed-point sum) without
    Spark's ROUND of a double, which rounds a Java BigDecimal of each value (two thirds of a
    clamped SUM's time, measured): ``t = CAST(x AS BIGINT)`` (towards zero), then ``t + 1``
    where ``x - t >= 0.5``, ``t - 1`` where ``x - t <= -0.5``: ties away from zero.
    ``x - t`` is exact in doubles (``|t| <= |x| < |t| + 1``, and ``t`` is ``x`` itself from
    2^52 on), so the tie test is too. NULL for NULL; NaN, the infinities and values beyond
    BIGINT raise in the cast (ANSI), as the CAST of the rounded value does."""
    whole = exp.Cast(this=exp.Paren(this=value), to=exp.DataType.build("BIGINT"))
    fraction = exp.Sub(this=exp.Paren(this=value.copy()), expression=whole.copy())
    step = exp.Case(ifs=[
        exp.If(this=exp.GTE(this=fraction, expression=exp.Literal.number(0.5)),
               true=exp.Literal.number(1)),
        exp.If(this=exp.LTE(this=fraction.copy(), expression=exp.Literal.number(-0.5)),
               true=exp.Literal.number(-1))], default=exp.Literal.number(0))
    return exp.Paren(this=exp.Add(this=whole, expression=step))


def _hash(generator: Generator, node: ir.SaltedHash) -> str:
    # xxhash64 is a signed BIGINT: shifted into [0, 2^64), the IR's range.
    signed = exp.Anonymous(this="xxhash64", expressions=node.expressions)
    if isinstance(node.parent, exp.Ordered):
        # A sort key (the bounding windows' ORDER BY): the shift is monotone, so the signed
        # BIGINT sorts the rows in the same order, and Spark sorts a BIGINT several times
        # faster than the DECIMAL(20, 0) (the window of 3M rows: 4 s instead of 6.4).
        return generator.sql(signed)
    return generator.sql(exp.Paren(this=exp.Add(
        this=exp.cast(signed, "DECIMAL(20, 0)"),
        expression=exp.cast(exp.Literal.number(2**63), "DECIMAL(20, 0)"))))


def _smallest(generator: Generator, node: ir.SmallestBy) -> str:
    # The group's (key, value) structs sorted (by key first), then their values: no top-n
    # aggregate; COLLECT_LIST skips NULLs, a struct is never NULL.
    pairs = generator.func("COLLECT_LIST", generator.func(
        "NAMED_STRUCT", exp.Literal.string("k"), node.expression, exp.Literal.string("v"),
        node.this))
    return f"TRANSFORM(ARRAY_SORT({pairs}), x -> x.v)"


def _strptime(generator: Generator, node: exp.StrToDate | exp.StrToTime) -> str:
    # TRY_TO_TIMESTAMP (Spark 3.5+): NULL where the text does not parse, as DuckDB's
    # TRY_STRPTIME; TO_DATE would raise under ANSI, quoting the value.
    # format_time gives the format as quoted SQL text ('yyyy-M-d'): its value is unquoted.
    quoted = _SPARK.format_time(node) or "''"
    fmt = exp.Literal.string(quoted[1:-1].replace("\\'", "'"))
    parsed = exp.Anonymous(this="try_to_timestamp", expressions=[node.this, fmt])
    return generator.sql(exp.cast(parsed, "DATE") if isinstance(node, exp.StrToDate) else
                         parsed)


def _try_cast(generator: Generator, node: exp.TryCast) -> str:
    return f"TRY_CAST({generator.sql(node, 'this')} AS {generator.sql(node, 'to')})"


#: The bits of each slice of an exact sum's terms (:func:`_exact_sum`).
SLICE_BITS = 21


def _exact_sum(generator: Generator, node: ir.ExactSum) -> str:
    """SUM(x) of integer terms, exact (at least 10^38): with x a BIGINT,
    ``x = (x >> 42) * 2^42 + ((x >> 21) & (2^21 - 1)) * 2^21 + (x & (2^21 - 1))`` (arithmetic
    shifts: floor divisions, so for negative x too), each slice summed as a BIGINT (exact
    below 2^42 rows a group: each slice is below 2^21 in magnitude; ANSI raises beyond), the
    three sums joined in DECIMAL(38, 0) once per group. NULL where every term is NULL, as
    SUM. Spark computes the term once (subexpression elimination of the aggregate's inputs).
    A ``wide`` sum's terms may not fit a BIGINT: they are summed as DECIMAL(38, 0), exact and
    slower (a Java BigDecimal a row)."""
    if node.args.get("wide"):
        return generator.sql(exp.Sum(this=exp.cast(node.this, EXACT_SUM)))
    term = exp.cast(node.this, "BIGINT")
    mask = exp.Literal.number(2**SLICE_BITS - 1)
    slices = [(_shift(term, 2 * SLICE_BITS), 2 * SLICE_BITS),
              (exp.BitwiseAnd(this=_shift(term, SLICE_BITS), expression=mask), SLICE_BITS),
              (exp.BitwiseAnd(this=term.copy(), expression=mask.copy()), 0)]
    total: exp.Expression | None = None
    for part, bits in slices:
        summed: exp.Expression = exp.cast(exp.Sum(this=part), EXACT_SUM)
        if bits:
            summed = exp.Mul(this=summed, expression=exp.Literal.number(2**bits))
        total = summed if total is None else exp.Add(this=total, expression=summed)
    return generator.sql(exp.Paren(this=total))


def _shift(term: exp.Expression, bits: int) -> exp.Expression:
    return exp.Anonymous(this="SHIFTRIGHT", expressions=[term.copy(),
                                                          exp.Literal.number(bits)])


class SparkDialect(Spark):
    """Spark SQL 3.5+ in ANSI mode, with the IR (see the module docstring). It has no
    spelling of :class:`~dpsql.engines.ir.Histogram` inside an expression: :func:`spark_tree`
    turns the rewrite's histogram columns into joins first."""

    class Generator(ir.Spelling, SparkGenerator):
        ENGINE = "Spark"
        TRANSFORMS: ClassVar[dict[type[exp.Expr], Any]] = {
            **SparkGenerator.TRANSFORMS, **ir.COMMON,
            exp.Placeholder: lambda self, e: f":{SALT_NAME}",
            ir.SaltedHash: _hash,
            ir.SafeCast: _try_cast,
            exp.TryCast: _try_cast,
            ir.ExactInteger: lambda self, e: self.sql(exp.cast(e.this, EXACT_SUM)),
            ir.ExactSum: _exact_sum,
            ir.DaysSinceEpoch: lambda self, e: self.sql(exp.DateDiff(
                this=e.this, expression=ir.EPOCH.copy(), unit=exp.var("DAY"))),
            # ROUND of a double without digits is HALF_UP on its shortest decimal text, which
            # lies on the same side of every tie (x.5 is a double): ties away from zero.
            ir.RoundHalfAway: lambda self, e: self.func("ROUND", e.this),
            exp.StrToDate: _strptime,
            exp.StrToTime: _strptime,
            ir.SmallestBy: _smallest,
            ir.Element: lambda self, e: self.func("ELEMENT_AT", e.this, exp.cast(
                e.expression, "INT")),  # its index is an INT
        }

        def preprocess(self, expression: exp.Expr) -> exp.Expr:
            return super().preprocess(expression.transform(_node, copy=False))


def _spark(node: exp.Expression) -> exp.Expression:
    """A replaced node's children are not visited by ``transform``: transform them first."""
    return node.transform(_node, copy=False)


def _positive_literal(node: exp.Expression | None) -> bool:
    return isinstance(node, exp.Literal) and node.is_int and int(node.this) > 0


def _is_date_literal(node: exp.Expression) -> bool:
    return isinstance(node, exp.Cast) and node.to.is_type(exp.DataType.Type.DATE) and \
        isinstance(node.this, exp.Literal)


def _exact_sums(query: exp.Select, integral: set[str]) -> None:
    """COALESCE(SUM(t), 0) of an integral output column -> the exact sum of ``t``: DuckDB's
    HUGEINT sum. A SUM whose own type is the column's (under COALESCE only: ``t`` is an
    integer) becomes an :class:`~dpsql.engines.ir.ExactSum`; any other SUM in the column adds
    ``CAST(t AS DECIMAL(38, 0))``."""
    for projection in query.expressions:
        if not (isinstance(projection, exp.Alias) and projection.alias in integral):
            continue
        for total in list(projection.find_all(exp.Sum)):
            if _is_the_column(total, projection):
                total.replace(ir.ExactSum(this=total.this))
            else:
                total.set("this", exp.Cast(this=total.this, to=EXACT_SUM.copy()))


def _is_the_column(total: exp.Sum, projection: exp.Alias) -> bool:
    """Whether ``total`` is ``projection``'s value up to COALESCE and parentheses (so of its
    integral type, and so a sum of integers)."""
    node: exp.Expression | None = total.parent
    while node is not projection:
        if not isinstance(node, (exp.Coalesce, exp.Paren)):
            return False
        node = node.parent
    return True
