"""Pass 2, bind: one declared table, CTEs and subqueries inlined, names resolved."""

from __future__ import annotations

import pytest
from sqlglot import exp

from dpsql.errors import (
    ForbiddenFunction,
    JoinRefused,
    UnknownColumn,
    UnknownTable,
    UnsupportedQuery,
)
from dpsql.metadata.metadata import Metadata
from dpsql.query.bind import BoundQuery, bind
from dpsql.query.parse import parse


def b(sql: str, md: Metadata) -> BoundQuery:
    return bind(parse(sql), md)


def items(q: BoundQuery) -> list[str]:
    return [e.sql(dialect="duckdb") for e in q.select.expressions]


def where(q: BoundQuery) -> str | None:
    return q.where.sql(dialect="duckdb") if q.where is not None else None


def test_plain_table(md: Metadata) -> None:
    q = b("SELECT COUNT(*), SUM(age) FROM people WHERE sex = 'F'", md)
    assert q.table.name == "people"
    assert items(q) == ["COUNT(*)", "SUM(age)"]
    assert where(q) == "sex = 'F'"
    # FROM and WHERE are gone from the bound SELECT: later passes see base columns only.
    assert q.select.args.get("from_") is None and q.select.args.get("where") is None


def test_cte_is_inlined(md: Metadata) -> None:
    q = b("WITH adults AS (SELECT * FROM people WHERE age >= 18) "
          "SELECT COUNT(*) FROM adults WHERE sex = 'M'", md)
    assert q.table.name == "people"
    assert where(q) == "age >= 18 AND sex = 'M'"
    assert q.select.args.get("with_") is None


def test_cte_chain_substitutes_projections_and_ands_filters(md: Metadata) -> None:
    q = b("WITH a AS (SELECT age + 1 AS a1, sex FROM people WHERE age > 10), "
          "b AS (SELECT a1 * 2 AS a2 FROM a WHERE sex = 'F') "
          "SELECT SUM(a2) AS total FROM b WHERE a2 < 100", md)
    assert items(q) == ["SUM(((age + 1) * 2)) AS total"]
    assert where(q) == "(age > 10 AND sex = 'F') AND ((age + 1) * 2) < 100"
    assert q.output_names == ["total"]


def test_subquery_in_from(md: Metadata) -> None:
    q = b("SELECT COUNT(*) FROM (SELECT * FROM people WHERE sex = 'F') AS f WHERE f.age > 3", md)
    assert q.table.name == "people"
    assert where(q) == "sex = 'F' AND age > 3"
    q = b("SELECT AVG(y) FROM (SELECT income / 12 AS y FROM people) WHERE y > 1", md)
    assert items(q) == ["AVG((income / 12))"]
    assert where(q) == "(income / 12) > 1"


def test_cte_inside_a_subquery(md: Metadata) -> None:
    q = b("SELECT COUNT(*) FROM (WITH x AS (SELECT age FROM people) SELECT age AS y FROM x) s "
          "WHERE y > 1", md)
    assert where(q) == "age > 1"


def test_cte_named_like_its_table(md: Metadata) -> None:
    # The CTE cannot refer to itself: inside it, `people` is the declared table.
    q = b("WITH people AS (SELECT * FROM people WHERE age > 50) SELECT COUNT(*) FROM people", md)
    assert q.table.name == "people" and where(q) == "age > 50"


def test_cte_hides_undeclared_projections(md: Metadata) -> None:
    with pytest.raises(UnknownColumn, match=r"'income'.*its columns: age"):
        b("WITH a AS (SELECT age FROM people) SELECT COUNT(income) FROM a", md)


@pytest.mark.parametrize("sql", [
    'SELECT "People"."AGE", p.Sex, COUNT(*) FROM "People" AS p GROUP BY 1, 2',
    "SELECT PEOPLE.age, people.SEX, count(*) FROM People GROUP BY 1, 2",
    "SELECT main.people.age, sex, COUNT(*) FROM main.people GROUP BY 1, 2",
    'SELECT "age", "sex", COUNT(*) FROM "main"."people" GROUP BY 1, 2',
])
def test_qualified_quoted_and_any_case_names(sql: str, md: Metadata) -> None:
    q = b(sql, md)
    assert q.table.name == "people"
    keys = [e for e in q.select.expressions if isinstance(e, exp.Column)]
    assert [c.name for c in keys] == ["age", "sex"]
    assert all(not c.table for c in keys)  # qualifiers are resolved away


def test_output_names_as_written(md: Metadata) -> None:
    q = b('SELECT COUNT(*) AS n, SUM(age), AVG(age) avg_age, p."Sex" FROM people p '
          "GROUP BY p.sex", md)
    assert q.output_names == ["n", "sum", "avg_age", "Sex"]  # no alias: PostgreSQL's name


