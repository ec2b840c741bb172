"""Rows under local differential privacy: each released row randomized on its own.

The owner opts a table in with a ``local`` section (:mod:`dpsql.metadata.local_release`); a
row-level SELECT of it (:mod:`dpsql.execution.local_rows`) and ``dpsql release --local`` then
release rows randomized here. This module is the privacy argument of the local model.

**One row, one column.** Column c gets ``eps_c = epsilon * w_c / sum(w)`` of the row's epsilon
(``w`` the declared weights, 1 by default: an equal split), and is released by one of:

* *k-ary randomized response* (``rr``, and ``buckets`` and ``grain`` after mapping the value to
  its bucket or period): over a public domain of ``d`` values, the true value with probability
  ``p = e^eps_c / (e^eps_c + d - 1)``, each other value with ``q = 1 / (e^eps_c + d - 1)``.
  For any outputs, ``P(y | x) / P(y | x') <= p / q = e^eps_c``. A bool is Warner's coin
  (``d = 2``). A true value outside the declared domain (bad data) is released uniformly,
  ``1/d``, which lies in ``[q, p]``, so it too is within ``e^eps_c`` of every other input;
* *clamped discrete Laplace* (``laplace``): the value clamped to ``[lower, upper]`` and put on a
  grid (step 1 for an int, the declared ``step`` for a float: ``G = ceil((upper - lower) /
  step)`` steps), plus discrete Laplace noise of scale ``s = G / eps_c``, ``P(Z = z) ∝
  exp(-|z| / s)`` (:func:`dpsql.privacy.samplers.discrete_laplace`). Two inputs are at most
  ``G`` steps apart, so ``P(y | x) / P(y | x') = exp((|y - x'| - |y - x|) / s) <=
  exp(G / s) = e^eps_c``. A NULL or NaN (bad data: the column is declared not nullable) is
  read as ``lower``;
* *withheld*: every other column (the unit, unique identifiers, text without a domain) is NULL
  in every released row, whatever the data: it costs nothing and reveals nothing.

**One row.** The columns are randomized independently, so a row's output probability is the
product of its columns' and the ratio on two different true rows is at most
``prod e^eps_c = e^epsilon`` (basic composition): each released row is ``epsilon``-LDP.

**A query** (:func:`query_epsilon`). With ``row_count = "public"`` the owner declares the
number of rows public; a release randomizes every row (after keeping at most k rows per unit,
as everywhere), each independently, so replacing one unit's at most k rows moves the output by
at most ``e^(k * epsilon)``: the charge is ``k * epsilon``. Otherwise a query draws m rows
uniformly with replacement from the (bounded) table and randomizes each: one draw's output is
the mixture ``(1/N) sum_i M(x_i)`` and, as ``M(x_j)(y) <= e^epsilon M(x_i)(y)`` for all i, j,
adding or removing one unit's k rows moves it by at most ``((N - k) + k e^epsilon) / N <=
e^epsilon`` either way; an empty table draws from a *phantom row* (every column at its first
domain value or its lower bound), itself within ``e^epsilon`` of any row. So each draw is
``epsilon``-DP and m draws cost ``m * epsilon``, the row count staying hidden (m is fixed).

**Computed in the engine** (:func:`dpsql.execution.local_rows.selection`), with the
distributions above exactly (up to the hash being a random function of the secret salt, as
for the central path's bounding). Each unit's rows are ranked by a hash keyed by a salt from the
CSPRNG and the first k kept: a uniformly random k of them. Every kept row then has a key of its
own (its unit and rank) and its salted hash ``u``: ordering by ``u`` is a uniform random order,
``u / 2^64 < p`` an independent coin of probability p per row, and the first n rows in that
order a uniform sample of n rows without replacement. The m draws with replacement are made
from the first ``min(m, N)`` rows of that order and N, the number of bounded rows
(:func:`dpsql.execution.local_rows._draws`): m exact uniform indices in [0, N) from the CSPRNG,
each renamed by the order of its first appearance. Which draws coincide then has its law for
N and m, and the distinct rows drawn, in the order they first appear, are a uniform ordered
sample without replacement, as for m i.i.d. uniform draws: the same distribution, so the same
argument and the same charge. The engine evaluates exactly this selection without sorting
any unit's rows (the positions, unit and rank, are drawn from the per-unit counts first, and
only the units drawn are ranked): the same rows, in the same order, for the same salt.

**From kept counts** (:func:`dpsql.execution.local_rows.kept_counts`, where the engine's table
cannot change: :meth:`dpsql.engines.Engine.fixed`). The positions (unit, rank r), r in ``1 ..
min(rows, k)``, depend on each unit's row count only, never on the salt: they are counted
once, N of them in all. A read draws m exact uniform indices in [0, N) from the CSPRNG, each
mapped to its position by the cumulative counts: m independent uniform positions. The engine
then orders each drawn unit's rows by a hash keyed by a fresh salt, and position (unit, r) is
the unit's row of rank r: the ranking is a uniformly random order of the unit's rows, the
first ``min(rows, k)`` of it a uniformly random k of them, shared by the read's draws. So the
read is m draws with replacement, uniform and independent, from a table bounded as above:
the law of the selection's m draws (its top-m order and the first-appearance renaming give
exactly this law, above), hence the same argument and the same charge. Which units a read
draws, and so what the engine is asked for, depends on the CSPRNG and the counts only.
Nor does the charge of m draws rest on their law being uniform: whichever m rows are chosen,
and however, the output is a mixture of products of m row randomizations, any two of which are
within ``e^(m epsilon)`` of each other, so any two such mixtures are too (a biased order hash,
:func:`dpsql.execution.local_rows._hash`, cost the sample its uniformity, never privacy).

**Once per analyst.** Where the ledger stores answers, the rows released to an analyst are kept
as their copy of the table and every later row-level query of it reads that copy
(:func:`dpsql.routes.local.answer_from_stored_copy`): post-processing, free. The copy is charged as
above when first released, and a sampled table's copy grows only by new draws, each charged.

Randomness is the project's (:class:`~dpsql.privacy.randomness.Randomness`: the OS CSPRNG;
seeded only in tests). The keep-or-flip coin compares a 53-bit uniform to ``p``; the other
values are drawn exactly (rejection on 64-bit words).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsql.errors import MetadataError
from dpsql.metadata.local_release import ColumnRelease, LocalSpec
from dpsql.metadata.metadata import MAX_DOMAIN_SIZE, Column, ColumnType, Table
from dpsql.privacy.randomness import Randomness
from dpsql.privacy.samplers import MAX_GRID_SCALE, discrete_laplace, uniform

PARAMS_FORMAT = 1


@dataclass(frozen=True)
class ColumnMechanism:
    """One released column: randomized response over ``domain`` (released values), or, with
    ``grid`` = (lower, step, G), clamped discrete Laplace on that grid."""

    name: str
    kind: str
    epsilon: float
    domain: tuple[Any, ...] = ()
    grid: tuple[float, float, int] | None = None
    integer: bool = False  # the released values are whole numbers (an int column)
    encode: Any = None  # true values -> their domain indices, -1 outside (randomized response)

    @property
    def size(self) -> int:
        """d, the number of values randomized response chooses among."""
        return len(self.domain)

    @property
    def keep(self) -> float:
        """p: randomized response keeps the true value with this probability."""
        return rr_probabilities(self.epsilon, self.size)[0]

    @property
    def scale(self) -> float:
        """s = G / eps_c, the discrete Laplace's scale in grid steps."""
        assert self.grid is not None
        return self.grid[2] / self.epsilon

    def randomize(self, values: Sequence[Any], rng: Randomness) -> npt.NDArray[np.object_]:
        """Each value released independently (module docstring)."""
        if self.grid is not None:
            noisy = self.true_index(values) + discrete_laplace(self.scale, len(values), rng)
            return self._grid_values(noisy)
        domain = np.empty(self.size, dtype=object)
        domain[:] = list(self.domain)
        return domain[randomized_response(self.true_index(values), self.size, self.epsilon, rng)]

    def true_index(self, values: Sequence[Any]) -> npt.NDArray[np.int64]:
        """The grid index of each value (laplace), or its domain index, -1 outside the domain
        (randomized response then releases it uniformly)."""
        if self.grid is None:
            return np.asarray(self.encode(values), dtype=np.int64)
        lower, step, steps = self.grid
        raw = np.array([lower if _missing(v) else float(v) for v in values], dtype=np.float64)
        return np.clip(np.rint((raw - lower) / step), 0, steps).astype(np.int64)

    def _grid_values(self, index: npt.NDArray[np.int64]) -> npt.NDArray[np.object_]:
        assert self.grid is not None
        lower, step = self.grid[0], self.grid[1]
        out = np.empty(len(index), dtype=object)
        out[:] = [int(lower) + int(i) for i in index] if self.integer else \
            [lower + float(i) * step for i in index]
        return out

    def probability(self, true: Any, released: Any) -> float:
        """P(released | true), exactly as :meth:`randomize` draws it (the audit's ratio)."""
        if self.grid is None:
            t = int(self.true_index([true])[0])
            out = self.domain.index(released)
            p, q = rr_probabilities(self.epsilon, self.size)
            return 1.0 / self.size if t < 0 else (p if out == t else q)
        lower, step = self.grid[0], self.grid[1]
        z = round((float(released) - lower) / step) - int(self.true_index([true])[0])
        a = math.exp(-1.0 / self.scale)
        return (1.0 - a) / (1.0 + a) * a ** abs(z)

    def params(self) -> dict[str, Any]:
        """What an analyst needs to debias (:mod:`dpsql.privacy.local_estimates`), as JSON."""
        out: dict[str, Any] = {"release": self.kind, "epsilon": self.epsilon}
        if self.grid is None:
            p, q = rr_probabilities(self.epsilon, self.size)
            out.update(domain=[_json(v) for v in self.domain], p=p, q=q)
        else:
            a = math.exp(-1.0 / self.scale)
            lower, step, steps = self.grid
            out.update(lower=lower, step=step, steps=steps, scale=self.scale,
                       noise_variance=2 * a / (1 - a) ** 2 * step ** 2)
        return out


