"""The attack suite and the audit scenarios on every engine beyond DuckDB (the engines of the
differential harness, tests/engines/test_engines_differential.py: one line adds one), at a reduced
N.

D and D' of the attack suite (tests/privacy/test_attacks.py: trigger rows with NaN, +-Inf, the
extreme 64-bit integers, text that is not a number) are copied into the engine; every query
that could fail on some rows only must have the same fate on both, and every aggregate must
stay finite and within its bounds. The audit scenarios run with D and D' copied likewise:
every one with DPSQL_SLOW=1, by default the subset of tests/support/subset.py (a cover of
their SQL constructs, mechanisms and kinds of bounding, and a rotating fifth of the rest on
the run's seed).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest

import dpsql
from dpsql.audit import audit as A
from dpsql.errors import QueryTimeout
from tests.engines.test_engines_differential import ENGINES
from tests.privacy.test_attacks import (
    _REFUSALS,
    AGGREGATES,
    DATA_DEPENDENT,
    FULL,
    TRIGGERS,
    gross_n,
    outcome,
    scenario,
)
from tests.support.subset import scenario_subset

pytestmark = [pytest.mark.usefixtures("seeded_randomness"), pytest.mark.pg]

OTHERS = [name for name in ENGINES if name != "duckdb"]  # DuckDB: tests/privacy/test_attacks.py
_copies = itertools.count()


@pytest.fixture(scope="module", params=OTHERS)
def dbs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[SimpleNamespace]:
    folder = tmp_path_factory.mktemp("engine-attacks")
    d, d_prime, metadata = A.build_databases(scenario("SELECT 1", TRIGGERS), folder)
    load = ENGINES[request.param]
    with dpsql.Database(load(request, d, "attacks_d"), metadata) as db, \
            dpsql.Database(load(request, d_prime, "attacks_d_prime"), metadata) as db_prime:
        yield SimpleNamespace(d=db, d_prime=db_prime, engine=request.param)


@pytest.mark.parametrize("sql", DATA_DEPENDENT)
def test_errors_never_depend_on_the_data(dbs: SimpleNamespace, sql: str) -> None:
    kw = {"epsilon": 1.0, "delta": 1e-6 if "GROUP BY" in sql else 0.0}
    on_d = {outcome(dbs.d, sql, **kw)}
    on_d_prime = {outcome(dbs.d_prime, sql, **kw)}
    assert on_d == on_d_prime, f"{dbs.engine}: {sql}: {on_d} on D but {on_d_prime} on D'"
    assert on_d <= {"answered"} | {c.__name__ for c in _REFUSALS}, on_d


@pytest.mark.parametrize("aggregate", AGGREGATES)
def test_null_nan_and_infinities_in_every_aggregate(dbs: SimpleNamespace,
                                                    aggregate: str) -> None:
    for db in (dbs.d, dbs.d_prime):
        for sql in (f"SELECT {aggregate} FROM people",
                    f"SELECT city, {aggregate} FROM people GROUP BY city"):
            for row in db.query(sql, epsilon=1.0).rows:
                value = row[-1]
                assert isinstance(value, int | float) and math.isfinite(value), (sql, row)
                if aggregate.startswith(("AVG(score", "MEDIAN", "QUANTILE", "MIN", "MAX")):
                    assert -10 <= value <= 10, (sql, row)


@pytest.mark.audit
@pytest.mark.parametrize("engine", OTHERS)
@pytest.mark.parametrize("name", scenario_subset(list(A.SCENARIOS), 5))
def test_audit_scenario_passes(request: pytest.FixtureRequest, engine: str, name: str) -> None:
    """Each built-in scenario, D and D' copied into the engine, at the N that catches a gross
    failure (test_attacks.gross_n; 200 with DPSQL_SLOW=1): the engine's SQL keeps the
    neighbour within the noise's sensitivity."""
    def copy(path: Path) -> str:
        return ENGINES[engine](request, path, f"audit_{name}_{next(_copies)}")

    scenario = A.SCENARIOS[name]
    result = A.audit(scenario, gross_n(scenario.epsilon), n_select=100 if FULL else 20,
                     engine=copy)
    assert result.passed, (f"{engine}: {name}: audited epsilon >= {result.epsilon_lb:.3f} > "
                           f"{result.epsilon}")


