"""Pass 5, rewrite: the engine query. It runs on DuckDB, clamps, is total (no row can make it
fail), and bounds each unit's contribution with a secret per-query salt."""

from __future__ import annotations

import math
import re
from collections import Counter
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import duckdb
import numpy as np
import pytest
from sqlglot import exp

from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.execution.rewrite import rewrite
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.plan import Plan
from dpsql.routes.pipeline import answer
from dpsql.routes.planner import Planner


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    """The conftest tables with hostile data: out-of-range values, NaN, +-Inf, NULL, text
    that does not convert."""
    c = duckdb.connect()
    c.execute("CREATE TABLE people (pid BIGINT, age INTEGER, income DOUBLE, sex VARCHAR, "
              "state VARCHAR, kids INTEGER, married BOOLEAN, born DATE, code VARCHAR)")
    c.execute("""INSERT INTO people VALUES
        (1, 30, 500.0, 'F', 'CA', 1, true, DATE '1990-01-01', '12'),
        (2, 150, 'inf', 'M', 'NY', 9, false, DATE '1940-01-01', 'abc'),
        (3, -5, '-inf', 'X', NULL, -1, NULL, NULL, NULL),
        (4, NULL, 'nan', NULL, 'CA', NULL, true, DATE '2010-05-05', '7.5'),
        (5, 0, NULL, 'F', 'CA', 0, false, DATE '1980-02-02', ''),
        (6, 100, 2000.0, 'M', 'TX', 3, true, DATE '1975-03-03', '-3')""")
    c.execute("CREATE TABLE visits (pid BIGINT, cat VARCHAR, amount DOUBLE, n INTEGER)")
    return c


def run(con: duckdb.DuckDBPyConnection, p: Plan, salt: int = 7) -> list[tuple[Any, ...]]:
    sql = rewrite(p).sql(dialect=DuckDBDialect)
    return con.execute(sql, [salt] if "$1" in sql else None).fetchall()


def cte(p: Plan, final: str, name: str) -> str:
    """The rewritten query's CTEs, followed by ``final`` reading CTE ``name``."""
    tree = rewrite(p)
    query = exp.maybe_parse(final, dialect="duckdb")
    assert isinstance(query, exp.Select)
    query.set("with_", tree.args["with_"].copy())
    assert name in [c.alias for c in tree.args["with_"].expressions]
    return query.sql(dialect=DuckDBDialect)


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM people",
    "SELECT sex, COUNT(*), SUM(age), AVG(income), VAR(age), STDDEV(income) FROM people "
    "GROUP BY sex",
    "SELECT MEDIAN(age), MIN(income), MAX(kids), QUANTILE_CONT(age, 0.9) FROM people",
    "SELECT SUM(CASE WHEN age > 60 THEN 1 ELSE 0 END), SUM(age * kids), AVG(income / 12) "
    "FROM people",
    "SELECT COUNT(DISTINCT pid), COUNT(DISTINCT state), COUNT(income) FROM people",
    "SELECT SUM(LEAST(GREATEST(CAST(code AS INTEGER), 0), 100)) FROM people",
    "SELECT SUM(LEAST(GREATEST(income / kids, -10), 10)) FROM people",
    "SELECT SUM(LEAST(GREATEST(age // kids, -10), 10)), SUM(kids % 0) FROM people",
    "SELECT COUNT(*) FROM people WHERE CAST(code AS INTEGER) > 3",
    "SELECT COUNT(*) FROM people WHERE income / kids > 1 OR code::DOUBLE < 0",
    "SELECT state, COUNT(*) FROM people WHERE state IS NOT NULL GROUP BY state",
    "SELECT YEAR(born), COUNT(*) FROM people GROUP BY 1",
    "SELECT CASE WHEN age < 40 THEN 'young' ELSE 'old' END AS g, SUM(SQRT(income)) "
    "FROM people GROUP BY g",
    "SELECT married, AVG(POWER(age - 50, 2)) FROM people GROUP BY married",
    "SELECT SUM(ROUND(income / 3, 2)), SUM(ABS(kids - 2)), SUM(COALESCE(income, 0)) FROM people",
    "SELECT COUNT(*) FILTER (WHERE sex = 'F'), COUNT_IF(age > 10) FROM people",
    "SELECT cat, COUNT(*), SUM(amount), COUNT(DISTINCT pid), MEDIAN(n) FROM visits GROUP BY cat",
    "SELECT n, AVG(amount) FROM visits GROUP BY n",
])
def test_rewritten_sql_runs_on_hostile_data(sql: str, con: duckdb.DuckDBPyConnection,
                                            md: Metadata) -> None:
    p = Planner(md).prepare(sql, delta=1e-6)
    rows = run(con, p)
    assert rows is not None
    if not p.keys:
        assert len(rows) == 1


