"""A charged, noisy estimate of what contribution bounding keeps of one query's rows.

The bias notes (:mod:`dpsql.explanation.bias`) say *that* a unit's rows beyond k and groups beyond g
are left out; the owner sees exactly how many (``dpsql metadata check``). An analyst may also ask,
for one query and for a stated epsilon charged to their budget like any query's, how much of the
rows that query reads its bounds keep. Asked with ``--retention EPSILON`` (CLI),
``retention=EPSILON`` (DB-API, :meth:`dpsql.Database.run`) or ``SET dpsql.retention = EPSILON``
(server).

**What is measured.** Over the rows the query reads (its WHERE applied, on its joined rows
with joins, rows of no identifiable unit left out: :func:`dpsql.execution.rewrite.query_rows`),
each unit ``u`` has ``n_u`` rows in ``d_u`` groups of the query's keys (``d_u = 1`` without
GROUP BY). Bounding keeps, in expectation over its random sample, about ``min(k, n_u *
min(1, g'/d_u))`` of them (g' of its d_u groups when the plan caps groups,
:attr:`dpsql.privacy.plan.Plan.group_cap`; all its groups otherwise; then k rows), the figure
of ``dpsql metadata check`` and an upper bound of the expectation. Its share kept is
``f_u = min(1, k / n_u, g' / d_u)``, in ``[0, 1]``. Two measurements:

* ``N``: the number of units with a row the query reads;
* ``S = sum_u f_u``.

**Sensitivity.** ``f_u`` is a function of unit ``u``'s own rows alone: a row's presence is
decided by the WHERE on that row (and, with joins, by join partners of the same unit, as for
every query: :mod:`dpsql.query.joins`), and ``n_u``, ``d_u`` are counts over ``u``'s rows. So
adding or removing one unit adds or removes exactly one term: ``N`` moves by 1 and ``S`` by
``f_u <= 1``. Each is released with discrete Laplace noise at ``epsilon / 2`` for L1
sensitivity 1 (``S`` on a power-of-two grid, :func:`dpsql.privacy.mechanisms.calibrate_laplace`),
``epsilon`` in all by sequential composition. The neighbour harness checks both bounds on
adversarial neighbours (tests/neighbours/test_neighbours.py).

**What is reported.** ``S~ / N~``, the mean share of a unit's rows kept, with an interval of
at least 95%: each measurement's 97.5% noise interval (union bound), the ratio's extremes over
them, clipped to ``[0, 1]``. It is a mean over units, not over rows: the row-weighted share
``sum_u kept_u / sum_u n_u`` has a denominator one unit can move without bound (its rows
before bounding are not bounded), so it has no finite sensitivity. Everything after the noise
is post-processing.

A table that is never bounded (one row per unit, or no unit) keeps every row: that follows
from the metadata alone, is reported exactly and charges nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from dpsql.engines import Engine
from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.execution.rewrite import query_rows
from dpsql.privacy.mechanisms import accuracy, calibrate_laplace, perturb
from dpsql.privacy.plan import Plan
from dpsql.privacy.randomness import Randomness
from dpsql.query.dry_runs import empty_tables
from dpsql.query.joins import physical


@dataclass(frozen=True)
class Retention:
    """A noisy estimate of the mean share of a unit's rows a query's bounds keep."""

    epsilon: float  # what it cost (0: exact, from the metadata)
    units: float  # N~, the noisy number of units with a row the query reads
    shares: float  # S~, the noisy sum of their shares kept
    kept: float  # S~ / N~ clipped to [0, 1]
    low: float  # an interval of at least 95% around it
    high: float

    def note(self) -> str:
        if self.epsilon == 0:
            return ("Retention: this table is not bounded (one row per unit, or no unit): "
                    "every row the query reads is kept.")
        if self.high - self.low >= 1:
            return (f"Retention (estimated at epsilon {self.epsilon:g}, charged): too few "
                    f"units (about {self.units:.0f}) for this epsilon to say what share of "
                    "their rows the bounds keep; a larger epsilon narrows it.")
        return (f"Retention (estimated at epsilon {self.epsilon:g}, charged): the bounds keep "
                f"about {self.kept:.1%} of a unit's rows on average (95% interval "
                f"{self.low:.1%} to {self.high:.1%}, over about {self.units:.0f} units; a mean "
                "over units, not weighted by their rows).")

    def as_json(self) -> dict[str, float]:
        return {"epsilon": self.epsilon, "units": self.units, "shares": self.shares,
                "kept": self.kept, "low": self.low, "high": self.high}


#: The estimate of a table that is never bounded: exact, free.
WHOLE = Retention(0.0, math.nan, math.nan, 1.0, 1.0, 1.0)


def retention_query(p: Plan, schema: Mapping[str, str] | None = None) -> exp.Select:
    """The engine query of ``N`` and ``S`` (module docstring), in one row: ``__per`` holds one
    row per unit, its ``__n`` rows (in ``__d`` groups with keys)."""
    keys = [exp.column(k.name) for k in p.keys]
    per_unit = exp.select(exp.column("__unit"), exp.Count(this=exp.Star()).as_("__n"),
                          copy=False).from_("__rows", copy=False).group_by("__unit", copy=False)
    if keys:  # one row per (unit, group) first: d_u is the number of its groups
        pairs = exp.select(exp.column("__unit"), exp.Count(this=exp.Star()).as_("__n"),
                           copy=False).from_("__rows", copy=False).group_by(
            "__unit", *keys, copy=False)
        per_unit = exp.select(
            exp.column("__unit"), exp.Sum(this=exp.column("__n")).as_("__n"),
            exp.Count(this=exp.Star()).as_("__d"), copy=False).from_(
            pairs.subquery("__pairs"), copy=False).group_by("__unit", copy=False)
    total = exp.Coalesce(this=exp.Sum(this=share(p)), expressions=[exp.Literal.number(0)])
    query = exp.select(exp.Count(this=exp.Star()).as_("__units"), total.as_("__kept"),
                       copy=False).from_(per_unit.subquery("__per"), copy=False)
    return query.with_("__rows", as_=query_rows(p, schema), copy=False)


def share(p: Plan) -> exp.Expression:
    """``f_u = min(1, k / n_u, g' / d_u)`` over ``__per``'s columns (a seam for the neighbour
    harness's mutant, which releases the rows kept instead: sensitivity k, not 1)."""
    shares: list[exp.Expression] = [
        exp.Literal.number(1),
        exp.Div(this=exp.cast(exp.Literal.number(p.table.max_rows_per_unit), "DOUBLE"),
                expression=exp.column("__n"))]
    cap = p.group_cap
    if p.keys and cap is not None:
        shares.append(exp.Div(this=exp.cast(exp.Literal.number(cap), "DOUBLE"),
                              expression=exp.column("__d")))
    return exp.Least(this=shares[0], expressions=shares[1:])


def retention_sql(p: Plan, engine: Engine) -> str:
    """The retention query in ``engine``'s SQL (it takes no salt: it samples nothing)."""
    relation = p.query.relation  # the physical types, as the query's own rewrite reads them
    schema = physical(relation, engine.schema) if relation is not None else \
        engine.schema.get(p.table.name.lower(), {})
    tree = retention_query(p, schema)
    empties = empty_tables(relation, p.table, schema)
    return engine.compile(tree, False, empties) if engine.name != "duckdb" else \
        tree.sql(dialect=DuckDBDialect)


def measure(p: Plan, engine: Engine) -> tuple[int, float]:
    """The exact ``(N, S)`` of ``p`` on ``engine``'s data (never released as is)."""
    _, rows = engine.execute(retention_sql(p, engine))
    units, kept = rows[0]
    return int(str(units)), float(str(kept))  # BIGINT and DOUBLE (or Decimal) by the engine


def estimate(p: Plan, engine: Engine, epsilon: float, rng: Randomness) -> Retention:
    """The noisy estimate at ``epsilon`` (module docstring); ``WHOLE`` for an unbounded table."""
    if not p.table.needs_bounding:
        return WHOLE
    units, kept = measure(p, engine)
    return noisy(units, kept, epsilon, rng)


def noisy(units: int, kept: float, epsilon: float, rng: Randomness) -> Retention:
    """The release of the exact ``(N, S)`` at ``epsilon`` (module docstring). The engine query
    samples nothing, so this is the whole of the randomness (the audit draws it so)."""
    count_spec = calibrate_laplace(1.0, epsilon / 2, integer=True)
    share_spec = calibrate_laplace(1.0, epsilon / 2, integer=False)
    n = float(perturb([units], count_spec, rng)[0])
    s = float(perturb([kept], share_spec, rng)[0])
    a_n, a_s = accuracy(count_spec, 0.975), accuracy(share_spec, 0.975)
    point = _clip(s / n) if n > 0 else 1.0
    if n - a_n <= 0:
        return Retention(epsilon, n, s, point, 0.0, 1.0)
    low = _clip((s - a_s) / (n + a_n))
    high = _clip((s + a_s) / (n - a_n))
    return Retention(epsilon, n, s, point, low, high)


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))
