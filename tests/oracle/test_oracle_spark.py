"""The semantic oracle (dpsql.audit.oracle) on Spark: a small subset (one Spark session, a
query takes about a second), the same oracle world and reference as on DuckDB, marked
``spark`` as the other Spark tests are; DPSQL_SLOW=1 runs more generated queries."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dpsql.audit.oracle import Oracle, accepted_forms, check_all
from dpsql.audit.oracle_worlds import oracle_world, to_parquet
from tests.oracle.semantic_mutants import PROBES
from tests.oracle.test_oracle import EXAMPLES, assert_all_explained
from tests.support.neighbour_queries import generate, metadata
from tests.support.sparkcluster import SparkCluster
from tests.support.subset import SLOW

pytestmark = pytest.mark.spark

N_GENERATED = 200 if SLOW else 12


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory, spark_cluster: SparkCluster,
           neighbour_seed: int) -> Iterator[Oracle]:
    folder = Path(tmp_path_factory.mktemp("spark-oracle"))
    worlds = oracle_world(metadata(), seed=neighbour_seed)
    to_parquet(worlds.world, folder / "world")
    o = Oracle(worlds, engine_url=spark_cluster.url(folder / "world"), folder=folder)
    yield o
    o.close()


def test_probes_and_generated(oracle: Oracle, neighbour_seed: int) -> None:
    """Every mutant's probe (where no bound bites), the known classes' examples and a few
    generated queries give the reference's answer on Spark too."""
    probes = [(sql, 0.0, delta, "laplace") for probes in PROBES.values()
              for sql, delta in probes]
    queries = probes + accepted_forms(generate(N_GENERATED, neighbour_seed))
    summary = check_all(oracle, queries)
    assert_all_explained(summary, neighbour_seed, "spark")
    assert summary.count("agrees") >= 0.5 * len(queries)
    for name, sql in EXAMPLES.items():
        verdict = oracle.check(sql)
        assert verdict.status == "known" and verdict.known == name, verdict.report()
