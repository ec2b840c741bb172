"""Apache Superset itself against a real ``dpsql serve``: dpsql's engine spec found through its
entry point, a ``dpsql://`` database, datasets reflected, and the queries of a time-series chart
(a month grain and a time-range filter on a date column with ``public_range``, at delta 0) and
of a table chart, built by Superset's own query builder (tests/clients/superset/charts.py).

Superset pins SQLAlchemy < 2 and dpsql's test environment has SQLAlchemy 2, so Superset lives in
its own virtual environment: ``DPSQL_SUPERSET_PYTHON`` names its Python (.ci/run builds it and
sets it; 1.5 to 4.5 minutes of installing on a shared 2-CPU machine). Without the variable
this test is skipped, which only happens outside CI.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.sandbox import served_sandbox

PASSWORD = "superset pw"
SCRIPT = Path(__file__).parent.parent / "clients" / "superset" / "charts.py"
PYTHON = os.environ.get("DPSQL_SUPERSET_PYTHON")

pytestmark = pytest.mark.skipif(not PYTHON, reason="DPSQL_SUPERSET_PYTHON is not set "
                                                   "(.ci/run sets it)")


@pytest.fixture(scope="module")
def charts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    folder = tmp_path_factory.mktemp("superset")
    with served_sandbox(folder, PASSWORD) as running:
        yield run_superset(running, folder)


def run_superset(served: SimpleNamespace, folder: Path) -> dict[str, object]:
    assert PYTHON is not None
    uri = (f"dpsql://alice:{PASSWORD.replace(' ', '%20')}@127.0.0.1:{served.port}/dpsql"
           "?options=-c%20dpsql.delta%3D0")
    work = folder / "superset_home"
    work.mkdir()
    env = {**os.environ, "SUPERSET_HOME": str(work)}
    result = subprocess.run([PYTHON, str(SCRIPT), uri, str(work)], capture_output=True,
                            text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    found: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


def test_superset_loads_the_engine_spec_and_reflects(charts: dict[str, object]) -> None:
    assert charts["engine_spec"] == "DpsqlEngineSpec" and charts["backend"] == "dpsql"
    assert {"people", "visits"} <= set(charts["tables"])  # type: ignore[call-overload]
    assert "signup_date" in charts["columns"]  # type: ignore[operator]
    assert charts["temporal"] == ["day"]


def test_time_series_chart_at_delta_0_on_a_public_range(charts: dict[str, object]) -> None:
    series = charts["series"]
    assert isinstance(series, dict) and series["error"] is None, series
    assert "DATE '2025-03-01'" in series["sql"] and "DATE_TRUNC('month', day)" in series["sql"]
    # the months the chart's time filter keeps: the public domain follows the filter
    assert charts["series_months"] == ["2025-03-01", "2025-04-01", "2025-05-01"]
    counts = {str(r["__timestamp"])[:7]: r["count"] for r in series["rows"]}
    assert all(counts[m] > 1000 for m in ("2025-03", "2025-04", "2025-05")), counts


def test_time_series_without_public_range_is_refused(charts: dict[str, object]) -> None:
    refused = charts["refused"]
    assert isinstance(refused, dict) and "no public domain" in str(refused["error"])


def test_table_chart(charts: dict[str, object]) -> None:
    table = charts["table"]
    assert isinstance(table, dict) and table["error"] is None, table
    assert "GROUP BY sex" in table["sql"]
    assert sorted(r["sex"] for r in table["rows"]) == ["F", "M"]
