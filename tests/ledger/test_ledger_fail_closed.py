"""The ledger fails closed (issue 22): tested the way it was broken.

A ledger deleted, emptied, replaced by a fresh one or by an older copy -- before an open or
while a process has it open -- is refused with :class:`LedgerUnavailable` (SQLSTATE 55000),
never started afresh, and a read of remaining budget never shows a reset. A ledger that cannot
be written (read-only, disk full) refuses the query before it runs. A process killed between
the write and the commit leaves no charge and released nothing. Processes creating one ledger
at the same time share it. The analyst's text names no file; the owner's log line does.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import dpsql.database
import dpsql.ledger.budget
from dpsql.cli import main
from dpsql.database import Database, sample_paths
from dpsql.errors import BudgetExhausted, LedgerError, LedgerUnavailable
from dpsql.ledger.budget import Allowance, Cost, Ledger
from dpsql.ledger.identity import read_record, record_path, state_record_path
from dpsql.routes.private import PrivatePlan

REPO = Path(__file__).resolve().parents[2]
SAMPLE, SAMPLE_METADATA = sample_paths()
COUNT = "SELECT COUNT(*) FROM people"
ALICE = {"alice": Allowance(10.0, 0.0)}


@pytest.fixture(autouse=True)
def _own_ledgers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)  # never the session's shared ledger


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.sqlite"


def _spent_ledger(path: Path, charges: int = 2) -> None:
    with Ledger(path, ALICE) as ledger:
        for i in range(charges):
            ledger.charge("alice", Cost(1.0, 0.0), sql=f"SELECT {i}")


def _refused(path: Path, what: str) -> None:
    with pytest.raises(LedgerUnavailable) as refused:
        Ledger(path, ALICE)
    assert what in str(refused.value.owner_detail)
    assert str(path) in str(refused.value.owner_detail)  # the owner's log names the file
    assert str(path.parent) not in str(refused.value)  # the analyst's text does not
    assert refused.value.sqlstate == "55000"


# --- before an open ---------------------------------------------------------------------------


def test_the_first_open_creates_and_records_the_ledger(path: Path) -> None:
    with Ledger(path, ALICE) as ledger:
        identity = ledger.identity
    assert identity is not None and record_path(path).exists()
    with Ledger(path, ALICE) as again:  # the same ledger opens again
        assert again.identity is not None
        assert again.identity.ledger_id == identity.ledger_id


@pytest.mark.parametrize("pattern", ["ledger.sqlite", "ledger.sqlite*"])
def test_a_deleted_ledger_is_refused_not_recreated(path: Path, pattern: str) -> None:
    _spent_ledger(path)
    for victim in path.parent.glob(pattern):  # `rm ledger.sqlite*` keeps the hidden record
        victim.unlink()
    _refused(path, "missing")
    assert not path.exists()


def test_an_emptied_ledger_is_refused(path: Path) -> None:
    _spent_ledger(path)
    path.write_bytes(b"")
    _refused(path, "empty (0 bytes)")
    assert path.stat().st_size == 0


def test_a_zero_byte_file_is_never_a_new_ledger(path: Path) -> None:
    path.touch()  # no record at all: still not a ledger
    _refused(path, "empty (0 bytes)")


def test_a_fresh_ledger_in_its_place_is_refused(path: Path, tmp_path: Path) -> None:
    _spent_ledger(path)
    other = tmp_path / "other" / "ledger.sqlite"
    other.parent.mkdir()
    Ledger(other, ALICE).close()
    shutil.copy(other, path)
    _refused(path, "not the recorded one")


def test_an_older_copy_in_its_place_is_refused(path: Path, tmp_path: Path) -> None:
    _spent_ledger(path, charges=1)
    backup = tmp_path / "backup.sqlite"
    shutil.copy(path, backup)
    _spent_ledger(path, charges=3)  # three more charges, recorded when it closed
    shutil.copy(backup, path)
    _refused(path, "older copy")


def test_a_charging_process_records_how_far_it_got_without_closing(
        path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server killed with -9 never closes: its charges are recorded every
    RECORD_EVERY_SECONDS, so an older copy put back after it is still refused."""
    monkeypatch.setattr(dpsql.ledger.budget, "RECORD_EVERY_SECONDS", 0.0)
    ledger = Ledger(path, ALICE)
    ledger.charge("alice", Cost(1.0, 0.0), sql="SELECT 1")
    older = tmp_path / "older.sqlite"
    raw = sqlite3.connect(path)
    raw.execute(f"VACUUM INTO '{older}'")
    raw.close()
    for i in range(2):
        ledger.charge("alice", Cost(1.0, 0.0), sql=f"SELECT {i + 2}")
    recorded = read_record(path)
    assert recorded is not None and recorded.generation == 3  # before any close
    ledger.close()
    for leftover in path.parent.glob(path.name + "-*"):
        leftover.unlink()
    os.replace(older, path)
    _refused(path, "older copy")


