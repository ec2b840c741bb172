"""The smaller things an analyst meets (issue 36.6), through every door: the command line as a
subprocess, the DB-API, psycopg over the server.

* a misspelt table or column name is refused with the closest declared name ("did you mean");
* ``DATE_TRUNC`` of a DATE is a DATE (not a timestamp at midnight);
* an integer cell's whole ± is an integer (``12``, not ``12.0``);
* a select item without an alias is named as PostgreSQL names it (``count``, ``avg``,
  ``date_trunc``, ``?column?``), not by its SQL text or DuckDB's ``count_star()``;
* a syntax error's position is in the text as written (after a ``?`` placeholder too).
"""

from __future__ import annotations

import csv
import datetime as dt
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
from tests.support.helpers import SAMPLE, sample_tables_toml
from tests.support.sandbox import served_sandbox

PASSWORD = "details pw"
MONTHLY = ("SELECT DATE_TRUNC('month', day), COUNT(*), AVG(amount) FROM visits "
           "WHERE day < DATE '2025-03-01' GROUP BY 1 ORDER BY 1")
NAMES = ["date_trunc", "count", "avg"]
MONTHS = [dt.date(2025, 1, 1), dt.date(2025, 2, 1)]


@pytest.fixture
def metadata(tmp_path: Path) -> Path:
    path = tmp_path / "metadata.toml"
    path.write_text('[budget]\nledger = "ledger.sqlite"\n[analysts.alice]\nepsilon = 50.0\n'
                    "delta = 1e-5\n" + sample_tables_toml())
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    with served_sandbox(tmp_path_factory.mktemp("details"), PASSWORD) as running:
        yield running


def pg(served: SimpleNamespace) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=served.port, user="alice", password=PASSWORD,
                           dbname="dpsql", autocommit=True, connect_timeout=10)


def cli(metadata: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "DPSQL_ANALYST": "alice"}
    env.pop("DPSQL_LEDGER", None)  # the metadata's own ledger
    return subprocess.run([sys.executable, "-m", "dpsql", "query", "-d", str(SAMPLE), "-m",
                           str(metadata), *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


# -- did you mean ------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_dpsql_env")
def test_did_you_mean_on_every_door(metadata: Path, served: SimpleNamespace) -> None:
    table, column = "SELECT COUNT(*) FROM peple", "SELECT AVG(incme) FROM people"
    proc = cli(metadata, table)
    assert proc.returncode == 2 and "(did you mean 'people'?)" in proc.stderr
    assert "Traceback" not in proc.stderr
    with dpsql.connect(database=SAMPLE, metadata=metadata, analyst="alice") as conn, \
            pytest.raises(dpsql.UnknownColumn, match=r"did you mean 'income'\?"):
        conn.execute(column)
    with pg(served) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable, match=r"did you mean 'people'\?"):
            conn.execute(table)
        with pytest.raises(psycopg.errors.UndefinedColumn, match=r"did you mean 'income'\?"):
            conn.execute(column)
        with pytest.raises(psycopg.errors.UndefinedTable) as far:  # nothing close: no guess
            conn.execute("SELECT COUNT(*) FROM xyz")
        assert "did you mean" not in str(far.value)


# -- dates, integer accuracies, names: one monthly query on each door -------------------------


@pytest.mark.usefixtures("no_dpsql_env")
def test_the_command_line(metadata: Path) -> None:
    table = cli(metadata, MONTHLY, "--accuracy")
    assert table.returncode == 0, table.stderr
    header, _, first, second = table.stdout.splitlines()
    assert [h.strip() for h in header.split("|")] == [
        "date_trunc", "count", "count ±95%", "avg", "avg ±95%"]
    assert [first.split("|")[0].strip(), second.split("|")[0].strip()] == [
        "2025-01-01", "2025-02-01"]  # a date, no 00:00:00
    rows = list(csv.reader(io.StringIO(cli(metadata, MONTHLY, "--format", "csv",
                                           "--accuracy").stdout)))
    assert rows[0] == ["date_trunc", "count", "count ±95%", "avg", "avg ±95%"]
    for row in rows[1:]:
        assert row[2].isdigit()  # the count's ± is whole: 1349, not 1348.0795
    answer = json.loads(cli(metadata, MONTHLY, "--format", "json").stdout)
    assert [(c["name"], c["type"]) for c in answer["columns"]] == [
        ("date_trunc", "DATE"), ("count", "BIGINT"), ("avg", "DOUBLE")]
    assert [r["date_trunc"] for r in answer["rows"]] == ["2025-01-01", "2025-02-01"]
    assert all(isinstance(r["count ±95%"], int) for r in answer["rows"])
    assert all(isinstance(r["avg ±95%"], float) for r in answer["rows"])
    twice = json.loads(cli(metadata, "SELECT COUNT(*), COUNT(DISTINCT person_id) FROM visits",
                           "--format", "json").stdout)
    assert [c["name"] for c in twice["columns"]] == ["count", "count_1"]  # JSON keys
    assert set(twice["rows"][0]) == {"count", "count ±95%", "count_1", "count_1 ±95%"}


@pytest.mark.usefixtures("no_dpsql_env")
def test_the_dbapi(metadata: Path) -> None:
    with dpsql.connect(database=SAMPLE, metadata=metadata, analyst="alice") as conn:
        cur = conn.execute(MONTHLY)
        assert [d[0] for d in cur.description] == NAMES
        assert cur.description[0][1] == dpsql.DATETIME
        rows = cur.fetchall()
        assert [r[0] for r in rows] == MONTHS and all(type(r[0]) is dt.date for r in rows)
        assert all(type(a[1]) is int and type(a[2]) is float for a in cur.accuracy)
        df = conn.execute(MONTHLY).fetch_df()  # the stored answer: the same names and types
        assert list(df.columns) == ["date_trunc", "count", "count ±95%", "avg", "avg ±95%"]
        assert str(df["count ±95%"].dtype) == "int64"
        with pytest.raises(dpsql.SQLSyntaxError) as e:  # ? is read as $1: placed as written
            conn.execute("SELECT COUNT(*) FROM visits WHERE amount > ? GROUP category", (3,))
        sql = "SELECT COUNT(*) FROM visits WHERE amount > ? GROUP category"
        assert e.value.position == sql.index("GROUP") + 1
        assert f"column {sql.index('GROUP') + 1})" in str(e.value)


def test_the_server(served: SimpleNamespace) -> None:
    with pg(served) as conn:
        cur = conn.execute(MONTHLY)
        assert [d.name for d in cur.description] == NAMES
        assert cur.description[0].type_code == 1082  # date
        rows = cur.fetchall()
        assert [r[0] for r in rows] == MONTHS
        cur = conn.execute("SELECT COUNT(*), SUM(amount) / COUNT(*), COUNT(*) FROM visits")
        assert [d.name for d in cur.description] == ["count", "?column?", "count"]
        cur = conn.execute("SELECT COUNT(*) FROM states")  # public: not DuckDB's count_star()
        assert [d.name for d in cur.description] == ["count"]
