"""Budgets you can chart (dpsql.ledger.spending): daily totals, the 80% warning, the ledger
views through the library and the DB-API, ``dpsql budget``'s formats, and the first charge's
note on the command line."""

from __future__ import annotations

import csv
import datetime as dt
import getpass
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import tomli_w
from click.testing import CliRunner

import dpsql
from dpsql.cli import main
from dpsql.database import Database, sample_paths
from dpsql.errors import (
    ForbiddenFunction,
    MetadataError,
    QueryTimeout,
    UnknownTable,
    UnsupportedQuery,
)
from dpsql.ledger.budget import Cost, LedgerEntry
from dpsql.ledger.spending import (
    BUDGET_NOTE,
    WARN_SHARE,
    budget_warning,
    daily,
    spent_share,
)
from dpsql.metadata.metadata import load_metadata
from dpsql.privacy.accounting import Allowance, BudgetStatus, UnknownAnalyst


def metadata_file(folder: Path, analysts: dict[str, float], owners: list[str] | None = None
                  ) -> Path:
    """The sample tables, a ledger in ``folder`` and these analysts' epsilon totals."""
    _, sample = sample_paths()
    text = sample.read_text(encoding="utf-8")
    tables = text[text.index("\n[tables.") + 1:]
    budget: dict[str, object] = {"ledger": str(folder / "ledger.sqlite")}
    if owners is not None:
        budget["owners"] = owners
    head = tomli_w.dumps({"budget": budget, "analysts": {
        name: {"epsilon": eps, "delta": 1e-3} for name, eps in analysts.items()}})
    path = folder / "metadata.toml"
    path.write_text(head + "\n" + tables, encoding="utf-8")
    return path


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)
    monkeypatch.delenv("DPSQL_ANALYST", raising=False)
    path = metadata_file(tmp_path, {"alice": 10.0, "bob": 10.0, "dana": 1.0}, ["dana"])
    with Database(sample_paths()[0], path) as database:
        yield database


def entry(i: int, analyst: str, at: str, epsilon: float) -> LedgerEntry:
    return LedgerEntry(i, analyst, dt.datetime.fromisoformat(at), "q", Cost(epsilon, 0.0),
                       None)


def test_daily_sums_per_utc_day_and_analyst() -> None:
    entries = [entry(1, "b", "2026-03-01T23:30:00+00:00", 1.0),
               entry(2, "a", "2026-03-01T10:00:00+00:00", 0.5),
               entry(3, "a", "2026-03-01T12:00:00+00:00", 0.25),
               # 00:30 at UTC+1 on March 2 is 23:30 UTC on March 1: a UTC day's charge
               entry(4, "a", "2026-03-02T00:30:00+01:00", 2.0),
               entry(5, "a", "2026-03-02T00:30:00+00:00", 4.0)]
    got = [(d.analyst, d.day.isoformat(), d.queries, d.epsilon) for d in daily(entries)]
    assert got == [("a", "2026-03-01", 3, 2.75), ("b", "2026-03-01", 1, 1.0),
                   ("a", "2026-03-02", 1, 4.0)]


def status(spent: float, total: float = 10.0, delta_spent: float = 0.0) -> BudgetStatus:
    return BudgetStatus("a", Allowance(total, 1e-3), Cost(spent, delta_spent),
                        Cost(max(total - spent, 0.0), 1e-3 - delta_spent))


def test_warning_from_80_percent_of_either_limit() -> None:
    assert spent_share(status(7.9)) == pytest.approx(0.79)
    assert budget_warning(status(7.9)) is None
    said = budget_warning(status(WARN_SHARE * 10.0))
    assert said is not None and said.startswith(BUDGET_NOTE) and "80%" in said
    assert budget_warning(status(1.0, delta_spent=0.9e-3)) is not None  # delta is a limit too


