"""Tests of the privacy budget ledger: exact exhaustion, concurrency, crashes, reuse, resets."""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dpsql.errors import (
    BudgetExhausted,
    InterfaceError,
    InvalidPrivacyParameter,
    LedgerError,
    LedgerUnavailable,
    MetadataError,
    Remedy,
)
from dpsql.ledger import budget
from dpsql.ledger.budget import Allowance, BudgetStatus, Cost, Ledger, UnknownAnalyst
from dpsql.ledger.writes import AttachRequest, ChargeRequest, Write, apply_batch
from dpsql.privacy.accounting import zcdp_epsilon, zcdp_limits
from tests.support.helpers import REPO

# Opens the ledger, waits for the go file so that all contenders start together, then charges
# epsilon=1 in a loop against a total of 30 and prints "<charged> <refused>".
_CONTENDER = """
import os, sys, time
from dpsql.ledger.budget import Allowance, Cost, Ledger
from dpsql.errors import BudgetExhausted
ledger = Ledger(sys.argv[1], {"alice": Allowance(30.0, 0.0)})
while not os.path.exists(sys.argv[3]):
    time.sleep(0.001)
charged = refused = 0
for i in range(int(sys.argv[2])):
    try:
        ledger.charge("alice", Cost(1.0, 0.0), sql=f"SELECT {i}")
        charged += 1
    except BudgetExhausted:
        refused += 1
print(charged, refused)
"""

# Charges forever, printing each entry id only after its commit returned.
_CRASHER = """
import sys
from dpsql.ledger.budget import Allowance, Cost, Ledger
ledger = Ledger(sys.argv[1], {"alice": Allowance(1e9, 0.0)})
i = 0
while True:
    entry = ledger.charge("alice", Cost(0.5, 0.0), sql=f"SELECT {i}", answer=b"x" * 1000)
    print(entry.id, flush=True)
    i += 1
"""


def _python(script: str, *args: str) -> subprocess.Popen[str]:
    pythonpath = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], env=env, stdout=subprocess.PIPE, text=True
    )


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.sqlite"


def _ledger(path: Path, epsilon: float = 1.0, delta: float = 0.0) -> Ledger:
    return Ledger(path, {"alice": Allowance(epsilon, delta), "bob": Allowance(epsilon, delta)})


# --- exhaustion -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("total", "cost", "expected"),
    [(1.0, 0.1, 10), (30.0, 1.0, 30), (1.0, 0.3, 3), (0.5, 0.5, 1), (2.0, 0.7, 2), (1.0, 1 / 3, 3)],
)
def test_exactly_floor_total_over_cost_charges_succeed(
    path: Path, total: float, cost: float, expected: int
) -> None:
    with _ledger(path, epsilon=total) as ledger:
        for _ in range(expected):
            ledger.charge("alice", Cost(cost, 0.0), sql="SELECT 1")
        with pytest.raises(BudgetExhausted):
            ledger.charge("alice", Cost(cost, 0.0), sql="SELECT 1")
        assert len(ledger.history("alice", limit=100)) == expected
        assert ledger.status("alice").spent.epsilon == pytest.approx(expected * cost)


def test_refusal_names_cost_and_remaining_and_charges_nothing(path: Path) -> None:
    with _ledger(path, epsilon=1.0, delta=1e-6) as ledger:
        ledger.charge("alice", Cost(0.4, 0.0), sql="SELECT 1")
        ledger.charge("alice", Cost(0.4, 0.0), sql="SELECT 2")
        with pytest.raises(BudgetExhausted) as refused:
            ledger.charge("alice", Cost(0.5, 0.0), sql="SELECT 3")
        message = str(refused.value)
        assert "'alice'" in message
        assert "costs epsilon=0.5, delta=0;" in message
        assert "remaining epsilon=0.2, delta=1e-06" in message
        assert "use a smaller epsilon." in message
        assert refused.value.remedies == (Remedy("epsilon"),)
        assert refused.value.sqlstate == "53400"
        assert len(ledger.history("alice")) == 2
        # The rest still fits: a refusal charged nothing.
        ledger.charge("alice", Cost(0.2, 0.0), sql="SELECT 4")


