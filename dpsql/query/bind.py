"""Pass 2, bind: resolve the FROM clause to one declared table and every column reference to
an expression over that table's declared columns.

CTEs and subqueries in FROM are allowed when they are row-level transformations of the one
private table (projections and WHERE filters). They are inlined: their projections are
substituted into the outer query and their filters are AND-ed together, so that every later pass
sees a single SELECT over the base table. A base column appears as an unqualified ``exp.Column``
whose name is the declared column name in lower case.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

from sqlglot import exp

from dpsql.errors import (
    ForbiddenFunction,
    UnknownColumn,
    UnknownTable,
    UnsupportedQuery,
    did_you_mean,
)
from dpsql.metadata.metadata import Metadata, Table
from dpsql.query.bind_joins import Namespace, bind_relation, is_joined, resolve_joined
from dpsql.query.joins import PublicRows, Relation
from dpsql.query.names import output_name
from dpsql.query.over_released import expand_star, split
from dpsql.query.parameters import parse_array_literal
from dpsql.texttable import unique_names

# Clauses that make a SELECT more than a row-level transformation of its input.
_NOT_ROW_LEVEL = ("group", "having", "limit", "offset", "qualify", "distinct", "windows")
_DEFAULT_SCHEMAS = {"", "main"}


@dataclass
class BoundQuery:
    """The query's final SELECT over one base table, with CTEs and subqueries inlined."""

    table: Table
    select: exp.Select  # FROM/WITH removed; columns are base columns or output aliases
    where: exp.Expression | None
    output_names: list[str]  # the result's column names, as the analyst wrote them
    relation: Relation | None = None  # joins: ``table`` is then the joined table
    # A query over this aggregate's answer (dpsql.query.over_released): the outer query, run
    # as post-processing, and the names of this query's own columns, which it reads.
    post: exp.Select | None = None
    released_names: list[str] | None = None


@dataclass
class _Source:
    table: Table
    alias: str
    columns: dict[str, exp.Expression]  # visible name -> expression over base columns
    where: exp.Expression | None
    namespace: Namespace | None = None  # joins: the joined tables' columns (bind_joins)


def bind(select: exp.Select, metadata: Metadata, public: PublicRows | None = None
         ) -> BoundQuery:
    """Resolve ``select`` against ``metadata``; a join with a public table reads ``public``
    (its multiplicities, key domains and bounds: :mod:`dpsql.query.joins`)."""
    over = split(select)  # SELECT ... FROM (a private aggregate): post-processing of its answer
    if over is not None:
        inner, post = over
        bound = bind(inner, metadata, public)
        if bound.post is not None:
            raise UnsupportedQuery("a query over a query over a private aggregate is not "
                                   "supported; write one outer query over the aggregate")
        # By position, as PostgreSQL reads a subquery's columns: two named alike (count,
        # count) are told apart as DuckDB does (count, count_1).
        released = unique_names(bound.output_names)
        post = expand_star(post, released)
        return replace(bound, post=post, released_names=released,
                       output_names=[output_name(e) for e in post.expressions])
    select = _quantified_to_in(select.copy())
    names = [output_name(e) for e in select.expressions]
    ctes = _collect_ctes(select, {})
    relation = None
    if is_joined(select, ctes, metadata):
        namespace, relation = bind_relation(select, ctes, metadata, public)
        source = _Source(table=namespace.table, alias="", columns={}, where=None,
                         namespace=namespace)
    else:
        source = _resolve_from(select, ctes, metadata, "the query")
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    where = _combine(source.where, _where(select, source, aliases=set()))
    for key in ("where", "from_", "with_", "joins"):
        select.set(key, None)
    for key in ("expressions", "group", "having", "order", "qualify"):
        node = select.args.get(key)
        if node is None:
            continue
        # Output aliases may be named in GROUP BY, HAVING and ORDER BY, not in the select list;
        # in GROUP BY a declared column of the same name wins, as in standard SQL.
        visible = {"expressions": set(), "group": aliases - set(source.columns)}.get(key, aliases)
        if isinstance(node, list):
            select.set(key, [_substitute(n, source, visible) for n in node])
        else:
            select.set(key, _substitute(node, source, visible))
    return BoundQuery(table=source.table, select=select, where=where, output_names=names,
                      relation=relation)


