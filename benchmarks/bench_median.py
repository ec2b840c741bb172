"""MEDIAN on many rows per person (issue 39.4): time as a ratio to raw DuckDB and error, before
and after, in one run; and where an automatic upper bound of the same column lands.

    PYTHONPATH=. python benchmarks/bench_median.py                      # 100k and 1M people
    PYTHONPATH=. python benchmarks/bench_median.py --people 100000 --runs 5
    PYTHONPATH=. python benchmarks/bench_median.py --before /work/main  # the checkout "before"

**Data** (``benchmarks/data/median_v2_N.duckdb``, DuckDB's seeded ``random()``):
``visits(person_id, amount)``, N people, a person's number of visits heavy-tailed (discrete
lognormal, median 5, mean about 10: about 10 N rows), amounts lognormal (median 40) capped at
1,000, the data's maximum. **Metadata**: k = 10 rows per person, ``amount`` declared ``[0,
100000]`` with the upper bound automatic (``upper = { auto = true, max = 100000 }``): MEDIAN
draws over the declared interval, SUM reads the bound chosen from the data.

**Queries**, epsilon 1: ``SELECT MEDIAN(amount) FROM visits`` (timed, and its error:
``|released - exact|``, the exact being plain SQL's median of every row) and ``SELECT
SUM(amount) FROM visits`` (the upper bound it chose, ``Result.chosen_bounds``). Each round runs
raw DuckDB's MEDIAN (in this process), dpsql *after* (this checkout) and dpsql *before* (the
``--before`` checkout, default ``/work/main``), each dpsql in a worker process of its own that
this script starts and feeds one query at a time, in rotating order, so machine load hits all
three alike. Plans are forgotten before each dpsql query (both pay the whole pipeline). Times
are medians over the rounds, each as a ratio to the raw median of the same rounds: wall time,
and CPU time (the process's, DuckDB's threads included: on a loaded machine the steadier
figure); and the wall time inside the engine's ``execute`` (the engine query alone, without
planning, SQL generation and the draw), over raw's wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
MEDIAN = "SELECT MEDIAN(amount) FROM visits"
SUM = "SELECT SUM(amount) FROM visits"
METADATA = """
[tables.visits]
privacy_unit = "person_id"
max_rows_per_unit = 10

[tables.visits.columns]
person_id = { type = "int" }
amount = { type = "float", lower = 0, upper = { auto = true, max = 100000 } }
"""


def ensure_data(people: int) -> tuple[Path, Path]:
    """The visits of ``people`` persons (module docstring), generated if missing."""
    DATA.mkdir(exist_ok=True)
    database, metadata = DATA / f"median_v2_{people}.duckdb", DATA / f"median_v2_{people}.toml"
    metadata.write_text(METADATA)
    if database.exists():
        return database, metadata
    partial = database.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    with duckdb.connect(str(partial)) as con:
        con.execute("SELECT setseed(0.39)")
        con.execute(f"""
            CREATE TABLE persons AS SELECT person_id,
              GREATEST(1, ROUND(EXP(LN(5) + 1.2 * SQRT(-2 * LN(1 - random()))
                                    * COS(2 * PI() * random()))))::BIGINT AS n
            FROM range({people}) t(person_id)""")
        con.execute("""
            CREATE TABLE visits AS SELECT p.person_id,
              LEAST(EXP(LN(40) + SQRT(-2 * LN(1 - random())) * COS(2 * PI() * random())),
                    1000)::DOUBLE AS amount
            FROM persons p, range(p.n) r(i)""")
        con.execute("DROP TABLE persons")
    partial.replace(database)
    return database, metadata


def serve(checkout: str, database: str, metadata: str) -> None:
    """The worker: ``checkout``'s dpsql answers one JSON request a line on stdin."""
    sys.path.insert(0, checkout)
    import dpsql

    db = dpsql.Database(database, metadata)
    engine = [0.0]  # seconds inside the engine's execute, this query
    execute = db.engine.execute

    def timed(sql: str, parameters: Any = ()) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, parameters)
        finally:
            engine[0] += time.perf_counter() - started

    db.engine.execute = timed  # type: ignore[method-assign]
    for line in sys.stdin:
        request = json.loads(line)
        db.planner.plans.clear()
        db._memo.clear()
        db.engine.rewritten.clear()
        engine[0] = 0.0
        started, cpu = time.perf_counter(), _cpu()
        result = db.query(request["sql"], epsilon=1.0)
        seconds, cpu = time.perf_counter() - started, _cpu() - cpu
        bounds = result.chosen_bounds or {}
        print(json.dumps({"seconds": seconds, "cpu": cpu, "engine": engine[0],
                          "value": float(result.rows[0][0]),
                          "upper": bounds.get("amount", (None, None))[1]}), flush=True)


