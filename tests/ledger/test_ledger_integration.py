"""The ledger behind every front door: Database, DB-API and CLI charge one budget.

Each test writes its own metadata (the sample tables plus a [budget] and [analysts] of its own)
and a ledger in its tmp folder; nothing touches the user's ~/.dpsql.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import dpsql
import dpsql.database
import dpsql.ledger.opening
from dpsql.cli import main
from dpsql.database import Database, resolve_analyst
from dpsql.errors import (
    BudgetExhausted,
    EngineError,
    InvalidPrivacyParameter,
    MetadataError,
    NotASingleSelect,
    NotSupportedError,
    ProgrammingError,
    QueryRefused,
    UnknownTable,
)
from dpsql.execution.postprocess import Result, ResultColumn
from dpsql.ledger.answers import decode_result, encode_result
from dpsql.ledger.budget import Allowance, Cost, Ledger, UnknownAnalyst
from dpsql.privacy.accounting import query_cost
from dpsql.query.parameters import bind_parameters
from dpsql.routes.private import PrivatePlan
from tests.support.helpers import REPO, SAMPLE, SAMPLE_METADATA, sample_tables_toml

pytestmark = pytest.mark.usefixtures("no_dpsql_env")
COUNT = "SELECT COUNT(*) FROM people"


def write_metadata(folder: Path, budget: str, name: str = "metadata.toml") -> Path:
    path = folder / name
    path.write_text(budget + "\n" + sample_tables_toml())
    return path


LEDGER = '[budget]\nledger = "ledger.sqlite"\n'
BUDGET = """
[budget]
ledger = "ledger.sqlite"

[analysts.alice]
epsilon = 15.0
delta = 1e-5

