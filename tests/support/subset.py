"""The default subset of a long list of checks (grammar corpus cases, audit scenarios) that the
slow harnesses run on every run: every *kind* of check, and a rotating share of the rest.

A harness that runs each corpus case on a slow engine (Spark, PostgreSQL) or on many
neighbouring databases cannot run all of them in a 6-minute suite. By default it runs
:func:`subset`:

* a greedy **cover** of the cases' features (:func:`sql_features`: the corpus file, every
  sqlglot node type of the analyst's SQL, the mechanism, thresholding, the verdict and error
  class; or the harness's own features, e.g. the node types of the engine's query): the case
  that adds the most features not yet covered, until none adds one. Every corpus file and
  every SQL construct the corpus holds runs on every run;
* a **rotating share**: the cases whose position ``i`` has ``i % share == seed % share``, on
  the run's seed (``neighbour_seed``, conftest.py; the same in every pytest-xdist worker), so
  that ``share`` consecutive seeds run the whole list; a failure names the seed and
  ``DPSQL_NEIGHBOUR_SEED=<seed>`` selects the same cases again.

With ``DPSQL_SLOW=1`` every case runs. A new harness (a Spark cluster, Spark Connect, another
engine) calls :func:`subset` on its list with its own ``share`` (how many runs see the whole
corpus) and, when it plans the cases anyway, the features of its plans.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterable, Sequence
from functools import cache
from typing import TypeVar

import sqlglot
from sqlglot import exp

from dpsql.audit.scenarios import SCENARIOS, Scenario
from dpsql.query.parse import MAX_SQL_LENGTH
from grammar_tests.corpus import Case

T = TypeVar("T")

#: Every case of every harness runs with DPSQL_SLOW=1 (scripts/test's header).
SLOW = os.environ.get("DPSQL_SLOW") == "1"


def run_seed() -> int:
    """This run's seed (conftest.py's ``pytest_configure`` sets it before collection, so
    that parametrised lists are the same in every pytest-xdist worker); 0 outside pytest."""
    return int(os.environ.get("DPSQL_NEIGHBOUR_SEED", "0"))


def sql_features(case: Case) -> frozenset[str]:
    """What a case exercises, read from its text alone (no planning): its corpus file, every
    node type and function of its parsed SQL, the mechanism, thresholding (delta > 0), its
    verdict and error class."""
    return _features(case.sql, case.file, f"{case.verdict} {case.error or ''}",
                     str(case.options.get("mechanism")),
                     float(case.options.get("delta") or 0) > 0)  # type: ignore[arg-type]


@cache
def _features(sql: str, file: str, verdict: str, mechanism: str, delta: bool
              ) -> frozenset[str]:
    found = {f"file {file}", f"verdict {verdict}", f"mechanism {mechanism}", f"delta {delta}"}
    if len(sql) > MAX_SQL_LENGTH:  # refused unparsed; parsing it would take 2 s per process
        return frozenset(found | {"too long"})
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except (sqlglot.errors.SqlglotError, RecursionError):  # the corpus nests deeply on purpose
        return frozenset(found | {"unparsed"})
    found |= {type(node).__name__ for node in tree.walk()}
    found |= {f"function {node.sql_name()}" for node in tree.find_all(exp.Func)}
    return frozenset(found)


def text_features(sql: str) -> frozenset[str]:
    """What a query's text exercises (every node type and function of its parsed SQL): the
    features of :func:`subset` for a list of queries that are not corpus cases."""
    return _features(sql, "", "", "", False)


def half(features: Sequence[set[str]], seed: int) -> list[set[str]]:
    """``features`` (one set per item) restricted to this ``seed``'s half of all their
    features, every other one in sorted order: two consecutive seeds cover them all."""
    wanted = set(sorted(set().union(*features))[seed % 2::2])
    return [f & wanted for f in features]


def cover(features: Sequence[Iterable[Hashable]], taken: Iterable[int] = ()) -> set[int]:
    """Indices of a greedy cover of ``features`` (one set per item), starting from
    ``taken``: repeatedly the item that adds the most features not yet covered (the first
    such item on a tie, so the choice is deterministic)."""
    chosen = set(taken)
    remaining = {i: set(f) for i, f in enumerate(features) if i not in chosen}
    covered: set[Hashable] = set().union(*(set(features[i]) for i in chosen))
    while any(f - covered for f in remaining.values()):
        best = max(remaining, key=lambda i: (len(remaining[i] - covered), -i))
        chosen.add(best)
        covered |= remaining.pop(best)
    return chosen


def subset(items: Sequence[T], share: int, features: Callable[[T], Iterable[Hashable]],
           seed: int | None = None, taken: Iterable[int] = ()) -> list[T]:
    """``items`` in their order: all of them with DPSQL_SLOW=1, else the cover of their
    ``features`` (plus ``taken``) and the rotating ``1/share`` of the rest on ``seed`` (the
    run's, :func:`run_seed`, unless given); see the module docstring."""
    if SLOW or share <= 1:
        return list(items)
    seed = run_seed() if seed is None else seed
    chosen = cover([features(item) for item in items], taken)
    chosen |= {i for i in range(len(items)) if i % share == seed % share}
    return [items[i] for i in sorted(chosen)]


def corpus_subset(cases: Sequence[Case], share: int, seed: int | None = None) -> list[Case]:
    """:func:`subset` of corpus cases on their :func:`sql_features`."""
    return subset(cases, share, sql_features, seed)


def scenario_features(scenario: Scenario) -> frozenset[str]:
    """What a statistical-audit scenario exercises: every node type and function of its
    SQL, its mechanism, thresholding, group keys, a join, the table's kind of bounding."""
    return _features(scenario.sql, scenario.table, f"keys {bool(scenario.keys)}",
                     scenario.mechanism, scenario.delta > 0) | {f"join {bool(scenario.more)}"}


def scenario_subset(names: Sequence[str], share: int, seed: int | None = None) -> list[str]:
    """:func:`subset` of the audit scenarios ``names`` on their :func:`scenario_features`."""
    return subset(names, share, lambda name: scenario_features(SCENARIOS[name]), seed)
