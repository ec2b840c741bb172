"""Float underflow on PostgreSQL: a DOUBLE ``*``, ``/`` or ``POWER`` that rounds to 0 from
nonzero operands raises there ("value out of range: underflow", SQLSTATE 22003; float8_mul
raises iff ``result == 0 and a != 0 and b != 0``), where DuckDB and Spark give IEEE 0. An
error on some rows only would tell whether they exist (``SUM(x / 50)`` of a unit holding
5e-324, the rewrite's own ``x * x`` of a variance), so :class:`PostgresDialect
<dpsql.engines.postgres.dialect.PostgresDialect>` spells each such operation with a test that
gives 0 where the result would round to 0, and computes it otherwise:

    CASE WHEN <test> THEN 0 ELSE a * b END

The test is written at generation time (:func:`product`, :func:`quotient`, :func:`power`, the
Generator's ``TRANSFORMS``), from each operand's SQL generated once: so each guarded operand's
text appears twice, and generation is linear in the SQL's size. NULL fails every test (ELSE:
NULL); NaN compares above every number in PostgreSQL (ELSE: NaN); the infinities take ELSE
except a divisor (``a / Infinity`` is 0 either way). The integer ``0`` of THEN keeps the type
of an integer, NUMERIC or DOUBLE ELSE (a SMALLINT product becomes INTEGER).

**Which operations are guarded.** Not those that cannot underflow: a factor or dividend that is
a whole number by its syntax (:func:`whole`: an integer literal or cast, a rounding, a count, an
exact sum; its magnitude is 0 or at least 1), a constant factor of magnitude above 1/2 or a
constant divisor of at most 1 (the product, quotient of a nonzero double is then at least the
smallest denormal; except a constant chosen from the data after the charge,
:class:`~dpsql.engines.ir.Chosen`, whose test is written whatever its value, so that the
SQL's shape does not change), a NUMERIC product or quotient (exact), a power of a whole base
with a constant exponent >= 0, POWER(a, 0).

**The tests, by case.** ``d = 5e-324`` is the smallest denormal, 2^-1074; a result rounds to 0
iff its exact value is at most d / 2 (round half to even).

* A constant operand ``c`` (a literal, under casts and signs): the exact threshold of the
  other operand, found in Python's IEEE arithmetic (:func:`_largest_zero`): ``ABS(a) <= m``
  where ``m`` is the largest double with ``m * |c| == 0`` (``m / |c|`` for a quotient); a
  constant dividend: ``ABS(b) >= M``, the smallest double with ``|c| / M == 0``. Rounding is
  monotone, so the test is exact: 0 exactly where PostgreSQL would raise (or give 0). A
  test of a large magnitude is written ``-ABS(b) <= -M``, which NaN fails as it must.
* A square (both factors the same SQL): ``ABS(a) <= m``, ``m`` the largest double whose
  square is 0 (1.5e-162), exact too.
* Two variable operands: ``LN(ABS(a) + d) + LN(ABS(b) + d) <= -744.4`` (``-`` for a
  quotient). ``+ d`` keeps LN's argument positive (a = 0 never raises), and ``|a| <= fl(|a| +
  d) <= (|a| + d)(1 + 2^-52)`` (``fl(|a| + d) = |a|`` for ``|a| >= 2^-1020``, exact below
  2^-1021). If the exact product ``uv``
  rounds to 0 (``uv <= d / 2``), then ``(u + d)(v + d) <= d (1 + 2d)`` (the maximum, at ``u =
  d, v = 1/2``): the test's exact value is at most ``ln d = -744.4400``; for a quotient ``u /
  v <= d / 2`` forces ``v >= 2``, so ``(u + d) / v <= d``. LN (libm, < 1 ulp) and the sum add
  a few 1e-13: T = -744.4 leaves a margin of 0.04, so ELSE runs only where the result is not
  0. The other way, the test is at least ``ln(uv) - 1e-12`` (``ln(u / v) - ln 2`` for a
  quotient): a product whose exact value is below ``e^-744.4`` = 5.2e-324 (a quotient below
  1.03e-323), which DuckDB may round to the denormal 4.9e-324 (or 9.9e-324), reads 0 here.
* ``POWER(a, p)``, ``p`` a constant > 0: ``ABS(a) < t``, ``t = (2d)^(1/p) (1 + 1e-9)``: the
  exact power of ``|a| >= t`` is at least 2d, so libm's pow (< 1 ulp) does not round it to 0;
  a power whose exact value is below ~1e-323 reads 0 (``ABS(a) > t`` for p < 0, as in
  ROUND(n, -1)'s ``POWER(10, -1)``, where no base below 1e308 underflows). The rewrite's
  POWER has a constant exponent (:mod:`dpsql.query.bounds` asks for one); any other is refused.

**Nesting.** A guarded operation writes its operands twice, so a nest of n of them grows as
2^n (text, and work per row: each level evaluates its operands twice): a guarded operation
whose SQL exceeds :data:`MAX_GUARDED` characters (each number counted as one, whatever its
spelling, so that constants chosen after the charge cannot change the outcome) is refused
(:class:`~dpsql.errors.UnsupportedQuery`, when the SQL is compiled, before any charge).
"""