def test_clamping_really_clamps(con: duckdb.DuckDBPyConnection, md: Metadata) -> None:
    # age declared 0..100: 150 -> 100, -5 -> 0; NULL stays out.
    p = Planner(md).prepare("SELECT SUM(age), COUNT(age), AVG(income) FROM people")
    assert run(con, p)[0][:2] == (30 + 100 + 0 + 0 + 100, 5)
    # The aggregated input itself never leaves its interval.
    values = [r[0] for r in con.execute(
        cte(p, "SELECT __x0 FROM __rows", "__rows")).fetchall()]
    assert sorted(v for v in values if v is not None) == [0, 0, 30, 100, 100]
    # income declared 0..1000: inf -> 1000, -inf -> 0, NaN and NULL -> NULL, 2000 -> 1000.
    p = Planner(md).prepare("SELECT SUM(income), COUNT(income) FROM people")
    total, count = run(con, p)[0]
    step = p.measurements[0].step  # a real sum: an exact integer of its fixed-point grid
    assert isinstance(total, int) and (total * step, count) == (500 + 1000 + 0 + 1000, 4)


def test_clamping_of_derived_intervals(con: duckdb.DuckDBPyConnection, md: Metadata) -> None:
    # kids is clamped to 0..3 when read: 9 -> 3, -1 -> 0; kids - 2 is then in [-2, 1].
    p = Planner(md).prepare("SELECT SUM(kids - 2), SUM(kids * 2 + 1) FROM people")
    assert run(con, p)[0] == ((1 + 3 + 0 + 0 + 3) - 2 * 5, 2 * (1 + 3 + 0 + 0 + 3) + 5)
    # An expression clamped by the analyst: the derived interval [-10, 10] is enforced too.
    p = Planner(md).prepare(
        "SELECT SUM(LEAST(GREATEST(CAST(code AS INTEGER), 0), 100)) FROM people")
    # '12' -> 12, 'abc' and '' and NULL -> NULL -> GREATEST skips NULL -> 0, '7.5' -> 8 (a
    # failed or rounding cast, never an error), '-3' -> 0.
    assert run(con, p)[0][0] == 12 + 8


def test_bare_column_input_is_read_clamped(con: duckdb.DuckDBPyConnection, md: Metadata) -> None:
    p = Planner(md).prepare("SELECT MIN(age), MAX(age), MEDIAN(income) FROM people")
    assert "TRY_CAST" in rewrite(p).sql(dialect=DuckDBDialect)
    # ages 150 and -5 are read as 100 and 0: every bucket of MIN/MAX's histogram is in range.
    histogram = run(con, p)[0][0]
    assert set(histogram) <= set(range(101)) and histogram[100] == 2 and histogram[0] == 2


