"""BigQuery's differential privacy clause parsed into the tree and lowered (dpsql.query.
dp_clause): what it sets, what it leaves alone (literals, comments), and its refusals, with
the positions of malformed clauses."""

from __future__ import annotations

import pytest
from sqlglot import exp

from dpsql.errors import InvalidPrivacyParameter, SQLSyntaxError, UnsupportedQuery
from dpsql.metadata.contribution import ContributionBounds
from dpsql.query.dp_clause import (
    DifferentialPrivacy,
    DPOptions,
    NamedArguments,
    clause_tree,
    resolve,
    resolve_query,
    split,
)


def test_options_and_named_arguments() -> None:
    sql, options = split("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5, delta=1e-7, "
                         "kappa = 4, max_rows_contributed = 9, privacy_unit_column = `pid`) "
                         "g, SUM(x, contribution_bounds_per_row => (-1, 2.5)), COUNT(*, "
                         "contribution_bounds_per_group => (0, 50)), COUNT(y, contribution_"
                         "bounds_per_group=>(-1, 20)) FROM t GROUP BY g")
    # an output column lowering changes keeps its name as written, named arguments left out
    # COUNT's per-group bounds: ZetaSQL's sum over units of each unit's count, clamped
    assert sql == ('SELECT g, SUM(LEAST(GREATEST(x, -1), 2.5)) AS "SUM(x)", '
                   'DPSQL_SUM_PER_GROUP(1, 0, 50) AS "COUNT(*)", DPSQL_SUM_PER_GROUP(CASE WHEN y '
                   'IS NULL THEN 0 ELSE 1 END, -1, 20) AS "COUNT(y)" FROM t GROUP BY g')
    # the clause's g (kappa) always binds, as BigQuery's (Table.groups_bound)
    assert options == DPOptions(0.5, 1e-7, ContributionBounds(9, 4, "pid", groups_bound=True))
    # epsilon and delta are required in the clause, as BigQuery's grammar writes them
    for sql in ("SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM t",
                "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS() COUNT(*) FROM t",
                "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1) COUNT(*) FROM t",
                "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0) COUNT(*) FROM t"):
        with pytest.raises(InvalidPrivacyParameter, match=r"needs .*(epsilon|delta)"):
            split(sql)
    assert split("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0, epsilon = 2) COUNT(*) "
                 "FROM t") == ("SELECT COUNT(*) FROM t", DPOptions(2.0, 0.0))


def test_the_clause_is_a_node_of_the_tree() -> None:
    """The clause is a DifferentialPrivacy node on its SELECT, each named argument a Kwarg of
    a NamedArguments node around its call, with the position of its name."""
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, privacy_unit_column = `uid`) "
           "SUM(x, contribution_bounds_per_row => (0, 10)) FROM t")
    tree = clause_tree(sql)
    clause = tree.args["differential_privacy"]
    assert isinstance(clause, DifferentialPrivacy)
    assert [(o.this.name, o.expression.name) for o in clause.expressions] == [
        ("epsilon", "1"), ("privacy_unit_column", "uid")]
    named = tree.find(NamedArguments)
    assert named is not None and isinstance(named.this, exp.Sum)
    [kwarg] = named.expressions
    assert kwarg.meta["position"] == sql.index("contribution_bounds_per_row") + 1


def test_syntax_errors_point_into_the_analysts_text() -> None:
    """A syntax error after the clause is reported where the analyst wrote it (the caret, the
    wire's P field): the text is parsed as written, never edited."""
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1) SUM(x, contribution_bounds_"
           "per_row => (0, 10)), COUNT(*, contribution_bounds_per_group => (0, 9)) FROM t WHERE (")
    with pytest.raises(SQLSyntaxError) as e:
        split(sql)
    assert e.value.position is not None and e.value.position >= sql.index("WHERE (")
    with pytest.raises(SQLSyntaxError) as e:
        split("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1 COUNT(*) FROM t")
    assert e.value.position == len("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1 ") + 1


