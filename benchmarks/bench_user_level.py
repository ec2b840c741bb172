"""The user-level query of issue 21's five-system table, on generated heavy-tailed visits:
bias and total error per cell for dpsql, before and after the groups cap change, and the
choice between truncating and scaling a unit's contributions.

    python benchmarks/bench_user_level.py                       # 1M people, ~10M visits
    python benchmarks/bench_user_level.py --people 100000 --runs 10
    python benchmarks/bench_user_level.py --auto-bounds         # and automatic k (max 100, 1000)
    python benchmarks/bench_user_level.py --auto-bounds --no-scaling
    python benchmarks/bench_user_level.py --people 200000 --auto-values  # value bounds only
    python benchmarks/bench_user_level.py --speed             # automatic bounds' time (39.2)

**Data** (``benchmarks/data/user_level_v1_N.duckdb``, generated with DuckDB's seeded
``random()``): ``visits(person_id, category, amount)``, N people, a person's number of visits
heavy-tailed (discrete lognormal, median 5, mean ~10, 99th percentile ~100), each visit in the
person's favourite category with probability 0.6 (else one of 8 uniformly), amounts lognormal
(median 40) under a declared bound of [0, 500]. Metadata as the five-system table: k = 10 rows,
g = 3 groups per person, ``category`` a public domain.

**Query**: ``SELECT category, COUNT(*), SUM(amount) FROM visits GROUP BY category`` at epsilon
1 (Laplace, delta 0), answered ``--runs`` times through :class:`dpsql.Database` (each run a
fresh salt and fresh noise). Per cell: the exact value, the mean relative error of the noisy
answers (bias) and their relative RMSE (bias and noise together), then the mean over the 8
categories. ``before`` forces the groups cap (dpsql's behaviour before issue 21's item 1);
``after`` is dpsql at its defaults; ``auto max N`` (``--auto-bounds``) declares
``max_rows_per_unit = { auto = true, max = N }`` (N = 100, then 1000: ``--auto-max``), k
chosen per query from the data for 10% of the epsilon (:mod:`dpsql.privacy.auto_bounds`); the
k chosen, over the runs, is printed under the table.

**Value bounds** (``--auto-values``, issue 21 item 2's second half, instead of the modes
above): k automatic up to 1000 in every mode, and amount's upper bound declared 500 (the
tuned bound above, which clamps the tail), declared 5000 (loose: the generator's own cap), or
``upper = { auto = true, max = 5000 }`` chosen per query for 10% of the epsilon
(:mod:`dpsql.privacy.auto_values`). The errors are against the exact sum of the amounts as
stored (no clamp: what an analyst wants); the bound chosen, over the runs, is printed under
the table.

**Speed of automatic bounds** (``--speed``, issue 39 item 2): the query above with k and
amount's upper bound chosen from the data (``max_rows_per_unit = { auto = true, max = 1000
}``, ``upper = { auto = true, max = 100000 }``) against the same query with them declared at
those caps (the same bounding path and SQL shape), and raw DuckDB, in interleaved rounds on
one connection each (only ratios in one run count on a shared machine). *before* is the
automatic run as it was: the counts per unit and each side's extremes read by engine queries
of their own (:func:`dpsql.routes.pipeline.units_sql`,
:func:`dpsql.routes.pipeline.values_sql`), then the
query counting each unit's rows again; *after* is dpsql now: one pass keeps the per-unit
aggregate that both choices read and, on DuckDB, the query reads its per-unit totals from it
(:mod:`dpsql.execution.choices`). Medians and minimums per query over ``--rounds`` rounds
(every other round in reverse order), and the median over rounds of each round's ratio to the
declared query, the steadiest figure on a loaded machine.

**Scaling vs truncation** (issue 21, item 3), untimed, in SQL on the same data and no groups
cap: per category, COUNT, SUM and AVG of (a) *truncation*, a uniform k-row sample per person
(the rows path), (b) *allocation*, dpsql's per-unit aggregates path (``min(n, k)`` rows
allocated over a person's groups by systematic rounding with a secret offset), (c) *scaling*,
each of a person's rows weighted by ``min(1, k / n_u)`` (Qrlew's rule; its weights sum to
``<= k``, so L1 is still ``<= k`` times one row's bound). All three have the same expectation
(a uniform k-row sample of a person's rows keeps ``k n_j / n_u`` of group j in mean), so their
bias is the same; what differs is the bounding's own variance, measured over ``--salts``
salts and added to the Laplace noise variance at the plan's epsilon split (equal for the
three: the same sensitivities).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import dpsql.privacy.plan
from dpsql.database import Database
from dpsql.engines import Engine
from dpsql.metadata.metadata import ColumnType
from dpsql.privacy.auto_bounds import choose_k
from dpsql.privacy.auto_values import draw
from dpsql.privacy.plan import Plan
from dpsql.privacy.randomness import Randomness
from dpsql.routes import pipeline

DATA = Path(__file__).resolve().parent / "data"
CATEGORIES = ("food", "fuel", "health", "home", "leisure", "travel", "books", "other")
K, G, UPPER = 10, 3, 500.0
QUERY = "SELECT category, COUNT(*) AS n, SUM(amount) AS s FROM visits GROUP BY category"

METADATA = f"""
[tables.visits]
privacy_unit = "person_id"
max_rows_per_unit = {{rows}}
max_groups_per_unit = {G}

