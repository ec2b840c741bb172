"""A new query text's fixed cost (issue 39, item 1): dashboards send new texts all the time.

    python benchmarks/bench_new_text.py                     # 1M rows, 15 rounds
    python benchmarks/bench_new_text.py --rounds 30 --profile 200

A dashboard's moving time range or filter value makes every refresh a text dpsql has not
planned. This script measures such texts on ``bench_engine.py``'s ``people`` table (one row per
person, 1M rows by default; generated there if missing), in one process, interleaved:

- *raw*: the text on a read-only DuckDB cursor of the same database;
- *new text*: ``Database.query`` of a text never asked before (its filter's literal moves
  every round), so it pays parse, bind, check, plan, rewrite, SQL generation and the dry run;
- *new text, before*: the same, with the dry runs' shapes off (:mod:`dpsql.query.dry_shapes`):
  every new text dry-run, as before issue 39;
- *repeated*: one text asked again and again (its plan and engine SQL cached).

The fourth query is the first sent as a dashboard's prepared query: ``?`` in the text and the
moving value as a parameter (raw DuckDB runs it written out).

Each round runs the four in an order that flips every round; the medians are reported, with
``new / raw`` and the target ``new <= 1.5 x raw + 3 ms``. On a loaded machine the wall-clock
times move with the neighbours; so the time outside the engine is also given as this thread's
CPU time (``time.thread_time``, the engine call's excluded), before, new and repeated. Then
the new text's CPU time is split by stage (timers around the functions ``Database.run``
calls; the rest is noise, post-processing and the result): ``prepare`` (parse to plan),
``engine SQL`` (rewrite, generation, minus the dry run), ``dry run``, ``engine`` (the private
scan, this thread's share), ``rest``.

``--profile N`` also runs cProfile over N distinct texts and prints the top functions by
cumulative time (dpsql's own and the libraries they spend in).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
# This checkout's dpsql, not another installed copy; ``--code DIR`` (a child of ``--before``):
# the dpsql of the checkout DIR, measured on this checkout's data.
CODE = Path(sys.argv[sys.argv.index("--code") + 1]).resolve() if "--code" in sys.argv else \
    HERE.parent
sys.path.insert(0, str(CODE))
import dpsql  # noqa: E402  (before bench_engine, which puts this checkout first on the path)

sys.path.insert(0, str(HERE))

import bench_engine  # noqa: E402

import dpsql.database  # noqa: E402
import dpsql.routes.pipeline  # noqa: E402
from dpsql.query import dry_shapes  # noqa: E402

EPSILON = 1.0


@dataclass(frozen=True)
class Kind:
    label: str
    template: str  # one {} for the moving literal
    prepared: bool = False  # dpsql is sent a ? for the literal and the value as a parameter

    def text(self, i: int) -> str:
        """The text with ``i`` written in (what raw DuckDB runs); a template with ``{day}``
        takes a week starting on a day of 2025 that moves with ``i`` (a dashboard's range;
        :func:`literals` step by 7, so each ``i`` is another day, for 357 values)."""
        if "{day}" in self.template:
            start = dt.date(2025, 1, 1) + dt.timedelta(days=(i // 7) % 357)
            return self.template.format(day=f"{start:%Y-%m-%d}",
                                        end=f"{start + dt.timedelta(days=7):%Y-%m-%d}")
        return self.template.format(i)

    def ask(self, db: dpsql.Database, i: int) -> object:
        """``Database.query`` of this kind's text with the value ``i``."""
        if self.prepared:
            return db.query(self.template.format("?"), epsilon=EPSILON, parameters=(i,))
        return db.query(self.text(i), epsilon=EPSILON)


