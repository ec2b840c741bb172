"""Joins: several declared tables read as one private relation, and its privacy argument.

:mod:`dpsql.query.bind` turns a FROM clause with joins (or semi-joins in WHERE, or a table that
declares a ``unit_path``) into a :class:`Relation`; this module gives the relation a *joined
table* (a :class:`~dpsql.metadata.metadata.Table` whose columns are every source's columns, renamed
``alias__column``) so that every later pass -- check, constants, cost, plan, rewrite -- works on
it exactly as on one declared table, and builds the SQL of the joined rows, which becomes the
FROM of ``__rows`` in :mod:`dpsql.execution.rewrite`. Everything after ``__rows`` is unchanged.

**The model.** Neighbouring databases differ by all rows of one unit in every private table
(a table with a ``unit_path`` holds the rows whose path leads to the unit's rows). Private tables
join only on the unit: every private table after the first has, among the AND-ed conditions of
its ON, an equality of its unit column with the unit column of an earlier private table (or, for
a ``unit_path`` table, its path column with the path's target column). Public tables join on
anything. Then every joined row that has a unit (the first non-NULL unit column among the
private tables, ``__join_unit``) is made of rows of that unit and public rows only, and whether
it exists depends on nothing else: removing a unit removes exactly its joined rows, and at most
adds rows with no unit (a public row, or a row of another side, left without a match), which are
dropped before bounding, as rows with a NULL unit are in a single table.

**One canonical unit.** "The rows of a unit" means the rows whose unit column *reads as* that
unit through :meth:`dpsql.query.total_expressions.Reader.unit`: the stored value typed as declared,
never clamped, NULL when it does not convert (and for NaN). Everything that decides which unit a row
belongs to reads it there: the NULL filter and the partitions of bounding
(:mod:`dpsql.execution.rewrite`), :func:`prebound`, ``__join_unit``, both sides of a semi-join, and
every AND-ed equality of two unit columns or of a ``unit_path`` link in ON
(:func:`identity_on`; the other conditions are read as filters are, clamped). So ``'99'``,
``'099'`` and ``' 99'`` stored as text in a column declared int are one unit in bounding as in
``WHERE pid = 99``; ``'abc'`` is a NULL unit; and two units beyond a column's declared bounds
are never joined as one (a join on clamped values would hand one person's rows to another, or
lead a ``unit_path`` link to someone else's row). Units joined or compared must be declared
with one type (refused otherwise, before any charge).

**Semi- and anti-joins** (``outer [NOT] IN (SELECT unit FROM t WHERE p)``, ``[NOT] EXISTS
(SELECT 1 FROM t WHERE t.unit = outer AND p)``) are written ``outer IN (S)`` with ``S`` the
canonical units of t's rows that satisfy p, NULL units removed (:func:`_semi`). The outer unit
column of a joined row is either NULL (an outer join NULL-filled its table; rows of a NULL
unit never get this far, :mod:`dpsql.execution.rewrite`) or equal to the row's unit ``u``
(every private table joins an earlier one on the unit). The filter's value for a row:

* outer = u, not NULL: ``u IN S`` is TRUE exactly when *u's own* rows of t satisfy p, FALSE
  otherwise (S holds no NULL, so never NULL): a function of u's rows alone;
* outer NULL (:func:`null_outer`): IN and EXISTS drop the row (SQL's answer); NOT EXISTS keeps
  it (SQL's answer: no row of t equals NULL); NOT IN drops it. SQL's ``NULL NOT IN (S)`` is NULL
  when S has a row and TRUE when S is empty: the row would pass or fail by whether *anyone*
  satisfies p, the leak of issue 17 (a LEFT JOIN that NULL-fills every row, then ``NOT IN
  (SELECT unit ... WHERE unit = 9 AND ...)`` counts every row or none, by person 9's data).
  dpsql defines it as NULL, SQL's answer whenever S is not empty (write ``NOT EXISTS`` to keep
  such rows). The same on every engine: the filter is written with an explicit ``IS NULL``.

Either way a row's fate is a function of its own unit's rows (or of nothing), so adding or
removing a unit changes no other unit's rows.

**Bounding after the join.** Contribution bounding (k rows in g groups per unit, by the salted
hash of :mod:`dpsql.execution.rewrite`) runs on the joined rows, after the join and before
aggregation. So whatever the join produced -- a public row matching many private rows, a private row
matching many public rows, a unit's rows multiplied by a self-join -- one unit reaches the
aggregates with at most k rows in at most g groups, which is exactly what every sensitivity of
:mod:`dpsql.privacy.aggregates` assumes: they stay true with the joined table's k and g, whatever
the declared bounds or the data say. Bounding *before* the join would not do: one kept row that
matches m public rows becomes m rows.

**The joined k and g** (a utility choice; privacy comes from enforcing them): the number of rows
one unit can have when every table keeps its declared bounds, ``k = prod k_t * prod m_p``, with
``k_t`` the declared k of each private table (1 for ``one_row_per_unit``; a ``unit_path`` table's
k is per unit) and ``m_p`` the largest number of rows of public table p that share a value of its
join key (read from its public data at plan time; its row count when it joins on no equality);
``g = min(k, prod g_t * prod m_p)``. A join whose k exceeds :data:`MAX_JOIN_ROWS` is refused.
One exception needs no bounding: a ``one_row_per_unit`` table first, joined (inner or left) only
to public tables each on a key unique in its data, keeps at most one joined row per row: each
row is its own unit, as in that table alone.

**Public columns** get their public domain (as GROUP BY keys: every value, empty groups
included, no delta) and, when the owner declared no bounds, their bounds (min and max) from the
public table's data, read at plan time: they are public.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol, cast

from sqlglot import exp

from dpsql.engines.ir import SaltedHash
from dpsql.errors import JoinRefused
from dpsql.metadata.metadata import MAX_DOMAIN_SIZE, Column, ColumnType, Metadata, Table
from dpsql.query.total_expressions import Reader, conjuncts

#: The most rows one unit may have in a joined relation (the noise grows with it).
MAX_JOIN_ROWS = 1000
UNIT = "__join_unit"  # the unit of a joined row: the first non-NULL unit among private tables


@dataclass(frozen=True)
class Source:
    """One declared table read by the query, its columns renamed ``prefix + column``."""

    table: Table
    alias: str
    prefix: str
    side: str = ""  # "", "LEFT", "RIGHT", "FULL" (joined to the sources before it)
    on: exp.Expression | None = None  # over joined-table column names
    hidden: bool = False  # the target of a unit_path, joined by dpsql
    nullable: bool = False  # may be NULL-extended by an outer join
    unit: str | None = None  # its unit column (joined name), for a private table

    def name(self, column: str) -> str:
        return self.prefix + column.lower()


@dataclass(frozen=True)
class SemiJoin:
    """``unit [NOT] IN (SELECT unit FROM source WHERE predicate)``."""

    source: Source
    outer: str  # the outer unit column (joined name)
    predicate: exp.Expression | None
    anti: bool
    exists: bool = False  # written [NOT] EXISTS (else [NOT] IN): decides NULL outer units


@dataclass(frozen=True)
class Relation:
    sources: tuple[Source, ...]
    semijoins: tuple[SemiJoin, ...] = ()

    def conditions(self) -> list[exp.Expression]:
        """Every row-level condition of the relation: ON clauses and semi-join filters."""
        ons = [s.on for s in self.sources if s.on is not None]
        return ons + [j.predicate for j in self.semijoins if j.predicate is not None]

    def map_conditions(self, fn: Callable[[exp.Expression], exp.Expression]) -> Relation:
        """The same relation with ``fn`` applied to each condition (constants folded...)."""
        sources = tuple(replace(s, on=fn(s.on)) if s.on is not None else s
                        for s in self.sources)
        semis = tuple(replace(j, predicate=fn(j.predicate)) if j.predicate is not None else j
                      for j in self.semijoins)
        return Relation(sources, semis)

    def tables(self) -> list[Table]:
        """The declared tables read, each once."""
        seen: dict[str, Table] = {}
        for s in [*self.sources, *(j.source for j in self.semijoins)]:
            if s.table.literal is not None:  # written in the query: no table to read
                continue
            seen.setdefault(s.table.name.lower(), s.table)
        return list(seen.values())


def unit_name(table: Table, metadata: Metadata) -> str | None:
    """The name of a private table's unit (its privacy_unit, or its path target's); two
    private tables have the same unit when these agree."""
    if table.unit_path is not None:
        target = metadata.table(table.unit_path[1])
        return target.privacy_unit if target is not None else None
    return table.privacy_unit


def joined_table(relation: Relation, public: PublicRows | None) -> Table:
    """The one table every later pass sees: every source's columns under their joined names,
    the joined k and g (module docstring), public domains and bounds read from public data."""
    sources = [*relation.sources, *(j.source for j in relation.semijoins)]
    private = [s for s in relation.sources if not s.table.public]
    columns: dict[str, Column] = {}
    for s in sources:
        for column in s.table.columns.values():
            if s.table.public:
                column = _public_column(s.table, column, public)
            columns[s.name(column.name)] = replace(
                column, name=s.name(column.name), nullable=column.nullable or s.nullable)
    multiplicities = [_multiplicity(s, relation, public) for s in relation.sources
                      if s.table.public]
    names = " JOIN ".join(s.table.name for s in relation.sources if not s.hidden)
    units = frozenset(s.unit for s in sources if s.unit is not None)
    first = relation.sources[0]
    if (first.table.one_row_per_unit and all(m <= 1 for m in multiplicities)
            and len(private) == 1 and _keyed_on_earlier(relation)):
        return Table(name=names, columns=columns, privacy_unit=first.unit, one_row_per_unit=True,
                     unit_columns=units)
    k = math.prod([_k(s.table) for s in private if not s.hidden] + multiplicities)
    g = math.prod([min(_k(s.table), s.table.max_groups_per_unit) if s.table.unit_path else
                   s.table.groups_per_unit for s in private if not s.hidden] + multiplicities)
    if k > MAX_JOIN_ROWS:
        raise JoinRefused(
            f"joining {names} can give one person up to {k} rows (the product of the tables' "
            f"max_rows_per_unit and of how many public rows share a join key), more than "
            f"{MAX_JOIN_ROWS}; join public tables on a key, or join fewer tables")
    return Table(name=names, columns=columns, privacy_unit=UNIT, max_rows_per_unit=k,
                 max_groups_per_unit=min(g, k), unit_columns=units)


def _k(table: Table) -> int:
    """A private table's declared k (a unit_path table's is per unit too)."""
    return table.max_rows_per_unit if table.unit_path is not None else table.rows_per_unit


def _keyed_on_earlier(relation: Relation) -> bool:
    """Every public table after the first joins (inner or left) with an equality of its own
    column(s) to earlier sources: with a unique key it matches at most one row of them."""
    for i, s in enumerate(relation.sources[1:], start=1):
        if s.side not in ("", "LEFT") or not _key_columns(s, relation.sources[:i]):
            return False
    return True


def _key_columns(source: Source, others: tuple[Source, ...] | list[Source]) -> list[str]:
    """The columns of ``source`` that its ON equates (AND-ed) with a column of ``others`` of
    the same declared type (so that the engine compares them as read, without a cast that
    could make two distinct stored values equal)."""
    other = {o.name(c): col.type for o in others for c, col in o.table.columns.items()}
    mine = {source.name(c): c for c in source.table.columns}
    keys = []
    for eq in conjuncts(source.on):
        if isinstance(eq, exp.EQ) and all(isinstance(x, exp.Column) for x in eq.args.values()):
            a, b = eq.this.name, eq.expression.name
            for x, y in ((a, b), (b, a)):
                if x in mine and other.get(y) == source.table.columns[mine[x]].type and \
                        mine[x] not in keys:
                    keys.append(mine[x])
    return keys


def _multiplicity(source: Source, relation: Relation, public: PublicRows | None) -> int:
    """How many rows of a public table one row of the others can match: the most rows sharing
    a value of its join key (its own ON's equalities with earlier sources; for the first source,
    the next ON's), or all of its rows."""
    index = relation.sources.index(source)
    if index == 0 and len(relation.sources) > 1:
        # the first source's key is in the second's ON
        second = relation.sources[1]
        keys = _key_columns(replace(source, on=second.on), [second])
    else:
        keys = _key_columns(source, relation.sources[:index])
    ref = _ref(source.table)
    if keys:  # grouped as the columns are read: the public store holds them as declared
        cols = ", ".join(exp.column(c, quoted=True).sql("duckdb") for c in keys)
        sql = f"SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM {ref} GROUP BY {cols})"
    else:
        sql = f"SELECT COUNT(*) FROM {ref}"
    (value,), = _read(sql, public)
    assert isinstance(value, int)  # a count
    return max(value, 1)


def _public_column(table: Table, column: Column, public: PublicRows | None) -> Column:
    """A public column with its domain and (undeclared) bounds read from the public data."""
    ref, col = _ref(table), exp.column(column.name, quoted=True).sql("duckdb")
    if column.domain is None and column.type != ColumnType.FLOAT:
        rows = _read(f"SELECT DISTINCT {col} FROM {ref} LIMIT {MAX_DOMAIN_SIZE + 1}", public)
        if len(rows) <= MAX_DOMAIN_SIZE:
            values = tuple(sorted(r[0] for r in rows if r[0] is not None))  # type: ignore
            if values:  # the types of the column (checked when the database opened)
                column = replace(column, values=values,  # type: ignore[arg-type]
                                 nullable=column.nullable or len(values) < len(rows))
    if column.type in (ColumnType.INT, ColumnType.FLOAT, ColumnType.DATE) and not column.bounded:
        (lo, hi), = _read(f"SELECT MIN({col}), MAX({col}) FROM {ref}", public)
        if lo is not None and hi is not None:
            # As declared bounds are typed (a DECIMAL column's min is a Decimal).
            kind = {"int": int, "float": float}.get(column.type, lambda v: v)
            column = replace(column, lower=kind(lo), upper=kind(hi))  # type: ignore
    return column


def _ref(table: Table) -> str:
    return _from(table).sql("duckdb")


def _from(table: Table) -> exp.Expression:
    """Where a source's rows are read: its table, or the VALUES of a literal array."""
    if table.literal is None:
        return exp.Table(this=exp.to_identifier(table.name, quoted=True))
    (column,) = table.columns
    return exp.Values(
        expressions=[exp.Tuple(expressions=[_literal(v)]) for v in table.literal],
        alias=exp.TableAlias(this=exp.to_identifier("__literal", quoted=True),
                             columns=[exp.to_identifier(column, quoted=True)]))


def _literal(value: int | float | str) -> exp.Expression:
    return exp.Literal.string(value) if isinstance(value, str) else exp.Literal.number(value)


def literal_table(unnest: exp.Unnest) -> Table | None:
    """``UNNEST([c1, c2, ...]) AS x`` of constant numbers or strings (BigQuery's literal array)
    as a public table: column ``x``, one row per element, none repeated away (a row of another
    table joined with it becomes one row per element, as in BigQuery). None for any other
    UNNEST."""
    alias = unnest.args.get("alias")
    name = alias.name if alias is not None else ""
    columns = alias.columns if alias is not None else []
    if len(columns) == 1:  # BigQuery's dialect names the column; DuckDB's, the table
        name = columns[0].name
    if not name or len(unnest.expressions) != 1 or not isinstance(unnest.expressions[0],
                                                                   exp.Array):
        return None
    values: list[int | float | str] = []
    for item in unnest.expressions[0].expressions:
        negative = isinstance(item, exp.Neg)
        item = item.this if negative else item
        if not isinstance(item, exp.Literal) or (negative and item.is_string):
            return None
        number = float(item.this) if not item.is_string else None
        if number is not None and not math.isfinite(number):
            return None
        value: int | float | str = item.this if item.is_string else (
            int(item.this) if item.is_int else float(item.this))
        values.append(-value if negative and not isinstance(value, str) else value)
    kinds = {type(v) for v in values}
    if not values or len(kinds) != 1:
        return None
    kind = {int: ColumnType.INT, float: ColumnType.FLOAT, str: ColumnType.TEXT}[kinds.pop()]
    return Table(name=name.lower(), columns={name.lower(): Column(name.lower(), kind)},
                 public=True, literal=tuple(values))


class PublicRows(Protocol):
    """Where plans read public tables: DuckDB's SQL over a typed copy of them
    (:class:`dpsql.execution.public.PublicStore`, which the engine filled with its own SQL,
    ``Engine.read_public``). Public tables protect no one, so reading them to plan leaks
    nothing; the :class:`dpsql.routes.planner.Planner` that holds one keys its plans to it."""

    def read(self, sql: str) -> list[tuple[object, ...]]: ...


def _read(sql: str, store: PublicRows | None) -> list[tuple[object, ...]]:
    """Rows of DuckDB's ``sql`` over the public tables, on the planner's store."""
    if store is None:
        raise JoinRefused("joining a public table needs its data to plan (its multiplicities "
                          "and key domains); query through a Database that opened the data")
    return list(store.read(sql))


def physical(relation: Relation, schema: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The engine's physical type of every joined column."""
    out: dict[str, str] = {}
    for s in [*relation.sources, *(j.source for j in relation.semijoins)]:
        types = {k.lower(): v for k, v in schema.get(s.table.name.lower(), {}).items()}
        for c in s.table.columns:
            if c in types:
                out[s.name(c)] = types[c]
    return out


def relation_sql(relation: Relation, condition: Callable[[exp.Expression], exp.Expression],
                 reader: Reader | None = None) -> exp.Expression:
    """The joined rows, as the FROM of ``__rows``: each source renamed to its joined column
    names, joined as written (``condition`` makes each ON and filter total; equalities of
    units and of ``unit_path`` links compare canonical units, :func:`identity_on`), the
    semi-joins as IN / NOT IN over the unit (:func:`_semi`), and ``__join_unit``, the first
    non-NULL canonical unit. ``reader`` reads the joined table
    (:class:`dpsql.query.total_expressions.Reader`: its
    :meth:`~dpsql.query.total_expressions.Reader.unit` is the one canonical unit)."""
    reader = reader or Reader(joined_columns(relation), {})
    identity = identity_columns(relation)
    first, *rest = relation.sources
    several = sum(1 for s in relation.sources if s.table.needs_bounding and not s.hidden) > 1
    select = exp.select(exp.Star(), copy=False).from_(_renamed(first, several, reader),
                                                      copy=False)
    for s in rest:
        on = identity_on(s.on, identity, condition, reader) if s.on is not None else exp.true()
        select = select.join(_renamed(s, several, reader), on=on, join_type=s.side or "INNER",
                             copy=False)
    units = [reader.unit(s.unit) for s in relation.sources if s.unit is not None]
    unit: exp.Expression = units[0] if len(units) == 1 else exp.Coalesce(
        this=units[0], expressions=units[1:])
    select = select.select(exp.alias_(unit, UNIT, quoted=True), copy=False)
    for j in relation.semijoins:
        select = select.where(_semi(j, condition, reader.unit), copy=False)
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier("__joined")))


