"""PostgreSQL's spelling of the engine IR (:mod:`dpsql.engines.ir`) and of the rewritten query
(a sqlglot tree written for DuckDB's semantics), with the same total, error-free semantics.

:class:`PostgresDialect` is sqlglot's PostgreSQL dialect whose Generator spells each IR node
(``TRANSFORMS``) and, before generating, fixes the few operations whose PostgreSQL semantics
differ (:func:`_fix`, in ``preprocess``). What differs between the engines, and what this
module does about it:

* **The bounding hash** (:class:`~dpsql.engines.ir.SaltedHash`). The sample is keyed by
  ``hash_record_extended(ROW(a, b), $1)`` (PostgreSQL 14 and later), a 64-bit hash
  of the row's values salted by the secret 63-bit salt ($1); hashing the values directly
  measured ~25% faster than hashing the row's text with ``hashtextextended``. Its quality
  matters only for the sample's randomness, never for the bounds: ties are broken
  arbitrarily and still keep at most k rows per unit. The two engines therefore draw
  different samples of a unit that exceeds its bounds; the distribution of answers is the
  same (each unit keeps a uniformly random k of its rows).
  Shifted into [0, 2^64) as a NUMERIC where its value is used; as a sort key (the ORDER BY
  of a bounding window) the signed BIGINT itself, in the same order.
* **TRY_CAST** (:class:`~dpsql.engines.ir.SafeCast`) does not exist. A cast that may fail is
  spelled as a ``CASE`` that tests the
  value's text against a regular expression of what converts without error, and casts only
  then: NULL otherwise, never an error. It accepts a subset of what DuckDB accepts (decimal
  digits, an optional sign, surrounding blanks; ``YYYY-MM-DD`` dates checked day by day);
  anything else (``1_000``, ``0x10``, ``inf``) reads as NULL on PostgreSQL.
* **NaN.** PostgreSQL orders NaN above every number and NaN = NaN, as DuckDB does, so clamps and
  ``NULLIF(x, 'NaN')`` work unchanged; ``isnan(x)`` becomes ``x = 'NaN'``.
* **Sums.** DuckDB sums BIGINT into HUGEINT; PostgreSQL sums BIGINT into NUMERIC, exact as
  well (the engine returns it as a Python int); :class:`~dpsql.engines.ir.ExactInteger` is
  NUMERIC.
* :class:`~dpsql.engines.ir.Histogram` becomes a per-group JSON object of bucket -> count
  (keys as text, which the perturb pass reads with ``int()``).
* **ROUND** of a double rounds half to even in PostgreSQL and has no digits form:
  :class:`~dpsql.engines.ir.RoundHalfAway` and the analyst's ``ROUND(x)`` are computed as
  DuckDB does, half away from zero, on the exact fractional part (:func:`_half_away`,
  :func:`_round`).
* **QUALIFY** becomes a subquery (:func:`_unqualify`, in ``preprocess``).
* Integer division (``//``) is ``DIV`` in NUMERIC, read back as BIGINT; ``/`` divides in
  DOUBLE PRECISION (as sqlglot's generator does); a division by zero is already ``NULLIF``'d
  by :mod:`dpsql.query.total_expressions`.
* **Float underflow.** PostgreSQL raises where a DOUBLE product, quotient or POWER rounds to 0
  from nonzero operands (``5e-324 / 50``); DuckDB gives 0. Each one that can underflow is
  spelled ``CASE WHEN <it would round to 0> THEN 0 ELSE a * b END``, its operands' SQL
  generated once and written twice (:mod:`dpsql.engines.postgres.underflow`, which states the
  tests and their thresholds); a product or quotient whose exact value is below ~1e-323, which
  DuckDB rounds to the smallest denormals, reads 0 here. A nest of them too deep to spell is
  refused before any charge.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.generator import Generator

try:
    from sqlglot.generators.postgres import PostgresGenerator
except ImportError:  # sqlglot < 30 (Superset 6.1's environment pins < 29): on the dialect
    PostgresGenerator = Postgres.Generator  # type: ignore[misc]

from dpsql.engines import ir
from dpsql.engines.postgres import underflow
from dpsql.errors import UnsupportedQuery

_DOUBLE = exp.DataType.build("DOUBLE PRECISION", dialect="postgres")
_NUMERIC = exp.DataType.build("NUMERIC", dialect="postgres")
_TEXT = exp.DataType.build("TEXT", dialect="postgres")
# What converts without error, tested on the value's text before casting (see _safe_cast).
_INTEGER_TEXT = r"^\s*[+-]?[0-9]{1,18}(\.[0-9]*)?\s*$"
_REAL_TEXT = r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,3})?\s*$"
_LONGEST = 400  # characters of a number's text read at all: NUMERIC then cannot overflow
_DAY = (r"(?!0000)[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-"
        r"(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))")
_LEAP_DAY = r"([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29"
_DATE_TEXT = rf"^\s*({_DAY}|{_LEAP_DAY})([ T][0-9:.]*)?\s*$"
_BOOLS = {"true": True, "t": True, "1": True, "yes": True, "y": True, "on": True,
          "false": False, "f": False, "0": False, "no": False, "n": False, "off": False}
_INTEGER_RANGES = {exp.DataType.Type.TINYINT: 2**7, exp.DataType.Type.SMALLINT: 2**15,
                   exp.DataType.Type.INT: 2**31, exp.DataType.Type.BIGINT: 2**63,
                   exp.DataType.Type.UTINYINT: 2**8, exp.DataType.Type.USMALLINT: 2**16,
                   exp.DataType.Type.UINT: 2**32, exp.DataType.Type.UBIGINT: 2**63,
                   exp.DataType.Type.INT128: 2**63}


def _hash(generator: Generator, node: ir.SaltedHash) -> str:
    # hash_record_extended is a signed BIGINT: shifted into [0, 2^64), the IR's range.
    salt, *parts = node.expressions
    row = exp.Anonymous(this="ROW", expressions=parts)
    signed = exp.Anonymous(this="hash_record_extended", expressions=[row, salt])
    if isinstance(node.parent, exp.Ordered):
        # A sort key (the bounding windows' ORDER BY): the shift is monotone, so the signed
        # BIGINT sorts the rows in the same order, without a NUMERIC per row.
        return generator.sql(signed)
    return generator.sql(exp.Paren(this=exp.Add(this=exp.cast(signed, _NUMERIC),
                                                expression=exp.Literal.number(2**63))))


def _smallest(generator: Generator, node: ir.SmallestBy) -> str:
    # The whole group in key order (PostgreSQL has no top-n aggregate); NULLs kept.
    return generator.sql(exp.ArrayAgg(this=exp.Order(this=node.this, expressions=[
        exp.Ordered(this=node.expression)])))


def _preprocess(tree: exp.Expression) -> exp.Expression:
    fixed = tree.transform(_fix, copy=False)
    for i, select in enumerate(list(fixed.find_all(exp.Select))):
        if select.args.get("qualify") is not None:
            _unqualify(select, f"__w{i}")
    return fixed


class PostgresDialect(Postgres):
    """PostgreSQL 14+, with the IR (see the module docstring)."""

    class Generator(ir.Spelling, PostgresGenerator):
        ENGINE = "PostgreSQL"
        TRANSFORMS: ClassVar[dict[type[exp.Expr], Any]] = {
            **PostgresGenerator.TRANSFORMS, **ir.COMMON,
            exp.Placeholder: lambda self, e: f"${e.this}",
            ir.SaltedHash: _hash,
            ir.SafeCast: lambda self, e: self.sql(_safe_cast(e.this, e.to)),
            exp.TryCast: lambda self, e: self.sql(_safe_cast(e.this, e.to)),
            ir.ExactInteger: lambda self, e: self.sql(exp.cast(e.this, _NUMERIC)),
            ir.ExactSum: lambda self, e: self.func("SUM", e.this),
            ir.Histogram: lambda self, e: self.sql(_histogram(e.this, e.args.get("weight"))),
            # DATE minus DATE is an integer number of days in PostgreSQL too.
            ir.DaysSinceEpoch: lambda self, e: self.sql(exp.Paren(this=exp.Sub(
                this=e.this, expression=ir.EPOCH.copy()))),
            ir.RoundHalfAway: lambda self, e: self.sql(_half_away(e.this)),
            ir.SmallestBy: _smallest,
            ir.Element: lambda self, e: f"({self.sql(e, 'this')})[{self.sql(e, 'expression')}]",
            exp.IsNan: lambda self, e: self.sql(_is_nan(e.this)),
            exp.StrToDate: lambda self, e: self.sql(_strptime(e)),
            exp.StrToTime: lambda self, e: self.sql(_strptime(e)),
            exp.Mul: underflow.product, exp.Div: underflow.quotient, exp.Pow: underflow.power,
        }

        def preprocess(self, expression: exp.Expr) -> exp.Expr:
            return super().preprocess(_preprocess(expression))  # type: ignore[arg-type]


def _unqualify(select: exp.Select, name: str) -> None:
    """``SELECT * FROM s QUALIFY w <= k`` (the only QUALIFY the rewrite writes) as
    ``SELECT * FROM (SELECT *, w AS name FROM s) WHERE name <= k``; each level's window gets
    its own name, so nested levels do not clash (sqlglot's eliminate_qualify names all _w)."""
    condition = select.args["qualify"].this
    window = condition.this
    inner = exp.Select(expressions=[exp.Star(), exp.alias_(window.copy(), name)],
                       from_=select.args["from_"].copy())
    select.set("qualify", None)
    select.set("from_", exp.From(this=inner.subquery(f"{name}_t")))
    select.set("where", exp.Where(this=condition.__class__(
        this=exp.column(name), expression=condition.expression.copy())))


def _fix(node: exp.Expression) -> exp.Expression:
    # transform() visits children after the node is replaced only if they are new; each
    # replacement below builds its operands with postgres-ready copies of the children.
    if isinstance(node, exp.Round):  # the analyst's ROUND(x) and ROUND(integer, -d)
        return _round(node)
    if isinstance(node, exp.IntDiv):
        return exp.cast(exp.Anonymous(this="div", expressions=[
            exp.cast(_fixed(node.this), _NUMERIC), exp.cast(_fixed(node.expression), _NUMERIC)]),
            "BIGINT")
    if isinstance(node, exp.Substring):
        return _substring(node)
    if isinstance(node, exp.Sqrt | exp.Ln | exp.Log | exp.Exp):
        return _ieee(node)
    return node


def _special(text: str) -> exp.Expression:
    return exp.cast(exp.Literal.string(text), _DOUBLE)


def _ieee(node: exp.Sqrt | exp.Ln | exp.Log | exp.Exp) -> exp.Expression:
    """SQRT, LN, LOG and EXP with DuckDB's IEEE results where PostgreSQL raises: the square
    root or logarithm of a negative number is NaN, the logarithm of 0 is -Infinity, EXP
    overflows to Infinity and underflows to 0 (the rewrite's clamps then read NaN as NULL)."""
    if isinstance(node, exp.Log) and node.expression is not None:  # LOG(base, x)
        return exp.Div(this=_guarded_log(exp.Ln, _fixed(node.expression)), expression=exp.Nullif(
            this=exp.Paren(this=_guarded_log(exp.Ln, _fixed(node.this))),
            expression=exp.Literal.number(0)))
    value = exp.cast(_fixed(node.this), _DOUBLE)
    if isinstance(node, exp.Sqrt):
        return exp.Case(ifs=[exp.If(this=exp.LT(this=value, expression=exp.Literal.number(0)),
                                    true=_special("NaN"))], default=exp.Sqrt(this=value.copy()))
    if isinstance(node, exp.Exp):
        return exp.Case(ifs=[
            exp.If(this=exp.EQ(this=value, expression=_special("NaN")), true=_special("NaN")),
            exp.If(this=exp.GT(this=value.copy(), expression=exp.Literal.number("709.78")),
                   true=_special("Infinity")),
            exp.If(this=exp.LT(this=value.copy(), expression=exp.Literal.number(-745)),
                   true=exp.cast(exp.Literal.number(0), _DOUBLE))],
            default=exp.Exp(this=value.copy()))
    return _guarded_log(type(node), value)


def _guarded_log(kind: type[exp.Ln] | type[exp.Log], value: exp.Expression) -> exp.Expression:
    value = exp.cast(value, _DOUBLE)
    return exp.Case(ifs=[
        exp.If(this=exp.EQ(this=value, expression=exp.Literal.number(0)),
               true=_special("-Infinity")),
        exp.If(this=exp.LT(this=value.copy(), expression=exp.Literal.number(0)),
               true=_special("NaN"))], default=kind(this=value.copy()))


def _round(node: exp.Round) -> exp.Expression:
    """DuckDB's ROUND of a double, bit for bit: half away from zero, ``round(x * 10^d) /
    10^d`` with digits (``round(x / 10^-d) * 10^-d`` for negative digits). PostgreSQL's own
    ROUND of a double rounds half to even, and NUMERIC keeps only 15 digits of a double, so
    the half-way test is done on the exact fractional part: ``x - trunc(x)``."""
    value = _fixed(node.this)
    digits = node.args.get("decimals")
    if digits is None:
        return _half_away(value)
    places = int(digits.name) if isinstance(digits, exp.Literal) else None
    if places is not None and places < 0:
        scale = exp.Literal.number(f"1e{-places}")
        return exp.Mul(this=_half_away(exp.Div(this=value, expression=scale)),
                       expression=scale.copy())
    power = exp.Pow(this=exp.cast(exp.Literal.number(10), _DOUBLE), expression=_fixed(digits)) \
        if places is None else exp.Literal.number(f"1e{places}")
    return exp.Div(this=_half_away(exp.Mul(this=exp.Paren(this=value), expression=power)),
                   expression=power.copy())


def _half_away(value: exp.Expression) -> exp.Expression:
    """:class:`~dpsql.engines.ir.RoundHalfAway`: ``trunc(x) + (sign(x) if |x - trunc(x)| >=
    0.5 else 0)``. ``x - trunc(x)`` is exact in doubles, so the half-way test is too (adding
    0.5 first would round 0.49999999999999994 up); NaN and the infinities stay themselves."""
    whole = exp.Anonymous(this="trunc", expressions=[exp.Paren(this=value.copy())])
    fraction = exp.Abs(this=exp.Sub(this=exp.Paren(this=value.copy()), expression=whole.copy()))
    step = exp.Case(ifs=[exp.If(this=exp.GTE(this=fraction, expression=exp.Literal.number(0.5)),
                                true=exp.Anonymous(this="sign", expressions=[
                                    exp.Paren(this=value.copy())]))],
                    default=exp.Literal.number(0))
    return exp.Paren(this=exp.Add(this=whole, expression=step))


def _int32(value: exp.Expression) -> exp.Expression:
    """A BIGINT argument as the INTEGER PostgreSQL's string functions take, saturated."""
    low = exp.Anonymous(this="greatest", expressions=[value, exp.Literal.number(-(2**31))])
    return exp.cast(exp.Anonymous(this="least", expressions=[
        low, exp.Literal.number(2**31 - 1)]), "INT")


def _substring(node: exp.Substring) -> exp.Expression:
    """DuckDB's substring(s, start, length): a negative start counts from the end, and a
    negative length is empty (PostgreSQL raises on it)."""
    text = _fixed(node.this)
    start = _fixed(node.args["start"]) if node.args.get("start") is not None else \
        exp.Literal.number(1)
    from_end = exp.Add(this=exp.Add(this=exp.Length(this=text.copy()), expression=start.copy()),
                       expression=exp.Literal.number(1))
    first = exp.Case(ifs=[exp.If(this=exp.LT(this=start.copy(), expression=exp.Literal.number(0)),
                                 true=from_end)], default=start)
    length = node.args.get("length")
    size = None if length is None else _int32(exp.Anonymous(this="greatest", expressions=[
        _fixed(length), exp.Literal.number(0)]))
    return exp.Substring(this=text, start=_int32(first), length=size)


def _fixed(node: exp.Expression) -> exp.Expression:
    return node.copy().transform(_fix, copy=False)


def _is_nan(value: exp.Expression) -> exp.Expression:
    return exp.EQ(this=exp.cast(value, _DOUBLE),
                  expression=exp.cast(exp.Literal.string("NaN"), _DOUBLE))


def _histogram(bucket: exp.Expression, weight: exp.Expression | None = None
               ) -> exp.Expression:
    """DuckDB's ``histogram(b)`` (a MAP bucket -> count) as a JSON object, per group: the
    group's buckets are gathered with ``array_agg`` (an aggregate of the outer query) and
    counted in a scalar subquery; NULL buckets are not counted, as in DuckDB. A weighted
    histogram gathers the weights beside the buckets and sums them."""
    arrays = [bucket] if weight is None else [bucket, weight]
    columns = ["__b"] if weight is None else ["__b", "__w"]
    n = exp.Count(this=exp.Star()) if weight is None else exp.Sum(this=exp.column("__w"))
    counted = exp.select(exp.column("__b"), exp.alias_(n, "__n")) \
        .from_(exp.Unnest(expressions=[exp.Anonymous(this="array_agg", expressions=[a])
                                       for a in arrays],
                          alias=exp.TableAlias(this=exp.to_identifier("__h"), columns=[
                              exp.to_identifier(c) for c in columns]))) \
        .where(exp.column("__b").is_(exp.null()).not_()).group_by(exp.column("__b"))
    return exp.Subquery(this=exp.select(exp.Anonymous(this="jsonb_object_agg", expressions=[
        exp.column("__b"), exp.column("__n")])).from_(counted.subquery("__c")))


def _safe_cast(value: exp.Expression, to: exp.DataType) -> exp.Expression:
    """``TRY_CAST(value AS to)``: the value's text is tested before it is cast, so the cast
    never raises (NULL where DuckDB's TRY_CAST would be NULL, and also for the few spellings
    DuckDB accepts and PostgreSQL does not)."""
    target = to.this
    if to.is_type(*exp.DataType.TEXT_TYPES):
        return exp.cast(value, _TEXT)
    text = exp.cast(value, _TEXT)
    trimmed = exp.Lower(this=exp.Trim(this=text.copy()))
    if target in _INTEGER_RANGES:
        limit = _INTEGER_RANGES[target]
        low = 0 if target.value.startswith("U") else -limit
        number = exp.Round(this=exp.cast(text.copy(), _NUMERIC))
        inside = exp.And(this=exp.GTE(this=number.copy(), expression=exp.Literal.number(low)),
                         expression=exp.LT(this=number.copy(),
                                           expression=exp.Literal.number(limit)))
        return exp.Case(ifs=[
            _from_bool(trimmed, "BIGINT"),
            exp.If(this=_matches(text, _INTEGER_TEXT),
                   true=exp.Case(ifs=[exp.If(this=inside, true=exp.cast(number, "BIGINT"))]))])
    if target in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, exp.DataType.Type.DECIMAL):
        return _safe_real(text, trimmed, to)
    if target == exp.DataType.Type.BOOLEAN:
        ifs = [exp.If(this=exp.EQ(this=trimmed.copy(), expression=exp.Literal.string(word)),
                      true=exp.true() if truth else exp.false()) for word, truth in _BOOLS.items()]
        return exp.Case(ifs=ifs)
    if target in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP):
        return _safe_date(text, target)
    raise UnsupportedQuery(f"a cast to {to.sql(dialect='duckdb')} cannot be made safe on "
                           "PostgreSQL; cast to BIGINT, DOUBLE, DATE, BOOLEAN or VARCHAR instead")


