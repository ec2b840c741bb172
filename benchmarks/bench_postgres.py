"""dpsql on PostgreSQL next to raw PostgreSQL: the engine benchmark's queries at 1M rows.

    python benchmarks/bench_postgres.py                      # throw-away cluster, 1M rows
    python benchmarks/bench_postgres.py --rows 100000 --runs 3

**Data and queries**: those of ``bench_engine.py`` (the same seeded ``people`` and ``events``
tables, the same metadata, the same fourteen queries), copied from its DuckDB file into
PostgreSQL (Debian's server in a throw-away cluster under a temporary folder, started and
stopped by this script, ``fsync = off``, default settings otherwise).

**What is timed**, interleaved after one warm-up of each, median of ``--runs``:

- *raw*: the analyst's SQL, translated to PostgreSQL by sqlglot (``MEDIAN`` becomes
  ``PERCENTILE_CONT(0.5) WITHIN GROUP``), on a psycopg session of the read-only role;
- *dpsql*: ``Database.query`` end to end on ``postgresql://`` with the plan cache emptied before
  each run (parse, check, plan, the rewritten query on PostgreSQL, noise, post-processing);
- *floor* (bounded ``events`` only): the bare ``GROUP BY person_id`` (and the key, for a GROUP BY)
  over the same rows, ``Query.floor``: what any per-query bounding costs at least (issue 23).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import sqlglot

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import QUERIES, ensure_data

import dpsql
from tests.support.pgcluster import Cluster, throwaway_cluster


def _raw(con: psycopg.Connection, sql: str) -> float:
    started = time.perf_counter()
    con.execute(sql).fetchall()  # type: ignore[arg-type]
    return time.perf_counter() - started


def _dpsql(db: dpsql.Database, sql: str, delta: float) -> float:
    db.planner.plans.clear()
    db._memo.clear()
    started = time.perf_counter()
    db.query(sql, epsilon=1.0, delta=delta)
    return time.perf_counter() - started


def run(cluster: Cluster, rows: int, runs: int) -> list[str]:
    database, metadata = ensure_data(rows)
    print(f"copying {database.name} into PostgreSQL ...", file=sys.stderr, flush=True)
    url = cluster.load_duckdb_file(database, ["people", "events", "regions"])
    lines = ["| rows | table | query | raw PostgreSQL ms | dpsql ms | ratio | floor ms | "
             "dpsql / floor |", "|---:|---|---|---:|---:|---:|---:|---:|"]
    with dpsql.Database(url, metadata) as db, psycopg.connect(url) as con:
        for q in QUERIES:
            raw_sql = sqlglot.transpile(q.sql, read="duckdb", write="postgres")[0]
            _raw(con, raw_sql), _dpsql(db, q.sql, q.delta)  # warm-up
            raw: list[float] = []
            private: list[float] = []
            for i in range(runs):  # the order flips every round
                for first in ((True, False) if i % 2 == 0 else (False, True)):
                    if first:
                        raw.append(_raw(con, raw_sql))
                    else:
                        private.append(_dpsql(db, q.sql, q.delta))
            r, p = statistics.median(raw) * 1000, statistics.median(private) * 1000
            floor = "-"
            if q.table == "events":  # bounded: its floor, the bare grouping (issue 23.3)
                f = statistics.median(_raw(con, q.floor()) for _ in range(runs)) * 1000
                floor = f"{f:.1f} | {p / f:.1f}x"
            lines.append(f"| {rows:,} | {q.table} | {q.label} | {r:.1f} | {p:.1f} | "
                         f"{p / r:.1f}x | {floor if floor != '-' else '- | -'} |")
            print(lines[-1], file=sys.stderr, flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, throwaway_cluster(Path(tmp)) as cluster:
        print("\n".join(run(cluster, args.rows, args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