def joined_columns(relation: Relation) -> Table:
    """A table of every joined column under its joined name (the declared types: what
    :class:`~dpsql.query.total_expressions.Reader` needs when no joined table is at hand)."""
    columns = {s.name(c.name): replace(c, name=s.name(c.name))
               for s in [*relation.sources, *(j.source for j in relation.semijoins)]
               for c in s.table.columns.values()}
    return Table(name="__joined", columns=columns)


def identity_columns(relation: Relation) -> frozenset[str]:
    """The joined names of the columns that name a unit: every unit column, and both ends of
    each ``unit_path`` link (the hidden target's ON). Equalities between them compare
    identities, so they are read as canonical units (:func:`identity_on`), never clamped."""
    names = {s.unit for s in [*relation.sources, *(j.source for j in relation.semijoins)]
             if s.unit is not None}
    for s in relation.sources:
        if s.hidden:
            names.update(c.name for c in (s.on.find_all(exp.Column) if s.on else ()))
    return frozenset(names)


def identity_on(on: exp.Expression, identity: frozenset[str],
                condition: Callable[[exp.Expression], exp.Expression], reader: Reader
                ) -> exp.Expression:
    """An ON clause with each AND-ed equality of two identity columns of one declared type
    (units, ``unit_path`` links) comparing canonical units (:meth:`Reader.unit`), the rest
    made total by ``condition``. Joined through the typed, clamped read of a filter, units
    beyond a column's declared bounds would meet (two people's rows joined as one's, or a
    path leading to several rows), and spellings of one unit would meet here but be several
    units in bounding."""
    parts: list[exp.Expression] = []
    for part in conjuncts(on):
        if _identity_equality(part, identity, reader):
            parts.append(exp.EQ(this=reader.unit(part.this.name),
                                expression=reader.unit(part.expression.name)))
        else:
            parts.append(condition(part))
    return parts[0] if len(parts) == 1 else cast(exp.Expression, exp.and_(*parts, copy=False))


