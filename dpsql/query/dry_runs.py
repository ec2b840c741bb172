"""Dry runs: the engine's query, or the outer query, run on empty tables of the right types.

An error a query raises on empty tables is one it would raise on any data (a type the engine
will not accept, a name it cannot bind), so running it there first makes that error a refusal
before anything is charged, never an engine error after it. Every dry run is built here, as
sqlglot trees, never spliced as text: either the query's own text on a database of empty tables
(:func:`empty_creates`; :func:`dpsql.routes.pipeline.check_engine_query`, DuckDB, the reference, on
:mod:`dpsql.engines.duckdb_engine.dry`), or a copy of the query that reads empty CTEs in
their place (:func:`dpsql.engines.empty.with_empty`; each other engine's ``compile``,
:mod:`dpsql.engines.postgres.engine`, and the outer query's check,
:func:`dpsql.execution.postprocess.check_outer`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import overload

from sqlglot import exp
from sqlglot.errors import SqlglotError

from dpsql.metadata.metadata import ENGINE_TYPES, ColumnType, Table
from dpsql.query.joins import Relation


def empty_tables(relation: Relation | None, table: Table, schema: Mapping[str, str]
                 ) -> Sequence[tuple[str, exp.Select]]:
    """Every declared table the rewritten query reads (``table`` alone without a join; every
    source and semi-join's table with one), each as a typed ``SELECT`` of no row: its columns
    as ``schema``'s physical types (keyed by joined column names,
    :func:`dpsql.query.joins.physical`; the declared types where unknown). An engine's query run
    over these instead of the tables reads no data, so an error it raises is one it would raise on
    any data: a refusal before the charge (each engine's ``compile``)."""
    return EmptyTables(_typed_tables(relation, table, schema))


class EmptyTables(Sequence[tuple[str, exp.Select]]):
    """:func:`empty_tables`: each table's SELECT is copied when it is read (``with_empty``
    generates its tree in place), not before: DuckDB and Spark never read them (their dry runs
    take the query's own text), and a new query text would pay a tree copy per table."""

    def __init__(self, typed: list[tuple[str, _Columns]]) -> None:
        self._typed = typed

    def __len__(self) -> int:
        return len(self._typed)

    @overload
    def __getitem__(self, index: int) -> tuple[str, exp.Select]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[str, exp.Select]]: ...

    def __getitem__(self, index: int | slice
                    ) -> tuple[str, exp.Select] | list[tuple[str, exp.Select]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        name, columns = self._typed[index]
        return name, _empty_select(columns).copy()


def empty_creates(relation: Relation | None, table: Table, schema: Mapping[str, str]
                  ) -> tuple[str, ...]:
    """The tables of :func:`empty_tables` as DuckDB's ``CREATE TABLE`` statements, for the
    dry runs' database (:func:`dpsql.engines.duckdb_engine.dry.run_dry`, which
    :func:`dpsql.routes.pipeline.check_engine_query` runs the engine query's own text on)."""
    return tuple(_empty_create(name, columns)
                 for name, columns in _typed_tables(relation, table, schema))


_Columns = tuple[tuple[str, str | None, ColumnType], ...]


def _typed_tables(relation: Relation | None, table: Table, schema: Mapping[str, str]
                  ) -> list[tuple[str, _Columns]]:
    """Each table the query reads, with its columns' (name, physical type or None, declared
    type)."""
    tables = relation.tables() if relation is not None else [table]
    out = []
    for t in tables:
        prefix = "" if relation is None else next(
            s.prefix for s in relation.sources + tuple(j.source for j in relation.semijoins)
            if s.table is t)
        out.append((t.name, tuple((c.name, schema.get(prefix + c.name), c.type)
                                  for c in t.columns.values())))
    return out


@lru_cache(maxsize=256)
def _empty_create(name: str, columns: _Columns) -> str:
    """``CREATE TABLE name AS`` the typed ``SELECT`` of no row of ``columns``, in DuckDB's
    SQL, built as a tree."""
    create = exp.Create(this=exp.to_table(exp.to_identifier(name, quoted=True)), kind="TABLE",
                        expression=_empty_select(columns).copy())
    return create.sql(dialect="duckdb", copy=False)


@lru_cache(maxsize=256)
def _empty_select(columns: _Columns) -> exp.Select:
    """The typed ``SELECT`` of no row of ``columns`` (name, physical type or None, declared
    type): a function of these values alone, so built once (building it parses every type,
    twenty times the cost of a copy; every engine query's dry run asks for it). Never
    handed out: :func:`empty_tables` and :func:`_empty_create` copy it."""
    return exp.select(*[exp.alias_(exp.cast(exp.Null(), _physical_type(physical, declared)),
                                   name, quoted=True)
                        for name, physical, declared in columns]).where(exp.false())


def _physical_type(physical: str | None, declared: ColumnType) -> exp.DataType:
    try:
        return exp.DataType.build(physical or ENGINE_TYPES[declared], dialect="duckdb")
    except (SqlglotError, ValueError):  # a type sqlglot cannot spell: read as declared
        return exp.DataType.build(ENGINE_TYPES[declared])
