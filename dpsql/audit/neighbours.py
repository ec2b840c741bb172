"""Neighbour testing by execution: a privacy argument's check on adversarial neighbours.

Every sensitivity in dpsql is a claim in a docstring (:mod:`dpsql.privacy.aggregates`,
:mod:`dpsql.query.joins`, :mod:`dpsql.routes.series`, :mod:`dpsql.execution.rewrite`). This module
checks the claims on data, without noise, so that a broken argument fails deterministically:

1. :func:`synthesize` builds a small database D from a :class:`~dpsql.metadata.metadata.Metadata`
   alone (declared types, bounds, domains, units, ``unit_path``, public tables), never from
   the owner's data. Each private row belongs to a *person* that only the generator knows, so
   rows of one person in several spellings of its unit (``'99'``, ``'099'``, ``'+99'``,
   ``' 99'`` in a VARCHAR-stored int unit) are one person's rows. The *adversary* is one more
   person with more rows than k in more groups than g, values far outside the bounds (and
   inf, -inf, NaN), NULL and NaN keys, duplicated rows, units in several spellings (and one
   that converts to nothing), many join partners and rows that dangling foreign keys of D
   reach. D itself holds a person whose nullable values are all NULL, rows of no one (NULL
   units, dangling or NULL ``unit_path`` columns), people whom a LEFT JOIN NULL-fills, and
   public keys that match many rows.
2. The neighbours are D minus each person and D plus the adversary; each is materialised
   once as one schema of one engine database (:func:`duckdb_neighbourhood`,
   :func:`postgres_neighbourhood`), so a query runs on a neighbour by switching the schema.
3. :func:`check_query` plans an accepted query (the same
   :meth:`dpsql.routes.planner.Planner.route_query` as every front door), runs its noise-free
   engine query -- the exact per-group measurements, the rewrite with ONE fixed salt for
   both sides, so the bounding sample of every other unit is identical -- on each neighbour,
   and checks each pair (D, D'):

   * **sensitivity**: for each measurement m of the plan, the vector over the groups that
     can be released (the public domain's keys, every engine key under thresholding, the one
     row of a global aggregate) moves by at most m's declared sensitivity: L1 ``m.l1`` for
     Laplace (and for the histograms of the exponential mechanism, whose bucket counts carry
     the rank utility), L2 ``m.l2`` for Gaussian. Exact fixed-point sums are compared in
     value units (``q * m.step``);
   * **key release**: under thresholding, a key present on one side only must exist because
     of the one unit alone: its count of units is at most 1 and there are at most the
     threshold measurement's L1 (g') such keys -- the case :func:`dpsql.privacy.thresholds.tau_for`
     bounds by delta. Public-domain plans release their domain whatever the data;
   * **outcome class**: an answer on both sides, or the same error class on both -- the
     engine's, or that of :func:`~dpsql.execution.perturb.perturb_cells` on the exact rows
     (with one fixed noise stream), the one pass after the engine that reads them.

   A series limit (:class:`~dpsql.routes.series.TwoReleases`) is checked as its two releases: the
   inner plan as any plan, and the outer one filled with one fixed set of released keys (the
   inner's exact keys on D) on both sides, as the second release is answered for whatever
   keys the first released.

Refusals (at plan time, or :func:`dpsql.routes.pipeline.check_engine_query`) and exact public reads
are counted, not tested: they never read private data.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dpsql.audit.neighbour_engines import (
    Neighbourhood,
    duckdb_neighbourhood,
    postgres_neighbourhood,
    spark_neighbourhood,
)
from dpsql.audit.neighbour_worlds import ADVERSARY, BASE, World, scenario_world, synthesize
from dpsql.errors import Error, ProgrammingError, QueryRefused, UnsupportedQuery
from dpsql.execution.perturb import _by_key, histogram_arrays, perturb_cells
from dpsql.execution.retention import retention_sql
from dpsql.metadata.contribution import ContributionBounds
from dpsql.metadata.metadata import ColumnType, Metadata
from dpsql.privacy.aggregates import Measurement, MeasurementKind
from dpsql.privacy.auto_bounds import AUTO_SENSITIVITY, auto_rows_per_unit, with_rows
from dpsql.privacy.auto_values import draw, placed, with_values
from dpsql.privacy.mechanisms import Mechanism
from dpsql.privacy.plan import Plan
from dpsql.privacy.randomness import Randomness
from dpsql.query.dp_clause import resolve
from dpsql.query.parameters import Parameters, bound_query
from dpsql.routes.pipeline import engine_sql, k_to_choose, units_sql, values_sql, values_to_choose
from dpsql.routes.releases import composite_of
from dpsql.routes.route import Measured

__all__ = ["ADVERSARY", "BASE", "Neighbourhood", "Summary", "Verdict", "Violation", "World",
           "audit_queries", "check_queries", "check_query", "compare", "duckdb_neighbourhood",
           "format_verdicts", "postgres_neighbourhood", "scenario_world", "spark_neighbourhood",
           "split_statements", "synthesize"]

#: The one salt of the contribution-bounding sample, shared by D and D' (never used to answer).
SALT = 20251125
#: Relative slack of a sensitivity comparison: measurements are exact integers, or sums of
#: doubles where one unit's share is compared (never a tolerance on the bound itself).
_SLACK = 1e-9


@dataclass
class Violation:
    pair: str  # which neighbour pair, in words
    what: str  # "sensitivity", "key release" or "outcome"
    detail: str
    ratio: float  # moved / sensitivity (inf for an outcome or key-release violation)


@dataclass
class Verdict:
    sql: str
    status: str  # "passed", "violation", "refused", "public", "local"
    refusal: str | None = None  # the error class of a refusal
    violations: list[Violation] = field(default_factory=list)
    worst: float = 0.0  # the largest moved / sensitivity over every measurement and pair
    engine_errors: int = 0  # neighbours where the engine failed (on both sides alike)
    releases: int = 0  # plans checked (two for a series limit)

    def report(self) -> str:
        """A readable account of what broke, for a failing test or the CLI."""
        lines = [f"query: {self.sql}"]
        for v in self.violations:
            lines.append(f"  {v.pair}: {v.what}: {v.detail}")
        return "\n".join(lines)


Outcome = tuple[str, list[tuple[object, ...]]]  # ("answer", rows) or (error class, [])


def check_query(sql: str, hood: Neighbourhood, epsilon: float = 1.0, delta: float = 0.0,
                mechanism: str = "laplace", parameters: Parameters = None,
                bounds: ContributionBounds | None = None) -> Verdict:
    """The neighbour test of one query on every neighbour pair of ``hood`` (module docstring),
    prepared as :meth:`dpsql.Database.plan` prepares it for every front door (``parameters``
    bound as the DB-API and the server's extended protocol bind them; ``bounds`` and
    BigQuery's ``WITH DIFFERENTIAL_PRIVACY OPTIONS`` as :mod:`dpsql.query.dp_clause` reads
    them)."""
    try:
        if composite_of(sql, hood.planner.metadata) is not None:  # its parts, as Database's
            route = hood.planner.route_query(sql, epsilon, delta, mechanism, bounds=bounds)
        else:
            text, given, delta, bounds = resolve(sql, epsilon, delta, bounds)
            text, tree = bound_query(text, parameters)
            route = hood.planner.route_query(text, epsilon if given is None else given,
                                             delta, mechanism, tree=tree, bounds=bounds)
    except ProgrammingError as e:  # a refusal, or parameters that cannot be bound
        return Verdict(sql, "refused", refusal=type(e).__name__)
    # What the route measures (dpsql.routes.route.Route.measured): a private plan, a free
    # answer's plan (its keys must not move on any neighbour), two releases, a composite's
    # parts each as if sent alone (what combines them is post-processing of their releases).
    releases = route.measured
    if not releases and route.exact:  # public tables, the ledger's rows, an answer of no table
        return Verdict(sql, "public")
    if route.copy_table is not None:  # randomized rows: no exact measurement to compare;
        return Verdict(sql, "local")  # tests/neighbours/test_neighbours_local.py checks them
    verdict = Verdict(sql, "passed")
    try:
        for release in releases:
            _check_release(release, hood, verdict)
    except QueryRefused as e:  # the engine's dry run (check_engine_query): data-independent
        return Verdict(sql, "refused", refusal=type(e).__name__)
    if verdict.violations:
        verdict.status = "violation"
    return verdict


def check_retention(sql: str, hood: Neighbourhood, epsilon: float = 1.0, delta: float = 0.0,
                    bounds: ContributionBounds | None = None) -> Verdict:
    """The neighbour test of ``sql``'s retention estimate (:mod:`dpsql.execution.retention`): its
    two measurements, the units ``N`` and the sum of shares kept ``S``, each move by at most
    their sensitivity 1 on every neighbour pair, and the outcome class is the same. "public":
    a table that is never bounded (the estimate is exact from the metadata) or no plan."""
    try:
        text, given, delta, bounds = resolve(sql, epsilon, delta, bounds)
        route = hood.planner.route_query(text, epsilon if given is None else given, delta,
                                         bounds=bounds)
    except ProgrammingError as e:
        return Verdict(sql, "refused", refusal=type(e).__name__)
    try:
        plan = route.retained()  # the plan an estimate reads, or no estimate on this route
    except UnsupportedQuery:
        return Verdict(sql, "public")
    if not plan.table.needs_bounding:
        return Verdict(sql, "public")
    query = retention_sql(plan, hood.engine)
    outcomes = {name: _run(hood, name, query, False) for name in hood.world.neighbours()}
    verdict = Verdict(sql, "passed", releases=1)
    for a, b, what in hood.world.pairs():
        (sa, ra), (sb, rb) = outcomes[a], outcomes[b]
        if sa != sb:
            verdict.violations.append(Violation(what, "outcome", f"{sa} on one side, {sb} on "
                                                "the other", math.inf))
            continue
        verdict.engine_errors += sa != "answer"
        for i, name in enumerate(("N (units)", "S (sum of shares kept)") if ra and rb else ()):
            moved = abs(float(ra[0][i]) - float(rb[0][i]))  # type: ignore[arg-type]
            verdict.worst = max(verdict.worst, moved)
            if moved > 1 + _SLACK:
                verdict.violations.append(Violation(what, "sensitivity", f"{name} moved by "
                                                    f"{moved:g}, sensitivity 1", moved))
    if verdict.violations:
        verdict.status = "violation"
    return verdict


def _check_release(release: Measured, hood: Neighbourhood, verdict: Verdict) -> None:
    """Check one release; a release that follows it (two releases: the outer query) is
    planned for one fixed set of keys, the exact ones it gives on D, and checked on both sides
    as the second release is answered for whatever keys the first released."""
    outcomes = _check_plan(release.plan, hood, verdict, release.label)
    if release.then is None:
        return
    status, rows = outcomes[BASE]
    if status != "answer":
        return
    keys = sorted(_by_key(rows, len(release.plan.keys)), key=repr)
    _check_release(release.then(keys, hood.planner.metadata, hood.planner.public_store),
                   hood, verdict)


def _check_plan(p: Plan, hood: Neighbourhood, verdict: Verdict, label: str
                ) -> dict[str, Outcome]:
    if k_to_choose(p):
        return _check_auto(p, hood, verdict, label)
    if values_to_choose(p):
        return _check_values(p, hood, verdict, label)
    sql, salted = engine_sql(p, hood.engine)
    outcomes = {name: _perturbed(p, _run(hood, name, sql, salted))
                for name in hood.world.neighbours()}
    verdict.releases += 1
    verdict.engine_errors += sum(1 for s, _ in outcomes.values() if s != "answer")
    for a, b, what in hood.world.pairs():
        pair = label + what
        for v in compare(p, outcomes[a], outcomes[b]):
            v.pair = pair
            verdict.violations.append(v)
        verdict.worst = max(verdict.worst, *(_ratios(p, outcomes[a], outcomes[b]) or [0.0]))
    return outcomes


def _check_auto(p: Plan, hood: Neighbourhood, verdict: Verdict, label: str
                ) -> dict[str, Outcome]:
    """An automatic k (:mod:`dpsql.privacy.auto_bounds`): the choice's input, the number of
    units per number of rows, moves by at most one unit (L1 <= ``AUTO_SENSITIVITY``, which
    moves every rank by at most 1) on every pair; then the measurements are checked with the
    same k on both sides (the composition conditions on the released k), for k = 1, the cap
    and the k drawn on D. The choice's own randomness is audited (``auto_rows``,
    :mod:`dpsql.audit.scenarios`)."""
    auto = p.auto
    assert auto is not None
    counts = _one_unit_apart(units_sql(p, hood.engine), hood, verdict, label, "choosing k")
    ks = {1, auto.cap}
    if counts[BASE][0] == "answer":
        ks.add(auto_rows_per_unit(_units_by_count(counts[BASE][1]), auto.cap, auto.above,
                                  auto.epsilon, Randomness.seeded(0)))
    outcomes: dict[str, Outcome] = {}
    for k in sorted(ks):
        outcomes = _check_plan(with_rows(p, k), hood, verdict, f"{label}k = {k}: ")
    return outcomes


def _check_values(p: Plan, hood: Neighbourhood, verdict: Verdict, label: str
                  ) -> dict[str, Outcome]:
    """Automatic value bounds (:mod:`dpsql.privacy.auto_values`), as :func:`_check_auto`:
    each side's input, the units per bucket of their largest (smallest) value, moves by at
    most one unit on every pair; then the measurements with the same bounds on both sides, at
    the declared caps, at the lowest buckets' edges and at the bounds drawn on D."""
    inputs = [_one_unit_apart(values_sql(p, i, hood.engine), hood, verdict, label,
                              f"choosing {v.column}'s {v.side} bound")
              for i, v in enumerate(p.values)]
    caps = tuple(v.upper if v.side == "upper" else v.lower for v in p.values)
    lowest = tuple(placed(v, 0, p.table.columns[v.column].type == ColumnType.INT)
                   for v in p.values)  # as drawn: an int column's rounded outwards
    choices = {caps, lowest}
    if all(counts[BASE][0] == "answer" for counts in inputs):
        choices.add(tuple(
            draw(v, _units_by_count(counts[BASE][1]), p.table.columns[v.column].type ==
                 ColumnType.INT, Randomness.seeded(0)) for v, counts in zip(p.values, inputs,
                                                                            strict=True)))
    outcomes: dict[str, Outcome] = {}
    for bounds in sorted(choices):
        outcomes = _check_plan(with_values(p, bounds), hood, verdict,
                               f"{label}bounds {', '.join(f'{b:g}' for b in bounds)}: ")
    return outcomes


