"""Contribution bounding on per-(unit, group) aggregates (dpsql.execution.rewrite, "Bounding by
per-unit aggregates"): run the rewritten SQL on adversarial data and check, measurement by
measurement, that adding one unit moves the exact measurements by no more than the sensitivity the
plan calibrated its noise to; and that a selective WHERE keeps every row it keeps."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest

from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.execution.rewrite import aggregated, rewrite
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.plan import Plan
from dpsql.routes.planner import Planner

K, G, GROUPS = 7, 3, 50
HUGE = 1e12

GROUPED = ("SELECT cat, COUNT(*), COUNT(amount), SUM(amount), AVG(amount), VAR_POP(amount), "
           "SUM(qty), COUNT(DISTINCT u) FROM v GROUP BY cat")
UNGROUPED = ("SELECT COUNT(*), COUNT(amount), SUM(amount), AVG(amount), STDDEV(amount), "
             "SUM(qty), COUNT(DISTINCT u) FROM v")


@pytest.fixture
def md(kit: SimpleNamespace) -> Metadata:
    return kit.metadata_from({"v": {
        "privacy_unit": "u", "max_rows_per_unit": K, "max_groups_per_unit": G, "columns": {
            "u": {"type": "int"},
            "cat": {"type": "int", "lower": 0, "upper": GROUPS - 1, "public_range": True},
            "amount": {"type": "float", "lower": -100, "upper": 100, "nullable": True},
            "qty": {"type": "int", "lower": 0, "upper": 10}}}})


def database(with_attacker: bool) -> duckdb.DuckDBPyConnection:
    """199 ordinary units (1..5 rows each); with the attacker, unit 1 adds 10^5 rows over all
    50 groups, values far outside the bounds on both sides (and NaN, NULL)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE v (u BIGINT, cat INTEGER, amount DOUBLE, qty BIGINT)")
    con.execute("INSERT INTO v SELECT u, (u * 7 + j) % 50, ((u * 13 + j) % 200) - 100.0, "
                "(u + j) % 11 FROM range(2, 201) r(u), range(1 + u % 5) s(j)")
    if with_attacker:
        con.execute(f"""INSERT INTO v SELECT 1, i % {GROUPS},
            CASE i % 4 WHEN 0 THEN {HUGE} WHEN 1 THEN -{HUGE} WHEN 2 THEN 'nan'::DOUBLE
                       ELSE NULL END, 10 ** 15 FROM range(100000) r(i)""")
    return con


def measurements(p: Plan, con: duckdb.DuckDBPyConnection, salt: int
                 ) -> dict[tuple[Any, ...], Sequence[Any]]:
    sql = rewrite(p).sql(dialect=DuckDBDialect)
    rows = con.execute(sql, [salt] if "$1" in sql else None).fetchall()
    width = len(p.keys)
    return {tuple(r[:width]): r[width:] for r in rows}


@pytest.mark.parametrize("sql", [GROUPED, UNGROUPED])
def test_one_unit_moves_each_measurement_by_at_most_its_sensitivity(md: Metadata,
                                                                    sql: str) -> None:
    p = Planner(md).prepare(sql)
    assert aggregated(p)  # every measurement here is a count or a sum: no row sample
    with_attacker, without = database(True), database(False)
    for salt in (1, 2, 3, 12345):
        d, d_prime = measurements(p, without, salt), measurements(p, with_attacker, salt)
        for m in p.measurements:
            moved = Fraction(0)
            for key in d.keys() | d_prime.keys():
                a = d[key][m.index] if key in d else 0
                b = d_prime[key][m.index] if key in d_prime else 0
                moved += abs(Fraction(b) - Fraction(a))
            if m.step:  # a real sum, in integer units of its grid
                moved *= Fraction(m.step)
            assert moved <= Fraction(m.l1), (m.kind, m.center, m.power, float(moved), m.l1)
            if m.kind == "count" and m.arg is None:
                assert moved == K  # the attacker contributes exactly k rows, no more, no less


def test_attacker_keeps_k_rows_in_g_groups(md: Metadata) -> None:
    p = Planner(md).prepare(GROUPED)
    sql = rewrite(p)
    query = ("SELECT __unit, SUM(__c), COUNT(*), MIN(__c), MAX(__c) FROM __contrib "
             "WHERE __unit = 1 GROUP BY __unit")
    tree = duckdb_query(query, sql)
    con = database(True)
    for salt in range(20):
        (_, rows, groups, low, high), = con.execute(tree, [salt]).fetchall()
        assert rows == K and groups == G and 0 <= low <= high <= K


