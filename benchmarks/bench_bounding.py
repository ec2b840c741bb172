"""Contribution bounding and clamping, measured directly in DuckDB SQL: the current rewrite next
to alternatives that keep the same guarantee.

    python benchmarks/bench_bounding.py                  # 10M rows, 5 runs
    python benchmarks/bench_bounding.py --rows 1000000 --runs 7

Uses the data of ``bench_engine.py`` (generated if missing). Every variant is a plain SQL query
run on a read-only connection with a fixed salt as ``$1``; after one warm-up it is timed
``--runs`` times and the minimum and the median are printed (the minimum is the more robust
figure on a shared machine).

**Row bounding** (``events``, at most k = 10 rows per person, ``SUM(amount)`` of the sample).
Every bounding variant is also *checked*, untimed: the maximum number of rows (and, for GROUP BY,
of groups) that any one person keeps must be <= k (<= g), and the number of kept rows is
printed, so a variant that keeps fewer rows than the exact ``min(rows, k)`` per person shows its
loss of utility. Every selection is keyed by the secret salt: ``hash($1, ...)``.

**Group bounding** (``events GROUP BY category``, at most g = 3 groups, then k = 10 rows per
person), and the *bias* of the group choice of dpsql's first rewrite: it ranked a person's
groups by ``hash($1, key)``, the same order for every person, so the keys that happen to hash
low were kept by every person and the others lost most of their units; ranking by
``hash($1, unit, key)`` (the current rewrite) gives each person an independent choice. Shown
on ``GROUP BY day`` (365 keys): per day, the share of its persons whose rows survive group
bounding (should be similar across days).

**Fast path** (``people``, one row per person: no bounding, only clamping and total reads):
dpsql's rewritten SQL for ``SUM(income)`` and ``COUNT(*) ... WHERE age >= 65`` (taken from
``dpsql.routes.planner.Planner.prepare``) next to cheaper forms with the same result.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import ensure_data, machine

from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.execution.rewrite import rewrite
from dpsql.metadata.metadata import load_metadata
from dpsql.routes.planner import Planner

SALT = 0x5DEECE66D1234567
K, G = 10, 3
TWO_64 = "18446744073709551616.0"  # 2^64, as a DOUBLE, to turn a UBIGINT hash into [0, 1)

ROWS = "SELECT person_id AS u, amount AS x FROM events"
ROWS_KEYED = "SELECT person_id AS u, category AS k0, amount AS x FROM events"


@dataclass(frozen=True)
class Variant:
    label: str
    bounded: str | None  # the __bounded CTE over __rows; None for a query timed as is
    query: str = "SELECT count(*) AS kept, sum(x) AS total FROM __bounded"
    settings: str = ""  # e.g. "SET disabled_optimizers = '...'", run before, reset after
    note: str = ""


CURRENT_ROWS = f"SELECT * FROM __rows QUALIFY row_number() OVER (PARTITION BY u ORDER BY " \
               f"hash($1, u, x)) <= {K}"
NO_TOPN = "SET disabled_optimizers = 'top_n_window_elimination'"

ROW_VARIANTS = (
    Variant("raw: SUM(amount), no bounding", None,
            "SELECT count(*), sum(amount) FROM events"),
    Variant("floor: one GROUP BY person_id, nothing else", None,
            "SELECT count(*) FROM (SELECT person_id, count(*) FROM events GROUP BY person_id)",
            note="any per-query bounding reads every row and groups it by unit"),
    Variant("current: QUALIFY row_number() <= k (DuckDB turns it into arg_min(.., k))",
            CURRENT_ROWS),
    Variant("current, sort-based window (top_n_window_elimination disabled)", CURRENT_ROWS,
            settings=NO_TOPN),
    Variant("split: units with <= k rows kept whole; window only for the others", f"""
            SELECT u, x FROM (SELECT r.u, r.x, c.c FROM __rows r JOIN (SELECT u, count(*) AS c
                FROM __rows GROUP BY u) c USING (u)) WHERE c <= {K}
            UNION ALL
            SELECT u, x FROM (SELECT r.u, r.x FROM __rows r SEMI JOIN (SELECT u FROM __rows
                GROUP BY u HAVING count(*) > {K}) USING (u))
            QUALIFY row_number() OVER (PARTITION BY u ORDER BY hash($1, u, x)) <= {K}""",
            settings=NO_TOPN),
    Variant("prefilter: keep hash < min(1, 3k/c) then exact top-k by the same hash", f"""
            SELECT u, x FROM (
                SELECT r.u, r.x, r.h FROM (SELECT u, x, hash($1, u, x) AS h FROM __rows) r
                JOIN (SELECT u, count(*) AS c FROM __rows GROUP BY u) USING (u)
                WHERE c <= {K} OR h::DOUBLE < {3 * K} / c * {TWO_64})
            QUALIFY row_number() OVER (PARTITION BY u ORDER BY h) <= {K}""",
            settings=NO_TOPN,
            note="same rows as the exact top-k unless fewer than k pass the prefilter"),
    Variant("buckets (lossy): one row per (unit, hash mod k), by arg_min", f"""
            SELECT arg_min(u, h) AS u, arg_min(x, h) AS x
            FROM (SELECT u, x, hash($1, u, x) AS h FROM __rows) GROUP BY u, h % {K}""",
            note="<= k rows by construction, but fewer than min(rows, k) per unit"),
    Variant("COUNT(*) only: SUM(LEAST(rows per unit, k))", None,
            f"SELECT sum(least(c, {K})) FROM (SELECT count(*) AS c FROM events "
            f"GROUP BY person_id)",
            note="exactly the count of any k-row sample, without choosing rows"),
)

CURRENT_GROUPS = f"""
    SELECT * FROM (SELECT * FROM __rows QUALIFY dense_rank() OVER (PARTITION BY u
        ORDER BY hash($1, u, k0), k0) <= {G}) AS __g
    QUALIFY row_number() OVER (PARTITION BY u ORDER BY hash($1, u, k0, x)) <= {K}"""
GROUP_QUERY = "SELECT k0, count(*) AS kept, sum(x) AS total FROM __bounded GROUP BY k0"

GROUP_VARIANTS = (
    Variant("raw: GROUP BY category, no bounding", None,
            "SELECT category, count(*), sum(amount) FROM events GROUP BY category"),
    Variant("floor: one GROUP BY (person_id, category), nothing else", None,
            "SELECT count(*) FROM (SELECT person_id, category, count(*) FROM events "
            "GROUP BY ALL)"),
    Variant("current: dense_rank by hash($1, unit, key) <= g, then row_number <= k",
            CURRENT_GROUPS, GROUP_QUERY),
    Variant("current, sort-based windows (top_n_window_elimination disabled)",
            CURRENT_GROUPS, GROUP_QUERY, settings=NO_TOPN),
    Variant("pairs first: choose g keys on DISTINCT (unit, key), semi-join, then top-k", f"""
            SELECT r.* FROM __rows r SEMI JOIN (
                SELECT u, k0 FROM (SELECT u, k0 FROM __rows GROUP BY u, k0)
                QUALIFY row_number() OVER (PARTITION BY u ORDER BY hash($1, u, k0)) <= {G}
            ) USING (u, k0)
            QUALIFY row_number() OVER (PARTITION BY u ORDER BY hash($1, u, k0, x)) <= {K}""",
            GROUP_QUERY, settings=NO_TOPN),
    Variant("pairs first, top-n aggregates left on (DuckDB default)", f"""
            SELECT r.* FROM __rows r SEMI JOIN (
                SELECT u, k0 FROM (SELECT u, k0 FROM __rows GROUP BY u, k0)
                QUALIFY row_number() OVER (PARTITION BY u ORDER BY hash($1, u, k0)) <= {G}
            ) USING (u, k0)
            QUALIFY row_number() OVER (PARTITION BY u ORDER BY hash($1, u, k0, x)) <= {K}""",
            GROUP_QUERY),
)


def timed(con: duckdb.DuckDBPyConnection, sql: str, params: list[object] | None,
          runs: int) -> tuple[float, float, list[tuple[object, ...]]]:
    result = con.execute(sql, params).fetchall()  # warm-up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = con.execute(sql, params).fetchall()
        times.append(time.perf_counter() - started)
    return 1000 * min(times), 1000 * statistics.median(times), result


def run_variant(con: duckdb.DuckDBPyConnection, rows_sql: str, v: Variant, runs: int,
                grouped: bool) -> str:
    if v.bounded is None:
        sql = v.query
    else:
        sql = f"WITH __rows AS ({rows_sql}), __bounded AS ({v.bounded}) {v.query}"
    params = [SALT] if "$1" in sql else None
    if v.settings:
        con.execute(v.settings)
    try:
        best, median, result = timed(con, sql, params, runs)
        check = ""
        if v.bounded is not None:
            groups = "count(DISTINCT k0)" if grouped else "1"
            (max_rows, max_groups, kept), = con.execute(
                f"WITH __rows AS ({rows_sql}), __bounded AS ({v.bounded}) "
                f"SELECT max(n), max(g), sum(n) FROM (SELECT u, count(*) AS n, {groups} AS g "
                f"FROM __bounded GROUP BY u)", params).fetchall()
            ok = max_rows <= K and max_groups <= (G if grouped else 1)
            check = (f"max rows/unit {max_rows}, max groups/unit {max_groups}, kept {kept:,} "
                     f"{'ok' if ok else 'VIOLATED'}")
    finally:
        if v.settings:
            con.execute("RESET disabled_optimizers")
    summary = _summary(result)
    return f"| {v.label} | {best:.0f} | {median:.0f} | {check or summary} | {v.note} |"


def _summary(result: list[tuple[object, ...]]) -> str:
    if len(result) == 1:
        return ", ".join(f"{x:,.0f}" if isinstance(x, int | float) else str(x)
                         for x in result[0])
    return f"{len(result)} groups"


def group_bias(con: duckdb.DuckDBPyConnection) -> list[str]:
    lines = []
    for label, key_hash in (("hash($1, key) (the first rewrite)", "hash($1, k0)"),
                            ("hash($1, unit, key) (current)", "hash($1, u, k0)")):
        (lo, mid, hi), = con.execute(f"""
            WITH __rows AS (SELECT person_id AS u, day AS k0 FROM events),
            kept AS (SELECT k0, count(DISTINCT u) AS n FROM (SELECT * FROM __rows QUALIFY
                     dense_rank() OVER (PARTITION BY u ORDER BY {key_hash}, k0) <= {G})
                     GROUP BY k0),
            truth AS (SELECT k0, count(DISTINCT u) AS n FROM __rows GROUP BY k0)
            SELECT min(kept.n / truth.n), median(kept.n / truth.n), max(kept.n / truth.n)
            FROM truth LEFT JOIN kept USING (k0)""", [SALT]).fetchall()
        lines.append(f"| {label} | {lo:.3f} | {mid:.3f} | {hi:.3f} | {hi / max(lo, 1e-9):.1f} |")
    return lines


def fast_path(con: duckdb.DuckDBPyConnection, metadata: Path, runs: int) -> list[str]:
    md = load_metadata(metadata)
    income = "NULLIF(income, 'NaN'::DOUBLE)"
    cases = (
        ("SUM(income)", "SELECT sum(income) FROM people",
         [("CASE WHEN v < lo THEN lo WHEN v > hi THEN hi ELSE v END, no TRY_CAST",
           f"SELECT coalesce(sum(CASE WHEN v < 0 THEN 0.0 WHEN v > 250000 THEN 250000.0 "
           f"ELSE v END), 0) FROM (SELECT {income} AS v FROM people)"),
          ("least(greatest(v, lo), hi) without the NULL guard (wrong for COUNT(x))",
           f"SELECT sum(least(greatest({income}, 0.0), 250000.0)) FROM people"),
          ("floor: NaN read as NULL, no clamp (not private: shows the clamp's cost)",
           f"SELECT sum({income}) FROM people")]),
        ("COUNT(*) WHERE age >= 65", "SELECT count(*) FROM people WHERE age >= 65",
         [("WHERE on the raw column (total, not clamped)",
           "WITH __rows AS (SELECT 1 AS __one FROM people WHERE age >= 65) "
           "SELECT count(*) FROM __rows")]),
    )
    lines = []
    for label, raw, variants in cases:
        p = Planner(md).prepare(raw, 1.0, 0.0)
        schema = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns"
                                  " WHERE table_name = ?", [p.table.name]).fetchall())
        sql = rewrite(p, schema).sql(dialect=DuckDBDialect)
        for name, q in (("raw", raw), ("dpsql's rewrite", sql), *variants):
            best, median, result = timed(con, q, None, runs)
            lines.append(f"| {label} | {name} | {best:.0f} | {median:.0f} | "
                         f"{_summary(result)} |")
    return lines


#: dpsql's rewrite of each query against its floor (issue 23, item 3): the bare grouping by
#: unit (and the key, for GROUP BY) over the same rows, timed in the same run. Targets: counts
#: and sums within 1.5x with public keys, thresholded keys within 2x, MEDIAN within 3x.
FLOOR_UNIT = "SELECT count(*) FROM (SELECT person_id, count(*) FROM events GROUP BY ALL)"
FLOOR_KEY = ("SELECT count(*) FROM (SELECT person_id, {key}, count(*) FROM events "
             "GROUP BY ALL)")
AGAINST_FLOOR = (
    ("COUNT(*)", "SELECT COUNT(*) FROM events", FLOOR_UNIT, 1.5, 0.0),
    ("SUM", "SELECT SUM(amount) FROM events", FLOOR_UNIT, 1.5, 0.0),
    ("AVG", "SELECT AVG(amount) FROM events", FLOOR_UNIT, 1.5, 0.0),
    ("GROUP BY public: COUNT, SUM", "SELECT category, COUNT(*), SUM(amount) FROM events "
     "GROUP BY category", FLOOR_KEY.format(key="category"), 1.5, 0.0),
    ("GROUP BY public: COUNT, AVG", "SELECT category, COUNT(*), AVG(amount) FROM events "
     "GROUP BY category", FLOOR_KEY.format(key="category"), 1.5, 0.0),
    ("GROUP BY thresholded: COUNT", "SELECT day, COUNT(*) FROM events GROUP BY day",
     FLOOR_KEY.format(key="day"), 2.0, 1e-6),
    ("MEDIAN", "SELECT MEDIAN(amount) FROM events", FLOOR_UNIT, 3.0, 0.0),
    ("GROUP BY public: MEDIAN", "SELECT category, MEDIAN(amount) FROM events GROUP BY "
     "category", FLOOR_KEY.format(key="category"), 3.0, 0.0),
)


def _once(con: duckdb.DuckDBPyConnection, sql: str, params: list[object] | None) -> float:
    started = time.perf_counter()
    con.execute(sql, params).fetchall()
    return 1000 * (time.perf_counter() - started)


def against_floor(con: duckdb.DuckDBPyConnection, metadata: Path, runs: int) -> list[str]:
    md = load_metadata(metadata)
    schema = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns"
                              " WHERE table_name = 'events'").fetchall())
    lines = []
    # As dpsql's engine runs it (dpsql.engines.DuckDBEngine): the sorted window, not DuckDB's
    # per-unit top-k aggregate, for the sampled rows.
    con.execute(NO_TOPN)
    for label, sql, floor, target, delta in AGAINST_FLOOR:
        p = Planner(md).prepare(sql, 1.0, delta)
        rewritten = rewrite(p, schema).sql(dialect=DuckDBDialect)
        params = [SALT] if "$1" in rewritten else None
        # The floor and the rewrite alternate, so that both see the same load.
        con.execute(floor).fetchall()  # warm-up
        con.execute(rewritten, params).fetchall()
        floor_ms, best = math.inf, math.inf
        for _ in range(runs):
            floor_ms = min(floor_ms, _once(con, floor, None))
            best = min(best, _once(con, rewritten, params))
        ratio = best / floor_ms
        lines.append(f"| {label} | {floor_ms:.0f} | {best:.0f} | {ratio:.2f}x | "
                     f"{target:g}x | {'met' if ratio <= target else 'not met'} |")
    con.execute("RESET disabled_optimizers")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--floor-only", action="store_true",
                        help="only dpsql's rewrite against its floor")
    args = parser.parse_args(argv)
    database, metadata = ensure_data(args.rows)
    con = duckdb.connect(str(database), read_only=True)
    print("## Machine\n")
    print(machine())
    print(f"\n## dpsql's rewrite against its floor: events, {args.rows:,} rows (min ms of "
          f"{args.runs})\n")
    print("| query | floor ms | dpsql ms | ratio | target | |\n|---|---:|---:|---:|---:|---|")
    for line in against_floor(con, metadata, args.runs):
        print(line, flush=True)
    if args.floor_only:
        return 0
    print(f"\n## Row bounding: events, {args.rows:,} rows, k = {K} (ms, {args.runs} runs)\n")
    print("| variant | min ms | median ms | check / result | note |\n|---|---:|---:|---|---|")
    for v in ROW_VARIANTS:
        print(run_variant(con, ROWS, v, args.runs, grouped=False), flush=True)
    print(f"\n## Group bounding: events GROUP BY category, g = {G}, k = {K}\n")
    print("| variant | min ms | median ms | check / result | note |\n|---|---:|---:|---|---|")
    for v in GROUP_VARIANTS:
        print(run_variant(con, ROWS_KEYED, v, args.runs, grouped=True), flush=True)
    print(f"\n## Bias of the group choice: events GROUP BY day, g = {G}: per day, the share of "
          "its persons kept\n")
    print("| group order | min | median | max | max/min |\n|---|---:|---:|---:|---:|")
    print("\n".join(group_bias(con)))
    print(f"\n## Fast path: people, {args.rows:,} rows (ms)\n")
    print("| query | form | min ms | median ms | result |\n|---|---|---:|---:|---|")
    print("\n".join(fast_path(con, metadata, args.runs)))
    con.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