def _from_bool(trimmed: exp.Expression, to: exp.DataType | str) -> exp.If:
    """A boolean's text ('true', 'false') as 1 or 0, as DuckDB casts a BOOLEAN to a number."""
    words = [exp.Literal.string("true"), exp.Literal.string("false")]
    one = exp.cast(exp.cast(exp.EQ(this=trimmed.copy(), expression=words[0].copy()), "INT"), to)
    return exp.If(this=exp.In(this=trimmed.copy(), expressions=words), true=one)


def _safe_real(text: exp.Expression, trimmed: exp.Expression, to: exp.DataType
               ) -> exp.Expression:
    number = exp.cast(text.copy(), _NUMERIC)
    magnitude = exp.Abs(this=number.copy())
    real: exp.Expression = exp.cast(number.copy(), _DOUBLE)
    if to.this == exp.DataType.Type.DECIMAL and to.expressions:
        precision, *scale = [int(e.name) for e in to.expressions]
        digits = scale[0] if scale else 0
        rounded = exp.Round(this=number.copy(), decimals=exp.Literal.number(digits))
        real = exp.Case(ifs=[exp.If(this=exp.LT(this=exp.Abs(this=rounded.copy()),
                                                expression=exp.Literal.number(
                                                    10 ** (precision - digits))),
                                    true=exp.cast(rounded, _DOUBLE))])
    return exp.Case(ifs=[
        _from_bool(trimmed, _DOUBLE),
        exp.If(this=exp.EQ(this=trimmed.copy(), expression=exp.Literal.string("nan")),
               true=exp.cast(exp.Literal.string("NaN"), _DOUBLE)),
        exp.If(this=exp.and_(exp.LTE(this=exp.Length(this=text.copy()),
                                     expression=exp.Literal.number(_LONGEST)),
                             _matches(text, _REAL_TEXT)), true=exp.Case(ifs=[
            exp.If(this=exp.GTE(this=magnitude.copy(), expression=exp.Literal.number("1e308")),
                   true=exp.Null()),
            exp.If(this=exp.LT(this=magnitude, expression=exp.Literal.number("1e-300")),
                   true=exp.cast(exp.Literal.number(0), _DOUBLE))], default=real))])


