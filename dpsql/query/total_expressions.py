"""Row-level expressions made total: no row can make the engine raise.

:func:`total` rewrites a checked row-level expression (see :mod:`dpsql.query.bounds`, the allow
list) so that the engine evaluates it without an error for every row: columns are read widened and
clamped to their declared bounds (:class:`Reader`), casts become TRY_CASTs to wide types, a
division by zero is NULL, integer literals are BIGINT, ``ROUND(x, d)`` is spelled out
(:func:`round_digits`, the one rounding rule of every engine). :func:`clamp` keeps a value
inside an interval, NULL kept and NaN read as NULL. The rewrite pass
(:mod:`dpsql.execution.rewrite`), constant folding (:mod:`dpsql.query.fold_constants`) and
public domains (:mod:`dpsql.privacy.domains`) all build on them, so the engine, the plan-time
evaluation of constants and the domains agree on every value.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from typing import cast

from sqlglot import exp

from dpsql.engines.ir import RoundHalfAway, SafeCast, greatest
from dpsql.errors import QueryRefused
from dpsql.metadata.metadata import Column, ColumnType, Table
from dpsql.query.bounds import COMPARISONS, bound
from dpsql.query.bounds.core import literal_value

#: sqlglot's type names: a cast built from one is not parsed (from a string it is, ~0.1 ms).
DType = exp.DataType.Type


def number(value: float) -> exp.Expression:
    if float(value).is_integer() and abs(value) < 2**53:
        literal: exp.Expression = exp.Literal.number(int(value))
    else:
        literal = exp.cast(exp.Literal.number(repr(float(value))), DType.DOUBLE)
    return exp.Paren(this=literal) if value < 0 else literal


def real(value: float) -> exp.Expression:
    """``value`` as a DOUBLE constant whatever its value (``CAST(5000.0 AS DOUBLE)``, never
    ``5000``): a constant of a DOUBLE expression that a bound chosen from the data sets
    (:mod:`dpsql.privacy.auto_values`) is then spelled the same at every value, so the SQL
    run after the charge differs from the one compiled before it in constants only."""
    literal = exp.cast(exp.Literal.number(repr(float(value))), DType.DOUBLE)
    return exp.Paren(this=literal) if value < 0 else literal


def whole(value: float) -> exp.Expression:
    """A whole ``value`` as an exact integer constant of any size (a HUGEINT beyond BIGINT),
    never a DOUBLE."""
    literal = exp.Literal.number(int(value))
    return exp.Paren(this=literal) if value < 0 else literal


def clamp(value: exp.Expression, lo: float, hi: float, nan: bool = True) -> exp.Expression:
    """``value`` clamped to [lo, hi], NULL kept, NaN read as NULL:

        CASE WHEN v <= hi THEN GREATEST(v, lo) WHEN v > hi THEN hi END

    NULL fails both tests and stays NULL. NaN sorts above every number in DuckDB, so it takes
    the second branch, where ``isnan`` turns it into NULL (evaluated on the rare rows above
    ``hi`` only). DuckDB drops a test that its column statistics prove always true. A DOUBLE
    value (``nan``) is clamped to DOUBLE constants (:func:`real`), an integer one to exact
    integers (:func:`whole`): a DOUBLE constant beyond 2^53 would make it a DOUBLE, and its
    sum a floating-point one (dpsql.privacy.aggregates, "Exact sums").
    """
    constant = real if nan else whole
    if not nan:  # within [lo, hi] however an integer's bounds were computed
        lo, hi = math.ceil(lo), math.floor(hi)
    high: exp.Expression = constant(hi)
    if nan:
        high = exp.Case(ifs=[exp.If(this=exp.IsNan(this=value.copy()), true=exp.Null())],
                        default=constant(hi))
    inside = greatest(value.copy(), constant(lo))
    return exp.Case(ifs=[
        exp.If(this=exp.LTE(this=value.copy(), expression=constant(hi)), true=inside),
        exp.If(this=exp.GT(this=value.copy(), expression=constant(hi)), true=high)])


def total(node: exp.Expression, table: Table, reader: Reader | None = None,
          filtering: bool = False) -> exp.Expression:
    """A row-level expression made total: columns read clamped, casts that cannot fail,
    divisions by zero that give NULL.

    With ``filtering`` (a WHERE clause, an ON clause: only TRUE keeps a row), a column compared
    directly with constants is read as stored, without clamping: a row filter cannot change how
    much one unit contributes, any comparison of matching types is total, and the engine can
    then push the filter into its scan (a float column's NaN is still read as NULL,
    :meth:`Reader.stored`, or excluded once for the whole filter: :func:`_nan_guards`). A
    column used in arithmetic is clamped as everywhere else.
    """
    reader = reader or Reader(table, {})
    node = node.copy()
    guarded = _nan_guards(node, table, reader) if filtering else {}

    def fix(n: exp.Expression) -> exp.Expression:
        # A replaced node's children are not visited again, so rebuild them with total().
        narrowed = clamped_column(n, table)
        if narrowed is not None:  # LEAST(GREATEST(x, lo), hi): x read within both bounds,
            # of x's own type, as x alone is (an automatic bound wraps x so after the charge)
            return reader.read(narrowed[0], widen=n.parent is not None, within=narrowed[1:])
        if isinstance(n, exp.Column):
            if id(n) in guarded:  # its NaN excluded by the guard AND-ed below
                return exp.column(n.name, quoted=True)
            if filtering and _compared(n) and reader.comparable(n):
                return reader.stored(n)
            if _temporal_inside(n, table, reader):  # the same test as clamped, pushable
                return exp.column(n.name, quoted=True)
            # A bare integer column is summed as stored (DuckDB sums into HUGEINT); one
            # inside an expression is widened to BIGINT first, so its arithmetic cannot
            # overflow a narrow type.
            return reader.read(n, widen=n.parent is not None)
        if isinstance(n, exp.Cast):  # CAST, ::, TRY_CAST: never fails, never narrow
            return _wide(SafeCast(this=total(n.this, table, reader, filtering),
                                     to=n.to.copy()))

        if isinstance(n, exp.StrToDate | exp.StrToTime):  # TRY_STRPTIME: NULL, not an error
            read = n.__class__(this=total(n.this, table, reader, filtering),
                               format=n.args["format"].copy(), safe=True)
            kind = "DATE" if isinstance(n, exp.StrToDate) else "TIMESTAMP"
            return clamp_date(read, *temporal_range(kind), kind=kind)
        if _is_shift(n):
            # Shifted by at most 10,000 years (dpsql.query.bounds.temporal): engines represent the
            # result; it is read back within the years 1 to 9999, as every timestamp is.
            shifted = n.__class__(this=total(n.this, table, reader, filtering),
                                  expression=total(n.expression, table, reader, filtering))
            return clamp_date(shifted, *TIMESTAMP_RANGE, kind="TIMESTAMP")
        if isinstance(n, exp.TimestampTrunc | exp.DateTrunc) and \
                bound(n.this, table).kind == "date":
            # DATE_TRUNC of a DATE is a DATE, as its bound says (query/bounds/temporal.py), on
            # every engine (DuckDB, Spark and PostgreSQL would give a timestamp).
            truncated = n.copy()
            truncated.set("this", total(n.this, table, reader, filtering))
            return exp.cast(truncated, DType.DATE)
        if isinstance(n, exp.UnixToTime):
            return _from_epoch(total(n.this, table, reader, filtering))
        if isinstance(n, exp.Literal) and not n.is_string:
            return _typed_number(n)
        if isinstance(n, exp.Round) and n.args.get("decimals") is not None:
            return round_digits(n, table, total(n.this, table, reader, filtering))
        if isinstance(n, exp.Sign):  # DuckDB's SIGN is a TINYINT: SIGN(a) + SIGN(b) + ...
            return exp.cast(exp.Sign(this=total(n.this, table, reader, filtering)), DType.BIGINT)
        if isinstance(n, exp.Div | exp.IntDiv | exp.Mod):
            divisor = total(n.expression, table, reader, filtering)
            # DuckDB's // of a double is / (7.5 // 2 is 3.75): spelled so, every engine
            # computes it as DuckDB does (PostgreSQL's DIV would cast it to BIGINT, and fail
            # on Infinity or beyond 2^63).
            kind = exp.Div if isinstance(n, exp.IntDiv) and _real(n, table) else n.__class__
            return kind(this=total(n.this, table, reader, filtering),
                               expression=exp.Nullif(this=exp.Paren(this=divisor),
                                                     expression=exp.Literal.number(0)))
        return n

    out = node.transform(fix, copy=False)
    nan = exp.cast(exp.Literal.string("NaN"), DType.DOUBLE)
    guards = [exp.NEQ(this=exp.column(name, quoted=True), expression=nan.copy())
              for name in dict.fromkeys(guarded.values())]
    return cast(exp.Expression, exp.and_(out, *guards, copy=False)) if guards else out


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    """The AND-ed parts of a condition (parentheses looked through)."""
    if node is None:
        return []
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


#: Comparisons that are NULL whenever their column operand is NULL (``IS``, ``IS [NOT]
#: DISTINCT FROM`` are TRUE or FALSE for NULL: not these).
_STRICT = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.In, exp.Between)


def _nan_guards(where: exp.Expression, table: Table, reader: Reader) -> dict[int, str]:
    """The float columns of a filter's top-level conjuncts (AND-ed, each a strict comparison
    with constants, under any number of NOTs) that may be read as stored, NaN included, if
    the filter is AND-ed with ``column <> 'NaN'``: by id, each column's name.

    A filter keeps the rows where it is TRUE, so NULL and FALSE are the same at its top.
    Such a conjunct of ``NULLIF(x, 'NaN')`` (:meth:`Reader.stored`) is NULL, not TRUE, where
    ``x`` is NULL or NaN (NOT of NULL is NULL); read as ``x`` it is the same elsewhere, and
    the guard, FALSE at NaN, drops the NaN rows (where ``x > 5`` alone would be TRUE: NaN
    sorts above every number). The two filters keep the same rows, and DuckDB pushes
    ``x > 5`` and ``x <> 'NaN'`` into its scan, which it cannot do with NULLIF (issue 39).
    Under OR, CASE or arithmetic, NULL and FALSE differ, so a column there keeps NULLIF."""
    found: dict[int, str] = {}
    for test in conjuncts(where):
        while isinstance(test, exp.Not):  # NOT of a strict comparison is strict (not of an AND)
            test = test.this.unnest()
        if not isinstance(test, _STRICT):
            continue
        # Not an item of IN's list: 5 IN (x, 5) is TRUE whatever x is.
        for operand in (test.this, test.args.get("expression")):
            column = operand.unnest() if operand is not None else None
            if not isinstance(column, exp.Column):
                continue
            meta = table.column(column.name)
            if meta is not None and meta.type == ColumnType.FLOAT and _compared(column) \
                    and reader.comparable(column):
                found[id(column)] = column.name
    return found


def _real(node: exp.IntDiv, table: Table) -> bool:
    """Whether either operand of ``//`` is a double (by :mod:`dpsql.query.bounds`)."""
    try:
        return "float" in (bound(node.this, table).kind, bound(node.expression, table).kind)
    except QueryRefused:
        return False


