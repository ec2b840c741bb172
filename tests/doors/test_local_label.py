"""Randomized rows always say so: a row-level SELECT of a local-rows table (people, in the sample
metadata) is never shown without its label, on any door and in any output format -- the CLI run
as a subprocess (table, csv, json), the library, the DB-API, and the wire server through psycopg
(simple and extended protocol, a cursor's DECLARE and FETCH) and psql -- whether the rows come
from the analyst's stored copy, from a per-query draw (stored answers off) or from an unmetered
database. An aggregate of the same table is not labelled: the label marks randomized rows
only."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest

import dpsql
from dpsql.database import ANALYST_ENV
from dpsql.ledger.opening import LEDGER_ENV
from tests.support.sandbox import Sandbox, sandbox, served_sandbox

PASSWORD = "label pw"
#: Words of the label every door must show (dpsql.execution.local_rows.LocalRead.label).
LABEL = "are randomized (local differential privacy), not real"
ROW_QUERIES = [
    "SELECT age, sex, income FROM people LIMIT 3",
    "SELECT age, ROW_NUMBER() OVER (ORDER BY income) AS r FROM people LIMIT 4",
    "SELECT * FROM people WHERE sex = 'F' LIMIT 2",
]
AGGREGATE = "SELECT COUNT(*) AS n FROM people"
LEDGER_MODES = ["stored copy", "per-query draws", "unmetered"]


@pytest.fixture(params=LEDGER_MODES)
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Sandbox:
    mode = request.param
    return sandbox(tmp_path, {"alice": (PASSWORD, 1000.0, 0.5)},
                   reuse_answers=mode != "per-query draws", metered=mode != "unmetered")


@pytest.fixture
def own_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LEDGER_ENV, raising=False)  # the sandbox's ledger
    monkeypatch.setenv(ANALYST_ENV, "alice")


def _cli(setup: Sandbox, sql: str, *options: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != LEDGER_ENV}
    root = str(Path(dpsql.__file__).resolve().parent.parent)
    env.update({ANALYST_ENV: "alice", "PYTHONPATH": root})
    out = subprocess.run([sys.executable, "-m", "dpsql", "query", sql, "--database",
                          str(setup.database), "--metadata", str(setup.metadata), *options],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out


def test_the_cli_labels_randomized_rows_in_every_format(setup: Sandbox) -> None:
    sql = ROW_QUERIES[0]
    table = _cli(setup, sql, "--epsilon", "0.1")
    lines = table.stdout.splitlines()
    assert LABEL in lines[0] and lines[1].split("|")[0].strip() == "age"  # before the table
    assert "does not apply" in table.stderr  # what was charged, and why not --epsilon 0.1
    as_csv = _cli(setup, sql, "--format", "csv")
    assert LABEL in as_csv.stderr  # stdout stays plain CSV
    parsed = list(csv.reader(io.StringIO(as_csv.stdout)))
    assert parsed[0] == ["age", "sex", "income"] and len(parsed) == 4
    as_json = json.loads(_cli(setup, sql, "--format", "json").stdout)
    assert LABEL in as_json["randomized"] and len(as_json["rows"]) == 3
    assert set(as_json["rows"][0]) == {"age", "sex", "income"}
    aggregate = _cli(setup, AGGREGATE, "--format", "json")
    assert LABEL not in aggregate.stdout + aggregate.stderr
    assert json.loads(aggregate.stdout)["randomized"] is None


@pytest.mark.usefixtures("own_env")
def test_the_library_and_the_dbapi_carry_the_label(setup: Sandbox) -> None:
    with dpsql.Database(setup.database, setup.metadata) as db:
        for sql in ROW_QUERIES:
            for _ in range(2):  # a draw, then (where stored) the copy
                result = db.query(sql, epsilon=0.3)
                assert result.randomized and LABEL in (result.local_label or "")
                assert result.notes[0] == result.local_label and result.rows
        assert not db.query(AGGREGATE).randomized
    with dpsql.connect(database=setup.database, metadata=setup.metadata) as conn:
        cur = conn.cursor()
        for sql in ROW_QUERIES:
            cur.execute(sql)
            assert cur.randomized and LABEL in cur.notes[0] and cur.fetchall()
            assert any("epsilon" in note for note in cur.notes[1:])  # the charge, explained
        cur.executemany("SELECT sex FROM people WHERE age > ? LIMIT 2", [(30,), (40,)])
        assert cur.randomized and LABEL in cur.notes[0]
        cur.execute(AGGREGATE)
        assert not cur.randomized and not any(LABEL in n for n in cur.notes)


@pytest.fixture(scope="module")
def served_copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    with served_sandbox(tmp_path_factory.mktemp("label"), PASSWORD) as running:
        yield running


def _connect(served: SimpleNamespace) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=served.port, user="alice", password=PASSWORD,
                           dbname="dpsql", connect_timeout=10)


def test_the_server_sends_the_label_with_every_answer_of_randomized_rows(
        served_copy: SimpleNamespace) -> None:
    notices: list[str] = []
    with _connect(served_copy) as conn:
        conn.autocommit = True
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))

        def labelled(sql: str, params: tuple[object, ...] | None = None,
                     prepare: bool | None = None) -> bool:
            notices.clear()
            assert conn.execute(sql, params, prepare=prepare).fetchall()  # rows came back
            return any(LABEL in n for n in notices)

        for sql in ROW_QUERIES:
            assert labelled(sql)  # simple query protocol
            assert labelled(sql, prepare=True)  # extended
        assert labelled("SELECT sex, age FROM people WHERE age > %s LIMIT 3", (30,))
        conn.autocommit = False
        with conn.transaction():  # a cursor: the label comes with DECLARE, before any FETCH
            notices.clear()
            conn.execute("DECLARE c CURSOR FOR SELECT age, sex FROM people")
            declared = any(LABEL in n for n in notices)
            assert conn.execute("FETCH 5 FROM c").fetchall()
        assert declared
        conn.autocommit = True
        assert not labelled(AGGREGATE)


def test_psql_shows_the_label(served_copy: SimpleNamespace) -> None:
    env = {**os.environ, "PGPASSWORD": PASSWORD}
    out = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-p", str(served_copy.port), "-U", "alice", "-d", "dpsql",
         "-X", "-c", ROW_QUERIES[0]], capture_output=True, text=True, env=env, timeout=60,
        check=True)
    assert LABEL in out.stderr and "age" in out.stdout
