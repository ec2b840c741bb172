"""Pass 4, fold_constants: every constant is typed, converted and evaluated when the query is
planned.

DuckDB converts and evaluates constants lazily: a text literal compared with an INTEGER column is
cast when a row reaches the comparison, ``2147483647 + 1`` overflows INT32 only on the rows whose
CASE branch reaches it. Under a branch that only one person's row takes, such an error would
reveal that person's data exactly, whatever the noise. This pass removes the class:

1. Every maximal constant sub-expression of the private part (WHERE, GROUP BY keys, aggregated
   expressions; parameters are literals by now) is evaluated once, here, in a scratch DuckDB
   that holds no data, exactly as the engine query would evaluate it (made total by
   :func:`dpsql.query.total_expressions.total`, integer literals as BIGINT), and replaced by a typed
   literal of its value. An error is an :class:`~dpsql.errors.InvalidConstant` refusal, before any
   charge.
2. A text literal compared with a number, a date or a boolean (``=``, ``<``, ``IN``,
   ``BETWEEN``, ``CASE x WHEN``, ``NULLIF``) is converted to that type here, by DuckDB's own
   cast, so the engine never converts text row by row. Numbers are read as DOUBLE, so a quoted
   number that does not fit the column's storage type compares as a number instead of failing.

What is left for the engine to evaluate per row depends on a column, and
:func:`dpsql.query.total_expressions.total` makes each such operation total (TRY_CAST, NULL on
division by zero, BIGINT arithmetic inside the bounds of :mod:`dpsql.query.bounds`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from dataclasses import replace
from typing import cast

import duckdb
from sqlglot import exp

from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.engines.physical import INTEGER_TYPES
from dpsql.errors import InvalidConstant
from dpsql.metadata.metadata import Table
from dpsql.query.bounds import COMPARISONS, RULES, bound
from dpsql.query.check import CheckedQuery
from dpsql.query.dates import date_text, timestamp_text, written
from dpsql.query.dry_shapes import POSITION
from dpsql.query.local_evaluator import scratch
from dpsql.query.total_expressions import DATE_RANGE, total

_INT64 = 2**63
#: Exact integers in a double: a quoted number beyond this is compared as a DOUBLE.
_EXACT_DOUBLE = 2**53
_TEMPORAL_TYPES = {"DATE": "DATE", "TIMESTAMP": "TIMESTAMP"}
#: What a text literal compared with a value of each kind is converted to.
_CONVERSIONS = {"int": ("DOUBLE",), "float": ("DOUBLE",), "bool": ("BOOLEAN",),
                "date": ("DATE", "TIMESTAMP"), "timestamp": ("TIMESTAMP",)}
_KIND_NAMES = {"int": "a number", "float": "a number", "bool": "a boolean (TRUE or FALSE)",
               "date": "a date (DATE 'YYYY-MM-DD')",
               "timestamp": "a timestamp (TIMESTAMP 'YYYY-MM-DD HH:MM:SS')"}


def fold_constants(query: CheckedQuery) -> CheckedQuery:
    """The checked query with every constant of its private part evaluated and typed."""
    table = query.table
    return replace(
        query,
        where=fold(query.where, table) if query.where is not None else None,
        keys=[fold(k, table) for k in query.keys],
        aggregates=[replace(a, arg=fold(a.arg, table)) if a.arg is not None else a
                    for a in query.aggregates],
        relation=query.relation.map_conditions(lambda c: fold(c, table))
        if query.relation is not None else None)


def fold(node: exp.Expression, table: Table) -> exp.Expression:
    """One row-level expression with its constants evaluated and typed (see the module)."""
    folded = node.copy().transform(_typed_literal, copy=False)
    folded = folded.transform(lambda n: _evaluated(n, table), copy=False)
    for comparison in list(folded.find_all(*_COMPARED)):
        _convert_compared(cast(exp.Expression, comparison), table)
    return folded


# ------------------------------------------------------------------------ evaluation


def is_literal(node: exp.Expression) -> bool:
    """A literal value: a number (maybe negated), text, a boolean, NULL, or a typed literal
    such as DATE '2025-01-01' (a cast of a text literal)."""
    if isinstance(node, exp.Literal | exp.Boolean | exp.Null):
        return True
    if isinstance(node, exp.Neg):
        return isinstance(node.this, exp.Literal) and not node.this.is_string
    return isinstance(node, exp.Paren) and is_literal(node.this)


def _evaluated(node: exp.Expression, table: Table) -> exp.Expression:
    if isinstance(node, exp.Literal) and not node.is_string:
        return _number(node)
    if not _foldable(node) or node.find(exp.Column) is not None:
        return node
    if isinstance(node, exp.StrToDate | exp.StrToTime):
        return _strict_strptime(node)
    return _value_literal(node, *_evaluate(node, table))


def _strict_strptime(node: exp.Expression) -> exp.Expression:
    """TO_DATE('2025-03-01', 'YYYY-MM-DD') evaluated strictly (the engine would read a row's
    text with TRY_STRPTIME): a text that does not match, or a date beyond the years 1 to 9999,
    is refused here, naming what the analyst wrote."""
    value, sql_type, text = _run(exp.select(exp.alias_(node.copy(), "v"), exp.alias_(
        exp.cast(node.copy(), "VARCHAR"), "t")).sql(dialect="duckdb"), node)
    day = value.date() if isinstance(value, dt.datetime) else value
    if not isinstance(day, dt.date) or not DATE_RANGE[0] <= day <= DATE_RANGE[1]:
        raise InvalidConstant(f"{written(node)} is not a date between the years 1 and 9999; "
                              "fix the text or its format")
    return _value_literal(node, value, sql_type, text)


def _typed_literal(node: exp.Expression) -> exp.Expression:
    """A text literal cast to a type (DATE '2025-01-01', '5'::INTEGER) converted strictly: text
    that does not convert is refused, where a cast of a row's value would give NULL."""
    if type(node) is not exp.Cast or not (isinstance(node.this, exp.Literal) and
                                         node.this.is_string):
        return node
    sql = exp.select(exp.alias_(node.copy(), "v"), exp.alias_(
        exp.cast(node.copy(), "VARCHAR"), "t")).sql(dialect="duckdb")
    # Quoted as a typed literal (TIMESTAMP '2025-13-01'), not as sqlglot's CAST of it.
    node.meta.setdefault("written", f"{node.to.sql(dialect='duckdb')} '{node.this.name}'")
    return _placed(_value_literal(node, *_run(sql, node)), node.this)


