"""dpsql at scale: 10M, 30M and 100M rows on DuckDB and on a standalone Spark cluster.

    python benchmarks/bench_scale.py                          # 10M, 30M, 100M on both
    python benchmarks/bench_scale.py --rows 10000000 --engines duckdb --runs 1

For each size, one table ``events`` (10 rows per person on average, a public category of 12
keys, a bounded amount) is written by DuckDB as Parquet under /tmp (``--folder``) and deleted
after. Each query runs through ``dpsql.Database.query`` (contribution bounding to k = 10 rows
and g = 3 groups per person, clamping, noise) on:

* ``duckdb``: the Parquet folder (DuckDB's folder mode, every core of this machine);
* ``cluster``: the same folder on a throw-away standalone cluster of ``--workers`` workers
  (tests/support/sparkcluster.py: pyspark's own scripts, one-core executors of
  ``--executor-memory`` each, in JVMs of their own), started once and stopped at the end.

*raw s* is the analyst's SQL as written, exact, on the same engine (what the query costs
without privacy); *dpsql s* the private query end to end (plan cache emptied before each run);
*ns/row* is dpsql's time per input row. Median of ``--runs`` after one warm-up. Prints
Markdown, with the load average (the machine is shared: compare ratios within a run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import dpsql  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
from bench_engine import forget_plans  # noqa: E402

KEYS = ", ".join(f'"c{i}"' for i in range(12))  # the public domain of category
METADATA = f"""
[tables.events]
privacy_unit = "person_id"
max_rows_per_unit = 10
max_groups_per_unit = 3

[tables.events.columns]
person_id = {{ type = "int" }}
category = {{ type = "text", values = [{KEYS}] }}
amount = {{ type = "float", lower = 0, upper = 1000 }}
"""
QUERIES = {
    "COUNT(*)": "SELECT COUNT(*) FROM events",
    "SUM": "SELECT SUM(amount) FROM events",
    "GROUP BY public key": "SELECT category, COUNT(*), AVG(amount) FROM events GROUP BY category",
}


def generate(folder: Path, rows: int) -> None:
    """``events`` of ``rows`` rows, person_id = i // 10 scrambled, as Parquet."""
    with duckdb.connect() as con:
        con.execute(f"""COPY (SELECT (hash(i // 10) % {max(rows // 10, 1)})::BIGINT AS person_id,
            'c' || (hash(i) % 12)::VARCHAR AS category, (hash(i * 7) % 100000) / 100.0 AS amount
            FROM range({rows}) t(i)) TO '{folder / "events.parquet"}'
            (FORMAT parquet, ROW_GROUP_SIZE 1000000)""")


def timed(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(db: dpsql.Database, raw: Callable[[str], object], rows: int, engine: str,
            runs: int) -> None:
    for label, sql in QUERIES.items():
        def private(sql: str = sql) -> object:
            forget_plans(db)
            return db.query(sql, epsilon=1.0)

        r = timed(lambda sql=sql: raw(sql), runs)  # type: ignore[misc]
        d = timed(private, runs)
        print(f"| {rows / 1e6:.0f}M | {engine} | {label} | {r:.2f} | {d:.2f} | "
              f"{d / r:.1f} | {d / rows * 1e9:.0f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+",
                        default=[10_000_000, 30_000_000, 100_000_000])
    parser.add_argument("--engines", nargs="+", default=["duckdb", "cluster"])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--executor-memory", default="2g")
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args(argv)
    print("| rows | engine | query | raw s | dpsql s | ratio | dpsql ns/row |\n"
          "|---|---|---|---|---|---|---|")
    load = os.getloadavg()
    cluster_cm = None
    if "cluster" in args.engines:
        from tests.support import sparkcluster

        sparkcluster.WORKERS = args.workers
        for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
            sparkcluster.DEFAULTS.pop(key, None)  # the tests' quick-start JIT: not for long queries
        sparkcluster.DEFAULTS.update({"spark.executor.memory": args.executor_memory,
                                      "spark.cores.max": str(args.workers),
                                      "spark.sql.shuffle.partitions": "16",
                                      "spark.driver.memory": "1g"})
        cluster_cm = sparkcluster.standalone_cluster(
            Path(tempfile.mkdtemp(prefix="dpsql-bench-spark-", dir=args.folder)))
        cluster = cluster_cm.__enter__()
    try:
        for rows in args.rows:
            data = Path(tempfile.mkdtemp(prefix="dpsql-scale-", dir=args.folder))
            try:
                started = time.perf_counter()
                generate(data, rows)
                print(f"<!-- {rows:,} rows generated in {time.perf_counter() - started:.0f} s "
                      "-->", file=sys.stderr)
                (data / "metadata.toml").write_text(METADATA, encoding="utf-8")
                for engine in args.engines:
                    database = str(data) if engine == "duckdb" else cluster.url(data)
                    with dpsql.Database(database, data / "metadata.toml") as db:
                        if engine == "duckdb":
                            cursor = db.engine.cursor()  # type: ignore[attr-defined]
                            raw: Callable[[str], object] = \
                                lambda sql, c=cursor: c.execute(sql).fetchall()  # noqa: E731
                        else:
                            session = db.engine._session  # type: ignore[attr-defined]
                            raw = lambda sql, s=session: s.sql(sql).collect()  # noqa: E731
                        measure(db, raw, rows, engine, args.runs)
            finally:
                shutil.rmtree(data, ignore_errors=True)
    finally:
        if cluster_cm is not None:
            cluster_cm.__exit__(None, None, None)
    print(f"\n{os.cpu_count()} cores; load average at start {load}, at end {os.getloadavg()}; "
          f"median of {args.runs} after a warm-up")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