[tables.visits.columns]
person_id = {{{{ type = "int" }}}}
category = {{{{ type = "text", values = {list(CATEGORIES)!r} }}}}
amount = {{{{ type = "float", lower = 0, upper = {UPPER} }}}}
"""


def ensure_data(people: int) -> Path:
    """The visits of ``people`` persons (module docstring), generated if missing."""
    path = DATA / f"user_level_v1_{people}.duckdb"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    started = time.perf_counter()
    con = duckdb.connect(str(partial))
    con.execute("SELECT setseed(0.21)")
    cats = ", ".join(f"'{c}'" for c in CATEGORIES)
    # n_u = round(exp(mu + sigma Z)), Z standard normal by Box-Muller: median e^mu = 5.
    con.execute(f"""
        CREATE TABLE persons AS SELECT person_id,
          GREATEST(1, ROUND(EXP(LN(5) + 1.2 * SQRT(-2 * LN(1 - random()))
                                * COS(2 * PI() * random()))))::BIGINT AS n,
          (random() * 8)::INT % 8 AS fav
        FROM range({people}) t(person_id)""")
    con.execute(f"""
        CREATE TABLE visits AS SELECT p.person_id,
          ([{cats}])[1 + CASE WHEN random() < 0.6 THEN p.fav
                           ELSE (random() * 8)::INT % 8 END] AS category,
          LEAST(EXP(LN(40) + 1.0 * SQRT(-2 * LN(1 - random())) * COS(2 * PI() * random())),
                5000)::DOUBLE AS amount
        FROM persons p, range(p.n) r(i)""")
    con.execute("DROP TABLE persons")
    con.close()
    partial.replace(path)
    print(f"generated {path.name} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return path


def metadata(folder: Path, auto: int | None, upper: str = str(UPPER)) -> Path:
    """The metadata at k = 10, or (``auto``) with k automatic up to ``auto``; amount's upper
    bound ``upper`` (a number, or an automatic bound's TOML)."""
    rows = f"{{ auto = true, max = {auto} }}" if auto else str(K)
    name = f"auto_{auto}" if auto else "fixed"
    path = folder / f"user_level_{name}_{abs(hash(upper)) % 10**6}.toml"
    text = METADATA.format(rows=rows).replace("{{", "{").replace("}}", "}")
    path.write_text(text.replace(f"upper = {UPPER} ", f"upper = {upper} "))
    return path


#: --auto-values: amount's upper bound per mode (module docstring), k automatic up to 1000.
VALUE_MODES = {"declared upper 500": str(UPPER), "declared upper 5000": "5000.0",
               "automatic upper, max 5000": "{ auto = true, max = 5000, share = 0.1 }"}


def exact(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[float, float]]:
    rows = con.execute("SELECT category, COUNT(*), SUM(LEAST(GREATEST(amount, 0), "
                       f"{UPPER})) FROM visits GROUP BY category").fetchall()
    return {c: (float(n), float(s)) for c, n, s in rows}


def _capped(table, specs, thresholded):  # type: ignore[no-untyped-def]
    """dpsql before issue 21's item 1: the groups cap applied on every grouped query."""
    return table.groups_per_unit if table.needs_bounding else None


def answers(database: Path, meta: Path, runs: int, mode: str, ks: list[int] | None = None,
            uppers: list[float] | None = None) -> dict[str, list[tuple[float, float]]]:
    """``runs`` answers per category; the k chosen from the data, if any, appended to ``ks``,
    amount's upper bound chosen from the data, if any, to ``uppers``."""
    out: dict[str, list[tuple[float, float]]] = {c: [] for c in CATEGORIES}
    patch = (mock.patch.object(dpsql.privacy.plan, "groups_cap", _capped) if mode == "before"
             else mock.patch.object(dpsql.privacy.plan, "groups_cap",
                                    dpsql.privacy.plan.groups_cap))
    with patch, Database(database, meta) as db:
        for _ in range(runs):
            result = db.query(QUERY, epsilon=1.0)
            if ks is not None and result.chosen_rows is not None:
                ks.append(result.chosen_rows)
            if uppers is not None and result.chosen_bounds:
                uppers.append(result.chosen_bounds["amount"][1])
            for category, n, s in result.rows:
                out[str(category)].append((float(n), float(s)))  # type: ignore[arg-type]
    return out


def error_table(truth: dict[str, tuple[float, float]],
                modes: dict[str, dict[str, list[tuple[float, float]]]]) -> list[str]:
    lines = ["| mode | category | COUNT exact | COUNT bias | COUNT RMSE | SUM exact | "
             "SUM bias | SUM RMSE |", "|---|---|---|---|---|---|---|---|"]
    for mode, got in modes.items():
        means: list[list[float]] = [[], [], [], []]
        for category in CATEGORIES:
            row = [mode, category]
            for i in (0, 1):
                true = truth[category][i]
                rel = [(a[i] - true) / true for a in got[category]]
                bias, rmse = statistics.fmean(rel), math.sqrt(statistics.fmean(
                    r * r for r in rel))
                means[2 * i].append(bias)
                means[2 * i + 1].append(rmse)
                row += [f"{true:,.0f}", f"{bias:+.1%}", f"{rmse:.1%}"]
            lines.append("| " + " | ".join(row) + " |")
        lines.append(f"| **{mode}** | mean of 8 | | {statistics.fmean(means[0]):+.1%} | "
                     f"{statistics.fmean(means[1]):.1%} | | {statistics.fmean(means[2]):+.1%} "
                     f"| {statistics.fmean(means[3]):.1%} |")
    return lines


# ----------------------------------------------------------------- scaling vs truncation

ROWS = f"""SELECT person_id AS u, category AS k, LEAST(GREATEST(amount, 0), {UPPER}) AS x,
  row_number() OVER () AS rid FROM visits"""
METHODS = {
    "truncation (k-row sample)": f"""
        SELECT k, COUNT(*) AS n, SUM(x) AS s FROM (SELECT * FROM r QUALIFY row_number()
          OVER (PARTITION BY u ORDER BY hash($1, rid)) <= {K}) GROUP BY k""",
    "allocation (dpsql: min(n,k) rows over groups)": f"""
        WITH g AS (SELECT u, k, COUNT(*) AS n, SUM(x) AS p FROM r GROUP BY u, k),
        c AS (SELECT *, SUM(n) OVER (PARTITION BY u ORDER BY k) AS cum,
                     SUM(n) OVER (PARTITION BY u) AS tot,
                     hash($1, u)::DOUBLE / 18446744073709551616.0 AS off FROM g),
        f AS (SELECT *, LEAST(tot, {K}) AS big FROM c),
        a AS (SELECT *, (CASE WHEN cum = tot THEN big ELSE LEAST(GREATEST(FLOOR(
                 big * cum / tot + off), 0), big) END) - (CASE WHEN cum - n = 0 THEN 0
                 ELSE LEAST(GREATEST(FLOOR(big * (cum - n) / tot + off), 0), big) END) AS cc
              FROM f)
        SELECT k, SUM(cc) AS n, SUM(p * cc / n) AS s FROM a GROUP BY k""",
    "scaling (weights min(1, k/n_u))": f"""
        WITH g AS (SELECT u, k, COUNT(*) AS n, SUM(x) AS p FROM r GROUP BY u, k),
        w AS (SELECT *, LEAST(1.0, {K} / SUM(n) OVER (PARTITION BY u)) AS wt FROM g)
        SELECT k, SUM(n * wt) AS n, SUM(p * wt) AS s FROM w GROUP BY k""",
}


def scaling_table(con: duckdb.DuckDBPyConnection, truth: dict[str, tuple[float, float]],
                  salts: int) -> list[str]:
    """Mean over categories of |bias| and RMSE (bounding variance + Laplace noise at epsilon
    1/2 per measurement, scale k/eps for counts, k*U/eps for sums) per aggregate kind."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE r AS {ROWS}")
    noise = {"COUNT": 2 * (K / 0.5) ** 2, "SUM": 2 * (K * UPPER / 0.5) ** 2}
    lines = ["| method | kind | mean bias | mean RMSE (bias + bounding + noise) |",
             "|---|---|---|---|"]
    for label, sql in METHODS.items():
        per: dict[str, list[tuple[float, float, float]]] = {c: [] for c in CATEGORIES}
        for salt in range(salts):
            for k, n, s in con.execute(sql, [salt * 7919 + 1] if "$1" in sql else []).fetchall():
                per[k].append((float(n), float(s), float(s) / max(float(n), 1.0)))
        for i, kind in enumerate(("COUNT", "SUM", "AVG")):
            biases, rmses = [], []
            for c in CATEGORIES:
                true = truth[c][i] if i < 2 else truth[c][1] / truth[c][0]
                vals = [v[i] for v in per[c]]
                mean = statistics.fmean(vals)
                var = statistics.pvariance(vals)
                if kind == "AVG":  # first-order noise of S/n: (var_S + avg^2 var_n) / n^2
                    n0 = statistics.fmean(v[0] for v in per[c])
                    var += (noise["SUM"] / 4 + mean * mean * noise["COUNT"]) / n0 ** 2
                else:
                    var += noise[kind]
                biases.append((mean - true) / true)
                rmses.append(math.sqrt((mean - true) ** 2 + var) / abs(true))
            lines.append(f"| {label} | {kind} | {statistics.fmean(biases):+.2%} | "
                         f"{statistics.fmean(rmses):.3%} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--salts", type=int, default=5)
    parser.add_argument("--auto-bounds", action="store_true")
    parser.add_argument("--auto-max", type=int, nargs="*", default=[100, 1000])
    parser.add_argument("--no-scaling", action="store_true", help="skip scaling vs truncation")
    parser.add_argument("--auto-values", action="store_true",
                        help="only the value-bound modes (module docstring)")
    parser.add_argument("--speed", action="store_true",
                        help="only the time of automatic bounds against declared ones")
    parser.add_argument("--rounds", type=int, default=7, help="--speed's interleaved rounds")
    args = parser.parse_args()
    database = ensure_data(args.people)
    if args.speed:
        speed(database, args.people, args.rounds)
        return
    if args.auto_values:
        value_bounds(database, args.people, args.runs)
        return
    with duckdb.connect(str(database), read_only=True) as con:
        truth = exact(con)
        visits, over = con.execute(f"SELECT COUNT(*), (SELECT COUNT(*) FROM (SELECT person_id "
                                   f"FROM visits GROUP BY person_id HAVING COUNT(*) > {K})) "
                                   "FROM visits").fetchone() or (0, 0)
    print(f"# User-level accuracy: {args.people:,} people, {visits:,} visits "
          f"({over:,} people over k = {K}), epsilon 1, {args.runs} runs\n")
    modes = {}
    chosen: dict[str, list[int]] = {}
    for mode in ("before", "after"):
        started = time.perf_counter()
        modes[mode] = answers(database, metadata(DATA, auto=None), args.runs, mode)
        print(f"{mode}: {(time.perf_counter() - started) / args.runs:.2f} s per query",
              file=sys.stderr)
    for cap in args.auto_max if args.auto_bounds else []:
        mode = f"auto max {cap}"
        started = time.perf_counter()
        chosen[mode] = []
        modes[mode] = answers(database, metadata(DATA, auto=cap), args.runs, "after",
                              chosen[mode])
        print(f"{mode}: {(time.perf_counter() - started) / args.runs:.2f} s per query",
              file=sys.stderr)
    print("\n".join(error_table(truth, modes)))
    for mode, ks in chosen.items():
        print(f"\n{mode}: k chosen from the data: median {statistics.median(ks):g}, "
              f"range {min(ks)}-{max(ks)} over {len(ks)} runs")
    if args.no_scaling:
        return
    print("\n## Scaling vs truncation (no groups cap, same sensitivities)\n")
    with duckdb.connect(str(database), read_only=True) as con:
        print("\n".join(scaling_table(con, truth, args.salts)))


def value_bounds(database: Path, people: int, runs: int) -> None:
    """The --auto-values modes: errors against the stored amounts' exact sums."""
    with duckdb.connect(str(database), read_only=True) as con:
        truth = {c: (float(n), float(t)) for c, n, t in con.execute(
            "SELECT category, COUNT(*), SUM(amount) FROM visits GROUP BY category").fetchall()}
        top = con.execute("SELECT MAX(amount), QUANTILE_CONT(amount, 0.999) FROM (SELECT "
                          "MAX(amount) AS amount FROM visits GROUP BY person_id)").fetchone()
    print(f"# Value bounds: {people:,} people, epsilon 1, {runs} runs, k automatic (max "
          f"1000); per person largest amount: max {top[0]:,.0f}, 99.9th percentile "
          f"{top[1]:,.0f}\n")
    modes, uppers = {}, {}
    for mode, upper in VALUE_MODES.items():
        started = time.perf_counter()
        uppers[mode] = []
        modes[mode] = answers(database, metadata(DATA, auto=1000, upper=upper), runs, "after",
                              None, uppers[mode])
        print(f"{mode}: {(time.perf_counter() - started) / runs:.2f} s per query",
              file=sys.stderr)
    print("\n".join(error_table(truth, modes)))
    for mode, chosen in uppers.items():
        if chosen:
            print(f"\n{mode}: upper bound chosen from the data: median "
                  f"{statistics.median(chosen):,.0f}, range {min(chosen):,.0f}-"
                  f"{max(chosen):,.0f} over {len(chosen)} runs")


# ------------------------------------------------------------------ speed (issue 39.2)

SPEED_CAPS = (1000, 100000.0)  # k's and amount's upper bound's caps, declared or automatic


#: The separate choices' SQL per plan, compiled once as before issue 39.2.
_BEFORE_SQL: dict[tuple[int, int], tuple[Plan, str]] = {}


def _before_sql(p: Plan, i: int, build: Callable[[], str]) -> str:
    entry = _BEFORE_SQL.get((id(p), i))
    if entry is None or entry[0] is not p:
        entry = _BEFORE_SQL[(id(p), i)] = (p, build())
    return entry[1]


def _choose_before(p: Plan, engine: Engine, rng: Randomness) -> Plan:
    """dpsql.routes.pipeline.choose as it was before issue 39.2: one engine query per choice."""
    if pipeline.k_to_choose(p):
        _, counts = engine.execute(_before_sql(p, -1, lambda: pipeline.units_sql(
            p, engine)))
        k = choose_k(p, {int(c): int(n) for c, n in counts}, rng)  # type: ignore[call-overload]
        p = pipeline._chosen(p, k)
    if pipeline.values_to_choose(p):
        drawn = []
        for i, v in enumerate(p.values):
            _, buckets = engine.execute(_before_sql(p, i, lambda i=i: pipeline.values_sql(  # type: ignore[misc]
                p, i, engine)))
            drawn.append(draw(v, {int(b): int(n) for b, n in buckets},  # type: ignore[call-overload]
                              p.table.columns[v.column].type == ColumnType.INT, rng))
        p = pipeline._valued(p, tuple(drawn))
    return p


@contextlib.contextmanager
def _before() -> Iterator[None]:
    with mock.patch.object(pipeline, "choose", _choose_before), \
            mock.patch.object(pipeline, "_shares_units", lambda p, engine: False):
        yield


def speed(database: Path, people: int, rounds: int) -> None:
    """The --speed table (module docstring)."""
    k, upper = SPEED_CAPS
    declared = metadata(DATA, auto=None, upper=str(upper)).read_text().replace(
        f"max_rows_per_unit = {K}", f"max_rows_per_unit = {k}")
    paths = {"declared": DATA / "speed_declared.toml", "auto": DATA / "speed_auto.toml"}
    paths["declared"].write_text(declared)
    paths["auto"].write_text(metadata(DATA, auto=k, upper=f"{{ auto = true, max = {upper} }}")
                             .read_text())
    dbs = {name: Database(database, path) for name, path in paths.items()}
    raw = dbs["declared"].engine  # the analyst's query itself, on dpsql's own connection
    runs: dict[str, Callable[[], object]] = {
        "raw DuckDB": lambda: raw.execute(QUERY),
        "declared bounds": lambda: dbs["declared"].query(QUERY, epsilon=1.0),
        "automatic, before": lambda: _run_before(dbs["auto"]),
        "automatic, after": lambda: dbs["auto"].query(QUERY, epsilon=1.0)}
    times: dict[str, list[float]] = {name: [] for name in runs}
    try:
        for run in runs.values():  # warm: plans, dry runs, the file's pages
            run()
        for i in range(rounds):  # every other round in reverse: a drifting load cancels out
            for name, run in (list(runs.items()) if i % 2 == 0 else
                              list(reversed(runs.items()))):
                started = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - started)
    finally:
        for db in dbs.values():
            db.close()
    print(f"# Automatic bounds' time: {people:,} people, {rounds} interleaved rounds, k max "
          f"{k:g}, amount's upper max {upper:g}\n")
    print("| mode | median s | min s | / declared (median) | / raw (median) |")
    print("|---|---:|---:|---:|---:|")
    med = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"| {name} | {med[name]:.3f} | {min(t):.3f} | "
              f"{med[name] / med['declared bounds']:.2f}x | {med[name] / med['raw DuckDB']:.1f}x |")
    paired = {mode: statistics.median(t / d for t, d in zip(times[mode], times[
        "declared bounds"], strict=True)) for mode in ("automatic, before", "automatic, after")}
    low = min(times["declared bounds"])
    b, a = times["automatic, before"], times["automatic, after"]
    print(f"\nautomatic / declared, the median of each round's ratio: before "
          f"{paired['automatic, before']:.2f}x, after {paired['automatic, after']:.2f}x (of "
          f"the medians: {med['automatic, before'] / med['declared bounds']:.2f}x, "
          f"{med['automatic, after'] / med['declared bounds']:.2f}x; of the minimums: "
          f"{min(b) / low:.2f}x, {min(a) / low:.2f}x)")


def _run_before(db: Database) -> object:
    with _before():
        return db.query(QUERY, epsilon=1.0)


if __name__ == "__main__":
    main()
