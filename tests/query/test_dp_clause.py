"""BigQuery's differential privacy clause read off the text (dpsql.query.dp_clause): what it
sets, what it leaves alone (literals, comments), and its refusals."""

from __future__ import annotations

import pytest

from dpsql.errors import InvalidPrivacyParameter, UnsupportedQuery
from dpsql.metadata.contribution import ContributionBounds
from dpsql.query.dp_clause import DPOptions, resolve, split


def test_options_and_named_arguments() -> None:
    sql, options = split("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5, delta=1e-7, "
                         "kappa = 4, max_rows_contributed = 9, privacy_unit_column = `pid`) "
                         "g, SUM(x, contribution_bounds_per_row => (-1, 2.5)), COUNT(*, "
                         "contribution_bounds_per_group => (0, 50)), COUNT(y, contribution_"
                         "bounds_per_group=>(-1, 20)) FROM t GROUP BY g")
    assert " ".join(sql.split()) == ("SELECT g, SUM(LEAST(GREATEST(x, -1), 2.5) ), COUNT(* ), "
                                     "COUNT(y ) FROM t GROUP BY g")
    # COUNT's per-group bounds: the tightest, checked against the k in force once bound
    assert options == DPOptions(0.5, 1e-7, ContributionBounds(9, 4, "pid", (0.0, 20.0)))
    assert split("SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM t") == (
        "SELECT                           COUNT(*) FROM t", DPOptions())


def test_text_keeps_its_length() -> None:
    """The clause and named arguments become blanks of their length: a syntax error's position
    in the rewritten text is its position in the analyst's (the caret, the wire's P field)."""
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1) SUM(x, contribution_bounds_"
           "per_row => (0, 10)), COUNT(*, contribution_bounds_per_group => (0, 9)) FROM t WHERE (")
    out, _ = split(sql)
    assert len(out) == len(sql) and out.index("FROM t WHERE (") == sql.index("FROM t WHERE (")


def test_literals_and_comments_are_left_alone() -> None:
    for sql in ("SELECT COUNT(*) FROM t WHERE s = 'WITH DIFFERENTIAL_PRIVACY x => (1, 2)'",
                "SELECT COUNT(*) FROM t -- SELECT WITH DIFFERENTIAL_PRIVACY\n",
                "SELECT COUNT(*) FROM t"):
        assert split(sql) == (sql, None)


def test_per_group_bounds_are_kept_for_the_check_at_bind() -> None:
    """Per-group bounds on SUM become DPSQL_SUM_PER_GROUP (each unit's total clamped:
    dpsql.privacy.aggregates); on AVG they are clamped per row and named in the bounds, so
    that binding accepts them only where a unit contributes one row
    (dpsql.metadata.contribution)."""
    sql, options = split("SELECT g, SUM(x, contribution_bounds_per_group => (0, 9)), "
                         "AVG(y, contribution_bounds_per_group => (1, 2)) FROM t GROUP BY g")
    assert " ".join(sql.split()) == ("SELECT g, DPSQL_SUM_PER_GROUP(x, 0, 9 ), "
                                     "AVG(LEAST(GREATEST(y, 1), 2) ) FROM t GROUP BY g")
    assert options is not None and options.bounds == ContributionBounds(per_group_clamps=(
        "AVG(x, contribution_bounds_per_row => (1, 2))",))


def test_resolve_takes_the_clause_over_the_front_door() -> None:
    sql, epsilon, delta, bounds = resolve(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed = 2) COUNT(*) FROM t",
        0.3, 1e-6, ContributionBounds(7, 5))
    assert (epsilon, delta, bounds) == (0.3, 1e-6, ContributionBounds(7, 2))
    assert sql.split() == ["SELECT", "COUNT(*)", "FROM", "t"]


@pytest.mark.parametrize(("sql", "error", "words"), [
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1 COUNT(*) FROM t", UnsupportedQuery,
     "not closed"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon) COUNT(*) FROM t", UnsupportedQuery,
     "name = value"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, epsilon = 2) COUNT(*) FROM t",
     UnsupportedQuery, "twice"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = big) COUNT(*) FROM t",
     InvalidPrivacyParameter, "a number"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(kappa = \u00b2) COUNT(*) FROM t",
     InvalidPrivacyParameter, "whole number"),  # a digit to str.isdigit, not to int()
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(kappa = 1, max_groups_contributed = 2) "
     "COUNT(*) FROM t", UnsupportedQuery, "same option"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(group_selection_strategy = ANY) COUNT(*) FROM t",
     UnsupportedQuery, "LAPLACE_THRESHOLD"),
    ("SELECT SUM(x, contribution_bounds_per_group => (5, 1)) FROM t", UnsupportedQuery,
     "lower is above upper"),
    ("SELECT SUM(x, contribution_bounds_per_group => (a, 1)) FROM t", UnsupportedQuery,
     "two numbers"),
    ("SELECT SUM(x, weight => 2) FROM t", UnsupportedQuery, "contribution_bounds_per_row"),
    ("SELECT COUNT(*, report_format => 'JSON') FROM t", UnsupportedQuery, "remove report_format"),
])
def test_refusals_say_what_to_write(sql: str, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        split(sql)
