"""Public domains of GROUP BY keys: which keys are released without thresholding.

A key has a public domain when it is a column with declared values (or a public range), a CASE
whose results are all constants, or a row-level expression of such columns only (GROUP BY
age // 10), whose image is computed by evaluating the expression, made total exactly as in the
engine query (:func:`dpsql.total.total`), on the cross product of the declared domains in the
scratch engine. Nothing here reads data. Keys are canonical and de-duplicated (:mod:`dpsql.keys`).
"""

from __future__ import annotations

import itertools

import numpy as np
from sqlglot import exp

from dpsql.engines import run_on_cells
from dpsql.keys import distinct
from dpsql.metadata import MAX_DOMAIN_SIZE, Table
from dpsql.total import total


def key_domain(expression: exp.Expression, table: Table) -> tuple[object, ...] | None:
    """The public domain of a GROUP BY key: a column's declared domain, or a CASE whose results
    are all constants (its branches)."""
    if isinstance(expression, exp.Paren):
        return key_domain(expression.this, table)
    if isinstance(expression, exp.Column):
        column = table.column(expression.name)
        return column.domain if column is not None else None
    if isinstance(expression, exp.Case | exp.If):
        branches = _constant_branches(expression)
        if branches is not None:
            return branches
    return _image_of_domains(expression, table)


def _image_of_domains(expression: exp.Expression, table: Table) -> tuple[object, ...] | None:
    """The image of the declared domains under a row-level expression (GROUP BY age // 10):
    the expression, made total as in the engine query, is evaluated on the cross product of
    its columns' public domains, in the scratch engine. It reads no data."""
    names = sorted({c.name.lower() for c in expression.find_all(exp.Column)})
    columns = [c for c in (table.column(n) for n in names) if c is not None]
    if not names or len(columns) != len(names) or any(c.domain is None for c in columns):
        return None
    combos = 1
    for c in columns:
        combos *= len(c.domain or ())
    if combos > MAX_DOMAIN_SIZE:
        return None
    product = list(itertools.product(*(c.domain or () for c in columns)))
    data = {n: np.array([row[i] for row in product], dtype=object) for i, n in enumerate(names)}
    sql = (f"SELECT DISTINCT {total(expression, table).sql(dialect='duckdb')} AS k "
           "FROM __domain ORDER BY k NULLS LAST")
    _, _, rows = run_on_cells(sql, "__domain", data)
    return tuple(v for (v,) in distinct((r[0],) for r in rows))


def _constant_branches(expression: exp.Expression) -> tuple[object, ...] | None:
    if isinstance(expression, exp.If):
        results = [expression.args.get("true"), expression.args.get("false")]
    else:
        results = [b.args.get("true") for b in expression.args.get("ifs") or []]
        results.append(expression.args.get("default"))
    values: list[object] = []
    for result in results:
        value = _constant(result)
        if value is _NOT_CONSTANT:
            return None
        values.append(value)
    return tuple(v for (v,) in distinct((v,) for v in values))


_NOT_CONSTANT = object()


def _constant(node: exp.Expression | None) -> object:
    if node is None or isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Paren):
        return _constant(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        return int(node.this) if node.is_int else float(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        value = _constant(node.this)
        return -value  # type: ignore[operator]
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    return _NOT_CONSTANT