def test_literals_and_comments_are_left_alone() -> None:
    for sql in ("SELECT COUNT(*) FROM t WHERE s = 'WITH DIFFERENTIAL_PRIVACY x => (1, 2)'",
                "SELECT COUNT(*) FROM t -- SELECT WITH DIFFERENTIAL_PRIVACY\n",
                "SELECT COUNT(*) FROM t"):
        assert split(sql) == (sql, None)


def test_per_group_bounds_are_kept_for_the_check_at_bind() -> None:
    """Per-group bounds on SUM and AVG become DPSQL_SUM_PER_GROUP and DPSQL_AVG_PER_GROUP
    (each unit's total or average clamped: dpsql.privacy.aggregates); on VAR_POP they are
    clamped per row and named in the bounds, so that binding accepts them only where a unit
    contributes one row (dpsql.metadata.contribution). Inside the clause a bare AVG is
    ZetaSQL's per-person AVG; a per-row AVG averages rows."""
    sql, options = split("SELECT g, SUM(x, contribution_bounds_per_group => (0, 9)), "
                         "AVG(y, contribution_bounds_per_group => (1, 2)), VAR_POP(z, "
                         "contribution_bounds_per_group => (0, 1)) FROM t GROUP BY g")
    assert sql == ('SELECT g, DPSQL_SUM_PER_GROUP(x, 0, 9) AS "SUM(x)", DPSQL_AVG_PER_GROUP(y, '
                   '1, 2) AS "AVG(y)", VAR_POP(LEAST(GREATEST(z, 0), 1)) AS "VAR_POP(z)" FROM t '
                   'GROUP BY g')
    assert options is not None and options.bounds == ContributionBounds(per_group_clamps=(
        "VAR_POP(x, contribution_bounds_per_row => (0, 1))",))
    sql, _ = split("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) AVG(y), "
                   "AVG(y, contribution_bounds_per_row => (1, 2)), AVG(y * 2, contribution_"
                   "bounds_per_row => (1, 2)) FROM t")
    assert sql == ('SELECT DPSQL_AVG_PER_GROUP(y) AS "AVG(y)", AVG(LEAST(GREATEST(y, 1), 2)) AS '
                   '"AVG(y)", AVG(CASE WHEN y * 2 IS NULL THEN NULL ELSE LEAST(GREATEST(y * 2, 1),'
                   ' 2) END) AS "AVG(y * 2)" FROM t')
    assert split("SELECT AVG(y) FROM t") == ("SELECT AVG(y) FROM t", None)