def _placed(value: exp.Expression, written_: exp.Expression) -> exp.Expression:
    """``value``, a text literal converted, with the written literal's position on its own
    literal: where the parser read it stays known after folding (plan reuse follows a
    constant by it, :mod:`dpsql.routes.templates`)."""
    meta = getattr(written_, "_meta", None)
    literals = list(value.find_all(exp.Literal))
    if meta and len(literals) == 1:
        literals[0].meta.update({k: meta[k] for k in POSITION if k in meta})
    return value


def _number(literal: exp.Literal) -> exp.Expression:
    """A number literal as the engine will type it: an integer beyond 64 bits is a DOUBLE (the
    engine would convert it lazily, and fail on the rows that reach it when it does not fit),
    and a number that is infinite as a DOUBLE is refused."""
    value = float(literal.this)
    if not math.isfinite(value):
        raise InvalidConstant(f"{literal.this[:30]}... is too large for a number (beyond "
                              "1.8e308); write a smaller number")
    if literal.is_int and int(literal.this) >= _INT64:
        return exp.Literal.number(repr(value))
    return literal


def _foldable(node: exp.Expression) -> bool:
    """An expression whose value stands on its own: on the allow list, not a literal already,
    and not a WHEN clause (which is part of its CASE)."""
    if type(node) not in RULES or node.arg_key == "ifs":
        return False
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        return True  # a typed literal: converted here too, so DATE '2025-13-01' is refused
    return not is_literal(node)


