"""The answer time as a side channel: one person's value, the running time, and the time grid.

D and D' differ in one person's income (person 123: 30,000 in D, 50,000 in D'). The query does
per-row work only on that person's row, and only when the income is above 40,000::

    SELECT SUM(CASE WHEN person_id = 123 AND income > 40000 THEN <a long arithmetic chain>
               ELSE 0 END) FROM people

(the checker bounds the work of one row: no REPEAT, no LPAD, only arithmetic and the like; a
chain of eleven terms already makes a 10 kB rewritten query, whose planning dominates). The
script times ``Database.query`` on D and D', interleaved, with ``[server] time_grid = 0`` and
then with the grid, and prints Markdown: medians, the difference of the means with its standard
error, and where the release times fell around the grid points (the padding's own jitter).

    PYTHONPATH=. python benchmarks/bench_timing.py    # 200k rows, 200 runs per side, g = 50 ms
    PYTHONPATH=. python benchmarks/bench_timing.py --rows 1000000 --runs 300 --grid 0.02
    PYTHONPATH=. python benchmarks/bench_timing.py --query like --rows 1000 --runs 15

``--query like`` times the costliest per-row text work the cost model admits (a 60-character
LIKE pattern on the victim's row only) instead of the arithmetic chain. Its target, once a
test (a wall-clock limit fails on a busy CI machine): at 1,000 rows and 15 runs per side,
without the grid, the medians of D and D' differ by less than 2 ms (far above the ~0.1 ms the
model admits, far below the 300 ms the unbounded attack took). Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

import duckdb

import dpsql

META = """
[server]
time_grid = {grid}

[tables.people]
privacy_unit = "person_id"
one_row_per_unit = true

[tables.people.columns]
person_id = {{ type = "int" }}
income = {{ type = "float", lower = 0, upper = 250000 }}
name = {{ type = "text" }}
"""
CHAIN = " + ".join(f"ABS(income * {i} - {i * 7}) / {i + 1}" for i in range(1, 12))
SQL = (f"SELECT SUM(CASE WHEN person_id = 123 AND income > 40000 THEN LEAST({CHAIN}, 1) "
       "ELSE 0 END) FROM people")
LIKE_SQL = (f"SELECT COUNT(*) FROM people WHERE CASE WHEN person_id = 123 AND income > 40000 "
            f"THEN name || '{'a' * 60}' LIKE '%{'_' * 60}b' ELSE FALSE END")
QUERIES = {"chain": SQL, "like": LIKE_SQL}


def build(folder: Path, rows: int) -> tuple[Path, Path]:
    paths = (folder / "d.duckdb", folder / "d_prime.duckdb")
    for path, income in zip(paths, (30000.0, 50000.0), strict=True):
        with duckdb.connect(str(path)) as con:
            con.execute("CREATE TABLE people AS SELECT i AS person_id, "
                        f"CASE WHEN i = 123 THEN {income} ELSE (i * 7919) % 250000 END "
                        f"AS income, 'p' || i AS name FROM range({rows}) t(i)")
    return paths


def times(paths: tuple[Path, Path], meta: Path, runs: int, sql: str = SQL
          ) -> tuple[list[float], list[float]]:
    dbs = [dpsql.Database(p, meta) for p in paths]
    try:
        for db in dbs:  # warm up: plan cache, engine caches
            for _ in range(3):
                db.query(sql, epsilon=1.0)
        out: tuple[list[float], list[float]] = ([], [])
        for i in range(runs):
            order = (0, 1) if i % 2 == 0 else (1, 0)
            for side in order:
                start = time.perf_counter()
                dbs[side].query(sql, epsilon=1.0)
                out[side].append(time.perf_counter() - start)
        return out
    finally:
        for db in dbs:
            db.close()


def row(label: str, d: list[float], d_prime: list[float]) -> str:
    diff = statistics.fmean(d_prime) - statistics.fmean(d)
    se = (statistics.variance(d) / len(d) + statistics.variance(d_prime) / len(d_prime)) ** 0.5
    ms = 1000.0
    return (f"| {label} | {statistics.median(d) * ms:.3f} | {statistics.median(d_prime) * ms:.3f}"
            f" | {diff * ms * 1000:+.1f} ± {se * ms * 1000:.1f} | {diff / se if se else 0:+.2f} "
            f"| {statistics.stdev(d) * ms:.3f} | {max(d + d_prime) * ms:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--grid", type=float, default=0.05)
    parser.add_argument("--query", choices=sorted(QUERIES), default="chain")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = build(folder, args.rows)
        print(f"{args.rows} rows, {args.runs} runs per side, interleaved\n")
        print("| time_grid | median D ms | median D' ms | mean D' - D (µs) | z | sd D ms "
              "| max ms |")
        print("|---|---|---|---|---|---|---|")
        for grid in (0.0, args.grid):
            meta = folder / f"meta-{grid}.toml"
            meta.write_text(META.format(grid=grid))
            d, d_prime = times(paths, meta, args.runs, QUERIES[args.query])
            print(row(f"{grid * 1000:g} ms", d, d_prime))
            if grid:
                cells = Counter(math.floor(t / grid) for t in d + d_prime)
                late = [(t % grid) * 1e6 for t in d + d_prime]
                print(f"\nwith the grid: releases per grid cell {dict(sorted(cells.items()))}; "
                      f"each came {min(late):.0f} to {max(late):.0f} µs after its grid point "
                      f"(median {statistics.median(late):.0f} µs)\n")


if __name__ == "__main__":
    main()
