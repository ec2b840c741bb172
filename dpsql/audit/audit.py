"""A statistical privacy audit: a lower confidence bound on the privacy loss of a query, measured
through the same entry points that analysts use (SQL in, noisy answer out).

The claim being checked is differential privacy itself: for neighbouring databases D and D' and
every set E of answers, ``P[M(D) in E] <= exp(epsilon) * P[M(D') in E] + delta``. So for every
event E, ``epsilon >= ln((P[M(D) in E] - delta) / P[M(D') in E])``. The auditor

1. builds D and D' as two small DuckDB files with one metadata TOML: D' is D plus one privacy
   unit that contributes far more rows than ``max_rows_per_unit``, in more groups than
   ``max_groups_per_unit``, with values far outside the declared bounds (the worst neighbour
   the metadata allows). Both directions of the inequality are tested, so "D' minus that unit"
   is covered too;
2. prepares the query once (:meth:`dpsql.Database.plan`, no data read) and answers it
   ``n_select + n`` times on each database (:func:`dpsql.routes.pipeline.answer`: rewrite, execute,
   perturb, post-process, exactly as :meth:`dpsql.Database.query` does);
3. turns each answer into scalar features: every cell of every released group, each group's
   presence ("group released") and its row position (for ORDER BY / LIMIT), and "the query
   failed" if it raised;
4. on the first ``n_select`` runs per side only, picks the ``events`` most promising events
   ``feature > t`` or ``feature <= t`` (thresholds from the observed values) and directions;
5. on the ``n`` fresh runs per side, computes Clopper-Pearson bounds (``scipy.stats.beta``) for
   those events, with the error probability ``1 - confidence`` split across all the bounds
   (Bonferroni), and reports

       epsilon_lb = max over chosen events and directions of ln((p1_lcb - delta) / p2_ucb)

   (0 when no event gives evidence). With probability at least ``confidence``, epsilon_lb is
   below the true privacy loss of the query on this pair of databases. A scenario passes when
   epsilon_lb <= the declared epsilon.

Because the events are chosen on runs that the bound never sees, the bound is honest: a lucky
selection cannot inflate it. An auditor proves nothing if it cannot fail, so the tests also run
it against deliberately broken engines (noise halved, clamping, thresholding or contribution
bounding removed) and require it to reject each one (``tests/audit/test_audit.py``).

A lower bound is not a proof of privacy: a passing audit shows that this query on this pair of
databases leaks no more than declared *as far as N runs can tell*. The proofs are in
:mod:`dpsql.privacy.aggregates` and :mod:`dpsql.privacy.mechanisms`; the audit guards their
implementation.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import duckdb
import numpy as np

from dpsql.audit.scenarios import SCENARIOS, Scenario, TableRows
from dpsql.database import Database
from dpsql.engines import Engine
from dpsql.engines.locked import insert_rows
from dpsql.execution.postprocess import Result, ResultColumn
from dpsql.execution.retention import measure, noisy
from dpsql.metadata.metadata import ENGINE_TYPES
from dpsql.privacy.plan import Plan
from dpsql.privacy.randomness import Randomness
from dpsql.privacy.randomness import default as default_randomness
from dpsql.routes.route import Answering

#: Evaluation runs per side; overridden by the environment variable DPSQL_AUDIT_N.
DEFAULT_N = 1000
DEFAULT_CONFIDENCE = 0.99
DEFAULT_EVENTS = 4

Feature = tuple[object, ...]


def default_n() -> int:
    """Runs per side: ``DPSQL_AUDIT_N`` when set (a stricter, longer audit), else DEFAULT_N."""
    value = os.environ.get("DPSQL_AUDIT_N", "").strip()
    return int(value) if value else DEFAULT_N


# --------------------------------------------------------------------------- scenarios


@dataclass
class AuditResult:
    scenario: str
    title: str
    epsilon: float
    delta: float
    epsilon_lb: float
    n: int  # evaluation runs per side
    n_select: int  # selection runs per side
    event: str  # the event that gave the bound
    p1: float  # its frequency on the first database of the direction
    p2: float  # ... and on the second
    seconds: float
    confidence: float = DEFAULT_CONFIDENCE
    events: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.epsilon_lb <= self.epsilon

    @property
    def declared(self) -> str:
        return f"{self.epsilon:g}" + (f" ({self.delta:g})" if self.delta else "")


def build_databases(scenario: Scenario, folder: str | Path) -> tuple[Path, Path, Path]:
    """Write D, D' (DuckDB files) and the metadata TOML of ``scenario`` into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    metadata = folder / "metadata.toml"
    metadata.write_text(scenario.metadata)
    import tomllib

    tables = tomllib.loads(scenario.metadata)["tables"]
    every = [TableRows(scenario.table, scenario.columns, scenario.rows, scenario.neighbour),
             *scenario.more]
    paths = []
    for label in ("d", "d_prime"):
        path = folder / f"{label}.duckdb"
        path.unlink(missing_ok=True)
        with duckdb.connect(str(path)) as con:
            for t in every:
                declared = tables[t.table]["columns"]
                types = [ENGINE_TYPES[_kind(declared.get(c, "text"))] for c in t.columns]
                ddl = ", ".join(f'"{c}" {k}' for c, k in zip(t.columns, types, strict=True))
                con.execute(f'CREATE TABLE "{t.table}" ({ddl})')
                rows = t.rows + (t.neighbour if label == "d_prime" else ())
                insert_rows(con, f'"{t.table}"', types, rows)
        paths.append(path)
    return paths[0], paths[1], metadata


