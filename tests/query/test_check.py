"""Pass 3, check: the private part (WHERE, keys, aggregate arguments) and the post-processing
part (everything else, over placeholders), and every refusal in between."""

from __future__ import annotations

import pytest

from dpsql.errors import (
    ForbiddenFunction,
    KeyReleaseRefused,
    NestedAggregate,
    NonAggregatedColumn,
    UnboundedExpression,
    UnsupportedAggregate,
    UnsupportedQuery,
    WindowOverPrivateRows,
)
from dpsql.metadata.metadata import Metadata
from dpsql.query.bind import bind
from dpsql.query.check import CheckedQuery, check
from dpsql.query.parse import parse


def c(sql: str, md: Metadata) -> CheckedQuery:
    return check(bind(parse(sql), md))


def outer(q: CheckedQuery) -> str:
    return q.outer.sql(dialect="duckdb")


def calls(q: CheckedQuery) -> list[tuple[object, ...]]:
    return [(a.kind, a.arg.sql(dialect="duckdb") if a.arg is not None else None, a.distinct,
             a.quantile, a.placeholder) for a in q.aggregates]


# ------------------------------------------------------------------ aggregates


def test_aggregates_are_extracted_and_deduplicated(md: Metadata) -> None:
    q = c("SELECT COUNT(*), count(*), SUM(age) + SUM(age), AVG(age) FROM people "
          "HAVING COUNT(*) > 1 ORDER BY SUM(age)", md)
    assert calls(q) == [("count", None, False, None, "__a0"), ("sum", "age", False, None, "__a1"),
                        ("avg", "age", False, None, "__a2")]
    assert outer(q) == "SELECT __a0, __a0, __a1 + __a1, __a2 HAVING __a0 > 1 ORDER BY __a1"
    assert q.keys == [] and q.where is None
    assert q.outer.args.get("group") is None


def test_aggregate_kinds(md: Metadata) -> None:
    q = c("SELECT MEDIAN(age), QUANTILE_CONT(age, 0.9), "
          "PERCENTILE_CONT(0.1) WITHIN GROUP (ORDER BY age), MIN(age), MAX(age), VAR_POP(age), "
          "VARIANCE(age), VAR(age), STDDEV_POP(age), STDDEV(age), VAR_SAMP(age), "
          "STDDEV_SAMP(age), COUNT(income), COUNT(DISTINCT pid), COUNT(DISTINCT sex) FROM people",
          md)
    got = [(kind, quantile) for kind, _, _, quantile, _ in calls(q)]
    assert got == [("quantile", 0.5), ("quantile", 0.9), ("quantile", 0.1), ("quantile", 0.0),
                   ("quantile", 1.0), ("var_pop", None), ("var_samp", None),
                   ("stddev_pop", None), ("stddev_samp", None), ("count", None),
                   ("count", None), ("count", None)]
    assert [a.distinct for a in q.aggregates][-3:] == [False, True, True]
    # VARIANCE, VAR and VAR_SAMP are one aggregate; STDDEV and STDDEV_SAMP too.
    assert outer(q).count("__a6") == 3 and outer(q).count("__a8") == 2


def test_filter_and_count_if_become_case(md: Metadata) -> None:
    q = c("SELECT COUNT_IF(age > 30), SUM(age) FILTER (WHERE sex = 'F'), "
          "COUNT(*) FILTER (WHERE kids = 0) FROM people", md)
    assert [arg for _, arg, _, _, _ in calls(q)] == [
        "CASE WHEN age > 30 THEN 1 END", "CASE WHEN sex = 'F' THEN age END",
        "CASE WHEN kids = 0 THEN 1 END"]


def test_where_stays_private(md: Metadata) -> None:
    q = c("SELECT COUNT(*) FROM people WHERE age > 30 AND sex = 'F'", md)
    assert q.where is not None and q.where.sql() == "age > 30 AND sex = 'F'"
    assert outer(q) == "SELECT __a0"


# ------------------------------------------------------------------ GROUP BY


