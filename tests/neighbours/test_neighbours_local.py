"""The neighbour test of the local path (dpsql/execution/local_rows.py): a row-level SELECT of
a table opted in to local DP has no exact measurement to compare, so what must not move between
D and D' (one unit added, with extreme values, a NULL, a value outside every domain) is its
charge, the number of rows of a table whose row count is not public, and the released domains."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from dpsql.execution.local_rows import LocalRead
from tests.execution.test_local_rows import ROWS_SQL, TABLES, _open

pytestmark = pytest.mark.usefixtures("no_dpsql_env")


def test_the_charge_and_the_row_count_do_not_depend_on_the_data(tmp_path: Path) -> None:
    """The neighbour test of the local path: D and D' (one unit added, with extreme values,
    a NULL, a value outside every domain) plan to the same charge; a sampled table releases
    the same number of rows; released values stay inside the released domains."""
    outsider = ("INSERT INTO people VALUES (999999, 'X', 2000000000, 'NaN'::DOUBLE, "
                "DATE '9999-12-31', 'x'); INSERT INTO visits VALUES (NULL, 'zzz'), (77, 'q')")
    worlds = {"D": ROWS_SQL, "D'": [*ROWS_SQL, *outsider.split("; ")]}
    seen = {}
    for name, sql in worlds.items():
        folder = tmp_path / name.replace("'", "p")
        folder.mkdir()
        with _open(folder, sql, TABLES) as db:
            plans = [db.plan(q) for q in ("SELECT * FROM people", "SELECT * FROM visits")]
            assert all(isinstance(p, LocalRead) for p in plans)
            drawn = db.query("SELECT * FROM visits").rows
            people = db.query("SELECT sex, pay, day FROM people").rows
        seen[name] = ([p.epsilon for p in plans], len(drawn))  # type: ignore[union-attr]
        assert {r[1] for r in drawn} <= {"a", "b", "c"}
        assert {r[0] for r in people} <= {"F", "M"} and {r[1] for r in people} <= {0.0, 50.0,
                                                                                     None}
        assert {r[2] for r in people} <= {dt.date(y, 1, 1) for y in range(2020, 2024)}
    assert seen["D"] == seen["D'"]


def test_what_a_stored_copy_charges_does_not_depend_on_the_data(tmp_path: Path) -> None:
    """The stored copy (dpsql.routes.local.answer_from_stored_copy) on D and D': the same sequence
    of queries charges the same amounts at the same steps (the first read of a table, each draw a
    sample adds), and a sampled table's answers have the same sizes."""
    outsider = ("INSERT INTO people VALUES (999999, 'X', 2000000000, 'NaN'::DOUBLE, "
                "DATE '9999-12-31', 'x'); INSERT INTO visits VALUES (NULL, 'zzz'), (77, 'q')")
    queries = ["SELECT sex FROM people LIMIT 3", "SELECT * FROM people LIMIT 100",
               "SELECT kind FROM visits TABLESAMPLE (4 ROWS)", "SELECT * FROM visits",
               "SELECT kind FROM visits TABLESAMPLE (50 ROWS)", "SELECT kind FROM visits",
               "SELECT age FROM people WHERE sex = 'F'"]
    seen = {}
    for name, sql in {"D": ROWS_SQL, "D'": [*ROWS_SQL, *outsider.split("; ")]}.items():
        folder = tmp_path / name.replace("'", "p")
        folder.mkdir()
        with _open(folder, sql, TABLES) as db:
            answers = [db.run(q) for q in queries]
        seen[name] = [(None if a.cost is None else a.cost.epsilon,
                       len(a.result.rows) if "visits" in a.sql else None) for a in answers]
    assert seen["D"] == seen["D'"]
    assert [c for c, _ in seen["D"]] == [1.5, None, 2.0, 13.0, 10.0, None, None]
