"""The fixes of issue 17's leak classes, each revertible: a mutant puts the old behaviour back
(monkeypatched; every mutant is in tests/support/mutants.py), so that the neighbour harness can show
it finds each class, on every engine, as the statistical audit's mutants show it finds broken
mechanisms.

1. three-valued logic of anti-joins: a row whose outer unit is NULL kept by ``NOT (unit IN
   (...))``, so only when *no unit* matches (``dpsql.query.joins.null_outer``);
2. a unit's identity: the unit read as stored (spellings of one person are several units;
   values that do not convert are units) by bounding, joins and semi-joins
   (``Reader.unit``), and unit equalities in ON read clamped (``dpsql.query.joins.identity_on``);
3. a ``unit_path`` table read through a CTE or a subquery in FROM, bound as a table of its
   own units (``dpsql.query.bind.refuse_unit_path``).

And issue 21's groups cap (:data:`BIAS_MUTANTS`): dropped where it lowers a sensitivity, or
its removal turned into k rows per group.
And issue 21.5's fine quantile histogram (2**16 buckets): ``QUANTILE_MUTANT`` declares the rank
utility's sensitivity as one row instead of k (``dpsql.privacy.aggregates.quantile_sensitivity``),
which the harness must find on ``QUANTILE_SHAPES`` (user-level quantiles: a unit's k rows move
its groups' bucket counts by k in total).
"""

from __future__ import annotations

import pytest

from dpsql.audit.neighbours import Neighbourhood, check_query
from tests.support.mutants import MUTANTS, Mutant

#: The three leak classes, by number (their mutants: tests/support/mutants.py).
LEAK_MUTANTS: dict[int, Mutant] = {
    1: MUTANTS["anti_join_null_outer"], 2: MUTANTS["unit_as_stored"],
    3: MUTANTS["unit_path_through_subquery"]}


#: Issue 21's groups cap, applied only where it lowers what is released
#: (dpsql.privacy.aggregates.groups_cap): two ways to get it wrong.
BIAS_MUTANTS: dict[str, Mutant] = {
    name: MUTANTS[name] for name in ("groups_never_capped", "k_per_group")}


#: Issue 21: over public keys the groups cap is not applied (Laplace and Gaussian): each kind
#: of measurement, with the adversary reaching its bound across more than g groups (run on
#: every engine's neighbour harness).
UNCAPPED = [
    ("SELECT grp, COUNT(*), COUNT(amount), SUM(qty) FROM visits GROUP BY grp", "laplace"),
    ("SELECT grp, AVG(amount), VAR_SAMP(qty), STDDEV(amount) FROM visits GROUP BY grp",
     "laplace"),
    ("SELECT grp, COUNT(*), SUM(amount) FROM visits GROUP BY grp", "gaussian"),
    ("SELECT grp, MEDIAN(qty), MAX(amount), COUNT(DISTINCT qty) FROM visits GROUP BY grp",
     "laplace"),
    ("SELECT drug, SUM(dose), COUNT(*) FROM rx GROUP BY drug", "laplace"),
]


#: BigQuery's SUM(x, contribution_bounds_per_group => (lo, hi)) on a world where a unit has
#: many rows in many groups (dpsql.privacy.aggregates._per_group_sum): its clamped total in
#: each of at most g' kept groups, L1 = g' max(|lo|, |hi|). Public keys, thresholded keys, no
#: keys, a negative bound, beside counts, a one-row-per-unit table, per-group COUNTs;
#: (sql, mechanism, delta).
PER_GROUP_SUMS = [
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_groups_contributed = 2) "
     "grp, SUM(amount, "
     "contribution_bounds_per_group => (0, 10)) FROM visits GROUP BY grp", "laplace", 0.0),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6, max_groups_contributed = "
     "3) grp, COUNT(*), "
     "SUM(qty, contribution_bounds_per_group => (-5, 7)) FROM visits GROUP BY grp",
     "gaussian", 1e-6),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6, max_groups_contributed = "
     "2) day, "
     "SUM(amount, contribution_bounds_per_group => (0, 10)) FROM visits GROUP BY day",
     "laplace", 1e-6),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) SUM(amount, "
     "contribution_bounds_per_group => (2.5, 40)) "
     "FROM visits WHERE qty > 1", "laplace", 0.0),
    # One row per unit (no bounding): the unit's total is its row, clamped per row.
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) sex, SUM(age, "
     "contribution_bounds_per_group => "
     "(-1.5, 50)) FROM people GROUP BY sex", "laplace", 0.0),
    # ZetaSQL's per-group COUNT: the sum of each unit's clamped count (dpsql.query.dp_clause).
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, "
     "max_groups_contributed = 2) grp, COUNT(*, "
     "contribution_bounds_per_group => (0, 3)), COUNT(qty, contribution_bounds_per_group => "
     "(1, 2)) FROM visits GROUP BY grp", "laplace", 0.0),
]


