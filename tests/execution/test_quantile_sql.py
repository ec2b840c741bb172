"""The fine grid's key in SQL (dpsql.execution.quantile_sql.fine_bucket) was respelled with
fewer operations a row (issue 39.4: a third of a MEDIAN's engine time at 10M rows): what is
released must not move. The spelling before it is kept here (:func:`_before`), and every
test compares the two engines' outputs exactly: per value, on the values where a key changes
(every edge of both grids and the doubles next to it) and on random ones, in DuckDB and in
PostgreSQL; and the whole engine query of every quantile, MIN and MAX of the grammar corpus
on each neighbour of its synthetic world."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
from sqlglot import exp

import dpsql.audit.neighbours as neighbours
from dpsql.audit.neighbours import SALT, check_queries, duckdb_neighbourhood, synthesize
from dpsql.engines import ir
from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.execution import quantile_sql
from dpsql.execution.quantile_sql import fine_bucket
from dpsql.metadata.metadata import parse_metadata
from dpsql.privacy.aggregates import MeasurementKind
from dpsql.privacy.quantile_grid import EQUAL, Grid
from dpsql.query.total_expressions import number
from grammar_tests.corpus import load_corpus
from grammar_tests.databases import autoval_metadata, corpus_metadata

GRIDS = [(0.0, 100000.0), (-50.0, 2000.0), (1900.0, 2100.0), (-7.5, -1.25), (0.0, 1.0),
         (-1e9, 1e9)]


def _before(grid: Grid, x: exp.Expression) -> exp.Expression:
    """fine_bucket as it was (commit d191dcc): BIGINT casts inside, ``- 0`` kept."""
    s = grid.side
    d = exp.Paren(this=exp.Sub(this=exp.cast(x.copy(), "DOUBLE"), expression=number(
        grid.origin)))

    def steps(t: exp.Expression) -> exp.Expression:
        near = ir.greatest(t, number(grid.tau))
        ratio = exp.Div(this=exp.Paren(this=exp.Sub(this=exp.Ln(this=near), expression=number(
            math.log(grid.tau)))), expression=number(grid.ln_ratio))
        whole = exp.cast(exp.Floor(this=ratio), "BIGINT")
        return ir.least(ir.greatest(whole, exp.Literal.number(0)), exp.Literal.number(s - 1))

    g: exp.Expression = exp.Add(this=exp.Literal.number(s), expression=steps(d.copy()))
    if grid.lo < grid.origin:
        g = exp.Case(ifs=[exp.If(this=exp.GTE(this=d.copy(), expression=exp.Literal.number(0)),
                                 true=g)],
                     default=exp.Sub(this=exp.Literal.number(s - 1), expression=steps(exp.Neg(
                         this=d.copy()))))
    scaled = exp.Mul(this=exp.Paren(this=exp.Sub(this=exp.cast(x, "DOUBLE"),
                                                 expression=number(grid.lo))),
                     expression=number(EQUAL / (grid.hi - grid.lo)))
    e = ir.least(exp.cast(exp.Floor(this=scaled), "BIGINT"), exp.Literal.number(EQUAL - 1))
    key = exp.Add(this=exp.Mul(this=e, expression=exp.Literal.number(grid.geometric)),
                  expression=exp.Paren(this=g))
    return exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())),
                                true=key)])


def _values(grid: Grid, seed: int = 0) -> list[float]:
    """Where a key changes: every equal edge and every geometric edge on both sides of the
    origin, with the doubles just below and above each, clamped into [lo, hi] as the rewrite
    clamps its input; and random values, uniform and log-uniform from the origin."""
    width = (grid.hi - grid.lo) / EQUAL
    equal = grid.lo + np.arange(EQUAL + 1) * width
    ratio = math.exp(grid.ln_ratio)
    distance = grid.tau * ratio ** np.arange(grid.side + 1, dtype=np.float64)
    geometric = np.concatenate([grid.origin + distance, grid.origin - distance])
    edges = np.concatenate([equal, geometric, [grid.lo, grid.hi, grid.origin, 0.0, -0.0]])
    near = np.concatenate([edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf)])
    rng = np.random.default_rng(seed)
    uniform = rng.uniform(grid.lo, grid.hi, 20000)
    scale = max(grid.hi - grid.origin, grid.origin - grid.lo)
    spread = grid.origin + rng.choice([-1.0, 1.0], 20000) * scale * np.exp(
        rng.uniform(-40.0, 0.0, 20000))
    out = np.clip(np.concatenate([near, uniform, spread]), grid.lo, grid.hi)
    return [float(v) for v in out]


def _keys(con: Any, dialect: Any, grid: Grid, values: list[float], sql_of: Any
          ) -> list[object]:
    key = sql_of(grid, exp.column("x")).sql(dialect=dialect)
    return [r[0] for r in con.execute(f"SELECT {key} FROM t ORDER BY i").fetchall()]


@pytest.mark.parametrize(("lo", "hi"), GRIDS)
def test_same_key_for_every_value_in_duckdb(lo: float, hi: float) -> None:
    grid = Grid(lo, hi)
    values = _values(grid)
    con = duckdb.connect()
    con.register("v", pd.DataFrame({"i": np.arange(len(values)), "x": values}))
    con.execute("CREATE TABLE t AS SELECT i, x FROM v UNION ALL SELECT -1, NULL")
    before = _keys(con, DuckDBDialect, grid, values, _before)
    after = _keys(con, DuckDBDialect, grid, values, fine_bucket)
    assert before[0] is None and after[0] is None  # NULL has no key
    assert len(set(before)) > 1000  # the values do cross many edges
    mismatches = [(values[i - 1], b, a) for i, (b, a) in enumerate(zip(before, after,
                                                                         strict=True))
                  if b != a]
    assert not mismatches, mismatches[:5]


@pytest.fixture(scope="module")
def pg_url(pg_cluster: Any) -> str:
    """A database of its own in the run's throw-away PostgreSQL cluster."""
    url: str = pg_cluster.database("quantile_sql").url()
    return url