def _one_unit_apart(sql: str, hood: Neighbourhood, verdict: Verdict, label: str, what: str
                    ) -> dict[str, Outcome]:
    """Run a choice's input query (rows of (value, units)) on every neighbour: on every pair
    it moves by at most one unit (L1 <= ``AUTO_SENSITIVITY``)."""
    counts = {name: _run(hood, name, sql, False) for name in hood.world.neighbours()}
    verdict.releases += 1
    for a, b, pair in hood.world.pairs():
        (sa, ra), (sb, rb) = counts[a], counts[b]
        if sa != sb:
            verdict.violations.append(Violation(label + pair, "outcome", f"{what}: {sa} "
                                                f"on one side, {sb} on the other", math.inf))
            continue
        ha, hb = _units_by_count(ra), _units_by_count(rb)
        moved = sum(abs(ha.get(c, 0) - hb.get(c, 0)) for c in ha.keys() | hb.keys())
        verdict.worst = max(verdict.worst, moved / AUTO_SENSITIVITY)
        if moved > AUTO_SENSITIVITY:
            verdict.violations.append(Violation(
                label + pair, "sensitivity", f"the units per value ({what}) moved by "
                f"{moved} units, sensitivity {AUTO_SENSITIVITY:g}", moved / AUTO_SENSITIVITY))
    return counts


