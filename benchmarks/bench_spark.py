"""dpsql on Spark next to raw Spark SQL: the engine benchmark's queries on a local session.

    python benchmarks/bench_spark.py                  # 1M rows, local[2], 3 runs per query
    python benchmarks/bench_spark.py --rows 100000 --runs 5 --master "local[4]"

The data and queries are ``bench_engine.py``'s (the same seeded DuckDB file, generated if
missing); each table is exported once to ``benchmarks/data/spark_v1_N/<table>.parquet`` and
read by a local Spark session (``spark:<master>?folder=...``).

*raw ms*: the analyst's SQL as written, ``spark.sql(sql).collect()`` on the same session;
*dpsql ms*: ``Database.query`` end to end with an empty plan cache before every run (so each
run pays planning, the two Spark analyses of the rewritten query, the engine query with
clamping and contribution bounding, noise and post-processing). Interleaved, after one warm-up
of each; the median of ``--runs``. Prints Markdown.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_engine as bench  # noqa: E402 -- the engine benchmark's data and queries

import dpsql  # noqa: E402


def parquet_folder(rows: int) -> tuple[Path, Path]:
    database, metadata = bench.ensure_data(rows)
    folder = bench.DATA / f"spark_v{bench.GENERATOR_VERSION}_{rows}"
    if not folder.exists():
        partial = folder.with_suffix(".partial")
        partial.mkdir(parents=True, exist_ok=True)
        with duckdb.connect(str(database), read_only=True) as con:
            for table in ("people", "events"):
                con.execute(f"COPY {table} TO '{partial / table}.parquet' (FORMAT parquet)")
        partial.replace(folder)
    return folder, metadata


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    folder, metadata = parquet_folder(args.rows)
    load = bench._load()
    started = time.perf_counter()
    db = dpsql.Database(f"spark:{args.master}?folder={folder}", metadata)
    print(f"session and tables opened in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)
    session = db.engine._session  # type: ignore[attr-defined]
    print("| table | query | raw Spark ms | dpsql ms | ratio | floor ms | dpsql / floor |\n"
          "|---|---|---|---|---|---|---|")
    for q in bench.QUERIES:
        def raw(q: bench.Query = q) -> object:
            return session.sql(q.sql).collect()

        def private(q: bench.Query = q) -> object:
            bench.forget_plans(db)
            return db.query(q.sql, epsilon=bench.EPSILON, delta=q.delta)

        raw(), private()  # warm-up
        times: dict[str, list[float]] = {"raw": [], "dpsql": []}
        for i in range(args.runs):
            order = [("raw", raw), ("dpsql", private)]
            for name, fn in order if i % 2 == 0 else order[::-1]:
                times[name].append(bench._timed(fn))
        r, d = (statistics.median(times[k]) * 1000 for k in ("raw", "dpsql"))
        floor = "- | -"
        if q.table == "events":  # bounded: its floor, the bare grouping (issue 23.3)
            f = statistics.median(bench._timed(lambda q=q: session.sql(q.floor()).collect())
                                  for _ in range(args.runs)) * 1000
            floor = f"{f:.0f} | {d / f:.1f}"
        print(f"| {q.table} | {q.label} | {r:.0f} | {d:.0f} | {d / r:.1f} | {floor} |",
              flush=True)
    print(f"\n{args.rows:,} rows per table, Spark {session.version} {args.master}, median of "
          f"{args.runs}; load average at start {load}, at end {bench._load()}")
    db.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