def _cpu() -> float:
    """This process's CPU seconds so far, every thread's (DuckDB's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Worker:
    """A dpsql of another checkout in its own process (module docstring)."""

    def __init__(self, checkout: str, database: Path, metadata: Path) -> None:
        env = {**os.environ, "PYTHONPATH": checkout}
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", checkout, str(database), str(metadata)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def query(self, sql: str) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"sql": sql}) + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def measure(people: int, runs: int, before: str) -> list[str]:
    database, metadata = ensure_data(people)
    after, old = Worker(str(HERE.parent), database, metadata), Worker(before, database, metadata)
    raw = duckdb.connect(str(database), read_only=True)
    exact, rows, top = raw.execute("SELECT MEDIAN(amount), COUNT(*), MAX(amount) FROM visits"
                                   ).fetchone()
    times: dict[str, list[float]] = {"raw": [], "before": [], "after": []}
    cpus: dict[str, list[float]] = {"raw": [], "before": [], "after": []}
    engines: dict[str, list[float]] = {"before": [], "after": []}
    errors: dict[str, list[float]] = {"before": [], "after": []}
    uppers: dict[str, list[float]] = {"before": [], "after": []}
    workers = {"before": old, "after": after}
    try:
        for i in range(runs):
            order = ["raw", "before", "after"]
            for label in order[i % 3:] + order[:i % 3]:
                if label == "raw":
                    started, cpu = time.perf_counter(), _cpu()
                    raw.execute(MEDIAN).fetchall()
                    times["raw"].append(time.perf_counter() - started)
                    cpus["raw"].append(_cpu() - cpu)
                    continue
                got = workers[label].query(MEDIAN)
                times[label].append(got["seconds"])
                cpus[label].append(got["cpu"])
                engines[label].append(got["engine"])
                errors[label].append(abs(got["value"] - exact))
                uppers[label].append(workers[label].query(SUM)["upper"])
    finally:
        after.close()
        old.close()
        raw.close()
    median = statistics.median
    base, base_cpu = median(times["raw"]), median(cpus["raw"])
    out = [f"| {people:,} ({rows:,} rows) | raw DuckDB | {base * 1000:.0f} | 1x | "
           f"{base_cpu * 1000:.0f} | 1x | {base * 1000:.0f} | 1x | 0 | data max {top:,.0f} |"]
    for label in ("before", "after"):
        t, c, e = median(times[label]), median(cpus[label]), median(engines[label])
        chosen = sorted(uppers[label])
        out.append(f"| {people:,} | dpsql {label} | {t * 1000:.0f} | {t / base:.2f}x | "
                   f"{c * 1000:.0f} | {c / base_cpu:.2f}x | {e * 1000:.0f} | {e / base:.2f}x | "
                   f"{median(errors[label]):.2f} | "
                   f"median {median(chosen):,.0f} ({chosen[0]:,.0f}-{chosen[-1]:,.0f}) |")
    return out


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        serve(*sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--people", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--before", default="/work/main")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; MEDIAN(amount) and SUM(amount)'s automatic "
          f"upper bound, epsilon 1, medians of {args.runs} rounds")
    print("| people | MEDIAN(amount) | wall ms | / raw | CPU ms | / raw | engine ms | / raw | "
          "median abs. error | amount's automatic upper (SUM) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for people in args.people:
        for line in measure(people, args.runs, args.before):
            print(line, flush=True)


if __name__ == "__main__":
    main()
