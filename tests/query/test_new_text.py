"""A new text's fixed cost (issue 39): the shortcuts taken for it write what the long way wrote.

- The key of stored answers is the normalised text itself when every identifier is in lower
  case already (:func:`dpsql.query.parameters.lower_case_names`): no copy, no second generation.
- Types are built from sqlglot's type names, never parsed from a string: the same trees.
"""

from __future__ import annotations

import pytest
from sqlglot import exp

from dpsql.database import Database
from dpsql.errors import Error
from dpsql.query.parameters import bound_query, lower_case_names
from grammar_tests.corpus import load_corpus

CASES = [case.sql for case in load_corpus()]


def _bound(sql: str) -> tuple[str, exp.Expression] | None:
    try:
        return bound_query(sql)
    except Error:
        return None  # refused before planning: no key


def test_the_corpus_has_both_kinds() -> None:
    bound = [b for b in map(_bound, CASES) if b is not None]
    assert sum(lower_case_names(tree) for _, tree in bound) > 100
    assert any(not lower_case_names(tree) for _, tree in bound)


@pytest.mark.parametrize("sql", CASES)
def test_a_lower_case_text_is_its_own_key(sql: str) -> None:
    bound = _bound(sql)
    if bound is None or not lower_case_names(bound[1]):
        return
    text, tree = bound
    assert Database.key_text(tree.copy()) == text


@pytest.mark.parametrize(("sql", "key"), [
    ("SELECT COUNT(*) FROM People WHERE Age > 3", "SELECT COUNT(*) FROM people WHERE age > 3"),
    ('SELECT COUNT(*) FROM "PEOPLE"', 'SELECT COUNT(*) FROM "people"'),
])
def test_other_names_are_normalised(sql: str, key: str) -> None:
    text, tree = bound_query(sql)
    assert not lower_case_names(tree)
    assert text != key
    assert Database.key_text(tree.copy()) == key


@pytest.mark.parametrize("name", ["BIGINT", "DOUBLE", "DATE", "TIMESTAMP", "BOOLEAN", "VARCHAR"])
def test_a_type_from_its_name_is_the_parsed_one(name: str) -> None:
    built = exp.DataType.build(exp.DataType.Type[name])
    parsed = exp.DataType.build(name)
    assert built == parsed
    assert built.sql(dialect="duckdb") == parsed.sql(dialect="duckdb")
    cast = exp.cast(exp.column("x"), exp.DataType.Type[name])
    assert cast.sql(dialect="duckdb") == exp.cast(exp.column("x"), name).sql(dialect="duckdb")


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM people WHERE age >= ? AND income < ?",
    "SELECT COUNT(*) FROM people WHERE age >= $1 AND income < $2",
    "SELECT COUNT(*) FROM people WHERE age >= :low AND income < :high",
])
def test_a_text_with_placeholders_is_parsed_once_and_bound_afresh(
        sql: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parse is kept, never the values: each set of values gives the text and tree a
    fresh parse gives, and the kept tree stays unbound."""
    from dpsql.query import parameters
    parses: list[str] = []
    real = parameters.parse_query

    def counted(text: str, *args: object) -> object:
        parses.append(text)
        return real(text, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(parameters, "parse_query", counted)
    parameters._TEMPLATES.clear()
    for low, high in ((18, 1000), (30, 2500.5), (40, None)):
        values = {"low": low, "high": high} if ":" in sql else (low, high)
        text, tree = bound_query(sql, values)
        parameters._TEMPLATES.clear()  # the long way: parsed again
        fresh_text, fresh_tree = bound_query(sql, values)
        assert (text, tree) == (fresh_text, fresh_tree)
        assert str(low) in text and "?" not in text and "$" not in text
        parses.clear()
        bound_query(sql, values)  # kept by the long way's parse
        assert not parses
    (kept, _), = parameters._TEMPLATES._entries.values()
    assert kept[0].find(exp.Placeholder) is not None


def test_a_moving_parameter_answers_as_a_fresh_parse(make_db: object, kit: object) -> None:
    """Through the library: a kept parse answers as the text written out."""
    import dpsql
    from tests.query.test_dry_shapes import PEOPLE_SQL
    db = make_db(PEOPLE_SQL, {"people": kit.PEOPLE}).db  # type: ignore[operator, attr-defined]
    for age in (20, 30, 40):
        bound = db.explain("SELECT COUNT(*) FROM people WHERE age >= ?", parameters=(age,))
        written = db.explain(f"SELECT COUNT(*) FROM people WHERE age >= {age}")
        assert bound.sql == written.sql
    assert isinstance(db, dpsql.Database)