def test_output_aliases_stay_in_group_having_order(md: Metadata) -> None:
    q = b("SELECT sex AS s, COUNT(*) AS n FROM people GROUP BY s HAVING n > 1 ORDER BY n", md)
    assert q.select.args["group"].expressions[0].name == "s"
    assert q.select.args["having"].this.this.name == "n"
    # ...but an alias is not visible inside WHERE: there `n` would be a column.
    with pytest.raises(UnknownColumn, match="'n'"):
        b("SELECT COUNT(*) AS n FROM people WHERE n > 1", md)


def test_declared_column_wins_over_alias_in_group_by(md: Metadata) -> None:
    q = b("SELECT age AS sex, COUNT(*) FROM people GROUP BY sex", md)
    assert q.select.args["group"].expressions[0].name == "sex"
    assert items(q)[0] == "age AS sex"


def test_unknown_table_lists_declared_tables(md: Metadata) -> None:
    with pytest.raises(UnknownTable, match=r"'nosuch'.*declared tables: people, visits"):
        b("SELECT COUNT(*) FROM nosuch", md)
    with pytest.raises(UnknownTable, match="declared tables: people, visits"):
        b("WITH a AS (SELECT * FROM nothere) SELECT COUNT(*) FROM a", md)


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM other.people",
    "SELECT COUNT(*) FROM db.main.people",
    "SELECT COUNT(*) FROM information_schema.tables",
    "SELECT COUNT(*) FROM 'people.parquet'",
])
def test_other_schemas_catalogs_and_files_are_not_tables(sql: str, md: Metadata) -> None:
    with pytest.raises(UnknownTable, match="declared"):
        b(sql, md)


def test_unknown_column_lists_the_columns(md: Metadata) -> None:
    with pytest.raises(UnknownColumn) as info:
        b("SELECT SUM(salary) FROM people", md)
    message = str(info.value)
    assert "'salary'" in message and "'people'" in message
    assert "age, born, code, income, kids, married, pid, sex, state" in message


def test_wrong_qualifier(md: Metadata) -> None:
    with pytest.raises(UnknownColumn, match="'people' is not the table in FROM \\(v\\)"):
        b("SELECT COUNT(*) FROM visits v WHERE people.age > 1", md)
    with pytest.raises(UnknownColumn, match="'x' is not the table in FROM"):
        b("SELECT COUNT(*) FROM people WHERE x.age > 3", md)


@pytest.mark.parametrize(("sql", "error", "match"), [
    ("SELECT COUNT(*) FROM people, visits", JoinRefused, "cross join"),
    ("SELECT COUNT(*) FROM people CROSS JOIN visits", JoinRefused, "cross join"),
    ("SELECT COUNT(*) FROM people p JOIN visits v ON p.age = v.pid", JoinRefused, "unit"),
    ("SELECT COUNT(*) FROM people, LATERAL (SELECT 1) x", UnsupportedQuery, "declared tables"),
    ("WITH a AS (SELECT * FROM people JOIN visits USING (pid)) SELECT COUNT(*) FROM a",
     UnsupportedQuery, "outer query"),
    ("SELECT COUNT(*) FROM (SELECT * FROM people, visits) s", UnsupportedQuery, "outer query"),
])
def test_joins_refused(sql: str, error: type[Exception], match: str, md: Metadata) -> None:
    with pytest.raises(error, match=match):
        b(sql, md)


def test_join_on_the_unit_binds_qualified_columns(md: Metadata) -> None:
    q = b("SELECT p.sex, SUM(v.amount) FROM people p JOIN visits v ON p.pid = v.pid "
          "WHERE age > 30 GROUP BY p.sex", md)
    assert q.relation is not None and items(q) == ["p__sex", "SUM(v__amount)"]
    assert where(q) == "p__age > 30"
    assert q.table.column("v__amount") is not None and q.table.privacy_unit == "__join_unit"
    using = b("SELECT COUNT(*) FROM people LEFT JOIN visits USING (pid) WHERE pid > 3", md)
    assert where(using) == "people__pid > 3"
    with pytest.raises(UnknownColumn, match="several joined tables"):
        b("SELECT COUNT(*) FROM people p JOIN visits v ON p.pid = v.pid WHERE pid > 3", md)


@pytest.mark.parametrize(("sql", "what"), [
    ("SELECT COUNT(*) FROM read_csv('x.csv')", "READ_CSV"),
    ("SELECT COUNT(*) FROM read_parquet('x.parquet')", "READ_PARQUET"),
    ("SELECT COUNT(*) FROM glob('*')", "GLOB"),
    ("SELECT COUNT(*) FROM duckdb_tables()", "DUCKDB_TABLES"),
    ("SELECT COUNT(*) FROM range(10)", "RANGE"),
    ("WITH a AS (SELECT * FROM read_csv('x.csv')) SELECT COUNT(*) FROM a", "READ_CSV"),
])
def test_table_functions_are_forbidden(sql: str, what: str, md: Metadata) -> None:
    with pytest.raises(ForbiddenFunction, match="is not a table") as info:
        b(sql, md)
    assert what in str(info.value).upper()