def test_a_ledger_without_identity_is_adopted_once(path: Path) -> None:
    """A ledger made before identities existed gets one on its first open, then is expected."""
    _spent_ledger(path, charges=1)
    raw = sqlite3.connect(path)
    raw.execute("DELETE FROM settings WHERE key IN ('ledger_id', 'created_at')")
    raw.commit()
    raw.close()
    record_path(path).unlink()
    state_record_path(path).unlink()
    with Ledger(path, ALICE) as ledger:
        assert ledger.status("alice").spent.epsilon == 1.0
        assert ledger.identity is not None and ledger.identity.ledger_id is not None


# --- while open -------------------------------------------------------------------------------


def _replace_by_rename(path: Path, by: Path) -> None:
    os.replace(by, path)


def _delete(path: Path, by: Path) -> None:
    for victim in path.parent.glob(path.name + "*"):
        victim.unlink()


def _empty(path: Path, by: Path) -> None:
    path.write_bytes(b"")


# Not here: an overwrite in place (`cp old ledger.sqlite`, the same inode) while open. SQLite
# reads the pages of its WAL over those of the file, so the open ledger still sees itself; the
# next open compares the file with the record (test_an_older_copy_in_its_place_is_refused).
@pytest.mark.parametrize("change", [_replace_by_rename, _delete, _empty])
def test_a_change_while_open_is_caught_before_the_next_charge_and_read(
        path: Path, tmp_path: Path, change: object) -> None:
    ledger = Ledger(path, ALICE)
    try:
        ledger.charge("alice", Cost(1.0, 0.0), sql="SELECT 1")
        older = tmp_path / "older.sqlite"
        raw = sqlite3.connect(path)  # an older copy: the ledger before its last two charges
        raw.execute(f"VACUUM INTO '{older}'")
        raw.close()
        ledger.charge("alice", Cost(1.0, 0.0), sql="SELECT 2")
        ledger.charge("alice", Cost(1.0, 0.0), sql="SELECT 3")
        change(path, older)  # type: ignore[operator]
        with pytest.raises(LedgerUnavailable):
            ledger.charge("alice", Cost(1.0, 0.0), sql="SELECT 4")
        with pytest.raises(LedgerUnavailable):  # never a status that shows a reset
            ledger.status("alice")
    finally:
        ledger.close()
    if change is _replace_by_rename:
        raw = sqlite3.connect(path)
        assert raw.execute("SELECT COUNT(*) FROM charges WHERE sql = 'SELECT 4'"
                           ).fetchone() == (0,)
        raw.close()


# --- writes that fail -------------------------------------------------------------------------


@pytest.fixture
def metered(tmp_path: Path) -> Iterator[Database]:
    text = SAMPLE_METADATA.read_text().replace('"~/.dpsql/sample-ledger.sqlite"',
                                                '"ledger.sqlite"')
    metadata = tmp_path / "metadata.toml"
    metadata.write_text(text)
    with Database(SAMPLE, metadata, analyst="alice") as db:
        yield db


@pytest.mark.parametrize("cause", ["database or disk is full",
                                   "attempt to write a readonly database"])