from __future__ import annotations

import math
import re
import struct
from functools import lru_cache

from sqlglot import exp
from sqlglot.generator import Generator

from dpsql.engines import ir
from dpsql.errors import UnsupportedQuery

#: ln of the result at or below which a product or quotient of variable operands reads 0
#: (the module docstring derives it).
LN_ZERO = -744.4
#: The characters of one guarded operation's SQL beyond which the query is refused: on the
#: sample data, ``SUM(income * income * income * income)`` passes (202,376 characters of
#: SQL), five factors are refused (PostgreSQL took 15 s on 1,000 rows with its JIT; the
#: grammar corpus's largest query is 41,290 characters).
MAX_GUARDED = 100_000
_TINY = "CAST(5e-324 AS DOUBLE PRECISION)"
#: A number in SQL text (not part of a name such as ``__x0``, nor the salt's ``$1``), and the
#: spellings of a negative one, ``(-5)`` and ``(CAST(-0.5 AS DOUBLE PRECISION))``.
_NUMBER_TEXT = r"\d+(?:\.\d*)?(?:[eE][+-]?\d+)?"
_NUMBER = re.compile(rf"(?<![\w$.]){_NUMBER_TEXT}(?![\w.])")
_NEGATIVE_LITERAL = re.compile(rf"\(-({_NUMBER_TEXT})\)")
_NEGATIVE_CAST = re.compile(rf"\(CAST\(-({_NUMBER_TEXT}) AS ([^)]*)\)\)")
#: The characters each number counts for in :data:`MAX_GUARDED`, whatever its spelling.
_NUMBER_WIDTH = 1
_WHOLE_NODES = (ir.Whole, ir.ExactInteger, ir.RoundHalfAway, ir.DaysSinceEpoch, ir.SaltedHash,
                exp.Floor, exp.Ceil, exp.Count, exp.Sign, exp.Length, exp.IntDiv, exp.Null)
_SAME_AS_ARGUMENTS = (exp.Paren, exp.Neg, exp.Abs, exp.Add, exp.Sub, exp.Mul, exp.Mod,
                      exp.Coalesce, exp.Greatest, exp.Least, ir.StrictLeast, ir.StrictGreatest,
                      exp.Sum, exp.Min, exp.Max, exp.Window)
_DEPTH = 6  # how deep whole() looks: beyond, an operand is taken as a real number


def product(generator: Generator, node: exp.Mul) -> str:
    a, b = node.this, node.expression
    sa, sb = generator.sql(a), generator.sql(b)
    plain = f"{sa} * {sb}"
    if whole(a) or whole(b) or (_numeric(a) and _numeric(b)):
        return plain
    for value, text, chosen in ((_constant(b), sa, isinstance(b, ir.Chosen)),
                                (_constant(a), sb, isinstance(a, ir.Chosen))):
        if value is not None:
            if (value == 0 or not math.isfinite(value) or abs(value) > 0.5) and not chosen:
                return plain
            return _guard(node, f"ABS({text}) <= {_double(_largest_zero(abs(value), False))}",
                          plain)
    if sa == sb:
        return _guard(node, f"ABS({sa}) <= {_double(_largest_zero(None, False))}", plain)
    return _guard(node, f"{_ln(sa)} + {_ln(sb)} <= {LN_ZERO}", plain)


