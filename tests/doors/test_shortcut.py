"""``dpsql query`` asked again: the stored answer is found from the text as typed, before the
planner is imported (:mod:`dpsql.shortcut`), and shows exactly what the normal path shows;
whatever differs from the stored call falls through to the normal path (a new charge)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dpsql.metadata.sample import sample_paths

HEAVY = ("sqlglot", "duckdb", "numpy")
QUERY = "SELECT sex, COUNT(*) AS n, AVG(income) AS avg_income FROM people GROUP BY sex"
#: A command line that also prints, last, which heavy packages it imported.
RUN = ("import sys\nfrom dpsql.cli import main\ntry:\n    main(sys.argv[1:], prog_name='dpsql')\n"
       "except SystemExit as e:\n    code = e.code\n"
       f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
       "sys.exit(code)")


def dpsql(ledger: Path, *args: str, analyst: str = "alice") -> tuple[str, str, list[str]]:
    """stdout, stderr (without the last line) and the heavy packages imported."""
    env = {**os.environ, "DPSQL_LEDGER": str(ledger), "DPSQL_ANALYST": analyst,
           "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    *err, heavy = proc.stderr.splitlines()
    return proc.stdout, "\n".join(err), json.loads(heavy.replace("'", '"'))


def spent(ledger: Path, analyst: str = "alice") -> float:
    out, _, _ = dpsql(ledger, "budget", "--format", "json", "-a", analyst, analyst=analyst)
    return float(json.loads(out)["budgets"][0]["epsilon_spent"])


@pytest.mark.parametrize("options", [("--accuracy",), ("--format", "json"),
                                     ("--format", "csv", "-e", "0.01"), ("--no-caveats",)])
def test_a_stored_answer_without_the_planner(tmp_path: Path, options: tuple[str, ...]) -> None:
    ledger = tmp_path / "ledger.sqlite"
    first = dpsql(ledger, "query", QUERY, *options)
    assert set(first[2]) == set(HEAVY)  # answered the normal way, and charged
    once = spent(ledger)
    again = dpsql(ledger, "query", QUERY, *options)
    assert again[2] == []  # neither sqlglot, DuckDB nor numpy
    assert spent(ledger) == once  # free
    (tmp_path / "ledger.sqlite.typed").unlink()  # the normal path's reuse, for comparison
    normal = dpsql(ledger, "query", QUERY, *options)
    assert set(normal[2]) == set(HEAVY)
    assert again[:2] == normal[:2]  # the same table, notes, caveats and cost line
    assert "the stored answer to the same query" in again[1] + again[0]


def test_caveats_come_back_with_the_stored_answer(tmp_path: Path) -> None:
    """A count of no one: its noisy value lies within its ±95% (the note) with probability
    0.95 a query, so another text is asked until one has the note (six tries: 2e-8 to fail)."""
    ledger, note = tmp_path / "ledger.sqlite", "note: The noise exceeds the value"
    for i in range(6):
        query = f"SELECT COUNT(*) AS n FROM people WHERE age > {99 + i}"
        first = dpsql(ledger, "query", query, "-e", "0.01")
        if note in first[1]:
            break
    assert note in first[1]
    again = dpsql(ledger, "query", query, "-e", "0.01")
    assert again[2] == [] and again[0] == first[0] and note in again[1]


def test_anything_else_takes_the_normal_path(tmp_path: Path) -> None:
    """Another analyst, epsilon, text or metadata is not the stored call: planned and charged
    as always; a text naming the clock is never indexed (its key holds the instant)."""
    ledger = tmp_path / "ledger.sqlite"
    dpsql(ledger, "query", QUERY)
    for args, analyst in (((QUERY,), "bob"), ((QUERY, "-e", "0.5"), "alice")):
        before = spent(ledger, analyst)
        _, err, heavy = dpsql(ledger, "query", *args, analyst=analyst)
        assert heavy and "charged to" in err and spent(ledger, analyst) > before
    _, err, heavy = dpsql(ledger, "query", QUERY + "  ")  # another text, the same query:
    assert heavy and "the stored answer" in err  # found by the normal path's key
    database, metadata = sample_paths()
    changed = tmp_path / "metadata.toml"
    shutil.copy(metadata, changed)
    for shortcut in (False, True):  # another metadata file: the normal path, then indexed
        _, err, heavy = dpsql(ledger, "query", QUERY, "-d", str(database), "-m", str(changed))
        # the same database and declarations: the normal path's key finds the answer too
        assert (heavy == []) == shortcut and "the stored answer" in err
    text = changed.read_text(encoding="utf-8").replace("max_rows_per_unit = 150",
                                                       "max_rows_per_unit = 149", 1)
    assert text != changed.read_text(encoding="utf-8")
    changed.write_text(text, encoding="utf-8")
    _, err, heavy = dpsql(ledger, "query", QUERY, "-d", str(database), "-m", str(changed))
    assert heavy and "charged to" in err  # another metadata: another answer key
    clock = "SELECT COUNT(*) AS n FROM visits WHERE day <= CURRENT_DATE"
    dpsql(ledger, "query", clock)
    _, err, heavy = dpsql(ledger, "query", clock)
    assert heavy and "the stored answer" in err  # found, by the normal path only