def _collect_ctes(select: exp.Select, outer: dict[str, exp.Select]) -> dict[str, exp.Select]:
    ctes = dict(outer)
    with_ = select.args.get("with_")
    if with_ is None:
        return ctes
    if with_.args.get("recursive"):
        raise UnsupportedQuery("recursive CTEs are not supported; use a plain WITH")
    for cte in with_.expressions:
        body = cte.this
        if not isinstance(body, exp.Select):
            raise UnsupportedQuery(f"the CTE {cte.alias!r} must be a plain SELECT")
        ctes[cte.alias.lower()] = _name_columns(body, cte.args.get("alias"), cte.alias)
    return ctes


def _name_columns(body: exp.Select, alias: exp.TableAlias | None, what: str) -> exp.Select:
    """WITH t(a, b) AS (SELECT ...) and (SELECT ...) AS t(a, b): the list names the
    projections in order."""
    names = alias.columns if alias is not None else []
    if not names:
        return body
    projections = body.expressions
    if any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
           for p in projections):
        raise UnsupportedQuery(f"{what!r} names its columns but selects *; list the columns "
                               "it selects instead of *")
    if len(names) != len(projections):
        raise UnsupportedQuery(f"{what!r} names {len(names)} column(s) for {len(projections)} "
                               "select item(s); name exactly one column per item")
    body.set("expressions", [exp.alias_(p.this if isinstance(p, exp.Alias) else p, n.name)
                             for p, n in zip(projections, names, strict=True)])
    return body


def _resolve_from(select: exp.Select, ctes: dict[str, exp.Select], metadata: Metadata,
                  what: str) -> _Source:
    if select.args.get("joins") or select.args.get("laterals"):
        raise UnsupportedQuery(
            f"{what} joins tables; a CTE or subquery must read one table: join declared "
            "tables in the outer query (FROM a JOIN b ON ...)")
    from_ = select.args.get("from_")
    if from_ is None:
        raise UnsupportedQuery(f"{what} reads no table; every query must aggregate one "
                               "declared table (FROM table_name)")
    item = from_.this
    if select.args.get("sample") or item.args.get("sample"):
        raise UnsupportedQuery(
            f"{what} samples its table (TABLESAMPLE / USING SAMPLE), which is not supported: "
            "dpsql already keeps a random sample of each person's rows where the metadata "
            "bounds them; remove the sampling clause")
    alias = item.alias_or_name.lower() if item.alias_or_name else ""
    if isinstance(item, exp.Subquery):
        inner = item.this
        if not isinstance(inner, exp.Select):
            raise UnsupportedQuery("a subquery in FROM must be a plain SELECT")
        inner = _name_columns(inner, item.args.get("alias"), alias or "subquery")
        return _row_level(inner, _collect_ctes(inner, ctes), metadata, alias or "subquery")
    if not isinstance(item, exp.Table) or not isinstance(item.this, exp.Identifier):
        raise ForbiddenFunction(
            f"{item.sql(dialect='duckdb')} is not a table: table functions, file reads and "
            "engine catalogs are not allowed; read a declared table by name")
    return _table_source(item, alias, ctes, metadata)


def _table_source(item: exp.Table, alias: str, ctes: dict[str, exp.Select],
                  metadata: Metadata) -> _Source:
    name = item.name.lower()
    schema = (item.db or "").lower()
    if item.catalog or schema not in _DEFAULT_SCHEMAS:
        raise UnknownTable(f"{item.sql(dialect='duckdb')} is not a declared table"
                           f"{did_you_mean(item.name, metadata.tables)}; "
                           f"declared tables: {', '.join(sorted(metadata.tables))}")
    if not schema and name in ctes:
        body = ctes.pop(name)  # a CTE cannot refer to itself
        return _row_level(body, _collect_ctes(body, ctes), metadata, alias)
    table = metadata.table(name)
    if table is None:
        raise UnknownTable(f"table {item.name!r} is not declared in the metadata"
                           f"{did_you_mean(item.name, [*metadata.tables, *ctes])}; "
                           f"declared tables: {', '.join(sorted(metadata.tables))}")
    refuse_unit_path(table)
    columns: dict[str, exp.Expression] = {c: exp.column(c) for c in table.columns}
    return _Source(table=table, alias=alias, columns=columns, where=None)