#: ZetaSQL's AVG, the average of each unit's clamped average (dpsql.privacy.aggregates,
#: _per_person_avg): written per-group bounds, and AVG inside the clause without bounds.
PER_PERSON_AVGS = [
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_groups_contributed = 2) "
     "grp, AVG(amount, "
     "contribution_bounds_per_group => (0, 10)) FROM visits GROUP BY grp", "laplace", 0.0),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6, max_groups_contributed = "
     "3) grp, COUNT(*), "
     "AVG(qty, contribution_bounds_per_group => (-5, 7)) FROM visits GROUP BY grp",
     "gaussian", 1e-6),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6) day, AVG(amount) FROM "
     "visits "
     "GROUP BY day", "laplace", 1e-6),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) AVG(amount), AVG(qty, "
     "contribution_bounds_per_group => "
     "(2.5, 4)) FROM visits WHERE qty > 1", "laplace", 0.0),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) sex, AVG(age, "
     "contribution_bounds_per_group => "
     "(-1.5, 50)) FROM people GROUP BY sex", "laplace", 0.0),
]


def assert_per_group_sums(monkeypatch: pytest.MonkeyPatch, hood: Neighbourhood,
                          queries: list[tuple[str, str, float]] | None = None) -> None:
    """Every :data:`PER_GROUP_SUMS` query on ``hood``'s engine: within its sensitivity, the
    adversary reaching it, the groups cap applied; with the cap dropped
    (``MUTANTS["groups_never_capped"]``) the harness finds the grouped sum's leak."""
    queries = PER_GROUP_SUMS if queries is None else queries
    for sql, mechanism, delta in queries:
        verdict = check_query(sql, hood, 1.0, delta, mechanism)
        assert verdict.status == "passed", verdict.report() + f" ({verdict.status})"
        assert 0 < verdict.worst <= 1 + 1e-9, (sql, verdict.worst)
    hood.forget()
    MUTANTS["groups_never_capped"](monkeypatch)
    try:
        sql, mechanism, delta = queries[0]
        assert check_query(sql, hood, 1.0, delta, mechanism).status == "violation"
    finally:
        hood.forget()


QUANTILE_MUTANT = MUTANTS["quantile_sensitivity_one"]
#: User-level quantiles over the generator's world (visits: k rows per unit, public grp).
QUANTILE_SHAPES = (
    "SELECT MEDIAN(amount) FROM visits",
    "SELECT grp, PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY amount) AS p, MAX(qty) AS m "
    "FROM visits GROUP BY grp",
    "SELECT QUANTILE_CONT(amount, 0.25), MIN(amount) FROM visits WHERE qty > 3",
)


def assert_uncapped_clean(hood: Neighbourhood, sql: str, mechanism: str) -> None:
    """An :data:`UNCAPPED` query on ``hood``'s engine: every measurement within its
    sensitivity, and the adversary reaches it."""
    delta = 1e-6 if mechanism == "gaussian" else 0.0
    verdict = check_query(sql, hood, 1.0, delta, mechanism)
    assert verdict.status == "passed", verdict.report()
    assert 0 < verdict.worst <= 1 + 1e-9


def assert_quantile_mutant_found(monkeypatch: pytest.MonkeyPatch, hood: Neighbourhood,
                                 every_shape: bool = True) -> None:
    """The :data:`QUANTILE_SHAPES` pass on ``hood``'s engine (the grouped one alone unless
    ``every_shape``: a slow engine's default run), and with the utility's sensitivity declared
    as one row (:data:`QUANTILE_MUTANT`) the harness finds it."""
    for sql in QUANTILE_SHAPES if every_shape else QUANTILE_SHAPES[1:2]:
        assert check_query(sql, hood).status == "passed", sql
    hood.forget()
    QUANTILE_MUTANT(monkeypatch)
    try:
        assert check_query(QUANTILE_SHAPES[1], hood).status == "violation"
    finally:
        hood.forget()


#: Query shapes whose retention estimate (dpsql.execution.retention) the neighbour tests check.
RETENTION = [
    "SELECT COUNT(*) FROM visits",
    "SELECT grp, SUM(amount) FROM visits WHERE qty > 2 GROUP BY grp",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 2, "
    "max_groups_contributed = 1) grp, COUNT(DISTINCT pid) FROM visits GROUP BY grp",
    "SELECT day, COUNT(*) FROM visits GROUP BY day",
    "SELECT p.sex, COUNT(*) FROM visits v JOIN people p ON v.pid = p.pid GROUP BY p.sex",
    "SELECT drug, SUM(dose) FROM rx GROUP BY drug",
]
def assert_auto_k_clean(hood: Neighbourhood, scenario: str = "auto_rows") -> None:
    """An automatic k (issue 21.2) on ``hood``, the ``auto_rows`` scenario's pair on some engine:
    the choice's input (the engine's count of units per number of rows, in its own SQL) moves
    by one unit, and the measurements at k = 1, the cap and a draw by their sensitivities.
    ``auto_values``: an automatic bound's input (units per bucket of their largest value), and
    the measurements at the cap, the lowest bucket and a draw."""
    from dpsql.audit.scenarios import SCENARIOS

    s = SCENARIOS[scenario]
    verdict = check_query(s.sql, hood, s.epsilon)
    assert verdict.status == "passed" and verdict.releases >= 3, verdict.report()
    assert verdict.worst > 0  # the neighbour reaches the sensitivities it is checked against