def test_total_operations(con: duckdb.DuckDBPyConnection, md: Metadata) -> None:
    p = Planner(md).prepare("SELECT SUM(LEAST(GREATEST(income / kids, -10), 10)) FROM people")
    sql = rewrite(p).sql(dialect=DuckDBDialect)
    assert "NULLIF(" in sql  # a zero divisor gives NULL, never an error
    assert "TRY_CAST" in sql and re.search(r"(?<!TRY_)CAST\(\"", sql) is None
    run(con, p)
    # Division by zero is also total for a literal zero and for integer division/modulo.
    for q in ("SELECT SUM(LEAST(GREATEST(age // 0, 0), 5)) FROM people",
              "SELECT SUM(LEAST(GREATEST(age / 0, 0), 5)) FROM people",
              "SELECT SUM(kids % 0) FROM people",
              "SELECT COUNT(*) FROM people WHERE age / (kids - kids) > 1"):
        run(con, Planner(md).prepare(q))


def test_no_bounding_for_one_row_per_unit(md: Metadata) -> None:
    sql = rewrite(Planner(md).prepare("SELECT sex, COUNT(*) FROM people GROUP BY sex")).sql()
    assert "__bounded" not in sql and "$1" not in sql


# ------------------------------------------------------------------ contribution bounding


@pytest.fixture
def many(kit: SimpleNamespace) -> tuple[duckdb.DuckDBPyConnection, Metadata]:
    """Unit u (1..60) has 10 rows spread over 5 categories (0..4), two rows each."""
    c = duckdb.connect()
    c.execute("CREATE TABLE v AS SELECT u, (i % 5) AS cat, (u * 100 + i)::DOUBLE AS amount "
              "FROM range(1, 61) r(u), range(10) s(i)")
    md = kit.metadata_from({"v": {"privacy_unit": "u", "max_rows_per_unit": 4,
                                  "max_groups_per_unit": 2, "columns": {
                                      "u": {"type": "int"},
                                      "cat": {"type": "int", "lower": 0, "upper": 4,
                                              "public_range": True},
                                      "amount": {"type": "float", "lower": 0, "upper": 1e5}}}})
    return c, md


def test_bounding_keeps_at_most_k_rows_and_g_groups(
        many: tuple[duckdb.DuckDBPyConnection, Metadata]) -> None:
    """The sampled rows (COUNT(DISTINCT x) needs rows): k rows per unit, in any of its groups
    (its sensitivity k holds over all groups: the groups cap would lower nothing); beside a
    count of units, k rows in g groups."""
    con, md = many
    p = Planner(md).prepare("SELECT cat, COUNT(DISTINCT amount) FROM v GROUP BY cat")
    assert p.group_cap is None and p.groups_per_unit == 4  # min(k, 5 keys)
    sql = cte(p, "SELECT __unit, COUNT(*) AS rows, COUNT(DISTINCT __k0) AS groups "
              "FROM __bounded GROUP BY __unit", "__bounded")
    groups: set[int] = set()
    for salt in (1, 2, 3):
        per_unit = con.execute(sql, [salt]).fetchall()
        assert len(per_unit) == 60  # every unit keeps something
        assert all(rows == 4 for _, rows, _ in per_unit)
        groups |= {g for _, _, g in per_unit}
    assert max(groups) > 2  # not capped at g = 2
    p = Planner(md).prepare("SELECT cat, COUNT(DISTINCT amount), COUNT(DISTINCT u) FROM v "
                            "GROUP BY cat")
    assert p.group_cap == 2
    sql = cte(p, "SELECT __unit, COUNT(*) AS rows, COUNT(DISTINCT __k0) AS groups "
              "FROM __bounded GROUP BY __unit", "__bounded")
    per_unit = con.execute(sql, [7]).fetchall()
    assert len(per_unit) == 60 and all(r == 4 and g == 2 for _, r, g in per_unit)
    # Without GROUP BY: k rows per unit, whatever their categories.
    p = Planner(md).prepare("SELECT COUNT(DISTINCT amount) FROM v")
    sql = cte(p, "SELECT __unit, COUNT(*) FROM __bounded GROUP BY __unit", "__bounded")
    assert {n for _, n in con.execute(sql, [9]).fetchall()} == {4}