def test_views_through_the_library_own_rows_free(db: Database) -> None:
    db.run("SELECT COUNT(*) FROM visits", epsilon=1.5, analyst="alice")
    db.run("SELECT COUNT(*) FROM visits", epsilon=2.0, analyst="bob")
    answer = db.run("SELECT analyst, queries, epsilon FROM dpsql.spending", analyst="alice")
    assert answer.result.rows == [("alice", 1, 1.5)] and answer.cost is None
    assert db.run("SELECT COUNT(*) FROM dpsql.queries", analyst="bob").result.rows == [(1,)]
    owner = db.run("SELECT analyst FROM dpsql.queries ORDER BY id", analyst="dana")
    assert owner.result.rows == [("alice",), ("bob",)]
    assert db.budget("dana").spent.epsilon == 0.0  # type: ignore[union-attr]
    with pytest.raises(UnknownAnalyst):  # no budget, no rows: as for any query
        db.run("SELECT * FROM dpsql.budgets", analyst="mallory")


@pytest.mark.parametrize("sql, refusal", [
    ("SELECT * FROM dpsql.spending, visits", UnsupportedQuery),
    ("SELECT * FROM dpsql.spending WHERE analyst IN (SELECT 'x' FROM people)", UnsupportedQuery),
    ("SELECT * FROM dpsql.spending, read_csv('/etc/passwd')", UnsupportedQuery),
    ("SELECT query('SELECT 1') FROM dpsql.spending", ForbiddenFunction),
    ("SELECT * FROM dpsql.ledger", UnknownTable),
    ("SELECT nope FROM dpsql.budgets", UnsupportedQuery),
])
def test_a_view_never_reads_anything_else(db: Database, sql: str,
                                          refusal: type[Exception]) -> None:
    with pytest.raises(refusal):
        db.run(sql, analyst="alice")
    assert db.budget("alice").spent.epsilon == 0.0  # type: ignore[union-attr]


#: A ledger read whose work grows with no table's size: 8^12 rows of VALUES (no table named).
_SLOW = ("SELECT analyst, (SELECT COUNT(*) FROM "
         + ", ".join(f"(VALUES (1), (2), (3), (4), (5), (6), (7), (8)) t{i}(x)" for i in range(12))
         + " WHERE t0.x + t11.x > 0) FROM dpsql.budgets")


def test_a_ledger_read_stops_at_the_owners_time_limit(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Leak (availability): a ledger read ran on its own DuckDB with no time limit, so one
    analyst's query held a server thread and a core for as long as they liked. It now stops at
    the owner's statement_timeout, as a public read does, and is charged nothing."""
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)
    path = metadata_file(tmp_path, {"alice": 10.0})
    path.write_text("[server]\nstatement_timeout = 0.5\n" + path.read_text(encoding="utf-8"),
                    encoding="utf-8")
    with Database(sample_paths()[0], path) as database:
        started = time.monotonic()
        with pytest.raises(QueryTimeout, match="not charged"):
            database.run(_SLOW, analyst="alice")
        assert time.monotonic() - started < 10
        assert database.budget("alice").spent.epsilon == 0.0  # type: ignore[union-attr]


def test_dbapi_note_past_80_percent(db: Database) -> None:
    conn = dpsql.connect(sample_paths()[0], db.metadata, analyst="alice")
    try:
        cur = conn.cursor()
        cur.execute("SELECT COUNT(*) FROM visits", epsilon=7.0)
        assert not [n for n in cur.notes if n.startswith(BUDGET_NOTE)]
        cur.execute("SELECT COUNT(*) FROM people", epsilon=1.5)
        said = [n for n in cur.notes if n.startswith(BUDGET_NOTE)]
        assert len(said) == 1 and "alice has spent 85%" in said[0]
    finally:
        conn.close()


