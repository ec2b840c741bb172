"""`dpsql serve` under load: queries per second and latency over loopback, next to raw DuckDB.

    python benchmarks/bench_server.py                       # 1, 8 and 32 clients, 5 s each
    python benchmarks/bench_server.py --seconds 3 --clients 1 8

**Queries.** Small COUNTs on the sample data's ``people`` table (20,000 rows, one per person):
``SELECT COUNT(*) FROM people WHERE age > k`` with k cycling through 18..95, epsilon 1.

**Measured**, for each number of concurrent clients, for ``--seconds`` after a warm-up:

- *raw DuckDB*: the same SQL on a DuckDB connection to the same Parquet files, one thread and
  one cursor per client, in this process (no privacy, no protocol);
- *dpsql library*: :meth:`dpsql.Database.query` from one thread per client, in this process
  (the whole private pipeline and the ledger, no protocol);
- *dpsql server*: psycopg 3 clients (one asyncio connection per client, the extended protocol
  as drivers use it: Parse, Bind, Describe, Execute, Sync) to a ``dpsql serve`` running in a
  child process on 127.0.0.1.

Every dpsql query is answered afresh and charged (``reuse_answers = false``; the analyst has an
effectively unlimited budget in a throw-away ledger), so nothing is served from stored answers;
``--unmetered`` declares no budget instead, to show the cost of the ledger.
Latency is per query, from send to the last row; QPS counts completed queries. The client and
the server share the machine's cores, so the server figures include the client's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
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
from dpsql.server.testing import sandbox

QUERIES = [f"SELECT COUNT(*) FROM people WHERE age > {k}" for k in range(18, 96)]

_SERVER = r"""
import sys, dpsql, time
from pathlib import Path
from dpsql.server import ServerConfig, serve_in_thread
db = dpsql.Database(Path(sys.argv[1]), Path(sys.argv[2]))
with serve_in_thread(db, ServerConfig(port=0, passwords=Path(sys.argv[3]),
                                      max_connections=200)) as running:
    print(running.port, flush=True)
    sys.stdin.read()
"""


def summarize(latencies: list[float], seconds: float) -> tuple[float, float, float]:
    if not latencies:
        return 0.0, float("nan"), float("nan")
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return len(latencies) / seconds, statistics.median(ordered) * 1000, p99 * 1000


def threaded(clients: int, seconds: float, make: Callable[[], Callable[[str], object]]
             ) -> tuple[float, float, float]:
    """Run ``clients`` threads, each with its own callable from ``make``, for ``seconds``."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    barrier = threading.Barrier(clients + 1)
    stop = [0.0]

    def work(i: int) -> None:
        run = make()
        for q in QUERIES[:5]:
            run(q)  # warm-up
        barrier.wait()
        mine, n = latencies[i], i * 7
        while True:
            start = time.perf_counter()
            if start >= stop[0]:
                return
            run(QUERIES[n % len(QUERIES)])
            mine.append(time.perf_counter() - start)
            n += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    stop[0] = time.perf_counter() + 3600
    barrier.wait()
    begin = time.perf_counter()
    stop[0] = begin + seconds
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - begin
    return summarize([x for lat in latencies for x in lat], elapsed)


async def over_the_wire(port: int, clients: int, seconds: float) -> tuple[float, float, float]:
    conns = [await psycopg.AsyncConnection.connect(
        host="127.0.0.1", port=port, user="bench", password="bench", dbname="dpsql",
        autocommit=True) for _ in range(clients)]
    for conn in conns:
        for q in QUERIES[:5]:
            await (await conn.execute(q)).fetchall()
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def work(conn: psycopg.AsyncConnection, n: int) -> None:
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            await (await conn.execute(QUERIES[n % len(QUERIES)])).fetchall()
            latencies.append(time.perf_counter() - start)
            n += 1

    begin = time.perf_counter()
    await asyncio.gather(*(work(c, i * 7) for i, c in enumerate(conns)))
    elapsed = time.perf_counter() - begin
    for conn in conns:
        await conn.close()
    return summarize(latencies, elapsed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--unmetered", action="store_true",
                        help="declare no budget: no ledger charge per query (the library's "
                             "SQLite ledger is then out of the picture)")
    args = parser.parse_args()
    os.environ.pop("DPSQL_LEDGER", None)
    with tempfile.TemporaryDirectory(prefix="dpsql-bench-") as tmp:
        setup = sandbox(Path(tmp), {"bench": ("bench", 1e12, 0.0)}, reuse_answers=False,
                        metered=not args.unmetered)
        server = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(setup.database), str(setup.metadata),
             str(setup.passwords)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline())
            db = dpsql.Database(setup.database, setup.metadata)
            engine = DuckDBEngine(setup.database)

            def raw() -> Callable[[str], object]:
                cur = engine.cursor()
                return lambda q: cur.execute(q).fetchall()

            def library() -> Callable[[str], object]:
                return lambda q: db.query(q, epsilon=1.0, analyst="bench")

            rows = []
            for n in args.clients:
                r = threaded(n, args.seconds, raw)
                lib = threaded(n, args.seconds, library)
                srv = asyncio.run(over_the_wire(port, n, args.seconds))
                rows.append((n, r, lib, srv))
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            print(f"dpsql {dpsql.__version__}, {os.cpu_count()} CPUs, load {load:.2f}, "
                  f"{args.seconds:g} s per cell, "
                  f"{'unmetered' if args.unmetered else 'every query charged to the ledger'}; "
                  "QPS, then p50 / p99 latency in ms\n")
            print("| clients | raw DuckDB | dpsql library | dpsql server (psycopg, loopback) |")
            print("|---:|---:|---:|---:|")
            for n, r, lib, srv in rows:
                cells = [f"{q:,.0f} QPS, {p50:.2f} / {p99:.2f}" for q, p50, p99 in (r, lib, srv)]
                print(f"| {n} | " + " | ".join(cells) + " |")
            one = next((row for row in rows if row[0] == 1), None)
            if one is not None:
                print(f"\nPer-query cost over raw DuckDB at 1 client (p50): library "
                      f"{one[2][1] - one[1][1]:.2f} ms, server {one[3][1] - one[1][1]:.2f} ms")
            db.close()
            engine.close()
        finally:
            if server.stdin:
                server.stdin.close()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
