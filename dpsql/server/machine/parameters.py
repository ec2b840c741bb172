"""A Bind's parameters: decoded by their types and formats, and bound as literals into a
catalog query (the private pipeline binds its own, in :mod:`dpsql.query.parameters`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import sqlglot
from sqlglot import exp

from dpsql.server.machine.classify import Statement, clean
from dpsql.server.machine.outcome import PgError, Prepared
from dpsql.server.wire import sqltext
from dpsql.server.wire import types as t


def catalog_tree(statement: Statement, params: Sequence[object], param_types: Sequence[int]
                  ) -> tuple[exp.Expression, str]:
    """The catalog query's tree with its parameters bound as literals, and its cache key."""
    assert statement.tree is not None
    if not params:
        return statement.tree, statement.text

    def literal(n: int) -> str:
        if n > len(params):
            raise PgError("42P02", f"there is no parameter ${n}")
        oid = param_types[n - 1] if n - 1 < len(param_types) else 0
        return t.typed_literal(params[n - 1], oid)

    text = sqltext.substitute(statement.text, literal)
    # cast: as in classify, every node sqlglot returns is an exp.Expression
    return cast(exp.Expression, sqlglot.parse_one(clean(text), read="postgres")), text


def bound_parameter(prepared: Prepared, i: int, raw: bytes | None, formats: Sequence[int]
                    ) -> object:
    """Bind's parameter ``i``, decoded by its type and format."""
    fmt = formats[0] if len(formats) == 1 else (formats[i] if formats else 0)
    oid = prepared.param_types[i] if i < len(prepared.param_types) else 0
    if raw is None:
        return None
    try:
        value = t.decode_parameter(raw, oid, fmt)
        if prepared.inferred.get(i + 1) == t.DATE:
            value = t.as_date(value, f"${i + 1}")
        return value
    except t.ParameterError as e:
        raise PgError("22P02", str(e)) from None


def parameter_oid(prepared: Prepared, i: int) -> int:
    """The type OID a parameter is described with: its declared type, else text."""
    oid = prepared.param_types[i] if i < len(prepared.param_types) else 0
    return oid if oid not in (0, t.UNKNOWN) else t.TEXT
