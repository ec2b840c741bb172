"""dpsql on Spark next to plain Spark SQL on the same session: a standalone cluster, Spark
Connect, or a local session, at 1M and 10M rows (issue 39, item 5).

    python benchmarks/bench_spark.py                                 # cluster and Connect, 1M
    python benchmarks/bench_spark.py --rows 10000000 --runs 2        # the same at 10M rows
    python benchmarks/bench_spark.py --on local --queries all        # every query, local[2]

**Data.** ``bench_engine.py``'s seeded tables (``people``: one row per person; ``events``: ~20
heavy-tailed rows per person, contribution-bounded to k = 10 rows and g = 3 groups), generated
once into its DuckDB file and exported once to ``benchmarks/data/spark_v2_N/<table>.parquet``;
later runs reuse both.

**Sessions** (``--on``):

* ``cluster``: a throw-away standalone cluster as the test suite starts it
  (``tests/support/sparkcluster.py``: pyspark's own scripts, a master and a worker of two
  cores, two one-core executors in JVMs of their own), this process as the classic driver
  (``spark://127.0.0.1:<port>?folder=...``);
* ``connect``: the same run's Spark Connect server (``sc://...``, its own JVM running its
  tasks on ``local[2]``);
* ``local``: a local session in this process (``local[2]``; not with ``cluster``: one
  SparkContext per process).

The JVMs get the JDK's default JIT (the tests' quick-start flags are dropped: they slow long
queries) and modest memory (``--executor-memory`` per executor, ``--connect-memory``).

**Timed**, per session and query, interleaved: one warm-up of each, then ``--runs`` rounds in
which plain and dpsql alternate, the order flipped every round; medians.

* *plain ms*: the analyst's SQL as written, ``session.sql(sql).collect()`` on the session
  dpsql opened (the same views over the same files, the same settings);
* *dpsql ms*: ``Database.query`` end to end with an empty plan cache (a new text: planning,
  Spark's two analyses of the rewritten query, the engine query with clamping and contribution
  bounding, noise, post-processing);
* *engine ms*: of that, the time inside the engine query (``engine.execute``), so
  *dpsql - engine* is the per-query fixed cost, most of it Spark's analyses;
* *target*: dpsql <= 2x plain (issue 39.5).

``--queries scale`` (the default) runs COUNT(*), SUM (values clamped to their bounds) and
MEDIAN on both tables, GROUP BY a public key and the join of ``events`` to ``people`` on the
unit; ``--queries all`` the engine benchmark's full list. Prints Markdown, with the load
average (the machine may be shared: compare ratios within a run).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's dpsql (and tests.support)
sys.path.insert(0, str(HERE))

import bench_engine as bench  # noqa: E402 -- the engine benchmark's data and queries

import dpsql  # noqa: E402

#: ``--queries scale``: (table, label) of bench_engine.QUERIES.
SCALE = {("people", "COUNT(*)"), ("people", "SUM"), ("people", "MEDIAN"),
         ("events", "COUNT(*)"), ("events", "SUM"), ("events", "GROUP BY public"),
         ("events", "JOIN people on the unit"), ("events", "MEDIAN")}
TARGET = 2.0  # dpsql <= 2x plain Spark SQL on the same session


def parquet_folder(rows: int) -> tuple[Path, Path]:
    """The engine benchmark's tables as Parquet (exported once, then reused) and metadata."""
    database, metadata = bench.ensure_data(rows)
    folder = bench.DATA / f"spark_v{bench.GENERATOR_VERSION}_{rows}"
    if not folder.exists():
        partial = folder.with_suffix(".partial")
        partial.mkdir(parents=True, exist_ok=True)
        with duckdb.connect(str(database), read_only=True) as con:
            for table in ("people", "events", "regions"):
                con.execute(f"COPY {table} TO '{partial / table}.parquet' (FORMAT parquet)")
        partial.replace(folder)
    return folder, metadata


@contextlib.contextmanager
def cluster(args: argparse.Namespace) -> Iterator[object]:
    """The test suite's standalone cluster and Connect server, sized for the benchmark."""
    from tests.support import sparkcluster

    sparkcluster.JVM_OPTIONS = ""  # the JDK's JIT: the tests' C1-only flags slow long queries
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        sparkcluster.DEFAULTS.pop(key, None)
    megabytes = int(args.executor_memory.rstrip("m"))
    sparkcluster.WORKER_MEMORY = f"{2 * megabytes}m"  # room for its two executors
    sparkcluster.CONNECT_MEMORY = args.connect_memory
    sparkcluster.DEFAULTS.update({"spark.executor.memory": args.executor_memory,
                                  "spark.driver.memory": "768m",
                                  "spark.sql.shuffle.partitions": str(args.partitions)})
    folder = Path(tempfile.mkdtemp(prefix="dpsql-bench-spark-"))
    try:
        with sparkcluster.standalone_cluster(folder) as running:
            yield running
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # its logs and work folders


