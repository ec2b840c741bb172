"""How DuckDB groups the rows by unit: a perfect hash for a whole table of integer units, an
ordinary hash table where a filter keeps some rows (issue 39.4).

Bounding groups the rows by unit (the per-unit totals of bounding by weights, the per-unit
sums and counts). DuckDB groups integer keys whose statistics (the column's minimum and
maximum) span at most ``perfect_ht_threshold`` bits with a *perfect hash*, one slot per possible
value, allocated whole by every thread; by default 12 bits, so the dense ids of a table of a
million units (20 bits) go through a general hash table instead. At 20 bits the per-unit
``GROUP BY`` of 10M rows over 1M units takes 57 ms of CPU instead of 194, and ``MEDIAN`` of
those rows 443 instead of 596 (``benchmarks/README.md``, "MEDIAN: a perfect hash for the
units"). But the table's slots are allocated and scanned however few rows reach it: a
selective ``WHERE`` then pays about 20 ms more (2**20 slots, two threads).

The setting is global to the database and locked (:mod:`dpsql.engines.locked`), so the choice
per query is made in its SQL instead: the engine opens the database with the wider threshold
(:data:`SETTINGS`), and where the rows are filtered, the unit is spelled ``~(~unit)``, the same
value of the same type, whose statistics DuckDB does not derive (:func:`filtered_units`): that
query groups with the general hash table, as it did before. Where no filter runs, every row
reaches the table, and the perfect hash is the faster one."""

from __future__ import annotations

import math
import os

from sqlglot import exp

#: The widest perfect hash: enough for the ids of a million units.
_BITS = 20
#: The slots of every thread's perfect hash together, at most (each slot holds the unit's
#: aggregate states, tens of bytes: a few hundred MB at most on a machine of many cores).
_ALL_THREADS_BITS = 23


def settings(threads: int | None = None) -> dict[str, int]:
    """The connect settings of the engine's database: the perfect-hash threshold, narrowed
    on a machine of many threads (``threads``: DuckDB's default, the machine's cores)."""
    threads = threads or os.cpu_count() or 1
    bits = min(_BITS, _ALL_THREADS_BITS - math.ceil(math.log2(threads)))
    return {"perfect_ht_threshold": max(12, bits)}  # 12: DuckDB's default


#: The unit columns' types whose statistics can make a perfect hash.
_INTEGERS = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                       "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"})


def filtered_units(tree: exp.Expression, schema: dict[str, dict[str, str]]) -> None:
    """In place: the unit ``__unit`` of every filtered read of a table whose unit column is
    an integer (``schema``: table -> column -> DuckDB type) spelled ``~(~unit)``, so that its
    ``GROUP BY`` does not take the perfect hash (module docstring). ``~`` is its own inverse
    on every integer type and keeps the type: the groups, the salted hashes of the unit and
    the joins on it are unchanged."""
    for alias in list(tree.find_all(exp.Alias)):
        if alias.alias != "__unit" or not isinstance(alias.this, exp.Column):
            continue
        select = alias.parent
        if not isinstance(select, exp.Select) or not _filtered(select):
            continue
        table = select.args.get("from_")
        source = table.this if table is not None else None
        if not isinstance(source, exp.Table) or source.args.get("db") is not None:
            continue
        kind = schema.get(source.name.lower(), {}).get(alias.this.name.lower())
        if kind in _INTEGERS:
            unit = alias.this.copy()
            alias.set("this", exp.BitwiseNot(this=exp.Paren(this=exp.BitwiseNot(this=unit))))


def _filtered(select: exp.Select) -> bool:
    """Whether ``select`` keeps fewer than all rows of its table with a unit: a ``WHERE``
    beyond the rewrite's own ``NOT unit IS NULL``."""
    where = select.args.get("where")
    if where is None:
        return False
    condition = where.this
    return not (isinstance(condition, exp.Not) and isinstance(condition.this, exp.Is))
