"""Neighbour testing by execution on Spark (dpsql.audit.neighbours.spark_neighbourhood): a few
dozen queries at most (a Spark query takes about a second per neighbour on 2 cores), marked
``spark`` so that ``-m "not spark"`` deselects them; DPSQL_SLOW=1 runs more generated ones."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpsql.audit.neighbours import (
    Neighbourhood,
    Query,
    check_queries,
    check_query,
    scenario_world,
    spark_neighbourhood,
    synthesize,
)
from dpsql.errors import ProgrammingError
from tests.neighbours.leak_mutants import (
    LEAK_MUTANTS,
    UNCAPPED,
    assert_auto_k_clean,
    assert_quantile_mutant_found,
    assert_uncapped_clean,
)
from tests.support.neighbour_queries import LEAK_CLASSES, generate, metadata
from tests.support.sparkcluster import SparkCluster
from tests.support.subset import SLOW, run_seed

pytestmark = pytest.mark.spark
#: Generated queries on Spark by default: one, a new one each run (about 12 s on a busy
#: 2-core machine, four neighbour pairs); the DuckDB and PostgreSQL harnesses run a hundred
#: generated queries per run, and the Spark corpus differential covers every engine-query
#: node on Spark.
N_GENERATED = 60 if SLOW else 1


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory, spark_cluster: SparkCluster
          ) -> Iterator[Neighbourhood]:
    hood = spark_neighbourhood(synthesize(metadata(), seed=3),
                               Path(tmp_path_factory.mktemp("spark-neighbours")),
                               master=spark_cluster.master)
    yield hood
    hood.close()


@pytest.mark.parametrize(("klass", "sql"), [(1, LEAK_CLASSES[1][0]), (3, LEAK_CLASSES[3][0])])
def test_finds_classes_1_and_3_reverted(monkeypatch: pytest.MonkeyPatch, typed: Neighbourhood,
                                        klass: int, sql: str) -> None:
    typed.forget()
    LEAK_MUTANTS[klass](monkeypatch)
    try:
        assert check_query(sql, typed).status == "violation"
    finally:
        typed.forget()


def planned(queries: list[Query], hood: Neighbourhood) -> list[Query]:
    """The first N_GENERATED of ``queries`` that dpsql plans on ``hood``'s metadata (as
    check_query plans them, before any engine)."""
    kept = []
    for sql, epsilon, delta, mechanism in queries:
        try:
            hood.planner.prepare_query(sql, epsilon, delta, mechanism)
        except ProgrammingError:
            continue
        kept.append((sql, epsilon, delta, mechanism))
        if len(kept) == N_GENERATED:
            break
    return kept


def test_generated(typed: Neighbourhood, neighbour_seed: int) -> None:
    """Random queries on this run's seed (conftest.py), the first few that dpsql's planner
    accepts: about one generated query in forty is refused before any engine runs, which
    among so few would fail the 90% below by chance."""
    seed = neighbour_seed + 200
    summary = check_queries(planned(generate(10 * N_GENERATED, seed=seed), typed), typed)
    print(f"\n[neighbours, spark] {N_GENERATED} generated queries (seed {seed}): "
          f"{summary.line()}")
    again = f"\nthe same queries again: DPSQL_NEIGHBOUR_SEED={neighbour_seed}"
    assert summary.accepted >= 0.9 * len(summary.verdicts), summary.line() + again
    assert not summary.violations, summary.report() + again


#: The heavy checks (a dozen seconds each on Spark): by default one per run, in turn on the
#: run's seed (tests/support/subset.py: three consecutive seeds run all three) -- Gaussian's
#: groups cap, the histogram and distinct kinds uncapped, the fine quantile histograms; one
#: dialect spells the rest as on PostgreSQL and DuckDB, where every one runs. All of them
#: (and every UNCAPPED query) with DPSQL_SLOW=1.
HEAVY = ["uncapped gaussian", "uncapped histogram", "quantile histograms"]
HEAVY_NOW = HEAVY if SLOW else [HEAVY[run_seed() % len(HEAVY)]]
UNCAPPED_ON_SPARK = UNCAPPED if SLOW else [
    UNCAPPED[i] for i, name in ((2, HEAVY[0]), (3, HEAVY[1])) if name in HEAVY_NOW]


@pytest.mark.parametrize(("sql", "mechanism"), UNCAPPED_ON_SPARK)
def test_uncapped_groups(typed: Neighbourhood, sql: str, mechanism: str) -> None:
    """Issue 21: a unit's k rows over all its public groups (no groups cap), on Spark."""
    assert_uncapped_clean(typed, sql, mechanism)


@pytest.mark.skipif(HEAVY[2] not in HEAVY_NOW, reason="in turn with test_uncapped_groups on "
                    "the run's seed (DPSQL_NEIGHBOUR_SEED % 3 == 2), or DPSQL_SLOW=1")
def test_quantile_histograms(monkeypatch: pytest.MonkeyPatch, typed: Neighbourhood) -> None:
    """Issue 21.5's fine histograms on Spark: user-level quantiles move by at most k, and
    with the utility's sensitivity declared as one row the harness finds it."""
    assert_quantile_mutant_found(monkeypatch, typed, every_shape=SLOW)


@pytest.mark.skipif(os.environ.get("DPSQL_SLOW") != "1",
                    reason="DPSQL_SLOW=1: about 100 s on a loaded 2-core machine")
def test_automatic_k(tmp_path: Path, spark_cluster: SparkCluster) -> None:
    """Issue 21.2's automatic k on Spark: its count of units per number of rows compiled from
    the same engine IR, checked as on DuckDB (a world of its own and five plans: slow)."""
    from dpsql.audit.scenarios import SCENARIOS

    hood = spark_neighbourhood(scenario_world(SCENARIOS["auto_rows"]), tmp_path,
                               master=spark_cluster.master)
    try:
        assert_auto_k_clean(hood)
    finally:
        hood.close()


@pytest.mark.skipif(os.environ.get("DPSQL_SLOW") != "1",
                    reason="DPSQL_SLOW=1: a Spark world of its own and four plans")
def test_automatic_value_bounds(tmp_path: Path, spark_cluster: SparkCluster) -> None:
    """Issue 21.2's automatic value bounds on Spark: the units per bucket of their largest
    value in Spark's SQL, checked as on DuckDB."""
    from dpsql.audit.scenarios import SCENARIOS

    hood = spark_neighbourhood(scenario_world(SCENARIOS["auto_values"]), tmp_path,
                               master=spark_cluster.master)
    try:
        assert_auto_k_clean(hood, "auto_values")
    finally:
        hood.close()
