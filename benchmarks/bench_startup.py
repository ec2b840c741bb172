"""The command line's start (issue 36.2): wall time of ``dpsql --help``, ``dpsql budget``, a
stored (repeated, free) answer and a fresh query, and what ``import dpsql`` and ``--help``
import (``python -X importtime``), on the sample data with a throwaway ledger.

    PYTHONPATH=. python3 benchmarks/bench_startup.py [--runs 5]

Prints a table of medians (not a timed test: the figures depend on the machine's load).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("sqlglot", "duckdb", "numpy")


def wall(argv: list[str], env: dict[str, str], runs: int) -> float:
    """The median wall time of ``argv``, in seconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def imports(argv: list[str], env: dict[str, str]) -> tuple[float, list[str]]:
    """``-X importtime``: the cumulative import time (s) of dpsql and which heavy packages."""
    err = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env,
                         capture_output=True, text=True).stderr
    total, heavy = 0.0, set()
    for line in err.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[1].isdigit():
            name = parts[2]
            if name.split(".")[0] in HEAVY and name in HEAVY:
                heavy.add(name)
            if name == "dpsql" or name == "dpsql.cli":
                total = max(total, int(parts[1]) / 1e6)
    return total, sorted(heavy)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "DPSQL_LEDGER": str(Path(folder) / "ledger.sqlite"),
               "DPSQL_ANALYST": "bench", "PYTHONPATH": os.getcwd()}
        dpsql = [sys.executable, "-m", "dpsql"]
        stored = [*dpsql, "query", "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"]
        subprocess.run(stored, env=env, check=True, capture_output=True)  # now stored
        fresh_runs = [[*dpsql, "query", f"SELECT COUNT(*) FROM people WHERE age > {i}"]
                      for i in range(runs)]
        rows = [("python -c pass", wall([sys.executable, "-c", "pass"], env, runs)),
                ("dpsql --help", wall([*dpsql, "--help"], env, runs)),
                ("dpsql budget", wall([*dpsql, "budget"], env, runs)),
                ("dpsql query (stored answer)", wall(stored, env, runs)),
                ("dpsql query (fresh, charged)",
                 statistics.median(wall(argv, env, 1) for argv in fresh_runs))]
        print(f"| command | median wall time, {runs} runs |\n|---|---|")
        for name, seconds in rows:
            print(f"| `{name}` | {seconds:.3f} s |")
        print("\n| imported by | dpsql's import time | sqlglot, duckdb, numpy imported |\n"
              "|---|---|---|")
        for name, argv in (("import dpsql", ["-c", "import dpsql"]),
                           ("dpsql --help", ["-m", "dpsql", "--help"]),
                           ("dpsql budget", ["-m", "dpsql", "budget"]),
                           ("dpsql query (stored answer)", ["-m", "dpsql", *stored[3:]])):
            total, heavy = imports(argv, env)
            print(f"| `{name}` | {total * 1000:.0f} ms | {', '.join(heavy) or 'none'} |")


if __name__ == "__main__":
    main()
