"""A plan reused for a new text that differs only in its constants (:mod:`dpsql.routes.templates`,
issue 39.1) is the plan of that text made from scratch.

1. Equivalence: for every case of the grammar corpus and its variants that change only numbers
   (each number of the text moved within its width class, one at a time and all at once), a
   database that planned the case first routes the variant as a database that never saw either
   does: the same route, normalised text, answer key, plan (every tree in it), engine SQL and
   noise-free answer, or the same refusal.
2. Attacks: constants that change a privacy decision (a constant-false WHERE, a key's public
   domain, a width or type class, NaN and infinity, huge and negative numbers, strings for
   numbers, date constants at the clamp bounds, parameters) never reuse a plan made for other
   constants, and are answered as from scratch.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlglot import TokenType
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import SqlglotError

from dpsql.audit.oracle import zero_noise
from dpsql.database import Database
from dpsql.errors import QueryRefused
from dpsql.query.dry_shapes import NUMBER, type_of
from dpsql.routes import pipeline
from dpsql.routes.private import PrivatePlan
from dpsql.routes.templates import TEMPORAL
from grammar_tests.corpus import load_corpus
from grammar_tests.databases import open_database

CASES = load_corpus()


def _moved(text: str) -> str:
    """``text`` (a plain unsigned number) moved to another value of its width class; a
    temporal text (:data:`dpsql.routes.templates.TEMPORAL`) to the next day, in its shape."""
    if TEMPORAL.fullmatch(text):
        try:
            day = dt.date.fromisoformat(text[:10])
        except ValueError:  # not a date: its last digit moved, in its shape
            return f"{text[:9]}{(int(text[9]) + 1) % 10}{text[10:]}"
        return (day + dt.timedelta(days=1 if day < dt.date(9999, 12, 31) else -1)
                ).isoformat() + text[10:]
    if "." in text:
        whole, fraction = text.split(".")
        last = int(fraction[-1])
        return f"{whole}.{fraction[:-1]}{last + 1 if last < 8 else last - 1}"
    value = int(text)
    for other in (value + 1, value - 1, value + 7):
        if other >= 0 and type_of(str(other)) == type_of(text):
            return str(other)
    return text


def variants(sql: str) -> Iterator[str]:
    """``sql`` with each plain number moved within its width class, one at a time, then all."""
    try:
        read = DuckDB().tokenize(sql)
    except SqlglotError:
        return  # refused before any plan
    tokens = [t for t in read if (t.token_type == TokenType.NUMBER and NUMBER.fullmatch(t.text))
              or (t.token_type == TokenType.STRING and TEMPORAL.fullmatch(t.text))]
    if not tokens:
        return

    def spelled(changed: list[Any]) -> str:
        out, at = [], 0
        for t in changed:
            text = _moved(t.text)
            out += [sql[at:t.start], f"'{text}'" if t.token_type == TokenType.STRING else text]
            at = t.end + 1
        return "".join([*out, sql[at:]])

    for token in tokens[:6]:
        yield spelled([token])
    if len(tokens) > 1:
        yield spelled(tokens)


class _Pair:
    """One corpus database opened twice: ``warm`` plans a case first, ``cold`` never does."""

    def __init__(self, name: str, folder: Path) -> None:
        self.warm = open_database(name, folder / "warm")
        self.cold = open_database(name, folder / "cold")

    def close(self) -> None:
        self.warm.close()
        self.cold.close()


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, _Pair]]:
    opened: dict[str, _Pair] = {}
    yield opened
    for pair in opened.values():
        pair.close()


def _pair(pairs: dict[str, _Pair], name: str, tmp: pytest.TempPathFactory) -> _Pair:
    if name not in pairs:
        folder = tmp.mktemp(name)
        (folder / "warm").mkdir()
        (folder / "cold").mkdir()
        pairs[name] = _Pair(name, folder)
    return pairs[name]


def _forget(db: Database) -> None:
    db._memo.clear()
    db.planner.plans.clear()
    db.planner.templates.cache.clear()


def _routed(db: Database, sql: str, options: dict[str, object]) -> Any:
    try:
        return db._route(sql, float(options["epsilon"]),  # type: ignore[arg-type]
                         float(options["delta"]), str(options["mechanism"]),  # type: ignore[arg-type]
                         None, None, None)
    except QueryRefused as refused:
        return refused


def _engine_sql(db: Database, route: Any) -> object:
    try:
        return pipeline.engine_sql(route.route.prepared, db.engine)
    except QueryRefused as refused:
        return (type(refused).__name__, str(refused))


def _answer(db: Database, route: Any) -> object:
    result = pipeline.answer(route.route.prepared, db.engine, zero_noise())
    return result.columns, result.rows


def _same_route(warm: Database, got: Any, cold_db: Database, cold: Any, answer: bool) -> None:
    if isinstance(cold, QueryRefused):
        assert isinstance(got, QueryRefused)
        assert (type(got), str(got)) == (type(cold), str(cold))
        return
    assert not isinstance(got, QueryRefused), got
    assert type(got.route) is type(cold.route)
    assert (got.normalised, got.key_text) == (cold.normalised, cold.key_text)
    if isinstance(cold.route, PrivatePlan):  # (only a private plan is ever reused)
        assert got.route.prepared == cold.route.prepared  # every tree of the plan, compared
        assert _engine_sql(warm, got) == _engine_sql(cold_db, cold)
        if answer:
            assert _answer(warm, got) == _answer(cold_db, cold)


REUSED: list[str] = []
REUSED_TEMPORAL: list[str] = []  # reused with a temporal text moved (a dashboard's time range)


def _temporal(sql: str) -> list[str]:
    return [t.text for t in DuckDB().tokenize(sql)
            if t.token_type == TokenType.STRING and TEMPORAL.fullmatch(t.text)]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_reused_plan_is_the_plan_from_scratch(
        case: Any, pairs: dict[str, _Pair], tmp_path_factory: pytest.TempPathFactory) -> None:
    pair = _pair(pairs, case.database, tmp_path_factory)
    for variant in variants(case.sql):
        _forget(pair.warm)
        _forget(pair.cold)
        first = _routed(pair.warm, case.sql, case.options)  # learnt, where it may be
        planned = _plans(pair.warm)
        got = _routed(pair.warm, variant, case.options)
        cold = _routed(pair.cold, variant, case.options)
        reused = not isinstance(got, QueryRefused) and _plans(pair.warm) == planned and \
            not isinstance(first, QueryRefused) and got.normalised != first.normalised
        if reused:
            REUSED.append(variant)
            if _temporal(variant) != _temporal(case.sql):
                REUSED_TEMPORAL.append(variant)
        _same_route(pair.warm, got, pair.cold, cold, answer=reused)


def _plans(db: Database) -> int:
    """How many plans the database made from scratch (a reused one is not among them)."""
    return sum(1 for key in db.planner.plans._entries if key[0] == "plan")


def test_the_corpus_reuses_plans() -> None:
    """The equivalence above is about reuse: enough variants were reused (run after it)."""
    if not REUSED:
        pytest.skip("run with the equivalence test")
    assert len(REUSED) >= 20, REUSED
    assert len(REUSED_TEMPORAL) >= 3, REUSED_TEMPORAL