@pytest.mark.parametrize(("sql", "match"), [
    ("SELECT COUNT(*) FROM (SELECT DISTINCT sex FROM people) s", "DISTINCT"),
    ("SELECT COUNT(*) FROM (SELECT age FROM people LIMIT 5) s", "LIMIT"),
    ("WITH a AS (SELECT age FROM people OFFSET 5) SELECT COUNT(*) FROM a", "OFFSET"),
    ("SELECT COUNT(*) FROM (SELECT ROW_NUMBER() OVER () AS r FROM people) s", "ROW_NUMBER"),
    ("WITH a AS (SELECT SUM(age) AS s FROM people) SELECT COUNT(*) FROM a", "SUM"),
    ("WITH a AS (SELECT age + 1 FROM people) SELECT COUNT(*) FROM a", "name with AS"),
    ("WITH RECURSIVE a AS (SELECT age FROM people) SELECT COUNT(*) FROM a", "recursive"),
    ("WITH a AS (SELECT 1 UNION SELECT 2) SELECT COUNT(*) FROM a", "plain SELECT"),
    ("SELECT COUNT(*) FROM people WHERE EXISTS (SELECT 1 FROM visits)", "correlate"),
    ("SELECT COUNT(*) FROM people WHERE age IN (SELECT age FROM people)", "privacy unit"),
    ("SELECT COUNT(*) FROM people WHERE age > (SELECT 1)", "EXISTS"),
    ("SELECT 1", "reads no table"),
])
def test_not_row_level_or_unsupported(sql: str, match: str, md: Metadata) -> None:
    with pytest.raises(UnsupportedQuery, match=match):
        b(sql, md)


@pytest.mark.parametrize(("sql", "expected"), [
    ("sex = ANY('{F,M}')", "sex IN ('F', 'M')"),
    ("sex = ANY(ARRAY['F', NULL])", "sex IN ('F', NULL)"),
    ("age = ANY('{30, 40}'::int[])", "age IN (CAST('30' AS INT), CAST('40' AS INT))"),
    ("sex <> ALL('{\"a,b\",c}')", "NOT sex IN ('a,b', 'c')"),
    ("sex = ANY('{}')", "FALSE"),
    ("sex <> ALL('{}')", "TRUE"),
    ("age > ANY(ARRAY[1])", "age > ANY([1])"),  # left for the checker to refuse
])
def test_any_of_an_array_becomes_in(sql: str, expected: str, md: Metadata) -> None:
    assert where(b(f"SELECT COUNT(*) FROM people WHERE {sql}", md)) == expected


@pytest.mark.parametrize("literal", ["'{F,M'", "'F,M'", "'{{F},{M}}'", "'{F,}'"])
def test_malformed_or_nested_array_literal_is_refused(literal: str, md: Metadata) -> None:
    with pytest.raises(UnsupportedQuery, match="array"):
        b(f"SELECT COUNT(*) FROM people WHERE sex = ANY({literal})", md)


def test_array_literal_parsing_follows_postgresql() -> None:
    from dpsql.query.parameters import bind_parameters, parse_array_literal
    assert parse_array_literal(' { a , "b c" ,NULL, "NULL", "x\\"y", \\, } ') == \
        ["a", "b c", None, "NULL", 'x"y', ","]
    assert parse_array_literal("{{1,2},{3}}") == [["1", "2"], ["3"]]
    assert parse_array_literal("{}") == []
    # a list parameter binds as an array literal of its values, never as SQL text
    assert bind_parameters("SELECT COUNT(*) FROM people WHERE sex = ANY(?)",
                           [["F", "x') OR (1=1"]]) == \
        "SELECT COUNT(*) FROM people WHERE sex = ANY(['F', 'x'') OR (1=1'])"


def test_did_you_mean_the_declared_name(md: Metadata) -> None:
    """A misspelt table or column is refused with the closest declared name (difflib over the
    names the refusal lists anyway), and no guess when none is close."""
    with pytest.raises(UnknownTable, match=r"'peple' .*\(did you mean 'people'\?\)"):
        b("SELECT COUNT(*) FROM peple", md)
    with pytest.raises(UnknownColumn, match=r"'incme' .*\(did you mean 'income'\?\)"):
        b("SELECT AVG(incme) FROM people", md)
    with pytest.raises(UnknownTable) as far:
        b("SELECT COUNT(*) FROM xyz", md)
    assert "did you mean" not in str(far.value)