[analysts.bob]
epsilon = 1.0
"""




@pytest.fixture
def metadata(tmp_path: Path) -> Path:
    return write_metadata(tmp_path, BUDGET)


@pytest.fixture
def db(metadata: Path) -> Database:
    with Database(SAMPLE, metadata, analyst="alice") as database:
        yield database


def charges(metadata: Path) -> list[tuple[str, float, float, str]]:
    """Every charge in the ledger next to ``metadata``, read with plain sqlite3."""
    raw = sqlite3.connect(metadata.parent / "ledger.sqlite")
    try:
        return raw.execute("SELECT analyst, epsilon, delta, sql FROM charges ORDER BY id"
                           ).fetchall()
    finally:
        raw.close()


# --- metering and its order -------------------------------------------------------------------


def test_metadata_declares_the_budget(metadata: Path) -> None:
    md = dpsql.database.load_metadata(metadata)
    assert md.budget is not None
    assert md.budget.ledger == metadata.parent / "ledger.sqlite"
    assert md.budget.analysts == {"alice": Allowance(15.0, 1e-5), "bob": Allowance(1.0, 0.0)}
    assert md.budget.default is None and md.budget.accounting == "basic"
    assert md.budget.reuse_answers is True


def test_the_sample_metadata_is_metered_with_a_demo_allowance() -> None:
    md = dpsql.database.load_metadata(SAMPLE_METADATA)
    assert md.budget is not None and md.budget.default == Allowance(50.0, 1e-4)
    assert md.budget.ledger == Path("~/.dpsql/sample-ledger.sqlite").expanduser()


def test_a_query_is_charged_before_it_is_answered(
        db: Database, metadata: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[float] = []
    real_answer = PrivatePlan.answer

    def spying(route, context):  # type: ignore[no-untyped-def]
        seen.append(db.budget().spent.epsilon)  # type: ignore[union-attr]
        return real_answer(route, context)

    monkeypatch.setattr(PrivatePlan, "answer", spying)
    db.query(COUNT, epsilon=0.5)
    assert seen == [0.5]


def test_an_engine_failure_after_the_charge_is_not_refunded(
        db: Database, metadata: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(route, context):  # type: ignore[no-untyped-def]
        raise EngineError("the engine failed")

    monkeypatch.setattr(PrivatePlan, "answer", failing)
    with pytest.raises(EngineError):
        db.query(COUNT, epsilon=0.5)
    assert [c[:2] for c in charges(metadata)] == [("alice", 0.5)]
    assert db.budget().spent.epsilon == 0.5  # type: ignore[union-attr]


def test_the_charge_is_the_plan_cost_and_the_sql_is_normalised(db: Database,
                                                               metadata: Path) -> None:
    answered = db.run("select   count(*)\nfrom PEOPLE where age > ?", epsilon=0.25,
                      parameters=(40,))
    assert answered.cost == Cost(0.25, 0.0, 0.0) and not answered.reused
    assert answered.analyst == "alice"
    assert charges(metadata) == [("alice", 0.25, 0.0, "SELECT COUNT(*) FROM PEOPLE WHERE age > 40")]
    thresholded = db.run("SELECT state, COUNT(*) FROM people GROUP BY state", epsilon=0.5,
                         delta=1e-6)
    assert thresholded.cost == Cost(0.5, 1e-6, 0.0)


def test_explain_and_plan_charge_nothing(db: Database, metadata: Path) -> None:
    db.explain(COUNT, epsilon=2.0)
    db.plan("SELECT COUNT(*) FROM people WHERE age > ?", parameters=(3,))
    assert charges(metadata) == []


# --- reuse ------------------------------------------------------------------------------------


def test_the_same_query_again_returns_the_stored_answer_for_free(db: Database,
                                                                  metadata: Path) -> None:
    first = db.run("SELECT sex, AVG(income) AS m FROM people GROUP BY sex", epsilon=0.5)
    again = db.run("select SEX, avg(INCOME) as m\n  from people -- the same\n group by sex",
                   epsilon=0.5)
    assert again.reused and again.cost is None
    assert again.result.rows == first.result.rows  # rows, types and accuracy, exactly
    assert again.result.accuracy == first.result.accuracy
    assert [c.name for c in again.result.columns] == ["SEX", "m"]  # named as asked
    assert [c.type for c in again.result.columns] == [c.type for c in first.result.columns]
    assert len(charges(metadata)) == 1
    assert db.budget().spent.epsilon == 0.5  # type: ignore[union-attr]


def test_parameters_are_part_of_the_reused_query(db: Database, metadata: Path) -> None:
    a = db.run("SELECT COUNT(*) FROM people WHERE age > ?", parameters=(30,), epsilon=0.5)
    b = db.run("SELECT COUNT(*) FROM people WHERE age > 30", epsilon=0.5)
    c = db.run("SELECT COUNT(*) FROM people WHERE age > ?", parameters=(31,), epsilon=0.5)
    assert b.reused and b.result == a.result
    assert not c.reused
    assert len(charges(metadata)) == 2


def test_another_epsilon_delta_mechanism_or_analyst_is_a_new_charge(db: Database,
                                                                    metadata: Path) -> None:
    db.query(COUNT, epsilon=0.5)
    for kwargs in ({"epsilon": 0.25}, {"epsilon": 0.5, "delta": 1e-7},
                   {"epsilon": 0.5, "delta": 1e-7, "mechanism": "gaussian"},
                   {"epsilon": 0.5, "analyst": "bob"}):
        answered = db.run(COUNT, **kwargs)  # type: ignore[arg-type]
        assert not answered.reused and answered.cost is not None
    assert [c[0] for c in charges(metadata)] == ["alice"] * 4 + ["bob"]


def test_reuse_can_be_turned_off(tmp_path: Path) -> None:
    metadata = write_metadata(tmp_path, BUDGET.replace("[budget]",
                                                       "[budget]\nreuse_answers = false"))
    with Database(SAMPLE, metadata, analyst="alice") as db:
        assert not db.reuse_answers
        first = db.run(COUNT, epsilon=0.5)
        second = db.run(COUNT, epsilon=0.5)
    assert not second.reused and second.cost == first.cost
    assert len(charges(metadata)) == 2


def test_reuse_is_shared_by_processes_through_the_ledger(metadata: Path) -> None:
    with Database(SAMPLE, metadata, analyst="alice") as one:
        first = one.query(COUNT, epsilon=0.5)
    with Database(SAMPLE, metadata, analyst="alice") as two:
        again = two.run(COUNT, epsilon=0.5)
    assert again.reused and again.result == first


def test_results_round_trip_exactly() -> None:
    result = Result(
        columns=[ResultColumn("k", "VARCHAR"), ResultColumn("n", "BIGINT", "value"),
                 ResultColumn("x", "DOUBLE", "value"), ResultColumn("d", "DECIMAL(10,2)"),
                 ResultColumn("day", "DATE"), ResultColumn("q", "DOUBLE", "rank")],
        rows=[("a", 10**20, 0.1 + 0.2, decimal.Decimal("1.10"), dt.date(2025, 1, 2), math.inf),
              (None, -3, -0.0, None, None, math.nan), (True, 0, 1e-300, None, None, 2.5)],
        accuracy=[(None, 3.0, 1.5, None, None, 4.0), (None, 3.0, None, None, None, None),
                  (None, 2.9999999999999996, 1.5, None, None, 4.0)],
        epsilon=0.1, delta=1e-7, notes=["a note"])
    back = decode_result(encode_result(result))
    assert back.rows[0] == result.rows[0] and back.rows[2] == result.rows[2]
    assert [type(v) for v in back.rows[0]] == [type(v) for v in result.rows[0]]
    assert math.isnan(back.rows[1][5]) and math.copysign(1, back.rows[1][2]) == -1
    assert (back.columns, back.accuracy, back.epsilon, back.delta, back.notes) == (
        result.columns, result.accuracy, result.epsilon, result.delta, result.notes)


# --- refusals charge nothing ------------------------------------------------------------------


@pytest.mark.parametrize("epsilon, delta, mechanism", [
    (0.0, 0.0, "laplace"), (-1.0, 0.0, "laplace"), (math.nan, 0.0, "laplace"),
    (math.inf, 0.0, "laplace"), (True, 0.0, "laplace"), ("1", 0.0, "laplace"),
    (1.0, -1e-6, "laplace"), (1.0, 1.0, "laplace"), (1.0, math.nan, "laplace"),
    (1.0, 0.0, "gaussian"), (1.0, 1e-6, "cauchy"),
])
def test_invalid_privacy_parameters_are_refused_and_charge_nothing(
        db: Database, metadata: Path, epsilon: float, delta: float, mechanism: str) -> None:
    with pytest.raises(InvalidPrivacyParameter):
        db.query(COUNT, epsilon=epsilon, delta=delta, mechanism=mechanism)
    assert charges(metadata) == []


@pytest.mark.parametrize("sql, parameters, error", [
    ("SELECT COUNT(*) FROM secrets", None, UnknownTable),
    ("DELETE FROM people", None, NotASingleSelect),
    ("SELECT amount FROM visits", None, QueryRefused),
    ("SELECT COUNT(*) FROM people WHERE age > ?", None, ProgrammingError),
    ("SELECT COUNT(*) FROM people WHERE age > ?", (1, 2), ProgrammingError),
    ("SELECT COUNT(*) FROM people WHERE age > ? AND sex = ?", (1,), ProgrammingError),
    ("SELECT COUNT(*) FROM people", (1,), ProgrammingError),
    ("SELECT COUNT(*) FROM people WHERE age > ?", {"a": 1}, ProgrammingError),
    ("SELECT COUNT(*) FROM people WHERE age > :a", (1,), ProgrammingError),
    ("SELECT COUNT(*) FROM people WHERE age > :a", {"b": 1}, ProgrammingError),
    ("SELECT COUNT(*) FROM people WHERE age > $2", (1, 2), ProgrammingError),
    ("SELECT COUNT(*) FROM people WHERE age > ? AND age < $1", (1,), ProgrammingError),
    ("SELECT COUNT(*) FROM people WHERE age > ?", (math.nan,), ProgrammingError),
    ("SELECT COUNT(*) FROM people WHERE age > ?", (object(),), ProgrammingError),
    ("SELECT COUNT(*) FROM people WHERE email = ?", (b"x",), NotSupportedError),
])
def test_refused_queries_and_bad_parameters_charge_nothing(
        db: Database, metadata: Path, sql: str, parameters: object, error: type) -> None:
    with pytest.raises(error):
        db.query(sql, parameters=parameters)  # type: ignore[arg-type]
    assert charges(metadata) == []


def test_exhausted_budget_is_refused_naming_cost_and_remaining(db: Database,
                                                               metadata: Path) -> None:
    db.query(COUNT, epsilon=0.75, analyst="bob")
    with pytest.raises(BudgetExhausted) as info:
        db.query("SELECT COUNT(*) FROM visits", epsilon=0.5, analyst="bob")
    message = str(info.value)
    assert "'bob'" in message and "epsilon=0.5" in message and "remaining epsilon=0.25" in message
    assert len(charges(metadata)) == 1
    db.query("SELECT COUNT(*) FROM visits", epsilon=0.25, analyst="bob")  # exactly what is left
    assert db.budget("bob").remaining.epsilon == 0  # type: ignore[union-attr]


def test_delta_is_a_budget_too(db: Database) -> None:
    with pytest.raises(BudgetExhausted, match="delta"):
        db.query("SELECT state, COUNT(*) FROM people GROUP BY state", delta=1e-6, analyst="bob")


def test_an_undeclared_analyst_is_refused_without_a_default(db: Database,
                                                            metadata: Path) -> None:
    with pytest.raises(UnknownAnalyst, match="carol"):
        db.query(COUNT, analyst="carol")
    with pytest.raises(UnknownAnalyst):
        db.query(COUNT, analyst="*")
    assert charges(metadata) == []


def test_every_other_analyst_gets_their_own_default_budget(tmp_path: Path) -> None:
    metadata = write_metadata(tmp_path, BUDGET + '\n[analysts."*"]\nepsilon = 2.0\n'
                                                 '\n[analysts.mallory]\nepsilon = 0\n')
    with Database(SAMPLE, metadata) as db:
        db.query(COUNT, epsilon=2.0, analyst="carol")
        db.query(COUNT, epsilon=2.0, analyst="dave")
        with pytest.raises(BudgetExhausted):
            db.query("SELECT COUNT(*) FROM visits", epsilon=0.1, analyst="carol")
        with pytest.raises(BudgetExhausted):  # epsilon = 0 locks one analyst out
            db.query(COUNT, epsilon=0.1, analyst="mallory")
        assert db.ledger is not None
        names = [s.analyst for s in db.ledger.all_status()]
    assert names == ["alice", "bob", "carol", "dave", "mallory"]


def test_a_ledger_with_a_default_validates_it(tmp_path: Path) -> None:
    with pytest.raises(InvalidPrivacyParameter, match=r"\*"):
        Ledger(tmp_path / "l.sqlite", {}, default=Allowance(-1.0, 0.0))
    with Ledger(tmp_path / "l.sqlite", {}, default=Allowance(1.0, 0.0)) as ledger:
        assert ledger.analysts() == []
        ledger.charge("zoe", Cost(0.5, 0.0), sql="SELECT 1")
        ledger.reset("yann")
        assert ledger.analysts() == ["yann", "zoe"]


# --- analysts, ledger paths, unmetered --------------------------------------------------------


def test_analyst_resolution_order(metadata: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dpsql.ledger.opening.getpass, "getuser", lambda: "alice")
    assert resolve_analyst(None, None) == "alice"
    monkeypatch.setenv("DPSQL_ANALYST", "bob")
    assert resolve_analyst(None, None) == "bob"
    assert resolve_analyst(None, "carol") == "carol"
    assert resolve_analyst("dave", "carol") == "dave"
    with Database(SAMPLE, metadata) as db:
        assert db.run(COUNT, epsilon=0.5).analyst == "bob"
        assert db.run(COUNT, epsilon=0.25, analyst="alice").analyst == "alice"
    with Database(SAMPLE, metadata, analyst="alice") as db:
        assert db.run(COUNT, epsilon=0.125).analyst == "alice"
    with pytest.raises(dpsql.InterfaceError):
        resolve_analyst("  ")


def test_ledger_path_is_relative_to_the_metadata_and_overridable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "owner"
    folder.mkdir()
    metadata = write_metadata(folder, BUDGET.replace('"ledger.sqlite"', '"ledgers/l.sqlite"'))
    monkeypatch.chdir(tmp_path)
    with Database(SAMPLE, metadata, analyst="alice") as db:
        db.query(COUNT, epsilon=0.5)
    assert (folder / "ledgers" / "l.sqlite").exists()
    monkeypatch.setenv("DPSQL_LEDGER", str(tmp_path / "elsewhere.sqlite"))
    with Database(SAMPLE, metadata, analyst="alice") as db:
        assert db.budget().spent.epsilon == 0  # type: ignore[union-attr]
    assert (tmp_path / "elsewhere.sqlite").exists()
    monkeypatch.delenv("DPSQL_LEDGER")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    home = write_metadata(folder, BUDGET.replace('"ledger.sqlite"', '"~/.dpsql/l.sqlite"'),
                          name="home.toml")
    with Database(SAMPLE, home, analyst="alice") as db:
        db.query(COUNT, epsilon=0.5)
    assert (tmp_path / "home" / ".dpsql" / "l.sqlite").exists()


def test_without_analysts_nothing_is_metered(tmp_path: Path) -> None:
    metadata = write_metadata(tmp_path, "")
    with Database(SAMPLE, metadata) as db:
        assert not db.metered and db.budget() is None
        answered = db.run(COUNT, epsilon=0.5)
        assert answered.cost is None and answered.analyst is None
    assert list(tmp_path.iterdir()) == [metadata]


@pytest.mark.parametrize("toml, message", [
    ('[budget]\nledger = "l.sqlite"', "no analyst has a budget"),
    ('[budget]\nfoo = 1\n[analysts.a]\nepsilon = 1', "unknown setting 'foo'"),
    ('[budget]\naccounting = "rdp"\n[analysts.a]\nepsilon = 1', "accounting"),
    ('[budget]\nreuse_answers = "yes"\n[analysts.a]\nepsilon = 1', "reuse_answers"),
    ('[budget]\nledger = 3\n[analysts.a]\nepsilon = 1', "ledger"),
    ("analysts = 3", "[analysts]"),
    ("[analysts]\na = 3", "analyst 'a'"),
    ("[analysts.a]\ndelta = 1e-6", "analyst 'a': declare the analyst's total epsilon"),
    ("[analysts.a]\nepsilon = -1", "analyst 'a': epsilon must be a finite number >= 0"),
    ("[analysts.a]\nepsilon = nan", "analyst 'a': epsilon"),
    ("[analysts.a]\nepsilon = inf", "analyst 'a': epsilon"),
    ('[analysts.a]\nepsilon = "1"', "analyst 'a': epsilon must be a number"),
    ("[analysts.a]\nepsilon = true", "analyst 'a': epsilon must be a number"),
    ("[analysts.a]\nepsilon = 1\ndelta = 1", "analyst 'a': delta must be < 1"),
    ("[analysts.a]\nepsilon = 1\ndelta = -1e-9", "analyst 'a': delta"),
    ("[analysts.a]\nepsilon = 1\nrho = 1", "analyst 'a': unknown setting 'rho'"),
    ('[analysts."*"]\nepsilon = -1', "analyst '*'"),
    ('[budget]\naccounting = "zcdp"\n[analysts.a]\nepsilon = 1', "zcdp accounting needs a delta"),
])
def test_invalid_budgets_are_refused_naming_file_and_analyst(tmp_path: Path, toml: str,
                                                             message: str) -> None:
    metadata = write_metadata(tmp_path, toml)
    with pytest.raises(MetadataError) as info:
        Database(SAMPLE, metadata)
    assert str(metadata) in str(info.value) and message in str(info.value)


# --- zCDP accounting --------------------------------------------------------------------------


def test_zcdp_accounting_charges_rho_and_only_the_threshold_delta(tmp_path: Path) -> None:
    metadata = write_metadata(tmp_path, LEDGER + 'accounting = "zcdp"\n'
                                        "[analysts.alice]\nepsilon = 5.0\ndelta = 1e-5\n")
    with Database(SAMPLE, metadata, analyst="alice") as db:
        plan = db.plan("SELECT AVG(income) FROM people", epsilon=1.0, delta=1e-6,
                       mechanism="gaussian")
        assert query_cost(plan, "zcdp") == Cost(1.0, 0.0, plan.rho)
        assert query_cost(plan, "basic") == Cost(1.0, 1e-6, plan.rho)
        laplace = db.plan("SELECT COUNT(*), SUM(age) FROM people", epsilon=1.0)
        assert query_cost(laplace, "zcdp").rho == pytest.approx(2 * 0.5 ** 2 / 2)
        keys = db.plan("SELECT state, COUNT(*) FROM people GROUP BY state", epsilon=1.0,
                       delta=1e-7)
        assert query_cost(keys, "zcdp").delta == 1e-7
        answered = db.run("SELECT AVG(income) FROM people", epsilon=1.0, delta=1e-6,
                          mechanism="gaussian")
        assert answered.cost == Cost(1.0, 0.0, plan.rho)
        assert db.budget().spent.rho == pytest.approx(plan.rho)  # type: ignore[union-attr]


# --- parameters -------------------------------------------------------------------------------


def test_parameters_become_literals_never_sql() -> None:
    sql = "SELECT COUNT(*) FROM people WHERE sex = ? AND age > ? AND income < ?"
    bound = bind_parameters(sql, ("F' OR 1=1 --", -3, 2.5))
    assert bound == ("SELECT COUNT(*) FROM people WHERE sex = 'F'' OR 1=1 --' AND age > (-3) "
                     "AND income < 2.5")
    assert bind_parameters("SELECT -? + COUNT(*) FROM t", (-5,)) == "SELECT -(-5) + COUNT(*) FROM t"
    # qmarks bind in textual order, wherever sqlglot keeps the node
    assert bind_parameters("SELECT COUNT(*) + ? FROM t WHERE a = ? LIMIT ?", (1, 2, 3)) == \
        "SELECT COUNT(*) + 1 FROM t WHERE a = 2 LIMIT 3"
    assert bind_parameters("SELECT COUNT(*) FROM t WHERE a = '?' AND b = ?", ("x",)) == \
        "SELECT COUNT(*) FROM t WHERE a = '?' AND b = 'x'"
    assert bind_parameters("SELECT COUNT(*) FROM t WHERE a = $2 AND b = $1", (1, 2)) == \
        "SELECT COUNT(*) FROM t WHERE a = 2 AND b = 1"
    assert bind_parameters("SELECT COUNT(*) FROM t WHERE a = :x AND b = :x", {"x": None}) == \
        "SELECT COUNT(*) FROM t WHERE a = NULL AND b = NULL"
    assert bind_parameters("SELECT COUNT(*) FROM t WHERE d > ? AND m = ? AND n = ?",
                           (dt.date(2025, 1, 2), True, decimal.Decimal("1.50"))) == \
        "SELECT COUNT(*) FROM t WHERE d > CAST('2025-01-02' AS DATE) AND m = TRUE AND n = 1.50"


def test_a_bound_date_and_string_filter_are_answered(db: Database) -> None:
    result = db.query("SELECT COUNT(*) FROM people WHERE signup_date >= ? AND sex = ?",
                      parameters=(dt.date(2020, 1, 1), "F"), epsilon=0.5)
    assert result.columns[0].type == "BIGINT" and isinstance(result.rows[0][0], int)


# --- concurrency and crashes, through the DB-API -----------------------------------------------

# Waits for the go file, then asks 20 distinct queries (so none is served from a stored answer)
# at epsilon 0.5 each and prints how many were answered and refused.
_CONTENDER = """
import os, sys, time, json
import dpsql
conn = dpsql.connect(database=sys.argv[1], metadata=sys.argv[2], analyst="alice", epsilon=0.5)
cur = conn.cursor()
open(sys.argv[4] + "." + sys.argv[3], "w").close()  # ready
while not os.path.exists(sys.argv[4]):
    time.sleep(0.001)
