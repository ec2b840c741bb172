"""The README's and the docs' examples run as written and print what they show.

(tests/test_docs.py runs every block marked runnable; here the Python examples, and the
`dpsql budget` samples, which must match what dpsql prints line for line.)
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpsql.cli import main

ROOT = Path(__file__).parents[2]


def _block(doc: str, after: str, fence: str) -> str:
    text = (ROOT / doc).read_text(encoding="utf-8")
    start = text.index(f"```{fence}", text.index(after))
    start = text.index("\n", start) + 1
    return text[start:text.index("```\n", start)]


@pytest.mark.parametrize(("doc", "after"), [("README.md", "**Python**"),
                                            ("docs/python.md", "# Python")])
def test_the_python_example_runs_from_a_checkout(doc: str, after: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    code = _block(doc, after, "python")
    with warnings.catch_warnings():  # fetch_df: no pandas UserWarning on the way (issue 36)
        warnings.simplefilter("error")
        exec(compile(code, doc, "exec"), {})  # our own docs


def _normalised(text: str) -> list[str]:
    text = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\+00:00)?", "<time>", text)
    text = re.sub(r"Ledger id [0-9a-f]{32}", "Ledger id <id>", text)
    text = re.sub(r"Ledger: \S+", "Ledger: <path>", text)
    return [line.rstrip() for line in text.splitlines()]


@pytest.mark.parametrize(("doc", "after", "queries"), [
    ("docs/budget.md", "# Privacy budget", [
        ["SELECT sex, COUNT(*) AS n, AVG(income) FROM people GROUP BY sex"],
        ["SELECT MEDIAN(age) FROM people", "--epsilon", "0.5"]]),
    ("docs/getting-started.md", "## Spend less, see the budget", [
        ["SELECT sex, COUNT(*) AS n, AVG(income) FROM people GROUP BY sex", "--accuracy"],
        ["SELECT state, COUNT(*) AS n FROM people GROUP BY state ORDER BY n DESC LIMIT 3",
         "--delta", "1e-6"],
        ["SELECT MEDIAN(age) FROM people", "--epsilon", "0.5"]]),
])
def test_the_budget_sample_is_what_dpsql_budget_prints(
        doc: str, after: str, queries: list[list[str]],
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPSQL_LEDGER", str(tmp_path / "ledger.sqlite"))
    monkeypatch.setenv("DPSQL_STATE_DIR", str(tmp_path / "state"))
    runner = CliRunner()
    for args in queries:
        assert runner.invoke(main, ["query", *args, "--analyst", "alice"]).exit_code == 0
    printed = runner.invoke(main, ["budget"]).stdout
    shown = _block(doc, after, "console").split("$ dpsql budget\n")[1].split("\n$ ")[0]
    assert _normalised(printed) == _normalised(shown)
