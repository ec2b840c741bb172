"""Interval arithmetic from the declared bounds (and the allow list of row-level SQL)."""

from __future__ import annotations

import datetime as dt
import math
from types import SimpleNamespace

import pytest
import sqlglot

from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.errors import ForbiddenFunction, UnboundedExpression
from dpsql.metadata.metadata import Table
from dpsql.query.bounds import INT_LIMIT, Bound, bound, numeric_bound

INF = math.inf


@pytest.fixture
def t(kit: SimpleNamespace) -> Table:
    md = kit.metadata_from({"t": {"columns": {
        "a": {"type": "int", "lower": 1, "upper": 3},
        "b": {"type": "int", "lower": -2, "upper": 5},
        "k": {"type": "int", "lower": 2, "upper": 4},
        "x": {"type": "float", "lower": -1, "upper": 4},
        "p": {"type": "float", "lower": 2, "upper": 8},
        "n": {"type": "int", "lower": 0, "upper": 10, "nullable": True},
        "u": {"type": "int"},
        "big": {"type": "int", "lower": 0, "upper": 2**40},
        "s": {"type": "text"},
        "flag": {"type": "bool"},
        "day": {"type": "date", "lower": dt.date(2020, 1, 1), "upper": dt.date(2024, 6, 30)},
    }}})
    table = md.table("t")
    assert table is not None
    return table


def bnd(sql: str, t: Table) -> Bound:
    return bound(sqlglot.parse_one(sql, read="duckdb"), t)


def interval(sql: str, t: Table) -> tuple[str, float, float]:
    result = bnd(sql, t)
    return result.kind, result.lo, result.hi