answered = refused = 0
for i in range(20):
    try:
        cur.execute("SELECT COUNT(*) FROM people WHERE age > ?", (int(sys.argv[3]) * 20 + i,))
        assert cur.fetchone() is not None
        answered += 1
    except dpsql.BudgetExhausted:
        refused += 1
print(json.dumps([answered, refused]))
"""

# Asks distinct queries forever, printing each one's number after its answer was released.
_CRASHER = """
import sys
import dpsql
conn = dpsql.connect(database=sys.argv[1], metadata=sys.argv[2], analyst="alice", epsilon=0.5)
cur = conn.cursor()
i = 0
while True:
    cur.execute("SELECT COUNT(*) FROM visits WHERE amount > ?", (i,))
    cur.fetchall()
    print(i, flush=True)
    i += 1
"""


def _python(script: str, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSQL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env,
                            stdout=subprocess.PIPE, text=True)


def test_processes_answer_exactly_what_the_budget_pays_for(tmp_path: Path) -> None:
    metadata = write_metadata(tmp_path, LEDGER + "[analysts.alice]\nepsilon = 15.0\n")  # 30 x 0.5
    Database(SAMPLE, metadata).close()  # create the ledger before the race
    go = tmp_path / "go"
    children = [_python(_CONTENDER, str(SAMPLE), str(metadata), str(n), str(go))
                for n in range(4)]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"go.{n}").exists() for n in range(4)):
        assert time.monotonic() < deadline, "the contenders did not start"
        time.sleep(0.01)
    go.touch()
    outputs = [json.loads(child.communicate(timeout=120)[0]) for child in children]
    assert all(child.returncode == 0 for child in children)
    assert sum(a for a, _ in outputs) == 30
    assert sum(r for _, r in outputs) == 50
    recorded = charges(metadata)
    assert len(recorded) == 30 and len({sql for *_, sql in recorded}) == 30
    assert math.fsum(e for _, e, _, _ in recorded) == 15.0
    with Database(SAMPLE, metadata, analyst="alice") as db:
        assert db.budget().spent.epsilon == 15.0  # type: ignore[union-attr]


def test_a_killed_querying_process_leaves_a_consistent_ledger(tmp_path: Path) -> None:
    metadata = write_metadata(tmp_path, LEDGER + "[analysts.alice]\nepsilon = 1e6\n")
    child = _python(_CRASHER, str(SAMPLE), str(metadata))
    assert child.stdout is not None
    printed = [child.stdout.readline() for _ in range(8)]
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    printed += child.stdout.readlines()
    released = len([line for line in printed if line.strip()])

    raw = sqlite3.connect(tmp_path / "ledger.sqlite")
    assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    rows = raw.execute("SELECT epsilon, answer IS NOT NULL FROM charges").fetchall()
    raw.close()
    # every released answer was charged first; at most one charge has no released answer
    assert released <= len(rows) <= released + 1
    assert sum(stored for _, stored in rows) >= released
    with Database(SAMPLE, metadata, analyst="alice") as db:
        assert db.budget().spent.epsilon == 0.5 * len(rows)  # type: ignore[union-attr]
        db.query(COUNT, epsilon=0.5)  # the ledger is still usable
        assert db.budget().spent.epsilon == 0.5 * (len(rows) + 1)  # type: ignore[union-attr]


# --- the command line charges the same ledger -------------------------------------------------


def _cli(*args: str, input: str | None = None) -> object:
    return CliRunner().invoke(main, list(args), input=input)


def test_the_cli_and_the_dbapi_charge_one_ledger(metadata: Path) -> None:
    out = _cli("query", COUNT, "-d", str(SAMPLE), "-m", str(metadata), "--analyst", "alice",
               "-e", "0.5")
    assert out.exit_code == 0, out.output  # type: ignore[attr-defined]
    assert "charged to alice" in out.output  # type: ignore[attr-defined]
    with dpsql.connect(SAMPLE, metadata, analyst="alice", epsilon=0.25) as conn:
        assert conn.budget().spent.epsilon == 0.5  # type: ignore[union-attr]
        conn.cursor().execute("SELECT COUNT(*) FROM visits")
    again = _cli("query", COUNT, "-d", str(SAMPLE), "-m", str(metadata), "-a", "alice",
                 "-e", "0.5")
    assert "no new privacy cost" in again.output  # type: ignore[attr-defined]
    assert [(a, e) for a, e, _, _ in charges(metadata)] == [("alice", 0.5), ("alice", 0.25)]


def test_the_cli_defaults_to_the_env_analyst(metadata: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPSQL_ANALYST", "bob")
    out = _cli("query", COUNT, "-d", str(SAMPLE), "-m", str(metadata), "-e", "0.5")
    assert out.exit_code == 0 and "charged to bob" in out.output  # type: ignore[attr-defined]
    assert charges(metadata)[0][0] == "bob"


def test_the_cli_exits_1_on_an_exhausted_budget(metadata: Path) -> None:
    out = _cli("query", COUNT, "-d", str(SAMPLE), "-m", str(metadata), "-a", "bob", "-e", "2")
    assert out.exit_code == 1  # type: ignore[attr-defined]
    assert "BudgetExhausted" in out.output and "remaining epsilon=1" in out.output  # type: ignore
    assert charges(metadata) == []
    unknown = _cli("query", COUNT, "-d", str(SAMPLE), "-m", str(metadata), "-a", "zed")
    assert unknown.exit_code == 1 and "zed" in unknown.output  # type: ignore[attr-defined]


def test_the_cli_warns_when_nothing_is_metered(tmp_path: Path) -> None:
    metadata = write_metadata(tmp_path, "")
    out = _cli("query", COUNT, "-d", str(SAMPLE), "-m", str(metadata))
    assert out.exit_code == 0  # type: ignore[attr-defined]
    assert (f"no privacy budget declared in {metadata}: nothing limits the total privacy loss"
            in out.output)  # type: ignore[attr-defined]


def test_budget_lists_analysts_and_recent_queries(tmp_path: Path) -> None:
    metadata = write_metadata(tmp_path, BUDGET + '\n[analysts."*"]\nepsilon = 3.0\n')
    with Database(SAMPLE, metadata) as db:
        db.query(COUNT, epsilon=0.5, analyst="alice")
        db.query("SELECT COUNT(*) FROM visits WHERE amount > ?", epsilon=1.5, analyst="carol",
                 parameters=(100,))
    out = _cli("budget", "-m", str(metadata))
    assert out.exit_code == 0, out.output  # type: ignore[attr-defined]
    text = out.output  # type: ignore[attr-defined]
    lines = {line.split("|")[0].strip(): [c.strip() for c in line.split("|")]
             for line in text.splitlines() if "|" in line}
    assert lines["alice"][1:5] == ["[analysts.alice]", "15", "0.5", "14.5"]
    assert lines["bob"][1:5] == ["[analysts.bob]", "1", "0", "1"]
    assert lines["carol"][1:5] == ['[analysts."*"]', "3", "1.5", "1.5"]
    assert "SELECT COUNT(*) FROM visits WHERE amount > 100" in text
    one = _cli("budget", "-m", str(metadata), "--analyst", "carol", "-n", "5")
    assert "alice" not in one.output and "carol" in one.output  # type: ignore[attr-defined]


def test_budget_reset_asks_and_keeps_the_history(metadata: Path) -> None:
    with Database(SAMPLE, metadata, analyst="bob") as db:
        db.query(COUNT, epsilon=1.0)
    declined = _cli("budget", "reset", "bob", "-m", str(metadata), input="n\n")
    assert declined.exit_code == 1 and "Aborted" in declined.output  # type: ignore[attr-defined]
    with Database(SAMPLE, metadata, analyst="bob") as db:
        assert db.budget().remaining.epsilon == 0  # type: ignore[union-attr]
    confirmed = _cli("budget", "-m", str(metadata), "reset", "bob", input="y\n")
    assert confirmed.exit_code == 0, confirmed.output  # type: ignore[attr-defined]
    assert "reset 'bob'" in confirmed.output  # type: ignore[attr-defined]
    forced = _cli("budget", "reset", "bob", "-m", str(metadata), "--yes")
    assert forced.exit_code == 0  # type: ignore[attr-defined]
    with Database(SAMPLE, metadata, analyst="bob") as db:
        assert db.budget().remaining.epsilon == 1.0  # type: ignore[union-attr]
        db.query("SELECT COUNT(*) FROM visits", epsilon=1.0)
    assert len(charges(metadata)) == 2  # the charge before the reset is still recorded
    unknown = _cli("budget", "reset", "zed", "-m", str(metadata), "--yes")
    assert unknown.exit_code == 1 and "zed" in unknown.output  # type: ignore[attr-defined]


def test_budget_on_unmetered_metadata_says_so(tmp_path: Path) -> None:
    metadata = write_metadata(tmp_path, "")
    out = _cli("budget", "-m", str(metadata))
    assert out.exit_code == 0 and "no privacy budget declared" in out.output  # type: ignore
    reset = _cli("budget", "reset", "bob", "-m", str(metadata), "--yes")
    assert reset.exit_code == 2  # type: ignore[attr-defined]
