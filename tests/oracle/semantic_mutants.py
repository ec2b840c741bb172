"""Probes for the mutants of dpsql that answer a different question than the one asked, each
of which the semantic oracle (:mod:`dpsql.audit.oracle`) must catch (tests/oracle/test_oracle.py
asserts it): as tests/neighbours/leak_mutants.py keeps the leaks the neighbour harness must find.

Each mutant (tests/support/mutants.py, by name) is a monkeypatch of one place in the pipeline;
here, a few probe queries of the neighbour generator's metadata that reach it; the generator's
own queries are checked too.
"""

from __future__ import annotations

#: Each mutant of the oracle (tests/support/mutants.py), by name -> its probe queries (SQL,
#: delta).
PROBES: dict[str, list[tuple[str, float]]] = {
    "null_becomes_lower_bound": [
        ("SELECT SUM(amount) FROM visits", 0.0),
        ("SELECT grp, COUNT(amount), AVG(amount) FROM visits GROUP BY grp", 0.0),
        ("SELECT SUM(income) FROM people", 0.0)],
    "null_unit_is_a_person": [
        ("SELECT COUNT(*) FROM visits", 0.0),
        ("SELECT grp, SUM(qty) FROM visits GROUP BY grp", 0.0)],
    "avg_without_centre": [
        ("SELECT AVG(qty) FROM visits", 0.0),
        ("SELECT sex, AVG(age) FROM people GROUP BY sex", 0.0)],
    "having_dropped": [
        ("SELECT grp, COUNT(*) FROM visits GROUP BY grp HAVING COUNT(*) > 3", 0.0),
        ("SELECT sex, SUM(age) FROM people GROUP BY sex HAVING SUM(age) < 10", 0.0)],
    "order_by_dropped": [
        ("SELECT grp, COUNT(*) AS n FROM visits GROUP BY grp ORDER BY n DESC", 0.0),
        ("SELECT drug, COUNT(*) FROM rx GROUP BY drug ORDER BY COUNT(*) LIMIT 1", 0.0),
        ("SELECT age, COUNT(*) FROM people GROUP BY age ORDER BY COUNT(*) DESC LIMIT 2",
         0.0)],
}


# ------------------------------------------- where bounds bite, and BigQuery's clause


_DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
PROBES.update({
    "k_ignored": [
        ("SELECT COUNT(*) FROM visits", 0.0),
        ("SELECT grp, COUNT(*) FROM visits GROUP BY grp", 0.0),
        ("SELECT SUM(qty) FROM visits", 0.0)],
    "groups_cap_ignored": [
        ("SELECT grp, COUNT(DISTINCT pid) FROM visits GROUP BY grp", 0.0)],
    "weights_per_group": [
        ("SELECT grp, COUNT(*) FROM visits GROUP BY grp", 0.0),
        ("SELECT grp, SUM(qty) FROM visits GROUP BY grp", 0.0)],
    "scaled_null_is_lower_bound": [
        ("SELECT AVG(amount) FROM visits", 0.0),
        ("SELECT SUM(amount - 50) FROM visits", 0.0),
        ("SELECT AVG(p.income) FROM visits v JOIN people p ON v.pid = p.pid", 0.0)],
    "per_group_null_person": [
        (_DP + "grp, SUM(amount, contribution_bounds_per_group => (2, 3)) FROM visits "
         "GROUP BY grp", 0.0),
        (_DP + "SUM(income, contribution_bounds_per_group => (5, 9)) FROM people", 0.0)],
    "avg_by_rows": [
        (_DP + "grp, AVG(amount) FROM visits GROUP BY grp", 0.0),
        (_DP + "AVG(qty) FROM visits", 0.0)],
    "per_row_null_is_lower": [
        (_DP + "SUM(amount, contribution_bounds_per_row => (2, 3)) FROM visits", 0.0),
        (_DP + "grp, SUM(income, contribution_bounds_per_row => (2, 3)) FROM people p JOIN "
         "visits v ON v.pid = p.pid GROUP BY grp", 0.0)],
})

#: The mutants whose probes need a world where k and g bite (oracle_world's bounds_bite).
BOUNDS_BITE = {"k_ignored", "groups_cap_ignored", "weights_per_group",
               "scaled_null_is_lower_bound"}