def _units_by_count(rows: Sequence[tuple[object, ...]]) -> dict[int, int]:
    return {int(c): int(n) for c, n in rows}  # type: ignore[call-overload]


def _run(hood: Neighbourhood, name: str, sql: str, salted: bool) -> Outcome:
    hood.use(name)
    try:
        return "answer", hood.engine.execute(sql, [SALT] if salted else [])[1]
    except Error as e:
        return type(e).__name__, []


def _perturbed(p: Plan, outcome: Outcome) -> Outcome:
    """``outcome``, or the error :func:`~dpsql.execution.perturb.perturb_cells` raises on its
    exact rows: the pass that reads them must not fail on some data only (an exact sum that
    is not an integer, a key the total order cannot sort), or the error is the release. One
    fixed noise stream for every neighbour: a failure here can only come from the rows."""
    if outcome[0] != "answer":
        return outcome
    try:
        perturb_cells(p, outcome[1], Randomness.seeded(0))
    except Exception as e:  # any failure is an outcome the analyst sees
        return f"perturb: {type(e).__name__}", []
    return outcome


def compare(p: Plan, a: Outcome, b: Outcome) -> list[Violation]:
    """The violations between the outcomes of ``p`` on two neighbours (``pair`` left blank)."""
    if a[0] != b[0]:
        return [Violation("", "outcome", f"{a[0]} on one side, {b[0]} on the other", math.inf)]
    if a[0] != "answer":
        return []
    nkeys = len(p.keys)
    ea, eb = _by_key(a[1], nkeys), _by_key(b[1], nkeys)
    out = _key_release(p, ea, eb)
    for m in p.measurements:
        moved, bound = _moved(p, m, ea, eb)
        if not moved <= bound * (1 + _SLACK) + _SLACK:
            norm = "L2" if m.mechanism == Mechanism.GAUSSIAN else "L1"
            out.append(Violation("", "sensitivity", f"{m.name} ({_describe(m)}) moved by "
                                 f"{moved:g} ({norm} over groups), sensitivity {bound:g}",
                                 moved / bound if bound else math.inf))
    return out