def test_group_by_ordinal_alias_expression_and_all(md: Metadata) -> None:
    q = c("SELECT sex, kids, COUNT(*) FROM people GROUP BY 2, sex, kids", md)
    assert [k.sql() for k in q.keys] == ["kids", "sex"]  # deduplicated, in GROUP BY order
    assert outer(q) == "SELECT __k1, __k0, __a0"
    q = c("SELECT kids + 1 AS k1, COUNT(*) AS n FROM people GROUP BY k1 ORDER BY k1", md)
    assert [k.sql() for k in q.keys] == ["kids + 1"]
    assert outer(q) == "SELECT __k0 AS k1, __a0 AS n ORDER BY k1"
    q = c("SELECT sex, COUNT(*) FROM people GROUP BY ALL", md)
    assert [k.sql() for k in q.keys] == ["sex"]
    q = c("SELECT kids + 1, COUNT(*) FROM people GROUP BY kids + 1", md)
    assert outer(q) == "SELECT __k0, __a0"


def test_distinct_becomes_group_by(md: Metadata) -> None:
    q = c("SELECT DISTINCT sex, kids FROM people", md)
    assert [k.sql() for k in q.keys] == ["sex", "kids"]
    assert q.aggregates == []
    assert outer(q) == "SELECT __k0, __k1"
    assert not q.outer.args.get("distinct")


def test_group_by_errors(md: Metadata) -> None:
    with pytest.raises(UnsupportedQuery, match="GROUP BY 3 is out of range"):
        c("SELECT sex, SUM(age) FROM people GROUP BY 3", md)
    with pytest.raises(NestedAggregate, match="GROUP BY COUNT"):
        c("SELECT COUNT(*) FROM people GROUP BY COUNT(*)", md)
    with pytest.raises(KeyReleaseRefused, match="privacy unit 'pid'"):
        c("SELECT pid, COUNT(*) FROM visits GROUP BY pid", md)
    with pytest.raises(KeyReleaseRefused, match="privacy unit"):
        c("SELECT COUNT(*) FROM visits GROUP BY pid % 10", md)


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize(("sql", "match"), [
    ("SELECT age FROM people", "releases age without aggregating"),
    ("SELECT age, COUNT(*) FROM people", "column age appears outside an aggregate"),
    ("SELECT sex, age, COUNT(*) FROM people GROUP BY sex", "column age"),
    ("SELECT sex, COUNT(*) FROM people GROUP BY sex HAVING age > 3", "column age"),
    ("SELECT COUNT(*) FROM people ORDER BY age", "column age"),
    ("SELECT COUNT(*) + age FROM people", "column age"),
    ("SELECT * FROM people", "SELECT \\*"),
    ("SELECT people.* FROM people", "SELECT \\*"),
    ("SELECT COUNT(*), * FROM people", "SELECT \\*"),
])
def test_non_aggregated_columns(sql: str, match: str, md: Metadata) -> None:
    with pytest.raises(NonAggregatedColumn, match=match):
        c(sql, md)


@pytest.mark.parametrize("sql", [
    "SELECT SUM(AVG(age)) FROM people",
    "SELECT COUNT(COUNT(*)) FROM people",
    "SELECT sex, MAX(SUM(age)) FROM people GROUP BY sex",
    "SELECT SUM(age + COUNT(*)) FROM people",
])
def test_nested_aggregates(sql: str, md: Metadata) -> None:
    with pytest.raises(NestedAggregate, match="cannot be nested"):
        c(sql, md)


@pytest.mark.parametrize("sql", [
    "SELECT ROW_NUMBER() OVER () FROM people",
    "SELECT age, ROW_NUMBER() OVER () FROM people",
    "SELECT COUNT(*) OVER () FROM people",
    "SELECT SUM(age) OVER (PARTITION BY sex) FROM people",
    "SELECT sex, SUM(age) OVER () FROM people GROUP BY sex",
    "SELECT COUNT(*), RANK() OVER (PARTITION BY age) FROM people",
    "SELECT SUM(ROW_NUMBER() OVER ()) FROM people",
    "SELECT COUNT(*) FROM people WHERE ROW_NUMBER() OVER () > 3",
    "SELECT COUNT(*) FROM people GROUP BY ROW_NUMBER() OVER ()",
])
def test_windows_over_private_rows(sql: str, md: Metadata) -> None:
    with pytest.raises(WindowOverPrivateRows):
        c(sql, md)