def test_delta_is_accounted(path: Path) -> None:
    with _ledger(path, epsilon=10.0, delta=1e-5) as ledger:
        ledger.charge("alice", Cost(1.0, 4e-6), sql="SELECT 1")
        ledger.charge("alice", Cost(1.0, 4e-6), sql="SELECT 2")
        with pytest.raises(BudgetExhausted, match=r"smaller delta\.$"):
            ledger.charge("alice", Cost(1.0, 4e-6), sql="SELECT 3")
        status = ledger.status("alice")
        assert status.spent == Cost(2.0, 8e-6)
        assert status.remaining.epsilon == 8.0
        assert status.remaining.delta == pytest.approx(2e-6)
        # A pure query still fits: only delta ran out.
        ledger.charge("alice", Cost(1.0, 0.0), sql="SELECT 4")


def test_zero_delta_total_refuses_any_delta(path: Path) -> None:
    with _ledger(path, epsilon=10.0, delta=0.0) as ledger, pytest.raises(BudgetExhausted):
        ledger.charge("alice", Cost(1.0, 1e-12), sql="SELECT 1")


def test_analysts_have_separate_budgets(path: Path) -> None:
    with _ledger(path, epsilon=1.0) as ledger:
        ledger.charge("alice", Cost(1.0, 0.0), sql="SELECT 1")
        ledger.charge("bob", Cost(1.0, 0.0), sql="SELECT 1")
        assert [s.spent.epsilon for s in ledger.all_status()] == [1.0, 1.0]
        assert [s.analyst for s in ledger.all_status()] == ["alice", "bob"]


def test_spending_survives_reopening(path: Path) -> None:
    with _ledger(path, epsilon=1.0) as ledger:
        ledger.charge("alice", Cost(0.75, 0.0), sql="SELECT 1")
    with _ledger(path, epsilon=1.0) as ledger:
        assert ledger.status("alice").remaining.epsilon == 0.25
        with pytest.raises(BudgetExhausted):
            ledger.charge("alice", Cost(0.5, 0.0), sql="SELECT 2")


# --- concurrency and crashes ------------------------------------------------------------------


def test_processes_never_overspend(path: Path) -> None:
    Ledger(path, {"alice": Allowance(30.0, 0.0)}).close()  # create the file before the race
    go = path.with_name("go")
    workers = [_python(_CONTENDER, str(path), "20", str(go)) for _ in range(4)]
    go.touch()
    outputs = [worker.communicate(timeout=60)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0, 0, 0]
    counts = [tuple(map(int, out.split())) for out in outputs]
    assert sum(charged for charged, _ in counts) == 30
    assert sum(refused for _, refused in counts) == 50
    with Ledger(path, {"alice": Allowance(30.0, 0.0)}) as ledger:
        assert ledger.status("alice").spent.epsilon == 30.0
        assert len(ledger.history("alice", limit=1000)) == 30


