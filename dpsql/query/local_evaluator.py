"""The local evaluator: SQL run over values dpsql already holds (constants, public domains,
noisy cells), in an in-memory DuckDB that holds no private data and reads no file.

Not an engine: no private row ever reaches it. Constant folding (:mod:`dpsql.query.fold_constants`),
public domains (:mod:`dpsql.privacy.domains`, :mod:`dpsql.privacy.key_filters`), free answers
(:mod:`dpsql.execution.free`) and post-processing (:mod:`dpsql.execution.postprocess`) run
their SQL here, on a locked connection (:mod:`dpsql.engines.locked`) with external access
disabled.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

import duckdb

from dpsql.engines import locked
from dpsql.errors import EngineError

if TYPE_CHECKING:
    import numpy as np

_scratch_lock = threading.Lock()
_scratch: duckdb.DuckDBPyConnection | None = None
_scratch_local = threading.local()


def scratch() -> duckdb.DuckDBPyConnection:
    """A per-thread cursor on an in-memory DuckDB that holds no private data."""
    global _scratch
    cur: duckdb.DuckDBPyConnection | None = getattr(_scratch_local, "cursor", None)
    if cur is not None:
        return cur
    with _scratch_lock:
        if _scratch is None:
            _scratch = locked.in_memory()
        cur = _scratch.cursor()
    _scratch_local.cursor = cur
    return cur


def run_over(sql: str, name: str, columns: Mapping[str, np.ndarray]
                 ) -> tuple[list[str], list[str], list[tuple[object, ...]]]:
    """Run ``sql`` over a table ``name`` of ``columns`` (numpy arrays: noisy cells, a public
    domain): its column names, their DuckDB types and its rows."""
    cur = scratch()
    cur.register(name, columns)
    try:
        result = cur.execute(sql)
        description = result.description or []
        return ([d[0] for d in description], [str(d[1]) for d in description],
                result.fetchall())
    except duckdb.Error as e:  # reads noisy cells or public domains only, never private rows
        raise EngineError(f"the engine failed on the query over the noisy cells: {e}") from None
    finally:
        cur.unregister(name)