def _kind(spec: object) -> str:
    return spec if isinstance(spec, str) else str(spec.get("type", "text"))  # type: ignore


# --------------------------------------------------------------------------- running


Outcome = Result | Exception


def run(scenario: Scenario, db: Database, n: int) -> list[Outcome]:
    """Answer the scenario's query ``n`` times on ``db`` (planned once, no data read); a
    retention scenario's answer is the query's retention estimate, as a one-row Result."""
    route = db.route(scenario.sql, scenario.epsilon, scenario.delta, scenario.mechanism)
    if scenario.retention:
        return _retention(route.retained(), db, scenario.epsilon, n)
    engine = cast(Engine, Rerun(db.engine))
    context = Answering(engine, db.randomness, db.metadata, db.planner.public_store)
    outcomes: list[Outcome] = []
    for _ in range(n):
        try:
            outcomes.append(route.answer(context))
        except Exception as e:  # a failure on one side only is itself a leak, so every
            outcomes.append(e)  # failure is an event of the answer, never a crash of the audit
    return outcomes


class Rerun:
    """The engine of one audit's ``n`` answers: a query that takes no parameter returns the
    same rows each time it runs (nothing in it is drawn: the salt of a contribution-bounding
    sample is its one parameter, fresh per answer), so it runs once and its rows are handed
    out again; a salted query runs every time, as each answer draws its own sample. A failure
    is never reused: the query runs again. Every answer still draws its own noise, and every
    choice from the data (:mod:`dpsql.privacy.auto_bounds`) its own draw, so the answers are
    distributed as ``n`` answers of the engine itself are (the auditor's claim); the saving is
    the engine's time, most of the audit's."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._rows: dict[str, tuple[list[str], list[tuple[object, ...]]]] = {}

    def __getattr__(self, name: str) -> object:
        return getattr(self._engine, name)

    def execute(self, sql: str, parameters: Sequence[object] = ()
                ) -> tuple[list[str], list[tuple[object, ...]]]:
        if parameters:
            return self._engine.execute(sql, parameters)
        if sql not in self._rows:
            self._rows[sql] = self._engine.execute(sql)
        names, rows = self._rows[sql]
        return list(names), list(rows)


def _retention(plan: Plan, db: Database, epsilon: float, n: int) -> list[Outcome]:
    """``n`` retention estimates of ``plan`` on ``db``, each a one-row Result. The engine query
    samples nothing (:mod:`dpsql.execution.retention`): measured once, its noise drawn ``n`` times,
    as ``n`` estimates would be."""
    units, kept = measure(plan, db.engine)
    names = ("units", "shares", "kept", "low", "high")
    columns = [ResultColumn(name, "DOUBLE") for name in names]
    outcomes: list[Outcome] = []
    for _ in range(n):
        r = noisy(units, kept, epsilon, db.randomness).as_json()
        outcomes.append(Result(columns, [tuple(r[c] for c in names)], [(None,) * 5]))
    return outcomes


def _run_both(scenario: Scenario, d: Database, d_prime: Database, n: int
              ) -> tuple[list[dict[Feature, float]], list[dict[Feature, float]]]:
    """The features of ``n`` answers on each database. On the operating system's randomness
    the two sides run in two threads (the engine releases the GIL while it reads, so a second
    core is put to use); on a reproducible stream, one after the other: two threads drawing
    from one stream would interleave differently from run to run, and so would the verdict."""
    parallel = not (d.randomness.reproducible or d_prime.randomness.reproducible)
    with ThreadPoolExecutor(2 if parallel else 1) as pool:
        sides = pool.map(lambda db: [features(o, scenario.keys) for o in run(scenario, db, n)],
                         (d, d_prime))
        on_d, on_d_prime = list(sides)
    return on_d, on_d_prime


def features(outcome: Outcome, keys: Sequence[str]) -> dict[Feature, float]:
    """Scalar features of one answer: cells, group presence and row position, failure."""
    if isinstance(outcome, Exception):
        return {("failed", type(outcome).__name__): 1.0}
    names = [c.name for c in outcome.columns]
    key_index = [names.index(k) for k in keys]
    out: dict[Feature, float] = {}
    for position, row in enumerate(outcome.rows):
        key = tuple(row[i] for i in key_index)
        out[("released", key)] = 1.0
        out[("position", key)] = float(position)
        for i, value in enumerate(row):
            if i in key_index:
                continue
            out[(names[i], key)] = _number(value)
    out[("rows",)] = float(len(outcome.rows))
    if outcome.chosen_rows is not None:  # an automatic k is released with the answer
        out[("k",)] = float(outcome.chosen_rows)
    for column, (lower, upper) in (outcome.chosen_bounds or {}).items():  # value bounds too
        out[("lower", column)], out[("upper", column)] = float(lower), float(upper)
    if keys:  # column totals over the released groups: a unit's effect summed over groups
        for i, name in enumerate(names):
            values = [_number(row[i]) for row in outcome.rows]
            if i not in key_index and values and all(math.isfinite(v) for v in values):
                out[("total", name)] = float(sum(values))
    return out


def _number(value: object) -> float:
    if value is None:
        return math.nan
    if isinstance(value, dt.datetime):  # a timestamp cell: its seconds, comparable as a number
        return (value - dt.datetime(1970, 1, 1)).total_seconds()
    if isinstance(value, dt.date):
        return float(value.toordinal())
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float(hash(value) % 2**31)  # a non-numeric cell: compared for equality only


def _matrix(samples: Sequence[dict[Feature, float]], names: Sequence[Feature]) -> np.ndarray:
    out = np.full((len(samples), len(names)), np.nan)
    for i, sample in enumerate(samples):
        for j, name in enumerate(names):
            if name[0] in ("released", "failed"):
                out[i, j] = sample.get(name, 0.0)  # absent: not released, did not fail
            else:
                out[i, j] = sample.get(name, math.nan)  # absent: no value
    return out


# --------------------------------------------------------------------------- statistics


def clopper_pearson(k: np.ndarray, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper-Pearson bounds at level ``alpha`` each: (lower, upper)."""
    from scipy.stats import beta

    k = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        lower = np.where(k > 0, beta.ppf(alpha, k, n - k + 1), 0.0)
        upper = np.where(k < n, beta.ppf(1 - alpha, k + 1, n - k), 1.0)
    return np.nan_to_num(lower, nan=0.0), np.nan_to_num(upper, nan=1.0)


