"""The dry runs' database: empty tables in a locked in-memory DuckDB, one database per set.

A dry run (:mod:`dpsql.query.dry_runs`) runs a query on empty tables of the right types, so
that an error it raises whatever the data is a refusal before anything is charged. Each set
of tables is created once per process, in an in-memory database of its own attached under a
name that the set alone decides (``dry_`` and a hash of its statements: neither the name nor
anything else here tells which sets were made before), its tables in its ``main`` schema, as
a query may name them; a later dry run over the same set only switches its thread's cursor to
that database (``USE``) and runs the query's own text: a private query's engine text is
generated once, not once more around empty CTEs.

Only dpsql's engine queries run here (the analyst's public reads get a DuckDB of their own,
:func:`dpsql.execution.public.dry_run`). The tables hold no row, ever, so nothing here reads or
keeps data; the database is locked as every connection of dpsql's is
(:mod:`dpsql.engines.locked`), on one thread and with a memory limit. The sets share one
DuckDB, so a dry run's error is shown by its first line only (every caller does so): DuckDB
names a similar table of another set ("Did you mean ...") on a later line. The sets are
bounded: past :data:`MAX_SETS`, a new database replaces the old one (a thread's cursor on the
old one is replaced at its next dry run).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

import duckdb

from dpsql.engines import locked

#: Sets of tables kept before the dry database starts again empty.
MAX_SETS = 256
#: Nothing is read here: a query over empty tables needs little.
MEMORY_LIMIT = "512MB"

_lock = threading.Lock()
_local = threading.local()


class _Database:
    def __init__(self) -> None:
        self.connection = locked.in_memory(memory_limit=MEMORY_LIMIT, threads=1)
        self.sets: dict[tuple[str, ...], str] = {}


_current: _Database | None = None


def run_dry(sql: str, parameters: Sequence[object], creates: tuple[str, ...]
            ) -> tuple[list[tuple[str, str]], list[tuple[object, ...]]]:
    """Run ``sql`` (with ``parameters``) on the empty tables that ``creates`` make (``CREATE
    TABLE`` statements of unqualified names), and return its columns (name, DuckDB type) and
    rows. A ``duckdb.Error`` from the query, or from creating the tables, propagates (the
    caller words the refusal); a set whose tables could not be created is not kept."""
    database, cursor = _cursor()
    cursor.execute(f"USE {_attached(database, cursor, creates)}")
    result = cursor.execute(sql, list(parameters) or None)
    description = result.description or []
    rows = result.fetchall()
    return [(d[0], str(d[1])) for d in description], rows


def _cursor() -> tuple[_Database, duckdb.DuckDBPyConnection]:
    """The current dry database and the calling thread's cursor on it."""
    global _current
    with _lock:
        if _current is None or len(_current.sets) >= MAX_SETS:
            _current = _Database()
        database = _current
        mine = getattr(_local, "cursor", None)
        if mine is None or mine[0] is not database:
            mine = (database, database.connection.cursor())
            _local.cursor = mine
    return mine


def _attached(database: _Database, cursor: duckdb.DuckDBPyConnection,
              creates: tuple[str, ...]) -> str:
    """The attached database holding the tables of ``creates``, created on first use (under
    the lock: two threads never create the same set twice)."""
    with _lock:
        name = database.sets.get(creates)
        if name is not None:
            return name
        name = "dry_" + hashlib.sha256("\0".join(creates).encode()).hexdigest()[:32]
        cursor.execute(f"ATTACH ':memory:' AS {name}")
        try:
            cursor.execute(f"USE {name}")
            for create in creates:
                cursor.execute(create)
        except duckdb.Error:
            cursor.execute("USE memory")
            cursor.execute(f"DETACH {name}")
            raise
        database.sets[creates] = name
        return name
