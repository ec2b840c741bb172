"""The synthetic worlds of the neighbour test (:mod:`dpsql.audit.neighbours`): a small adversarial
database D built from a metadata file alone (declared types, bounds, domains, units,
``unit_path`` and public tables; never the owner's data), its persons, a crowd, rows of no one,
and the adversary that one neighbour adds. :mod:`dpsql.audit.neighbours` says what each holds and
why.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import random
from dataclasses import dataclass, field
from typing import Any

from dpsql.audit.scenarios import Scenario, TableRows
from dpsql.metadata.metadata import ENGINE_TYPES, Metadata, Table, parse_metadata

ADVERSARY = "A"  # the person one neighbour adds
#: A removed person whose every nullable value is NULL (no unit, path or unique column): what
#: a count of units or a sum of no non-NULL value must still bound when they leave.
ALL_NULL = "p2"
BASE = "d"  # the schema of D itself


@dataclass
class TableData:
    """One table of a synthetic world: physical types (DuckDB names) and rows, each with the
    person it belongs to (None: no one's, the same in every neighbour)."""

    name: str
    columns: list[str]
    types: list[str]
    rows: list[tuple[str | None, tuple[object, ...]]] = field(default_factory=list)


@dataclass
class World:
    """A synthetic database D, its persons and the adversary (see the module docstring)."""

    metadata: Metadata
    tables: dict[str, TableData]
    persons: list[str]  # removed one at a time
    public: list[str]  # public tables: in every neighbour, outside the neighbours' schemas
    crowd: list[str] = field(default_factory=list)  # in every neighbour

    def neighbours(self) -> dict[str, set[str]]:
        """Schema name -> the persons whose rows it holds."""
        everyone = set(self.persons) | set(self.crowd)
        out = {BASE: everyone, "d_plus": everyone | {ADVERSARY}}
        for p in self.persons:
            out[f"d_minus_{p}"] = everyone - {p}
        return out

    def pairs(self) -> list[tuple[str, str, str]]:
        """(D, D', what differs) for every neighbour pair checked."""
        out = [(BASE, "d_plus", "adversary added")]
        out += [(BASE, f"d_minus_{p}", f"person {p} removed") for p in self.persons]
        return out

    def schema(self) -> dict[str, dict[str, str]]:
        """Physical types per table (lower-case names), as an engine's ``schema``."""
        return {t.name.lower(): {c.lower(): k for c, k in zip(t.columns, t.types, strict=True)}
                for t in self.tables.values()}


@dataclass
class _Spec:
    """How one table's values are drawn: its unit's values per person."""

    rng: random.Random
    text_units: bool
    extremes: int = 0  # where the adversary's extreme values start (see synthesize)
    unit_of: dict[str, object] = field(default_factory=dict)  # person -> canonical unit
    targets: dict[tuple[str, str], list[tuple[str | None, object]]] = field(
        default_factory=dict)  # (table, unique column) -> [(person, value)]


def synthesize(metadata: Metadata, seed: int = 0, persons: int = 3, crowd: int = 24,
               text_units: bool = False, extremes: int = 0) -> World:
    """A small adversarial database for ``metadata`` (the module docstring says what it
    holds): ``persons`` removed one at a time, and a ``crowd`` of people in every neighbour,
    so that a filter whose fate depends on whether *anyone* matches moves many units' rows
    at once, more than any sensitivity. ``text_units``: int unit and path columns are stored
    as VARCHAR (a CSV's), so the adversary's unit comes in several spellings. ``extremes``:
    the index of the first extreme value of each type the adversary's rows take (its one row
    of a one-row-per-unit table takes that one only, so a world per index reaches the others:
    text that converts to a date, an infinite or huge number, LIKE's wildcards)."""
    spec = _Spec(random.Random(seed), text_units, extremes)
    names = [f"p{i}" for i in range(1, persons + 1)]
    everyone = [*names, *(f"c{i}" for i in range(1, crowd + 1))]
    tables: dict[str, TableData] = {}
    for table in _in_path_order(metadata):
        tables[table.name] = _table_rows(table, metadata, everyone, spec)
    public = [t.name for t in metadata.tables.values() if t.public]
    return World(metadata, tables, names, public, everyone[persons:])


def _in_path_order(metadata: Metadata) -> list[Table]:
    """Tables with the targets of ``unit_path`` first (their unique values are needed)."""
    done: list[Table] = []
    pending = list(metadata.tables.values())
    while pending:
        for t in pending:
            if t.unit_path is None or any(d.name == t.unit_path[1] for d in done) or \
                    metadata.table(t.unit_path[1]) is None:
                done.append(t)
                pending.remove(t)
                break
        else:  # a cycle of paths: the metadata would have been refused; keep going
            done.extend(pending)
            break
    return done


def _physical(table: Table, column: str, declared: str, spec: _Spec) -> str:
    unit_like = column == table.privacy_unit or (table.unit_path is not None
                                                  and column == table.unit_path[0])
    if spec.text_units and unit_like and declared == "int":
        return "VARCHAR"
    return ENGINE_TYPES[declared]


#: The most rows (and groups) per person a synthetic world gives for a table's caps.
WORLD_ROWS = 100


def _table_rows(table: Table, metadata: Metadata, persons: list[str], spec: _Spec
                ) -> TableData:
    columns = list(table.columns)
    types = [_physical(table, c, table.columns[c].type, spec) for c in columns]
    data = TableData(table.name, columns, types)
    if table.public:
        data.rows = [(None, r) for r in _public_rows(table, spec.rng)]
        return data
    # Beyond the bounds a query may ask for (up to the owner's caps, metadata.contribution),
    # up to WORLD_ROWS: a cap of thousands would make every world that large.
    k = max(table.max_rows_per_unit, min(table.rows_cap, WORLD_ROWS), 1)
    g = max(table.max_groups_per_unit, min(table.groups_cap, WORLD_ROWS), 1)
    for i, person in enumerate(persons):
        # Some people have no rows in a table: a LEFT JOIN from another one NULL-fills it.
        if table.one_row_per_unit:
            count = 0 if i % 7 == 6 else 1
        elif i % 5 == 2 and table.unit_path is None:
            count = 0
        else:
            count = k + 2 if i == 0 else 1 + i % 3
        for j in range(count):
            data.rows.append((person, _row(table, person, i + 1, j, spec, data, extreme=False)))
    n = 1 if table.one_row_per_unit else k + 2 * g + 3
    for j in range(n):
        data.rows.append((ADVERSARY, _row(table, ADVERSARY, 99, j, spec, data,
                                          extreme=j % 2 == 0)))
    if not table.one_row_per_unit and n > 2:
        data.rows.append(data.rows[-1])  # a duplicated row
        data.rows.append(data.rows[-3])
    data.rows.extend((None, r) for r in _no_ones_rows(table, spec, data))
    return data


def _row(table: Table, person: str, number: int, j: int, spec: _Spec, data: TableData,
         extreme: bool) -> tuple[object, ...]:
    out = []
    for c, physical in zip(data.columns, data.types, strict=True):
        column = table.columns[c]
        if c == table.privacy_unit:
            value = _unit_value(column.type, number, j, physical, person == ADVERSARY)
            spec.unit_of.setdefault(person, value)
        elif table.unit_path is not None and c == table.unit_path[0]:
            value = _path_value(table, person, j, spec, physical)
        elif column.unique:
            value = number * 1_000_000 + j  # unique while a person has < 10^6 rows
            spec.targets.setdefault((table.name, c), []).append((person, value))
        elif extreme:
            value = _extreme(column.type, j // 2 + spec.extremes, physical)
        elif person == ALL_NULL and column.nullable:
            value = None
        else:
            value = _ordinary(column, spec.rng, j + number)
        out.append(value)
    return tuple(out)


#: The adversary's unit in a VARCHAR-stored int column: one person, several spellings, and
#: one that converts to no integer (its rows have no unit once typed).
SPELLINGS = ("99", "099", "+99", " 99", "99 ", "x99")


def _unit_value(declared: str, number: int, j: int, physical: str, adversary: bool) -> object:
    if declared != "int":
        return f"u{number}" if declared == "text" else number
    if physical != "VARCHAR":
        return number
    if adversary:
        return SPELLINGS[j % len(SPELLINGS)]
    return str(number) if j % 2 == 0 else f"0{number}"


def _path_value(table: Table, person: str, j: int, spec: _Spec, physical: str) -> object:
    """A path column: a unique value of one of the person's rows in the path's target."""
    assert table.unit_path is not None
    _, target, column = table.unit_path
    mine = [v for p, v in spec.targets.get((target, column), []) if p == person]
    value: object = mine[j % len(mine)] if mine else None
    if physical == "VARCHAR" and value is not None:
        return str(value) if j % 2 == 0 else f" {value}"
    return value


def _no_ones_rows(table: Table, spec: _Spec, data: TableData) -> list[tuple[object, ...]]:
    """Rows of no one, in every neighbour: a NULL unit; for a path table, a NULL path, a
    dangling one, and one that names the adversary's first target row (absent from D: it
    belongs to the adversary once the adversary is added)."""
    rows = []
    template = list(_row(table, "nobody", 0, 0, spec, data, extreme=False))
    if table.privacy_unit is not None:
        i = data.columns.index(table.privacy_unit)
        for value in (None, None):
            row = list(template)
            row[i] = value
            rows.append(tuple(row))
    if table.unit_path is not None:
        i = data.columns.index(table.unit_path[0])
        adversary = [v for p, v in spec.targets.get(table.unit_path[1:], []) if p == ADVERSARY]
        for value in (None, 777_777, *(adversary[:1])):
            row = list(template)
            row[i] = str(value) if value is not None and data.types[i] == "VARCHAR" else value
            rows.append(tuple(row))
    return rows


def _ordinary(column: Any, rng: random.Random, j: int) -> object:
    """An in-bounds value; text without a domain from a small vocabulary named after the
    column, so that equally named columns of other tables (public ones) match it."""
    if column.nullable and rng.random() < 0.15:
        return None
    if column.values:
        return column.values[j % len(column.values)]
    kind = column.type
    lo, hi = column.lower, column.upper
    if kind == "int":
        return rng.randint(int(lo), int(hi)) if lo is not None and hi is not None else j % 7
    if kind == "float":
        return round(rng.uniform(float(lo), float(hi)), 3) if lo is not None and \
            hi is not None else float(j % 5)
    if kind == "text":
        return f"{column.name}{j % 3}"
    if kind == "bool":
        return j % 2 == 0
    if kind == "date":
        lo = lo if isinstance(lo, dt.date) else dt.date(2025, 1, 1)
        hi = hi if isinstance(hi, dt.date) else lo + dt.timedelta(days=365)
        return _as_date(lo) + dt.timedelta(days=rng.randint(0, (_as_date(hi) - _as_date(lo)).days))
    lo = lo if isinstance(lo, dt.datetime) else dt.datetime(2025, 1, 1)
    hi = hi if isinstance(hi, dt.datetime) else lo + dt.timedelta(days=365)
    return lo + dt.timedelta(seconds=rng.randint(0, int((hi - lo).total_seconds())))


def _as_date(value: object) -> dt.date:
    return value.date() if isinstance(value, dt.datetime) else value  # type: ignore[return-value]


#: Values far outside any declaration, by declared type (a VARCHAR-stored column gets text
#: that converts to them, or to nothing).
_EXTREMES: dict[str, tuple[object, ...]] = {
    "int": (10**15, None, -(10**15), 2**62),
    "float": (math.inf, None, -math.inf, math.nan, 1e300, -1e300, 5e-324),
    "text": (None, "", "zz_outside", "\u00e9", "2020-01-01", "1e400", "-inf",
             "99999999999999999999", "%_\\", "CITY1 ", "true"),
    "bool": (None, True),
    "date": (dt.date(9999, 12, 31), None, dt.date(1, 1, 1)),
    "timestamp": (dt.datetime(9999, 12, 31, 23, 59, 59), None, dt.datetime(1, 1, 1)),
}
_TEXT_EXTREMES = ("NaN", "inf", "1e400", "abc", " 7", None)


def _extreme(declared: str, j: int, physical: str) -> object:
    if physical == "VARCHAR" and declared != "text":
        return _TEXT_EXTREMES[j % len(_TEXT_EXTREMES)]
    values = _EXTREMES[declared]
    return values[j % len(values)]


def _public_rows(table: Table, rng: random.Random) -> list[tuple[object, ...]]:
    """A public table: every domain value, each text value of the shared vocabulary (and the
    adversary's outside value) in 1 to 3 rows (join keys that match many rows)."""
    rows: list[tuple[object, ...]] = []
    for j in range(12):
        row: list[object] = []
        for c in table.columns.values():
            if c.type == "text" and not c.values:
                row.append(f"{c.name}{(j // 3) % 3}" if j < 9 else "zz_outside")
            else:
                row.append(_ordinary(dataclasses.replace(c, nullable=False), rng, j))
        rows.append(tuple(row))
    return rows


def scenario_world(scenario: Scenario) -> World:
    """The statistical audit's own pair as a world: the scenario's D, and D plus the rows of
    its neighbour unit (:mod:`dpsql.audit.scenarios`); no one else is removed."""
    import tomllib

    md = parse_metadata(tomllib.loads(scenario.metadata), source=scenario.name)
    tables = {}
    for t in [TableRows(scenario.table, scenario.columns, scenario.rows, scenario.neighbour),
              *scenario.more]:
        declared = md.tables[t.table]
        types = [ENGINE_TYPES[declared.columns[c].type] for c in t.columns]
        rows = [*((None, r) for r in t.rows), *((ADVERSARY, r) for r in t.neighbour)]
        tables[t.table] = TableData(t.table, list(t.columns), types, rows)
    return World(md, tables, [], [n for n, t in md.tables.items() if t.public])