def clamped_column(node: exp.Expression, table: Table
                   ) -> tuple[exp.Column, float, float] | None:
    """``LEAST(GREATEST(x, lo), hi)`` of a bounded number column ``x`` and constants that
    overlap its declared bounds (of its type: whole numbers for an int column), as (x, the
    intersection): reading ``x`` clamped to the intersection is the same value (NULL kept,
    NaN read as NULL), in one CASE rather than three nested ones. The analyst's
    ``contribution_bounds_per_row`` and automatic value bounds
    (:mod:`dpsql.privacy.auto_values`) are written so. None for any other node."""
    if not (isinstance(node, exp.Least) and isinstance(node.this, exp.Greatest)
            and isinstance(node.this.this, exp.Column)
            and len(node.expressions) == 1 and len(node.this.expressions) == 1):
        return None
    meta = table.column(node.this.this.name)
    lo, hi = _constant(node.this.expressions[0]), _constant(node.expressions[0])
    if meta is None or not meta.numeric or not meta.bounded or lo is None or hi is None:
        return None
    if meta.type == ColumnType.INT:  # an integer within [2.0, 3.5] is one within [2, 3]
        lo, hi = math.ceil(lo), math.floor(hi)
    low, high = max(float(meta.lower), lo), min(float(meta.upper), hi)  # type: ignore[arg-type]
    return (node.this.this, low, high) if low <= high else None


