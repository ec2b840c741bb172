"""Run the grammar corpus (``cases/*.sql``): one test per case, id ``file:case name``.

Accepted cases are checked against the plan (``dpsql.routes.planner.Planner.prepare_query``, no data
read) and, with ``run`` or ``rows=``, by answering them on the bundled sample data. Refused cases
must raise exactly the named class of :mod:`dpsql.errors` with a message that says what to do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import dpsql
import dpsql.errors
from dpsql.errors import QueryRefused
from dpsql.execution.free import FreeAnswer
from dpsql.execution.local_rows import LocalRead
from dpsql.execution.public import PublicRead
from dpsql.ledger.spending import LedgerRead
from dpsql.privacy.plan import Plan
from dpsql.routes.planner import Prepared
from dpsql.routes.series import TwoReleases
from grammar_tests.corpus import Case, CorpusFormatError, load_corpus, parse_text, same_float
from grammar_tests.databases import open_database

pytestmark = pytest.mark.usefixtures("seeded_randomness")  # same verdict every run: conftest.py

CASES = load_corpus()
MIN_MESSAGE = 30


@pytest.fixture(scope="module")
def databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dpsql.Database]]:
    """Each database a case file names, opened on first use (grammar_tests/databases.py)."""
    opened: dict[str, dpsql.Database] = {}
    yield opened
    for database in opened.values():
        database.close()


@pytest.fixture
def db(case: Case, databases: dict[str, dpsql.Database],
       tmp_path_factory: pytest.TempPathFactory) -> dpsql.Database:
    if case.database not in databases:
        databases[case.database] = open_database(case.database,
                                                 tmp_path_factory.mktemp(case.database))
    return databases[case.database]


def test_corpus_size_and_unique_names() -> None:
    assert len(CASES) >= 300, f"the corpus has {len(CASES)} cases; it needs at least 300"
    twice = [n for n, c in Counter(c.name for c in CASES).items() if c > 1]
    assert not twice, f"case names used more than once: {twice}"


def test_every_refusal_class_has_cases() -> None:
    used = Counter(c.error for c in CASES if c.error)
    classes = [name for name, cls in vars(dpsql.errors).items() if isinstance(cls, type)
               and issubclass(cls, QueryRefused) and cls is not QueryRefused]
    missing = [name for name in classes if used[name] < 2]
    assert not missing, f"add refused cases (two or more) for {missing}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case, db: dpsql.Database) -> None:
    options = case.options
    # Both doors: the pipeline on the text as written, and the library API, which normalises
    # the text with sqlglot first (Database.plan); they must agree.
    doors = {"prepare": lambda: db.planner.prepare_query(case.sql, **options),
             "Database.plan": lambda: db.plan(case.sql, **options)}
    if case.verdict == "refused":
        for door, fn in doors.items():
            with pytest.raises(QueryRefused) as info:
                fn()
            error = info.value
            assert type(error).__name__ == case.error, (
                f"{door}: refused with {type(error).__name__} ({error}), expected {case.error}")
            message = str(error)
            assert len(message) >= MIN_MESSAGE, f"the message is too short to help: {message!r}"
            for text in case.mentions:
                assert text.lower() in message.lower(), f"{text!r} is not in {message!r}"
        return
    for door, fn in doors.items():
        plan = fn()
        for name, index, op, expected in case.facts:
            if name != "rows":
                actual = _plan_fact(plan, name, index)
                assert _matches(actual, op, expected), (
                    f"{door}: {name}: got {actual!r}, want {expected!r}")
    if case.run:
        result = db.query(case.sql, **options)
        assert [c.name for c in result.columns] == _names(plan)
        for name, _, op, expected in case.facts:
            if name == "rows":
                assert _matches(len(result.rows), op, expected), (
                    f"rows: got {len(result.rows)}, want {op} {expected}")
            if name == "columns":
                assert len(result.columns) == expected
        assert all(len(row) == len(result.columns) for row in result.rows)


def _names(plan: Prepared) -> list[str]:
    return plan.output_names if not isinstance(plan, Plan) else plan.query.output_names


def _plan_fact(prepared: Prepared, name: str, index: int | None) -> object:
    """A fact of the plan: of a public read (no cells, cost 0), of both releases of a
    two-release query (cost: the total; the rest: the outer query), or of a private plan."""
    if name == "path":
        return {PublicRead: "public", TwoReleases: "two", FreeAnswer: "free",
                LocalRead: "local", LedgerRead: "ledger"}.get(type(prepared), "private")
    if name == "names":
        return _names(prepared)
    if isinstance(prepared, FreeAnswer) and name == "cost":
        return (0.0, 0.0)
    if isinstance(prepared, FreeAnswer) and prepared.plan is not None:
        prepared = prepared.plan  # a public domain: the plan's facts (keys, release...)
    if isinstance(prepared, PublicRead | FreeAnswer | LocalRead | LedgerRead):
        cost = (prepared.epsilon, 0.0) if isinstance(prepared, LocalRead) else (0.0, 0.0)
        public = {"columns": len(prepared.columns), "cost": cost, "cells": 0,
                  "measurements": 0, "keys": 0, "release": ("none", None),
                  "types": [c.type for c in prepared.columns]}
        return public[name]
    if name == "cost":
        return (prepared.cost_epsilon, prepared.cost_delta)
    plan = prepared.outer if isinstance(prepared, TwoReleases) else prepared
    if name == "columns":
        return len(plan.query.output_names)
    if name == "cells":
        return len(plan.cells)
    if name == "measurements":
        return len(plan.measurements)
    if name == "keys":
        return len(plan.keys)
    if name == "l1":
        assert index is not None and index < len(plan.measurements), (
            f"no measurement {index}: the plan has {len(plan.measurements)}")
        return plan.measurements[index].l1
    if name == "cost":
        return (plan.cost_epsilon, plan.cost_delta)
    if name == "names":
        return plan.query.output_names
    if name == "types":
        return [c.type for c in plan.cells]
    if name == "release":
        if plan.threshold is not None:
            return ("threshold", None)
        if plan.domain is not None:
            return ("domain", len(plan.domain))
        return ("none", None)
    raise AssertionError(f"unknown fact {name}")


def _matches(actual: object, op: str, expected: object) -> bool:
    if isinstance(expected, tuple) and expected and expected[0] in ("domain", "threshold",
                                                                    "none"):
        kind, size = expected
        return actual[0] == kind and (size is None or actual[1] == size)  # type: ignore[index]
    if isinstance(expected, tuple):  # cost
        # type: ignore[call-overload]
        return all(same_float(a, e) for a, e in zip(actual, expected, strict=True))
    if isinstance(expected, float):
        return same_float(float(actual), expected)  # type: ignore[arg-type]
    if op == "<=":
        return actual <= expected  # type: ignore[operator]
    if op == ">=":
        return actual >= expected  # type: ignore[operator]
    return actual == expected


# --------------------------------------------------------------------------- the format itself


def test_well_formed_text_is_parsed() -> None:
    cases = parse_text(
        "-- a header comment\n\n"
        "-- case: two facts\n"
        "-- options: delta=1e-6 mechanism=gaussian\n"
        "-- expect: accepted cells=1 l1[0]=1 names=\"COUNT(*)\" release=none rows>=1\n"
        "SELECT COUNT(*)\n"
        "-- a comment inside the SQL\n"
        "FROM people;\n\n"
        "-- case: empty\n"
        "-- text: '   '\n"
        "-- expect: refused SQLSyntaxError mentions=empty\n", "x.sql")
    assert [c.id for c in cases] == ["x.sql:two facts", "x.sql:empty"]
    first, second = cases
    assert first.options == {"epsilon": 1.0, "delta": 1e-6, "mechanism": "gaussian"}
    assert first.sql.splitlines()[1] == "-- a comment inside the SQL" and first.run
    assert ("l1", 0, "=", 1.0) in first.facts
    assert second.sql == "   " and second.error == "SQLSyntaxError"


@pytest.mark.parametrize(("text", "line", "words"), [
    ("-- case: a\nSELECT 1\n", 1, "no '-- expect"),
    ("-- case: a\n-- expect: accepted\n\n", 1, "no SQL"),
    ("SELECT 1\n-- case: a\n", 1, "before the first"),
    ("-- case: a\n-- expect: refused NoSuchError\nSELECT 1\n", 2, "not an error class"),
    ("-- case: a\n-- expect: refused\nSELECT 1\n", 2, "needs the error class"),
    ("-- case: a\n-- expect: accepted cels=1\nSELECT 1\n", 2, "unknown fact"),
    ("-- case: a\n-- expect: accepted cells=one\nSELECT 1\n", 2, "bad value"),
    ("-- case: a\n-- expect: accepted types=INT\nSELECT 1\n", 2, "bad value"),
    ("-- case: a\n-- expect: accepted release=maybe\nSELECT 1\n", 2, "bad value"),
    ("-- case: a\n-- expect: refused UnknownTable rows=1\nSELECT 1\n", 2, "accepted cases"),
    ("-- case: a\n-- options: epsilon=x\n-- expect: accepted\nSELECT 1\n", 2, "a number"),
    ("-- case: a\n-- options: budget=1\n-- expect: accepted\nSELECT 1\n", 2, "options are"),
    ("-- case: a\n-- expect: accepted\nSELECT 1\n-- expect: run\n", 4, "after the SQL"),
    ("-- case: a\n-- expect: cells=1\nSELECT 1\n", 2, "must start with"),
    ("-- case:\n-- expect: accepted\nSELECT 1\n", 1, "needs a name"),
    ("-- case: a\n-- text: 42\n-- expect: accepted\n", 2, "string literal"),
])
def test_malformed_case_file_names_file_and_line(text: str, line: int, words: str) -> None:
    with pytest.raises(CorpusFormatError) as info:
        parse_text(text, "broken.sql")
    message = str(info.value)
    assert message.startswith(f"broken.sql:{line}: "), message
    assert words in message


def test_malformed_file_on_disk(tmp_path: Path) -> None:
    (tmp_path / "good.sql").write_text("-- case: fine\n-- expect: accepted\nSELECT 1\n")
    (tmp_path / "bad.sql").write_text("-- case: fine too\n-- expect: accepted\nSELECT 1\n\n"
                                      "-- case: broken\n-- expect: accepted cells=x\nSELECT 1\n")
    with pytest.raises(CorpusFormatError, match=r"^bad\.sql:6: bad value for cells"):
        load_corpus(tmp_path)


def test_default_subset_covers_every_file_and_construct_and_rotates() -> None:
    """The subset the slow harnesses run by default (tests/support/subset.py): every corpus
    file and every SQL feature of the corpus, a different share on each seed, and the whole
    corpus over ``share`` consecutive seeds."""
    from tests.support.subset import SLOW, corpus_subset, sql_features

    if SLOW:
        pytest.skip("DPSQL_SLOW=1: every harness runs every case")
    cases = [c for c in CASES if c.database == "sample" and c.verdict == "accepted"]
    runs = [corpus_subset(cases, 4, seed) for seed in range(4)]
    every = set().union(*(sql_features(c) for c in cases))
    for chosen in runs:
        assert len(chosen) < len(cases) // 2
        assert set().union(*(sql_features(c) for c in chosen)) == every
    assert runs[0] != runs[1]
    assert {c.id for run in runs for c in run} == {c.id for c in cases}
