"""``dpsql audit --oracle``: the semantic oracle on the owner's queries, on a synthetic world of
the owner's metadata (never the data): a summary line, each disagreement with both answers,
exit status 1 on one."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dpsql.cli import main
from tests.support.mutants import MUTANTS


def test_cli_oracle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    queries = tmp_path / "queries.sql"
    queries.write_text("SELECT category, SUM(amount) FROM visits GROUP BY category;\n"
                       "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                       "AVG(amount) FROM visits;\n"
                       "SELECT COUNT(*) FROM visits WHERE amount > 10\n", encoding="utf-8")
    args = ["audit", "--oracle", "--queries", str(queries)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "3 queries in" in result.stdout and "3 agrees" in result.stdout
    MUTANTS["avg_by_rows"](monkeypatch)
    broken = CliRunner().invoke(main, args)
    assert broken.exit_code == 1 and "1 disagrees" in broken.stdout, broken.output
    assert "AVG(amount)" in broken.stderr and "reference:" in broken.stderr
    missing = CliRunner().invoke(main, ["audit", "--oracle"])
    assert missing.exit_code == 2 and "--queries" in missing.output
