"""The local-rows selection (dpsql/execution/local_rows.py, ``selection``) on PostgreSQL and
Spark: the same bounding and selection as on DuckDB, from the same engine-neutral tree (the
IR's salted hash, total casts, top-k lists), so the local path runs on every engine that reads
private tables; on DuckDB, the same rows as its definition."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from dpsql.engines import DuckDBEngine, Engine, open_engine
from dpsql.execution.local_rows import _draws, released_rows, selection
from dpsql.metadata.metadata import parse_metadata
from dpsql.privacy.local import row_mechanism
from dpsql.privacy.randomness import Randomness
from tests.support.pgcluster import Cluster

# 10 people with 7 rows each, one with 40, one row of no one; k = 3.
DATA = ("SELECT CASE WHEN i = 0 THEN NULL WHEN i < 41 THEN 99 ELSE i % 10 END AS pid, "
        "['a', 'b', 'c'][i % 3 + 1] AS kind, (i % 7)::DOUBLE AS amount FROM range(111) t(i)")


def _table(public: bool) -> Any:
    local: dict[str, Any] = {"epsilon": 1.0, "columns": {
        "kind": "rr", "amount": {"release": "laplace", "step": 1.0}}}
    local.update({"row_count": "public"} if public else {"sample_rows": 25})
    return parse_metadata({"tables": {"visits": {
        "privacy_unit": "pid", "max_rows_per_unit": 3,
        "columns": {"pid": {"type": "int"}, "kind": {"type": "text", "values": ["a", "b", "c"]},
                    "amount": {"type": "float", "lower": 0, "upper": 10}},
        "local": local}}}).table("visits")


def _check(engine: Engine) -> None:
    public, sampled = _table(True), _table(False)
    rng = Randomness.seeded(5)
    # Every bounded row: 11 people (10 + the heavy one), 3 rows each; the row of no one dropped.
    assert len(released_rows(public, row_mechanism(public), engine, rng)["kind"]) == 33
    assert len(released_rows(public, row_mechanism(public), engine, rng, size=4)["kind"]) == 4
    some = len(released_rows(public, row_mechanism(public), engine, rng, percent=50)["kind"])
    assert 0 < some < 33
    assert len(released_rows(sampled, row_mechanism(sampled), engine, rng)["kind"]) == 25


def test_duckdb(tmp_path: Any) -> None:
    import duckdb

    path = tmp_path / "d.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE visits AS {DATA}")
    engine = DuckDBEngine(path)
    try:
        _check(engine)
    finally:
        engine.close()


@pytest.mark.pg
def test_postgres(pg_cluster: Cluster) -> None:
    cluster = pg_cluster.database("local_rows")
    cluster.load_duckdb_query(DATA, "visits")
    cluster.grant_reader(["visits"])
    engine = open_engine(cluster.url("dpsql_reader"))
    try:
        _check(engine)
    finally:
        engine.close()


@pytest.mark.spark
def test_spark(spark_cluster: Any, tmp_path: Any) -> None:
    import duckdb

    from dpsql.engines.spark.engine import SparkEngine

    duckdb.sql(f"COPY ({DATA}) TO '{tmp_path / 'visits.parquet'}' (FORMAT PARQUET)")
    engine = SparkEngine(spark_cluster.url(tmp_path))
    try:
        _check(engine)
    finally:
        engine.close()


def test_draws_are_uniform_with_replacement() -> None:
    # m = 2 draws from n = 3 rows, through the first-appearance renaming and a uniformly
    # random order of the rows (what the engine returns): each of the 9 ordered pairs 1/9.
    rng, order_rng = Randomness.seeded(11), np.random.default_rng(12)
    counts: Counter[tuple[int, int]] = Counter()
    trials = 18_000
    for _ in range(trials):
        order = order_rng.permutation(3)
        a, b = _draws(3, 2, rng)
        assert a == 0 and b in (0, 1)  # positions among the first rows returned
        counts[(int(order[a]), int(order[b]))] += 1
    assert len(counts) == 9
    for pair, seen in counts.items():
        assert abs(seen / trials - 1 / 9) < 0.01, (pair, seen)


def test_every_random_choice_is_keyed_by_the_salt(tmp_path: Any) -> None:
    import duckdb

    path = tmp_path / "d.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE visits AS {DATA}")
    engine = DuckDBEngine(path)
    table = _table(True)
    sql = selection(table, ["kind", "amount", "pid"], engine.schema["visits"], None, 5,
                    False).sql(dialect=engine.dialect)
    try:
        assert "RANDOM" not in sql.upper()  # never the engine's own generator
        first, again = engine.execute(sql, [123])[1], engine.execute(sql, [123])[1]
        other = engine.execute(sql, [456])[1]
    finally:
        engine.close()
    assert first == again and first != other


def _definition(key: list[str], k: int | None, percent: float | None, limit: int | None,
                counted: bool) -> str:
    """The selection as ``selection``'s docstring defines it, written the direct way: every
    unit's rows ranked by a window (a sort), the first k kept, then ordered by ``__u``."""
    cols = '"kind", "amount"' + (', "pid"' if key == ["pid"] else "")
    keys = ", ".join(f'"{c}"' for c in key)
    where = ['"pid" IS NOT NULL'] if key == ["pid"] else ["TRUE"]
    kept = [f"__r <= {k}"] if k is not None else ["TRUE"]
    if percent is not None:
        kept.append(f"CAST(HASH(HASH($1, 1, {keys}, __r)) AS DOUBLE) / 18446744073709551616 < "
                    f"{percent / 100}")
    n = ", COUNT(*) OVER () AS __n" if counted else ""
    return (f"SELECT {cols}, HASH(HASH($1, 1, {keys}, __r)) AS __u{n} FROM (SELECT {cols}, "
            f"ROW_NUMBER() OVER (PARTITION BY {keys} ORDER BY HASH(HASH($1, 0, {keys}, {cols}))) "
            f"AS __r FROM visits WHERE {' AND '.join(where)}) WHERE {' AND '.join(kept)} "
            f"ORDER BY __u" + (f" LIMIT {limit}" if limit is not None else ""))


