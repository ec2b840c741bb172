"""`dpsql serve` under load: metered queries per second and latency over loopback.

    PYTHONPATH=. python benchmarks/bench_server.py           # grids 0.05, 0; 8, 50, 200 clients
    PYTHONPATH=. python benchmarks/bench_server.py --seconds 3 --clients 1 8 --grid 0
    PYTHONPATH=. python benchmarks/bench_server.py --workloads charged --grid 0.05 --workers 4 32

**Server.** ``dpsql serve`` on the sample data in a child process on 127.0.0.1, metered: one
analyst with an effectively unlimited budget in a throw-away ledger (``synchronous=FULL``: every
charge is fsynced before its query runs). One server per ``--grid`` value and workload; the grid
is the metadata's ``[server] time_grid``: 0.05 is the default of a metered database (every fresh
answer released on a 50 ms grid), 0 turns the grid off and shows the server's own cost.

**Clients.** psycopg 3, one asyncio connection per client, the extended protocol as drivers use
it (Parse, Bind, Describe, Execute, Sync); each client waits for its answer before sending the
next query (no pipelining). Three workloads:

- *charged*: ``SELECT COUNT(*) FROM people WHERE age > k``, k cycling over 78 values, with
  ``reuse_answers = false``: every query is checked, charged (durably), run and released on the
  grid, its plan taken from the plan cache (a dashboard's repeated texts, each answered afresh);
- *new*: every query a text never sent before, ``SELECT COUNT(*) FROM people WHERE age > a AND
  income < m`` with ``m`` never repeated (``reuse_answers = true``): each one is also parsed,
  checked, planned and dry-run on empty tables before its charge;
- *mix*: as *new*, but every other query repeats the client's previous one, which is answered
  from its stored answer (free, not charged, not padded: it reads no data);
- *prepared*: as *new*, one text with ``%s`` placeholders whose values (never repeated) psycopg
  sends as parameters ($1, $2): a dashboard's prepared query with a moving value.

**Measured**, per (grid, workers, workload, clients), for ``--seconds`` after a warm-up:
completed queries per second, p50 / p99 latency from send to the last row, and the server
process's CPU time per answered query (logins and warm-up included), which a busy shared
machine changes less than it changes the throughput. ``raw DuckDB`` is the
fresh SQL on a DuckDB connection to the same Parquet files (one thread and cursor per client,
in this process; no privacy, no protocol), for scale. Clients and server share the machine's
cores; the load average is printed before and after.

**What bounds it.** With a grid of g seconds, a client that waits for each answer gets at most
1/g fresh answers per second, so c such clients at most c/g: 160 for 8 clients at 50 ms. The
grid pads each answer's release but does not hold the server: an answer waits for its grid
point on the server's event loop, holding no thread, so the server's few worker threads (two
per core) only compute. ``--workers`` compares pool sizes (a thread per connection was the
server's default before).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

import dpsql
from dpsql.engines import DuckDBEngine
from tests.support.sandbox import sandbox

_SERVER = r"""
import sys, dpsql
from pathlib import Path
from dpsql.server import ServerConfig, serve_in_thread
db = dpsql.Database(Path(sys.argv[1]), Path(sys.argv[2]))
with serve_in_thread(db, ServerConfig(port=0, passwords=Path(sys.argv[3]),
                                      max_connections=250, login_slots=250,
                                      workers=int(sys.argv[4]))) as running:
    print(running.port, flush=True)
    sys.stdin.read()
commits = getattr(db.ledger, "commits", None)  # None: unmetered, or no group commit
charges = len(db.ledger.history(limit=10**9)) if db.ledger else 0
print(commits.batches if commits else -1, charges, flush=True)
"""

Stats = tuple[float, float, float]  # QPS, p50 ms, p99 ms
_texts = itertools.count(10_000)
CYCLE = [f"SELECT COUNT(*) FROM people WHERE age > {k}" for k in range(18, 96)]
WORKLOADS = ("charged", "new", "mix", "prepared")
#: The *prepared* workload's text: psycopg sends its values as parameters ($1, $2).
PREPARED = "SELECT COUNT(*) FROM people WHERE age > %s AND income < %s"


def fresh_query() -> str:
    """A query text never sent before (process-wide counter)."""
    return PREPARED % fresh_values()


def fresh_values() -> tuple[int, int]:
    """Values never sent before (process-wide counter)."""
    m = next(_texts)
    return 18 + m % 60, m


def summarize(latencies: list[float], seconds: float) -> Stats:
    if not latencies:
        return 0.0, float("nan"), float("nan")
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return len(latencies) / seconds, statistics.median(ordered) * 1000, p99 * 1000


def threaded(clients: int, seconds: float, make: Callable[[], Callable[[str], object]]) -> Stats:
    """Run ``clients`` threads, each with its own callable from ``make``, for ``seconds``."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    barrier = threading.Barrier(clients + 1)
    stop = [time.perf_counter() + 3600]

    def work(i: int) -> None:
        run = make()
        run(fresh_query())  # warm-up
        barrier.wait()
        while (start := time.perf_counter()) < stop[0]:
            run(fresh_query())
            latencies[i].append(time.perf_counter() - start)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    begin = time.perf_counter()
    stop[0] = begin + seconds
    for t in threads:
        t.join()
    return summarize([x for lat in latencies for x in lat], time.perf_counter() - begin)