def _constant(node: exp.Expression) -> int | float | None:
    """A number literal's value (negated under a minus), None for anything else."""
    sign = 1
    if isinstance(node, exp.Neg):
        sign, node = -1, node.this
    if not isinstance(node, exp.Literal) or node.is_string:
        return None
    try:
        value: int | float = int(node.this)
    except ValueError:
        value = float(node.this)
    return sign * value if math.isfinite(value) else None


def round_digits(node: exp.Round, table: Table, value: exp.Expression) -> exp.Expression:
    """``ROUND(x, d)`` of a row-level ``x`` (``value``, already made total), for a literal
    ``d`` (:mod:`dpsql.query.bounds` refuses any other), by one rule that every engine computes bit
    for bit, rather than each engine's own ROUND (DuckDB 1.x and 2.x, PostgreSQL and Spark all
    differ on ties and on how they read a double's digits):

    * a real ``x``: ``round(x * 10^d) / 10^d`` for ``d >= 0``, ``round(x / 10^-d) * 10^-d``
      for ``d < 0``, in IEEE double arithmetic, where ``10^|d|`` is the double nearest to it
      and ``round`` rounds a double to the nearest whole number, ties away from zero
      (:class:`~dpsql.engines.ir.RoundHalfAway`). The product and the quotient are correctly
      rounded on every engine; whole-number rounding is exact (each dialect spells it).
      This is DuckDB 1.x's ROUND: ``ROUND(0.15, 1)`` is 0.2 (0.15 * 10 is exactly 1.5 in
      doubles), where DuckDB 2.x rounds the binary value of 0.15 (0.1499999...) to 0.1;
    * an integer ``x``: itself for ``d >= 0``; for ``d < 0`` the nearest multiple of
      ``10^-d``, ties away from zero, in exact integer arithmetic, which every engine's ROUND
      of an integer computes (and :mod:`dpsql.query.bounds` keeps inside 64 bits).

    Either way the result is a multiple of ``10^-d`` up to one rounding of the division, next
    to ``x``: :func:`dpsql.query.bounds.numbers._round` widens ``x``'s interval to the multiples of
    ``10^-d`` around it, and the aggregate's clamp absorbs the last ulp."""
    places = int(literal_value(node.args["decimals"], "ROUND's number of digits"))
    if bound(node.this, table).kind != "float":
        return value if places >= 0 else exp.Round(this=value,
                                                   decimals=node.args["decimals"].copy())
    scale = exp.cast(exp.Literal.number(f"1e{abs(places)}"), DType.DOUBLE)
    operand = exp.Paren(this=value)
    if places >= 0:
        whole = RoundHalfAway(this=exp.Mul(this=operand, expression=scale))
        return exp.Paren(this=exp.Div(this=whole, expression=scale.copy()))
    whole = RoundHalfAway(this=exp.Div(this=operand, expression=scale))
    return exp.Paren(this=exp.Mul(this=whole, expression=scale.copy()))


