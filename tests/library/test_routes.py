"""Routes as objects (dpsql/routes/): every kind of answer says what it costs, how it answers,
its columns and its explanation through the one Route protocol; Database.run reads the query
once and asks no route which kind it is."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import dpsql
import dpsql.database
import dpsql.routes
from dpsql.routes.route import Route
from tests.support.helpers import SAMPLE, sample_tables_toml

pytestmark = pytest.mark.usefixtures("no_dpsql_env")

#: One query per route, with whether it is charged and exact, and its cost's epsilon at 0.5.
ROUTES = [
    ("SELECT region, COUNT(*) AS n FROM states GROUP BY region", False, True, 0.0),
    ("SELECT sex, COUNT(*) AS n FROM people WHERE 1 = 0 GROUP BY sex", False, True, 0.0),
    ("SELECT analyst, epsilon_spent FROM dpsql.budgets", False, True, 0.0),
    ("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", True, False, 0.5),
    ("SELECT state, COUNT(*) AS c FROM people WHERE state IN (SELECT state FROM people "
     "GROUP BY state ORDER BY COUNT(*) DESC LIMIT 3) GROUP BY state", True, False, 0.5),
    ("SELECT COUNT(*) AS n FROM people UNION ALL SELECT COUNT(*) FROM visits", True, False,
     1.0),
]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[dpsql.Database]:
    path = tmp_path / "metadata.toml"
    path.write_text('[budget]\nledger = "ledger.sqlite"\n[analysts.alice]\nepsilon = 20.0\n'
                    "delta = 1e-5\n" + sample_tables_toml())
    with dpsql.Database(SAMPLE, path, analyst="alice") as database:
        yield database


@pytest.mark.parametrize(("sql", "charged", "exact", "epsilon"), ROUTES)
def test_every_route_answers_as_it_says(db: dpsql.Database, sql: str, charged: bool,
                                        exact: bool, epsilon: float) -> None:
    """What a route says before anything runs -- charged or not, exact or not, its cost, its
    columns, its explanation's epsilon -- is what answering it does."""
    route = db.route(sql, 0.5, 1e-6)
    assert isinstance(route, Route)
    assert (route.charged, route.exact) == (charged, exact)
    assert route.cost("basic").epsilon == pytest.approx(epsilon)
    assert route.explain(db.engine).epsilon == pytest.approx(epsilon)
    answered = db.run(sql, 0.5, 1e-6)
    assert route.columns() == [(c.name, c.type) for c in answered.result.columns]
    assert [c.name for c in answered.result.columns] == route.output_names
    charge = answered.cost.epsilon if answered.cost is not None else 0.0
    assert charge == pytest.approx(epsilon)
    assert db.budget().spent.epsilon == pytest.approx(epsilon)  # type: ignore[union-attr]


def test_local_rows_are_charged_once_for_their_copy(db: dpsql.Database) -> None:
    route = db.route("SELECT age, sex FROM people LIMIT 5")
    assert route.charged and not route.exact and route.copy_table == "people"
    first = db.run("SELECT age, sex FROM people LIMIT 5")
    again = db.run("SELECT sex FROM people LIMIT 3")
    assert first.cost is not None
    assert first.cost.epsilon == pytest.approx(route.cost("basic").epsilon)
    assert again.cost is None and again.reused  # the stored copy: post-processing


def test_a_private_query_is_read_once(db: dpsql.Database,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Database.run enters each stage once: the composite check, BigQuery's clause, the
    clock, the route (the planner reads none of them again), the engine check, the charge,
    the answer, the store."""
    calls: dict[str, int] = {}

    def counted(module: object, name: str) -> None:
        real: Callable[..., Any] = getattr(module, name)

        def count(*args: Any, **kwargs: Any) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)
        monkeypatch.setattr(module, name, count)

    import dpsql.routes.planner as planner
    for name in ("composite_of", "resolve_query", "fold_clock"):
        counted(dpsql.database, name)
        if hasattr(planner, name):
            counted(planner, name)
    counted(dpsql.database.Planner, "route")
    counted(dpsql.routes.private.PrivatePlan, "check")
    counted(dpsql.routes.private.PrivatePlan, "answer")
    counted(dpsql.database.Database, "_charge")
    counted(dpsql.database.Database, "_store")
    db.run("SELECT sex, COUNT(*) FROM people GROUP BY sex", 0.5)
    assert calls == {"composite_of": 1, "resolve_query": 1, "fold_clock": 1, "route": 1,
                     "check": 1, "_charge": 1, "answer": 1, "_store": 1}
