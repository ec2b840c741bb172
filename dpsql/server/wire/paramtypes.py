"""The types of a statement's ``$n`` parameters, for ParameterDescription and Bind decoding.

PostgreSQL infers an unspecified parameter's type from its context; drivers that bind typed
values (asyncpg, pgx) refuse an int, a float, a bool or a date for a parameter described as
text. dpsql infers, in this order: the type the client gave in Parse; an explicit cast
(``$1::INTEGER``, ``CAST($1 AS DATE)``); the declared type of a column the parameter is
compared with (``age > $1``, ``day BETWEEN $1 AND $2``, ``sex IN ($1, $2)``), also through
arithmetic (``amount > $1 * 2``, ``$1 + amount > 0``: the number type of the column, double
after a division; ``ts > $1 - INTERVAL '1 day'``: the column's timestamp type); else text.

Privacy: the inference reads the statement text and the declared column types only -- public
metadata that the catalog shows anyway -- never data, and the library checks the bound query
as it checks every other one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dpsql.server.wire import sqltext
from dpsql.server.wire import types as t

# sqlglot's DataType names -> PostgreSQL type OIDs (only the types a parameter can hold).
_CAST = {"INT": t.INT4, "BIGINT": t.INT8, "SMALLINT": t.INT2, "TINYINT": t.INT2,
         "FLOAT": t.FLOAT4, "DOUBLE": t.FLOAT8, "DECIMAL": t.NUMERIC, "BOOLEAN": t.BOOL,
         "DATE": t.DATE, "TIMESTAMP": t.TIMESTAMP, "TIMESTAMPTZ": t.TIMESTAMPTZ,
         "TEXT": t.TEXT, "VARCHAR": t.VARCHAR, "CHAR": t.BPCHAR, "UUID": t.UUID,
         "VARBINARY": t.BYTEA}
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
                exp.NullSafeNEQ)
UNSPECIFIED = (0, t.UNKNOWN)

ColumnTypes = Mapping[str, Mapping[str, str]]  # table -> column -> declared type ("int", ...)


def combine(given: Sequence[int], nparams: int, inferred: Mapping[int, int]) -> list[int]:
    """One OID per parameter: ``given`` where specified, else ``inferred``, else text."""
    count = max(nparams, len(given))
    oids = [given[i] if i < len(given) else 0 for i in range(count)]
    return [inferred.get(i + 1, t.TEXT) if o in UNSPECIFIED else o for i, o in enumerate(oids)]


def infer(text: str, tables: ColumnTypes) -> dict[int, int]:
    """The OIDs the text implies for its parameters (by number); the others are absent."""
    # Spaces around each $n: sqlglot reads "$5,$6" as a dollar-quoted string.
    spaced = sqltext.substitute(text, lambda n: f" ${n} ")
    try:
        tree = sqlglot.parse_one(spaced, read="postgres")
    except (SqlglotError, ValueError, RecursionError):
        return {}
    if not isinstance(tree, exp.Expression):
        return {}
    found: dict[int, int] = {}
    params = [(_number(node), node) for node in tree.find_all(exp.Parameter)]
    for n, node in params:  # explicit casts first: they win over comparisons
        parent = node.parent
        if n and isinstance(parent, exp.Cast) and parent.this is node:
            # A user-defined type name (regclass, say) is a str here, not a DType.
            oid = _CAST.get(getattr(parent.to.this, "name", ""))
            if oid is not None:
                found.setdefault(n, oid)
    resolve = _Resolver(tree, tables)
    for n, node in params:
        if n and n not in found:
            oid = _compared_column(node, resolve)
            if oid is not None:
                found[n] = oid
    return found


def _number(node: exp.Parameter) -> int:
    value = node.this
    name = value.name if isinstance(value, exp.Expression) else str(value)
    return int(name) if name.isdigit() else 0


_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)
_NUMBERS = {t.INT2, t.INT4, t.INT8, t.FLOAT4, t.FLOAT8, t.NUMERIC}


def _compared_column(node: exp.Expression, resolve: _Resolver) -> int | None:
    """The declared type of the column ``node`` is compared with, if any: directly, or as an
    operand of arithmetic whose other operands are constants (the column's number type; a
    double after a division) or a column (its number type), or of a shift by an INTERVAL."""
    divided, shifted, climbed = False, False, False
    while isinstance(node.parent, (*_ARITHMETIC, exp.Paren, exp.Neg)):
        parent = node.parent
        if isinstance(parent, _ARITHMETIC):
            sibling = parent.expression if parent.this is node else parent.this
            if isinstance(sibling, exp.Interval):
                shifted = True
            elif isinstance(sibling, exp.Column):
                return _arithmetic_type(resolve(sibling), divided or isinstance(parent, exp.Div))
            elif not _constant(sibling):
                return None
            divided = divided or isinstance(parent, exp.Div)
        node, climbed = parent, True
    oid = _direct_comparison(node, resolve)
    if oid is None or not climbed:
        return oid
    if shifted:
        return oid if oid in (t.TIMESTAMP, t.DATE) and not divided else None
    return _arithmetic_type(oid, divided)


def _arithmetic_type(oid: int | None, divided: bool) -> int | None:
    """A parameter in arithmetic with a number of type ``oid``: that type (double if a
    division is involved); nothing for any other type."""
    if oid not in _NUMBERS:
        return None
    return t.FLOAT8 if divided else oid


def _constant(node: exp.Expression) -> bool:
    return all(isinstance(n, (exp.Literal, exp.Paren, exp.Neg, *_ARITHMETIC))
               for n in node.walk())


def _direct_comparison(node: exp.Expression, resolve: _Resolver) -> int | None:
    """The declared type of the column ``node`` is compared with, if any."""
    parent = node.parent
    other: exp.Expression | None = None
    if isinstance(parent, _COMPARISONS):
        other = parent.expression if parent.this is node else parent.this
    elif isinstance(parent, exp.Between | exp.In) and parent.this is not node:
        other = parent.this
    if isinstance(other, exp.Column):
        return resolve(other)
    return None


class _Resolver:
    """Declared type of a column reference, through the tables the statement names."""

    def __init__(self, tree: exp.Expression, tables: ColumnTypes) -> None:
        self.tables = tables
        self.aliases: dict[str, str] = {}
        for table in tree.find_all(exp.Table):
            name = table.name.lower()
            if name in tables:
                self.aliases[(table.alias or name).lower()] = name

    def __call__(self, column: exp.Column) -> int | None:
        name = column.name.lower()
        if column.table:
            candidates = [self.aliases.get(column.table.lower(), "")]
        else:
            candidates = sorted(set(self.aliases.values()))
        types = {self.tables[c][name] for c in candidates
                 if c in self.tables and name in self.tables[c]}
        if len(types) != 1:  # unknown, or ambiguous between tables: leave it to text
            return None
        return t.DECLARED.get(types.pop())