KINDS = (
    Kind("COUNT WHERE", "SELECT COUNT(*) FROM people WHERE age >= 18 AND income > {}"),
    Kind("SUM WHERE", "SELECT SUM(income) FROM people WHERE age BETWEEN 30 AND 60 "
         "AND income > {}"),
    Kind("GROUP BY public WHERE", "SELECT sex, COUNT(*) FROM people WHERE income > {} "
         "GROUP BY sex"),
    Kind("COUNT WHERE, ? parameter", "SELECT COUNT(*) FROM people WHERE age >= 18 AND "
         "income > {}", prepared=True),
    Kind("COUNT WHERE a time range", "SELECT COUNT(*) FROM events WHERE day >= '{day}' AND "
         "day < '{end}'"),
)

STAGES = ("prepare", "engine SQL", "dry run", "engine", "rest")


class Timers:
    """Timers around the stages ``Database.run`` goes through (module attributes patched)."""

    def __init__(self, db: dpsql.Database) -> None:
        self.spent: dict[str, float] = dict.fromkeys(STAGES, 0.0)
        db.planner.prepare_query = self._wrap("prepare", db.planner.prepare_query)  # type: ignore[method-assign]
        dpsql.database.engine_sql = self._wrap("engine SQL", dpsql.database.engine_sql)  # type: ignore[assignment]
        dpsql.routes.pipeline.run_dry = self._wrap("dry run", dpsql.routes.pipeline.run_dry)  # type: ignore[assignment]
        db.engine.execute = self._wrap("engine", db.engine.execute)  # type: ignore[method-assign]

    def _wrap(self, stage: str, fn: Callable[..., object]) -> Callable[..., object]:
        def timed(*args: object, **kwargs: object) -> object:
            started = time.thread_time()  # CPU time: a loaded machine changes it less
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[stage] += time.thread_time() - started
        return timed

    def reset(self) -> None:
        self.spent = dict.fromkeys(STAGES, 0.0)

    def split(self, total: float) -> dict[str, float]:
        """The stages of one query of ``total`` CPU seconds (this thread's; the dry run runs
        inside engine SQL)."""
        s = dict(self.spent)
        s["engine SQL"] -= s["dry run"]
        s["rest"] = total - sum(s[k] for k in STAGES if k != "rest")
        return s


def _no_shape(tree: object, dialect: object) -> None:
    """No dry-run shape (:mod:`dpsql.query.dry_shapes`): every new text dry-run, as before."""
    return None


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def literals() -> Iterator[int]:
    """Moving filter values, never repeated within a run."""
    i = 1000
    while True:
        i += 7
        yield i


def measure(rows: int, rounds: int) -> tuple[list[str], dict[str, dict[str, float]]]:
    """The wall-clock table's lines, then the CPU table's, and the stages per query."""
    database, metadata = bench_engine.ensure_data(rows)
    db = dpsql.Database(database, metadata)
    raw = db.engine.cursor()
    timers = Timers(db)
    fresh = literals()
    lines: list[str] = []
    cpu_lines: list[str] = []
    stages: dict[str, dict[str, float]] = {}
    try:
        for kind in KINDS:
            repeated = kind.text(999)
            kind.ask(db, 999)  # warm-up: plans the repeated text
            raw.execute(repeated).fetchall()
            times: dict[str, list[float]] = {"raw": [], "new": [], "before": [], "repeated": []}
            split: dict[str, list[float]] = {k: [] for k in STAGES}
            outside: dict[str, list[float]] = {"before": [], "new": [], "repeated": []}
            for r in range(rounds):
                value, before = next(fresh), next(fresh)  # before: new, dry-run as before
                text = kind.text(value)
                order = ["raw", "new", "before", "repeated"]
                for what in (order if r % 2 == 0 else order[::-1]):
                    timers.reset()
                    cpu = time.thread_time()
                    if what == "raw":
                        elapsed = _timed(lambda t=text: raw.execute(t).fetchall())
                    elif what == "before":
                        # the module's attribute: the pipeline calls dry_shapes.dry_shape
                        shape, dry_shapes.dry_shape = dry_shapes.dry_shape, _no_shape
                        try:
                            elapsed = _timed(lambda b=before, k=kind: k.ask(db, b))
                        finally:
                            dry_shapes.dry_shape = shape
                    else:
                        asked = value if what == "new" else 999
                        elapsed = _timed(lambda a=asked, k=kind: k.ask(db, a))
                    cpu = time.thread_time() - cpu
                    times[what].append(elapsed)
                    if what != "raw":
                        outside[what].append(cpu - timers.spent["engine"])
                    if what == "new":
                        for k, v in timers.split(cpu).items():
                            split[k].append(v)
            m = {k: statistics.median(v) * 1000 for k, v in times.items()}
            target = 1.5 * m["raw"] + 3.0
            lines.append(f"| {kind.label} | {m['raw']:.2f} | {m['before']:.2f} | "
                         f"{m['new']:.2f} | {m['repeated']:.2f} | {m['new'] / m['raw']:.1f}x | "
                         f"{target:.2f} | {'yes' if m['new'] <= target else 'no'} |")
            stages[kind.label] = {k: statistics.median(v) * 1000 for k, v in split.items()}
            o = {k: statistics.median(v) * 1000 for k, v in outside.items()}
            cpu_lines.append(f"| {kind.label} | {o['before']:.2f} | {o['new']:.2f} | "
                             f"{o['repeated']:.2f} | {o['before'] - o['new']:.2f} |")
    finally:
        db.close()
    return [*lines, "", "CPU ms outside the engine (this thread's CPU time, the engine call's "
                     "excluded; median):", "", "| query | new text, before | new text | "
                     "repeated | saved |", "|---|---|---|---|---|", *cpu_lines], stages