@pytest.mark.parametrize("engine", OTHERS)
def test_the_owners_timeout_stops_the_engine_and_the_next_query_runs(
        request: pytest.FixtureRequest, tmp_path: Path, engine: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The owner's statement_timeout cancels the engine's query (a QueryTimeout naming only
    the limit, the same on D and D'), and the session still answers afterwards."""
    import dpsql.execution.time_limits
    from tests.privacy.test_attacks import SLOW_META, SLOW_SQL

    fired: list[bool] = []

    class Watched(dpsql.execution.time_limits.Deadline):  # type: ignore[misc]
        def stop(self) -> None:
            super().stop()
            fired.append(self.fired)

    monkeypatch.setattr(dpsql.execution.time_limits, "Deadline", Watched)

    meta = tmp_path / "meta.toml"
    meta.write_text(SLOW_META.format(timeout=0.05, grid=0.0, reuse="false"))
    outcomes = []
    for label, extra in (("d", ""), ("d_prime", "UNION ALL SELECT 999999, 42 FROM range(5)")):
        path = tmp_path / f"{label}.duckdb"
        with duckdb.connect(str(path)) as con:
            con.execute("CREATE TABLE events AS SELECT i % 100000 AS pid, (i * 7919) % 100 AS v"
                        f" FROM range(1000000) t(i) {extra}")
        database = ENGINES[engine](request, path, f"slow_{label}")
        with dpsql.Database(database, meta, analyst="alice") as db:
            fired.clear()
            with pytest.raises(QueryTimeout) as info:
                db.query(SLOW_SQL, epsilon=1.0)
            # dpsql's deadline fired while the query ran (the backstop is the limit + 1 s)
            assert fired == [True]
            outcomes.append(str(info.value))
            assert db.engine.execute("SELECT 1") == (["?column?"], [(1,)])  # still usable
    assert outcomes[0] == outcomes[1] and "0.05 s" in outcomes[0]


UNBOUNDED_META = """
[tables.t]
privacy_unit = "id"
one_row_per_unit = true

[tables.t.columns]
id = { type = "int" }
x = { type = "float", nullable = true }
"""
OVERFLOWS = ["SELECT COUNT(*) FROM t WHERE x * 1e300 > 1", "SELECT COUNT(*) FROM t WHERE x * x > 1",
             "SELECT COUNT(*) FROM t WHERE x + x > 1", "SELECT COUNT(*) FROM t WHERE x - x > 1",
             "SELECT COUNT(*) FROM t WHERE x / 1e-300 > 1",
             "SELECT COUNT(*) FROM t WHERE POWER(x, 2) > 1",
             "SELECT COUNT(*) FROM t WHERE EXP(x) > 1", "SELECT COUNT(*) FROM t WHERE x > 1",
             # ROUND(x, 2) multiplies by 10^2 (round_digits); DuckDB's // of a double divides
             "SELECT COUNT(*) FROM t WHERE ROUND(x, 2) > 1",
             "SELECT COUNT(*) FROM t WHERE ROUND(x, -300) > 1",
             "SELECT COUNT(*) FROM t WHERE x // 2 > 1", "SELECT COUNT(*) FROM t WHERE x // 0.5 > 1"]


@pytest.mark.parametrize("engine", OTHERS)
def test_float_overflow_of_unbounded_columns_never_fails(
        request: pytest.FixtureRequest, tmp_path: Path, engine: str) -> None:
    """A float column without bounds holding 1.7e308 in D' only: arithmetic that overflows a
    double (an error on PostgreSQL, infinity on DuckDB) is refused on both before any row is
    read, or answered on both."""
    meta = tmp_path / "meta.toml"
    meta.write_text(UNBOUNDED_META)
    dbs = []
    for label, extra in (("d", ""), ("d_prime", "UNION ALL SELECT 99, 1.7e308, ")):
        path = tmp_path / f"{label}.duckdb"
        with duckdb.connect(str(path)) as con:
            con.execute("CREATE TABLE t AS SELECT i AS id, i::DOUBLE AS x FROM range(20) r(i) "
                        + extra.rstrip(", "))
        dbs.append(dpsql.Database(ENGINES[engine](request, path, f"overflow_{label}"), meta))
    try:
        for sql in OVERFLOWS:
            fates = [outcome(db, sql, epsilon=1.0) for db in dbs]
            assert fates[0] == fates[1], f"{engine}: {sql}: {fates}"
            assert fates[0] in {"answered", "UnsupportedQuery"}, (sql, fates)
    finally:
        for db in dbs:
            db.close()


UNDERFLOW_META = UNBOUNDED_META.replace('nullable = true }',
                                        'nullable = true, lower = -10, upper = 10 }')
UNDERFLOWS = ["SELECT COUNT(*) FROM t WHERE x * 1e-300 > 0", "SELECT SUM(x / 50) FROM t",
              "SELECT SUM(x * x) FROM t", "SELECT SUM(POWER(x, 2)) FROM t",
              "SELECT AVG(POWER(x, 3) * 0.5) FROM t", "SELECT AVG(x / 3e300) FROM t",
              "SELECT SUM(1e-300 / (x + 1e300)) FROM t", "SELECT VAR_SAMP(x) FROM t",
              "SELECT STDDEV(x) FROM t", "SELECT AVG(x * (x / 7)) FROM t",
              "SELECT COUNT(*) FROM t WHERE EXP(x - 750) >= 0"]


@pytest.mark.parametrize("engine", OTHERS)
@pytest.mark.parametrize("tiny", [5e-324, 1e-306, 1e-200])
def test_float_underflow_never_fails(request: pytest.FixtureRequest, tmp_path: Path,
                                     engine: str, tiny: float) -> None:
    """A unit holding a tiny float in D' only: a product, quotient or power that underflows
    (PostgreSQL raises "value out of range: underflow", DuckDB gives 0) is answered on both;
    1e-200 underflows in the rewrite's own squares (VAR_SAMP, STDDEV: x * x) and in POWER
    (dpsql.engines.postgres.underflow)."""
    meta = tmp_path / "meta.toml"
    meta.write_text(UNDERFLOW_META)
    dbs = []
    for label, extra in (("d", ""), ("d_prime", f"UNION ALL SELECT 99, {tiny!r}::DOUBLE")):
        path = tmp_path / f"{label}.duckdb"
        with duckdb.connect(str(path)) as con:
            con.execute("CREATE TABLE t AS SELECT i AS id, i::DOUBLE AS x FROM range(20) r(i) "
                        + extra)
        name = f"underflow_{label}_{next(_copies)}"
        dbs.append(dpsql.Database(ENGINES[engine](request, path, name), meta))
    try:
        for sql in UNDERFLOWS:
            fates = [outcome(db, sql, epsilon=1.0) for db in dbs]
            assert fates == ["answered", "answered"], f"{engine}: {sql}: {fates}"
        # A nest too deep to spell with its guards is refused before it runs, on both sides.
        deep = f"SELECT SUM({' * '.join(['x'] * 30)}) FROM t"
        assert [outcome(db, deep, epsilon=1.0) for db in dbs] == ["UnsupportedQuery"] * 2
    finally:
        for db in dbs:
            db.close()