@pytest.mark.parametrize("bounded", [True, False])
@pytest.mark.parametrize(("percent", "limit", "counted"), [
    (None, None, False), (None, 5, True), (None, 200, True), (30.0, None, False),
    (30.0, 4, False)])
def test_the_engine_computes_the_selection_as_defined(
        tmp_path: Any, bounded: bool, percent: float | None, limit: int | None,
        counted: bool) -> None:
    # Without sorting a unit's rows (positions drawn from per-unit counts, the drawn units
    # ranked by a top-k aggregate), the same rows in the same order as the definition, for
    # every salt: duplicates, NULL values, a NULL unit, a heavy unit, a table without units.
    import duckdb

    path = tmp_path / "d.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE visits AS SELECT pid, kind, CASE WHEN pid % 4 = 1 THEN NULL "
                    f"ELSE amount END AS amount FROM ({DATA})")
    spec: dict[str, Any] = {"columns": {
        "pid": {"type": "int"}, "kind": {"type": "text", "values": ["a", "b", "c"]},
        "amount": {"type": "float", "lower": 0, "upper": 10}}}
    if bounded:
        spec.update(privacy_unit="pid", max_rows_per_unit=3)
    table = parse_metadata({"tables": {"visits": spec}}).table("visits")
    names = ["kind", "amount", "pid"] if bounded else ["kind", "amount"]
    engine = DuckDBEngine(path)
    try:
        ours = selection(table, names, engine.schema["visits"], percent, limit, counted
                         ).sql(dialect=engine.dialect)
        defined = _definition(["pid"] if bounded else names, 3 if bounded else None,
                              percent, limit, counted)
        for salt in range(12):
            assert engine.execute(ours, [salt])[1] == engine.execute(defined, [salt])[1]
    finally:
        engine.close()