def test_threads_sharing_a_ledger_never_overspend(path: Path) -> None:
    results: list[bool] = []
    barrier = threading.Barrier(8)
    with Ledger(path, {"alice": Allowance(30.0, 0.0)}) as ledger:

        def contend() -> None:
            barrier.wait()
            for i in range(10):
                try:
                    ledger.charge("alice", Cost(1.0, 0.0), sql=f"SELECT {i}")
                    results.append(True)
                except BudgetExhausted:
                    results.append(False)

        threads = [threading.Thread(target=contend) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results.count(True) == 30
        assert results.count(False) == 50
        assert ledger.status("alice").spent.epsilon == 30.0


def test_concurrent_charges_share_one_commit_and_stop_exactly_at_the_budget(path: Path) -> None:
    """16 threads charge while another connection holds the write lock: the first charge's
    transaction waits for it, the other 15 queue behind and then share one transaction. The
    charges of 3.0 and 1.0 against a total of 10.0 are admitted in queue order: what is
    admitted never exceeds the total, and every refused cost exceeds what is left at the end
    (what is left only shrinks)."""
    costs = [3.0, 1.0] * 8
    outcomes: list[tuple[float, bool]] = []
    with Ledger(path, {"alice": Allowance(10.0, 0.0)}) as ledger:
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")

        def charge(cost: float) -> None:
            try:
                ledger.charge("alice", Cost(cost, 0.0), sql=f"SELECT {cost}")
                outcomes.append((cost, True))
            except BudgetExhausted:
                outcomes.append((cost, False))

        threads = [threading.Thread(target=charge, args=(c,)) for c in costs]
        for thread in threads:
            thread.start()
        for _ in range(3000):  # up to 30 s for every thread to queue
            if ledger.commits.waiting == len(costs):
                break
            threading.Event().wait(0.01)
        blocker.execute("ROLLBACK")
        blocker.close()
        for thread in threads:
            thread.join(timeout=60)
        assert ledger.commits.batches == 2
        admitted = [cost for cost, ok in outcomes if ok]
        refused = [cost for cost, ok in outcomes if not ok]
        assert len(outcomes) == len(costs)
        assert math.fsum(admitted) <= 10.0
        left = 10.0 - math.fsum(admitted)
        assert refused and all(cost > left for cost in refused)
        assert ledger.status("alice").spent.epsilon == math.fsum(admitted)
        assert len(ledger.history("alice", limit=100)) == len(admitted)


def test_a_refusal_in_a_batch_leaves_the_other_requests_of_the_batch(path: Path) -> None:
    with _ledger(path, epsilon=2.0) as ledger:
        first = ledger.charge("alice", Cost(0.5, 0.0), sql="SELECT 0")
        at = "2026-01-01T00:00:00+00:00"
        total = Allowance(2.0, 0.0)
        batch: list[Write] = [
            ChargeRequest("alice", total, Cost(1.0, 0.0), at, "SELECT 1", None, None),
            ChargeRequest("alice", total, Cost(1.0, 0.0), at, "SELECT 2", None, None),  # 2.5
            ChargeRequest("bob", total, Cost(2.0, 0.0), at, "SELECT 3", None, None),
            AttachRequest(first.id + 100, b"no such entry"),
            ChargeRequest("alice", total, Cost(0.5, 0.0), at, "SELECT 4", None, None),
            AttachRequest(first.id, b"answer"),
            AttachRequest(first.id, b"a second answer"),
        ]
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        outcomes = apply_batch(conn, batch, "basic")
        conn.execute("COMMIT")
        answers = conn.execute("SELECT answer FROM charges WHERE id = ?", (first.id,)).fetchall()
        conn.close()
        assert answers == [(b"answer",)]
        assert isinstance(outcomes[1], BudgetExhausted)
        assert "remaining epsilon=0.5" in str(outcomes[1])
        assert isinstance(outcomes[3], InterfaceError)
        assert isinstance(outcomes[6], InterfaceError)
        assert [isinstance(o, int) for o in outcomes] == [True, False, True, False, True, True,
                                                          False]
        assert ledger.status("alice").spent.epsilon == 2.0
        assert ledger.status("bob").spent.epsilon == 2.0
        assert [e.sql for e in ledger.history("alice")] == ["SELECT 4", "SELECT 1", "SELECT 0"]


def test_each_ledger_sees_the_charges_and_resets_of_the_others(path: Path) -> None:
    """Two Ledgers on one file stand for two processes: each keeps its own running sums, and
    must still count every charge and reset the other one committed."""
    with _ledger(path, epsilon=10.0) as first, _ledger(path, epsilon=10.0) as second:
        first.charge("alice", Cost(3.0, 0.0), sql="SELECT 1")
        second.charge("alice", Cost(4.0, 0.0), sql="SELECT 2")
        with pytest.raises(BudgetExhausted, match="remaining epsilon=3"):
            first.charge("alice", Cost(4.0, 0.0), sql="SELECT 3")
        first.charge("alice", Cost(3.0, 0.0), sql="SELECT 4")
        with pytest.raises(BudgetExhausted):
            second.charge("alice", Cost(0.5, 0.0), sql="SELECT 5")
        second.reset("alice")
        first.charge("alice", Cost(10.0, 0.0), sql="SELECT 6")
        with pytest.raises(BudgetExhausted):
            second.charge("alice", Cost(0.5, 0.0), sql="SELECT 7")
        with pytest.raises(BudgetExhausted):
            first.charge("alice", Cost(0.5, 0.0), sql="SELECT 8")
        assert first.status("alice").spent.epsilon == 10.0


def test_sigkill_mid_charging_leaves_a_consistent_ledger(path: Path) -> None:
    child = _python(_CRASHER, str(path))
    assert child.stdout is not None
    reported = [child.stdout.readline() for _ in range(25)]
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    reported += child.stdout.readlines()  # lines printed before the kill, still in the pipe
    committed = len([line for line in reported if line.strip()])

    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    raw.close()
    with _ledger(path, epsilon=1e9) as ledger:
        entries = ledger.history("alice", limit=1_000_000)
        assert len(entries) in (committed, committed + 1)  # at most one commit unreported
        assert math.fsum(e.cost.epsilon for e in entries) == ledger.status("alice").spent.epsilon
        assert ledger.status("alice").spent.epsilon == 0.5 * len(entries)


def test_charges_cannot_be_deleted_or_changed_behind_the_api(path: Path) -> None:
    with _ledger(path) as ledger:
        entry = ledger.charge("alice", Cost(0.5, 0.0), sql="SELECT 1")
    raw = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="never deleted"):
        raw.execute("DELETE FROM charges")
    with pytest.raises(sqlite3.IntegrityError, match="only an answer"):
        raw.execute("UPDATE charges SET epsilon = 0 WHERE id = ?", (entry.id,))
    raw.close()