def _is_shift(node: exp.Expression) -> bool:
    """A date or a timestamp plus or minus an INTERVAL (INTERVAL + d too)."""
    return isinstance(node, exp.Add | exp.Sub) and (isinstance(node.expression, exp.Interval) or
                                                    isinstance(node.this, exp.Interval))


def _typed_number(literal: exp.Literal) -> exp.Expression:
    """A number literal with the type that :mod:`dpsql.query.bounds` gives it. DuckDB reads 1.5 as
    a DECIMAL (see _wide) and 2147483647 as an INTEGER, so ``CASE ... THEN 2147483647 END + 1``
    would overflow INT32 on the rows that take the branch: integers are BIGINT (DOUBLE beyond
    64 bits), reals DOUBLE. A comparison operand keeps its literal, which cannot overflow and
    lets the engine push the filter into its scan; so do the digits of ROUND (an INTEGER)."""
    if not literal.is_int:
        return exp.cast(literal.copy(), DType.DOUBLE)
    parent = literal.parent.parent if isinstance(literal.parent, exp.Neg) else literal.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    fits = int(literal.this) < 2**63  # a BIGINT; beyond, DuckDB converts it to DOUBLE lazily
    if (isinstance(parent, _COMPARISONS) and fits) or literal.arg_key == "decimals":
        return literal.copy()
    return exp.cast(literal.copy(), "BIGINT" if fits else "DOUBLE")