def test_quantiles_weigh_each_units_rows(
        many: tuple[duckdb.DuckDBPyConnection, Metadata]) -> None:
    """MEDIAN, MIN and MAX are bounded by weights (aggregates, "Bounding by weights"): no
    sample and no salt; each of a unit's t = 10 rows weighs W = floor(k 2**F / t) (in 2**-F
    rows, k = 4), so a unit's weights sum to at most k rows over all its groups, and each
    group's histogram holds its rows' weights: 60 units x 2 rows x W per category."""
    con, md = many
    weight = (4 << 20) // 10
    for sql in ("SELECT cat, MEDIAN(amount) FROM v GROUP BY cat",
                "SELECT MIN(amount), COUNT(*) FROM v"):
        p = Planner(md).prepare(sql)
        assert p.group_cap is None and p.weight_bits == 20
        assert "$1" not in rewrite(p).sql(dialect=DuckDBDialect)
        per_unit = cte(p, "SELECT DISTINCT SUM(__w) FROM __weighted GROUP BY __unit",
                       "__weighted")
        assert con.execute(per_unit).fetchall() == [(10 * weight,)]
    rows = dict(run(con, Planner(md).prepare("SELECT cat, MEDIAN(amount) FROM v GROUP BY cat")))
    for buckets, counts in rows.values():
        assert sum(counts) == 60 * 2 * weight and len(buckets) == len(set(buckets)) == 120
    (histogram, count), = run(con, p)
    assert sum(histogram[1]) == count == 60 * 10 * weight


def test_per_unit_aggregates_keep_k_rows_in_g_groups(
        many: tuple[duckdb.DuckDBPyConnection, Metadata]) -> None:
    """Counts and sums bound each unit without sampling. Over public keys with Laplace or
    Gaussian noise, every row of a unit of t rows weighs W = floor(k 2**F / t) / 2**F (10
    rows, k = 4: 0.4 each, 4 rows in total, over all 5 groups); with a count of units (whose
    sensitivity is g'), k rows allocated over g groups (2 + 2 rows -> 2 + 2)."""
    con, md = many
    for mechanism, delta in (("laplace", 0.0), ("gaussian", 1e-6)):
        p = Planner(md).prepare("SELECT cat, SUM(amount), COUNT(*) FROM v GROUP BY cat",
                                mechanism=mechanism, delta=delta)
        assert p.group_cap is None and p.weight_bits == 20 and p.groups_per_unit == 5
        weight = (4 << 20) // 10
        tot = cte(p, "SELECT DISTINCT __t FROM __tot", "__tot")
        assert con.execute(tot).fetchall() == [(10,)] and "$1" not in tot
        rows = dict((cat, (total, count)) for cat, total, count in run(con, p))
        assert sorted(rows) == [0, 1, 2, 3, 4]
        # 60 units, 2 rows each per category, each row weighing W (in 2**-20 rows): a unit
        # contributes 10 W <= 4 * 2**20 in all.
        assert all(count == 60 * 2 * weight for _, count in rows.values())
        step = p.measurements[0].step
        exact = con.execute("SELECT cat, SUM(amount) FROM v GROUP BY cat").fetchall()
        for cat, total in exact:
            assert rows[cat][0] * step == pytest.approx(total * weight / 2**20, rel=1e-12)
    p = Planner(md).prepare("SELECT cat, COUNT(DISTINCT u), COUNT(*) FROM v GROUP BY cat")
    sql = cte(p, "SELECT __unit, SUM(__c) AS rows, COUNT(*) FILTER (WHERE __c > 0) AS groups, "
              "MIN(__c) FROM __contrib GROUP BY __unit", "__contrib")
    for salt in (1, 2, 3):
        per_unit = con.execute(sql, [salt]).fetchall()
        assert len(per_unit) == 60
        assert all(rows == 4 and groups == 2 and low == 2 for _, rows, groups, low in per_unit)
    p = Planner(md).prepare("SELECT SUM(amount) FROM v")
    sql = cte(p, "SELECT DISTINCT __c FROM __contrib", "__contrib")
    assert con.execute(sql).fetchall() == [(4,)] and "$1" not in sql