@pytest.mark.pg
@pytest.mark.parametrize(("lo", "hi"), [GRIDS[0], GRIDS[1], GRIDS[3]])
def test_same_key_for_every_value_in_postgres(pg_url: str, lo: float, hi: float) -> None:
    import psycopg

    from dpsql.engines.postgres.dialect import PostgresDialect

    grid = Grid(lo, hi)
    values = _values(grid)[::7]  # a small dose: still every 7th edge and its neighbours
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("DROP TABLE IF EXISTS t")
        con.execute("CREATE TABLE t (i BIGINT, x DOUBLE PRECISION)")
        with con.cursor().copy("COPY t (i, x) FROM STDIN") as copy:
            for i, v in enumerate(values):
                copy.write_row((i, v))
        before = _keys(con, PostgresDialect, grid, values, _before)
        after = _keys(con, PostgresDialect, grid, values, fine_bucket)
    assert len(set(before)) > 100
    assert before == after


#: Every aggregate that releases a fine histogram is named so (a superset: MIN in MINUTE too):
#: the harness runs only the corpus cases that can hold one.
_QUANTILE_NAMES = re.compile(r"MEDIAN|QUANTILE|PERCENTILE|MIN|MAX", re.IGNORECASE)


def _corpus_metadata() -> Iterator[tuple[str, Any]]:
    """The corpus databases with real-valued columns (events' quantiles read timestamps)."""
    yield "sample", parse_metadata(corpus_metadata(), source="corpus")
    yield "autoval", parse_metadata(autoval_metadata(), source="autoval")


@pytest.mark.parametrize(("database", "md"), list(_corpus_metadata()),
                         ids=[d for d, _ in _corpus_metadata()])
def test_same_engine_output_on_the_corpus_worlds(monkeypatch: pytest.MonkeyPatch,
                                                 database: str, md: Any) -> None:
    """Every accepted corpus query with a fine histogram (MEDIAN, quantiles, MIN, MAX of a
    real value), planned as the neighbour harness plans it: its whole engine query with the
    key spelled before and after, run on every neighbour of the world, gives the same rows."""
    hood = duckdb_neighbourhood(synthesize(md, seed=5))
    generate = neighbours.engine_sql
    checked: list[str] = []

    def both(p: Any, engine: Any) -> tuple[str, bool]:
        sql, salted = generate(p, engine)
        if not any(m.kind == MeasurementKind.HISTOGRAM and m.fine for m in p.measurements):
            return sql, salted
        engine.rewritten.clear()
        with monkeypatch.context() as patch:
            patch.setattr(quantile_sql, "fine_bucket", _before)
            old, _ = generate(p, engine)
        engine.rewritten.clear()
        assert old != sql  # the respelling is in this query
        for name in hood.world.neighbours():
            hood.use(name)
            parameters = [SALT] if salted else []
            assert engine.execute(old, parameters)[1] == engine.execute(sql, parameters)[1], \
                (name, sql)
        checked.append(sql)
        return sql, salted

    monkeypatch.setattr(neighbours, "engine_sql", both)
    cases = [c.sql for c in load_corpus() if c.database == database
             and c.verdict == "accepted" and _QUANTILE_NAMES.search(c.sql)]
    summary = check_queries(cases, hood)
    assert not summary.violations
    assert checked, f"no fine histogram in the {database} corpus"
