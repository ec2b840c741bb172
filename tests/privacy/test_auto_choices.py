"""The one engine pass of a plan's automatic choices (issue 39, item 2;
dpsql.execution.choices): on every neighbour of the automatic scenarios, and on the corpus's
``auto`` and ``autoval`` data, the combined query's parts are exactly the separate queries'
histograms, which the neighbour harness audits one by one (an automatic k's units per number
of rows, each value side's units per bucket: tests/neighbours/test_neighbours.py). The same
inputs to the same draws: the privacy argument of each choice carries over unchanged. A
combined query that pooled the units (no GROUP BY unit) is told apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlglot import exp

import dpsql.routes.pipeline
from dpsql.audit.neighbour_engines import (
    Neighbourhood,
    duckdb_neighbourhood,
    postgres_neighbourhood,
)
from dpsql.audit.neighbour_worlds import BASE, scenario_world
from dpsql.audit.scenarios import SCENARIOS
from dpsql.database import Database
from dpsql.engines import DuckDBEngine, Engine
from dpsql.execution.choices import split
from dpsql.privacy.auto_bounds import with_rows
from dpsql.privacy.plan import Plan
from dpsql.privacy.randomness import Randomness
from dpsql.routes.pipeline import choices_sql, k_to_choose, units_sql, values_sql, values_to_choose
from grammar_tests.corpus import load_corpus
from grammar_tests.databases import open_database
from tests.privacy.test_auto_sql import _ks, _masked, plans  # noqa: F401 (its fixture)
from tests.support.pgcluster import Cluster

#: The automatic scenarios of the harness, and auto_values with k automatic too (both
#: choices in one pass: the harness's own pairing in test_neighbours.py).
BOTH = replace(SCENARIOS["auto_values"], metadata=SCENARIOS["auto_values"].metadata.replace(
    "max_rows_per_unit = 3", "max_rows_per_unit = { auto = true, max = 10, share = 0.2 }"))
WORLDS = (SCENARIOS["auto_rows"], SCENARIOS["auto_values"], BOTH)
QUERIES = ("SELECT COUNT(*) AS n FROM visits", "SELECT SUM(amount) AS s FROM visits",
           "SELECT grp, COUNT(*) AS n, SUM(amount) AS s FROM visits WHERE qty > 0 GROUP BY grp",
           "SELECT AVG(amount) AS a, MEDIAN(amount) AS m FROM visits")


def _both_ways(p: Plan, engine: Engine) -> tuple[list[dict[int, int]], list[dict[int, int]]]:
    """The combined query's histograms (units per rows, empty without an automatic k; then
    each side's units per bucket), and the separate queries' (the harness's)."""
    def rows(sql: str) -> dict[int, int]:
        return {int(a): int(b) for a, b in engine.execute(sql)[1]}  # type: ignore[call-overload]

    sides = len(p.values) if values_to_choose(p) else 0
    counts, buckets = split(engine.execute(choices_sql(p, engine))[1], sides)
    separate = [rows(units_sql(p, engine)) if k_to_choose(p) else {}]
    separate += [rows(values_sql(p, i, engine)) for i in range(sides)]
    return [counts, *buckets], separate


@pytest.fixture(params=[s.name if s is not BOTH else "both" for s in WORLDS])
def hood(request: pytest.FixtureRequest) -> Iterator[Neighbourhood]:
    scenario = {s.name if s is not BOTH else "both": s for s in WORLDS}[request.param]
    h = duckdb_neighbourhood(scenario_world(scenario))
    yield h
    h.close()


def _plans(h: Neighbourhood) -> list[Plan]:
    out = []
    for sql in QUERIES:
        p = h.planner.prepare_query(sql, 2.0, 0.0, "laplace")
        if isinstance(p, Plan) and (k_to_choose(p) or values_to_choose(p)):
            out.append(p)
    return out


def test_one_pass_equals_the_separate_inputs_on_every_neighbour(hood: Neighbourhood) -> None:
    prepared = _plans(hood)
    assert prepared
    for p in prepared:
        for name in hood.world.neighbours():
            hood.use(name)
            combined, separate = _both_ways(p, hood.engine)
            assert combined == separate, (name, p.query)
            assert sum(combined[0].values()) > 0 or not k_to_choose(p)


def test_a_pooled_pass_is_told_apart(hood: Neighbourhood, monkeypatch: pytest.MonkeyPatch
                                     ) -> None:
    """The mutant: the combined pass without its GROUP BY unit (every row one value)."""
    honest = dpsql.routes.pipeline.unit_choices  # type: ignore[attr-defined]

    def pooled(*args: object) -> exp.Query:
        tree = honest(*args)  # type: ignore[arg-type]
        for cte in tree.find_all(exp.CTE):
            if cte.alias == "__per_unit":
                cte.this.set("group", None)
                for projection in cte.this.expressions:
                    if isinstance(projection.this, exp.Max | exp.Min):
                        projection.set("this", projection.this.this)
        return tree

    monkeypatch.setattr(dpsql.routes.pipeline, "unit_choices", pooled)
    hood.forget()
    differ = 0
    for p in _plans(hood):
        for name in hood.world.neighbours():
            hood.use(name)
            try:
                combined, separate = _both_ways(p, hood.engine)
            except Exception:  # a COUNT(*) beside a bare column: refused, also told apart
                differ += 1
                continue
            differ += combined != separate
    assert differ > 0


def _choosing(db: Database, database: str) -> Iterator[tuple[Any, dict[str, Any], Plan]]:
    """The accepted corpus cases of ``database`` planned with a choice still to make from the
    data (an automatic k or value bound): each case, its privacy options and its plan."""
    for case in load_corpus():
        if case.database != database or case.verdict != "accepted":
            continue
        options = {k: v for k, v in case.options.items()
                   if k in ("epsilon", "delta", "mechanism")}
        p = db.plan(case.sql, **options)  # type: ignore[arg-type]
        if isinstance(p, Plan) and (k_to_choose(p) or values_to_choose(p)):
            yield case, options, p


@pytest.mark.parametrize("database", ["auto", "autoval"])
def test_one_pass_equals_the_separate_inputs_on_the_corpus(database: str, tmp_path: Path
                                                          ) -> None:
    db: Database = open_database(database, tmp_path)
    checked = 0
    try:
        for case, _, p in _choosing(db, database):
            combined, separate = _both_ways(p, db.engine)
            assert combined == separate, case.id
            assert any(combined), case.id  # the corpus's data: some unit in some histogram
            checked += 1
    finally:
        db.close()
    assert checked >= 4


# --- on DuckDB, the per-unit table kept for the query (bounding by weights) ------------------


def _temporary(engine: Engine) -> int:
    (count,), = engine.execute("SELECT COUNT(*) FROM duckdb_tables() WHERE temporary")[1]
    assert isinstance(count, int)
    return count


def _canonical(rows: list[tuple[object, ...]]) -> list[str]:
    """An engine's rows in an order of their own: a histogram cell (``[buckets, counts]``,
    gathered by ``LIST`` in no set order) as its sorted (bucket, count) pairs."""
    def cell(value: object) -> object:
        if isinstance(value, list) and len(value) == 2 and all(
                isinstance(v, list) for v in value):
            return sorted(zip(*value, strict=True))
        return value
    return sorted(repr(tuple(cell(v) for v in row)) for row in rows)


@pytest.mark.parametrize("database", ["auto", "autoval"])
def test_the_shared_totals_give_the_query_its_own_answer(database: str, tmp_path: Path) -> None:
    """Bounding by weights reads each unit's rows from the choices' per-unit table instead of
    counting them again (dpsql.routes.pipeline._shares_units): its exact rows, at the drawn k and
    bounds and one salt, are those of the query that counts them itself; through the
    library, the table is gone once the answer is out."""
    db: Database = open_database(database, tmp_path)
    shared = 0
    try:
        for case, options, p in _choosing(db, database):
            if not dpsql.routes.pipeline._shares_units(p, db.engine):
                continue
            chosen = dpsql.routes.pipeline.choose(p, db.engine, Randomness.seeded(3))  # keeps it
            assert _temporary(db.engine) == 1
            own, salted = dpsql.routes.pipeline.engine_sql(chosen, db.engine)
            reading, also = dpsql.routes.pipeline._shared_query(chosen, db.engine)
            assert salted == also and "__dpsql_units" in reading and own != reading
            salt = [12345] if salted else []
            # the same rows (in the engine's order of groups, which the release sorts away)
            assert _canonical(db.engine.execute(reading, salt)[1]) == \
                _canonical(db.engine.execute(own, salt)[1]), case.id
            db.engine.execute("DROP TABLE temp.__dpsql_units")
            result = db.query(case.sql, **options)  # type: ignore[arg-type]
            assert result.chosen_rows is not None or result.chosen_bounds
            assert _temporary(db.engine) == 0
            shared += 1
    finally:
        db.close()
    assert shared >= 1  # the corpus has counts and sums over public keys with a choice


@pytest.fixture(scope="module")
def pg_database(pg_cluster: Cluster) -> str:
    return pg_cluster.database("choices").url()


@pytest.mark.pg
@pytest.mark.parametrize("index", range(len(WORLDS)))
def test_one_pass_equals_the_separate_inputs_on_postgres(index: int, pg_database: str) -> None:
    """PostgreSQL runs the choices in one query of their own (no per-unit table kept): the
    same equality on every neighbour, in its own SQL; and a charged run draws from it."""
    h = postgres_neighbourhood(scenario_world(WORLDS[index]), pg_database, f"ch{index}")
    try:
        assert h.engine.name == "postgres"
        for p in _plans(h):
            assert not dpsql.routes.pipeline._shares_units(p, h.engine)
            for name in h.world.neighbours():
                h.use(name)
                combined, separate = _both_ways(p, h.engine)
                assert combined == separate, (name, p.query)
            h.use(BASE)
            chosen = dpsql.routes.pipeline.choose(p, h.engine, Randomness.seeded(5))
            assert not (k_to_choose(chosen) or values_to_choose(chosen))
    finally:
        h.close()


def test_the_shared_query_after_the_draw_differs_in_constants_only(
        plans: list[tuple[str, Plan, DuckDBEngine]]) -> None:  # noqa: F811 (the fixture)
    """tests/privacy/test_auto_sql.py's guarantee for the query that reads the per-unit table
    (checked on empty tables before the charge at the cap: dpsql.routes.pipeline.engine_sql): at
    every drawn k its DuckDB text has the cap's tokens, constants aside."""
    shared = 0
    for sql_text, p, engine in plans:
        if not dpsql.routes.pipeline._shares_units(p, engine):
            continue
        at_cap = _masked(dpsql.routes.pipeline._shared_query(p, engine)[0])
        for k in _ks(p):
            drawn = dpsql.routes.pipeline._shared_query(with_rows(p, k), engine)[0]
            assert _masked(drawn) == at_cap, f"{sql_text} at k = {k}:\n{drawn}"
        shared += 1
    assert shared >= 3