def _ratios(p: Plan, a: Outcome, b: Outcome) -> list[float]:
    if a[0] != "answer" or b[0] != "answer":
        return [math.inf] if a[0] != b[0] else []
    nkeys = len(p.keys)
    ea, eb = _by_key(a[1], nkeys), _by_key(b[1], nkeys)
    out = []
    for m in p.measurements:
        moved, bound = _moved(p, m, ea, eb)
        out.append(moved / bound if bound else (0.0 if moved == 0 else math.inf))
    return out


def _describe(m: Measurement) -> str:
    arg = m.arg.sql(dialect="duckdb") if m.arg is not None else "*"
    return f"{m.kind}({arg})"


Exact = Mapping[tuple[object, ...], Sequence[object]]


def _released(p: Plan, ea: Exact, eb: Exact) -> list[tuple[object, ...]]:
    """The keys whose values can be released: the domain, every engine key, or ()."""
    if p.domain is not None:
        return list(p.domain)
    if p.threshold is not None:
        return list(dict.fromkeys([*ea, *eb]))
    return [()]


def _moved(p: Plan, m: Measurement, ea: Exact, eb: Exact) -> tuple[float, float]:
    """How far measurement ``m`` moved over the releasable groups, and its sensitivity."""
    keys = _released(p, ea, eb)
    if m.kind == MeasurementKind.HISTOGRAM:
        total = 0.0
        for k in keys:
            ha, hb = _histogram(ea, k, m), _histogram(eb, k, m)
            total += sum(abs(ha.get(x, 0) - hb.get(x, 0)) for x in ha.keys() | hb.keys())
        return total * (m.step or 1.0), m.l1  # weighted counts: in units of m.step rows
    scale = m.step or 1.0
    diffs = [float(_value(ea, k, m) - _value(eb, k, m)) * scale for k in keys]
    if any(not math.isfinite(d) for d in diffs):
        return math.inf, m.l1
    if m.mechanism == Mechanism.GAUSSIAN:
        return math.sqrt(sum(d * d for d in diffs)), m.l2
    return float(sum(abs(d) for d in diffs)), m.l1