def quotient(generator: Generator, node: exp.Div) -> str:
    a, b = node.this, node.expression
    sa, sb = generator.sql(a), generator.sql(b)
    if node.args.get("safe"):  # sqlglot's div_sql: PostgreSQL has no safe division
        sb = f"NULLIF({sb}, 0)"
    if not node.args.get("typed") and not a.is_type(*exp.DataType.REAL_TYPES) \
            and not b.is_type(*exp.DataType.REAL_TYPES):
        sa = f"CAST({sa} AS DOUBLE PRECISION)"  # / divides in DOUBLE, as in DuckDB
    plain = f"{sa} / {sb}"
    divisor, dividend = _constant(b), _constant(a)
    if whole(a) or (_numeric(a) and _numeric(b)) or (divisor is not None and (
            not math.isfinite(divisor) or abs(divisor) <= 1) and not isinstance(b, ir.Chosen)):
        return plain  # a constant 0 divisor: division by zero, not underflow
    if divisor is not None:
        return _guard(node, f"ABS({sa}) <= {_double(_largest_zero(abs(divisor), True))}",
                      plain)
    if dividend is not None:
        if dividend == 0 or not math.isfinite(dividend) or \
                math.isinf(_smallest_zeroing(abs(dividend))):
            return plain  # no finite divisor makes it 0
        limit = _smallest_zeroing(abs(dividend))  # -|b| <= -M: NaN fails, as it must
        return _guard(node, f"-ABS({sb}) <= {_double(-limit)}", plain)
    return _guard(node, f"{_ln(sa)} - {_ln(sb)} <= {LN_ZERO}", plain)


def power(generator: Generator, node: exp.Pow) -> str:
    a, p = node.this, node.expression
    sa, sp = generator.sql(a), generator.sql(p)
    plain = f"POWER({sa}, {sp})"
    exponent = _constant(p)
    if exponent is None:
        raise UnsupportedQuery("on PostgreSQL, POWER needs a constant exponent; write the "
                               "exponent as a number")
    if exponent == 0 or not math.isfinite(exponent) or (exponent > 0 and whole(a)):
        return plain
    limit = _power_limit(exponent)
    if limit == 0 or math.isinf(limit):
        return plain  # no double base underflows
    if exponent > 0:
        return _guard(node, f"ABS({sa}) < {_double(limit)}", plain)
    return _guard(node, f"-ABS({sa}) < {_double(-limit)}", plain)  # NaN fails, as it must


def _guard(node: exp.Expression, test: str, plain: str) -> str:
    sql = f"CASE WHEN {test} THEN 0 ELSE {plain} END"
    if _size(sql) > MAX_GUARDED:
        columns = sorted({c.name for c in node.find_all(exp.Column)}) or ["constants"]
        raise UnsupportedQuery(
            f"on PostgreSQL, the arithmetic over {', '.join(columns[:5])} nests {_depth(node)} "
            "products, quotients or powers of real numbers, too many to spell with their tests "
            "against underflow (PostgreSQL raises where a result rounds to 0; each test writes "
            "its operands twice); compute it with fewer nested steps (POWER(x, n) for a "
            "power), or run the query on DuckDB")
    return sql


def _size(sql: str) -> int:
    """The characters of ``sql``, each number counted as :data:`_NUMBER_WIDTH` whatever its
    sign and digits: the SQL run after the charge differs from the SQL checked before it in
    its constants only (an automatic k or value bound: tests/privacy/test_auto_sql.py), so
    the refusal must not depend on their spelling (1000.0 at the cap, 0.018145860519450736
    drawn)."""
    positive = _NEGATIVE_LITERAL.sub(r"\1", _NEGATIVE_CAST.sub(r"CAST(\1 AS \2)", sql))
    numbers = _NUMBER.findall(positive)
    return len(positive) + _NUMBER_WIDTH * len(numbers) - sum(map(len, numbers))


def _depth(node: exp.Expression) -> int:
    """The most products, quotients and powers nested in one another in ``node``."""
    below = max((_depth(child) for child in node.iter_expressions()), default=0)
    return below + isinstance(node, exp.Mul | exp.Div | exp.Pow)


def _ln(sql: str) -> str:
    return f"LN(ABS({sql}) + {_TINY})"


def _double(value: float) -> str:
    if math.isinf(value):
        return "CAST('Infinity' AS DOUBLE PRECISION)"
    return f"CAST({value!r} AS DOUBLE PRECISION)"