def run(*args: str) -> tuple[str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout, result.stderr


def test_budget_formats_since_and_by_day(db: Database) -> None:
    db.run("SELECT COUNT(*) FROM visits", epsilon=1.5, analyst="alice")
    db.run("SELECT COUNT(*) FROM people", epsilon=0.5, analyst="alice")
    db.run("SELECT COUNT(*) FROM visits", epsilon=9.0, analyst="bob")
    m = str(db.metadata.source)
    today = dt.datetime.now(dt.UTC).date().isoformat()
    out, _ = run("budget", "-m", m, "--by", "day", "--format", "csv")
    assert list(csv.reader(io.StringIO(out))) == [
        ["analyst", "day", "queries", "epsilon", "delta"],
        ["alice", today, "2", "2.0", "0.0"], ["bob", today, "1", "9.0", "0.0"]]
    out, _ = run("budget", "-m", m, "--by", "day", "--format", "json", "--since", "2999-01-01")
    assert json.loads(out) == []
    out, _ = run("budget", "-m", m, "--format", "json", "-n", "1", "--analyst", "alice")
    data = json.loads(out)
    assert [b["analyst"] for b in data["budgets"]] == ["alice"]
    assert data["budgets"][0]["epsilon_spent"] == 2.0
    assert [q["sql"] for q in data["queries"]] == ["SELECT COUNT(*) FROM people"]
    out, _ = run("budget", "-m", m, "--format", "csv")
    shares = {r["analyst"]: float(r["share_spent"]) for r in csv.DictReader(io.StringIO(out))}
    assert shares == {"alice": 0.2, "bob": 0.9, "dana": 0.0}
    out, _ = run("budget", "-m", m)  # the table says who is past 80%
    assert "Budget: bob has spent 90%" in out and "alice has spent" not in out


def test_first_charge_is_explained_once(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPSQL_ANALYST", raising=False)
    ledger = tmp_path / "first.sqlite"
    monkeypatch.setenv("DPSQL_LEDGER", str(ledger))
    first = run("query", "SELECT COUNT(*) FROM visits")[1]
    user = getpass.getuser()
    assert f"first charge to analyst {user!r} (the operating-system user" in first
    assert str(ledger) in first and "--analyst" in first and "DPSQL_LEDGER" in first
    assert "first charge" not in run("query", "SELECT COUNT(*) FROM people")[1]
    other = run("query", "SELECT COUNT(*) FROM visits", "--analyst", "zoe")[1]
    assert "first charge to analyst 'zoe' (--analyst" in other


def test_views_are_the_same_on_neighbouring_databases(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack the views must resist: an analyst reads the ledger to learn about the data.
    Two databases that differ by one person (all of person 3's rows), asked the same queries
    (answered, reused, refused), give the same views but for the instants of the charges."""
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)
    answers = []
    worlds = (("with", "(1, 5), (2, 7), (3, 9), (3, 10)"), ("without", "(1, 5), (2, 7)"))
    for world, rows in worlds:
        folder = tmp_path / world
        folder.mkdir()
        data = folder / "d.duckdb"
        with duckdb.connect(str(data)) as con:
            con.execute("CREATE TABLE t (pid BIGINT, x BIGINT)")
            con.execute(f"INSERT INTO t VALUES {rows}")
        meta = folder / "m.toml"
        meta.write_text(tomli_w.dumps({
            "budget": {"ledger": str(folder / "l.sqlite")},
            "analysts": {"eve": {"epsilon": 5.0, "delta": 1e-3}},
            "tables": {"t": {"privacy_unit": "pid", "max_rows_per_unit": 2,
                             "max_groups_per_unit": 1, "columns": {
                                 "pid": {"type": "int"},
                                 "x": {"type": "int", "lower": 0, "upper": 10}}}}}), "utf-8")
        with Database(data, meta, analyst="eve") as db:
            for sql in ("SELECT COUNT(*) FROM t", "SELECT SUM(x) FROM t",
                        "SELECT COUNT(*) FROM t"):  # the last one reused: not charged again
                db.run(sql, epsilon=1.0)
            with pytest.raises(UnsupportedQuery):
                db.run("SELECT * FROM dpsql.queries, t")
            answers.append([db.run(sql).result.rows for sql in (
                "SELECT analyst, queries, epsilon, delta FROM dpsql.spending",
                "SELECT id, analyst, sql, epsilon, delta FROM dpsql.queries ORDER BY id",
                "SELECT * FROM dpsql.budgets")])
    assert answers[0] == answers[1]
    assert answers[0][0] == [("eve", 2, 2.0, 0.0)]


@pytest.mark.parametrize("owners", ["dana", [""], ["*"], [1]])
def test_owners_must_be_a_list_of_logins(tmp_path: Path, owners: object) -> None:
    path = tmp_path / "m.toml"
    path.write_text(tomli_w.dumps({"budget": {"owners": owners},
                                   "analysts": {"a": {"epsilon": 1.0}},
                                   "tables": {"t": {"privacy_unit": "p", "columns": {
                                       "p": {"type": "int"}}}}}), "utf-8")
    with pytest.raises(MetadataError, match="owners must be a list"):
        load_metadata(path)