def ratios(rows: int, rounds: int) -> dict[str, dict[str, float]]:
    """Per query kind, the medians (ms) of raw, a new text and a repeated one (wall clock),
    and of the CPU time outside the engine of a new text and a repeated one: what ``--before``
    compares between two checkouts. Only ``Database.query`` and the engine's ``execute`` are
    read, so any checkout of dpsql is measured alike."""
    database, metadata = bench_engine.ensure_data(rows)
    db = dpsql.Database(database, metadata)
    raw = db.engine.cursor()
    execute, in_engine = db.engine.execute, [0.0]

    def timed(*args: object, **kwargs: object) -> object:
        started = time.thread_time()
        try:
            return execute(*args, **kwargs)
        finally:
            in_engine[0] += time.thread_time() - started

    db.engine.execute = timed  # type: ignore[method-assign]
    fresh = literals()
    out: dict[str, dict[str, float]] = {}
    try:
        for kind in KINDS:
            repeated = kind.text(999)
            kind.ask(db, 999)
            raw.execute(repeated).fetchall()
            wall: dict[str, list[float]] = {"raw": [], "new": [], "repeated": []}
            cpu: dict[str, list[float]] = {"new": [], "repeated": []}
            for r in range(rounds):
                value = next(fresh)
                text = kind.text(value)
                order = ["raw", "new", "repeated"]
                for what in (order if r % 2 == 0 else order[::-1]):
                    in_engine[0], started = 0.0, time.thread_time()
                    if what == "raw":
                        elapsed = _timed(lambda t=text: raw.execute(t).fetchall())
                    else:
                        asked = value if what == "new" else 999
                        elapsed = _timed(lambda a=asked, k=kind: k.ask(db, a))
                        cpu[what].append(time.thread_time() - started - in_engine[0])
                    wall[what].append(elapsed)
            out[kind.label] = {
                **{k: statistics.median(v) * 1000 for k, v in wall.items()},
                **{f"cpu {k}": statistics.median(v) * 1000 for k, v in cpu.items()}}
    finally:
        db.close()
    return out


