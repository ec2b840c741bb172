"""The README's examples run as written and print what the README shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpsql.cli import main

README = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")


def _block(after: str, fence: str) -> str:
    start = README.index(f"```{fence}\n", README.index(after)) + len(fence) + 4
    return README[start:README.index("```\n", start)]


def test_the_python_example_runs_from_a_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).parents[2])
    code = _block("## Python", "python")
    with pytest.warns(UserWarning, match="pandas only supports SQLAlchemy"):
        exec(compile(code, "README.md", "exec"), {})  # our own README


def _normalised(text: str) -> list[str]:
    text = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\+00:00)?", "<time>", text)
    text = re.sub(r"Ledger id [0-9a-f]{32}", "Ledger id <id>", text)
    text = re.sub(r"Ledger: \S+", "Ledger: <path>", text)
    return [line.rstrip() for line in text.splitlines()]


def test_the_budget_sample_is_what_dpsql_budget_prints(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPSQL_LEDGER", str(tmp_path / "ledger.sqlite"))
    monkeypatch.setenv("DPSQL_STATE_DIR", str(tmp_path / "state"))
    runner = CliRunner()
    for args in (["SELECT sex, COUNT(*) AS n, AVG(income) FROM people GROUP BY sex"],
                 ["SELECT MEDIAN(age) FROM people", "--epsilon", "0.5"]):
        assert runner.invoke(main, ["query", *args, "--analyst", "alice"]).exit_code == 0
    printed = runner.invoke(main, ["budget"]).stdout
    shown = _block("## Privacy budget", "console").split("$ dpsql budget\n")[1].split("\n$ ")[0]
    assert _normalised(printed) == _normalised(shown)