def _identity_equality(part: exp.Expression, identity: frozenset[str], reader: Reader) -> bool:
    if not (isinstance(part, exp.EQ) and isinstance(part.this, exp.Column)
            and isinstance(part.expression, exp.Column)):
        return False
    a, b = reader.table.column(part.this.name), reader.table.column(part.expression.name)
    return (part.this.name in identity and part.expression.name in identity
            and a is not None and b is not None and a.type == b.type)


def _renamed(source: Source, several: bool = False, reader: Reader | None = None
             ) -> exp.Expression:
    """One source under its joined column names; joined to other tables that need bounding,
    a table that needs bounding keeps at most its own k rows per unit before the join too
    (:func:`prebound`)."""
    projections = [exp.alias_(exp.column(c, quoted=True), source.name(c), quoted=True)
                   for c in source.table.columns]
    inner = exp.select(*projections, copy=False).from_(_from(source.table), copy=False)
    if several and source.table.needs_bounding and not source.hidden:
        inner = prebound(inner, source, _source_reader(source, reader))
    return exp.Subquery(this=inner, alias=exp.TableAlias(
        this=exp.to_identifier(source.prefix + "t", quoted=True)))


def _source_reader(source: Source, reader: Reader | None) -> Reader:
    """A reader of one source's stored columns, with the physical types of their joined
    names."""
    physical = reader.physical if reader is not None else {}
    return Reader(source.table, {c: physical[source.name(c)] for c in source.table.columns
                                 if source.name(c) in physical})


