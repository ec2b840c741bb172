"""The tutorial notebooks under docs/notebooks/ run from start to end without an error
(nbclient, on a fresh Python kernel that imports this dpsql, with the run's throwaway ledger).

The notebook runner is imported, not skipped when missing: scripts/test installs it (the test
extra), and a CI without it must fail rather than pass without running a notebook."""

from __future__ import annotations

import os
from pathlib import Path

import nbclient
import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).parents[2] / "docs" / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks() -> None:
    """An empty parameter list would skip the test below: the tutorial must be there."""
    assert "first_hour.ipynb" in [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(Path(__file__).parents[2])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("DPSQL_LEDGER", str(tmp_path / "ledger.sqlite"))
    notebook = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(notebook, timeout=60, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code"
               for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("±" in page and "privacy cost" in page for page in html)  # a result's display
    shown = "".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    if path.stem == "first_hour":  # 14 daily AVGs at epsilon 0.05: their caveats (about 11
        # sit at a bound; none, a chance of about 1e-8)
        assert "The noise exceeds the value in " in shown and "AVG at a bound" in shown