_COMPARISONS = (*COMPARISONS, exp.Is)


def _compared(column: exp.Column) -> bool:
    """Is the column an operand of a comparison whose other operands are constants?"""
    parent = column.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if not isinstance(parent, _COMPARISONS):
        return False
    others = [e for e in parent.iter_expressions() if e is not cast(exp.Expression, column) and
              not isinstance(e, exp.Paren | exp.DataType)]
    return all(isinstance(e, exp.Literal | exp.Null | exp.Boolean) or (
        isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal)) for e in others)


_NARROW_INTEGERS = {DType.TINYINT, DType.SMALLINT, DType.INT,
                    DType.UTINYINT, DType.USMALLINT,
                    DType.UINT, DType.UBIGINT}


#: Dates and timestamps that every engine function and the Python client handle: DuckDB's
#: DATE reaches year 5,881,580 and 'infinity', but DATE_TRUNC to an hour fails beyond year
#: 294,247 and the client turns 'infinity' into 9999-12-31. Unbounded dates are read in here.
DATE_RANGE = (dt.date(1, 1, 1), dt.date(9999, 12, 31))
#: The same years as instants: the last one is the last microsecond of 9999-12-31.
TIMESTAMP_RANGE = (dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999))


def temporal_range(kind: str) -> tuple[dt.date, dt.date]:
    """:data:`DATE_RANGE` for ``DATE``, :data:`TIMESTAMP_RANGE` for ``TIMESTAMP``."""
    return TIMESTAMP_RANGE if kind == "TIMESTAMP" else DATE_RANGE


def read_range(meta: Column) -> tuple[dt.date, dt.date]:
    """The interval a date or timestamp column is read clamped to: its declared bounds within
    :func:`temporal_range` (all of it without them)."""
    timestamp = meta.type == ColumnType.TIMESTAMP
    lo, hi = temporal_range("TIMESTAMP" if timestamp else "DATE")
    kind = dt.datetime if timestamp else dt.date
    if isinstance(meta.lower, kind) and isinstance(meta.upper, kind):
        lo, hi = max(meta.lower, lo), min(meta.upper, hi)
    return lo, hi


