"""MEDIAN's accuracy and time: the fixed 1,000-bucket histogram (before issue 21.5) next to the
fine histogram of ``HISTOGRAM_BUCKETS`` buckets drawn by the continuous-interval method.

    PYTHONPATH=. python benchmarks/bench_median.py                 # 100k and 1M rows, 30 runs
    PYTHONPATH=. python benchmarks/bench_median.py --rows 100000 --runs 10

**Data**: ``people(pid, income)``, one row per person, income log-normal (median about 36,000)
clipped to the declared bounds [0, 200000], as a DOUBLE; generated (seeded) into
``benchmarks/data/median_N.duckdb`` with its metadata. **Query**: ``SELECT MEDIAN(income) FROM
people`` at epsilon 1 through ``dpsql.Database.query`` (plans forgotten before each query, so
that each run plans with the bucket count in force). **Error**: the median over the runs of
``|released - exact median|``. **Time**: the median over the runs, as a ratio to raw DuckDB in
the same run: ``SELECT MEDIAN(income)`` and a full sort (``SELECT income ... ORDER BY income``,
fetched as numpy). Old and new runs are interleaved, so machine load hits both alike.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import dpsql
import dpsql.privacy.aggregates as aggregates

DATA = Path(__file__).resolve().parent / "data"
METADATA = """
[tables.people]
privacy_unit = "pid"
one_row_per_unit = true

[tables.people.columns]
pid = { type = "int" }
income = { type = "float", lower = 0, upper = 200000 }
"""
SQL = "SELECT MEDIAN(income) FROM people"
OLD_BUCKETS = 1000


def ensure_data(rows: int) -> tuple[Path, Path]:
    DATA.mkdir(exist_ok=True)
    database, metadata = DATA / f"median_{rows}.duckdb", DATA / f"median_{rows}.toml"
    metadata.write_text(METADATA)
    if not database.exists():
        income = np.random.default_rng(21).lognormal(10.5, 0.7, rows).clip(0, 200000)
        with duckdb.connect(str(database)) as con:
            con.execute("CREATE TABLE people AS SELECT row_number() OVER () AS pid, "
                        "income FROM (SELECT unnest($1) AS income)", [income.tolist()])
    return database, metadata


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def measure(rows: int, runs: int) -> list[str]:
    database, metadata = ensure_data(rows)
    db = dpsql.Database(database, metadata)
    raw = db.engine.cursor()
    exact = float(raw.execute(SQL).fetchone()[0])
    times: dict[str, list[float]] = {"raw median": [], "raw sort": [], "old": [], "new": []}
    errors: dict[str, list[float]] = {"old": [], "new": []}
    new_buckets = aggregates.HISTOGRAM_BUCKETS
    try:
        for _ in range(runs):
            times["raw median"].append(_timed(lambda: raw.execute(SQL).fetchall())[0])
            times["raw sort"].append(_timed(lambda: raw.execute(
                "SELECT income FROM people ORDER BY income").fetchnumpy())[0])
            for label, buckets in (("old", OLD_BUCKETS), ("new", new_buckets)):
                aggregates.HISTOGRAM_BUCKETS = buckets
                db.planner.plans.clear()
                db._memo.clear()
                db.engine.rewritten.clear()
                seconds, result = _timed(lambda: db.query(SQL, epsilon=1.0))
                times[label].append(seconds)
                errors[label].append(abs(float(result.rows[0][0]) - exact))
    finally:
        aggregates.HISTOGRAM_BUCKETS = new_buckets
        db.close()
    median = statistics.median
    base, sort = median(times["raw median"]), median(times["raw sort"])
    out = []
    for label, buckets in (("old", OLD_BUCKETS), ("new", new_buckets)):
        t = median(times[label])
        out.append(f"| {rows:,} | {label} ({buckets:,} buckets) | {median(errors[label]):.2f} | "
                   f"{t * 1000:.1f} | {t / base:.1f}x | {t / sort:.2f}x |")
    out.append(f"| {rows:,} | raw DuckDB | 0 | median {base * 1000:.1f}, sort {sort * 1000:.1f}"
               " | 1x | 1x |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    print("| rows | MEDIAN(income), epsilon 1 | median abs. error | ms | / raw MEDIAN "
          "| / raw sort |")
    print("|---|---|---|---|---|---|")
    for rows in args.rows:
        for line in measure(rows, args.runs):
            print(line, flush=True)


if __name__ == "__main__":
    main()
