"""A unit (or any column) declared int but stored in an integer type wider than BIGINT
(HUGEINT, UBIGINT, UHUGEINT, DECIMAL(p, 0) with p > 18): a value beyond BIGINT reads as NULL
(dpsql.engines.check_metadata's rule), on the local-rows path and for public tables as on the
central one, never an engine error after the charge (dpsql.engines.physical.public_select)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
import tomli_w

import dpsql
from dpsql.privacy.randomness import Randomness

pytestmark = pytest.mark.usefixtures("no_dpsql_env")  # each test's own ledger
WIDE = ["HUGEINT", "UBIGINT", "UHUGEINT", "DECIMAL(38, 0)", "DECIMAL(20, 0)"]
BEYOND = 2**63 + 5  # beyond BIGINT, inside every type above


def _open(folder: Path, kind: str, tables: dict[str, Any]) -> dpsql.Database:
    path = folder / "data.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE visits AS SELECT CAST(i % 10 AS {kind}) AS pid, 'a' AS kind "
                    f"FROM range(50) t(i) UNION ALL SELECT CAST({BEYOND} AS {kind}), 'b'")
        con.execute(f"CREATE TABLE ref AS SELECT CAST(i AS {kind}) AS n FROM range(3) t(i) "
                    f"UNION ALL SELECT CAST({BEYOND} AS {kind})")
    metadata = folder / "metadata.toml"
    metadata.write_text(tomli_w.dumps({
        "budget": {"ledger": str(folder / "ledger.sqlite")},
        "analysts": {"ann": {"epsilon": 100.0}}, "tables": tables}), encoding="utf-8")
    return dpsql.Database(path, metadata, analyst="ann", randomness=Randomness.seeded(3))


def _visits(local: dict[str, Any]) -> dict[str, Any]:
    return {"visits": {"privacy_unit": "pid", "max_rows_per_unit": 2, "columns": {
        "pid": {"type": "int"}, "kind": {"type": "text", "values": ["a", "b"]}},
        "local": {"epsilon": 0.5, "columns": {"kind": "rr"}, **local}},
        "ref": {"public": True, "columns": {"n": "int"}}}


@pytest.mark.parametrize("kind", WIDE)
def test_a_public_count_read_drops_the_unit_beyond_bigint(tmp_path: Path, kind: str) -> None:
    with _open(tmp_path, kind, _visits({"row_count": "public"})) as db:
        answered = db.run("SELECT * FROM visits")
    assert len(answered.result.rows) == 20  # 10 units x k = 2; the unreadable unit: no one


@pytest.mark.parametrize("kind", WIDE)
def test_a_sampled_read_draws_from_the_readable_units(tmp_path: Path, kind: str) -> None:
    with _open(tmp_path, kind, _visits({"sample_rows": 8})) as db:
        first = db.run("SELECT kind FROM visits")
        again = db.run("SELECT kind FROM visits LIMIT 3")
    assert len(first.result.rows) == 8 and len(again.result.rows) == 3


@pytest.mark.parametrize("kind", WIDE)
def test_a_public_table_reads_the_value_beyond_bigint_as_null(tmp_path: Path, kind: str
                                                              ) -> None:
    with _open(tmp_path, kind, _visits({"row_count": "public"})) as db:
        rows = db.query("SELECT n FROM ref ORDER BY n").rows
    assert sorted(rows, key=lambda r: (r[0] is None, r[0] or 0)) == [(0,), (1,), (2,), (None,)]