def test_windows_over_aggregates_are_post_processing(md: Metadata) -> None:
    q = c("SELECT sex, COUNT(*) AS n, SUM(COUNT(*)) OVER () AS total, "
          "RANK() OVER (ORDER BY COUNT(*) DESC) FROM people GROUP BY sex", md)
    assert calls(q) == [("count", None, False, None, "__a0")]
    assert outer(q) == ("SELECT __k0, __a0 AS n, SUM(__a0) OVER () AS total, "
                        "RANK() OVER (ORDER BY __a0 DESC)")
    q = c("SELECT kids, COUNT(*) FROM people GROUP BY kids "
          "QUALIFY ROW_NUMBER() OVER (ORDER BY COUNT(*) DESC) <= 2", md)
    assert "QUALIFY ROW_NUMBER() OVER (ORDER BY __a0 DESC) <= 2" in outer(q)
    q = c("SELECT kids, SUM(kids) OVER () FROM people GROUP BY kids", md)  # over keys
    assert "SUM(__k0) OVER ()" in outer(q)


@pytest.mark.parametrize(("sql", "match"), [
    ("SELECT SUM(DISTINCT age) FROM people", "COUNT\\(DISTINCT x\\) only"),
    ("SELECT COUNT(DISTINCT age, kids) FROM people", "one expression"),
    ("SELECT QUANTILE_CONT(age, 1.5) FROM people", "from 0 to 1"),
    ("SELECT QUANTILE_CONT(age, kids) FROM people", "number literal"),
    ("SELECT ARRAY_AGG(age) FROM people", "no differentially private implementation"),
    ("SELECT STRING_AGG(sex, ',') FROM people", "supported aggregates: COUNT"),
    ("SELECT BIT_OR(age) FROM people", "no differentially private"),
])
def test_unsupported_aggregates(sql: str, match: str, md: Metadata) -> None:
    with pytest.raises(UnsupportedAggregate, match=match):
        c(sql, md)


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*), getenv('HOME') FROM people",
    "SELECT COUNT(*), current_setting('threads') FROM people",
    "SELECT COUNT(*) + random() FROM people",
    "SELECT COUNT(*) FROM people WHERE getenv('HOME') = 'x'",
    "SELECT SUM(hash(age)) FROM people",
    "SELECT COUNT(*) FROM people WHERE md5(sex) = 'x'",
])
def test_forbidden_functions(sql: str, md: Metadata) -> None:
    with pytest.raises(ForbiddenFunction, match="not allowed"):
        c(sql, md)


def test_where_refusals(md: Metadata) -> None:
    with pytest.raises(UnsupportedQuery, match="put conditions on aggregates in HAVING"):
        c("SELECT COUNT(*) FROM people WHERE COUNT(*) > 3", md)
    with pytest.raises(UnboundedExpression, match="compares text with a number"):
        c("SELECT COUNT(*) FROM people WHERE sex > 3", md)
    with pytest.raises(UnsupportedQuery, match="named WINDOW"):
        c("SELECT COUNT(*) FROM people WINDOW w AS (ORDER BY age)", md)


def test_every_aggregate_the_checker_reads_has_its_privacy_argument() -> None:
    """The checker's vocabulary (query/aggregate_calls.py) and the registry of privacy
    arguments (privacy/aggregates.py) name the same kinds, in the same order."""
    from dpsql.privacy.aggregates import AGGREGATES
    from dpsql.query.aggregate_calls import FUNCTIONS

    assert list(FUNCTIONS) == list(AGGREGATES)
    assert all(a.kind == kind for kind, a in AGGREGATES.items())
