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


def open_database(name: str, folder: Path) -> dpsql.Database:
    """The database ``name`` (see grammar_tests.corpus.DATABASES), built in ``folder``."""
    if name == "sample":
        return dpsql.Database()
    if name == "central":
        return _central(folder)
    assert name == "events", name
    path = folder / "events.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(EVENTS_SQL)
    metadata = folder / "events.toml"
    metadata.write_text(tomli_w.dumps({"tables": EVENTS}), encoding="utf-8")
    return dpsql.Database(path, metadata)


def _central(folder: Path) -> dpsql.Database:
    """``central``: the sample data without the local section of people, whose row-level
    SELECTs then stay refused (the cases of private rows, CTEs, probes and mixed joins)."""
    sample, metadata = dpsql.database.sample_paths()
    declared = tomllib.loads(metadata.read_text(encoding="utf-8"))
    del declared["tables"]["people"]["local"]
    path = folder / "central.toml"
    path.write_text(tomli_w.dumps(declared), encoding="utf-8")
    return dpsql.Database(sample, path)