def rr_probabilities(epsilon: float, d: int) -> tuple[float, float]:
    """(p, q) of d-ary randomized response: ``p = e^eps/(e^eps + d - 1)``, ``q = 1/(e^eps + d
    - 1)``, computed without overflow for a large epsilon."""
    if epsilon > 700:
        return 1.0, 0.0
    e = math.exp(epsilon)
    return e / (e + d - 1), 1.0 / (e + d - 1)


def randomized_response(index: npt.NDArray[np.int64], d: int, epsilon: float,
                        rng: Randomness) -> npt.NDArray[np.int64]:
    """Each true index (-1: outside the domain, drawn uniformly) kept with probability p, else
    one of the d - 1 others uniformly."""
    n = len(index)
    if d == 1:  # one value: nothing to hide, nothing to draw
        return np.zeros(n, dtype=np.int64)
    p = rr_probabilities(epsilon, d)[0]
    keep = uniform(n, rng) < p if n else np.zeros(0, dtype=bool)
    other = uniform_integers(d - 1, n, rng)
    flipped = np.where(other >= index, other + 1, other)  # skip the true index
    out = np.where(keep, index, flipped)
    outside = index < 0
    if outside.any():
        out[outside] = uniform_integers(d, int(outside.sum()), rng)
    return out


def uniform_integers(n: int, size: int, rng: Randomness) -> npt.NDArray[np.int64]:
    """``size`` exact uniform integers in [0, n): 64-bit words below the largest multiple of n
    (rejection: no modulo bias)."""
    out = np.empty(size, dtype=np.int64)
    limit = np.uint64((2**64 // n) * n - 1)
    todo = np.arange(size)
    while todo.size:
        words = rng.words(todo.size)
        ok = words <= limit
        out[todo[ok]] = (words[ok] % np.uint64(n)).astype(np.int64)
        todo = todo[~ok]
    return out


@dataclass(frozen=True)
class RowMechanism:
    """A table's released row: each column's mechanism, None where it is withheld."""

    table: str
    epsilon: float
    columns: Mapping[str, ColumnMechanism | None]
    rows_per_unit: int
    public_row_count: bool
    sample_rows: int | None

    @property
    def released(self) -> list[ColumnMechanism]:
        return [m for m in self.columns.values() if m is not None]

    def randomize(self, rows: Mapping[str, Sequence[Any]], n: int, rng: Randomness
                  ) -> dict[str, npt.NDArray[np.object_]]:
        """The n rows (column -> values) randomized, withheld columns all NULL."""
        out = {}
        for name, mechanism in self.columns.items():
            if mechanism is None:
                out[name] = np.full(n, None, dtype=object)
            else:
                out[name] = mechanism.randomize(rows[name], rng)
        return out

    def phantom(self) -> dict[str, list[Any]]:
        """The public row an empty table's draws randomize (module docstring)."""
        return {name: [None if m is None else (m.grid[0] if m.grid else m.domain[0])]
                for name, m in self.columns.items()}

    def params(self, charged: float) -> dict[str, Any]:
        """The release parameters (the Parquet file's metadata; EXPLAIN)."""
        return {"format": PARAMS_FORMAT, "table": self.table, "epsilon_row": self.epsilon,
                "rows_per_unit": self.rows_per_unit,
                "row_count": "public" if self.public_row_count else "sampled",
                "charged_epsilon": charged,
                "columns": {m.name: m.params() for m in self.released},
                "withheld": [n for n, m in self.columns.items() if m is None]}


def row_mechanism(table: Table) -> RowMechanism:
    """The released row of a table that opted in (its ``local`` section)."""
    spec = table.local
    if spec is None:
        raise MetadataError(f"table {table.name!r} has no local section: its rows are never "
                            "released; ask for aggregates instead")
    columns = {name: None if spec.column(name) is None else
               column_mechanism(spec.column(name), column, spec)  # type: ignore[arg-type]
               for name, column in table.columns.items()}
    return RowMechanism(table.name, spec.epsilon, columns, table.rows_per_unit,
                        spec.public_row_count, spec.sample_rows)


def query_epsilon(mechanism: RowMechanism, draws: int | None = None) -> float:
    """A query's charge: ``k * epsilon`` with a public row count, else ``m * epsilon`` for m
    uniform draws (module docstring)."""
    if mechanism.public_row_count:
        return mechanism.rows_per_unit * mechanism.epsilon
    return (draws if draws is not None else mechanism.sample_rows or 0) * mechanism.epsilon


def column_mechanism(release: ColumnRelease, column: Column, spec: LocalSpec
                     ) -> ColumnMechanism:
    eps = spec.share(release)
    if release.kind == "laplace":
        lower, upper = float(column.lower), float(column.upper)  # type: ignore[arg-type]
        step = release.step or 1.0
        steps = max(1, math.ceil((upper - lower) / step))
        if steps / eps >= MAX_GRID_SCALE:
            raise MetadataError(f"column {column.name!r}: its {steps} grid steps at epsilon "
                                f"{eps:g} need noise beyond the sampler's range; declare "
                                "narrower bounds, a coarser step, or buckets")
        return ColumnMechanism(release.name, "laplace", eps, grid=(lower, step, steps),
                               integer=column.type == ColumnType.INT)
    domain, encode = _categories(release, column)
    return ColumnMechanism(release.name, release.kind, eps, domain=domain, encode=encode)


def _categories(release: ColumnRelease, column: Column) -> tuple[tuple[Any, ...], Any]:
    """The released values and the map from true values to their indices among them (a NULL
    is its own value when the column is nullable, else read as the first)."""
    if release.kind == "rr":
        domain = column.domain or ()
        lookup = {_key(v): i for i, v in enumerate(domain)}
        return domain, lambda values: [lookup.get(_key(v), -1) for v in values]
    nullable = column.nullable
    if release.kind == "buckets":
        edges = np.array(release.edges)
        lows = tuple(int(e) if column.type == ColumnType.INT else e for e in release.edges[:-1])

        def buckets(values: Sequence[Any]) -> npt.NDArray[np.int64]:
            raw = np.array([math.nan if _missing(v) else float(v) for v in values], dtype=float)
            index = np.clip(np.searchsorted(edges, raw, side="right") - 1, 0, len(lows) - 1)
            return np.where(np.isnan(raw), len(lows) if nullable else 0, index)
        return (*lows, *((None,) if nullable else ())), buckets
    grain = release.grain or "year"
    periods = _periods(column, grain)
    where = {p: i for i, p in enumerate(periods)}

    def period(v: Any) -> int:
        if v is None:
            return len(periods) if nullable else 0
        return where[min(max(_truncate(v, grain), periods[0]), periods[-1])]
    return (*periods, *((None,) if nullable else ())), lambda values: [period(v) for v in values]


def _periods(column: Column, grain: str) -> tuple[dt.date, ...]:
    lower, upper = column.lower, column.upper
    assert isinstance(lower, dt.date) and isinstance(upper, dt.date)
    first, last = _truncate(lower, grain), _truncate(upper, grain)
    months = {"year": 12, "quarter": 3, "month": 1}[grain]
    out: list[dt.date] = []
    at = first
    while at <= last and len(out) <= MAX_DOMAIN_SIZE:
        out.append(at)
        total = at.year * 12 + at.month - 1 + months
        at = dt.date(total // 12, total % 12 + 1, 1)
    if len(out) > MAX_DOMAIN_SIZE:
        raise MetadataError(f"column {column.name!r}: more than {MAX_DOMAIN_SIZE} {grain}s "
                            "between its bounds")
    return tuple(out)


def _truncate(day: dt.date, grain: str) -> dt.date:
    month = {"year": 1, "quarter": 3 * ((day.month - 1) // 3) + 1, "month": day.month}[grain]
    return dt.date(day.year, month, 1)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _key(v: Any) -> Any:
    """A domain value's lookup key: bool apart from 0 and 1, NaN as NULL."""
    return None if _missing(v) else (type(v) is bool, v)


def _json(v: Any) -> Any:
    return v.isoformat() if isinstance(v, dt.date) else v