def test_a_ledger_that_cannot_be_written_refuses_before_the_query_runs(
        metered: Database, monkeypatch: pytest.MonkeyPatch, cause: str,
        caplog: pytest.LogCaptureFixture) -> None:
    ran: list[object] = []
    real = PrivatePlan.answer
    monkeypatch.setattr(PrivatePlan, "answer", lambda *a, **k: ran.append(a) or real(*a, **k))

    def failing(*args: object, **kwargs: object) -> object:
        raise sqlite3.OperationalError(cause)  # what SQLite says at the write

    monkeypatch.setattr(dpsql.ledger.budget, "apply_batch", failing)
    with pytest.raises(LedgerError) as failed:
        metered.query(COUNT, epsilon=0.5)
    assert not ran
    assert failed.value.sqlstate == "58030"
    assert "ledger.sqlite" not in str(failed.value)  # no path for the analyst
    assert any(cause in r.getMessage() and "ledger.sqlite" in r.getMessage()
               for r in caplog.records if r.name == "dpsql.owner")
    monkeypatch.undo()
    assert metered.budget().spent.epsilon == 0.0  # type: ignore[union-attr]


def test_a_deleted_ledger_refuses_the_query_without_a_path(metered: Database) -> None:
    metered.query(COUNT, epsilon=0.5)
    assert metered.ledger is not None
    Path(metered.ledger.path).unlink()
    with pytest.raises(LedgerUnavailable) as refused:
        metered.query("SELECT COUNT(*) FROM visits", epsilon=0.5)
    assert "/" not in str(refused.value)


# --- processes --------------------------------------------------------------------------------

# Opens the ledger, charges once with the commit held open: prints "written" after the INSERT,
# before the COMMIT (and its fsync), then waits to be killed.
_KILLED_MID_CHARGE = """
import sys, time
import dpsql.ledger.budget as budget
real = budget.apply_batch
def held(*args, **kwargs):
    outcomes = real(*args, **kwargs)
    print("written", flush=True)
    time.sleep(60)
    return outcomes
budget.apply_batch = held
ledger = budget.Ledger(sys.argv[1], {"alice": budget.Allowance(10.0, 0.0)})
ledger.charge("alice", budget.Cost(1.0, 0.0), sql="SELECT 1")
print("released", flush=True)
"""

# Waits for the go file, then opens a ledger that does not exist yet and charges 0.5 until
# refused; prints how many charges it made.
_CREATOR = """
import os, sys, time
from dpsql.ledger.budget import Allowance, Cost, Ledger
from dpsql.errors import BudgetExhausted
while not os.path.exists(sys.argv[2]):
    time.sleep(0.001)
ledger = Ledger(sys.argv[1], {"alice": Allowance(5.0, 0.0)})
charged = 0
try:
    while True:
        ledger.charge("alice", Cost(0.5, 0.0), sql=f"SELECT {charged}")
        charged += 1
except BudgetExhausted:
    print(charged, ledger.identity.ledger_id)
"""


def _python(script: str, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSQL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env,
                            stdout=subprocess.PIPE, text=True)


def test_a_process_killed_between_write_and_commit_charged_and_released_nothing(
        path: Path) -> None:
    child = _python(_KILLED_MID_CHARGE, str(path))
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "written"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert "released" not in child.stdout.read()
    with Ledger(path, ALICE) as ledger:  # the same ledger, consistent, without the charge
        assert ledger.history("alice") == []
        ledger.charge("alice", Cost(1.0, 0.0), sql="SELECT 2")