# --- answers for reuse ------------------------------------------------------------------------


def test_lookup_returns_answer_only_for_same_analyst_and_key(path: Path) -> None:
    with _ledger(path, epsilon=10.0) as ledger:
        ledger.charge("alice", Cost(1.0, 0.0), sql="SELECT 1", cache_key="k1", answer=b"one")
        ledger.charge("alice", Cost(1.0, 0.0), sql="SELECT 2", cache_key="k2")
        assert ledger.lookup("alice", "k1") == b"one"
        assert ledger.lookup("alice", "k2") is None  # charged, but no answer stored
        assert ledger.lookup("alice", "k3") is None
        assert ledger.lookup("bob", "k1") is None


def test_reserve_then_store_answer_once(path: Path) -> None:
    with _ledger(path, epsilon=10.0) as ledger:
        entry = ledger.reserve("alice", Cost(1.0, 0.0), sql="SELECT 1", cache_key="k")
        assert ledger.status("alice").spent.epsilon == 1.0  # charged before any answer exists
        assert ledger.lookup("alice", "k") is None
        ledger.store_answer(entry.id, b"noisy")
        assert ledger.lookup("alice", "k") == b"noisy"
        with pytest.raises(InterfaceError, match="already has an answer"):
            ledger.store_answer(entry.id, b"another noisy answer")
        with pytest.raises(InterfaceError, match="no entry"):
            ledger.store_answer(entry.id + 100, b"x")
        assert ledger.lookup("alice", "k") == b"noisy"


# --- reset, history, unknown analysts ---------------------------------------------------------