#: How a date and a timestamp constant are spelled once typed (dpsql.query.fold_constants).
_ISO = {"DATE": re.compile(r"\d{4}-\d{2}-\d{2}"),
        "TIMESTAMP": re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?")}


def _temporal_inside(column: exp.Column, table: Table, reader: Reader) -> bool:
    """Is ``column`` a date or timestamp stored as its type and an operand of a strict
    comparison whose other operands are constants of that type (or timestamps, for a date)
    strictly inside the interval it is read clamped to (:func:`read_range`)? Then the
    comparison of the clamped value and of the stored one are the same for every row, NULL
    included (a value below ``lo`` and ``lo`` itself are both below every such constant; so
    for ``hi``), anywhere in any expression, and the stored one can be pushed into the
    engine's scan (``day >= '2025-03-01'``, ``day > NOW() - INTERVAL 30 DAY``: a dashboard's
    time range)."""
    meta = table.column(column.name)
    parent = column.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if meta is None or meta.type not in (ColumnType.DATE, ColumnType.TIMESTAMP) or \
            not isinstance(parent, _STRICT) or not reader.comparable(column):
        return False
    lo, hi = read_range(meta)
    # A date compared with a timestamp constant: see _inside.
    kinds = ("DATE", "TIMESTAMP") if meta.type == ColumnType.DATE else ("TIMESTAMP",)
    for operand in parent.iter_expressions():
        constant = operand.unnest()
        if constant is cast(exp.Expression, column):
            continue
        kind = constant.to.this.value if isinstance(constant, exp.Cast) else ""
        if not (kind in kinds and isinstance(constant.this, exp.Literal)
                and constant.this.is_string and _ISO[kind].fullmatch(constant.this.this)):
            return False
        try:  # year 0, February 30th: not a value to reason about
            value = (dt.datetime if kind == "TIMESTAMP" else dt.date).fromisoformat(
                constant.this.this)
        except ValueError:
            return False
        if not _inside(value, lo, hi):
            return False
    return True


def _inside(value: dt.date, lo: dt.date, hi: dt.date) -> bool:
    """``lo < value < hi``; a timestamp against a date's bounds by its midnight, and by its day
    too (PostgreSQL's dialect reads a timestamp constant compared with a date as its day):
    inside either way."""
    if isinstance(value, dt.datetime) and not isinstance(lo, dt.datetime):
        return lo < value.date() and value < dt.datetime.combine(hi, dt.time())
    return lo < value < hi


def clamp_date(value: exp.Expression, lo: dt.date, hi: dt.date, kind: str = "DATE"
               ) -> exp.Expression:
    """``value`` (a DATE or TIMESTAMP) clamped to [lo, hi], NULL kept:
    ``CASE WHEN v < lo THEN lo WHEN v > hi THEN hi ELSE v END``. 'infinity' and '-infinity'
    compare beyond every bound, so they are clamped too."""
    low, high = (exp.cast(exp.Literal.string(_iso(d)), kind) for d in (lo, hi))
    return exp.Paren(this=exp.Case(ifs=[
        exp.If(this=exp.LT(this=value.copy(), expression=low), true=low.copy()),
        exp.If(this=exp.GT(this=value.copy(), expression=high), true=high.copy())],
        default=value.copy()))


#: The seconds since 1970-01-01 of the first and the last second of TIMESTAMP_RANGE.
EPOCH_RANGE = (-62135596800.0, 253402300799.0)


def _from_epoch(seconds: exp.Expression) -> exp.Expression:
    """TO_TIMESTAMP(seconds) that cannot fail: the seconds clamped to :data:`EPOCH_RANGE` (NaN
    as NULL), converted to whole microseconds, made a TIMESTAMP (DuckDB's MAKE_TIMESTAMP)."""
    clamped = clamp(exp.cast(seconds, DType.DOUBLE), *EPOCH_RANGE)
    micros = exp.cast(RoundHalfAway(this=exp.Mul(
        this=exp.Paren(this=clamped), expression=exp.Literal.number(1000000))), DType.BIGINT)
    return clamp_date(exp.UnixToTime(this=micros, scale=exp.UnixToTime.MICROS),
                      *TIMESTAMP_RANGE, kind="TIMESTAMP")


def _iso(day: dt.date) -> str:
    return day.isoformat(sep=" ") if isinstance(day, dt.datetime) else day.isoformat()


def _wide(cast: exp.TryCast) -> exp.Expression:
    """Arithmetic on narrow or unsigned integers and on DECIMALs fails in DuckDB when it
    overflows (CAST(age AS TINYINT) + CAST(age AS TINYINT)), and the error message quotes the
    row's values. The bounds already keep every value inside 64-bit integers and doubles, so
    such a cast is widened right away: the arithmetic then runs on BIGINT or DOUBLE."""
    target = cast.to.this
    if target in (DType.DATE, DType.TIMESTAMP):
        return clamp_date(cast, *temporal_range(target.value), kind=target.value)
    if target in _NARROW_INTEGERS:
        return SafeCast(this=cast, to=exp.DataType.build(DType.BIGINT))
    if target == DType.DECIMAL:
        return SafeCast(this=cast, to=exp.DataType.build(DType.DOUBLE))
    return cast


_INTEGER_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT",
                  "UINTEGER"}