def _evaluate(node: exp.Expression, table: Table) -> tuple[object, str, str | None]:
    """The value, DuckDB type and text form of a constant expression, made total as in the
    engine query, its decimal literals read as SQL reads them: ``0.1 + 0.2 = 0.3`` is TRUE in
    DuckDB and PostgreSQL (DECIMAL arithmetic), not the DOUBLEs that a row's arithmetic uses
    (:func:`dpsql.query.total_expressions.total`). Where the decimals overflow, the DOUBLE
    value stands (the engine query would compute it so)."""
    value = exp.Paren(this=total(node, table))
    decimal = value.copy()
    if not _decimal_literals(decimal):
        return _run(_value_sql(value), node)
    try:
        return _run(_value_sql(decimal), node)
    except InvalidConstant:
        return _run(_value_sql(value), node)


def _value_sql(value: exp.Expression) -> str:
    return exp.select(exp.alias_(value, "v"), exp.alias_(exp.cast(value.copy(), "VARCHAR"),
                                                         "t")).sql(dialect=DuckDBDialect)


def _decimal_literals(value: exp.Expression) -> int:
    """Respell, in place, each decimal literal of ``value`` as written (``0.1``, a DECIMAL to
    DuckDB), not the ``CAST(0.1 AS DOUBLE)`` that total() gives it (an analyst's own cast is a
    SafeCast and stays); how many were respelled."""
    respelled = 0
    for cast_ in list(value.find_all(exp.Cast)):
        literal = cast_.this
        if type(cast_) is exp.Cast and cast_.to.is_type(exp.DataType.Type.DOUBLE) and \
                isinstance(literal, exp.Literal) and literal.is_number and not literal.is_int:
            cast_.replace(literal)
            respelled += 1
    return respelled


def _run(sql: str, node: exp.Expression) -> tuple[object, str, str | None]:
    try:
        result = scratch().execute(sql)
        # fetchall, not fetchone: DuckDB 2 keeps a half-read result open on the thread's
        # scratch cursor, and the next register() on it (a public domain, post-processing)
        # then fails.
        rows = result.fetchall()
    except duckdb.Error as e:
        raise InvalidConstant(
            f"{written(node)} cannot be evaluated: {_first_line(e)}; fix the "
            "constant (dpsql evaluates constants when the query is planned)") from None
    assert len(rows) == 1 and result.description is not None
    return rows[0][0], str(result.description[0][1]).upper(), rows[0][1]


def _value_literal(node: exp.Expression, value: object, sql_type: str,
                   text: str | None) -> exp.Expression:
    """A literal that the engine and :mod:`dpsql.query.bounds` read as ``value`` of ``sql_type``."""
    base = sql_type.split("(")[0]
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if base in INTEGER_TYPES or base == "DECIMAL" or isinstance(value, float):
        return number_literal(value)  # type: ignore[arg-type]
    if isinstance(value, str):
        return exp.Literal.string(value)
    temporal = _TEMPORAL_TYPES.get(base)
    if temporal is not None and text is not None:
        return exp.cast(exp.Literal.string(text), temporal)
    raise InvalidConstant(
        f"{written(node)} is a constant of type {sql_type}, which dpsql cannot "
        "use in a query; use a number, text, a boolean or a date")


def number_literal(value: int | float | decimal.Decimal) -> exp.Expression:
    """A number as a literal: integers within 64 bits exactly, anything else as a DOUBLE
    (``CAST('nan' AS DOUBLE)`` for NaN and the infinities)."""
    if isinstance(value, decimal.Decimal):
        value = int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, int) and -_INT64 <= value < _INT64:
        return _signed(exp.Literal.number(abs(value)), value < 0)
    number = float(value)
    if not math.isfinite(number):
        return exp.cast(exp.Literal.string(repr(number)), "DOUBLE")
    return _signed(exp.Literal.number(repr(abs(number))), math.copysign(1.0, number) < 0)


def _signed(literal: exp.Expression, negative: bool) -> exp.Expression:
    # In parentheses, so that it reads as one value wherever it is put: x - (-5), not x - -5.
    return exp.Paren(this=exp.Neg(this=literal)) if negative else literal


# ------------------------------------------------------------------------ comparisons


_COMPARED = (*COMPARISONS, exp.Case, exp.Nullif)


