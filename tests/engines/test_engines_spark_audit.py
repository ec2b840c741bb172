"""The statistical audit and the attack suite on Spark (the run's standalone cluster, the
``spark_cluster`` fixture, shared with tests/engines/test_engines_spark.py), at a reduced N.

Spark is not in the differential harness's ENGINES (tests/engines/test_engines_differential.py):
every test parametrised over it would then run on Spark, about a second a query on 2 cores. Here a
subset of the audit scenarios covers each kind of measurement and bounding -- a count, a
clamped sum, a histogram under k and g bounding, public and thresholded groups, a quantile,
per-unit bounding of a sum, a join of two private tables -- and the attack suite's
data-dependent queries run on D and D' copied into Spark, as tests/engines/test_engines_attacks.py
does for PostgreSQL. The noise is dpsql's on every engine; what the audit proves on Spark is
that its rewritten SQL (clamps, bounding sample, thresholds) keeps the neighbour's influence
within the sensitivity the noise is calibrated to, on the engine's own semantics.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest

import dpsql
from dpsql.audit import audit as A
from tests.privacy.test_attacks import (
    _REFUSALS,
    DATA_DEPENDENT,
    TRIGGERS,
    gross_n,
    outcome,
    scenario,
)
from tests.support.sparkcluster import SparkCluster
from tests.support.subset import run_seed, subset, text_features

pytestmark = [pytest.mark.usefixtures("seeded_randomness"), pytest.mark.spark, pytest.mark.audit]

_copies = itertools.count()

#: One scenario per kind of measurement and bounding (all of them run on DuckDB and
#: PostgreSQL): a clamped sum, a histogram under k and g bounding, thresholded groups, a
#: quantile, per-unit bounding of a sum, a join of two private tables. A Spark query takes
#: about 0.1-0.25 s on 2 cores, so CI runs the smallest N that still catches a gross failure
#: (test_attacks.gross_n: 40 per side for epsilon 1, 80 for the median's 2; 10 more to select
#: events, the fewest an audit takes: a gross failure shows in every run). By default one of
#: the clamped sum and the thresholded groups runs, in turn (the noise and the threshold on
#: Spark's answers); the others' exact measurements are checked on Spark by the
#: neighbour harness (tests/neighbours/test_neighbours_spark.py). DPSQL_SLOW=1 runs all six at N =
#: 200 (100 to select), plus the plain count and the public groups.
FULL = os.environ.get("DPSQL_SLOW") == "1"
AUDITED = ["sum_clamped", "group_threshold"] + (
    ["user_bounds", "median", "sum_scaled", "join_private", "count", "group_public"]
    if FULL else [])
if not FULL:  # one of the two on each run, in turn on the run's seed (conftest.py)
    AUDITED = AUDITED[run_seed() % 2:][:1]
N_SELECT = 100 if FULL else 10


def spark_copy(path: Path, folder: Path, cluster: SparkCluster) -> str:
    """Every table of the DuckDB file ``path`` as ``folder/<table>.parquet`` (a fresh folder),
    and the database argument that opens them on the cluster."""
    folder.mkdir(parents=True)
    with duckdb.connect(str(path), read_only=True) as con:
        tables = [row[0] for row in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        ).fetchall()]
        for table in tables:
            con.execute(f"COPY \"{table}\" TO '{folder / table}.parquet' (FORMAT parquet)")
    return cluster.url(folder)


@pytest.mark.parametrize("name", AUDITED)
def test_audit_scenario_passes_on_spark(tmp_path: Path, name: str,
                                        spark_cluster: SparkCluster) -> None:
    """The scenario's D and D' copied into Spark, N runs per side (N_SELECT more to select
    events): the audited lower bound on epsilon stays below the declared epsilon."""
    def copy(path: Path) -> str:
        return spark_copy(path, tmp_path / f"spark_{path.stem}_{next(_copies)}", spark_cluster)

    scenario = A.SCENARIOS[name]
    result = A.audit(scenario, gross_n(scenario.epsilon), n_select=N_SELECT, engine=copy)
    print(f"spark {name}: epsilon >= {result.epsilon_lb:.3f} (declared {result.epsilon}), "
          f"{result.seconds:.1f} s")
    assert result.passed, (f"spark: {name}: audited epsilon >= {result.epsilon_lb:.3f} > "
                           f"{result.epsilon} ({result.event})")


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory, spark_cluster: SparkCluster
        ) -> Iterator[SimpleNamespace]:
    """The attack suite's D and D' (trigger rows: NaN, +-Inf, extreme integers, text that is
    not a number) on Spark."""
    folder = tmp_path_factory.mktemp("spark-attacks")
    d, d_prime, metadata = A.build_databases(scenario("SELECT 1", TRIGGERS), folder)
    with dpsql.Database(spark_copy(d, folder / "d", spark_cluster), metadata) as db, \
            dpsql.Database(spark_copy(d_prime, folder / "d_prime", spark_cluster),
                           metadata) as db_prime:
        yield SimpleNamespace(d=db, d_prime=db_prime)


#: The attack suite's data-dependent queries on Spark: a cover of their SQL constructs and a
#: sixth of the rest in turn (tests/support/subset.py; every one with DPSQL_SLOW=1). Each
#: runs on DuckDB and PostgreSQL every time; on Spark what differs is the dialect's spelling,
#: which the cover holds (26 of the 64 queries; about 31 run, two Spark queries each).
ON_SPARK = subset(DATA_DEPENDENT, 6, text_features)


@pytest.mark.parametrize("sql", ON_SPARK)
def test_errors_never_depend_on_the_data_on_spark(dbs: SimpleNamespace, sql: str) -> None:
    """Every query that could fail on some rows only has the same fate on D and D'."""
    kw = {"epsilon": 1.0, "delta": 1e-6 if "GROUP BY" in sql else 0.0}
    on_d = {outcome(dbs.d, sql, **kw)}
    on_d_prime = {outcome(dbs.d_prime, sql, **kw)}
    assert on_d == on_d_prime, f"spark: {sql}: {on_d} on D but {on_d_prime} on D'"
    assert on_d <= {"answered"} | {c.__name__ for c in _REFUSALS}, on_d