def refuse_unit_path(table: Table) -> None:
    """A table read as one table (not joined by :mod:`dpsql.query.bind_joins`) must have its own
    unit: only the joined path follows a ``unit_path`` to the unit. Read here, each row of a
    ``unit_path`` table would be a unit of its own (k = 1, no bounding), while one person can
    have any number of such rows (issue 17, class 3: a CTE or a subquery in FROM)."""
    if table.unit_path is not None:
        raise UnsupportedQuery(
            f"{table.name!r} reaches its privacy unit along its unit_path, so it cannot be read "
            "through a CTE or a subquery in FROM; read it by name in the outer query's FROM "
            f"(SELECT ... FROM {table.name} WHERE ...)")


def _row_level(select: exp.Select, ctes: dict[str, exp.Select], metadata: Metadata,
               alias: str) -> _Source:
    what = f"the subquery or CTE {alias!r}"
    for key in _NOT_ROW_LEVEL:
        if select.args.get(key):
            raise UnsupportedQuery(
                f"{what} uses {key.upper()}; a CTE or subquery must be a row-level "
                "transformation of one table (SELECT expressions FROM table WHERE ...)")
    for node in select.find_all(exp.AggFunc, exp.Window):
        raise UnsupportedQuery(
            f"{what} computes {node.sql(dialect='duckdb')}; aggregate only in the final SELECT, "
            "CTEs and subqueries must be row-level transformations")
    inner = _resolve_from(select, ctes, metadata, what)
    columns: dict[str, exp.Expression] = {}
    for projection in select.expressions:
        columns.update(_project(projection, inner, what))
    where = _combine(inner.where, _where(select, inner, aliases=set()))
    return _Source(table=inner.table, alias=alias, columns=columns, where=where)


def _project(projection: exp.Expression, source: _Source,
             what: str) -> dict[str, exp.Expression]:
    if isinstance(projection, exp.Star) or (
            isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)):
        return {name: e.copy() for name, e in source.columns.items()}
    name = projection.alias_or_name.lower()
    if not name:
        raise UnsupportedQuery(f"{what}: give {projection.sql(dialect='duckdb')} a name with AS")
    body = projection.this if isinstance(projection, exp.Alias) else projection
    return {name: _substitute(body, source, set())}


def _where(select: exp.Select, source: _Source, aliases: set[str]) -> exp.Expression | None:
    where = select.args.get("where")
    return None if where is None else _substitute(where.this, source, aliases)


def _substitute(node: exp.Expression, source: _Source, aliases: set[str]) -> exp.Expression:
    """Replace every column reference in ``node`` with its expression over base columns."""

    def replace(n: exp.Expression) -> exp.Expression:
        if not isinstance(n, exp.Column) or isinstance(n.this, exp.Star):
            if isinstance(n, exp.Subquery | exp.Exists) or (
                    isinstance(n, exp.In) and n.args.get("query")):
                raise UnsupportedQuery(
                    f"subqueries inside expressions ({n.sql(dialect='duckdb')[:60]}) are not "
                    "supported; filter with plain predicates on the table's columns, or by the "
                    "person's rows elsewhere with an AND-ed [NOT] EXISTS / unit [NOT] IN "
                    "(SELECT unit FROM ...) in WHERE")
            return n
        return _resolve_column(n, source, aliases)

    return node.copy().transform(replace, copy=False)