def measure(db: dpsql.Database, session: object, rows: int, on: str, runs: int,
            queries: list[bench.Query]) -> list[str]:
    """One Markdown row per query: plain and dpsql interleaved on ``db``'s own session."""
    timer = bench.EngineTimer(db)
    lines = []
    for q in queries:
        def plain(q: bench.Query = q) -> object:
            return session.sql(q.sql).collect()  # type: ignore[attr-defined]

        def private(q: bench.Query = q) -> object:
            bench.forget_plans(db)
            return db.query(q.sql, epsilon=bench.EPSILON, delta=q.delta)

        plain(), private()  # warm-up
        times: dict[str, list[float]] = {"plain": [], "dpsql": [], "engine": []}
        order: list[tuple[str, Callable[[], object]]] = [("plain", plain), ("dpsql", private)]
        for i in range(runs):
            for name, fn in order if i % 2 == 0 else order[::-1]:
                timer.elapsed = 0.0
                times[name].append(bench._timed(fn))
                if name == "dpsql":
                    times["engine"].append(timer.elapsed)
        p, d, e = (statistics.median(times[k]) * 1000 for k in ("plain", "dpsql", "engine"))
        met = "yes" if d <= TARGET * p else "no"
        line = (f"| {rows:,} | {on} | {q.table} | {q.label} | {p:.0f} | {d:.0f} | "
                f"{d / p:.2f}x | {e:.0f} | {e / p:.2f}x | {met} |")
        print(line, flush=True)
        lines.append(line)
    return lines


def run(args: argparse.Namespace) -> None:
    queries = [q for q in bench.QUERIES if args.queries == "all" or (q.table, q.label) in SCALE]
    if args.only:
        queries = [q for q in queries if f"{q.table} {q.label}" in args.only]
    print("| rows | session | table | query | plain Spark ms | dpsql ms | dpsql / plain | "
          "engine ms | engine / plain | <= 2x |\n"
          "|---:|---|---|---|---:|---:|---:|---:|---:|---|", flush=True)
    with contextlib.ExitStack() as stack:
        running = stack.enter_context(cluster(args)) if set(args.on) - {"local"} else None
        for rows in args.rows:
            folder, metadata = parquet_folder(rows)
            for on in args.on:
                url = (f"spark:{args.master}?folder={folder}" if on == "local" else
                       running.url(folder) if on == "cluster" else  # type: ignore[union-attr]
                       running.connect_url(folder))  # type: ignore[union-attr]
                started = time.perf_counter()
                with dpsql.Database(url, metadata) as db:
                    print(f"<!-- {on}: opened in {time.perf_counter() - started:.1f} s -->",
                          file=sys.stderr, flush=True)
                    session = db.engine._session  # type: ignore[attr-defined]
                    measure(db, session, rows, on, args.runs, queries)
                    version = session.version
    print(f"\nSpark {version}, {args.partitions} shuffle partitions, executors of "
          f"{args.executor_memory}, Connect server {args.connect_memory}; median of "
          f"{args.runs} interleaved rounds after a warm-up, epsilon {bench.EPSILON:g}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--on", nargs="+", default=["cluster", "connect"],
                        choices=["cluster", "connect", "local"])
    parser.add_argument("--queries", choices=["scale", "all"], default="scale")
    parser.add_argument("--only", nargs="+", metavar="'TABLE QUERY'",
                        help="only these queries, e.g. 'events SUM' 'people COUNT(*)'")
    parser.add_argument("--master", default="local[2]", help="the local session's master")
    parser.add_argument("--executor-memory", default="768m", help="per executor (MB)")
    parser.add_argument("--connect-memory", default="1g", help="the Connect server's JVM")
    parser.add_argument("--partitions", type=int, default=8,
                        help="spark.sql.shuffle.partitions on the cluster")
    args = parser.parse_args(argv)
    if "local" in args.on and len(args.on) > 1:
        parser.error("--on local runs alone (one SparkContext per process)")
    # A SIGTERM (a background job's stop: SIGINT is ignored there) unwinds, so that the
    # cluster's JVMs are stopped and its folder removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    load = bench._load()
    run(args)
    print(f"load average at start {load}, at end {bench._load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