#: The secret salt of the query ($1, as in dpsql.execution.rewrite): it keys the samples.
SALT = exp.Placeholder(this="1")


def prebound(select: exp.Select, source: Source, reader: Reader | None = None) -> exp.Select:
    """At most k rows per unit of one private table, before it is joined to another private
    table that needs bounding too. Not the guarantee -- bounding after the join is (module
    docstring) -- but it bounds the work one unit can cause: with n rows in each of two tables
    has n * n joined rows before bounding, and the running time would depend on one person's
    rows far beyond k. With it, a unit has at most the joined k rows whenever the public
    multiplicities hold, so bounding after the join rarely drops more. Partitioned by the
    canonical unit (``reader``, over the stored columns), as bounding is."""
    assert source.table.privacy_unit is not None  # needs_bounding implies a unit
    reader = reader or Reader(source.table, {})
    unit = reader.unit(source.table.privacy_unit)
    order = SaltedHash(expressions=[SALT.copy(), *(
        exp.column(c, quoted=True) for c in source.table.columns)])
    rank = exp.Window(this=exp.RowNumber(), partition_by=[unit],
                      order=exp.Order(expressions=[exp.Ordered(this=order)]))
    return select.qualify(exp.LTE(this=rank, expression=exp.Literal.number(
        source.table.max_rows_per_unit)), copy=False)


