"""A local-rows preview against ``SELECT ... USING SAMPLE`` of the same size on raw DuckDB.

    PYTHONPATH=. python benchmarks/bench_local_rows.py                 # 10M rows
    PYTHONPATH=. python benchmarks/bench_local_rows.py --rows 1000000 --runs 5

Generates a table of ``--rows`` visits (1 person in 10 rows, k = 5, one person with 300,000
extra rows), and times, interleaved, the median of ``--runs``:

* *dpsql*: ``SELECT * FROM visits`` on a table whose row count is not public (m =
  ``sample_rows`` uniform draws, randomized in Python, the query run over them:
  :func:`dpsql.execution.local_rows.answer_local`), no ledger: a *first* read (the engine's
  kept counts dropped before it, so it counts every unit's rows) and a *later* one (the
  counts kept: only the drawn units' rows read); a checkout without kept counts reads the
  same way every time, so both columns time the same thing there; and *rows*, a later read's
  rows alone (:func:`~dpsql.execution.local_rows.released_rows`: drawn and randomized, without
  the fresh scratch DuckDB that the analyst's query runs in);
* *raw*: ``SELECT * FROM visits USING SAMPLE m ROWS`` on the same DuckDB connection.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import duckdb
import sqlglot

from dpsql.engines import DuckDBEngine, Engine
from dpsql.execution.local_rows import answer_local, local_read, released_rows
from dpsql.metadata.metadata import parse_metadata
from dpsql.privacy.randomness import Randomness

try:  # a checkout before kept counts (the "before" column) has nothing to forget
    from dpsql.execution.local_rows import forget_kept_counts
except ImportError:
    def forget_kept_counts(engine: Engine) -> None:
        pass


def _visits(m: int) -> dict[str, object]:
    return {"privacy_unit": "pid", "max_rows_per_unit": 5,
            "columns": {"pid": {"type": "int"},
                        "kind": {"type": "text", "values": ["a", "b", "c"]},
                        "amount": {"type": "int", "lower": 0, "upper": 1000}},
            "local": {"epsilon": 1.0, "sample_rows": m,
                      "columns": {"kind": "rr", "amount": "laplace"}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "visits.duckdb"
        with duckdb.connect(str(path)) as con:
            con.execute(f"CREATE TABLE visits AS SELECT i // 10 AS pid, "
                        f"['a', 'b', 'c'][i % 3 + 1] AS kind, i % 1001 AS amount "
                        f"FROM range({args.rows}) t(i)")
            con.execute("INSERT INTO visits SELECT 7, 'b', 3 FROM range(300000)")
        engine = DuckDBEngine(path)  # raw DuckDB: the same connection, without dpsql
        print(f"{args.rows:,} rows (+300,000 of one person), median of {args.runs}")
        print(f"{'rows released':>14} {'first s':>9} {'later s':>9} {'rows s':>9} "
              f"{'raw s':>9} {'later/raw':>10}")
        for m in (10, 1000):
            metadata = parse_metadata({"tables": {"visits": _visits(m)}})
            read = local_read(sqlglot.parse_one("SELECT * FROM visits", dialect="duckdb"),
                              metadata)
            assert read is not None
            first: list[float] = []
            later: list[float] = []
            rows: list[float] = []
            theirs: list[float] = []
            for _ in range(args.runs):  # interleaved: a load hits the three alike
                forget_kept_counts(engine)
                for times in (first, later):
                    start = time.perf_counter()
                    answer_local(read, engine, Randomness())
                    times.append(time.perf_counter() - start)
                start = time.perf_counter()
                released_rows(read.table, read.rows, engine, Randomness())
                rows.append(time.perf_counter() - start)
                start = time.perf_counter()
                engine.execute(f"SELECT * FROM visits USING SAMPLE {m} ROWS")
                theirs.append(time.perf_counter() - start)
            a, b, r, c = (statistics.median(t) for t in (first, later, rows, theirs))
            print(f"{m:>14,} {a:>9.3f} {b:>9.3f} {r:>9.3f} {c:>9.3f} {b / c:>9.1f}x")
        engine.close()


if __name__ == "__main__":
    main()
