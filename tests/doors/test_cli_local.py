"""`dpsql release --local`, `dpsql audit --local` and row-level queries of local DP rows on the
command line and through the DB-API (the sample metadata opts people in)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from dpsql.cli import main
from dpsql.execution.local_rows import read_release_params


def test_release_writes_the_randomized_table_with_its_parameters(tmp_path: Path) -> None:
    out = tmp_path / "people.parquet"
    result = CliRunner().invoke(main, ["release", "--local", "people", "--out", str(out)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert "randomized rows of people" in result.stderr and "epsilon=2" in result.stderr
    params = read_release_params(out)
    assert params["table"] == "people" and params["epsilon_row"] == 2.0
    label = "are randomized (local differential privacy), not real"
    assert label in result.stderr and label in params["randomized"]  # the file says so too
    assert "person_id" in params["withheld"] and "email" in params["withheld"]
    assert sum(c["epsilon"] for c in params["columns"].values()) == 2.0  # the stated split


def test_release_of_a_table_not_opted_in_and_a_preview(tmp_path: Path) -> None:
    runner = CliRunner()
    refused = runner.invoke(main, ["release", "--local", "visits", "--out",
                                   str(tmp_path / "v.parquet")])
    assert refused.exit_code == 2 and "MetadataError" in refused.stderr
    assert "local" in refused.stderr and not (tmp_path / "v.parquet").exists()
    preview = runner.invoke(main, ["query", "SELECT sex, age FROM people LIMIT 3", "--format",
                                   "csv"], catch_exceptions=False)
    assert preview.exit_code == 0, preview.stderr
    assert len(preview.stdout.strip().splitlines()) == 4  # the header and 3 rows


def test_audit_local_prints_every_column_kind_and_the_row() -> None:
    result = CliRunner().invoke(main, ["audit", "--local", "--runs", "1000"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert {"laplace", "buckets", "grain", "warner"} <= {line.split("|")[0].strip()
                                                         for line in lines}
    assert any(line.split("|")[1].strip() == "row" for line in lines[2:])


def test_the_dbapi_door_previews_local_rows() -> None:
    import dpsql

    with dpsql.connect(epsilon=0.1) as conn:  # the sample data; the owner's epsilon is charged
        cur = conn.cursor()
        cur.execute("SELECT person_id, sex FROM people TABLESAMPLE (5 ROWS)")
        rows = cur.fetchall()
        assert [d[0] for d in cur.description] == ["person_id", "sex"]
    assert len(rows) == 5 and all(r[0] is None and r[1] in ("F", "M") for r in rows)
