"""Binding of joins (part of pass 2, :mod:`dpsql.query.bind`): a FROM clause with joins, semi- and
anti-joins in WHERE, or a table that reaches its unit along a ``unit_path``, resolved to a
:class:`~dpsql.query.joins.Relation` and a :class:`Namespace` of its columns, and checked against
the join rules. The privacy argument of those rules is in :mod:`dpsql.query.joins`.

Columns of the joined relation are named ``alias__column`` (the joined table's names); an
analyst writes ``alias.column``, or ``column`` when exactly one joined table has it (or when it
is a USING column, read from the left table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import cast

from sqlglot import exp

from dpsql.errors import JoinRefused, UnknownColumn, UnknownTable, UnsupportedQuery, did_you_mean
from dpsql.metadata.metadata import Metadata, Table
from dpsql.query.joins import (
    PublicRows,
    Relation,
    SemiJoin,
    Source,
    joined_table,
    literal_table,
    unit_name,
)
from dpsql.query.total_expressions import conjuncts

_PLAIN_ALIAS = re.compile(r"[a-z][a-z0-9_]*")
# Clauses a semi-join's subquery may not use: it must be a row-level filter of one table.
_NOT_ROW_LEVEL = ("group", "having", "limit", "offset", "qualify", "windows", "order", "joins",
                  "laterals", "with_")


@dataclass
class Namespace:
    """The columns an analyst can name: alias -> that table's columns (joined names);
    unqualified names of exactly one table (or USING) in ``columns``, the others
    ``ambiguous``."""

    table: Table
    qualified: dict[str, dict[str, exp.Expression]]
    columns: dict[str, exp.Expression]
    ambiguous: frozenset[str]


def is_joined(select: exp.Select, ctes: dict[str, exp.Select], metadata: Metadata) -> bool:
    """Whether the query reads a joined relation: joins, a subquery in WHERE, or a table whose
    unit is reached along its unit_path."""
    where = select.args.get("where")
    if select.args.get("joins") or (where is not None and where.find(exp.Subquery, exp.Exists)):
        return True
    from_ = select.args.get("from_")
    item = from_.this if from_ is not None else None
    if not isinstance(item, exp.Table) or item.name.lower() in ctes:
        return False
    table = metadata.table(item.name)
    return table is not None and table.unit_path is not None


def bind_relation(select: exp.Select, ctes: dict[str, exp.Select], metadata: Metadata,
                  public: PublicRows | None) -> tuple[Namespace, Relation]:
    if select.args.get("laterals") or select.args.get("from_") is None:
        raise UnsupportedQuery("LATERAL and a query without FROM cannot be joined; join "
                               "declared tables by name")
    items = [(select.args["from_"].this, None),
             *((j.this, j) for j in select.args.get("joins") or [])]
    sources: list[Source] = []
    using: dict[str, exp.Expression] = {}
    for index, (item, join) in enumerate(items):
        table, alias = _declared(item, ctes, metadata, index)
        source = Source(table, alias, f"{alias}__", side=_side(join))
        on = _on(join, source, sources, using)
        sources = [*_nullable(sources, source.side), replace(
            source, on=on, nullable=source.side in ("LEFT", "FULL"),
            unit=source.name(table.privacy_unit) if table.privacy_unit else None)]
        if table.unit_path is not None:
            sources[-1:] = _with_path(sources[-1], metadata, index)
    _check_units(sources, metadata)
    outer = _namespace(sources, using, sources[0].table)
    semis = _semijoins(select, outer, sources, metadata)
    relation = Relation(tuple(sources), tuple(semis))
    outer.table = joined_table(relation, public)
    return outer, relation


def _declared(item: exp.Expression, ctes: dict[str, exp.Select], metadata: Metadata,
              index: int) -> tuple[Table, str]:
    literal = literal_table(item) if isinstance(item, exp.Unnest) and index > 0 else None
    if literal is not None:  # UNNEST([1, 2, 3]) AS x: a public table written in the query
        return literal, literal.name if _PLAIN_ALIAS.fullmatch(literal.name) else f"t{index}"
    if not isinstance(item, exp.Table) or not isinstance(item.this, exp.Identifier) or (
            not item.db and item.name.lower() in ctes):
        raise UnsupportedQuery(f"{item.sql(dialect='duckdb')[:60]}: only declared tables can "
                               "be joined (no subqueries, CTEs or table functions in a join)")
    table = _table(item, metadata)
    alias = (item.alias_or_name or table.name).lower()
    if alias.startswith("__"):
        raise UnsupportedQuery(f"the alias {alias!r} starts with __, which dpsql reserves; "
                               "choose another alias")
    return table, alias if _PLAIN_ALIAS.fullmatch(alias) else f"t{index}"


def _side(join: exp.Join | None) -> str:
    if join is None:
        return ""
    method, kind = join.args.get("method"), (join.args.get("kind") or "").upper()
    if method or kind in ("SEMI", "ANTI"):
        raise UnsupportedQuery(
            f"{(method or kind).upper()} JOIN is not supported; join with ON or USING, and "
            "filter by another table with WHERE [NOT] EXISTS (SELECT ...)")
    return (join.args.get("side") or "").upper()


def _on(join: exp.Join | None, source: Source, earlier: list[Source],
        using: dict[str, exp.Expression]) -> exp.Expression | None:
    """The join condition over joined column names; USING (c) is left.c = right.c."""
    if join is None:
        return None
    if join.args.get("using"):
        parts = []
        for ident in join.args["using"]:
            name = ident.name.lower()
            left = next((s for s in earlier if name in s.table.columns and not s.hidden), None)
            if left is None or name not in source.table.columns:
                raise UnknownColumn(f"USING ({name}): both sides must have a column {name!r}")
            # Inner USING: both sides hold the same value; a public side's column carries
            # the public domain (its values), so the unqualified name reads that one.
            side = source if source.table.public and not source.side else left
            using[name] = exp.column(side.name(name)) if name not in using or side is source \
                else using[name]
            parts.append(exp.EQ(this=exp.column(left.name(name)),
                                expression=exp.column(source.name(name))))
        return cast(exp.Expression, exp.and_(*parts))
    on = join.args.get("on")
    if on is None:
        return None
    return substitute(on, _namespace([*earlier, source], using, source.table), set())


def _nullable(sources: list[Source], side: str) -> list[Source]:
    """RIGHT and FULL joins may NULL-extend every earlier source."""
    if side not in ("RIGHT", "FULL"):
        return sources
    return [replace(s, nullable=True) for s in sources]


def _with_path(source: Source, metadata: Metadata, index: int) -> list[Source]:
    """A unit_path table and, joined by dpsql after it, the row its path leads to."""
    assert source.table.unit_path is not None
    column, target_name, target_column = source.table.unit_path
    target = metadata.table(target_name)
    assert target is not None and target.privacy_unit is not None  # checked by metadata
    hidden = Source(target, f"__path{index}", f"__path{index}__", side="LEFT", hidden=True,
                    nullable=True, unit=f"__path{index}__{target.privacy_unit}")
    on = exp.EQ(this=exp.column(source.name(column)),
                expression=exp.column(hidden.name(target_column)))
    return [replace(source, unit=hidden.unit), replace(hidden, on=on)]


def _check_units(sources: list[Source], metadata: Metadata) -> None:
    """Private tables share one unit and each joins an earlier one on it (dpsql.query.joins)."""
    private = [s for s in sources if not s.table.public and not s.hidden]
    if not private:
        raise UnsupportedQuery("the query joins public tables only; dpsql answers aggregates "
                               "over private tables, joined to public ones")
    for s in private:
        if unit_name(s.table, metadata) is None:
            raise JoinRefused(f"table {s.table.name!r} declares no privacy_unit (each row is "
                              "its own unit), so it cannot be joined; query it alone")
    units = sorted({str(unit_name(s.table, metadata)) for s in private})
    if len(units) > 1:
        raise JoinRefused(f"the joined tables protect different units ({', '.join(units)}); "
                          "private tables can be joined only when they share a privacy unit")
    types = sorted({_declared_types(sources)[s.unit] for s in sources if s.unit is not None})
    if len(types) > 1:
        raise JoinRefused(f"the joined tables declare their unit {units[0]!r} with different "
                          f"types ({', '.join(types)}); a unit is one typed value everywhere "
                          "(dpsql.query.joins): declare it with one type in every table")
    for index, s in enumerate(sources):
        before = sources[:index]
        if _keeps_public_rows(s, before):
            raise JoinRefused(
                f"the {s.side} JOIN of {s.table.name!r} keeps rows of public tables that belong "
                "to no person; put the private table first and use JOIN or LEFT JOIN")
        if s in private[1:] and not _on_unit(s, [b for b in before if b in private]):
            what = "a cross join" if s.on is None else "a join on other columns"
            raise JoinRefused(
                f"{what} of the private tables {private[0].table.name!r} and "
                f"{s.table.name!r} is refused: one person's rows could meet another's, so no "
                "contribution bound holds. Join private tables on the privacy unit, e.g. "
                f"ON {s.alias}.{units[0]} = {private[0].alias}.{units[0]}")


def _declared_types(sources: list[Source]) -> dict[str, str]:
    """The declared type of every joined column, by joined name."""
    return {s.name(c): column.type for s in sources for c, column in s.table.columns.items()}


def _keeps_public_rows(source: Source, before: list[Source]) -> bool:
    """An outer join that keeps rows of a side made of public tables only: they would have no
    unit (and be dropped, see dpsql.query.joins), which is not what the analyst asked."""
    public_before = all(b.table.public for b in before)
    if source.side in ("RIGHT", "FULL") and (source.table.public or any(
            b.table.public for b in before)):
        return True
    return source.side == "LEFT" and not source.table.public and public_before


def _on_unit(source: Source, earlier: list[Source]) -> bool:
    pairs = {frozenset((a, b)) for e in earlier for a, b in _unit_pairs(source, e)}
    for part in conjuncts(source.on):
        if isinstance(part, exp.EQ) and isinstance(part.this, exp.Column) and \
                isinstance(part.expression, exp.Column) and \
                frozenset((part.this.name, part.expression.name)) in pairs:
            return True
    return False


def _unit_pairs(a: Source, b: Source) -> list[tuple[str, str]]:
    """Column pairs whose equality puts rows of ``a`` and ``b`` in one unit: their unit
    columns, or a unit_path column and the column it leads to."""
    pairs = []
    if a.unit is not None and b.unit is not None:
        pairs.append((a.unit, b.unit))
    for x, y in ((a, b), (b, a)):
        path = x.table.unit_path
        if path is not None and path[1] == y.table.name.lower():
            pairs.append((x.name(path[0]), y.name(path[2])))
        other = y.table.unit_path
        if path is not None and other is not None and path[1:] == other[1:]:
            pairs.append((x.name(path[0]), y.name(other[0])))
    return pairs


def _namespace(sources: list[Source], using: dict[str, exp.Expression],
               table: Table) -> Namespace:
    qualified: dict[str, dict[str, exp.Expression]] = {}
    columns: dict[str, exp.Expression] = {}
    ambiguous: set[str] = set()
    for s in sources:
        if s.hidden:
            continue
        if s.alias in qualified:
            raise UnsupportedQuery(f"{s.alias!r} names two tables in FROM; give each an alias")
        qualified[s.alias] = {c: exp.column(s.name(c)) for c in s.table.columns}
        if s.table.unit_path is not None and s.unit is not None:
            # A unit_path table shows the unit its path leads to as a column of its own.
            unit = s.unit.rsplit("__", 1)[1]
            qualified[s.alias].setdefault(unit, exp.column(s.unit))
        for c in qualified[s.alias]:
            (ambiguous.add if c in columns else lambda _: None)(c)
            columns.setdefault(c, qualified[s.alias][c])
    columns.update(using)
    return Namespace(table=table, qualified=qualified, columns=columns,
                     ambiguous=frozenset(ambiguous - set(using)))


def resolve_joined(column: exp.Column, source: Namespace, aliases: set[str]) -> exp.Expression:
    qualifier, name = column.table.lower(), column.name.lower()
    if qualifier:
        columns = source.qualified.get(qualifier)
        if columns is None:
            raise UnknownColumn(f"{column.sql(dialect='duckdb')}: {column.table!r} is not a "
                                f"table in FROM ({', '.join(source.qualified)})")
        if name not in columns:
            raise UnknownColumn(f"column {column.name!r} is not declared for {qualifier!r}"
                                f"{did_you_mean(name, columns)}; its columns: "
                                f"{', '.join(sorted(columns))}")
        return _as_written(columns[name], column)
    if name in aliases:
        return column
    if name in source.ambiguous:
        raise UnknownColumn(f"column {column.name!r} is a column of several joined tables; "
                            f"name its table, as in alias.{column.name}")
    if name not in source.columns:
        raise UnknownColumn(f"column {column.name!r} is not a column of any joined table "
                            f"({', '.join(source.qualified)})"
                            f"{did_you_mean(name, source.columns)}")
    return _as_written(source.columns[name], column)


def _as_written(joined: exp.Expression, column: exp.Column) -> exp.Expression:
    """A copy of ``joined`` (a column under its joined name, ``alias__column``) that keeps
    what the analyst wrote, which refusals quote (:func:`dpsql.query.dates.written`)."""
    resolved = joined.copy()
    resolved.meta["written"] = column.sql(dialect="duckdb")
    return resolved


def substitute(node: exp.Expression, namespace: Namespace, aliases: set[str]) -> exp.Expression:
    """``node`` with every column replaced by its joined name; subqueries refused (only the
    top-level semi-joins of WHERE take one, see :func:`_semijoins`)."""

    def replace_column(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Subquery | exp.Exists) or (isinstance(n, exp.In)
                                                         and n.args.get("query")):
            raise JoinRefused(
                f"{n.sql(dialect='duckdb')[:60]}: a subquery is allowed only as a semi-join, "
                "an AND-ed condition of WHERE: unit [NOT] IN (SELECT unit FROM table WHERE ...) "
                "or [NOT] EXISTS (SELECT 1 FROM table t WHERE t.unit = outer.unit AND ...)")
        if isinstance(n, exp.Column) and not isinstance(n.this, exp.Star):
            return resolve_joined(n, namespace, aliases)
        return n

    return node.copy().transform(replace_column, copy=False)


def _table(item: exp.Table, metadata: Metadata) -> Table:
    table = metadata.table(item.name) if not item.catalog and (item.db or "").lower() in (
        "", "main") else None
    if table is None:
        raise UnknownTable(f"{item.sql(dialect='duckdb')} is not a declared table"
                           f"{did_you_mean(item.name, metadata.tables)}; declared "
                           f"tables: {', '.join(sorted(metadata.tables))}")
    return table


def _semijoins(select: exp.Select, outer: Namespace, sources: list[Source],
               metadata: Metadata) -> list[SemiJoin]:
    """Take the semi- and anti-joins out of WHERE (its top-level AND-ed conditions)."""
    where = select.args.get("where")
    if where is None:
        return []
    keep: list[exp.Expression] = []
    semis: list[SemiJoin] = []
    units = {s.unit for s in sources if s.unit and not s.table.public and not s.hidden}
    unit = unit_name(next(s.table for s in sources if not s.table.public), metadata)
    types = _declared_types(sources)
    for part in conjuncts(where.this):
        semi = _semijoin(part, outer, units, unit, metadata, len(semis))
        if semi is None:
            keep.append(part)
            continue
        inner = semi.source.table.columns[str(semi.source.table.privacy_unit)].type
        if inner != types[semi.outer]:
            raise JoinRefused(f"the semi-join compares the unit declared {types[semi.outer]} "
                              f"outside with {semi.source.table.name}.{unit} declared {inner}; "
                              "a unit is one typed value everywhere: declare it with one type")
        semis.append(semi)
    select.set("where", exp.Where(this=exp.and_(*keep)) if keep else None)
    return semis


def _semijoin(part: exp.Expression, outer: Namespace, units: set[str], unit: str | None,
              metadata: Metadata, index: int) -> SemiJoin | None:
    node, anti = part, False
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Not):
        node, anti = node.this, True
        while isinstance(node, exp.Paren):
            node = node.this
    if isinstance(node, exp.In) and node.args.get("query") is not None:
        query = node.args["query"]
        source, namespace, filters = _subquery(query.this if isinstance(
            query, exp.Subquery) else query, metadata, unit, index)
        chosen = query.this.expressions if isinstance(query, exp.Subquery) else []
        if len(chosen) != 1 or substitute(chosen[0], namespace, set()) != exp.column(
                str(source.unit)):
            raise JoinRefused("the subquery of IN must select its table's privacy unit only: "
                              f"unit IN (SELECT {source.table.privacy_unit} FROM ...)")
        left = substitute(node.this, outer, set())
        if not isinstance(left, exp.Column) or left.name not in units:
            raise JoinRefused("a semi-join compares the privacy unit: write "
                              f"{source.table.privacy_unit} IN (SELECT "
                              f"{source.table.privacy_unit} FROM ...)")
        return SemiJoin(source, left.name, _and(filters, namespace), anti)
    if isinstance(node, exp.Exists):
        source, namespace, filters = _subquery(node.this, metadata, unit, index)
        for i, f in enumerate(filters):
            outer_unit = _correlation(f, namespace, outer, source, units)
            if outer_unit is not None:
                return SemiJoin(source, outer_unit, _and(filters[:i] + filters[i + 1:],
                                                         namespace), anti, exists=True)
        raise JoinRefused("EXISTS must correlate on the privacy unit: EXISTS (SELECT 1 FROM "
                          f"{source.table.name} t WHERE t.{source.table.privacy_unit} = "
                          f"outer.{source.table.privacy_unit} AND ...)")
    return None


def _subquery(select: exp.Expression, metadata: Metadata, unit: str | None,
              index: int) -> tuple[Source, Namespace, list[exp.Expression]]:
    """The one private table a semi-join reads, and its filters (AND-ed, not yet resolved)."""
    if not isinstance(select, exp.Select) or any(select.args.get(k) for k in _NOT_ROW_LEVEL) \
            or select.find(exp.AggFunc, exp.Window) is not None:
        raise JoinRefused("a semi-join's subquery must be a row-level filter of one table "
                          "(SELECT unit FROM table WHERE ...): no joins, aggregates, GROUP BY, "
                          "ORDER BY or LIMIT")
    from_ = select.args.get("from_")
    item = from_.this if from_ is not None else None
    if not isinstance(item, exp.Table):
        raise JoinRefused("a semi-join's subquery must read one declared table")
    table = _table(item, metadata)
    if table.public or table.privacy_unit is None or table.privacy_unit != unit:
        raise JoinRefused(f"a semi-join's subquery must read a private table with the same "
                          f"privacy unit ({unit}) as its own column; {table.name!r} does not")
    alias = (item.alias_or_name or table.name).lower()
    source = Source(table, alias, f"__s{index}__", unit=f"__s{index}__{table.privacy_unit}")
    namespace = _namespace([source], {}, table)
    where = select.args.get("where")
    return source, namespace, conjuncts(where.this) if where is not None else []


def _and(filters: list[exp.Expression], namespace: Namespace) -> exp.Expression | None:
    if not filters:
        return None
    resolved = [substitute(f, namespace, set()) for f in filters]
    return resolved[0] if len(resolved) == 1 else cast(exp.Expression, exp.and_(*resolved))


def _correlation(part: exp.Expression, inner: Namespace, outer: Namespace, source: Source,
                 units: set[str]) -> str | None:
    """The outer unit column of ``inner.unit = outer.unit``, or None for another filter.

    A qualifier names the innermost table of that name, as in SQL: where the subquery's own
    table has the outer table's alias, ``w.pid = w.pid`` compares the subquery's table with
    itself (no correlation), and is refused with a way out rather than read as the outer one."""
    if not isinstance(part, exp.EQ) or not all(isinstance(x, exp.Column)
                                               for x in (part.this, part.expression)):
        return None
    for a, b in ((part.this, part.expression), (part.expression, part.this)):
        if a.table.lower() in inner.qualified or not a.table:
            try:
                mine = resolve_joined(a, inner, set())
            except UnknownColumn:
                continue
            if mine.name == source.unit and b.table.lower() in inner.qualified \
                    and b.table.lower() in outer.qualified:
                raise JoinRefused(
                    f"inside the subquery, {b.table} names the subquery's own table "
                    f"{source.table.name} and hides the outer {b.table}, so {part.sql()} "
                    "compares that table with itself; give the subquery's table another "
                    f"alias: EXISTS (SELECT 1 FROM {source.table.name} s WHERE "
                    f"s.{source.table.privacy_unit} = {b.table}.{b.name} AND ...)")
            if mine.name == source.unit and b.table and b.table.lower() in outer.qualified:
                theirs = resolve_joined(b, outer, set())
                if theirs.name in units:
                    return theirs.name
    return None