@pytest.mark.parametrize(("sql", "expected"), [
    # columns and literals
    ("a", ("int", 1, 3)),
    ("x", ("float", -1, 4)),
    ("7", ("int", 7, 7)),
    ("2.5", ("float", 2.5, 2.5)),
    ("u", ("int", -INF, INF)),
    ("flag", ("bool", 0, 1)),
    # + - * by ranges with and without zero
    ("a + b", ("int", -1, 8)),
    ("a - b", ("int", -4, 5)),
    ("b - a", ("int", -5, 4)),
    ("a * b", ("int", -6, 15)),
    ("b * b", ("int", -10, 25)),  # interval arithmetic does not know both are the same value
    ("x * b", ("float", -8, 20)),
    ("a * 2.5", ("float", 2.5, 7.5)),
    ("-b", ("int", -5, 2)),
    ("a + 1", ("int", 2, 4)),
    ("flag + 1", ("int", 1, 2)),
    # division: by a range that excludes zero, or not
    ("a / p", ("float", 1 / 8, 3 / 2)),
    ("x / k", ("float", -1 / 2, 2)),
    ("x / -p", ("float", -2, 1 / 2)),
    ("a // k", ("int", 0, 2)),
    ("a / b", ("float", -INF, INF)),
    ("a / x", ("float", -INF, INF)),
    ("a / 0", ("float", -INF, INF)),
    # modulo
    ("a % 3", ("int", 0, 3)),
    ("b % k", ("int", -4, 4)),
    # ABS, SIGN, ROUND, FLOOR, CEIL, SQRT, LN, EXP
    ("ABS(b)", ("int", 0, 5)),
    ("ABS(a)", ("int", 1, 3)),
    ("ABS(-p)", ("float", 2, 8)),
    ("SIGN(b)", ("int", -1, 1)),
    ("SIGN(a)", ("int", 1, 1)),
    ("ROUND(x)", ("float", -1, 4)),
    ("ROUND(a)", ("int", 1, 3)),
    ("ROUND(p / 3)", ("float", 0, 3)),
    ("FLOOR(p / 3)", ("float", 0, 2)),
    ("CEIL(p / 3)", ("float", 1, 3)),
    ("SQRT(p)", ("float", math.sqrt(2), math.sqrt(8))),
    ("SQRT(x)", ("float", 0, 2)),
    ("LN(p)", ("float", math.log(2), math.log(8))),
    ("LN(n)", ("float", -INF, math.log(10))),
    ("EXP(a)", ("float", math.exp(1), math.exp(3))),
    # LEAST / GREATEST
    ("LEAST(a, 2)", ("int", 1, 2)),
    ("GREATEST(b, 0)", ("int", 0, 5)),
    ("LEAST(x, a)", ("float", -1, 3)),
    ("LEAST(u, 10)", ("int", -INF, 10)),
    ("GREATEST(LEAST(u, 10), 0)", ("int", 0, 10)),
    ("LEAST(GREATEST(a / b, -10), 10)", ("float", -10, 10)),
    # CASE / IF / COALESCE / NULLIF
    ("CASE WHEN a > 1 THEN x ELSE 10 END", ("float", -1, 10)),
    ("CASE WHEN a > 1 THEN 1 ELSE 0 END", ("int", 0, 1)),
    ("CASE a WHEN 1 THEN -3 WHEN 2 THEN 7 END", ("int", -3, 7)),
    ("CASE WHEN s = 'x' THEN b END", ("int", -2, 5)),
    ("IF(flag, a, b)", ("int", -2, 5)),
    ("COALESCE(n, -5)", ("int", -5, 10)),
    ("COALESCE(n, a)", ("int", 0, 10)),
    ("NULLIF(a, 2)", ("int", 1, 3)),
    # CAST
    ("CAST(x AS INTEGER)", ("int", -1, 4)),
    ("CAST(p / 3 AS BIGINT)", ("int", 0, 3)),
    ("CAST(a AS DOUBLE)", ("float", 1, 3)),
    ("CAST(a AS DECIMAL(10, 2))", ("float", 1, 3)),
    ("CAST(s AS INTEGER)", ("int", -INF, INF)),
    ("TRY_CAST(s AS DOUBLE)", ("float", -INF, INF)),
    ("CAST(flag AS INTEGER)", ("int", 0, 1)),
    ("a::DOUBLE", ("float", 1, 3)),
    # POWER
    ("POWER(b, 2)", ("float", 0, 25)),
    ("POWER(a, 3)", ("float", 1, 27)),
    ("POWER(b, 3)", ("float", -8, 125)),
    ("POWER(b, 0)", ("float", 0, 1)),  # sound, if loose: 0 is inside every even power
    ("POWER(p, 0.5)", ("float", math.sqrt(2), math.sqrt(8))),
    ("b ^ 2", ("float", 0, 25)),
    # dates
    ("YEAR(day)", ("int", 2020, 2024)),
    ("EXTRACT(YEAR FROM day)", ("int", 2020, 2024)),
    ("MONTH(day)", ("int", 1, 12)),
    ("EXTRACT(MONTH FROM day)", ("int", 1, 12)),
    ("DAYOFWEEK(day)", ("int", 0, 6)),
    ("QUARTER(day)", ("int", 1, 4)),
    # predicates are booleans
    ("a > 1", ("bool", 0, 1)),
    ("s LIKE 'a%' AND NOT flag", ("bool", 0, 1)),
    ("a BETWEEN 1 AND 2", ("bool", 0, 1)),
    ("n IS NULL", ("bool", 0, 1)),
    ("s IN ('a', 'b')", ("bool", 0, 1)),
])
def test_intervals(sql: str, expected: tuple[str, float, float], t: Table) -> None:
    kind, lo, hi = interval(sql, t)
    assert kind == expected[0]
    assert lo == pytest.approx(expected[1]) and hi == pytest.approx(expected[2])


