"""Crafted databases for case files that the sample data cannot exercise, named in a file's
header (``-- database: events``). Each is built in a temporary folder from SQL and metadata
written here, so the bundled sample data stays as it is."""

from __future__ import annotations

import datetime as dt
import tomllib
from pathlib import Path
from typing import Any

import duckdb
import tomli_w

import dpsql
import dpsql.database

#: ``events``: 2,000 people, one timestamped event each, over the first quarter of 2025
#: (one every 3,889 seconds, about 1h05), with a public range, plus a timestamp kept as text
#: and one without bounds.
EVENTS_SQL = (
    "CREATE TABLE events AS SELECT i AS person_id, TIMESTAMP '2025-01-01 00:00:00' + "
    "to_seconds(CAST(i * 3889 AS BIGINT)) AS ts, CAST(TIMESTAMP '2025-01-01 00:00:00' + "
    "to_seconds(CAST(i * 3889 AS BIGINT)) AS VARCHAR) AS ts_text, "
    "CAST(TIMESTAMP '2025-01-01 00:00:00' + to_seconds(CAST(i * 3889 AS BIGINT)) AS TIMESTAMPTZ) "
    "AS logged, CAST(i % 7 AS DOUBLE) AS amount, DATE '2025-01-01' + CAST(i % 90 AS INTEGER) "
    "AS day FROM range(2000) t(i)")
EVENTS: dict[str, Any] = {"events": {
    "privacy_unit": "person_id", "max_rows_per_unit": 1, "one_row_per_unit": True,
    "columns": {
        "person_id": {"type": "int"},
        "ts": {"type": "timestamp", "lower": dt.datetime(2025, 1, 1),
               "upper": dt.datetime(2025, 3, 31, 23, 59, 59), "public_range": True},
        "ts_text": {"type": "text"},
        "logged": {"type": "timestamp", "nullable": True},
        "amount": {"type": "float", "lower": 0, "upper": 10},
        "day": {"type": "date", "lower": dt.date(2025, 1, 1), "upper": dt.date(2025, 3, 31),
                "public_range": True}}}}


#: The contribution bounds the corpus's cases were written for (each case's l1 follows them),
#: pinned here so that the sample data's own, tuned for its README, can change: k and g of
#: visits and prescriptions; their caps stay the sample's.
CORPUS_BOUNDS = {"visits": (10, 3), "prescriptions": (20, 3)}


def corpus_metadata() -> dict[str, Any]:
    """The sample data's metadata (parsed TOML) with :data:`CORPUS_BOUNDS`."""
    data = tomllib.loads(dpsql.database.sample_paths()[1].read_text(encoding="utf-8"))
    for table, (k, g) in CORPUS_BOUNDS.items():
        data["tables"][table].update(max_rows_per_unit=k, max_groups_per_unit=g)
    return data


def auto_metadata() -> dict[str, Any]:
    """``auto``: the corpus's metadata with visits' k chosen from the data up to its cap
    (``max_rows_per_unit = { auto = true, max = 1000 }``, dpsql.metadata.auto)."""
    data = corpus_metadata()
    visits = data["tables"]["visits"]
    visits["max_rows_per_unit"] = {"auto": True, "max": visits.pop("max_rows_per_unit_cap")}
    return data


def autoval_metadata() -> dict[str, Any]:
    """``autoval``: the corpus's metadata with value bounds chosen from the data
    (dpsql.privacy.auto_values): visits' amount up to 5000 and duration_min down to 5, people's
    income up to 250000 (a table of one row per person). k stays fixed (10): an automatic k
    with them is tested in tests/privacy/test_auto_values.py and the neighbour harness's
    ``auto_values`` pair with k automatic (tests/neighbours/test_neighbours.py)."""
    data = corpus_metadata()
    visits, people = (data["tables"][t]["columns"] for t in ("visits", "people"))
    visits["amount"]["upper"] = {"auto": True, "max": visits["amount"]["upper"]}
    visits["duration_min"]["lower"] = {"auto": True, "min": visits["duration_min"]["lower"],
                                       "share": 0.05}
    people["income"]["upper"] = {"auto": True, "max": people["income"]["upper"], "share": 0.2}
    return data


def open_database(name: str, folder: Path) -> dpsql.Database:
    """The database ``name`` (see grammar_tests.corpus.DATABASES), built in ``folder``."""
    if name == "sample":
        return _pinned(folder, "sample.toml", corpus_metadata())
    if name == "central":
        return _central(folder)
    if name == "auto":
        return _pinned(folder, "auto.toml", auto_metadata())
    if name == "autoval":
        return _pinned(folder, "autoval.toml", autoval_metadata())
    assert name == "events", name
    path = folder / "events.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(EVENTS_SQL)
    metadata = folder / "events.toml"
    metadata.write_text(tomli_w.dumps({"tables": EVENTS}), encoding="utf-8")
    return dpsql.Database(path, metadata)


def _pinned(folder: Path, name: str, declared: dict[str, Any]) -> dpsql.Database:
    """The sample data under ``declared`` (its ledger is under ~, as the sample's)."""
    path = folder / name
    path.write_text(tomli_w.dumps(declared), encoding="utf-8")
    return dpsql.Database(dpsql.database.sample_paths()[0], path)


def _central(folder: Path) -> dpsql.Database:
    """``central``: the sample data without the local section of people, whose row-level
    SELECTs then stay refused (the cases of private rows, CTEs, probes and mixed joins)."""
    declared = corpus_metadata()
    del declared["tables"]["people"]["local"]
    return _pinned(folder, "central.toml", declared)
