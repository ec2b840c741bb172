"""BigQuery's JSON functions, as BigQuery users apply them to a ``report_format => 'JSON'``
report (:mod:`dpsql.execution.reports`), in DuckDB's SQL.

A report is a DuckDB ``JSON`` value in the post-processing query, so DuckDB reads field access
as BigQuery does (``r.result.value`` and ``list[1].value`` are JSON, ``JSON_VALUE(r,
'$.result.value')`` a string). The functions DuckDB lacks are lowered here, in the tree, with
the dialect's clause (:func:`dpsql.query.dp_clause.lowered`):

* ``JSON_QUERY_ARRAY(j[, path])``, ``JSON_EXTRACT_ARRAY``: ``CAST(json_extract(j, path) AS
  JSON[])`` (path ``'$'`` by default), a list read with ``[OFFSET(i)]``;
* ``JSON_QUERY(j, path)``: ``json_extract(j, path)`` (``JSON_VALUE``, ``JSON_EXTRACT`` and
  ``JSON_EXTRACT_SCALAR`` are DuckDB's too);
* ``DOUBLE(j)``, ``FLOAT64(j)``, ``INT64(j)``, ``BOOL(j)``: casts of a JSON number or
  boolean to ``DOUBLE``, ``BIGINT``, ``BOOLEAN``.

A name that starts with an output column's alias, in HAVING or QUALIFY (``DOUBLE(
r.result.value) > 1``, ``r`` the alias of a report), is BigQuery's field access on that column,
not a table's column: :func:`alias_field_access`. In ORDER BY it is refused, as BigQuery refuses
ordering by JSON (DuckDB would order the JSON's text): ``ORDER BY DOUBLE(r.result.value)``.

These run only on released values (the post-processing query): nothing here reads data.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.errors import UnsupportedQuery

_CASTS = {"DOUBLE": "DOUBLE", "FLOAT64": "DOUBLE", "INT64": "BIGINT", "BOOL": "BOOLEAN"}
_ARRAYS = {"JSON_QUERY_ARRAY", "JSON_EXTRACT_ARRAY"}


def lower_json_functions(tree: exp.Expr) -> exp.Expr:
    """``tree`` with BigQuery's JSON functions in DuckDB's SQL (module docstring), in place;
    and each SELECT's field access on its output aliases (:func:`alias_field_access`)."""
    for select in list(tree.find_all(exp.Select)):
        alias_field_access(select)
    return tree.transform(_lowered, copy=False)


def alias_field_access(select: exp.Select) -> None:
    """``a.f.g`` in ORDER BY, HAVING or QUALIFY, ``a`` an output alias of ``select`` and not a
    table of its FROM: the field access ``(a).f.g`` (in place)."""
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    tables = {t.alias_or_name.lower() for t in select.find_all(exp.Table)}
    for key in ("order", "having", "qualify"):
        part = select.args.get(key)
        for column in list(part.find_all(exp.Column)) if part is not None else []:
            names = [p.name for p in column.parts]
            if len(names) > 1 and names[0].lower() in aliases - tables:
                if isinstance(column.parent, exp.Ordered):  # DuckDB sorts JSON as text
                    raise UnsupportedQuery(
                        f"ORDER BY {'.'.join(names)} orders a JSON value, which BigQuery "
                        f"refuses too; order by its number: ORDER BY DOUBLE({'.'.join(names)})")
                # in parentheses, so that the SQL planned reads it as field access again
                column.replace(exp.Dot.build([exp.Paren(this=exp.column(names[0])),
                                              *(exp.to_identifier(n) for n in names[1:])]))


def _lowered(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.JSONExtractArray):  # how sqlglot may read JSON_QUERY_ARRAY
        return _array(node.this, node.expression)
    if not isinstance(node, exp.Anonymous):
        return node
    name, args = str(node.this).upper(), node.expressions
    if name in _CASTS and len(args) == 1:
        return exp.cast(args[0], exp.DataType.build(_CASTS[name]))
    if name in _ARRAYS and len(args) in (1, 2):
        return _array(args[0], args[1] if len(args) == 2 else None)
    if name == "JSON_QUERY" and len(args) == 2:
        return exp.Anonymous(this="json_extract", expressions=args)
    return node


def _array(value: exp.Expr, path: exp.Expr | None) -> exp.Expr:
    if path is not None and not isinstance(path, exp.JSONPath):
        value = exp.Anonymous(this="json_extract", expressions=[value, path])
    return exp.cast(exp.cast(value, exp.DataType.build("JSON")), exp.DataType.build("JSON[]"))