async def over_the_wire(port: int, clients: int, seconds: float, workload: str) -> Stats:
    conns = [await psycopg.AsyncConnection.connect(
        host="127.0.0.1", port=port, user="bench", password="bench", dbname="dpsql",
        autocommit=True) for _ in range(clients)]
    for conn in conns:
        await (await conn.execute(fresh_query())).fetchall()  # warm-up
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def work(conn: psycopg.AsyncConnection, n: int) -> None:
        previous = fresh_query()
        while (start := time.perf_counter()) < deadline:
            if workload == "prepared":
                await (await conn.execute(PREPARED, fresh_values())).fetchall()
                latencies.append(time.perf_counter() - start)
                n += 1
                continue
            if workload == "charged":
                sql = CYCLE[n % len(CYCLE)]
            else:
                sql = previous if workload == "mix" and n % 2 else fresh_query()
            await (await conn.execute(sql)).fetchall()  # type: ignore[arg-type]
            latencies.append(time.perf_counter() - start)
            previous, n = sql, n + 1

    begin = time.perf_counter()
    await asyncio.gather(*(work(c, 7 * i) for i, c in enumerate(conns)))
    elapsed = time.perf_counter() - begin
    for conn in conns:
        await conn.close()
    return summarize(latencies, elapsed)


def serve(folder: Path, grid: float, reuse: bool, metered: bool, workers: int
          ) -> tuple[subprocess.Popen[str], int]:
    setup = sandbox(folder, {"bench": ("bench", 1e12, 0.0)}, reuse_answers=reuse,
                    metered=metered)
    setup.metadata.write_text(setup.metadata.read_text() + f"\n[server]\ntime_grid = {grid}\n")
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(setup.database), str(setup.metadata),
         str(setup.passwords), str(workers)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    return server, int(server.stdout.readline())


def stop(server: subprocess.Popen[str]) -> str:
    """End the server; its last line: ledger transactions and charges."""
    out, _ = server.communicate(timeout=60)
    transactions, charges = out.split()
    if transactions == "-1":
        return f"{charges} charges"
    return f"{charges} charges in {transactions} ledger transactions"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cell(stats: Stats) -> str:
    qps, p50, p99 = stats
    return f"{qps:,.0f} | {p50:.2f} / {p99:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[8, 50, 200])
    parser.add_argument("--workers", type=int, nargs="+", default=[0],
                        help="the server's worker threads (0: its default, two per core)")
    parser.add_argument("--grid", type=float, nargs="+", default=[0.05, 0.0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--unmetered", action="store_true",
                        help="declare no budget: nothing charged, no ledger (the cost of the "
                             "ledger is the difference)")
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--no-raw", action="store_true", help="skip the raw DuckDB rows")
    args = parser.parse_args()
    os.environ.pop("DPSQL_LEDGER", None)
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"dpsql {dpsql.__version__}, {os.cpu_count()} CPUs, load average {load} at start, "
          f"{args.seconds:g} s per cell, {'unmetered' if args.unmetered else 'metered'}; QPS, "
          "then p50 / p99 latency in ms\n")
    print("| time_grid | workers | workload | clients | server QPS | server p50 / p99 ms "
          "| server CPU ms per query |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    notes = []
    for grid, workers, reuse in itertools.product(args.grid, args.workers, (False, True)):
        workloads = [w for w in args.workloads if (w == "charged") != reuse]
        if not workloads:
            continue
        with tempfile.TemporaryDirectory(prefix="dpsql-bench-") as tmp:
            server, port = serve(Path(tmp), grid, reuse, not args.unmetered, workers)
            try:
                for workload, n in itertools.product(workloads, args.clients):
                    cpu = cpu_seconds(server.pid)
                    stats = asyncio.run(over_the_wire(port, n, args.seconds, workload))
                    # connecting and the warm-up included: a bound on the CPU per answer
                    per_query = (cpu_seconds(server.pid) - cpu) / max(1, stats[0] *
                                                                     args.seconds + n)
                    print(f"| {grid * 1000:g} ms | {workers or 'default'} | {workload} | {n} "
                          f"| {cell(stats)} | {per_query * 1000:.1f} |", flush=True)
            finally:
                notes.append(f"time_grid {grid * 1000:g} ms, {workers or 'default'} workers, "
                             f"{'/'.join(workloads)}: {stop(server)}")
    if args.no_raw:
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"\nLoad average at end: {load}. " + "; ".join(notes) + ".")
        return
    setup = sandbox(Path(tempfile.mkdtemp(prefix="dpsql-bench-")), {})
    engine = DuckDBEngine(setup.database)

    def raw() -> Callable[[str], object]:
        cur = engine.cursor()
        return lambda q: cur.execute(q).fetchall()

    for n in args.clients:
        print(f"| raw DuckDB | - | fresh | {n} | {cell(threaded(n, args.seconds, raw))} "
              "| - |")
    engine.close()
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nLoad average at end: {load}. " + "; ".join(notes) + ".")


if __name__ == "__main__":
    main()
