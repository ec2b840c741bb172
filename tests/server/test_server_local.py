"""A BI tool's table preview through the wire: `SELECT * FROM people LIMIT 100` answered with
local DP rows (the sample metadata opts people in), charged the row epsilon once, the same rows
again for free; a join with a private table refused with its SQLSTATE."""

from __future__ import annotations

import os
import subprocess
from types import SimpleNamespace

import psycopg
import pytest
from psycopg import errors as pg_errors

PASSWORD = "local pw"
PREVIEW = "SELECT * FROM people LIMIT 100"


def _connect(served: SimpleNamespace) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=served.port, user="alice", password=PASSWORD,
                           dbname="dpsql", connect_timeout=10, autocommit=True)


def _spent(served: SimpleNamespace) -> float:
    return float(served.db.budget("alice").spent.epsilon)


def test_a_table_preview_is_randomized_rows_charged_once(served: SimpleNamespace) -> None:
    before = _spent(served)
    with _connect(served) as conn:
        cur = conn.execute(PREVIEW)
        names = [d.name for d in cur.description or []]
        rows = cur.fetchall()
        assert _spent(served) - before == pytest.approx(2.0)  # the row epsilon x k = 1
        assert conn.execute(PREVIEW).fetchall() == rows  # stored: the same rows, free
        assert _spent(served) - before == pytest.approx(2.0)
        with pytest.raises(pg_errors.FeatureNotSupported):
            conn.execute("SELECT p.age, v.amount FROM people p JOIN visits v "
                         "ON p.person_id = v.person_id")
    assert len(rows) == 100 and names[:3] == ["person_id", "age", "sex"]
    assert all(r[names.index("person_id")] is None and r[names.index("email")] is None
               for r in rows)
    assert {r[names.index("sex")] for r in rows} <= {"F", "M"}
    assert _spent(served) - before == pytest.approx(2.0)


def test_psql_previews_rows(served: SimpleNamespace) -> None:
    env = {**os.environ, "PGPASSWORD": PASSWORD}
    out = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-p", str(served.port), "-U", "alice", "-d", "dpsql",
         "-X", "-A", "-t", "-c", "SELECT sex, age FROM people WHERE sex = 'F' LIMIT 5"],
        capture_output=True, text=True, env=env, timeout=60, check=True)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 5 and all(line.startswith("F|") for line in lines)


def test_previews_of_any_size_read_one_copy_and_say_they_are_randomized(
        served: SimpleNamespace) -> None:
    """LIMIT 3 then LIMIT 100 (and a filter): one charge for the analyst's copy, the first
    three rows the same, every answer with the NOTICE that its rows are randomized and one
    saying what was charged (or that nothing was)."""
    notices: list[str] = []
    before = _spent(served)
    with _connect(served) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        three = conn.execute("SELECT age, sex FROM people LIMIT 3").fetchall()
        first = list(notices)
        hundred = conn.execute("SELECT age, sex FROM people LIMIT 100").fetchall()
        notices.clear()
        older = conn.execute("SELECT age FROM people WHERE age > 60").fetchall()
    assert hundred[:3] == three and older and all(r[0] > 60 for r in older)
    spent = _spent(served) - before
    assert spent in (0.0, pytest.approx(2.0))  # 0 when an earlier test paid for the copy
    assert "randomized (local differential privacy)" in first[0]
    assert any("does not apply" in n or "No new privacy cost" in n for n in first)
    assert "randomized (local differential privacy)" in notices[0]
    assert any("No new privacy cost" in n for n in notices)
