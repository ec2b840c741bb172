"""The semantic oracle (dpsql.audit.oracle) on PostgreSQL: the generator's queries answered
noise-free by dpsql's PostgresEngine (its own SQL) on an oracle world, against the same
reference model (run on DuckDB, the reference dialect) as tests/oracle/test_oracle.py."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from dpsql.audit.oracle import Oracle, accepted_forms, check_all
from dpsql.audit.oracle_worlds import oracle_world, to_postgres
from tests.oracle.semantic_mutants import PROBES
from tests.oracle.test_oracle import EXAMPLES, assert_all_explained
from tests.support.neighbour_queries import generate, metadata
from tests.support.pgcluster import Cluster

pytestmark = pytest.mark.pg

SLOW = os.environ.get("DPSQL_SLOW") == "1"
N_GENERATED = 1500 if SLOW else 130
N_BITE = 600 if SLOW else 60


@pytest.fixture(scope="module")
def oracle(pg_cluster: Cluster, neighbour_seed: int) -> Iterator[Oracle]:
    url = pg_cluster.database("oracle").url()
    worlds = oracle_world(metadata(), seed=neighbour_seed)
    to_postgres(worlds.world, url)
    o = Oracle(worlds, engine_url=url)
    yield o
    o.close()


def test_generated(oracle: Oracle, neighbour_seed: int) -> None:
    queries = accepted_forms(generate(N_GENERATED, neighbour_seed))
    summary = check_all(oracle, queries)
    assert_all_explained(summary, neighbour_seed, "postgres")
    assert summary.count("agrees") >= 0.5 * len(queries)


def test_known_classes(oracle: Oracle) -> None:
    """The known classes occur on PostgreSQL as on DuckDB."""
    for name, sql in EXAMPLES.items():
        verdict = oracle.check(sql)
        assert verdict.status == "known" and verdict.known == name, verdict.report()


def test_mutant_probes_agree(oracle: Oracle) -> None:
    """Every mutant's probe queries agree unmutated on PostgreSQL too."""
    for probes in PROBES.values():
        for sql, delta in probes:
            verdict = oracle.check(sql, delta)
            assert verdict.status in ("agrees", "approximate"), verdict.report()


def test_generated_bounds_bite(pg_cluster: Cluster, neighbour_seed: int) -> None:
    """Where k and g bite (dpsql.audit.oracle_bounds), on PostgreSQL's bounding SQL."""
    url = pg_cluster.database("oracle_bite").url()
    worlds = oracle_world(metadata(), seed=neighbour_seed + 2, bounds_bite=True)
    to_postgres(worlds.world, url)
    biting = Oracle(worlds, engine_url=url)
    try:
        queries = accepted_forms(generate(N_BITE, neighbour_seed + 2))
        summary = check_all(biting, queries)
    finally:
        biting.close()
    assert_all_explained(summary, neighbour_seed, "postgres, bounds bite")
    assert summary.count("agrees") >= 0.5 * len(queries)