def test_every_interval_is_sound_on_a_grid(t: Table) -> None:
    """Evaluate a few expressions on a grid of column values: every value lies inside."""
    import itertools

    cases = {
        "a * b - x": lambda a, b, x: a * b - x,
        "(a + x) / k": None,  # k not in the grid below; checked through a, x only at k = 2, 4
        "ABS(b - x) * a": lambda a, b, x: abs(b - x) * a,
        "CASE WHEN b > 0 THEN a * x ELSE -x END": lambda a, b, x: a * x if b > 0 else -x,
        "LEAST(GREATEST(b * x, -3), 6)": lambda a, b, x: min(max(b * x, -3), 6),
        "POWER(x - a, 2)": lambda a, b, x: (x - a) ** 2,
    }
    grid = itertools.product([1, 2, 3], [-2, -1, 0, 3, 5], [-1.0, -0.5, 0.0, 1.5, 4.0])
    points = list(grid)
    for sql, fn in cases.items():
        if fn is None:
            continue
        b = bnd(sql, t)
        for a, bb, x in points:
            value = fn(a, bb, x)
            assert b.lo - 1e-9 <= value <= b.hi + 1e-9, (sql, a, bb, x, value, b)


def test_nullability(t: Table) -> None:
    assert not bnd("a", t).nullable
    assert bnd("n", t).nullable
    assert bnd("x", t).nullable  # a float column may hold NaN, read as NULL
    assert not bnd("COALESCE(n, 0)", t).nullable
    assert bnd("CASE WHEN a > 1 THEN 1 END", t).nullable  # no ELSE
    assert not bnd("CASE WHEN a > 1 THEN 1 ELSE 0 END", t).nullable
    assert bnd("a / b", t).nullable
    assert bnd("CAST(a AS DOUBLE)", t).nullable  # TRY_CAST in the engine
    assert bnd("SQRT(x)", t).nullable  # negative input
    assert not bnd("SQRT(p)", t).nullable or bnd("p", t).nullable


def test_text_and_date_kinds(t: Table) -> None:
    assert bnd("s", t).kind == "text"
    assert bnd("UPPER(s) || 'x'", t).kind == "text"
    assert bnd("LENGTH(s)", t) == Bound("int", 0, INF, False)
    assert bnd("CAST(a AS VARCHAR)", t).kind == "text"
    assert bnd("day", t).kind == "date"
    assert bnd("DATE_TRUNC('month', day)", t).kind == "date"


@pytest.mark.parametrize("sql", [
    "big * big",
    "big * big - 1",
    "(big + 1) * (big + 1)",
    "POWER(a, 2) * 0 + big * big",
])
def test_integer_overflow_is_refused(sql: str, t: Table) -> None:
    with pytest.raises(UnboundedExpression, match="64-bit integer range"):
        bnd(sql, t)


def test_overflow_limit_and_the_double_escape(t: Table) -> None:
    assert bnd("big * 1024", t).hi == 2.0**50
    assert bnd("big * 1024", t).hi < INT_LIMIT
    b = bnd("CAST(big AS DOUBLE) * big", t)
    assert b.kind == "float" and b.hi == 2.0**80


@pytest.mark.parametrize(("sql", "error", "match"), [
    ("POWER(b, 0.5)", UnboundedExpression, "POWER"),
    ("POWER(a, x)", UnboundedExpression, "exponent of POWER"),
    ("POWER(b, 17)", UnboundedExpression, "POWER"),
    ("ROUND(x, a)", UnboundedExpression, "digits"),
    ("CASE WHEN a > 1 THEN s ELSE 1 END", UnboundedExpression, "mix types"),
    ("s + 1", UnboundedExpression, "is text, not a number"),
    ("s > 1", UnboundedExpression, "compares text with a number"),
    ("CAST(a AS BLOB)", UnboundedExpression, "CAST to"),
    ("YEAR(a)", UnboundedExpression, "needs a date"),
    ("EXTRACT(TIMEZONE FROM day)", UnboundedExpression, "TIMEZONE"),
    ("LOG(1, p)", UnboundedExpression, "base"),
    ("md5(s)", ForbiddenFunction, "MD5"),
    ("random()", ForbiddenFunction, "not allowed"),
    ("hash(a)", ForbiddenFunction, "not allowed"),
    ("getenv('HOME')", ForbiddenFunction, "GETENV"),
    ("current_setting('threads')", ForbiddenFunction, "not allowed"),
    ("[a, b]", ForbiddenFunction, "not allowed"),
])
def test_refused_expressions(sql: str, error: type[Exception], match: str, t: Table) -> None:
    with pytest.raises(error, match=match):
        bnd(sql, t)