def test_report_format_wraps_its_aggregate_and_names_its_columns() -> None:
    """report_format => 'JSON' makes the call DPSQL_REPORT(call), wherever it is (the
    post-processing query builds the report: dpsql.execution.reports); a column keeps the
    name it has as written, without the named arguments."""
    resolved = resolve_query("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                             "g, COUNT(*, report_format => "
                             "'JSON') AS n, SUM(x, report_format => \"JSON\") FROM t GROUP BY g",
                             1.0, 0.0, None)
    assert resolved.report
    assert resolved.sql == ('SELECT g, DPSQL_REPORT(COUNT(*)) AS n, DPSQL_REPORT(SUM(x)) AS '
                            '"SUM(x)" FROM t GROUP BY g')
    inside = resolve_query("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                           "SUM(x, contribution_bounds_per_row"
                           " => (0, 1), report_format => 'JSON').result.value AS v FROM t",
                           1.0, 0.0, None)
    assert inside.report and inside.sql == (
        "SELECT DPSQL_REPORT(SUM(LEAST(GREATEST(x, 0), 1))).result.value AS v FROM t")
    assert not resolve_query("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                             "SUM(x) FROM t", 1.0, 0.0,
                             None).report


def test_named_arguments_after_distinct() -> None:
    """COUNT(DISTINCT x, name => value): the named arguments are the call's, not DISTINCT's."""
    resolved = resolve_query("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                             "COUNT(DISTINCT pid, "
                             "report_format => 'JSON') AS n FROM t", 1.0, 0.0, None)
    assert resolved.report
    assert resolved.sql == "SELECT DPSQL_REPORT(COUNT(DISTINCT pid)) AS n FROM t"
    with pytest.raises(UnsupportedQuery, match=r"COUNT\(DISTINCT x, contribution_bounds_per_"):
        split("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
              "COUNT(DISTINCT pid, contribution_bounds_per_"
              "group => (0, 1)) FROM t")


def test_bigquery_json_functions_are_duckdbs() -> None:
    """BigQuery's JSON functions, as users read a report (dpsql.query.bigquery_json)."""
    sql, _ = split("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                   "DOUBLE(r.v), INT64(r.n), "
                   "JSON_QUERY_ARRAY(r.result), JSON_QUERY_ARRAY(r, '$.result'), "
                   "JSON_EXTRACT_SCALAR(r, '$.v') FROM t")
    assert sql == ("SELECT CAST(r.v AS DOUBLE), CAST(r.n AS BIGINT), CAST(CAST(r.result AS JSON)"
                   " AS JSON[]), CAST(CAST(JSON_EXTRACT(r, '$.result') AS JSON) AS JSON[]), "
                   "r ->> '$.v' FROM t")


def test_field_access_on_a_report_as_bigquery_names_and_reads_it() -> None:
    """A field access is named by its last field; an output alias followed by fields in ORDER
    BY or HAVING is field access on that column (written in parentheses, so that the SQL
    planned reads it so), a table's qualified column is left alone. ORDER BY a JSON field is
    refused (DuckDB would order its text: 10349 before 9650), naming DOUBLE(...)."""
    sql, _ = split("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                   "COUNT(*, report_format => 'JSON')"
                   ".result.noise_confidence_interval, COUNT(*, report_format => 'JSON') AS r "
                   "FROM t AS s HAVING DOUBLE(r.result.value) > 1 ORDER BY "
                   "DOUBLE(r.result.value), s.x")
    assert sql == ('SELECT DPSQL_REPORT(COUNT(*)).result.noise_confidence_interval AS '
                   '"noise_confidence_interval", DPSQL_REPORT(COUNT(*)) AS r FROM t AS s HAVING '
                   'CAST((r).result.value AS DOUBLE) > 1 ORDER BY CAST((r).result.value AS '
                   'DOUBLE), s.x')
    with pytest.raises(UnsupportedQuery, match=r"DOUBLE\(r.result.value\)"):
        split("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
              "COUNT(*, report_format => 'JSON') AS r "
              "FROM t ORDER BY r.result.value")


def test_resolve_takes_the_clause_over_the_front_door() -> None:
    sql, epsilon, delta, bounds = resolve(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.25, delta = 0, "
        "max_groups_contributed = 2) COUNT(*) FROM t", 0.3, 1e-6, ContributionBounds(7, 5))
    assert (epsilon, delta, bounds) == (0.25, 0.0, ContributionBounds(7, 2, groups_bound=True))
    assert sql.split() == ["SELECT", "COUNT(*)", "FROM", "t"]


@pytest.mark.parametrize(("sql", "error", "words"), [
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1 COUNT(*) FROM t", SQLSyntaxError,
     "not closed"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon) COUNT(*) FROM t", SQLSyntaxError,
     "name = value"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(nonsense = 1) COUNT(*) FROM t", UnsupportedQuery,
     "not an option"),
    ("SELECT WITH ANONYMIZATION COUNT(*) FROM t", UnsupportedQuery, "DIFFERENTIAL_PRIVACY"),
    ("SELECT ANON_SUM(x) FROM t", UnsupportedQuery, "SUM"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM (SELECT WITH DIFFERENTIAL_PRIVACY x FROM "
     "t)", UnsupportedQuery, "one WITH DIFFERENTIAL_PRIVACY"),
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
    ("SELECT COUNT(*, report_format => 'PROTO') FROM t", UnsupportedQuery, "'JSON'"),
    ("SELECT COUNT(*, report_format => 'XML') FROM t", UnsupportedQuery, "'JSON'"),
])
def test_refusals_say_what_to_write(sql: str, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        split(sql)