def compare(before: Path, rows: int, rounds: int, alternations: int) -> str:
    """``before``'s dpsql against this checkout's, in child processes that alternate (the
    order flipped every time), each measuring :func:`ratios` on the same data; the medians over
    the children of each side."""
    runs: dict[str, list[dict[str, dict[str, float]]]] = {"before": [], "after": []}
    sides = [("before", before), ("after", HERE.parent)]
    for i in range(alternations):
        for side, code in (sides if i % 2 == 0 else sides[::-1]):
            child = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--child", "--code", str(code),
                 "--rows", str(rows), "--rounds", str(rounds)],
                check=True, capture_output=True, text=True)
            runs[side].append(json.loads(child.stdout.splitlines()[-1]))
    lines = ["| query | raw ms | new before ms | new after ms | repeated after ms | new / raw "
             "before | new / raw after | target ms (1.5x raw + 3) | met after | CPU ms outside "
             "the engine, new before | new after | repeated after |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for kind in KINDS:
        def med(side: str, what: str, label: str = kind.label) -> float:
            return statistics.median(run[label][what] for run in runs[side])
        raw = statistics.median([med("before", "raw"), med("after", "raw")])
        ratio_before = statistics.median(r[kind.label]["new"] / r[kind.label]["raw"]
                                         for r in runs["before"])
        ratio_after = statistics.median(r[kind.label]["new"] / r[kind.label]["raw"]
                                        for r in runs["after"])
        target = 1.5 * med("after", "raw") + 3.0
        lines.append(
            f"| {kind.label} | {raw:.2f} | {med('before', 'new'):.2f} | {med('after', 'new'):.2f}"
            f" | {med('after', 'repeated'):.2f} | {ratio_before:.2f}x | {ratio_after:.2f}x | "
            f"{target:.2f} | {'yes' if med('after', 'new') <= target else 'no'} | "
            f"{med('before', 'cpu new'):.2f} | {med('after', 'cpu new'):.2f} | "
            f"{med('after', 'cpu repeated'):.2f} |")
    return "\n".join(lines)


def profile(rows: int, texts: int, top: int = 25) -> str:
    """cProfile over ``texts`` distinct texts (the kinds in turn, each literal new)."""
    database, metadata = bench_engine.ensure_data(rows)
    db = dpsql.Database(database, metadata)
    fresh = literals()
    asks = [(KINDS[i % len(KINDS)], next(fresh)) for i in range(texts)]
    try:
        KINDS[0].ask(db, 1)  # imports and first-use costs
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        for kind, value in asks:
            kind.ask(db, value)
        profiler.disable()
        each = (time.perf_counter() - started) / texts * 1000
    finally:
        db.close()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    return f"{texts} distinct texts, {each:.2f} ms each under the profiler\n\n{out.getvalue()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds per query")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also profile N distinct texts")
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="compare with the dpsql of the checkout DIR (e.g. main's), in "
                             "child processes that alternate with this checkout's")
    parser.add_argument("--alternations", type=int, default=3,
                        help="child processes per side with --before")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code", type=Path, help=argparse.SUPPRESS)  # read at import
    args = parser.parse_args(argv)
    if args.child:
        assert Path(dpsql.__file__).resolve().is_relative_to(CODE), dpsql.__file__
        print(json.dumps(ratios(args.rows, args.rounds)))
        return 0
    if args.before is not None:
        print(f"# A new text's fixed cost, {args.before} (before) against this checkout "
              f"(after): {args.rows:,} rows, {args.rounds} rounds, {args.alternations} "
              "alternations\n")
        print(bench_engine.machine())
        print("\n" + compare(args.before, args.rows, args.rounds, args.alternations))
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"\nLoad average at end: {load}.")
        return 0
    print(f"# A new text's fixed cost: {args.rows:,} rows, {args.rounds} rounds\n")
    print(bench_engine.machine())
    lines, stages = measure(args.rows, args.rounds)
    print("\n| query | raw ms | new text, before ms | new text ms | repeated ms | new / raw | "
          "target ms (1.5x raw + 3) | met |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    print("\nA new text, by stage (median CPU ms of this thread):\n")
    print("| query | " + " | ".join(STAGES) + " | outside the engine |")
    print("|---|" + "---|" * (len(STAGES) + 1))
    for label, s in stages.items():
        outside = sum(s[k] for k in STAGES if k != "engine")
        print(f"| {label} | " + " | ".join(f"{s[k]:.2f}" for k in STAGES)
              + f" | {outside:.2f} |")
    if args.profile:
        print("\n```\n" + profile(args.rows, args.profile) + "```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
