"""The one way dpsql opens a DuckDB connection of its own: locked down.

Every DuckDB connection dpsql opens -- the engine's read-only database, the scratch database of
plan-time checks and post-processing, the public store, the server's catalog -- is the second
wall behind the checker: no extension is installed or loaded behind dpsql's back
(:data:`CONFIG`), and once the connection holds what it needs, external access (files, the
network) is off and the configuration is locked, so that no SQL can turn either back on
(:func:`lock`). :func:`in_memory` and :func:`read_only` open connections so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb

#: In the config of every connection: extensions are neither installed nor loaded on demand.
CONFIG: dict[str, Any] = {"autoinstall_known_extensions": False,
                             "autoload_known_extensions": False}
#: The lock itself, as settings (in a connect config, or SET on an open connection).
LOCK: dict[str, Any] = {"enable_external_access": False, "lock_configuration": True}


def lock(con: duckdb.DuckDBPyConnection, allowed_directory: Path | None = None
         ) -> duckdb.DuckDBPyConnection:
    """Turn external access off and lock the configuration of ``con``; with
    ``allowed_directory``, files under it stay readable (a folder of CSV/Parquet files read
    through views)."""
    if allowed_directory is not None:
        quoted = str(allowed_directory).replace("'", "''")
        con.execute(f"SET allowed_directories = ['{quoted}/']")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def in_memory(fill: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
              **settings: Any) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with ``settings`` in its config, filled by ``fill`` (which may read
    what it needs), then locked (:func:`lock`). Closed again if filling fails."""
    con = duckdb.connect(":memory:", config={**CONFIG, **settings})
    try:
        if fill is not None:
            fill(con)
        return lock(con)
    except BaseException:
        con.close()
        raise


def read_only(path: Path, allowed_directory: Path | None = None, **settings: Any
              ) -> duckdb.DuckDBPyConnection:
    """A database file opened read-only and locked. Without ``allowed_directory`` the lock
    goes in the connect config, so that a second connection to a file this process already
    opened (one DuckDB instance per file) does not try to SET it again; with one (a private
    catalog of views over that folder, this process's only connection to it), it is SET."""
    config = {**CONFIG, **settings, **({} if allowed_directory is not None else LOCK)}
    con = duckdb.connect(str(path), read_only=True, config=config)
    if allowed_directory is not None:
        lock(con, allowed_directory)
    return con


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, types: Sequence[str],
                rows: Sequence[Sequence[object]]) -> None:
    """``rows`` into ``table`` (its SQL name) whose columns have the DuckDB ``types``. Each
    value is cast to its column's type, as a one-row INSERT would cast it: never unified with
    the other values of its column into a wider type first (a BIGINT beside a DOUBLE would
    round)."""
    if types:
        _insert(con, table, rows, types)


def insert_values(con: duckdb.DuckDBPyConnection, table: str,
                  rows: Sequence[Sequence[object]]) -> None:
    """``rows`` into ``table`` (its SQL name, with a column list if given), converted to the
    columns' types on insert."""
    _insert(con, table, rows, None)


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[Sequence[object]],
            types: Sequence[str] | None) -> None:
    """Many rows a statement: DuckDB's ``executemany`` runs one statement a row (seconds for
    thousands), and a VALUES list binds each value on its own (20 us a value: 0.3 s of the
    server's catalog). So each column goes as one list parameter, unnested, when its values
    convert to one DuckDB type as they are (:func:`_one_type`); a VALUES list otherwise."""
    if not rows:
        return
    columns = [list(column) for column in zip(*rows, strict=True)]

    def cast(value: str, i: int) -> str:
        return value if types is None else f"CAST({value} AS {types[i]})"

    if all(_one_type(column) for column in columns):
        unnested = ", ".join(f"unnest(${i + 1}) AS c{i}" for i in range(len(columns)))
        selected = ", ".join(cast(f"c{i}", i) for i in range(len(columns)))
        con.execute(f"INSERT INTO {table} SELECT {selected} FROM (SELECT {unnested})", columns)
        return
    width = len(columns)
    row = "(" + ", ".join(cast("?", i) for i in range(width)) + ")"
    chunk = max(1, 2000 // width)
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        con.execute(f"INSERT INTO {table} VALUES " + ", ".join([row] * len(part)),
                    [value for r in part for value in r])


_INT64 = range(-2**63, 2**63)


def _one_type(values: Sequence[object]) -> bool:
    """Whether DuckDB converts the list ``values`` to a list of the type each value has on its
    own: values of one Python type (or None) that DuckDB never widens -- bool, int in BIGINT's
    range, float, str, date, naive datetime, or lists of such. A BIGINT beside a DOUBLE, or
    one int beyond BIGINT, would turn the whole list into DOUBLE and round."""
    kinds = {type(v) for v in values if v is not None}
    if len(kinds) != 1:
        return not kinds  # all NULL: NULLs of any type
    kind = kinds.pop()
    present = [v for v in values if v is not None]
    if kind is int:
        return all(v in _INT64 for v in present)
    if kind is dt.datetime:
        return all(v.tzinfo is None for v in present)  # type: ignore[attr-defined]
    if kind is list:
        return _one_type([x for v in present for x in v])  # type: ignore[attr-defined]
    return kind in (bool, float, str, dt.date)
