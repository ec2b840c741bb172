"""Dry runs only where a new constant could change their outcome (issue 39: a new text's cost).

A dashboard's moving filter value (``WHERE income > 1007``, then ``> 1014``) makes every refresh
a new text, and every new text's engine query was dry-run on empty tables
(:func:`dpsql.routes.pipeline.check_engine_query`) although it differs from one already checked in
one number only. A dry run refuses what the engine would refuse whatever the data: a type it will
not accept, a constant it cannot cast. So its outcome depends on the query's shape and on the
*types* DuckDB gives its constants, and on a constant's *value* only where the engine computes
with it (``2147483647 + 1`` overflows, ``'18x'`` does not cast to an integer).

:func:`dry_shape` keys the engine query's text with every constant whose value cannot change
the dry run's outcome replaced by its DuckDB type (a digest of the tree, not that text written
out: see the function): a plain unsigned number (digits, or digits, a
point and digits) that is directly one side of a comparison (``=``, ``<>``, ``<``, ``<=``,
``>``, ``>=``), a ``BETWEEN`` bound or an ``IN`` item (as it is, or cast to DOUBLE, which
any plain number casts to), against an operand that is not a
constant. DuckDB binds such a comparison by casting to a common type, chosen from the two
types alone, and a number of a given width fits that type whatever its digits; it computes
nothing with the value before the rows are read. The type written in its place keeps the
width: the smallest integer type, signed or unsigned, that holds it (TINYINT ... BIGINT;
wider numbers are kept as they are), or ``DECIMAL(width, scale)`` as DuckDB types a decimal
literal. A text under ``TRY_CAST`` to DATE or TIMESTAMP (the rewrite's reading of a date
constant, :func:`dpsql.query.total_expressions.total`) is opaque too: a TRY_CAST never
fails and its type is the target's whatever the text. Everything else --
strings (a date, an integer written as text), negative numbers, exponents, constants under
arithmetic or a function, a ``LIMIT`` -- stays in the text as written, so a query that differs
there is dry-run again. Two queries with the same shape (and the same empty tables and salt)
have the same dry-run outcome, so a shape that passed once need not run again; a shape that
failed is never stored (the refusal is raised again, from a fresh dry run).

This decides only whether a dry run is repeated: the query run on the data is always the one
generated for this text, and the plan (its bounds, noise, cost) is made for this text.
"""

from __future__ import annotations

import hashlib
import re

from sqlglot import exp

from dpsql.cache import LRU

#: Shapes whose dry run passed, per (shape, salted, empty tables).
PASSED: LRU[tuple[str, bool, tuple[str, ...]], bool] = LRU(1024)

#: The meta keys sqlglot's parser sets on a node to say where it read it.
POSITION = frozenset({"line", "col", "start", "end"})
#: A plain unsigned number: digits, or digits, a point and digits.
NUMBER = re.compile(r"(\d+)(?:\.(\d+))?")
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
#: Integer widths, signed and unsigned: a number is written as the first that holds it.
_INTEGERS = (("TINYINT", 2**7), ("UTINYINT", 2**8), ("SMALLINT", 2**15), ("USMALLINT", 2**16),
             ("INTEGER", 2**31), ("UINTEGER", 2**32), ("BIGINT", 2**63))


def dry_shape(tree: exp.Expression, dialect: object) -> str | None:
    """The key of ``tree``'s shape: its text in ``dialect`` with its opaque constants (module
    docstring) written as their types would do, or None when it has none (the dry run is then
    keyed by nothing new: run it). ``tree`` is not changed.

    The key is not that text but a digest of the tree itself, every node's class, arguments,
    comments, type and meta (all a generator reads) in order, each opaque constant as its type:
    two trees of one key write the same text, and the tree is neither copied nor generated a
    second time (that cost a new text more than its dry run saved, issue 39)."""
    out: list[str] = [getattr(dialect, "__name__", repr(dialect))]
    if not _walk(tree, out):
        return None
    return hashlib.sha256("\x1f".join(out).encode()).hexdigest()


def _walk(node: exp.Expression, out: list[str]) -> bool:
    """Append ``node``'s parts to ``out``; whether an opaque constant was among them."""
    constant = opaque(node) if isinstance(node, exp.Literal) else None
    found = constant is not None
    out.append(type(node).__name__)
    for key, value in node.args.items():
        if value is None:
            continue
        out.append(key)
        if key == "this" and constant is not None:
            out.append("#" + constant)  # a type name: never a Python repr (those are quoted)
        elif isinstance(value, exp.Expression):
            found = _walk(value, out) or found
        elif isinstance(value, list):
            out.append("[")
            for item in value:
                if isinstance(item, exp.Expression):
                    found = _walk(item, out) or found
                else:
                    out.append(repr(item))
            out.append("]")
        else:
            out.append(repr(value))
    meta = getattr(node, "_meta", None)  # read without creating it (node.meta would)
    if meta:  # where the parser read it (line, col, ...) is not written: left out
        meta = {k: v for k, v in meta.items() if k not in POSITION}
    for extra in (node.comments, node._type, meta):
        out.append(repr(extra) if extra else "")
    out.append(")")
    return found


def opaque(literal: exp.Literal) -> str | None:
    """What ``literal`` is written as in the shape when it is a plain number compared as it
    is (or cast to DOUBLE) with a non-constant operand: its type; a text under TRY_CAST to a
    date or timestamp: that cast; else None."""
    if literal.is_string:
        return _tried_temporal(literal)
    if NUMBER.fullmatch(literal.this) is None:
        return None
    written = type_of(literal.this)
    if written == literal.this:  # too wide for BIGINT: kept as written
        return None
    node: exp.Expression = literal
    parent = node.parent
    if isinstance(parent, exp.Cast) and parent.to.this == exp.DataType.Type.DOUBLE:
        node, parent, written = parent, parent.parent, "NUMBER"  # any such number casts
    if isinstance(parent, _COMPARISONS):
        other = parent.expression if node is parent.this else parent.this
        inside = node.arg_key in ("this", "expression") and not _constant(other)
    elif isinstance(parent, exp.Between):
        inside = node.arg_key in ("low", "high") and not _constant(parent.this)
    elif isinstance(parent, exp.In):
        inside = node.arg_key == "expressions" and not _constant(parent.this)
    else:
        inside = False
    return written if inside else None


_TEMPORAL = (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPNTZ)


def _tried_temporal(literal: exp.Literal) -> str | None:
    """``TRY_CAST('...' AS DATE)`` (or TIMESTAMP; how the rewrite reads a date constant inside
    its range guard): TRY_CAST never fails, and its type is DATE whatever the text, so no text
    there can change a dry run's outcome."""
    parent = literal.parent
    if isinstance(parent, exp.TryCast) and literal.arg_key == "this" and \
            parent.to.this in _TEMPORAL:
        return f"TRY_CAST AS {parent.to.this.value}"
    return None


def _constant(node: exp.Expression | None) -> bool:
    """Whether ``node`` reads no column (DuckDB may compute it while binding)."""
    return node is None or node.find(exp.Column) is None


def type_of(text: str) -> str:
    """DuckDB's type of the unsigned number ``text`` (``text`` itself past BIGINT)."""
    match = NUMBER.fullmatch(text)
    assert match is not None
    whole, fraction = match.group(1), match.group(2)
    if fraction is None:
        value = int(whole)
        return next((name for name, limit in _INTEGERS if value < limit), text)
    width = len(whole.lstrip("0") or "0") + len(fraction)
    if width > 38:
        return text
    return f"DECIMAL({width},{len(fraction)})"