def whole(node: exp.Expression, depth: int = _DEPTH) -> bool:
    """Is the value a whole number (or NULL, NaN, an infinity) by its syntax: its magnitude is
    then 0 or at least 1, and a product or quotient of it cannot underflow?"""
    if depth == 0:
        return False
    if isinstance(node, exp.Literal):
        return not node.is_string and node.is_int
    if isinstance(node, _WHOLE_NODES):
        return True
    if isinstance(node, exp.Anonymous):  # the dialect's own TRUNC(x) and SIGN(x) (_half_away)
        return node.name.lower() in ("trunc", "sign") and len(node.expressions) == 1
    if isinstance(node, exp.Cast):  # TRY_CAST and SafeCast too
        return node.to.is_type(*exp.DataType.INTEGER_TYPES) or (
            node.to.is_type(*exp.DataType.REAL_TYPES) and whole(node.this, depth - 1))
    if isinstance(node, exp.Case):
        branches = [i.args["true"] for i in node.args.get("ifs", [])]
        default = node.args.get("default")
        return all(whole(b, depth - 1) for b in [*branches, *([default] if default else [])])
    if isinstance(node, exp.Nullif):
        return whole(node.this, depth - 1)
    if isinstance(node, _SAME_AS_ARGUMENTS):
        parts = [node.this, *(node.expressions or [])]
        if isinstance(node, exp.Binary):
            parts = [node.this, node.expression]
        return all(p is not None and whole(p, depth - 1) for p in parts)
    return False


def _numeric(node: exp.Expression) -> bool:
    """An exact NUMERIC (a cast to DECIMAL, :class:`~dpsql.engines.ir.ExactInteger`)."""
    return isinstance(node, ir.ExactInteger) or (
        isinstance(node, exp.Cast) and node.to.is_type(exp.DataType.Type.DECIMAL))


def _constant(node: exp.Expression) -> float | None:
    """The value of a number literal under parentheses, casts to numbers and minus signs (a
    divisor's ``NULLIF(c, 0)`` too: NaN for NULL, which no test needs)."""
    if isinstance(node, exp.Paren):
        node = node.unnest()
    if isinstance(node, ir.Chosen):  # its value, though not its spelling's shape
        node = node.this
    if isinstance(node, exp.Nullif):
        value, null = _constant(node.this), _constant(node.expression)
        return None if value is None or null is None else math.nan if value == null else value
    sign = 1.0
    while isinstance(node, exp.Paren | exp.Neg | exp.Cast):
        if isinstance(node, exp.Cast) and not node.to.is_type(*exp.DataType.NUMERIC_TYPES):
            return None
        if isinstance(node, exp.Neg):
            sign = -sign
        node = node.this
    if not isinstance(node, exp.Literal) or node.is_string:
        return None
    try:
        return sign * float(node.this)
    except ValueError:
        return None


def _bits(value: float) -> int:
    return int.from_bytes(struct.pack(">d", value), "big")


def _float(bits: int) -> float:
    return float(struct.unpack(">d", bits.to_bytes(8, "big"))[0])


_MAX_BITS = _bits(1.7976931348623157e308)


@lru_cache(maxsize=256)
def _largest_zero(c: float | None, divide: bool) -> float:
    """The largest double m >= 0 with ``m * c == 0`` (``m / c`` with ``divide``; ``m * m``
    when c is None), in IEEE arithmetic: rounding is monotone, so exactly the doubles of
    magnitude at most m give 0."""
    def zero(m: float) -> bool:
        return (m * m if c is None else m / c if divide else m * c) == 0.0

    low, high = 0, _MAX_BITS  # zero(low); not zero(high) for c > 0 within the range
    if zero(_float(high)):
        return _float(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if zero(_float(middle)) else (low, middle)
    return _float(low)


@lru_cache(maxsize=256)
def _smallest_zeroing(c: float) -> float:
    """The smallest double M > 0 with ``c / M == 0`` (Infinity when none is finite)."""
    low, high = 0, _MAX_BITS  # c / tiny is not 0
    if c == 0 or c / _float(high) != 0.0:
        return math.inf if c != 0 else 0.0
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if c / _float(middle) == 0.0 else (middle, high)
    return _float(high)


@lru_cache(maxsize=256)
def _power_limit(p: float) -> float:
    """For p > 0, a base t with ``t^p`` (its exact value) at least twice the smallest denormal,
    so that libm's pow (< 1 ulp) does not round the power of a base ``>= t`` to 0; for p < 0,
    a t with the same property for bases ``<= t``. 0 or Infinity when no double base
    underflows. ``exp(ln(2d) / p)`` is off by a few 1e-16 relative, times p in ``t^p``: the
    factor ``1 +- 1e-9`` covers it for every p."""
    if abs(p) < 1e-3:
        return 0.0 if p > 0 else math.inf
    try:
        t = math.exp(math.log(2 * 5e-324) / p)
    except OverflowError:
        return math.inf
    return t * (1 + 1e-9) if p > 0 else t * (1 - 1e-9)
