"""Neighbour testing by execution: a privacy argument's check on adversarial neighbours.

Every sensitivity in dpsql is a claim in a docstring (:mod:`dpsql.aggregates`,
:mod:`dpsql.joins`, :mod:`dpsql.series`, :mod:`dpsql.rewrite`). This module checks the claims
on data, without noise, so that a broken argument fails deterministically:

1. :func:`synthesize` builds a small database D from a :class:`~dpsql.metadata.Metadata`
   alone (declared types, bounds, domains, units, ``unit_path``, public tables), never from
   the owner's data. Each private row belongs to a *person* that only the generator knows, so
   rows of one person in several spellings of its unit (``'99'``, ``'099'``, ``'+99'``,
   ``' 99'`` in a VARCHAR-stored int unit) are one person's rows. The *adversary* is one more
   person with more rows than k in more groups than g, values far outside the bounds (and
   inf, -inf, NaN), NULL and NaN keys, duplicated rows, units in several spellings (and one
   that converts to nothing), many join partners and rows that dangling foreign keys of D
   reach. D itself holds rows of no one (NULL units, dangling or NULL ``unit_path``
   columns), people whom a LEFT JOIN NULL-fills, and public keys that match many rows.
2. The neighbours are D minus each person and D plus the adversary; each is materialised
   once as one schema of one engine database (:func:`duckdb_neighbourhood`,
   :func:`postgres_neighbourhood`), so a query runs on a neighbour by switching the schema.
3. :func:`check_query` plans an accepted query (the same :func:`dpsql.routes.prepare_query`
   as every front door), runs its noise-free engine query -- the exact per-group
   measurements, the rewrite with ONE fixed salt for both sides, so the bounding sample of
   every other unit is identical -- on each neighbour, and checks each pair (D, D'):

   * **sensitivity**: for each measurement m of the plan, the vector over the groups that
     can be released (the public domain's keys, every engine key under thresholding, the one
     row of a global aggregate) moves by at most m's declared sensitivity: L1 ``m.l1`` for
     Laplace (and for the histograms of the exponential mechanism, whose bucket counts carry
     the rank utility), L2 ``m.l2`` for Gaussian. Exact fixed-point sums are compared in
     value units (``q * m.step``);
   * **key release**: under thresholding, a key present on one side only must exist because
     of the one unit alone: its count of units is at most 1 and there are at most the
     threshold measurement's L1 (g') such keys -- the case :func:`dpsql.thresholds.tau_for`
     bounds by delta. Public-domain plans release their domain whatever the data;
   * **outcome class**: an answer on both sides, or the same error class on both.

   A series limit (:class:`~dpsql.series.TwoReleases`) is checked as its two releases: the
   inner plan as any plan, and the outer one filled with one fixed set of released keys (the
   inner's exact keys on D) on both sides, as the second release is answered for whatever
   keys the first released.

Refusals (at plan time, or :func:`dpsql.pipeline.check_engine_query`) and exact public reads
are counted, not tested: they never read private data.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from dpsql.aggregates import Measurement
from dpsql.audit_scenarios import Scenario, TableRows
from dpsql.cache import LRU, REWRITTEN_CACHE_SIZE
from dpsql.engines import _DISABLED_OPTIMIZERS, DuckDBEngine, Engine
from dpsql.errors import Error, ProgrammingError, QueryRefused
from dpsql.metadata import ENGINE_TYPES, Metadata, PublicData, Table, parse_metadata
from dpsql.parameters import Parameters, bind_parameters
from dpsql.perturb import _by_key
from dpsql.pipeline import engine_sql
from dpsql.plan import Plan
from dpsql.public import PublicRead, PublicStore
from dpsql.routes import prepare_query
from dpsql.series import TwoReleases, _fill, _max_keys, _prepare_filled, _released_groups_only

#: The one salt of the contribution-bounding sample, shared by D and D' (never used to answer).
SALT = 20251125
#: Relative slack of a sensitivity comparison: measurements are exact integers, or sums of
#: doubles where one unit's share is compared (never a tolerance on the bound itself).
_SLACK = 1e-9
ADVERSARY = "A"
BASE = "d"


# ============================================================================ the world


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
    unit_of: dict[str, object] = field(default_factory=dict)  # person -> canonical unit
    targets: dict[tuple[str, str], list[tuple[str | None, object]]] = field(
        default_factory=dict)  # (table, unique column) -> [(person, value)]


def synthesize(metadata: Metadata, seed: int = 0, persons: int = 3, crowd: int = 24,
               text_units: bool = False) -> World:
    """A small adversarial database for ``metadata`` (the module docstring says what it
    holds): ``persons`` removed one at a time, and a ``crowd`` of people in every neighbour,
    so that a filter whose fate depends on whether *anyone* matches moves many units' rows
    at once, more than any sensitivity. ``text_units``: int unit and path columns are stored
    as VARCHAR (a CSV's), so the adversary's unit comes in several spellings."""
    spec = _Spec(random.Random(seed), text_units)
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


def _table_rows(table: Table, metadata: Metadata, persons: list[str], spec: _Spec
                ) -> TableData:
    columns = list(table.columns)
    types = [_physical(table, c, table.columns[c].type, spec) for c in columns]
    data = TableData(table.name, columns, types)
    if table.public:
        data.rows = [(None, r) for r in _public_rows(table, spec.rng)]
        return data
    k = max(table.max_rows_per_unit, 1)
    g = max(table.max_groups_per_unit, 1)
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
            value = number * 1000 + j
            spec.targets.setdefault((table.name, c), []).append((person, value))
        elif extreme:
            value = _extreme(column.type, j // 2, physical)
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
    "float": (math.inf, None, -math.inf, math.nan, 1e300, -1e300),
    "text": (None, "", "zz_outside", "\u00e9"),
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
    rows = []
    for j in range(12):
        row = []
        for c in table.columns.values():
            if c.type == "text" and not c.values:
                row.append(f"{c.name}{(j // 3) % 3}" if j < 9 else "zz_outside")
            else:
                row.append(_ordinary(dataclasses.replace(c, nullable=False), rng, j))
        rows.append(tuple(row))
    return rows


def scenario_world(scenario: Scenario) -> World:
    """The statistical audit's own pair as a world: the scenario's D, and D plus the rows of
    its neighbour unit (:mod:`dpsql.audit_scenarios`); no one else is removed."""
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


# ============================================================================ engines


@dataclass
class Neighbourhood:
    """An engine holding every neighbour of a world, one schema each; ``use`` selects one."""

    world: World
    engine: Engine
    use: Callable[[str], None]
    metadata: Metadata  # the world's metadata, its public data read from this engine
    close: Callable[[], None] = lambda: None


def _own_metadata(metadata: Metadata) -> Metadata:
    """A copy whose plan cache and public data are this neighbourhood's own."""
    return dataclasses.replace(metadata, plans=LRU(512), public_data=PublicData())


class _SchemaDuckDB(DuckDBEngine):
    """An in-memory DuckDB holding one schema per neighbour (DuckDBEngine's execute, its
    error classes and its optimizer settings; the neighbour chosen by ``search_path``)."""

    def __init__(self, connection: duckdb.DuckDBPyConnection, schema: dict[str, dict[str, str]]
                 ) -> None:
        self.path = Path(":memory:")
        self._tmp = None
        self._connection = connection
        self._local = threading.local()
        self.schema = schema
        self.rewritten = LRU(REWRITTEN_CACHE_SIZE)

    def use(self, world: str) -> None:
        self.cursor().execute(f"SET search_path = '{world},main'")


def duckdb_neighbourhood(world: World) -> Neighbourhood:
    """Every neighbour of ``world`` in one in-memory DuckDB, external access off."""
    con = _duckdb_world(world)
    con.execute("SET enable_external_access = false")
    engine = _SchemaDuckDB(con, world.schema())
    engine.use(BASE)
    return _finish(world, engine, engine.use, engine.close)


def _duckdb_world(world: World) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the public tables in ``main`` and one schema per neighbour."""
    # One thread: the tables are tiny, and a query's fixed cost is what counts here.
    con = duckdb.connect(":memory:", config={"disabled_optimizers": _DISABLED_OPTIMIZERS,
                                             "threads": 1})
    for name in world.public:
        _duckdb_table(con, "main", world.tables[name])
    private = [t for t in world.tables.values() if t.name not in world.public]
    for t in private:  # every row once, with its person; each neighbour selects its own
        _duckdb_table(con, "main", t, staging=True)
    for schema, members in world.neighbours().items():
        con.execute(f'CREATE SCHEMA "{schema}"')
        who = ", ".join(f"'{m}'" for m in sorted(members))
        for t in private:
            columns = ", ".join(f'"{c}"' for c in t.columns)
            con.execute(f'CREATE TABLE "{schema}"."{t.name}" AS SELECT {columns} FROM '
                        f'"main"."__staging_{t.name}" WHERE __owner IS NULL OR __owner IN '
                        f"({who}) ORDER BY __row")
    for t in private:
        con.execute(f'DROP TABLE "main"."__staging_{t.name}"')
    return con


def spark_neighbourhood(world: World, folder: Path, master: str = "local[2]"
                        ) -> Neighbourhood:
    """Every neighbour of ``world`` as Parquet files under ``folder`` (written by DuckDB), read
    by one local Spark session through :class:`~dpsql.engines.spark.SparkEngine`; a neighbour
    is chosen by pointing the private tables' temporary views at its files."""
    from dpsql.engines.spark import SparkEngine

    con = _duckdb_world(world)
    private = [t.name for t in world.tables.values() if t.name not in world.public]
    for schema in world.neighbours():
        (folder / schema).mkdir(parents=True, exist_ok=True)
        for name in private + (world.public if schema == BASE else []):
            where = "main" if name in world.public else schema
            con.execute(f'COPY "{where}"."{name}" TO \'{folder / schema / name}.parquet\' '
                        "(FORMAT parquet)")
    con.close()
    engine = SparkEngine(f"spark:{master}?folder={folder / BASE}")
    session = engine._session
    frames = {schema: {name: session.read.parquet(str(folder / schema / f"{name}.parquet"))
                       for name in private} for schema in world.neighbours()}

    def use(schema: str) -> None:
        for name, frame in frames[schema].items():
            frame.createOrReplaceTempView(name)

    return _finish(world, engine, use, engine.close)


def _duckdb_table(con: duckdb.DuckDBPyConnection, schema: str, t: TableData,
                  staging: bool = False) -> None:
    ddl = ", ".join(f'"{c}" {k}' for c, k in zip(t.columns, t.types, strict=True))
    name = f"__staging_{t.name}" if staging else t.name
    extra = ", __owner VARCHAR, __row INTEGER" if staging else ""
    con.execute(f'CREATE TABLE "{schema}"."{name}" ({ddl}{extra})')
    rows = [[*r, owner, i] if staging else list(r) for i, (owner, r) in enumerate(t.rows)]
    if rows:
        marks = ", ".join("?" for _ in rows[0])
        con.executemany(f'INSERT INTO "{schema}"."{name}" VALUES ({marks})', rows)


_PG_TYPES = {"BIGINT": "bigint", "DOUBLE": "double precision", "VARCHAR": "text",
             "BOOLEAN": "boolean", "DATE": "date", "TIMESTAMP": "timestamp"}


def postgres_neighbourhood(world: World, url: str, prefix: str = "nb") -> Neighbourhood:
    """Every neighbour of ``world`` in the PostgreSQL database at ``url`` (a role that may
    create schemas), one schema each named ``prefix_<neighbour>``; public tables in a schema
    of their own. Queries run through :class:`~dpsql.engines.postgres.PostgresEngine`."""
    import psycopg

    from dpsql.engines.postgres import PostgresEngine

    with psycopg.connect(url, autocommit=True) as con:
        shared = f"{prefix}_public"
        con.execute(f'DROP SCHEMA IF EXISTS "{shared}" CASCADE')
        con.execute(f'CREATE SCHEMA "{shared}"')
        for name in world.public:
            _pg_table(con, shared, world.tables[name], lambda owner: True)
        for schema, members in world.neighbours().items():
            full = f"{prefix}_{schema}"
            con.execute(f'DROP SCHEMA IF EXISTS "{full}" CASCADE')
            con.execute(f'CREATE SCHEMA "{full}"')
            for t in world.tables.values():
                if t.name not in world.public:
                    _pg_table(con, full, t, lambda o, m=members: o is None or o in m)
    engine = PostgresEngine(url)
    engine.schema = world.schema()  # the neighbours' tables live outside current_schema()

    def use(schema: str) -> None:
        engine.session().execute(f'SET search_path TO "{prefix}_{schema}", "{shared}"')

    use(BASE)
    return _finish(world, engine, use, engine.close)


def _pg_table(con: Any, schema: str, t: TableData, keep: Callable[[str | None], bool]) -> None:
    ddl = ", ".join(f'"{c}" {_PG_TYPES[k]}' for c, k in zip(t.columns, t.types, strict=True))
    con.execute(f'CREATE TABLE "{schema}"."{t.name}" ({ddl})')
    rows = [_pg_value_row(r) for owner, r in t.rows if keep(owner)]
    if rows:
        marks = ", ".join("%s" for _ in t.columns)
        with con.cursor() as cur:
            cur.executemany(f'INSERT INTO "{schema}"."{t.name}" VALUES ({marks})', rows)


def _pg_value_row(row: tuple[object, ...]) -> list[object]:
    # PostgreSQL text cannot hold NUL; dates before year 1 do not occur in the world.
    return [v.replace("\x00", "") if isinstance(v, str) else v for v in row]


def _finish(world: World, engine: Engine, use: Callable[[str], None],
            close: Callable[[], None]) -> Neighbourhood:
    metadata = _own_metadata(world.metadata)
    metadata.public_data.store = PublicStore(metadata, engine)
    return Neighbourhood(world, engine, use, metadata, close)


# ============================================================================ the check


@dataclass
class Violation:
    pair: str  # which neighbour pair, in words
    what: str  # "sensitivity", "key release" or "outcome"
    detail: str
    ratio: float  # moved / sensitivity (inf for an outcome or key-release violation)


@dataclass
class Verdict:
    sql: str
    status: str  # "passed", "violation", "refused", "public"
    refusal: str | None = None  # the error class of a refusal
    violations: list[Violation] = field(default_factory=list)
    worst: float = 0.0  # the largest moved / sensitivity over every measurement and pair
    engine_errors: int = 0  # neighbours where the engine failed (on both sides alike)
    releases: int = 0  # plans checked (two for a series limit)

    def report(self) -> str:
        """A readable account of what broke, for a failing test or the CLI."""
        lines = [f"query: {self.sql}"]
        for v in self.violations:
            lines.append(f"  {v.pair}: {v.what}: {v.detail}")
        return "\n".join(lines)


Outcome = tuple[str, list[tuple[object, ...]]]  # ("answer", rows) or (error class, [])


def check_query(sql: str, hood: Neighbourhood, epsilon: float = 1.0, delta: float = 0.0,
                mechanism: str = "laplace", parameters: Parameters = None) -> Verdict:
    """The neighbour test of one query on every neighbour pair of ``hood`` (module docstring),
    prepared as :meth:`dpsql.Database.plan` prepares it for every front door (``parameters``
    bound as the DB-API and the server's extended protocol bind them)."""
    try:
        prepared = prepare_query(bind_parameters(sql, parameters), hood.metadata, epsilon,
                                 delta, mechanism)
    except ProgrammingError as e:  # a refusal, or parameters that cannot be bound
        return Verdict(sql, "refused", refusal=type(e).__name__)
    if isinstance(prepared, PublicRead):
        return Verdict(sql, "public")
    verdict = Verdict(sql, "passed")
    try:
        if isinstance(prepared, TwoReleases):
            _check_two(prepared, hood, verdict)
        else:
            _check_plan(prepared, hood, verdict, "")
    except QueryRefused as e:  # the engine's dry run (check_engine_query): data-independent
        return Verdict(sql, "refused", refusal=type(e).__name__)
    if verdict.violations:
        verdict.status = "violation"
    return verdict


def _check_two(p: TwoReleases, hood: Neighbourhood, verdict: Verdict) -> None:
    outcomes = _check_plan(p.inner, hood, verdict, "release 1: ")
    status, rows = outcomes[BASE]
    if status != "answer":
        return
    nkeys = len(p.inner.keys)
    keys = sorted(_by_key(rows, nkeys), key=repr)[:_max_keys(p.inner)]
    released = [tuple(k[link.column] for link in p.links) for k in keys]
    outer = _prepare_filled(_fill(p.template, p.links, released, p.in_list), hood.metadata, p)
    _check_plan(_released_groups_only(outer, p, released), hood, verdict, "release 2: ")


def _check_plan(p: Plan, hood: Neighbourhood, verdict: Verdict, label: str
                ) -> dict[str, Outcome]:
    sql, salted = engine_sql(p, hood.engine)
    outcomes = {name: _run(hood, name, sql, salted) for name in hood.world.neighbours()}
    verdict.releases += 1
    verdict.engine_errors += sum(1 for s, _ in outcomes.values() if s != "answer")
    for a, b, what in hood.world.pairs():
        pair = label + what
        for v in compare(p, outcomes[a], outcomes[b]):
            v.pair = pair
            verdict.violations.append(v)
        verdict.worst = max(verdict.worst, *(_ratios(p, outcomes[a], outcomes[b]) or [0.0]))
    return outcomes


def _run(hood: Neighbourhood, name: str, sql: str, salted: bool) -> Outcome:
    hood.use(name)
    try:
        return "answer", hood.engine.execute(sql, [SALT] if salted else [])[1]
    except Error as e:
        return type(e).__name__, []


def compare(p: Plan, a: Outcome, b: Outcome) -> list[Violation]:
    """The violations between the outcomes of ``p`` on two neighbours (``pair`` left blank)."""
    if a[0] != b[0]:
        return [Violation("", "outcome", f"{a[0]} on one side, {b[0]} on the other", math.inf)]
    if a[0] != "answer":
        return []
    nkeys = len(p.keys)
    ea, eb = _by_key(a[1], nkeys), _by_key(b[1], nkeys)
    out = _key_release(p, ea, eb)
    for m in p.measurements:
        moved, bound = _moved(p, m, ea, eb)
        if not moved <= bound * (1 + _SLACK) + _SLACK:
            norm = "L2" if m.mechanism == "gaussian" else "L1"
            out.append(Violation("", "sensitivity", f"{m.name} ({_describe(m)}) moved by "
                                 f"{moved:g} ({norm} over groups), sensitivity {bound:g}",
                                 moved / bound if bound else math.inf))
    return out


def _ratios(p: Plan, a: Outcome, b: Outcome) -> list[float]:
    if a[0] != "answer" or b[0] != "answer":
        return [math.inf] if a[0] != b[0] else []
    nkeys = len(p.keys)
    ea, eb = _by_key(a[1], nkeys), _by_key(b[1], nkeys)
    out = []
    for m in p.measurements:
        moved, bound = _moved(p, m, ea, eb)
        out.append(moved / bound if bound else (0.0 if moved == 0 else math.inf))
    return out


def _describe(m: Measurement) -> str:
    arg = m.arg.sql(dialect="duckdb") if m.arg is not None else "*"
    return f"{m.kind}({arg})"


Exact = Mapping[tuple[object, ...], Sequence[object]]


def _released(p: Plan, ea: Exact, eb: Exact) -> list[tuple[object, ...]]:
    """The keys whose values can be released: the domain, every engine key, or ()."""
    if p.domain is not None:
        return list(p.domain)
    if p.threshold is not None:
        return list(dict.fromkeys([*ea, *eb]))
    return [()]


def _moved(p: Plan, m: Measurement, ea: Exact, eb: Exact) -> tuple[float, float]:
    """How far measurement ``m`` moved over the releasable groups, and its sensitivity."""
    keys = _released(p, ea, eb)
    if m.kind == "histogram":
        total = 0.0
        for k in keys:
            ha, hb = _histogram(ea, k, m), _histogram(eb, k, m)
            total += sum(abs(ha.get(x, 0) - hb.get(x, 0)) for x in ha.keys() | hb.keys())
        return total, m.l1
    diffs = [_value(ea, k, m) - _value(eb, k, m) for k in keys]
    if any(not math.isfinite(d) for d in diffs):
        return math.inf, m.l1
    if m.mechanism == "gaussian":
        return math.sqrt(sum(d * d for d in diffs)), m.l2
    return float(sum(abs(d) for d in diffs)), m.l1


def _value(exact: Exact, key: tuple[object, ...], m: Measurement) -> float:
    row = exact.get(key)
    value = row[m.index] if row is not None else None
    if value is None:
        return 0.0
    number = float(value) if not isinstance(value, int) else value
    return float(number * m.step) if m.step else float(number)


def _histogram(exact: Exact, key: tuple[object, ...], m: Measurement) -> dict[Any, int]:
    row = exact.get(key)
    value = row[m.index] if row is not None else None
    return dict(value) if isinstance(value, dict) else {}


def _key_release(p: Plan, ea: Exact, eb: Exact) -> list[Violation]:
    """Under thresholding, keys on one side only exist because of the one unit (docstring)."""
    if p.threshold is None:
        return []
    units = p.threshold.measurement
    out = []
    for side, mine, other in (("D", ea, eb), ("D'", eb, ea)):
        alone = [k for k in mine if k not in other and _value(mine, k, units) > 0]
        crowded = [k for k in alone if _value(mine, k, units) > 1]
        if crowded or len(alone) > units.l1:
            out.append(Violation("", "key release", f"{len(alone)} key(s) only in {side} "
                                 f"(at most {units.l1:g} allowed), {len(crowded)} with more "
                                 f"than one unit, e.g. {(crowded or alone)[0]!r}", math.inf))
    return out


# ============================================================================ many queries


@dataclass
class Summary:
    verdicts: list[Verdict]
    seconds: float
    neighbours: int

    def count(self, status: str) -> int:
        return sum(1 for v in self.verdicts if v.status == status)

    @property
    def accepted(self) -> int:
        return self.count("passed") + self.count("violation")

    @property
    def violations(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == "violation"]

    def line(self) -> str:
        return (f"{len(self.verdicts)} queries: {self.accepted} accepted "
                f"({self.count('violation')} with violations), {self.count('refused')} "
                f"refused, {self.count('public')} public; {self.neighbours} neighbour pairs "
                f"each; {self.seconds:.1f} s")

    def report(self, limit: int = 5) -> str:
        shown = [v.report() for v in self.violations[:limit]]
        return "\n".join([self.line(), *shown])


Query = tuple[str, float, float, str]  # SQL, epsilon, delta, mechanism


def check_queries(queries: Iterable[Query | str], hood: Neighbourhood) -> Summary:
    """:func:`check_query` for each query (a bare SQL text runs at epsilon 1, delta 0)."""
    started = time.perf_counter()
    verdicts = []
    for q in queries:
        sql, epsilon, delta, mechanism = (q, 1.0, 0.0, "laplace") if isinstance(q, str) else q
        verdicts.append(check_query(sql, hood, epsilon, delta, mechanism))
    return Summary(verdicts, time.perf_counter() - started, len(hood.world.pairs()))


def format_verdicts(verdicts: Sequence[Verdict]) -> str:
    """The table ``dpsql audit --neighbours`` prints: query, verdict, worst ratio."""
    lines = ["| query | verdict | worst moved / sensitivity |", "|---|---|---|"]
    for v in verdicts:
        text = " ".join(v.sql.split())
        text = text if len(text) <= 70 else text[:67] + "..."
        what = v.status if v.status != "refused" else f"refused ({v.refusal})"
        ratio = "-" if v.status in ("refused", "public") else f"{v.worst:.3g}"
        lines.append(f"| {text} | {what} | {ratio} |")
    return "\n".join(lines)


# ============================================================================ the owner's run

#: How the synthetic worlds store the owner's columns: as declared, and with int units (and
#: unit paths) as VARCHAR, the way a CSV file holds them.
STORAGES = {"typed": False, "text": True}


def audit_queries(metadata: Metadata, queries: Sequence[str], epsilon: float = 1.0,
                  delta: float = 0.0, mechanism: str = "laplace",
                  storages: Sequence[str] = tuple(STORAGES), seed: int = 0) -> list[Verdict]:
    """The neighbour test of the owner's ``queries`` on synthetic adversarial worlds built from
    ``metadata`` alone (never the owner's data), once per storage of :data:`STORAGES`; each
    query's verdict is its worst over them (a violation's pairs say which storage)."""
    worst: list[Verdict] = []
    for storage in storages:
        hood = duckdb_neighbourhood(synthesize(metadata, seed=seed,
                                               text_units=STORAGES[storage]))
        try:
            verdicts = [check_query(q, hood, epsilon, delta, mechanism) for q in queries]
        finally:
            hood.close()
        for v in verdicts:
            for violation in v.violations:
                violation.pair = f"{storage} storage, {violation.pair}"
        worst = verdicts if not worst else [_worse(a, b) for a, b in zip(worst, verdicts,
                                                                          strict=True)]
    return worst


def _worse(a: Verdict, b: Verdict) -> Verdict:
    if b.status == "violation" and a.status == "violation":
        a.violations += b.violations
        a.worst = max(a.worst, b.worst)
        return a
    if b.status == "violation" or (a.status == b.status and b.worst > a.worst):
        return b
    return a


def split_statements(text: str) -> list[str]:
    """The statements of a SQL file: split at semicolons outside quotes, ``--`` comment lines
    dropped, empty statements skipped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    out, current, quote = [], [], ""
    for ch in "\n".join(lines):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == ";":
            out.append("".join(current))
            current = []
            continue
        current.append(ch)
    out.append("".join(current))
    return [" ".join(s.split()) for s in out if s.strip()]
