"""The time of a local-rows read does not show whether one person exceeds k: the engine
bounds and selects (dpsql/execution/local_rows.py, ``selection``), so only the released rows
reach Python. One person with 300,000 extra rows must move the median time of a read by less
than the answer grid (dpsql/execution/time_limits.py: 50 ms by default).

Not met yet: the engine's bounding window sorts the heavy person's partition on one thread,
measured 60-120 ms more on a loaded 2-core machine (against 1.5 s more when the rows were
bounded in Python). The test holds the engine path to ``BOUND`` (a regression to reading the
table into Python fails it) until the bounding stops sorting a unit's rows."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpsql.engines import DuckDBEngine
from dpsql.execution.local_rows import released_rows
from dpsql.metadata.metadata import Metadata, parse_metadata
from dpsql.privacy.local import row_mechanism
from dpsql.privacy.randomness import Randomness

GRID = 0.050  # the default answer grid, seconds: the target
BOUND = 5 * GRID  # what the engine path holds today (module docstring)
EXTRA = 300_000  # one person's extra rows
VISITS: dict[str, Any] = {
    "privacy_unit": "pid", "max_rows_per_unit": 5,
    "columns": {"pid": {"type": "int"}, "kind": {"type": "text", "values": ["a", "b", "c"]},
                "amount": {"type": "int", "lower": 0, "upper": 100}},
    "local": {"epsilon": 1.0, "sample_rows": 10,
              "columns": {"kind": "rr", "amount": "laplace"}}}
BASE = ("CREATE TABLE visits AS SELECT i % 10000 AS pid, ['a', 'b', 'c'][i % 3 + 1] AS kind, "
        "i % 101 AS amount FROM range(50000) t(i)")
HEAVY = (f"INSERT INTO visits SELECT 7 AS pid, 'b' AS kind, 3 AS amount FROM range({EXTRA})")


def _engine(path: Path, statements: list[str]) -> DuckDBEngine:
    with duckdb.connect(str(path)) as con:
        for statement in statements:
            con.execute(statement)
    return DuckDBEngine(path)


def _median_time(engine: DuckDBEngine, metadata: Metadata, runs: int) -> float:
    """The median time of ``runs`` reads of 10 rows (m = 10 draws; with a public row count,
    TABLESAMPLE 10 ROWS)."""
    table = metadata.table("visits")
    assert table is not None
    mechanism, rng = row_mechanism(table), Randomness.seeded(3)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        rows = released_rows(table, mechanism, engine, rng, size=10)
        times.append(time.perf_counter() - start)
        assert len(rows["kind"]) == 10  # whatever the table's size
    return statistics.median(times)


@pytest.mark.parametrize("public", [False, True])
def test_one_heavy_person_does_not_change_the_time_of_a_local_read(
        tmp_path: Path, public: bool) -> None:
    local = {k: v for k, v in VISITS["local"].items() if not public or k != "sample_rows"}
    spec = {**VISITS, "local": {**local, **({"row_count": "public"} if public else {})}}
    metadata = parse_metadata({"tables": {"visits": spec}})
    d = _engine(tmp_path / "d.duckdb", [BASE])
    neighbour = _engine(tmp_path / "n.duckdb", [BASE, HEAVY])
    try:
        _median_time(d, metadata, 2), _median_time(neighbour, metadata, 2)  # warm up
        # Interleaved rounds: a load on the machine hits both databases alike.
        rounds = [(_median_time(d, metadata, 3), _median_time(neighbour, metadata, 3))
                  for _ in range(3)]
    finally:
        d.close()
        neighbour.close()
    base = statistics.median(r[0] for r in rounds)
    heavy = statistics.median(r[1] for r in rounds)
    assert abs(heavy - base) < BOUND, (base, heavy)