def epsilon_bound(k1: np.ndarray, k2: np.ndarray, n: int, delta: float, alpha: float
                  ) -> np.ndarray:
    """ln((p1_lcb - delta) / p2_ucb) per event, -inf where p1_lcb <= delta."""
    lower, _ = clopper_pearson(k1, n, alpha)
    _, upper = clopper_pearson(k2, n, alpha)
    gap = lower - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(gap > 0, np.log(np.maximum(gap, 1e-300) / upper), -np.inf)


@dataclass(frozen=True)
class Event:
    feature: Feature
    above: bool  # feature > t, else feature <= t
    threshold: float
    forward: bool  # P_D(E) against P_D'(E), else the reverse

    def holds(self, column: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return column > self.threshold if self.above else column <= self.threshold

    def describe(self) -> str:
        name = feature_name(self.feature)
        op = ">" if self.above else "<="
        sides = "D vs D'" if self.forward else "D' vs D"
        if self.feature[0] in ("released", "failed"):
            what = name if self.above else f"not {name}"
            return f"{what} ({sides})"
        return f"{name} {op} {self.threshold:.6g} ({sides})"


def feature_name(feature: Feature) -> str:
    """``n[a]`` for cell n of group a, ``total(n)``, ``failed(EngineError)``, ``rows``."""
    head, *rest = feature
    if not rest:
        return str(head)
    arg = rest[0]
    if isinstance(arg, tuple):
        return f"{head}[{', '.join(map(str, arg))}]" if arg else str(head)
    return f"{head}({arg})"


def _thresholds(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    values: np.ndarray = np.concatenate([a, b])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return values
    unique: np.ndarray = np.unique(values)
    if unique.size <= 400:
        return unique
    levels = np.concatenate([[0.002, 0.005], np.linspace(0.01, 0.99, 99), [0.995, 0.998]])
    chosen: np.ndarray = np.unique(np.quantile(values, levels))
    return chosen


def _candidates(a: np.ndarray, b: np.ndarray, names: Sequence[Feature], delta: float,
                alpha: float, n_eval: int) -> list[tuple[float, float, Event]]:
    """Every threshold event on every feature, scored on the selection runs by the bound it
    would give if the evaluation runs showed the same frequencies."""
    # Smoothed frequencies ((k + 1/2) / (n + 1)): an empty tail in a few hundred runs is not
    # a probability of zero.
    scale = n_eval / (a.shape[0] + 1)
    scored: list[tuple[float, float, Event]] = []
    for j, name in enumerate(names):
        x, y = a[:, j], b[:, j]
        ts = _thresholds(x, y)
        if ts.size == 0:
            continue
        xs, ys = np.sort(x[np.isfinite(x)]), np.sort(y[np.isfinite(y)])
        x_le = np.searchsorted(xs, ts, side="right")
        y_le = np.searchsorted(ys, ts, side="right")
        counts = {True: (xs.size - x_le, ys.size - y_le), False: (x_le, y_le)}
        for above, (kx, ky) in counts.items():
            for forward, (k1, k2) in ((True, (kx, ky)), (False, (ky, kx))):
                bound = epsilon_bound((k1 + 0.5) * scale, (k2 + 0.5) * scale, n_eval, delta,
                                      alpha)
                smooth = np.log((k1 + 0.5) / (k2 + 0.5))
                for i in range(ts.size):
                    if k1[i] <= k2[i]:
                        continue  # no evidence in this direction
                    scored.append((float(bound[i]), float(smooth[i]),
                                   Event(name, above, float(ts[i]), forward)))
    return scored


def choose_events(a: np.ndarray, b: np.ndarray, names: Sequence[Feature], delta: float,
                  count: int, alpha: float, n_eval: int) -> list[Event]:
    """The ``count`` best events on the selection runs (by their predicted lower bound, then
    by a smoothed likelihood ratio), the best of each feature and direction first."""
    scored = _candidates(a, b, names, delta, alpha, n_eval)
    scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
    chosen: list[Event] = []
    seen: set[tuple[Feature, bool]] = set()
    for _, _, event in scored:  # the best event of each feature and direction first
        if (event.feature, event.forward) not in seen:
            seen.add((event.feature, event.forward))
            chosen.append(event)
        if len(chosen) == count:
            return chosen
    for _, _, event in scored:
        if event not in chosen:
            chosen.append(event)
        if len(chosen) == count:
            break
    return chosen


# --------------------------------------------------------------------------- the audit


def audit(scenario: Scenario, n: int | None = None, *, n_select: int | None = None,
          confidence: float = DEFAULT_CONFIDENCE, events: int = DEFAULT_EVENTS,
          folder: str | Path | None = None,
          progress: Callable[[str], None] | None = None,
          engine: Callable[[Path], str | Path] | None = None,
          randomness: Randomness | None = None) -> AuditResult:
    """Audit one scenario: ``n_select`` selection runs and ``n`` evaluation runs per side.
    ``engine`` maps each DuckDB file of D and D' to the database dpsql opens instead (a copy
    in another engine: the tests audit PostgreSQL so). Both sides draw from ``randomness``
    (the process default, :mod:`dpsql.privacy.randomness`, unless given): a seeded one makes the
    verdict reproducible."""
    n = default_n() if n is None else n
    n_select = max(100, n // 4) if n_select is None else n_select
    if n < 10 or n_select < 10:
        raise ValueError("an audit needs at least 10 runs per side")
    if not 0.5 <= confidence < 1:
        raise ValueError("confidence must be in [0.5, 1)")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dpsql-audit-") as tmp:
        d_path, d_prime_path, metadata = build_databases(scenario, folder or tmp)
        if engine is not None:
            d_path, d_prime_path = engine(d_path), engine(d_prime_path)  # type: ignore[assignment]
        rng = randomness or default_randomness()
        with Database(d_path, metadata, randomness=rng) as d, \
                Database(d_prime_path, metadata, randomness=rng) as d_prime:
            if progress:
                progress(f"{scenario.name}: selecting events on {n_select} runs per side")
            select_d, select_p = _run_both(scenario, d, d_prime, n_select)
            names = sorted({f for s in select_d + select_p for f in s}, key=repr)
            alpha = (1 - confidence) / (2 * events)
            chosen = choose_events(_matrix(select_d, names), _matrix(select_p, names), names,
                                   scenario.delta, events, alpha, n)
            if progress:
                progress(f"{scenario.name}: measuring {len(chosen)} events on {n} runs per side")
            eval_d, eval_p = _run_both(scenario, d, d_prime, n)
    bound, best = -math.inf, None
    p1 = p2 = 0.0
    # Each chosen event uses two one-sided bounds; all of them hold together with
    # probability >= confidence (Bonferroni).
    alpha = (1 - confidence) / (2 * max(len(chosen), 1))
    for event in chosen:
        x = _matrix(eval_d, [event.feature])[:, 0]
        y = _matrix(eval_p, [event.feature])[:, 0]
        kx, ky = int(event.holds(x).sum()), int(event.holds(y).sum())
        k1, k2 = (kx, ky) if event.forward else (ky, kx)
        value = float(epsilon_bound(np.array([k1]), np.array([k2]), n, scenario.delta,
                                    alpha)[0])
        if best is None or value > bound:
            bound, best, p1, p2 = value, event, k1 / n, k2 / n
    return AuditResult(
        scenario=scenario.name, title=scenario.title, epsilon=scenario.epsilon,
        delta=scenario.delta, epsilon_lb=max(0.0, bound), n=n, n_select=n_select,
        event=best.describe() if best is not None else "-", p1=p1, p2=p2,
        seconds=time.perf_counter() - started, confidence=confidence,
        events=[e.describe() for e in chosen])


def format_results(results: Sequence[AuditResult]) -> str:
    """The audit table (Markdown)."""
    lines = ["| scenario | declared epsilon (delta) | audited lower bound | N | pass |",
             "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.scenario}: {r.title} | {r.declared} | {r.epsilon_lb:.3f} | "
                     f"{r.n} | {'yes' if r.passed else 'NO'} |")
    return "\n".join(lines)


__all__ = ["SCENARIOS", "AuditResult", "Scenario", "audit", "build_databases", "format_results"]