def test_count_alone_is_bounded_per_unit_without_sampling(kit: SimpleNamespace) -> None:
    """COUNT(*) without GROUP BY counts min(n, k) rows of each unit: what any k-row sample
    keeps, computed without ranking the rows (and without the salt)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE v AS SELECT u, i FROM range(1, 6) r(u), range(u * 3) s(i)")
    md = kit.metadata_from({"v": {"privacy_unit": "u", "max_rows_per_unit": 4,
                                  "columns": {"u": {"type": "int"},
                                              "i": {"type": "int", "lower": 0, "upper": 20}}}})
    p = Planner(md).prepare("SELECT COUNT(*), COUNT(DISTINCT u) FROM v WHERE i >= 1")
    sql = rewrite(p).sql(dialect=DuckDBDialect)
    assert "$1" not in sql and "row_number" not in sql.lower()
    # rows with i >= 1 per unit: 2, 5, 8, 11, 14 -> min(n, 4): 2, 4, 4, 4, 4
    assert run(con, p) == [(18, 5)]
    # With a SUM as well: each unit's sum scaled by min(1, k / n), still no sample.
    p = Planner(md).prepare("SELECT COUNT(*), SUM(i) FROM v WHERE i >= 1")
    assert "$1" not in rewrite(p).sql(dialect=DuckDBDialect) and run(con, p)[0][0] == 18


def test_bounding_keeps_whole_units_below_the_bounds(kit: SimpleNamespace) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE v AS SELECT * FROM (VALUES (1, 0, 1.0), (1, 1, 2.0), (2, 0, 3.0)) "
                "t(u, cat, amount)")
    md = kit.metadata_from({"v": {"privacy_unit": "u", "max_rows_per_unit": 4,
                                  "max_groups_per_unit": 2, "columns": {
                                      "u": {"type": "int"},
                                      "cat": {"type": "int", "lower": 0, "upper": 4,
                                              "public_range": True},
                                      "amount": {"type": "float", "lower": 0, "upper": 10}}}})
    p = Planner(md).prepare("SELECT cat, SUM(amount) FROM v GROUP BY cat")
    step = p.measurements[0].step  # the real sum comes back in units of its grid
    assert sorted((cat, total * step) for cat, total in run(con, p)) == [(0, 4.0), (1, 2.0)]


def test_each_unit_samples_its_own_groups(
        many: tuple[duckdb.DuckDBPyConnection, Metadata]) -> None:
    """With g = 2 of 5 categories, every category must keep a fair share of the units: a
    sample keyed on the group alone would keep the same two categories for every unit."""
    con, md = many
    p = Planner(md).prepare("SELECT cat, COUNT(DISTINCT u) FROM v GROUP BY cat")
    sql = cte(p, "SELECT __k0, COUNT(DISTINCT __unit) FROM __contrib GROUP BY __k0", "__contrib")
    kept = dict(con.execute(sql, [424242]).fetchall())
    assert sum(kept.values()) == 60 * 2
    # Expected 24 units per category (binomial sd ~3.8); all in two would be 60 and 0.
    assert all(5 <= kept.get(cat, 0) <= 45 for cat in range(5)), kept


def test_the_sample_depends_on_the_salt(
        many: tuple[duckdb.DuckDBPyConnection, Metadata]) -> None:
    con, md = many
    p = Planner(md).prepare("SELECT COUNT(DISTINCT amount) FROM v")
    sql = cte(p, "SELECT __x0 FROM __bounded ORDER BY __x0", "__bounded")
    samples = {tuple(r[0] for r in con.execute(sql, [salt]).fetchall()) for salt in range(20)}
    assert len(samples) > 10
    # Over many salts every row of a unit is sometimes kept: no row is steered out.
    seen = Counter(v for s in samples for v in s if 100 <= v < 200)
    assert set(seen) == {100.0 + i for i in range(10)}


def test_the_salt_is_fresh_and_secret_per_query(make_db: Any, kit: SimpleNamespace) -> None:
    crafted = make_db("CREATE TABLE v AS SELECT i % 7 AS u, i::DOUBLE AS amount FROM range(50) "
                      "r(i)", {"v": {"privacy_unit": "u", "max_rows_per_unit": 2, "columns": {
                          "u": {"type": "int"},
                          "amount": {"type": "float", "lower": 0, "upper": 50}}}})
    db = crafted.db
    seen: list[tuple[str, list[object]]] = []
    original = db.engine.execute

    def spy(sql: str, parameters: Any = ()) -> Any:
        seen.append((sql, list(parameters)))
        return original(sql, parameters)

    db.engine.execute = spy  # type: ignore[method-assign]
    p = db.planner.prepare("SELECT COUNT(DISTINCT amount) FROM v")
    for _ in range(5):
        answer(p, db.engine, db.randomness)
    sqls = {s for s, _ in seen}
    salts = [params[0] for _, params in seen]
    assert len(sqls) == 1 and "$1" in sqls.pop()  # the text never holds the salt
    assert len(set(salts)) == 5  # a fresh salt per query
    assert all(isinstance(s, int) and 0 <= s < 2**63 for s in salts)


# ----------------------------------------------------------------------------- exact sums

BIG = 2.0**53  # with 1.5s after it, every naive double addition rounds up by 0.5
SUMS = "SELECT SUM(x), AVG(x), VAR_POP(x) FROM t"


def adversarial(con: duckdb.DuckDBPyConnection, name: str, values: list[tuple[int, float]]
                ) -> None:
    """Table ``name`` of (unit, x) rows, inserted in this order (DuckDB's single-threaded
    SUM of a small table then adds them in this order)."""
    con.execute(f"CREATE TABLE {name} (u BIGINT, x DOUBLE)")
    # One INSERT of literals (repr round-trips every double): executemany is slow.
    con.execute(f"INSERT INTO {name} VALUES " +
                ", ".join(f"({u}, {x!r}::DOUBLE)" for u, x in values))


def exact_sums(con: duckdb.DuckDBPyConnection, p: Plan, table: str) -> list[Fraction]:
    """Every real sum measurement of ``p`` on ``table``, in value units, exactly."""
    sql = rewrite(p).sql(dialect=DuckDBDialect).replace('"t"', f'"{table}"')
    row = con.execute(sql, [7] if "$1" in sql else None).fetchall()[0]
    out = []
    for m, value in zip(p.measurements, row, strict=True):
        if m.step:
            assert isinstance(value, int)  # a HUGEINT: summed exactly
            out.append(Fraction(value) * Fraction(m.step))
    return out


def sums_meta(kit: SimpleNamespace, lower: float, upper: float, k: int = 1) -> Metadata:
    return kit.metadata_from({"t": {"privacy_unit": "u", "max_rows_per_unit": k,
                                    "one_row_per_unit": k == 1, "columns": {
                                        "u": {"type": "int"},
                                        "x": {"type": "float", "lower": lower,
                                              "upper": upper}}}})


def test_naive_double_sums_break_the_sensitivity() -> None:
    """The data of the next tests really are adversarial: DuckDB's SUM(DOUBLE) depends on the
    row order, and adding one row of value 2**53 moves it by more than 2**53 (Casacuberta et
    al., CCS 2022)."""
    con = duckdb.connect()
    small = [(i, 1.5) for i in range(1, 1001)]
    adversarial(con, "d", [(0, BIG), *small])
    adversarial(con, "reordered", [*small, (0, BIG)])
    adversarial(con, "neighbour", small)
    (d,), (reordered,), (neighbour,) = (con.execute(f"SELECT SUM(x) FROM {n}").fetchone() or ()
                                        for n in ("d", "reordered", "neighbour"))
    assert d != reordered
    assert d - neighbour > BIG  # > the declared sensitivity k * M = 2**53


def test_real_sums_are_exact_and_order_independent(kit: SimpleNamespace) -> None:
    con = duckdb.connect()
    small = [(i, 1.5) for i in range(1, 1001)]
    adversarial(con, "d", [(0, BIG), *small, (1001, -BIG), (1002, 1.0), (1003, BIG)])
    adversarial(con, "reordered", [(1003, BIG), (1001, -BIG), *small, (1002, 1.0), (0, BIG)])
    p = Planner(sums_meta(kit, -BIG, 2 * BIG)).prepare(SUMS)  # centre 2**52, half-width 1.5 * 2**53
    assert [m.step for m in p.measurements if m.step] == [8.0, 4.0, 2.0**56]
    assert exact_sums(con, p, "d") == exact_sums(con, p, "reordered")


@pytest.mark.parametrize("k", [1, 3])
def test_neighbouring_exact_sums_differ_by_at_most_the_sensitivity(
        kit: SimpleNamespace, k: int) -> None:
    """Neighbouring databases (one unit's rows removed) whose double sums round differently:
    unit 0's k rows at the upper bound 1.5e16 make each later 0.75 ulp round up to 1 in a naive
    double sum, so removing unit 0 moves that sum by more than k * 1.5e16; then seeded values
    of mixed signs and magnitudes. Every exact sum measurement (SUM, AVG's centred sum, VAR's
    centred and squared sums) moves by at most its declared sensitivity, exactly (Fractions)."""
    rng = np.random.default_rng(11)
    magnitudes = [1e16, BIG, 1.5, 1.0, 0.1, 3e-9, 7e15, 2.0**52 + 1]
    small = 0.75 * math.ulp(k * 1.5e16)  # each naive addition rounds it up to a whole ulp
    rows = [(0, 1.5e16)] * k + [(1 + i // k, small) for i in range(999 * k)]
    rows += [(1000 + i // k, float(rng.choice([-1, 1]) * rng.choice(magnitudes)))
             for i in range(300 * k)]
    p = Planner(sums_meta(kit, -1e16, 1.5e16, k)).prepare(SUMS)  # AVG's sum is centred on 2.5e15
    real = [m for m in p.measurements if m.step]
    assert len(real) == 3 and real[0].l1 == k * 1.5e16
    con = duckdb.connect()
    adversarial(con, "d", rows)
    full = exact_sums(con, p, "d")
    naive = "SELECT SUM(x) FROM {}"
    for unit in (0, 7, 1001, 1150):
        name = f"without_{unit}"
        adversarial(con, name, [r for r in rows if r[0] != unit])
        for m, a, b in zip(real, full, exact_sums(con, p, name), strict=True):
            assert abs(a - b) <= Fraction(m.l1), (m.name, unit, float(a - b), m.l1)
        if unit == 0:  # what the former SUM(DOUBLE) measurement did on the same data
            moved = con.execute(naive.format("d")).fetchone()[0] - \
                con.execute(naive.format(name)).fetchone()[0]  # type: ignore[index]
            assert moved > real[0].l1


def test_integer_sums_stay_exact_hugeints(kit: SimpleNamespace, md: Metadata) -> None:
    """Integer-valued sums are not quantised: the engine sums them as integers (HUGEINT)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE people (pid BIGINT, age INTEGER, income DOUBLE, sex VARCHAR, "
                "state VARCHAR, kids INTEGER, married BOOLEAN, born DATE, code VARCHAR)")
    p = Planner(md).prepare(
        "SELECT SUM(age), SUM(kids * 2 + 1), SUM(CASE WHEN age > 60 THEN 1 ELSE 0 END),"
        " SUM(age // 3), SUM(ABS(kids - 2)), SUM(married::INTEGER), SUM(ROUND(age)), "
        "SUM(income), AVG(age) FROM people")
    sql = rewrite(p).sql(dialect=DuckDBDialect)
    types = [str(d[1]) for d in con.execute(sql, [7] if "$1" in sql else None).description]
    for m, sql_type in zip(p.measurements, types, strict=True):
        if m.kind == "sum":  # quantised real sums are HUGEINT too
            assert (m.step != 0.0) != m.integer and sql_type == "HUGEINT", (m, sql_type)


def test_integer_sums_beyond_2_53_stay_exact() -> None:
    """The regression: an integer input whose derived bound passes 2^53 (n * n of n up to 2^31)
    was clamped to DOUBLE constants, so the engine summed DOUBLEs (rounded, order-dependent:
    "Exact sums" broken) while the plan took an exact integer sum."""
    from dpsql.metadata.metadata import parse_metadata

    md = parse_metadata({"tables": {"v": {"privacy_unit": "pid", "max_rows_per_unit": 3,
                                          "columns": {"pid": {"type": "int"}, "n": {
                                              "type": "int", "lower": 0, "upper": 2**31}}}}})
    p = Planner(md).prepare("SELECT SUM(n * n), SUM(n) FROM v")
    con = duckdb.connect()
    con.execute("CREATE TABLE v (pid BIGINT, n BIGINT)")
    con.execute(f"INSERT INTO v VALUES (1, {2**31 - 1}), (2, 3)")
    sql = rewrite(p).sql(dialect=DuckDBDialect)
    cursor = con.execute(sql, [7] if "$1" in sql else None)
    assert [str(d[1]) for d in cursor.description] == ["HUGEINT", "HUGEINT"]
    assert cursor.fetchall() == [((2**31 - 1) ** 2 + 9, 2**31 + 2)]


def test_quantised_terms_are_clamped_in_grid_units_and_keep_null() -> None:
    """The integer clamp is what bounds a row's contribution whatever rounding the term went
    through; NULL rows are skipped by SUM, not counted at a clamp bound."""
    from dpsql.execution.rewrite import _measure
    from dpsql.privacy.aggregates import Measurement

    m = Measurement("sum", exp.column("x"), -10.0, 10.0, integer=False, step=0.5, units=(-4, 6),
                    name="__m0", index=0, epsilon=1.0, noise=None)
    sql = exp.select(_measure(m, {"x": "x"})).from_("t").sql(dialect=DuckDBDialect)
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (-10.0), (0.2), (1.3), (10.0), "
                "(NULL), (NULL)) v(x)")
    # -10 -> -20 units -> -4; 0.2 -> 0; 1.3 -> 2.6 -> 3; 10 -> 20 -> 6; NULLs skipped.
    assert con.execute(sql).fetchall() == [(-4 + 0 + 3 + 6,)]