def _resolve_column(column: exp.Column, source: _Source, aliases: set[str]) -> exp.Expression:
    qualifier = column.table.lower()
    name = column.name.lower()
    if source.namespace is not None:
        return resolve_joined(column, source.namespace, aliases)
    if qualifier and qualifier not in (source.alias, source.table.name.lower()):
        raise UnknownColumn(f"{column.sql(dialect='duckdb')}: {column.table!r} is not the table "
                            f"in FROM ({source.alias or source.table.name})")
    if not qualifier and name in aliases:
        return column  # an output alias, resolved by the outer query on the noisy cells
    expression = source.columns.get(name)
    if expression is None:
        raise UnknownColumn(f"column {column.name!r} is not declared for table "
                            f"{source.table.name!r}{did_you_mean(name, source.columns)}; its "
                            "columns: "
                            f"{', '.join(sorted(source.columns))}")
    copy = expression.copy()
    return copy if isinstance(copy, exp.Column | exp.Literal) else exp.Paren(this=copy)


def _combine(a: exp.Expression | None, b: exp.Expression | None) -> exp.Expression | None:
    if a is None or b is None:
        return a or b
    # Two operands: exp.and_ builds an exp.And (its stub says the wider exp.Condition).
    return cast(exp.Expression, exp.and_(a, b, copy=True))


def _quantified_to_in(select: exp.Select) -> exp.Select:
    """``x = ANY(ARRAY[a, b])`` as ``x IN (a, b)``, and ``x <> ALL(...)`` as ``x NOT IN (...)``.

    PostgreSQL clients send a list parameter as an array (``col = ANY($1)``, bound here as the
    array literal text ``'{a,b}'``) where other databases take ``IN``. The two are the same
    predicate, row by row (a NULL element gives NULL when nothing matches, as with IN), so the
    rewrite changes no answer and no sensitivity: every later pass sees a plain IN list of
    constants. An empty array makes ANY false and ALL true, as in PostgreSQL. Other shapes
    (``> ANY``, subqueries, nested arrays) are left for the later passes to refuse.
    """

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.EQ | exp.NEQ):
            quantifier = "ANY" if isinstance(node, exp.EQ) else "ALL"
            items = _quantified_items(node.expression, quantifier)
            if items is not None:
                if not items:
                    return exp.Boolean(this=quantifier == "ALL")
                listed = exp.In(this=node.this, expressions=items)
                return listed if quantifier == "ANY" else exp.Not(this=listed)
        return node

    return cast(exp.Select, select.transform(rewrite, copy=False))


def _quantified_items(node: exp.Expression, quantifier: str) -> list[exp.Expression] | None:
    """The elements of ``ANY(array)`` (or ``ALL(array)``), or None for any other shape."""
    if isinstance(node, exp.Any | exp.All) and (quantifier == "ANY") == isinstance(node, exp.Any):
        argument = node.this
    elif isinstance(node, exp.Anonymous) and node.name.upper() == quantifier and \
            len(node.expressions) == 1:
        argument = node.expressions[0]
    else:
        return None
    while isinstance(argument, exp.Paren):
        argument = argument.this
    element_type = None
    if isinstance(argument, exp.Cast) and argument.to.is_type(exp.DataType.Type.ARRAY) and \
            argument.to.expressions:
        element_type, argument = argument.to.expressions[0], argument.this
    if isinstance(argument, exp.Literal) and argument.is_string:
        items = _text_elements(argument.name)
    elif isinstance(argument, exp.Array):
        items = [e.copy() for e in argument.expressions]
    else:
        return None
    if any(isinstance(e, exp.Array) for e in items):
        raise UnsupportedQuery("= ANY of a multidimensional array is not supported; compare "
                               "with a one-dimensional array or an IN list")
    if element_type is not None:
        return [exp.Cast(this=e, to=element_type.copy()) for e in items]
    return items


def _text_elements(text: str) -> list[exp.Expression]:
    try:
        values = parse_array_literal(text)
    except ValueError as e:
        raise UnsupportedQuery(f"{e}; write the array as '{{a,b}}' or ARRAY[a, b], or use "
                               "IN (a, b)") from None
    return [exp.Null() if v is None else exp.Array() if isinstance(v, list)
            else exp.Literal.string(v) for v in values]