def _convert_compared(node: exp.Expression, table: Table) -> None:
    """Convert the text literals among a comparison's operands to the other operands' type."""
    for group in _operand_groups(node):
        literals = [o for o in group if isinstance(o, exp.Literal) and o.is_string]
        kinds = {bound(o, table).kind for o in group if o not in literals} - {"null", "text"}
        if not literals or len(kinds) != 1:
            continue  # text with text, or nothing typed to convert to (mixed types: bounds)
        kind = kinds.pop()
        for literal, converted in zip(literals, _converted([lit.this for lit in literals], kind),
                                      strict=True):
            literal.replace(_placed(converted, literal))


def _operand_groups(node: exp.Expression) -> list[list[exp.Expression]]:
    """The operands that the engine compares with each other, group by group."""
    if isinstance(node, exp.Case):
        subject = node.this
        if subject is None:
            return []
        return [[subject, branch.this] for branch in node.args.get("ifs") or []]
    if isinstance(node, exp.Nullif):
        return [[node.this, node.expression]]
    return [[c for c in node.iter_expressions() if not isinstance(c, exp.DataType)]]


def _converted(texts: list[str], kind: str) -> list[exp.Expression]:
    """``texts`` converted by DuckDB's casts to the type that ``kind`` is compared as (all of
    one comparison in one query: an IN list can hold thousands)."""
    out: list[exp.Expression | None] = [None] * len(texts)
    if kind == "date":  # '2025-06-01 00:00:00+00' is the date, a time of day is refused
        texts = [date_text(t) for t in texts]
    elif kind == "timestamp":  # '2025-06-01 02:00:00+02' is the UTC instant it denotes
        texts = [timestamp_text(t) for t in texts]
    for i, text in enumerate(texts):
        out[i] = _iso_converted(text, kind)
    for target in _CONVERSIONS.get(kind, ()):
        todo = [i for i, o in enumerate(out) if o is None]
        if not todo:
            break
        rows = scratch().execute(
            f"SELECT TRY_CAST(x AS {target}), CAST(TRY_CAST(x AS {target}) AS VARCHAR) FROM "
            "(SELECT unnest($1::VARCHAR[]) AS x, unnest(range(len($1::VARCHAR[]))) AS i) "
            "ORDER BY i", [[texts[i] for i in todo]]).fetchall()
        for i, (value, form) in zip(todo, rows, strict=True):
            if value is None:
                continue
            out[i] = _number_from_text(value, texts[i]) if target == "DOUBLE" else \
                _value_literal(exp.Literal.string(texts[i]), value, target, form)
    for text, converted in zip(texts, out, strict=True):
        if converted is None:
            what = _KIND_NAMES.get(kind, kind)
            raise InvalidConstant(f"'{text}' is not {what}, but it is compared with one; "
                                  f"write {what} instead")
    return [c for c in out if c is not None]


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_ISO_SECONDS = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


def _iso_converted(text: str, kind: str) -> exp.Expression | None:
    """A plain ISO date ('2025-03-01', for a date or a timestamp) or timestamp to the second
    ('2025-03-01 10:00:00', for a timestamp) converted without the scratch engine (a
    dashboard's time range sends two a query): where Python reads it, DuckDB's cast gives the
    same value and text (tests/query/test_fold_constants.py compares them); anything else,
    None (DuckDB's cast decides: year 0, hour 24)."""
    try:
        if kind == "date" and _ISO_DATE.fullmatch(text):
            day = dt.date.fromisoformat(text)
            return _value_literal(exp.Literal.string(text), day, "DATE", day.isoformat())
        if kind == "timestamp" and (_ISO_DATE.fullmatch(text) or _ISO_SECONDS.fullmatch(text)):
            instant = dt.datetime.fromisoformat(text)
            return _value_literal(exp.Literal.string(text), instant, "TIMESTAMP",
                                  instant.isoformat(sep=" "))
    except ValueError:
        return None
    return None


def _number_from_text(value: float, text: str) -> exp.Expression:
    """A quoted number as a number literal: an exact integer when it is one."""
    if math.isfinite(value) and value.is_integer() and abs(value) < _EXACT_DOUBLE:
        return number_literal(int(value))
    try:
        exact = int(text.strip())
    except ValueError:
        return number_literal(value)
    return number_literal(exact if abs(exact) < _EXACT_DOUBLE else value)


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


__all__ = ["fold", "fold_constants", "is_literal", "number_literal"]