def test_numeric_bound_messages(t: Table) -> None:
    e = sqlglot.parse_one
    assert numeric_bound(e("a * x"), t, "SUM(a * x)").finite
    with pytest.raises(UnboundedExpression, match="column u of table 't' needs lower and upper"):
        numeric_bound(e("u + a"), t, "SUM(u + a)")
    with pytest.raises(UnboundedExpression, match="division by a range that contains zero"):
        numeric_bound(e("a / b"), t, "SUM(a / b)")
    with pytest.raises(UnboundedExpression, match="SUM\\(s\\): s is text, not a number"):
        numeric_bound(e("s"), t, "SUM(s)")
    with pytest.raises(UnboundedExpression, match="LEAST/GREATEST"):
        numeric_bound(e("CAST(s AS INTEGER)"), t, "SUM(CAST(s AS INTEGER))")


def test_magnitude() -> None:
    assert Bound("int", -7, 3).magnitude == 7
    assert Bound("float", 2, 5).magnitude == 5
    assert Bound("float", 2, 5).finite and not Bound("float", 2, INF).finite


def _rounded(x: float, digits: int) -> float:
    """dpsql.query.total_expressions.round_digits's rule, in Python's IEEE doubles."""
    scale = float(10 ** abs(digits))
    v = x * scale if digits >= 0 else x / scale
    whole = math.trunc(v) + (math.copysign(1.0, v) if abs(v - math.trunc(v)) >= 0.5 else 0.0)
    return whole / scale if digits >= 0 else whole * scale


@pytest.mark.parametrize("digits", [0, 1, 2, 3, -1])
def test_round_with_digits_is_the_documented_rule_on_duckdb(digits: int, t: Table) -> None:
    """ROUND(x, d) of a real is spelled out (dpsql.query.total_expressions.round_digits), not left
    to DuckDB's ROUND, which changed between 1.x and 2.x on ties such as 0.15 and 2.675; every value
    also stays inside the interval dpsql.query.bounds derives."""
    import duckdb

    from dpsql.query.total_expressions import total

    node = sqlglot.parse_one(f"ROUND(x, {digits})", read="duckdb")
    sql = total(node, t).sql(dialect=DuckDBDialect)
    values = [0.15, -0.15, 2.675, 1.005, 0.285, 1.25, -0.25, 0.49999999999999994, 3.45, 2.5]
    b = bound(node, t)
    with duckdb.connect() as con:
        for x in values:
            got = con.execute(f"SELECT {sql} FROM (SELECT ?::DOUBLE AS x)", [x]).fetchone()
            assert got == (_rounded(x, digits),), (x, digits, got)
            assert b.lo <= got[0] <= b.hi
    assert _rounded(0.15, 1) == 0.2 and _rounded(2.675, 2) == 2.68  # not 0.1, 2.67


def test_round_of_an_integer_keeps_it_an_integer(t: Table) -> None:
    from dpsql.query.total_expressions import total

    assert "ROUND" not in total(sqlglot.parse_one("ROUND(a, 2)"), t).sql(dialect=DuckDBDialect)
    assert bnd("ROUND(a, 2)", t).kind == "int"
    assert "ROUND" in total(sqlglot.parse_one("ROUND(big, -3)"), t).sql(dialect=DuckDBDialect)
