"""The statistical audit of one released row under local DP (:mod:`dpsql.privacy.local`).

A scenario is a table's ``local`` declaration and two true rows x and x' (neighbours: one
unit's row replaced). The audit draws n randomizations of each with the mechanism dpsql
releases with, and for a family of output events E (each value of a categorical column, the
half-lines ``y <= t`` and ``y >= t`` of a Laplace column at the true values, and, for the whole
row, each joint output of its categorical columns) computes a lower confidence bound on
``ln(P(E | x) / P(E | x'))``: Hoeffding's interval ``t = sqrt(ln(2 / alpha) / (2n))`` around
each empirical frequency. A mechanism is caught when some bound exceeds the declared epsilon
(the column's share, or the row's). The exact ratio is checked besides, from the mechanism's
own probabilities (:meth:`~dpsql.privacy.local.ColumnMechanism.probability`).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpsql.metadata.metadata import parse_metadata
from dpsql.privacy.local import ColumnMechanism, RowMechanism, row_mechanism
from dpsql.privacy.randomness import Randomness

#: The confidence of each bound (seeded runs: the verdict never changes from run to run).
ALPHA = 1e-6


@dataclass(frozen=True)
class LocalScenario:
    """A table's declaration (TOML text) and two neighbouring true rows (column -> value)."""

    name: str
    metadata: str
    table: str
    row: Mapping[str, Any]
    neighbour: Mapping[str, Any]

    def mechanism(self) -> RowMechanism:
        import tomllib

        tables = parse_metadata(tomllib.loads(self.metadata)).tables
        return row_mechanism(tables[self.table])


_TABLE = """
[tables.t]
privacy_unit = "pid"
one_row_per_unit = true
[tables.t.columns]
pid = {{ type = "int" }}
sex = {{ type = "text", values = ["F", "M"] }}
edu = {{ type = "text", values = ["a", "b", "c", "d"] }}
yes = {{ type = "bool" }}
age = {{ type = "int", lower = 0, upper = 20 }}
pay = {{ type = "float", lower = 0, upper = 100, nullable = true }}
day = {{ type = "date", lower = 2020-01-01, upper = 2023-12-31 }}
note = {{ type = "text" }}
[tables.t.local]
epsilon = {epsilon}
row_count = "public"
[tables.t.local.columns]
{columns}
"""


def _scenario(name: str, columns: str, row: Mapping[str, Any], other: Mapping[str, Any],
              epsilon: float = 1.0) -> LocalScenario:
    return LocalScenario(name, _TABLE.format(epsilon=epsilon, columns=columns), "t", row, other)


def scenarios() -> list[LocalScenario]:
    """One per column kind, then a row of several (their composition)."""
    import datetime as dt

    far = {"pid": 1, "sex": "F", "edu": "a", "yes": True, "age": -10**9, "pay": None,
           "day": dt.date(1900, 1, 1), "note": "x"}
    near = {"pid": 2, "sex": "M", "edu": "d", "yes": False, "age": 10**9, "pay": 1e12,
            "day": dt.date(2023, 12, 31), "note": "y"}
    return [
        _scenario("rr-binary", 'sex = "rr"', far, near),
        _scenario("rr-4", 'edu = "rr"', far, near),
        _scenario("warner", 'yes = "rr"', far, near),
        _scenario("laplace", 'age = "laplace"', far, near),
        _scenario("buckets", 'pay = { release = "buckets", edges = [0, 50, 100] }', far, near),
        _scenario("grain", 'day = { release = "grain", grain = "year" }', far, near),
        _scenario("row", 'sex = "rr"\nedu = "rr"\nyes = { release = "rr", weight = 2 }', far,
                  near, epsilon=2.0),
    ]


def sample(mechanism: RowMechanism, row: Mapping[str, Any], n: int, rng: Randomness
           ) -> dict[str, np.ndarray]:
    """n independent randomizations of one true row."""
    return mechanism.randomize({c: [row.get(c)] * n for c in mechanism.columns}, n, rng)