def duckdb_query(final: str, tree: Any) -> str:
    """``final`` over the CTEs of the rewritten query ``tree``."""
    from sqlglot import exp

    query = exp.maybe_parse(final, dialect="duckdb")
    query.set("with_", tree.args["with_"].copy())
    return str(query.sql(dialect=DuckDBDialect))


def test_allocation_follows_the_groups_rows(kit: SimpleNamespace) -> None:
    """A unit with 90 rows in one group and 10 in another, k = 10: every row weighs
    floor(10 2**20 / 100) / 2**20, so the big group gets 9 rows and the small one 1 (to
    2**-20), the same in every run (nothing is drawn)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE v AS SELECT 1 AS u, CASE WHEN i < 90 THEN 0 ELSE 1 END AS cat, "
                "1.0 AS amount FROM range(100) r(i)")
    md = kit.metadata_from({"v": {"privacy_unit": "u", "max_rows_per_unit": 10,
                                  "max_groups_per_unit": 2, "columns": {
                                      "u": {"type": "int"},
                                      "cat": {"type": "int", "lower": 0, "upper": 1,
                                              "public_range": True},
                                      "amount": {"type": "float", "lower": 0, "upper": 1}}}})
    p = Planner(md).prepare("SELECT cat, COUNT(*), AVG(amount) FROM v GROUP BY cat")
    step = p.measurements[0].step
    rows = dict((k, v * step) for k, v, *_ in con.execute(rewrite(p).sql(
        dialect=DuckDBDialect)).fetchall())
    weight = ((10 << 20) // 100) / 2**20
    assert rows == {0: 90 * weight, 1: 10 * weight}
    assert rows[0] == pytest.approx(9, abs=1e-4) and rows[1] == pytest.approx(1, abs=1e-4)


def test_selective_where_keeps_the_rows_it_keeps(kit: SimpleNamespace) -> None:
    """Every unit has 100 rows, one of which passes the WHERE: bounding comes after the
    filter, so each unit's one row counts whole (k = 5), and the sums are exact."""
    con = duckdb.connect()
    con.execute("CREATE TABLE v AS SELECT u, i, u % 3 AS cat, (i + u) % 10 AS qty "
                "FROM range(1, 301) r(u), range(100) s(i)")
    md = kit.metadata_from({"v": {"privacy_unit": "u", "max_rows_per_unit": 5,
                                  "max_groups_per_unit": 1, "columns": {
                                      "u": {"type": "int"},
                                      "i": {"type": "int", "lower": 0, "upper": 99},
                                      "cat": {"type": "int", "lower": 0, "upper": 2,
                                              "public_range": True},
                                      "qty": {"type": "int", "lower": 0, "upper": 9}}}})
    exact = con.execute("SELECT COUNT(*), SUM(qty) FROM v WHERE i = 7").fetchone()
    p = Planner(md).prepare("SELECT COUNT(*), SUM(qty) FROM v WHERE i = 7")
    assert tuple(con.execute(rewrite(p).sql(dialect=DuckDBDialect)).fetchone()) == exact
    p = Planner(md).prepare("SELECT cat, COUNT(*), SUM(qty) FROM v WHERE i = 7 GROUP BY cat")
    steps = [m.step for m in p.measurements]  # weighted rows: whole rows weigh 2**20 units
    got = [(cat, *(v * s for v, s in zip(values, steps, strict=True)))
           for cat, *values in con.execute(rewrite(p).sql(dialect=DuckDBDialect)).fetchall()]
    want = con.execute("SELECT cat, COUNT(*), SUM(qty) FROM v WHERE i = 7 GROUP BY cat"
                       ).fetchall()
    assert sorted(got) == sorted(want)


def test_bounds_too_large_for_scaled_sums_take_the_sampled_rows(kit: SimpleNamespace) -> None:
    """Bounds so large that k rows' worth of them could overflow a HUGEINT in the clamp of a
    scaled sum (an error that one unit's rows could trigger) take the sampled rows instead."""
    # An int bound stays within BIGINT (the metadata's rule); k rows of it pass 2**120.
    huge = {"u": {"type": "int"}, "x": {"type": "int", "lower": 0, "upper": 2**62}}
    md = kit.metadata_from({"v": {"privacy_unit": "u", "max_rows_per_unit": 2**60,
                                  "columns": huge}})
    assert not aggregated(Planner(md).prepare("SELECT SUM(x) FROM v"))
    md = kit.metadata_from({"v": {"privacy_unit": "u", "max_rows_per_unit": 3,
                                  "columns": huge}})
    assert aggregated(Planner(md).prepare("SELECT SUM(x) FROM v"))
