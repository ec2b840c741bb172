"""The command line's start (issue 36.2): wall time of ``dpsql --help``, ``dpsql budget``, a
stored (repeated, free) answer and a fresh query -- on the sample data's few rows, a fresh
query's fixed cost: imports, opening the engine, planning, the ledger -- and what ``import
dpsql``, ``--help``, ``budget`` and both queries import (``python -X importtime``), with a
throwaway ledger.

    PYTHONPATH=. python3 benchmarks/bench_startup.py [--runs 5] [--before REV]

``--before REV`` measures the git revision REV too (its tree from ``git archive``, run with
PYTHONPATH there), the two interleaved run by run so that the machine's load falls on both,
and prints both columns (c5676c8: main before issue 36). Prints tables of medians and the load
average (not a timed test: the figures depend on the machine's load).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("sqlglot", "duckdb", "numpy")


def wall(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """The wall time and the CPU time (user and system: what a loaded machine inflates less)
    of one run of ``argv``, in seconds."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True, cwd=env["PYTHONPATH"])
    seconds, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def imports(argv: list[str], env: dict[str, str]) -> tuple[float, list[str]]:
    """``-X importtime``: the time (s) of every import the command made (the cumulative times
    of the top-level ones: lazy imports included) and which heavy packages it imported."""
    err = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env,
                         capture_output=True, text=True, cwd=env["PYTHONPATH"]).stderr
    total, heavy = 0.0, set()
    for line in err.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            name = parts[2].strip()
            if name in HEAVY:
                heavy.add(name)
            if parts[2].startswith(" ") and not parts[2].startswith("  "):  # top level
                total += int(parts[1]) / 1e6
    return total, sorted(heavy)


STORED = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"


def commands(run: int) -> list[tuple[str, list[str]]]:
    """The measured commands (after ``python``), by name; the fresh query new on each run."""
    return [("python -c pass", ["-c", "pass"]),
            ("dpsql --help", ["-m", "dpsql", "--help"]),
            ("dpsql budget", ["-m", "dpsql", "budget"]),
            ("dpsql query (stored answer)", ["-m", "dpsql", "query", STORED]),
            ("dpsql query (fresh: the fixed cost)",
             ["-m", "dpsql", "query", f"SELECT COUNT(*) FROM people WHERE age > {18 + run}"])]


def environment(folder: Path, tree: str, name: str) -> dict[str, str]:
    """The environment of one tree's runs: its own throwaway ledger, the stored answer in it.
    Every run starts in ``tree`` too: ``python -m`` and ``-c`` put the current directory
    before PYTHONPATH."""
    env = {**os.environ, "DPSQL_LEDGER": str(folder / f"{name}-ledger.sqlite"),
           "DPSQL_ANALYST": "bench", "PYTHONPATH": tree}
    subprocess.run([sys.executable, "-m", "dpsql", "query", STORED], env=env, check=True,
                   capture_output=True, cwd=tree)  # now stored
    return env


def checkout(revision: str, folder: Path) -> str:
    """The tree of ``revision``, extracted under ``folder`` (git archive: no worktree)."""
    tree = folder / "before"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", revision], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return str(tree)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", metavar="REV", help="also measure this git revision")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        trees = {"after": os.getcwd()}
        if options.before:
            trees = {"before": checkout(options.before, folder), **trees}
        envs = {side: environment(folder, tree, side) for side, tree in trees.items()}
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        load = os.getloadavg()[0]
        for run in range(options.runs):
            for label, argv in commands(run):
                for side, env in envs.items():  # interleaved: the load falls on both
                    times.setdefault((label, side), []).append(wall([sys.executable, *argv],
                                                                    env))
        load = max(load, os.getloadavg()[0])
        sides = list(trees)
        print(f"Load average (1 min) up to {load:.1f} on {os.cpu_count()} cores; "
              f"{options.runs} runs" + (f"; before: {options.before}" if options.before
                                         else ""))
        print(f"\n| command: median wall time (CPU time) | {' | '.join(sides)} |\n"
              f"|---|{'---|' * len(sides)}")
        for label, _ in commands(0):
            cells = [f"{statistics.median(w for w, _ in times[label, side]):.3f} s "
                     f"({statistics.median(c for _, c in times[label, side]):.3f} s)"
                     for side in sides]
            print(f"| `{label}` | {' | '.join(cells)} |")
        print(f"\n| `python -X importtime`: all imports; {', '.join(HEAVY)} among them | "
              f"{' | '.join(sides)} |\n|---|{'---|' * len(sides)}")
        traced = [*commands(options.runs)[1:], ("import dpsql", ["-c", "import dpsql"])]
        for label, argv in traced:
            cells = []
            for side in sides:
                total, heavy = imports(argv, envs[side])
                cells.append(f"{total * 1000:.0f} ms; {', '.join(heavy) or 'none'}")
            print(f"| `{label}` | {' | '.join(cells)} |")

if __name__ == "__main__":
    main()