def _value(exact: Exact, key: tuple[object, ...], m: Measurement) -> int | float:
    """The exact value (a fixed-point sum in grid units: Python ints subtract exactly)."""
    row = exact.get(key)
    value = row[m.index] if row is not None else None
    if value is None:
        return 0
    return value if isinstance(value, int) else float(value)  # type: ignore[arg-type]


def _histogram(exact: Exact, key: tuple[object, ...], m: Measurement) -> dict[Any, int]:
    row = exact.get(key)
    value = row[m.index] if row is not None else None
    return {int(b): int(c) for b, c in zip(*histogram_arrays(value), strict=True)}


def _key_release(p: Plan, ea: Exact, eb: Exact) -> list[Violation]:
    """Under thresholding, keys on one side only exist because of the one unit (docstring)."""
    if p.threshold is None:
        return []
    units = p.threshold.measurement
    out = []
    for side, mine, other in (("D", ea, eb), ("D'", eb, ea)):
        alone = [k for k in mine if k not in other and _value(mine, k, units) > 0]
        crowded = [k for k in alone if _value(mine, k, units) > 1]
        if crowded or len(alone) > units.l1:
            out.append(Violation("", "key release", f"{len(alone)} key(s) only in {side} "
                                 f"(at most {units.l1:g} allowed), {len(crowded)} with more "
                                 f"than one unit, e.g. {(crowded or alone)[0]!r}", math.inf))
    return out


# ============================================================================ many queries


