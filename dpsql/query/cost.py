"""Pass 5, cost: bound the work that one row can cost, so that time says little about a row.

A CASE branch that only one person's row takes is evaluated for that row only. If the branch can
be made arbitrarily expensive (``email || '<40,000 x a>' LIKE '%<20,000 x _>b'``), the time of
the answer tells whether the branch ran: an exact, noise-free leak. The checker therefore bounds
the work of every row-level expression with a small cost model, and refuses
(:class:`~dpsql.errors.QueryTooComplex`) what exceeds it. It runs after constants are folded
(:mod:`dpsql.query.fold_constants`), so it sees the literals that the engine will see.

The model, in units of about one character operation:

* every node of a row-level expression costs 1; at most ``MAX_NODES`` nodes in the private part
  and a nesting depth of at most ``MAX_DEPTH``;
* a text value has an estimated length: a literal its own, a stored text column
  ``ASSUMED_TEXT_LENGTH`` (the data's own lengths are the owner's, not the analyst's), a number
  or date cast to text 32, a concatenation the sum of its parts, a CASE its longest branch;
* a text function (LOWER, UPPER, TRIM, SUBSTRING, LENGTH, ||, CONCAT) and a comparison of text
  cost the length of their text; LIKE, ILIKE and STARTS_WITH cost the length of the text times
  the length of the pattern (backtracking over ``%`` and ``_`` is at worst that product), and the
  pattern must be a literal of at most ``MAX_PATTERN_LENGTH`` characters;
* a text literal has at most ``MAX_LITERAL_LENGTH`` characters;
* the sum over the private part (WHERE, GROUP BY keys, aggregated expressions) is at most
  ``MAX_ROW_COST`` per row.

With these limits the most one row can add to a query's time is about ``MAX_ROW_COST``
character operations, tens of microseconds; ``docs/audit.md`` states what that leaves.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.errors import QueryTooComplex
from dpsql.metadata.metadata import ColumnType, Table
from dpsql.query.bounds import bound
from dpsql.query.check import CheckedQuery
from dpsql.query.dates import written

MAX_LITERAL_LENGTH = 1_000
MAX_PATTERN_LENGTH = 100
MAX_NODES = 5_000
MAX_DEPTH = 100
MAX_ROW_COST = 20_000
ASSUMED_TEXT_LENGTH = 256
_NUMBER_TEXT_LENGTH = 32

_TEXT_FUNCTIONS = (exp.Lower, exp.Upper, exp.Trim, exp.Substring, exp.Length, exp.Concat,
                   exp.DPipe)
_PATTERNS = (exp.Like, exp.ILike, exp.StartsWith)


def check_cost(query: CheckedQuery) -> CheckedQuery:
    """Refuse ``query`` if its row-level work exceeds the cost model; return it unchanged."""
    parts = [("WHERE", query.where)] if query.where is not None else []
    parts += [("GROUP BY", k) for k in query.keys]
    parts += [(a.text, a.arg) for a in query.aggregates if a.arg is not None]
    if query.relation is not None:  # ON clauses and semi-join filters run per row too
        parts += [("ON", c) for c in query.relation.conditions()]
    nodes = total = 0
    for where, node in parts:
        assert node is not None
        nodes += sum(1 for _ in node.walk())
        _check_depth(node, where)
        total += _work(node, query.table, where)
    if nodes > MAX_NODES:
        raise QueryTooComplex(f"the query's row-level expressions have {nodes} nodes, more "
                              f"than the {MAX_NODES} allowed; simplify them or split the query")
    if total > MAX_ROW_COST:
        raise QueryTooComplex(
            f"the query's row-level expressions cost about {total} operations per row, more "
            f"than the {MAX_ROW_COST} allowed (long text literals, LIKE patterns or text "
            "functions); use shorter literals and patterns")
    return query


def _check_depth(node: exp.Expression, where: str) -> None:
    for sub in node.walk():
        if sub.depth > MAX_DEPTH:
            raise QueryTooComplex(f"{where}: expressions nest deeper than {MAX_DEPTH} levels; "
                                  "flatten them")


def _work(node: exp.Expression, table: Table, where: str) -> int:
    """The estimated work of ``node`` on one row, children included."""
    if isinstance(node, exp.Literal) and node.is_string and len(node.this) > MAX_LITERAL_LENGTH:
        raise QueryTooComplex(f"{where}: a text literal of {len(node.this)} characters is longer "
                              f"than the {MAX_LITERAL_LENGTH} allowed")
    own = 1
    if isinstance(node, _PATTERNS):
        own += text_length(node.this, table) * _pattern_length(node, where)
    elif isinstance(node, _TEXT_FUNCTIONS):
        own += text_length(node, table)
    elif isinstance(node, exp.Predicate) and _is_text(node.this, table):
        own += text_length(node.this, table)
    return own + sum(_work(child, table, where) for child in node.iter_expressions())


def _pattern_length(node: exp.Expression, where: str) -> int:
    pattern = node.expression
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise QueryTooComplex(
            f"{where}: the pattern of {written(node)} must be a constant text; "
            "a pattern computed from rows would make the work per row depend on the data")
    if len(pattern.this) > MAX_PATTERN_LENGTH:
        raise QueryTooComplex(f"{where}: the pattern '{pattern.this[:20]}...' has "
                              f"{len(pattern.this)} characters, more than the "
                              f"{MAX_PATTERN_LENGTH} allowed")
    return max(len(pattern.this), 1)


def _is_text(node: exp.Expression | None, table: Table) -> bool:
    return node is not None and not isinstance(node, exp.DataType) and \
        bound(node, table).kind == "text"


def text_length(node: exp.Expression, table: Table) -> int:
    """An estimate of the length of the text that ``node`` computes on one row."""
    if isinstance(node, exp.Literal):
        return len(node.this)
    if isinstance(node, exp.Column):
        meta = table.column(node.name)
        return ASSUMED_TEXT_LENGTH if meta is not None and meta.type == ColumnType.TEXT else \
            _NUMBER_TEXT_LENGTH
    if isinstance(node, exp.Concat | exp.DPipe):
        return sum(text_length(c, table) for c in node.iter_expressions())
    if isinstance(node, exp.Case | exp.If | exp.Coalesce | exp.Least | exp.Greatest):
        values = [v for v in _values(node) if v is not None]
        return max((text_length(v, table) for v in values), default=0)
    if isinstance(node, exp.Cast | exp.TryCast):
        inner = node.this
        return text_length(inner, table) if _is_text(inner, table) else _NUMBER_TEXT_LENGTH
    if isinstance(node, exp.Lower | exp.Upper | exp.Trim | exp.Substring | exp.Paren |
                  exp.Nullif):
        return text_length(node.this, table)
    return _NUMBER_TEXT_LENGTH


def _values(node: exp.Expression) -> list[exp.Expression | None]:
    if isinstance(node, exp.Case):
        return [b.args.get("true") for b in node.args.get("ifs") or []] + [
            node.args.get("default")]
    if isinstance(node, exp.If):
        return [node.args.get("true"), node.args.get("false")]
    return [node.this, *node.expressions]
