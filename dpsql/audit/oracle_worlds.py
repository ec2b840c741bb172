"""The worlds of the semantic oracle (:mod:`dpsql.audit.oracle`): small databases of the
neighbour generator's metadata (:data:`tests.support.neighbour_queries.METADATA`) where no
contribution bound bites, full of what SQL's semantics hinge on.

Unlike the neighbour test's worlds (:mod:`dpsql.audit.neighbour_worlds`, whose adversary breaks
every bound on purpose), every unit here stays inside the declaration: values within their
bounds (``clamp_bites`` breaks that one, for the clamping rule), at most ``min(k, g)`` rows of
a bounded table per unit (so at most k rows and g groups, whatever the keys), one row per unit
of a ``one_row_per_unit`` table. Around that: NULLs in every nullable column, units whose values
are all NULL, NaN in float columns, rows whose unit is NULL (and ``unit_path`` rows that reach
no unit: a NULL or a dangling path), units without rows in a table (a LEFT JOIN NULL-fills
them), rows duplicated in all but their unique column, domain values no row holds (empty
groups), and keys drawn from a small vocabulary so that thresholded groups hold several units.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from dpsql.audit.neighbour_engines import _duckdb_table
from dpsql.audit.neighbour_worlds import TableData, World, _public_rows
from dpsql.metadata.metadata import ENGINE_TYPES, Column, Metadata, Table

#: Domain values no row of an oracle world holds: their groups are empty (released as such).
UNUSED = {"grp": "d", "drug": "z"}
#: The small vocabularies of thresholded keys (several units share each value).
_DAYS = [dt.date(2025, 3, 4), dt.date(2025, 3, 5), dt.date(2025, 7, 1), dt.date(2025, 12, 31)]
_AMOUNTS = [0.0, 12.5, 50.0, 99.75, 100.0]
_INCOMES = [0.0, 250.5, 1000.0]
_CITIES = ["city0", "city1", "city2", "zz_nowhere"]


@dataclass
class Worlds:
    """An oracle world and what the reference model needs to know about it."""

    world: World
    nan: bool  # whether some float column holds NaN
    clamp_bites: bool  # whether some values lie outside their declared bounds
    bounds_bite: bool = False  # whether some units have more than k rows, in more than g groups
    notes: list[str] = field(default_factory=list)


def oracle_world(metadata: Metadata, seed: int = 0, units: int = 30, nan: bool = True,
                 clamp_bites: bool = False, bounds_bite: bool = False) -> Worlds:
    """A world of ``units`` units for ``metadata`` (the module docstring says what it holds);
    with ``bounds_bite``, every third unit has 2k+1 or more rows of a bounded table, across
    more than g groups (the reference of :mod:`dpsql.audit.oracle_bounds`)."""
    rng = random.Random(f"oracle-{seed}")
    tables: dict[str, TableData] = {}
    vids: dict[int, int | None] = {}  # a visits row's unique id -> its unit (None: no unit)
    for table in sorted(metadata.tables.values(), key=lambda t: t.unit_path is not None):
        columns = list(table.columns)
        types = [ENGINE_TYPES[table.columns[c].type] for c in columns]
        data = TableData(table.name, columns, types)
        tables[table.name] = data
        if table.public:
            data.rows = [(None, r) for r in _public_rows(table, rng)]
            continue
        for u in range(1, units + 1):
            for row in _unit_rows(table, u, rng, vids, nan, clamp_bites, bounds_bite):
                data.rows.append((f"u{u}", row))
        for row in _rows_of_no_one(table, rng, vids, nan):
            data.rows.append((None, row))
    world = World(metadata, tables, [], [n for n, t in metadata.tables.items() if t.public],
                  [f"u{u}" for u in range(1, units + 1)])
    return Worlds(world, nan, clamp_bites, bounds_bite)


def _unit_rows(table: Table, u: int, rng: random.Random, vids: dict[int, int | None],
               nan: bool, clamp_bites: bool, bounds_bite: bool = False
               ) -> list[tuple[object, ...]]:
    if table.one_row_per_unit:
        return [] if u % 9 == 4 else [_row(table, u, 0, rng, vids, nan, clamp_bites)]
    if table.unit_path is not None:  # rows reach their unit through the path's target
        mine = [v for v, owner in vids.items() if owner == u]
        rows = [_row(table, u, j, rng, vids, nan, clamp_bites, path=v)
                for j, v in enumerate(mine[:1])]
        if rows and u % 4 == 0:
            rows.append(rows[-1])  # a duplicated row (no unique column here)
        return rows
    per_unit = max(1, min(table.max_rows_per_unit, table.max_groups_per_unit))
    count = 0 if u % 7 == 3 else 1 + (u % per_unit)
    if bounds_bite and u % 3 == 2:  # more than k rows, in more than g groups (some all-NULL)
        count = 2 * table.max_rows_per_unit + 1 + u % 4
    rows = [_row(table, u, j, rng, vids, nan, clamp_bites) for j in range(count)]
    if u % 5 == 1 and 0 < count < per_unit:  # duplicated in all but its unique column
        rows.append(_duplicate(table, rows[-1], u, count, vids))
    return rows


def _duplicate(table: Table, row: tuple[object, ...], u: int, j: int,
               vids: dict[int, int | None]) -> tuple[object, ...]:
    out = list(row)
    for i, c in enumerate(table.columns):
        if table.columns[c].unique:
            out[i] = u * 1000 + j
            vids[u * 1000 + j] = u
    return tuple(out)


def _rows_of_no_one(table: Table, rng: random.Random, vids: dict[int, int | None],
                    nan: bool) -> list[tuple[object, ...]]:
    """Rows whose unit is NULL, or whose ``unit_path`` reaches no unit (NULL, dangling, or a
    target row whose own unit is NULL)."""
    if table.unit_path is not None:
        orphans = [v for v, owner in vids.items() if owner is None]
        return [_row(table, 0, j, rng, vids, nan, False, path=v)
                for j, v in enumerate([None, 777_777, *orphans[:1]])]
    count = 1 if table.one_row_per_unit else 2
    return [_row(table, 0, j, rng, vids, nan, False) for j in range(count)]


def _row(table: Table, u: int, j: int, rng: random.Random, vids: dict[int, int | None],
         nan: bool, clamp_bites: bool, path: int | None = None) -> tuple[object, ...]:
    out: list[object] = []
    for name, column in table.columns.items():
        if name == table.privacy_unit:
            out.append(u or None)
        elif table.unit_path is not None and name == table.unit_path[0]:
            out.append(path)
        elif column.unique:
            value = u * 1000 + j if u else 900_000 + j + 10 * len(vids)
            vids[value] = u or None
            out.append(value)
        else:
            out.append(_value(column, u, j, rng, nan, clamp_bites))
    return tuple(out)


def _value(column: Column, u: int, j: int, rng: random.Random, nan: bool,
           clamp_bites: bool) -> object:
    """An in-bounds value (NULL and NaN where allowed; out of bounds when ``clamp_bites``)."""
    all_null = u % 6 == 5  # every nullable value of this unit is NULL
    if column.nullable and (all_null or rng.random() < 0.2):
        return None
    if column.values:
        usable = [v for v in column.values if v not in UNUSED.values()]
        return usable[(u + j) % len(usable)]
    kind = column.type
    if kind == "float":
        if nan and column.nullable and rng.random() < 0.1:
            return math.nan
        vocabulary = _INCOMES if column.name == "income" else _AMOUNTS
        value = rng.choice(vocabulary)
        if clamp_bites and rng.random() < 0.3 and column.upper is not None:
            return float(column.upper) * 3 if rng.random() < 0.5 else -float(column.upper)
        return value
    if kind == "int":
        lo, hi = int(column.lower or 0), int(column.upper or 10)
        if clamp_bites and rng.random() < 0.3:
            return hi + 7 if rng.random() < 0.5 else lo - 7
        return rng.choice([lo, hi, (lo + hi) // 2, lo + 1, rng.randint(lo, hi)])
    if kind == "text":
        return rng.choice(_CITIES) if column.name == "city" else f"{column.name}{u % 3}"
    if kind == "date":
        return rng.choice(_DAYS)
    if kind == "bool":
        return u % 2 == 0
    return dt.datetime(2025, 1, 1) + dt.timedelta(hours=u)


def to_duckdb(world: World, path: Path | str) -> duckdb.DuckDBPyConnection:
    """``world``'s tables in the DuckDB database at ``path`` (``:memory:`` too), the
    connection returned open."""
    con = duckdb.connect(str(path))
    for t in world.tables.values():
        _duckdb_table(con, "main", t)
    return con


def to_postgres(world: World, url: str) -> None:
    """``world``'s tables in the current schema of the PostgreSQL database at ``url``."""
    import psycopg

    from dpsql.audit.neighbour_engines import _pg_table

    with psycopg.connect(url, autocommit=True) as con:
        for t in world.tables.values():
            con.execute(f'DROP TABLE IF EXISTS "{t.name}"')
            _pg_table(con, "public", t, lambda owner: True)


def to_parquet(world: World, folder: Path) -> None:
    """``world``'s tables as ``folder/<table>.parquet`` (written by DuckDB), the files a Spark
    engine URL's ``folder`` reads."""
    folder.mkdir(parents=True, exist_ok=True)
    con = to_duckdb(world, ":memory:")
    try:
        for name in world.tables:
            con.execute(f"COPY \"{name}\" TO '{folder / name}.parquet' (FORMAT parquet)")
    finally:
        con.close()