def test_reset_starts_a_new_period_and_keeps_history(path: Path) -> None:
    with _ledger(path, epsilon=1.0) as ledger:
        ledger.charge("alice", Cost(1.0, 0.0), sql="SELECT 1")
        ledger.charge("bob", Cost(0.5, 0.0), sql="SELECT 1")
        ledger.reset("alice")
        assert ledger.status("alice").spent == Cost(0.0, 0.0)
        assert ledger.status("bob").spent.epsilon == 0.5  # another analyst's spending stays
        ledger.charge("alice", Cost(0.75, 0.0), sql="SELECT 2")
        assert ledger.status("alice").spent.epsilon == 0.75
        assert [e.sql for e in ledger.history("alice")] == ["SELECT 2", "SELECT 1"]


def test_history_is_most_recent_first_and_limited(path: Path) -> None:
    with _ledger(path, epsilon=10.0) as ledger:
        for i in range(5):
            ledger.charge("alice" if i % 2 else "bob", Cost(0.5, 0.0), sql=f"SELECT {i}")
        entries = ledger.history(limit=3)
        assert [e.sql for e in entries] == ["SELECT 4", "SELECT 3", "SELECT 2"]
        assert [e.analyst for e in ledger.history("alice")] == ["alice", "alice"]
        assert entries[0].at.tzinfo is not None
        assert entries[0].cost == Cost(0.5, 0.0)


def test_unknown_analyst_is_refused(path: Path) -> None:
    with _ledger(path) as ledger:
        with pytest.raises(UnknownAnalyst, match="'eve' has no privacy budget") as refused:
            ledger.charge("eve", Cost(0.1, 0.0), sql="SELECT 1")
        assert refused.value.sqlstate == "28000"
        assert isinstance(refused.value, BudgetExhausted)
        for call in (lambda: ledger.status("eve"), lambda: ledger.lookup("eve", "k"),
                     lambda: ledger.reset("eve")):
            with pytest.raises(UnknownAnalyst):
                call()
        assert ledger.history() == []


# --- validation -------------------------------------------------------------------------------