@dataclass
class Summary:
    verdicts: list[Verdict]
    seconds: float
    neighbours: int

    def count(self, status: str) -> int:
        return sum(1 for v in self.verdicts if v.status == status)

    @property
    def accepted(self) -> int:
        return self.count("passed") + self.count("violation")

    @property
    def violations(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == "violation"]

    def line(self) -> str:
        return (f"{len(self.verdicts)} queries: {self.accepted} accepted "
                f"({self.count('violation')} with violations), {self.count('refused')} "
                f"refused, {self.count('public')} public; {self.neighbours} neighbour pairs "
                f"each; {self.seconds:.1f} s")

    def report(self, limit: int = 5) -> str:
        shown = [v.report() for v in self.violations[:limit]]
        return "\n".join([self.line(), *shown])


Query = tuple[str, float, float, str]  # SQL, epsilon, delta, mechanism


def check_queries(queries: Iterable[Query | str], hood: Neighbourhood) -> Summary:
    """:func:`check_query` for each query (a bare SQL text runs at epsilon 1, delta 0)."""
    started = time.perf_counter()
    verdicts = []
    for q in queries:
        sql, epsilon, delta, mechanism = (q, 1.0, 0.0, "laplace") if isinstance(q, str) else q
        verdicts.append(check_query(sql, hood, epsilon, delta, mechanism))
    return Summary(verdicts, time.perf_counter() - started, len(hood.world.pairs()))


VERDICT_COLUMNS = ["query", "verdict", "worst moved / sensitivity"]


def verdict_rows(verdicts: Sequence[Verdict], width: int = 70) -> list[list[str]]:
    """One row per query for the table ``dpsql audit --neighbours`` prints."""
    rows = []
    for v in verdicts:
        text = " ".join(v.sql.split())
        text = text if len(text) <= width else text[:width - 3] + "..."
        what = v.status if v.status != "refused" else f"refused ({v.refusal})"
        ratio = "-" if v.status in ("refused", "public", "local") else f"{v.worst:.3g}"
        rows.append([text, what, ratio])
    return rows


def format_verdicts(verdicts: Sequence[Verdict]) -> str:
    """The verdicts as a Markdown table."""
    lines = [f"| {' | '.join(VERDICT_COLUMNS)} |", "|---|---|---|"]
    lines += [f"| {' | '.join(row)} |" for row in verdict_rows(verdicts)]
    return "\n".join(lines)


# ============================================================================ the owner's run

#: How the synthetic worlds store the owner's columns: as declared, and with int units (and
#: unit paths) as VARCHAR, the way a CSV file holds them.
STORAGES = {"typed": False, "text": True}


def audit_queries(metadata: Metadata, queries: Sequence[str], epsilon: float = 1.0,
                  delta: float = 0.0, mechanism: str = "laplace",
                  storages: Sequence[str] = tuple(STORAGES), seed: int = 0) -> list[Verdict]:
    """The neighbour test of the owner's ``queries`` on synthetic adversarial worlds built from
    ``metadata`` alone (never the owner's data), once per storage of :data:`STORAGES`; each
    query's verdict is its worst over them (a violation's pairs say which storage)."""
    worst: list[Verdict] = []
    for storage in storages:
        hood = duckdb_neighbourhood(synthesize(metadata, seed=seed,
                                               text_units=STORAGES[storage]))
        try:
            verdicts = [check_query(q, hood, epsilon, delta, mechanism) for q in queries]
        finally:
            hood.close()
        for v in verdicts:
            for violation in v.violations:
                violation.pair = f"{storage} storage, {violation.pair}"
        worst = verdicts if not worst else [_worse(a, b) for a, b in zip(worst, verdicts,
                                                                          strict=True)]
    return worst


def _worse(a: Verdict, b: Verdict) -> Verdict:
    if b.status == "violation" and a.status == "violation":
        a.violations += b.violations
        a.worst = max(a.worst, b.worst)
        return a
    if b.status == "violation" or (a.status == b.status and b.worst > a.worst):
        return b
    return a


def split_statements(text: str) -> list[str]:
    """The statements of a SQL file: split at semicolons outside quotes, ``--`` comment lines
    dropped, empty statements skipped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    out: list[str] = []
    current: list[str] = []
    quote = ""
    for ch in "\n".join(lines):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == ";":
            out.append("".join(current))
            current = []
            continue
        current.append(ch)
    out.append("".join(current))
    return [" ".join(s.split()) for s in out if s.strip()]
