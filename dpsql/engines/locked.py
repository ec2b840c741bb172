"""The one way dpsql opens a DuckDB connection of its own: locked down.

Every DuckDB connection dpsql opens -- the engine's read-only database, the scratch database of
plan-time checks and post-processing, the public store, the server's catalog -- is the second
wall behind the checker: no extension is installed or loaded behind dpsql's back
(:data:`CONFIG`), and once the connection holds what it needs, external access (files, the
network) is off and the configuration is locked, so that no SQL can turn either back on
(:func:`lock`). :func:`in_memory` and :func:`read_only` open connections so.
"""

from __future__ import annotations

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
    """``rows`` into ``table`` (its SQL name) whose columns have the DuckDB ``types``, many
    rows a statement: DuckDB's ``executemany`` runs one statement a row, seconds for
    thousands. Each value is cast to its column's type, as a one-row INSERT would cast it, so
    that one VALUES list never unifies a column's values into a wider type first (a BIGINT
    beside a DOUBLE would round)."""
    if types:
        insert_values(con, table, rows, "(" + ", ".join(f"CAST(? AS {t})" for t in types) + ")")


def insert_values(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[Sequence[object]],
                  row: str | None = None) -> None:
    """``rows`` into ``table`` (its SQL name, with a column list if given), many rows a
    statement, each row's values written as ``row`` (bare parameters by default: converted to
    the columns' types on insert)."""
    if not rows:
        return
    width = len(rows[0])
    row = row or "(" + ", ".join(["?"] * width) + ")"
    chunk = max(1, 2000 // width)
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        con.execute(f"INSERT INTO {table} VALUES " + ", ".join([row] * len(part)),
                    [value for r in part for value in r])