def measured(a: Sequence[Any], b: Sequence[Any], events: Sequence[Callable[[Any], bool]]
             ) -> float:
    """The largest lower confidence bound of ``|ln(P(E|x) / P(E|x'))|`` over ``events``."""
    n = len(a)
    t = math.sqrt(math.log(2 / ALPHA) / (2 * n))
    best = 0.0
    for event in events:
        pa = sum(1 for v in a if event(v)) / n
        pb = sum(1 for v in b if event(v)) / n
        for hi, lo in ((pa, pb), (pb, pa)):
            if hi - t > 0:
                best = max(best, math.log((hi - t) / min(1.0, lo + t)))
    return best


def column_events(m: ColumnMechanism, row: Mapping[str, Any], other: Mapping[str, Any]
                  ) -> list[Callable[[Any], bool]]:
    if m.grid is None:
        return [_equals(d) for d in m.domain]
    lower, step, steps = m.grid
    cuts = [lower, lower + steps * step]
    return [f for c in cuts for f in (lambda v, c=c: v <= c, lambda v, c=c: v >= c)]


@dataclass(frozen=True)
class Verdict:
    name: str
    what: str  # a column, or "row"
    epsilon: float  # declared
    exact: float  # the largest exact log ratio (categorical columns; the row's product)
    measured: float  # the largest lower confidence bound

    @property
    def passed(self) -> bool:
        return self.exact <= self.epsilon + 1e-9 and self.measured <= self.epsilon + 1e-9


def audit(scenario: LocalScenario, n: int, rng: Randomness,
          mechanism: RowMechanism | None = None) -> list[Verdict]:
    """Each released column's verdict, and the row's (the joint output of its categorical
    columns, against the row's epsilon). ``mechanism`` replaces the declared one (mutants)."""
    declared = scenario.mechanism()
    rows = mechanism or declared
    a = sample(rows, scenario.row, n, rng)
    b = sample(rows, scenario.neighbour, n, rng)
    out = []
    for m, promised in zip(rows.released, declared.released, strict=True):
        exact = max((abs(math.log(m.probability(scenario.row[m.name], y) /
                                  m.probability(scenario.neighbour[m.name], y)))
                     for y in _outputs(m)), default=0.0)
        events = column_events(m, scenario.row, scenario.neighbour)
        out.append(Verdict(scenario.name, m.name, promised.epsilon, exact,
                           measured(list(a[m.name]), list(b[m.name]), events)))
    if len(rows.released) > 1:
        out.append(_row_verdict(scenario, rows, a, b, declared.epsilon))
    return out


def _equals(value: Any) -> Callable[[Any], bool]:
    return lambda v: bool(v == value)


def _outputs(m: ColumnMechanism) -> list[Any]:
    if m.grid is None:
        return list(m.domain)
    lower, step, steps = m.grid
    return [lower + i * step for i in range(-steps, 2 * steps + 1)]


def _row_verdict(scenario: LocalScenario, rows: RowMechanism, a: Mapping[str, np.ndarray],
                 b: Mapping[str, np.ndarray], epsilon: float) -> Verdict:
    cats = [m for m in rows.released if m.grid is None]
    joint = list(itertools.product(*(m.domain for m in cats)))
    exact = max(abs(sum(math.log(m.probability(scenario.row[m.name], y) /
                                 m.probability(scenario.neighbour[m.name], y))
                        for m, y in zip(cats, out, strict=True))) for out in joint)
    ta = list(zip(*(a[m.name] for m in cats), strict=True))
    tb = list(zip(*(b[m.name] for m in cats), strict=True))
    counts = Counter(ta)
    events = [lambda v, o=o: v == o for o, _ in counts.most_common(8)]
    return Verdict(scenario.name, "row", epsilon, exact, measured(ta, tb, events))
