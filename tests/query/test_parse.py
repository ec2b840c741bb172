"""Pass 1, parse: exactly one SELECT statement, everything else refused before binding."""

from __future__ import annotations

import pytest
from sqlglot import exp

from dpsql.errors import (
    NotASingleSelect,
    QueryRefused,
    QueryTooComplex,
    SQLSyntaxError,
    UnsupportedQuery,
)
from dpsql.query.parse import MAX_SQL_LENGTH, parse


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM people",
    "select count(*) from PEOPLE;",
    "SELECT COUNT(*) FROM people ;;",
    "-- a comment\nSELECT /* inline */ COUNT(*) FROM people -- trailing",
    "WITH a AS (SELECT * FROM people) SELECT COUNT(*) FROM a",
    "FROM people SELECT COUNT(*)",  # DuckDB's FROM-first syntax is still one SELECT
    'SELECT "Age" FROM "People"',
])
def test_one_select_is_accepted(sql: str) -> None:
    assert isinstance(parse(sql), exp.Select)


def test_parse_returns_the_only_statement() -> None:
    tree = parse("SELECT sex, COUNT(*) FROM people GROUP BY sex")
    assert tree.args["group"] is not None
    assert [e.sql() for e in tree.expressions] == ["sex", "COUNT(*)"]


@pytest.mark.parametrize("sql", ["", "   ", "\n\t", ";"])
def test_empty_query(sql: str) -> None:
    with pytest.raises(QueryRefused):
        parse(sql)


def test_non_string_query() -> None:
    with pytest.raises(SQLSyntaxError, match="empty"):
        parse(None)  # type: ignore[arg-type]


def test_too_long() -> None:
    sql = "SELECT COUNT(*) FROM people WHERE " + " OR ".join(["age = 1"] * (MAX_SQL_LENGTH // 7))
    with pytest.raises(QueryTooComplex, match="longer than"):
        parse(sql)


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM people WHERE " + "(" * 5000 + "age = 1" + ")" * 5000,
    "SELECT COUNT(*) FROM people WHERE " + " OR ".join(["age = 1"] * 3000),
    "SELECT COUNT(*) FROM people WHERE " + "NOT " * 5000 + "age = 1",
    "SELECT COUNT(*) FROM people WHERE age = " + "- " * 5000 + "1",
])
def test_too_complex_is_54001_before_or_during_the_parse(sql: str) -> None:
    with pytest.raises(QueryTooComplex) as info:
        parse(sql)
    assert info.value.sqlstate == "54001"


def test_parentheses_in_strings_and_comments_do_not_count() -> None:
    deep = "(" * 200
    parse(f"SELECT COUNT(*) FROM people WHERE name <> '{deep}' -- {deep}\n")


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM people WHERE age >",
    "SELECT 'unterminated",
    "SELECT COUNT(* FROM people",
])
def test_syntax_errors(sql: str) -> None:
    with pytest.raises(SQLSyntaxError, match="cannot parse the query") as info:
        parse(sql)
    assert "\x1b[" not in str(info.value)  # no terminal escape codes in messages


@pytest.mark.parametrize(("sql", "at"), [
    ("SELECT COUNT(* FROM people", "FROM"),
    ("SELECT sex,\n  COUNT(* FROM people\nGROUP BY sex", "FROM"),
    ("SELEC COUNT(*) FROM people", "SELEC"),  # the misspelt word, as PostgreSQL points
    ("SELECT\tCOUNT(*\tFROM people", "FROM"),  # a tab is one character
    ("SELECT COUNT(*)\r\nFROM people\r\nWHERE age IN (1,\r\n2 AND", "AND"),  # CRLF
    ("SELECT COUNT(*) FROM people WHERE sex = '日本' AND (age > 3 FROM", "FROM"),  # characters
    ("/* a comment */ slect COUNT(*) FROM people", "slect"),
    ("SELECT 'unterminated", None),  # the tokenizer gives no position
])
def test_a_syntax_error_carries_its_position(sql: str, at: str | None) -> None:
    with pytest.raises(SQLSyntaxError) as info:
        parse(sql)
    assert info.value.position == (None if at is None else sql.rindex(at) + 1)


def test_several_statements() -> None:
    with pytest.raises(NotASingleSelect, match="2 statements"):
        parse("SELECT COUNT(*) FROM people; SELECT COUNT(*) FROM people")
    with pytest.raises(NotASingleSelect, match="3 statements"):
        parse("SELECT 1; DROP TABLE people; SELECT 2")


@pytest.mark.parametrize(("sql", "kind"), [
    ("DROP TABLE people", "DROP"),
    ("CREATE TABLE x (a INT)", "CREATE"),
    ("CREATE TABLE x AS SELECT * FROM people", "CREATE"),
    ("CREATE MACRO m(a) AS a", "CREATE"),
    ("INSERT INTO people VALUES (1)", "INSERT"),
    ("UPDATE people SET age = 1", "UPDATE"),
    ("DELETE FROM people", "DELETE"),
    ("PRAGMA version", "PRAGMA"),
    ("SET threads = 1", "SET"),
    ("SET enable_external_access = true", "SET"),
    ("RESET threads", "RESET"),
    ("COPY people TO 'out.csv'", "COPY"),
    ("ATTACH 'other.db' AS other", "ATTACH"),
    ("DETACH other", "DETACH"),
    ("INSTALL httpfs", "INSTALL"),
    ("LOAD httpfs", "LOAD"),
    ("CALL pragma_version()", "CALL"),
    ("EXPORT DATABASE 'dir'", "EXPORT"),
    ("IMPORT DATABASE 'dir'", "IMPORT"),
    ("DESCRIBE people", "DESCRIBE"),
    ("SHOW TABLES", "SHOW"),
    ("SUMMARIZE people", "SUMMARIZE"),
    ("EXPLAIN SELECT COUNT(*) FROM people", "EXPLAIN"),
    ("USE main", "USE"),
    ("VACUUM", "VACUUM"),
    ("VALUES (1), (2)", "VALUES"),
    ("PIVOT people ON sex USING COUNT(*)", "PIVOT"),
])
def test_statements_that_are_not_a_select(sql: str, kind: str) -> None:
    with pytest.raises(NotASingleSelect) as info:
        parse(sql)
    message = str(info.value)
    assert kind in message and "only SELECT" in message


@pytest.mark.parametrize(("sql", "kind"), [
    ("SELECT COUNT(*) FROM people UNION SELECT COUNT(*) FROM people", "UNION"),
    ("SELECT COUNT(*) FROM people UNION ALL SELECT COUNT(*) FROM visits", "UNION"),
    ("SELECT COUNT(*) FROM people INTERSECT SELECT COUNT(*) FROM people", "INTERSECT"),
    ("SELECT COUNT(*) FROM people EXCEPT SELECT COUNT(*) FROM people", "EXCEPT"),
])
def test_set_operations(sql: str, kind: str) -> None:
    with pytest.raises(UnsupportedQuery, match=f"set operations \\({kind}\\)"):
        parse(sql)


def test_refusals_are_query_refused() -> None:
    # One base class for every refusal: front doors catch it, nothing is charged.
    for sql in ("DROP TABLE people", "SELECT 1 UNION SELECT 2", "SELECT (", ""):
        with pytest.raises(QueryRefused):
            parse(sql)


def test_other_dialect() -> None:
    tree = parse("SELECT COUNT(*) FROM `people`", dialect="bigquery")
    assert isinstance(tree, exp.Select)
