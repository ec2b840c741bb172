"""Where the neighbours of a world live (:mod:`dpsql.audit.neighbours`): one schema per neighbour of
one DuckDB or PostgreSQL database, or one folder of Parquet files per neighbour behind Spark's
temporary views, so that a query runs on a neighbour by switching the schema (or the views).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from dpsql.audit.neighbour_worlds import BASE, TableData, World
from dpsql.cache import LRU, REWRITTEN_CACHE_SIZE
from dpsql.engines import DuckDBEngine, Engine
from dpsql.engines.duckdb_engine.engine import _SETTINGS
from dpsql.engines.locked import insert_rows
from dpsql.execution.public import PublicStore
from dpsql.metadata.metadata import Metadata
from dpsql.routes.planner import Planner


@dataclass
class Neighbourhood:
    """An engine holding every neighbour of a world, one schema each; ``use`` selects one."""

    world: World
    engine: Engine
    use: Callable[[str], None]
    planner: Planner  # the world's metadata, its public data read from this engine
    close: Callable[[], None] = lambda: None

    @property
    def metadata(self) -> Metadata:
        return self.planner.metadata

    def forget(self) -> None:
        """Drop the plans and engine SQL cached so far: a test that patches the planner (a
        mutant) must neither reuse a clean test's nor leave its own behind."""
        self.planner.plans.clear()
        self.engine.rewritten.clear()


class _SchemaDuckDB(DuckDBEngine):
    """An in-memory DuckDB holding one schema per neighbour (DuckDBEngine's execute, its
    error classes and its optimizer settings; the neighbour chosen by ``search_path``)."""

    def __init__(self, connection: duckdb.DuckDBPyConnection, schema: dict[str, dict[str, str]]
                 ) -> None:
        self.path = Path(":memory:")
        self._folder = None
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
    con = duckdb.connect(":memory:", config={**_SETTINGS, "threads": 1})
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
    by one local Spark session through :class:`~dpsql.engines.spark.engine.SparkEngine`; a neighbour
    is chosen by pointing the private tables' temporary views at its files."""
    from dpsql.engines.spark.engine import SparkEngine

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
    # Every neighbour's files have the base's schema (one DDL per table): given it, Spark reads
    # them without a schema-inference job per file (0.2 s against 0.8, on a local session).
    schemas = {name: session.table(f"`{name}`").schema for name in private}
    frames = {schema: {name: session.read.schema(schemas[name]).parquet(
        str(folder / schema / f"{name}.parquet")) for name in private}
        for schema in world.neighbours()}

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
    types = [*t.types, "VARCHAR", "INTEGER"] if staging else list(t.types)
    insert_rows(con, f'"{schema}"."{name}"', types, rows)


_PG_TYPES = {"BIGINT": "bigint", "DOUBLE": "double precision", "VARCHAR": "text",
             "BOOLEAN": "boolean", "DATE": "date", "TIMESTAMP": "timestamp"}


def postgres_neighbourhood(world: World, url: str, prefix: str = "nb") -> Neighbourhood:
    """Every neighbour of ``world`` in the PostgreSQL database at ``url`` (a role that may
    create schemas), one schema each named ``prefix_<neighbour>``; public tables in a schema
    of their own. Queries run through :class:`~dpsql.engines.postgres.engine.PostgresEngine`."""
    import psycopg

    from dpsql.engines.postgres.engine import PostgresEngine

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
                    _pg_table(con, full, t, _member_of(members))
    engine = PostgresEngine(url)
    engine.schema = world.schema()  # the neighbours' tables live outside current_schema()

    def use(schema: str) -> None:
        engine.session().execute(f'SET search_path TO "{prefix}_{schema}", "{shared}"')

    use(BASE)
    return _finish(world, engine, use, engine.close)


def _member_of(members: set[str]) -> Callable[[str | None], bool]:
    """Whether a row (by its person; None: no one's) belongs to a neighbour of ``members``."""
    return lambda owner: owner is None or owner in members


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
    planner = Planner(world.metadata, PublicStore(world.metadata, engine))
    return Neighbourhood(world, engine, use, planner, close)