def _safe_date(text: exp.Expression, target: Any) -> exp.Expression:
    """A ``YYYY-MM-DD`` prefix (a time of day may follow) read as a date only when the regular
    expression :data:`_DATE_TEXT` says the day exists (leap years included, year 1 to 9999):
    then casting its first ten characters cannot fail. The value's text appears twice only,
    so nested casts do not grow the query exponentially."""
    day = exp.Substring(this=exp.Trim(this=text.copy()), start=exp.Literal.number(1),
                        length=exp.Literal.number(10))
    result = exp.cast(exp.cast(day, "DATE"), "TIMESTAMP" if target ==
                      exp.DataType.Type.TIMESTAMP else "DATE")
    return exp.Case(ifs=[exp.If(this=_matches(text, _DATE_TEXT), true=result)])


def _strptime(node: exp.StrToDate | exp.StrToTime) -> exp.Expression:
    fmt = node.args["format"]
    if not (isinstance(fmt, exp.Literal) and fmt.this == "%Y-%m-%d"):
        raise UnsupportedQuery("on PostgreSQL, STRPTIME and TO_DATE read the format "
                               "'%Y-%m-%d' only; cast the text to DATE instead")
    target = exp.DataType.Type.DATE if isinstance(node, exp.StrToDate) else \
        exp.DataType.Type.TIMESTAMP
    return _safe_date(exp.cast(node.this, _TEXT), target)


def _matches(text: exp.Expression, pattern: str) -> exp.Expression:
    return exp.RegexpLike(this=text.copy(), expression=exp.Literal.string(pattern))
