"""The semantic oracle: every accepted query's noise-free answer, through the whole pipeline,
against the answer the query asks for -- proved by execution, beside the neighbour test
(:mod:`dpsql.audit.neighbours`), which proves how far an answer moves but not what it estimates.

1. **Noise-free.** :func:`zero_noise` is a :class:`~dpsql.privacy.randomness.Randomness`
   whose every 64-bit word is the same: every Exp(1) variable the samplers draw is the same,
   so a discrete Laplace ``G1 - G2`` is exactly 0, and so is the discrete Gaussian (its
   Laplace proposal 0, accepted at once: ``E ~ 36.7`` exceeds any acceptance threshold at 0).
   It is passed to :class:`dpsql.Database` like any Randomness: no switch an analyst can
   reach, the same pipeline (plan, rewrite, engine, perturb, post-processing) as every front
   door. The salt of contribution bounding is then fixed too; where no bound bites the bounds
   keep every row, so the answer is deterministic. The exponential mechanism (quantiles, MIN,
   MAX) is not noise-free with it: those columns form the "approximate" class, not compared.
2. **Worlds** (:mod:`dpsql.audit.oracle_worlds`): small databases full of NULLs, NaN, rows of
   no unit, empty groups and duplicates, where no bound bites, or where clamping, k or g do.
3. **The intended answer** (:mod:`dpsql.audit.oracle_reference`): the query run as plain SQL on
   DuckDB over the world's rows as the rules read them (clamped, NaN as NULL), split into its
   grouped part and its outer part with the rules of key release between them; where a
   contribution bound bites, the expected share of the bounded sample within the bounding's
   slack (:mod:`dpsql.audit.oracle_bounds`); BigQuery's clause read as the SQL it means
   (:mod:`dpsql.audit.oracle_clause`).
4. **Compare**: the same output columns, the same rows (as multisets; in order where ORDER
   BY asks, ties in either order; the top rows of a LIMIT up to ties), numbers equal to
   ``1e-6`` relative (noise-free sums are exact on their fixed-point grid).

A disagreement is either one of :data:`KNOWN` (a class of issue 35 being fixed elsewhere,
recognised by re-running the reference with the class's own rule: it must be the only
difference), or new: a test fails and prints the query, the world's seed and both answers.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp

from dpsql.audit.oracle_bounds import (
    BoundedReference,
    bounded_reference,
    bounds_of,
    reads_released_cells,
)
from dpsql.audit.oracle_clause import plain_form
from dpsql.audit.oracle_reference import (
    MOMENTS,
    NotModelled,
    Release,
    approximate_columns,
    having_is_approximate,
    moment_columns,
    order_is_approximate,
    per_person,
    read_value,
    reference_sql,
    sort_columns,
    undefined_moment,
)
from dpsql.audit.oracle_worlds import Worlds, to_duckdb
from dpsql.database import Database
from dpsql.errors import Error, ProgrammingError
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.plan import Plan
from dpsql.privacy.randomness import Randomness

#: The epsilon every query is answered with: noise-free answers do not depend on it, except
#: through tau (the smallest at the largest epsilon, so that small groups are released) and
#: the grid of real cells (the finest).
EPSILON = 100.0
#: Relative (and absolute) tolerance of a number: noise-free sums are exact fixed-point sums.
TOLERANCE = 1e-6
_WORD = (1 << 11).to_bytes(8, "little")  # the top 53 bits are 1: U = 2**-53, E ~ 36.7


def zero_noise() -> Randomness:
    """A Randomness whose noise is exactly zero (the module docstring says why): for the
    oracle's synthetic worlds only, never for a release."""
    return Randomness(lambda n: (_WORD * (n // 8 + 1))[:n])


Rows = list[tuple[object, ...]]


@dataclass
class OracleVerdict:
    sql: str
    status: str  # "agrees", "approximate", "refused", "public", "disagrees", "known", "skipped"
    dpsql_rows: Rows = field(default_factory=list)
    reference_rows: Rows = field(default_factory=list)
    known: str | None = None  # the class of KNOWN it falls in
    detail: str = ""
    reference: str = ""  # the reference query

    def report(self, seed: int | None = None) -> str:
        return (f"query: {self.sql}\n  world seed: {seed}\n  {self.detail}\n"
                f"  dpsql:     {self.dpsql_rows}\n  reference: {self.reference_rows}\n"
                f"  reference SQL: {self.reference}")


class Oracle:
    """A world served by dpsql (noise-free) on an engine, and its reference in DuckDB."""

    def __init__(self, worlds: Worlds, engine_url: str | None = None,
                 folder: Path | None = None) -> None:
        self.worlds = worlds
        world = worlds.world
        # Unmetered: a synthetic world is charged to no ledger (the corpus's metadata names
        # one, the sample data's).
        self.metadata: Metadata = dataclasses.replace(world.metadata, budget=None)
        self._folder = Path(folder or tempfile.mkdtemp(prefix="dpsql-oracle-"))
        if engine_url is None:
            path = self._folder / "world.duckdb"
            path.unlink(missing_ok=True)
            to_duckdb(world, path).close()
            engine_url = str(path)
        self.db = Database(engine_url, self.metadata, randomness=zero_noise())
        self.reference = _reference_connection(worlds, read_value)
        self._variants: dict[str, duckdb.DuckDBPyConnection] = {}

    def close(self) -> None:
        self.db.close()
        self.reference.close()
        for con in self._variants.values():
            con.close()

    def variant(self, name: str, reader: Callable[..., object]) -> duckdb.DuckDBPyConnection:
        """The reference world read by another rule (a known class's)."""
        if name not in self._variants:
            self._variants[name] = _reference_connection(self.worlds, reader)
        return self._variants[name]

    def check(self, sql: str, delta: float = 0.0, mechanism: str = "laplace") -> OracleVerdict:
        """The oracle's verdict on one query (module docstring)."""
        try:
            route = self.db.route(sql, EPSILON, delta, mechanism)
        except ProgrammingError as e:
            return OracleVerdict(sql, "refused", detail=type(e).__name__)
        if not route.as_written:  # local rows, the ledger's, releases combined: not modelled
            return OracleVerdict(sql, "skipped", detail=type(route.prepared).__name__)
        # The one plan that released the answer (a private plan, a free answer's), or None: an
        # exact read of public tables (dpsql.routes.route.Route.as_written).
        plan = route.measured[0].plan if route.measured else None
        try:
            result = self.db.query(sql, EPSILON, delta, mechanism)
        except Error as e:
            return OracleVerdict(sql, "disagrees", detail=f"dpsql failed: {type(e).__name__}: "
                                 f"{e}")
        got = [tuple(r) for r in result.rows]
        release = _release(plan)
        asked = sql
        try:
            sql = plain_form(sql)  # BigQuery's clause as the SQL it means (oracle_clause)
            ref_sql = sql if release is None else reference_sql(sql, self.metadata, release)
            slack = self._bounded(sql, plan, release)  # a bound bites
            if slack is not None:
                bounded = slack
                ref_sql, width = bounded.sql, bounded.columns
                rows = [tuple(r) for r in self.reference.execute(ref_sql).fetchall()]
                expected, slacks = [r[:width] for r in rows], [r[width:] for r in rows]
                if any(float(s or 0) > 0 for r in slacks for s in r) and \
                        reads_released_cells(sql, release):  # type: ignore[arg-type]
                    raise NotModelled("the groups cap bites under HAVING, ORDER BY, LIMIT or "
                                      "thresholds")
                problem = compare(sql, got, expected, None, slacks)
                if problem is None and not per_person(sql):  # (their groups cap: not read)
                    problem = self._totals(got, bounded)
            else:
                expected = [tuple(r) for r in self.reference.execute(ref_sql).fetchall()]
                problem = compare(sql, got, expected, self._pool(ref_sql))
        except (duckdb.Error, NotModelled) as e:
            return OracleVerdict(asked, "skipped", got, detail=f"reference failed: {e}")
        verdict = OracleVerdict(asked, "agrees", got, expected, reference=ref_sql)
        if problem is None:
            if any(approximate_columns(sql)) or having_is_approximate(sql):
                verdict.status = "approximate"
            return verdict
        verdict.status, verdict.detail = "disagrees", problem
        applicable = [n for n, rule in KNOWN_RULES.items() if rule.applies(sql)]
        tries = [[n] for n in applicable] + ([applicable] if len(applicable) > 1 else [])
        for names in tries:
            if self._explained(names, sql, got, ref_sql):
                verdict.status, verdict.known = "known", "+".join(names)
                break
        return verdict

    def _bounded(self, sql: str, plan: Plan | None, release: Release | None
                 ) -> BoundedReference | None:
        """Where a contribution bound bites (:mod:`dpsql.audit.oracle_bounds`), its
        reference; None where none bites."""
        if release is None or plan is None:
            return None
        bounds = bounds_of(plan)
        if bounds is None:
            return None
        bounded = bounded_reference(sql, self.metadata, release, bounds)
        bites, prebound = self.reference.execute(bounded.bites).fetchone()  # type: ignore[misc]
        if prebound:
            raise NotModelled("a table joined to another is bounded before the join")
        if not bites and not per_person(sql):
            return None  # nothing bites: the plain reference (per-person ones never are)
        if bites and reads_released_cells(sql, release):
            raise NotModelled("a bound bites under HAVING, ORDER BY, LIMIT or thresholds")
        if bounds.auto:
            raise NotModelled("a bound chosen from the data bites")
        if bounded.sql.startswith("-- not modelled"):
            raise NotModelled(bounded.sql[3:])
        return bounded

    def _totals(self, got: Rows, bounded: BoundedReference) -> str | None:
        """What differs in the column totals the bounding keeps exact (oracle_bounds,
        ``column_totals``), None if nothing."""
        if bounded.totals is None:
            return None
        row = self.reference.execute(bounded.totals).fetchone() or ()
        for n, (i, rounding) in enumerate(bounded.checked):
            expected, groups_cap_bites = row[2 * n], row[2 * n + 1]
            if groups_cap_bites:
                continue
            total = sum(float(r[i] or 0) for r in got)
            if abs(total - float(expected or 0)) > rounding * len(got) + TOLERANCE:
                return f"column {i + 1} totals {total}, the bounding keeps {expected}"
        return None

    def _pool(self, ref_sql: str) -> Rows | None:
        """The reference's rows without LIMIT and OFFSET (None if it has neither)."""
        tree = sqlglot.parse_one(ref_sql, read="duckdb")
        if tree.args.get("limit") is None and tree.args.get("offset") is None:
            return None
        tree.set("limit", None)
        tree.set("offset", None)
        return [tuple(r) for r in self.reference.execute(tree.sql("duckdb")).fetchall()]

    def _explained(self, names: list[str], sql: str, got: Rows, ref_sql: str) -> bool:
        """Whether the reference read by the known classes ``names`` gives ``got``."""
        readers = [KNOWN_RULES[n].reader for n in names if KNOWN_RULES[n].reader]
        con = self.variant(readers[0].__name__, readers[0]) if readers else self.reference
        variant = ref_sql
        for n in names:
            variant = KNOWN_RULES[n].rewrite(variant, self.metadata)
        try:
            alternative = [tuple(r) for r in con.execute(variant).fetchall()]
        except duckdb.Error:
            return False
        return compare(sql, got, alternative) is None


def _release(plan: Plan | None) -> Release | None:
    """The plan's rule of key release (None: an exact public read, plain SQL)."""
    if plan is None:
        return None
    return Release(plan.domain, plan.threshold.tau if plan.threshold else None,
                   plan.table.needs_bounding)


def _reference_connection(worlds: Worlds, reader: Callable[..., object]
                          ) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB holding the world's rows as ``reader`` reads them."""
    world = worlds.world
    read = {}
    for name, t in world.tables.items():
        declared = world.metadata.tables[name].columns
        bounds = [(_number(declared[c].lower), _number(declared[c].upper)) for c in t.columns]
        read[name] = [(owner, tuple(reader(v, lo, hi) for v, (lo, hi) in
                                    zip(row, bounds, strict=True))) for owner, row in t.rows]
    copies = {n: type(t)(t.name, t.columns, t.types, read[n]) for n, t in world.tables.items()}
    return to_duckdb(type(world)(world.metadata, copies, [], world.public, []), ":memory:")


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


# ------------------------------------------------------------------------------ comparing


def _same(a: object, b: object, slack: float = 0.0) -> bool:
    # the reference's DECIMAL sums come back as Decimal: compared as numbers, within the slack
    if isinstance(a, float | int | decimal.Decimal) and \
            isinstance(b, float | int | decimal.Decimal) and not isinstance(a, bool):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return math.isclose(fa, fb, rel_tol=TOLERANCE, abs_tol=TOLERANCE + slack)
    if hasattr(a, "isoformat") and hasattr(b, "isoformat"):
        return str(a)[:10] == str(b)[:10] if len(str(a)) == 10 or len(str(b)) == 10 else a == b
    return a == b


def _row_same(a: Sequence[object], b: Sequence[object], exact: Sequence[bool],
              moments: Sequence[bool], slack: Sequence[object] | None = None) -> bool:
    """Rows equal in every exact column (numbers within the reference's ``slack``, where a
    bound bites); a moment's NULL reference matches any number."""
    tolerances = [abs(float(s or 0)) for s in slack] if slack else [0.0] * len(b)
    return len(a) == len(b) and all(
        not x or _same(p, q, t) or (m and undefined_moment(q))
        for p, q, x, m, t in zip(a, b, exact, moments, tolerances, strict=True))


def _matching(got: Sequence[Sequence[object]], expected: Sequence[Sequence[object]],
              exact: Sequence[bool], moments: Sequence[bool],
              slacks: Sequence[Sequence[object]] | None = None) -> bool:
    """The same rows as multisets (numbers within the tolerance)."""
    if len(got) != len(expected):
        return False
    left = list(zip(expected, slacks or [None] * len(expected), strict=True))
    for row in got:
        for i, (other, slack) in enumerate(left):
            if _row_same(row, other, exact, moments, slack):
                del left[i]
                break
        else:
            return False
    return True


def _within(got: Rows, pool: Rows, exact: Sequence[bool], moments: Sequence[bool]) -> bool:
    """Whether every row of ``got`` is a distinct row of ``pool``."""
    left = list(pool)
    for row in got:
        i = next((i for i, other in enumerate(left) if _row_same(row, other, exact, moments)),
                 None)
        if i is None:
            return False
        del left[i]
    return True


def compare(sql: str, got: Rows, expected: Rows, pool: Rows | None = None,
            slacks: Sequence[Sequence[object]] | None = None) -> str | None:
    """None if ``got`` answers ``sql`` as ``expected`` does, else what differs. Under ORDER
    BY the rows' sort keys (the output columns it names) must come in the reference's
    sequence, rows tied on them in any order; under LIMIT too, the rows with a key of their
    own the same. ``pool``: the reference's rows without LIMIT, of which the rows under a
    LIMIT that sorts by anything else (ties unknown) must be some."""
    exact = [not a for a in approximate_columns(sql)]
    moments = moment_columns(sql)
    if got and expected and len(got[0]) != len(expected[0]):
        return f"{len(got[0])} columns, the reference has {len(expected[0])}"
    if having_is_approximate(sql):
        return None  # which groups pass is the exponential mechanism's draw (not compared)
    if len(got) != len(expected):
        return f"{len(got)} rows, the reference has {len(expected)}"
    keys = None if order_is_approximate(sql) else sort_columns(sql)
    limited = " LIMIT " in sql.upper() or " OFFSET " in sql.upper()
    if slacks is not None:  # a bound bites: unordered, unlimited (oracle_bounds)
        return None if _matching(got, expected, exact, moments, slacks) else \
            "rows differ beyond the bounding's slack"
    if not limited and not _matching(got, expected, exact, moments):
        return "rows differ"
    if keys is None:
        if not limited or _matching(got, expected, exact, moments):
            return None
        if pool is not None and _within(got, pool, exact, moments):
            return None
        return "other rows under LIMIT"
    ranks = [[row[i] for i in keys] for row in expected]
    flags = [True] * len(keys)
    none = [False] * len(keys)
    for row, rank in zip(got, ranks, strict=True):
        if not _row_same([row[i] for i in keys], rank, flags, none):
            return "rows in another order than ORDER BY's"
    for row, other, rank in zip(got, expected, ranks, strict=True):
        if sum(1 for r in ranks if _row_same(r, rank, flags, none)) == 1 and \
                not _row_same(row, other, exact, moments):
            return "other rows under ORDER BY"
    return None


# --------------------------------------------------------------- known disagreements


#: Known disagreements with SQL (issue 35, What to build 5), each being fixed on its own
#: branch: class -> why. The tests require every listed class to occur (so the list cannot
#: rot: a fixed class must be removed) and every disagreement to be one of them.
KNOWN: dict[str, str] = {
    "empty_moment_read": "AVG (VAR, STDDEV) over no values is released as a number (the "
                         "midpoint of its bounds; 0) where SQL says NULL, and HAVING reads that "
                         "number: a public domain's empty group passes `HAVING AVG(x) > 2`, "
                         "which SQL's NULL fails",
}


def _reads_moment(sql: str) -> bool:
    upper = sql.upper()
    return (" HAVING " in upper or " ORDER BY " in upper) and any(
        m in upper for m in ("AVG(", "STDDEV", "VAR"))


def _moments_pass(ref_sql: str, metadata: Metadata) -> str:
    """Class ``empty_moment_read``'s reading: a HAVING condition on a moment that SQL leaves
    NULL (no values) passes, as the number dpsql releases there (its bounds' midpoint) does
    in the generated conditions."""
    tree = sqlglot.parse_one(ref_sql, read="duckdb")
    grouped = next((s for s in tree.find_all(exp.Subquery) if s.alias == "__g"), None)
    where = tree.args.get("where")
    if grouped is None or where is None or not isinstance(grouped.this, exp.Select):
        return ref_sql
    moments = {e.alias for e in grouped.this.expressions
               if any(True for _ in e.find_all(*MOMENTS))}
    conditions = []
    for c in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        used = [col for col in c.find_all(exp.Column) if col.name in moments]
        if used:
            c = exp.or_(c, *(exp.Is(this=col.copy(), expression=exp.Null()) for col in used))
        conditions.append(c)
    tree.set("where", exp.Where(this=exp.and_(*conditions)))
    return tree.sql("duckdb")


@dataclass(frozen=True)
class KnownRule:
    """How a known class reads the world: when it may apply, the reading of stored values
    (None: the reference's), and the reference query's rewrite."""

    applies: Callable[[str], bool]
    reader: Callable[..., object] | None
    rewrite: Callable[[str, Metadata], str]


KNOWN_RULES: dict[str, KnownRule] = {
    "empty_moment_read": KnownRule(_reads_moment, None, _moments_pass),
}


# ------------------------------------------------------------------------------ summaries


@dataclass
class OracleSummary:
    verdicts: list[OracleVerdict]
    seconds: float

    def count(self, status: str) -> int:
        return sum(1 for v in self.verdicts if v.status == status)

    @property
    def disagreements(self) -> list[OracleVerdict]:
        return [v for v in self.verdicts if v.status == "disagrees"]

    def known(self) -> Counter[str]:
        return Counter(v.known for v in self.verdicts if v.known)

    def line(self) -> str:
        statuses = Counter(v.status for v in self.verdicts)
        parts = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
        known = ", ".join(f"{k} {n}" for k, n in sorted(self.known().items()))
        return (f"{len(self.verdicts)} queries in {self.seconds:.1f} s: {parts}"
                + (f" (known: {known})" if known else ""))


def check_all(oracle: Oracle, queries: Iterable[tuple[str, float, float, str]]
              ) -> OracleSummary:
    """The oracle's verdicts on ``queries`` ((SQL, epsilon, delta, mechanism); the epsilon is
    :data:`EPSILON` whatever is given)."""
    started = time.monotonic()
    verdicts = [oracle.check(sql, delta, mechanism) for sql, _, delta, mechanism in queries]
    return OracleSummary(verdicts, time.monotonic() - started)


def accepted_forms(queries: Iterable[tuple[str, float, float, str]]) -> list[Any]:
    """The generator's queries, BigQuery's clause included (:mod:`dpsql.audit.oracle_clause`
    reads it)."""
    return list(queries)