_BAD_NUMBERS = [-1.0, math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("bad", _BAD_NUMBERS)
def test_invalid_costs_are_refused(path: Path, bad: float) -> None:
    with _ledger(path) as ledger:
        for cost in (Cost(bad, 0.0), Cost(0.1, bad), Cost(0.1, 0.0, bad)):
            with pytest.raises(InvalidPrivacyParameter):
                ledger.charge("alice", cost, sql="SELECT 1")
        assert ledger.history() == []


@pytest.mark.parametrize(
    "cost", [Cost(0.0, 0.0), Cost(0.1, 1.0), Cost(0.1, 2.0), Cost(0.0, 0.0, 0.1), Cost(True, 0.0)]
)
def test_zero_epsilon_delta_of_one_and_non_numbers_are_refused(path: Path, cost: Cost) -> None:
    with _ledger(path) as ledger, pytest.raises(InvalidPrivacyParameter):
        ledger.charge("alice", cost, sql="SELECT 1")


@pytest.mark.parametrize(
    "total",
    [Allowance(-1.0, 0.0), Allowance(math.nan, 0.0), Allowance(math.inf, 0.0),
     Allowance(1.0, -1e-6), Allowance(1.0, math.nan), Allowance(1.0, 1.0), Allowance(1.0, 1.5)],
)
def test_invalid_totals_are_refused(path: Path, total: Allowance) -> None:
    with pytest.raises(InvalidPrivacyParameter, match="'alice'"):
        Ledger(path, {"alice": total})


def test_zero_total_is_valid_and_refuses_everything(path: Path) -> None:
    with Ledger(path, {"alice": Allowance(0.0, 0.0)}) as ledger, pytest.raises(BudgetExhausted):
        ledger.charge("alice", Cost(1e-12, 0.0), sql="SELECT 1")


# --- files and lifecycle ----------------------------------------------------------------------


def test_schema_and_wal_mode(path: Path) -> None:
    _ledger(path).close()
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert raw.execute("SELECT version FROM schema_version").fetchall() == [(1,)]
    raw.close()


def test_not_a_ledger_file_is_refused_not_replaced(path: Path) -> None:
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(LedgerUnavailable) as refused:
        _ledger(path)
    assert "not a dpsql budget ledger" in str(refused.value.owner_detail)
    assert path.read_bytes() == b"this is not a database" * 100


def test_accounting_mode_is_fixed_by_the_file(path: Path) -> None:
    _ledger(path).close()
    with pytest.raises(MetadataError, match="basic accounting"):
        Ledger(path, {"alice": Allowance(1.0, 1e-6)}, accounting="zcdp")


def test_closed_ledger_refuses_use(path: Path) -> None:
    ledger = _ledger(path)
    ledger.close()
    ledger.close()  # idempotent
    with pytest.raises(InterfaceError, match="closed"):
        ledger.status("alice")


def test_lock_wait_gives_up_with_an_operational_error(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(budget, "BUSY_TIMEOUT_SECONDS", 0.05)  # don't wait 30 s here
    with _ledger(path) as ledger:
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another process holding the write lock
        try:
            with pytest.raises(LedgerError) as failed:
                ledger.charge("alice", Cost(0.1, 0.0), sql="SELECT 1")
            assert "locked" in str(failed.value.owner_detail)
            assert str(path) not in str(failed.value)  # the analyst's text names no file
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        ledger.charge("alice", Cost(0.1, 0.0), sql="SELECT 1")


# --- zCDP accounting --------------------------------------------------------------------------


def test_zcdp_rho_budget_converts_back_to_the_total() -> None:
    for total in (Allowance(1.0, 1e-6), Allowance(0.01, 1e-9), Allowance(10.0, 1e-5)):
        rho, half_delta = zcdp_limits(total)
        assert half_delta == total.delta / 2
        assert zcdp_epsilon(rho, half_delta) == pytest.approx(total.epsilon, rel=1e-12)


def test_zcdp_charges_rho_and_pure_epsilon_squared_over_two(path: Path) -> None:
    total = Allowance(1.0, 1e-6)
    rho_limit, _ = zcdp_limits(total)
    with Ledger(path, {"alice": total}, accounting="zcdp") as ledger:
        fresh = ledger.status("alice")
        assert fresh.spent == Cost(0.0, 0.0, 0.0)
        assert fresh.remaining.rho == rho_limit
        gaussian = Cost(0.0, 0.0, rho_limit / 10)
        for _ in range(5):
            ledger.charge("alice", gaussian, sql="SELECT 1")
        pure_epsilon = math.sqrt(2 * rho_limit / 10)  # worth the same rho as one Gaussian query
        for _ in range(5):
            ledger.charge("alice", Cost(pure_epsilon, 0.0), sql="SELECT 2")
        with pytest.raises(BudgetExhausted, match=r"costs rho=.*remaining rho="):
            ledger.charge("alice", gaussian, sql="SELECT 3")
        status: BudgetStatus = ledger.status("alice")
        assert status.spent.rho == pytest.approx(rho_limit)
        assert status.spent.epsilon == pytest.approx(1.0)
        assert status.spent.delta == pytest.approx(0.5e-6)


def test_zcdp_delta_budget_is_half_the_total(path: Path) -> None:
    with Ledger(path, {"alice": Allowance(10.0, 1e-6)}, accounting="zcdp") as ledger:
        ledger.charge("alice", Cost(0.1, 4e-7), sql="SELECT 1")
        with pytest.raises(BudgetExhausted, match="smaller delta"):
            ledger.charge("alice", Cost(0.1, 2e-7), sql="SELECT 2")


def test_zcdp_needs_a_delta_and_basic_needs_an_epsilon(path: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidPrivacyParameter, match="delta > 0"):
        Ledger(path, {"alice": Allowance(1.0, 0.0)}, accounting="zcdp")
    with _ledger(tmp_path / "basic.sqlite") as ledger, pytest.raises(
        InvalidPrivacyParameter, match="not rho alone"
    ):
        ledger.charge("alice", Cost(0.0, 0.0, 0.01), sql="SELECT 1")