@pytest.mark.parametrize(("lo", "hi", "center"), [
    (0.0, 1000.0, 0.0), (0.0, 1000.0, 500.0), (-3.7, 0.3, 0.0), (0.1, 0.30000000000000004, 0.2),
    (-1e15, 2.5e15, 7.5e14), (1.0, 2**53 + 2.0, 0.0)])
def test_sums_drop_the_integer_clamp_only_where_every_input_rounds_into_the_grid(
        lo: float, hi: float, center: float) -> None:
    """rewrite._on_grid: every clamped input's term, rounded on the grid, lies in the
    measurement's integer range (the ends and inputs between them, in IEEE doubles)."""
    import random
    from fractions import Fraction

    from dpsql.execution.rewrite import _on_grid, _round_half_away
    from dpsql.privacy.aggregates import fixed_point

    step, units = fixed_point(lo - center, hi - center)
    m = SimpleNamespace(lo=lo, hi=hi, center=center, power=1, step=step, units=units)
    if not _on_grid(m):  # type: ignore[arg-type]
        return  # the clamp stays
    rng = random.Random(7)
    for x in [lo, hi, *(rng.uniform(lo, hi) for _ in range(2000))]:
        term = x - center if center else x
        assert units[0] <= _round_half_away(Fraction(term / step)) <= units[1]