def stored_unit(name: str) -> exp.Expression:
    """A unit column as stored (what a unit read without :meth:`Reader.unit` would be)."""
    return exp.column(name, quoted=True)


def _semi(j: SemiJoin, condition: Callable[[exp.Expression], exp.Expression],
          unit: Callable[[str], exp.Expression] = stored_unit) -> exp.Expression:
    """The semi-join's filter, ``outer IN (SELECT inner FROM source WHERE inner IS NOT NULL
    AND predicate)`` over canonical units (``unit``), its NULL outer units decided by
    :func:`null_outer`. The subquery's NULL units are dropped: rows of no unit belong to no
    one, and one NULL in NOT IN would otherwise empty the whole answer."""
    assert j.source.unit is not None  # bind accepts semi-joins over private tables only
    inner_unit = unit(j.source.unit)
    sub = exp.select(inner_unit, copy=False).from_(_renamed(j.source), copy=False).where(
        inner_unit.copy().is_(exp.null()).not_(), copy=False)
    if j.predicate is not None:
        sub = sub.where(condition(j.predicate), copy=False)
    outer = unit(j.outer)
    return null_outer(j, outer, exp.In(this=outer, query=exp.Subquery(this=sub)))


def null_outer(j: SemiJoin, outer: exp.Expression, test: exp.Expression) -> exp.Expression:
    """The semi-join's filter from ``test = outer IN (subquery of non-NULL units)``, with the
    fate of a row whose outer unit is NULL fixed by that row alone (module docstring, "Semi-
    and anti-joins"): IN and EXISTS drop it (``test`` is NULL), NOT EXISTS keeps it (SQL's
    own answer: no row equals NULL), NOT IN drops it (SQL's answer whenever the subquery has
    a row; SQL keeps it when the subquery is empty, which would make it depend on whether
    *anyone* matches). For a non-NULL outer unit, ``test`` is TRUE or FALSE, never NULL.

    NOT EXISTS is written ``NOT COALESCE(test, FALSE)``, not ``outer IS NULL OR NOT test``
    (the same values): Spark plans a NOT IN nested in OR as a null-aware nested-loop join
    (every outer row against every inner one: 10 s where this takes 1 on the sample's
    visits), and an IN nested in COALESCE as a hash join."""
    if not j.anti:
        return test
    if j.exists:
        return exp.Not(this=exp.Coalesce(this=test, expressions=[exp.false()]))
    missing = outer.copy().is_(exp.null())
    return cast(exp.Expression, exp.and_(exp.Not(this=missing), exp.Not(this=test), copy=False))
