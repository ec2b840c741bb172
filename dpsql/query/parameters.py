"""Parameters bound into a query as literals: a value can never become SQL.

The SQL is parsed with sqlglot and each placeholder node is replaced by a literal built from the
Python value (:func:`bind_tree`). The literals are then typed and evaluated with every other
constant when the query is planned (:mod:`dpsql.query.fold_constants`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.errors import SqlglotError

from dpsql.cache import LRU
from dpsql.errors import (
    NotSupportedError,
    ProgrammingError,
)
from dpsql.query.parse import parse_query

_DIALECT = "duckdb"
#: Parsed texts with placeholders, before any value is bound (:func:`_parsed`).
_TEMPLATES: LRU[str, tuple[exp.Select | exp.SetOperation, int]] = LRU(256)

Parameters = Sequence[Any] | Mapping[str, Any] | None




def frozen_parameters(parameters: Parameters) -> object:
    """A hashable image of the parameters that tells apart every two sets of values that bind
    to different texts: the type of each value, inside arrays too (1, 1.0 and True bind
    apart), and a number as it is written (``Decimal('1.00')`` is not ``Decimal('1.0')``,
    ``-0.0`` is not ``0.0``, though each pair is equal in Python), so that a memo keyed by
    it never answers one text for another."""
    if parameters is None:
        return None
    if not isinstance(parameters, list | tuple | Mapping):
        raise TypeError("only lists, tuples and mappings are memoised")  # e.g. an iterator
    if isinstance(parameters, Mapping):
        return tuple(sorted((k, _frozen(v)) for k, v in parameters.items()))
    return tuple(_frozen(v) for v in parameters)


def _frozen(value: Any) -> object:
    """One value of :func:`frozen_parameters`: its type and, for a number whose equal values
    are written apart (:func:`_literal`) or an array, what it binds as."""
    if isinstance(value, list | tuple):
        return type(value).__name__, tuple(_frozen(v) for v in value)
    if isinstance(value, float | decimal.Decimal):
        return type(value).__name__, repr(value)
    return type(value).__name__, value


def bind_parameters(sql: str, parameters: Parameters = None) -> str:
    """Bind ``parameters`` into ``sql`` and return the normalised SQL text (DuckDB dialect).

    The SQL is parsed with sqlglot and each placeholder node is replaced by a literal built from
    the Python value, so a value can never become SQL. Placeholders: ``?`` (qmark, bound in
    order from a sequence), ``$1`` (numeric, 1-based into a sequence; each index used at least
    once) and ``:name`` / ``$name`` (named, from a mapping). Values: None, bool, int, float
    (finite), Decimal, str, datetime.date, datetime.datetime, datetime.time, and a list or
    tuple of those (an array, for ``col = ANY(?)``); others are
    refused with :class:`~dpsql.errors.ProgrammingError`, as is a wrong number of parameters.

    Without placeholders and parameters this still normalises: the same query written with
    different spacing, keyword case or comments gives the same text. Parse errors and statements
    other than one SELECT are refused by :func:`dpsql.query.parse.parse`.
    """
    return bound_query(sql, parameters)[0]


def bound_query(sql: str, parameters: Parameters = None
                ) -> tuple[str, exp.Select | exp.SetOperation]:
    """What is planned: the normalised text (:func:`bind_parameters`; the key of the plan
    cache) and the bound tree it was written from, comments removed as from the text (pass
    it to :meth:`dpsql.routes.planner.Planner.prepare_query`, which then parses nothing)."""
    tree = bind_tree(sql, parameters)
    for node in tree.walk():
        node.comments = None
    return tree.sql(dialect=_DIALECT), tree


def lower_case_names(tree: exp.Expression) -> bool:
    """Whether every identifier in ``tree`` is in lower case already: then DuckDB's
    normalisation of identifiers (sqlglot's ``normalize_identifiers``, which lowers them)
    changes nothing, and the text :func:`bound_query` wrote is the normalised one too (the
    key of stored answers, :meth:`dpsql.database.Database.key_text`) without a copy of the
    tree and a second generation."""
    return all(node.this == node.this.lower() for node in tree.find_all(exp.Identifier)
               if isinstance(node.this, str))


def bind_tree(sql: str, parameters: Parameters = None) -> exp.Select | exp.SetOperation:
    """:func:`bind_parameters`, returning the bound sqlglot tree."""
    tree, qmarks = _parsed(sql)
    placeholders = list(tree.find_all(exp.Placeholder))
    if not placeholders:
        if parameters:
            raise ProgrammingError(f"the query has no placeholders but {len(parameters)} "
                                   "parameter(s) were given")
        return tree
    if parameters is None:
        raise ProgrammingError(f"the query has {max(qmarks, len(placeholders))} placeholder(s) "
                               "but no parameters were given")
    names = [str(p.this) for p in placeholders]
    numeric = [n for n in names if n.isdigit()]
    if numeric and len(numeric) != len(names):
        raise ProgrammingError("the query mixes positional (? or $1) and named (:name) "
                               "placeholders; use one style")
    if numeric:
        values = _positional(parameters, {int(n) for n in numeric}, qmarks)
    else:
        values = _named(parameters, set(names))
    for placeholder, name in zip(placeholders, names, strict=True):
        placeholder.replace(_literal(values[name], name))
    return tree


def _parsed(sql: str) -> tuple[exp.Select | exp.SetOperation, int]:
    """``sql`` parsed, its ``?`` numbered, and how many ``?`` it had. A text with placeholders
    is parsed once (:data:`_TEMPLATES`) and copied for each set of values: a dashboard's
    prepared query with a moving value is then a new text to plan, not to parse (issue 39).
    Parsing never reads a value (they are bound into the copy afterwards), so the copy is the
    tree a parse would give."""
    cached = _TEMPLATES.get(sql) if isinstance(sql, str) else None
    if cached is not None:
        return cached[0].copy(), cached[1]
    numbered, qmarks = _number_qmarks(sql)
    # a set operation: public tables only (routes); a syntax error's position is in ``sql``
    tree = parse_query(numbered, _DIALECT, None if numbered is sql else
                       (sql, lambda position: _written_position(sql, position)))
    if tree.find(exp.Placeholder) is not None:  # the cached tree is never bound itself
        _TEMPLATES.put(sql, (tree.copy(), qmarks))
    return tree, qmarks


def _number_qmarks(sql: str) -> tuple[str, int]:
    """Turn each ``?`` placeholder token into ``$k`` so the parsed tree keeps their order."""
    if not isinstance(sql, str) or "?" not in sql:
        return sql, 0
    try:
        tokens = sqlglot.Dialect.get_or_raise(_DIALECT).tokenize(sql)
    except SqlglotError:
        return sql, 0  # parse() reports the syntax error
    qmarks = [t for t in tokens if t.token_type == TokenType.PLACEHOLDER and t.text == "?"]
    if qmarks and any(t.token_type == TokenType.PARAMETER for t in tokens):
        raise ProgrammingError("the query mixes ? and $ placeholders; use one style")
    out = sql
    for k, token in reversed(list(enumerate(qmarks, start=1))):
        out = f"{out[:token.start]} ${k} {out[token.end + 1:]}"
    return out, len(qmarks)


def _written_position(sql: str, position: int) -> int:
    """The 1-based ``position`` in :func:`_number_qmarks`'s text of ``sql``, in ``sql``: each
    ``?`` before it was written wider (`` $k ``); one inside such a ``$k`` is that ``?``."""
    tokens = sqlglot.Dialect.get_or_raise(_DIALECT).tokenize(sql)  # tokenized before: no error
    qmarks = [t for t in tokens if t.token_type == TokenType.PLACEHOLDER and t.text == "?"]
    shift = 0
    for k, token in enumerate(qmarks, start=1):
        start, width = token.start + 1 + shift, len(f" ${k} ")  # where its " $k " starts
        if position < start:
            break
        if position < start + width:
            return token.start + 1
        shift += width - 1
    return position - shift


def _positional(parameters: Parameters, indices: set[int], qmarks: int) -> dict[str, Any]:
    if isinstance(parameters, Mapping | str | bytes) or not isinstance(parameters, Sequence):
        raise ProgrammingError("positional placeholders (? or $1) need a sequence of "
                               f"parameters, such as a tuple, not {type(parameters).__name__}")
    wanted = qmarks if qmarks else max(indices)
    if len(parameters) != wanted or (not qmarks and indices != set(range(1, wanted + 1))):
        raise ProgrammingError(f"the query has {wanted} placeholder(s) but "
                               f"{len(parameters)} parameter(s) were given")
    return {str(i): parameters[i - 1] for i in indices}


def _named(parameters: Parameters, names: set[str]) -> dict[str, Any]:
    if not isinstance(parameters, Mapping):
        raise ProgrammingError("named placeholders (:name) need a mapping of parameters, such "
                               f"as a dict, not {type(parameters).__name__}")
    missing = sorted(names - set(parameters))
    if missing:
        raise ProgrammingError(f"no value given for the named parameter(s) {', '.join(missing)}")
    return {name: parameters[name] for name in names}


def _literal(value: Any, name: str) -> exp.Expression:
    where = f"parameter {'$' + name if name.isdigit() else ':' + name}"
    if value is None:
        return exp.Null()
    if isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", "") == "b":
        return exp.Boolean(this=bool(value))
    if isinstance(value, bytes | bytearray | memoryview):
        raise NotSupportedError(f"{where}: binary values are not supported (dpsql columns are "
                                "int, float, text, bool or date)")
    if isinstance(value, decimal.Decimal | numbers.Real):
        if isinstance(value, numbers.Integral):
            text = str(int(value))
        elif isinstance(value, decimal.Decimal):
            if not value.is_finite():
                raise ProgrammingError(f"{where}: {value!r} is not a finite number")
            text = str(value)
        else:
            number = float(value)
            if not math.isfinite(number):
                raise ProgrammingError(f"{where}: {value!r} is not a finite number")
            text = repr(number)
        if text.startswith("-"):
            return exp.Paren(this=exp.Neg(this=exp.Literal.number(text[1:])))
        return exp.Literal.number(text)
    if isinstance(value, str):
        if "\x00" in value:
            raise ProgrammingError(f"{where}: text must not contain NUL characters")
        return exp.Literal.string(value)
    if isinstance(value, dt.datetime):
        kind = "TIMESTAMP" if value.tzinfo is None else "TIMESTAMPTZ"
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), kind)
    if isinstance(value, dt.date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    if isinstance(value, dt.time):
        return exp.cast(exp.Literal.string(value.isoformat()), "TIME")
    if isinstance(value, list | tuple):  # for col = ANY(?): an array, read as an IN list
        return exp.Array(expressions=[_literal(v, name) for v in value])
    raise ProgrammingError(f"{where}: cannot bind a value of type {type(value).__name__}; use "
                           "None, bool, int, float, Decimal, str, date, datetime or time")




def parse_array_literal(text: str) -> list[Any]:
    """The elements of a PostgreSQL array literal such as ``{r,p}`` or ``{"a,b",NULL,"x\\"y"}``.

    PostgreSQL's input rules: elements are separated by commas, surrounding whitespace is
    dropped, double quotes protect commas, braces, spaces and the word NULL, a backslash escapes
    the next character, and an unquoted NULL (any case) is SQL NULL (None). Nested braces give
    nested lists. Elements stay text: their type is the type of what they are compared with.
    Anything else raises :class:`ValueError` (so a malformed value is refused, never guessed).
    """
    items, end = _array_items(text.strip(), 0)
    if end != len(text.strip()):
        raise ValueError(f"junk after the closing brace of the array literal {text!r}")
    return items


def _array_items(text: str, i: int) -> tuple[list[Any], int]:
    if i >= len(text) or text[i] != "{":
        raise ValueError(f"an array literal starts with '{{': {text!r}")
    items: list[Any] = []
    i = _skip_space(text, i + 1)
    if i < len(text) and text[i] == "}":
        return items, i + 1
    while True:
        item, i = _array_item(text, _skip_space(text, i))
        items.append(item)
        i = _skip_space(text, i)
        if i >= len(text):
            raise ValueError(f"unterminated array literal {text!r}")
        if text[i] == "}":
            return items, i + 1
        if text[i] != ",":
            raise ValueError(f"expected ',' or '}}' at position {i} of {text!r}")
        i += 1


def _array_item(text: str, i: int) -> tuple[Any, int]:
    if i < len(text) and text[i] == "{":
        return _array_items(text, i)
    quoted = i < len(text) and text[i] == '"'
    out: list[str] = []
    i += quoted
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        if quoted and c == '"':
            return "".join(out), i + 1
        if not quoted and c in ",}":
            break
        if not quoted and c in '{"':
            raise ValueError(f"unexpected {c!r} at position {i} of {text!r}; quote the element")
        out.append(c)
        i += 1
    if quoted:
        raise ValueError(f"unterminated quoted element in {text!r}")
    word = "".join(out).strip()
    if not word:
        raise ValueError(f"empty element in the array literal {text!r}")
    return (None if word.upper() == "NULL" else word), i


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i