def test_processes_creating_one_ledger_at_once_share_it(path: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    children = [_python(_CREATOR, str(path), str(go)) for _ in range(2)]
    time.sleep(0.3)  # let them start (they poll for the go file)
    go.touch()
    outputs = [child.communicate(timeout=120)[0].split() for child in children]
    assert all(child.returncode == 0 for child in children)
    assert sum(int(charged) for charged, _ in outputs) == 10  # 5.0 / 0.5, never more
    assert len({ledger_id for _, ledger_id in outputs}) == 1
    with Ledger(path, {"alice": Allowance(5.0, 0.0)}) as ledger, \
            pytest.raises(BudgetExhausted):
        ledger.charge("alice", Cost(0.5, 0.0), sql="SELECT again")


# --- the owner's command ----------------------------------------------------------------------


def test_budget_init_creates_once_and_starts_over_only_when_told(tmp_path: Path) -> None:
    text = SAMPLE_METADATA.read_text().replace('"~/.dpsql/sample-ledger.sqlite"',
                                                '"ledger.sqlite"')
    metadata = tmp_path / "metadata.toml"
    metadata.write_text(text)
    ledger = tmp_path / "ledger.sqlite"
    runner = CliRunner()
    created = runner.invoke(main, ["budget", "init", "-m", str(metadata)])
    assert created.exit_code == 0, created.output
    assert "created the budget ledger" in created.output and ledger.exists()
    again = runner.invoke(main, ["budget", "init", "-m", str(metadata)])
    assert again.exit_code == 2 and "already exists" in again.output

    asked = runner.invoke(main, ["query", COUNT, "-d", str(SAMPLE), "-m", str(metadata),
                                 "--analyst", "alice"])
    assert asked.exit_code == 0, asked.output
    ledger.unlink()
    refused = runner.invoke(main, ["query", COUNT, "-d", str(SAMPLE), "-m", str(metadata),
                                   "--analyst", "alice"])
    assert refused.exit_code == 2 and "LedgerUnavailable" in refused.output
    assert not ledger.exists()
    status = runner.invoke(main, ["budget", "-m", str(metadata)])
    assert status.exit_code == 2 and "LedgerUnavailable" in status.output
    assert runner.invoke(main, ["budget", "init", "-m", str(metadata)]).exit_code == 2
    over = runner.invoke(main, ["budget", "init", "--start-over", "-m", str(metadata)],
                         input="y\n")
    assert over.exit_code == 0, over.output
    assert "lost ledger's record is kept" in over.output
    assert list(tmp_path.glob(".ledger.sqlite.identity.lost-*"))
    fresh = runner.invoke(main, ["budget", "-m", str(metadata)])
    assert fresh.exit_code == 0 and "No queries charged yet" in fresh.output


# --- over the wire ----------------------------------------------------------------------------


def test_the_server_refuses_with_a_sqlstate_and_no_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    psycopg = pytest.importorskip("psycopg")
    from dpsql.server import ServerConfig, serve_in_thread
    from tests.support.sandbox import sandbox

    setup = sandbox(tmp_path, {"alice": ("secret", 10.0, 0.0)})
    db = Database(setup.database, setup.metadata)
    try:
        with serve_in_thread(db, ServerConfig(port=0, passwords=setup.passwords)) as running, \
                psycopg.connect(host="127.0.0.1", port=running.port, user="alice",
                                password="secret", dbname="dpsql", autocommit=True) as conn:
            conn.execute(COUNT).fetchall()
            monkeypatch.setattr(dpsql.ledger.budget, "apply_batch", _disk_full)
            with pytest.raises(psycopg.Error) as failed:
                conn.execute("SELECT COUNT(*) FROM visits")
            assert failed.value.sqlstate == "58030"
            monkeypatch.undo()
            setup.ledger.unlink()
            for sql in ("SELECT COUNT(*) FROM visits", "SHOW dpsql.budget"):
                with pytest.raises(psycopg.Error) as refused:
                    conn.execute(sql)
                assert refused.value.sqlstate == "55000", sql
                assert str(tmp_path) not in str(refused.value)
            assert str(tmp_path) not in str(failed.value)
            assert conn.execute("SELECT 1").fetchone() == (1,)  # the session goes on
    finally:
        db.close()


def _disk_full(*args: object, **kwargs: object) -> object:
    raise sqlite3.OperationalError("database or disk is full")


def test_a_deleted_ledger_folder_is_refused_not_recreated(tmp_path: Path) -> None:
    folder = tmp_path / "ledgers"
    path = folder / "ledger.sqlite"
    folder.mkdir()
    Ledger(path, ALICE).close()
    shutil.rmtree(folder)  # the record beside the ledger goes with it
    with pytest.raises(LedgerUnavailable) as refused:
        Ledger(path, ALICE)
    assert "it is missing (deleted or moved)" in refused.value.owner_detail
    assert "budget init --start-over" in refused.value.owner_detail
    assert not path.exists()


def test_records_that_name_different_ledgers_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    Ledger(path, ALICE).close()
    elsewhere = tmp_path / "other" / "ledger.sqlite"
    elsewhere.parent.mkdir()
    Ledger(elsewhere, ALICE).close()
    for suffix in ("", "-wal", "-shm"):  # a whole other folder put in this one's place
        Path(str(path) + suffix).unlink(missing_ok=True)
    shutil.copy(elsewhere, path)
    shutil.copy(record_path(elsewhere), record_path(path))
    with pytest.raises(LedgerUnavailable) as refused:
        Ledger(path, ALICE)
    assert "name different ledgers" in refused.value.owner_detail