_FLOAT_TYPES = {"DOUBLE", "FLOAT", "REAL"}
_COMPARABLE = {"int": _INTEGER_TYPES | {"UBIGINT", "HUGEINT"}, "float": _FLOAT_TYPES,
               "text": {"VARCHAR"}, "bool": {"BOOLEAN"}, "date": {"DATE"},
               "timestamp": {"TIMESTAMP"}}


class Reader:
    """How each column of the table is read: widened to BIGINT or DOUBLE, clamped to its
    declared bounds, NaN as NULL. A cast from a type that always converts is a plain CAST;
    any other source type (say, text declared as int) gets a TRY_CAST, NULL if it fails."""

    def __init__(self, table: Table, physical: Mapping[str, str]) -> None:
        self.table = table
        self.physical = {k.lower(): v.upper() for k, v in physical.items()}

    def comparable(self, column: exp.Column) -> bool:
        meta = self.table.column(column.name)
        stored = self.physical.get(column.name.lower(), "")
        return meta is not None and stored.split("(")[0] in _COMPARABLE.get(meta.type, set())

    def unit(self, name: str) -> exp.Expression:
        """The canonical identity of a unit column (or of a ``unit_path`` link): the stored
        value read as its declared type, *never clamped*, NULL where it does not convert (and
        for NaN). Every reader of a unit's identity goes through here -- the NULL filter of
        ``__rows``, the unit bounding partitions by, ``COUNT(DISTINCT unit)``, ``prebound``,
        ``__join_unit``, equalities of units and links in ON, both sides of a semi-join
        (:mod:`dpsql.execution.rewrite`, :mod:`dpsql.query.joins`) -- so that:

        * all spellings of one value are one unit: ``'99'``, ``'099'``, ``'+99'``, ``' 99'``
          stored as text in a column declared int are the unit 99, the row that
          ``WHERE pid = 99`` (read through :meth:`read`) matches, bounded together to k rows;
        * a value that does not convert (``'abc'`` declared int) is a NULL unit, dropped as
          NULL units are, not a unit of its own;
        * two distinct values are never merged: a unit is an identity, not a value to clamp
          (clamping to declared bounds would merge units beyond them into one, whose sample a
          newly added person would then change).

        A column read as stored (text, the declared type already, or a column of no declared
        type such as ``__join_unit``, built from these) is its own identity."""
        meta = self.table.column(name)
        ref = exp.column(name, quoted=True)
        stored = self.physical.get(name.lower(), "").split("(")[0]
        if meta is None or meta.type == ColumnType.TEXT:
            return ref
        if meta.type == ColumnType.INT:
            return ref if stored in _INTEGER_TYPES else exp.TryCast(
                this=ref, to=exp.DataType.build(DType.BIGINT))
        if meta.type == ColumnType.FLOAT:
            value: exp.Expression = ref if stored == "DOUBLE" else exp.TryCast(
                this=ref, to=exp.DataType.build(DType.DOUBLE))
            return exp.Nullif(this=value, expression=exp.cast(exp.Literal.string("NaN"),
                                                              DType.DOUBLE))
        if meta.type == ColumnType.TIMESTAMP and (stored.startswith("TIMESTAMP WITH TIME ZONE")
                                         or stored == "TIMESTAMPTZ"):
            return exp.AtTimeZone(this=ref, zone=exp.Literal.string("UTC"))
        typed = {"bool": "BOOLEAN", "date": "DATE", "timestamp": "TIMESTAMP"}[meta.type]
        return ref if stored == typed else exp.TryCast(this=ref,
                                                       to=exp.DataType.build(typed))

    def stored(self, column: exp.Column) -> exp.Expression:
        """``column`` as stored, unclamped (a filter's comparison with constants, which the
        engine can push into its scan), NaN read as NULL as everywhere else: NaN is NULL in
        WHERE as in expressions, keys and aggregates, on every engine. A clamped value is
        never NaN (a NaN in a sum would make the noisy sum NaN, revealing its row), so a
        filter that read NaN as above every number would disagree with the same comparison
        inside an expression (``amount > 5`` against ``amount * 2 > 10``)."""
        ref = exp.column(column.name, quoted=True)
        meta = self.table.column(column.name)
        if meta is None or meta.type != ColumnType.FLOAT:
            return ref
        return exp.Nullif(this=ref, expression=exp.cast(exp.Literal.string("NaN"), DType.DOUBLE))

    def read(self, column: exp.Column, widen: bool = True,
             within: tuple[float, float] | None = None) -> exp.Expression:
        """``column`` read as its declared type, a number clamped to its declared bounds (to
        ``within``, inside them, when given: :func:`clamped_column`)."""
        meta = self.table.column(column.name)
        ref = exp.column(column.name, quoted=True)
        stored = self.physical.get(column.name.lower(), "").split("(")[0]
        if meta is not None and meta.type == ColumnType.DATE:
            return self._date(ref, meta, stored)
        if meta is not None and meta.type == ColumnType.TIMESTAMP:
            return self._timestamp(ref, meta, stored)
        if meta is not None and meta.type == ColumnType.BOOL and stored not in _COMPARABLE["bool"]:
            # Text declared as bool would be cast row by row, and fail on some rows only
            # (WHERE flag: "Could not convert string 'maybe' to BOOL"): NULL instead.
            return SafeCast(this=ref, to=exp.DataType.build(DType.BOOLEAN))
        if meta is None or meta.type not in (ColumnType.INT, ColumnType.FLOAT):
            return ref
        value: exp.Expression = ref
        if meta.type == ColumnType.INT:
            if stored != "BIGINT" and (widen or stored not in _INTEGER_TYPES):
                cast = exp.Cast if stored in _INTEGER_TYPES else SafeCast
                value = cast(this=ref, to=exp.DataType.build(DType.BIGINT))
        elif stored != "DOUBLE":
            safe = stored in _FLOAT_TYPES or stored in _INTEGER_TYPES or stored == "DECIMAL"
            value = (exp.Cast if safe else SafeCast)(this=ref, to=exp.DataType.build(DType.DOUBLE))
        if not meta.bounded:
            if meta.type == ColumnType.FLOAT:
                value = exp.Nullif(this=value, expression=exp.cast(exp.Literal.string("NaN"),
                                                                   DType.DOUBLE))
            return exp.Paren(this=value)
        lo, hi = within or (float(meta.lower), float(meta.upper))  # type: ignore[arg-type]
        return exp.Paren(this=clamp(value, lo, hi, nan=meta.type == ColumnType.FLOAT))

    @staticmethod
    def _date(ref: exp.Expression, meta: Column, stored: str) -> exp.Expression:
        """A date column read clamped to its declared bounds (to :data:`DATE_RANGE` without
        them), as numbers are: 'infinity' or year 300000 would otherwise overflow YEAR()
        arithmetic or DATE_TRUNC on the rows holding them. Text declared as a date is read
        with TRY_CAST (NULL where it does not convert)."""
        value: exp.Expression = ref
        if stored not in _COMPARABLE["date"]:
            value = SafeCast(this=ref, to=exp.DataType.build(DType.DATE))
        return clamp_date(value, *read_range(meta))

    @staticmethod
    def _timestamp(ref: exp.Expression, meta: Column, stored: str) -> exp.Expression:
        """A timestamp column read clamped to its declared bounds (to :data:`TIMESTAMP_RANGE`
        without them), as dates are. TIMESTAMP WITH TIME ZONE is read as the UTC instant
        (``AT TIME ZONE 'UTC'``: the same on every engine, whatever the session's zone), a
        DATE as its midnight, text with TRY_CAST (NULL where it does not convert)."""
        value: exp.Expression = ref
        if stored.startswith("TIMESTAMP WITH TIME ZONE") or stored == "TIMESTAMPTZ":
            value = exp.AtTimeZone(this=ref, zone=exp.Literal.string("UTC"))
        elif stored == "DATE" or stored.startswith("TIMESTAMP_"):
            value = exp.Cast(this=ref, to=exp.DataType.build(DType.TIMESTAMP))
        elif stored not in _COMPARABLE["timestamp"]:
            value = SafeCast(this=ref, to=exp.DataType.build(DType.TIMESTAMP))
        return clamp_date(value, *read_range(meta), kind="TIMESTAMP")
