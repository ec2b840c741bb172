"""A planned query reused for a new text that differs from it only in opaque constants (issue
39.1: a dashboard's moving filter value or time range re-plans only its constants).

A text is planned once per *template*: its tokens with every plain unsigned number (digits, or
digits, a point and digits) written as its DuckDB width class (:func:`dpsql.query.dry_shapes.
type_of`: ``TINYINT`` ... ``BIGINT``, ``DECIMAL(w,s)``) and every other token as it is, with the
privacy parameters, the contribution bounds and the report flag. A number is a *slot* -- its
value may change on reuse -- only in the one position class audited for it (docs/audit.md,
"Constants a reused plan may change"): directly one side of a comparison (``=``, ``<>``,
``<``, ``<=``, ``>``, ``>=``), a ``BETWEEN`` bound or an ``IN`` item, in the ``WHERE`` of a
single-table ``SELECT`` without subqueries, against a bare column that no ``GROUP BY`` key
reads (:func:`dpsql.query.dry_shapes.opaque`'s class, narrowed). Every other number (a
``LIMIT``, a quantile, a key filter, ``epsilon`` in the clause, a number under arithmetic or
``-``) must be the same text as in the planned query, and every parameter and other string
is a token of the template itself. A date or timestamp written as text (:data:`TEMPORAL`:
``'2025-03-01'``, ``'2025-03-01 10:00:00'``, ``'2025-03-01T10:00:00.000Z'``) is a slot in
the same positions when the column is declared a date or a timestamp, its class its shape
(each digit a 9): a dashboard's moving time range.

Reuse is proved, not assumed. When a template is learnt (:meth:`Templates.learn`), each slot is
followed through the passes by where the parser read it (its ``start``): it must reach the plan
only as the same literal in its ``WHERE`` (a literal that bind, check or fold changed, or one
that any other part of the plan holds, makes no template), and folding the checked ``WHERE``
again must give the plan's. On a reuse (:meth:`Templates.reuse`) every pass that reads a
``WHERE`` constant's value is run again on the new ``WHERE``: the checker's
:func:`~dpsql.query.check.check_condition` (row level, types, bounds), :func:`~dpsql.query.
fold_constants.fold`, :func:`~dpsql.query.cost.check_cost`, each key's public domain
(:func:`~dpsql.privacy.domains.key_domain` of the new :func:`~dpsql.privacy.key_filters.
key_filters`) and the free route's :func:`~dpsql.execution.free.empty_probe`. The plan is
reused only if folding gave exactly the cached ``WHERE`` with the new constants in place (no
constant folded otherwise: no constant-false ``WHERE``, no other type), every key's public
domain is the same and nothing was refused; anything else plans the text from scratch (and
so refuses it with the same message). The engine's SQL is then written for the new plan as
for any plan (the rewrite's reads of a constant -- clamp intervals, typed numbers -- the
dry-run shape and its dry run: :func:`dpsql.routes.pipeline.engine_sql`). What is skipped is
parsing, binding, the rest of the checker, planning the measurements and choosing the route:
none reads a slot's value (docs/audit.md lists what each pass reads).

Like every cache of :mod:`dpsql.cache`, a template holds what was computed from public inputs
alone (texts, privacy parameters, metadata, the engine's schema): whether a text reuses one
depends on the texts asked before, never on the data. Folding converts a temporal text to a
typed literal (a new node, :func:`dpsql.query.fold_constants._placed` keeps where the parser
read it); the reuse compares the new folded ``WHERE`` with the template's node by node, the
slots' literals alone allowed to differ (:func:`_folded_slots`), and moves those folded values
into the engine query, wherever the rewrite wrote them (a timestamp's range guard writes one
three times).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from sqlglot import Token, TokenType, exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import SqlglotError

from dpsql.cache import LRU
from dpsql.engines import Engine
from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.errors import QueryRefused
from dpsql.execution.free import empty_probe
from dpsql.metadata.contribution import ContributionBounds
from dpsql.metadata.metadata import ColumnType, Metadata
from dpsql.privacy.domains import key_domain
from dpsql.privacy.key_filters import key_filters
from dpsql.privacy.plan import Plan
from dpsql.query.check import check, check_condition
from dpsql.query.cost import check_cost
from dpsql.query.dates import normalise
from dpsql.query.dry_shapes import NUMBER, dry_shape, opaque, type_of
from dpsql.query.fold_constants import fold
from dpsql.query.joins import PublicRows
from dpsql.query.parameters import lower_case_names
from dpsql.query.quantile_lists import expand_quantile_lists
from dpsql.query.total_expressions import Reader, total
from dpsql.routes.pipeline import (
    bind_in_force,
    k_to_choose,
    keep_engine_sql,
    rewritten_tree,
    values_to_choose,
)
from dpsql.routes.private import PrivatePlan

#: Templates kept per planner.
TEMPLATE_CACHE_SIZE = 256
_DIALECT = DuckDB()
_SLOT_PARENTS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Between, exp.In)
#: A date or timestamp as text (a dashboard's time range: '2025-03-01', '2025-03-01 10:00:00',
#: '2025-03-01T10:00:00.000Z', '2025-03-01 10:00:00+02'): its class is its shape, each digit 9.
TEMPORAL = re.compile(r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)?"
                      r"(?:Z|[+-]\d{2}(?::?\d{2})?)?")
#: The declared types a temporal text slot may be compared with.
_TEMPORAL_COLUMNS = (ColumnType.DATE, ColumnType.TIMESTAMP)


@dataclass(frozen=True)
class _Slot:
    """Where one slot is: its token, and its node's index in the walk of each tree."""

    token: int
    start: int  # where the parser read it
    parsed: int  # in the bound text's tree
    checked: int  # in the checked WHERE, before folding
    planned: int  # in the plan's (folded) WHERE


@dataclass(frozen=True)
class _Template:
    fixed: tuple[tuple[int, str], ...]  # (token index, text) of every number not a slot
    slots: tuple[_Slot, ...]
    tree: exp.Expression  # the bound text's tree (never mutated: copied on reuse)
    checked: exp.Expression  # the checked WHERE, before folding
    plan: Plan


@dataclass(frozen=True)
class Reused:
    """A text planned by reuse: its route, normalised text and answer-key text (as
    :meth:`dpsql.database.Database` makes them for a text planned from scratch)."""

    route: PrivatePlan
    normalised: str
    key_text: str
    tree: exp.Expression  # the bound text's tree, as parsed from scratch
    template: Plan  # the plan reused
    moved: tuple[tuple[int, str], ...]  # (where the parser read a slot, its new constant)


def _tokens(sql: str) -> list[Token] | None:
    try:
        return _DIALECT.tokenize(sql)
    except SqlglotError:
        return None


def _key(tokens: list[Token]) -> tuple[object, ...]:
    """The template of ``tokens``: each plain number as its width class, each temporal text as
    its shape, the rest as is."""
    return tuple((t.token_type, _class(t) or t.text) for t in tokens)


def _class(token: Token) -> str | None:
    """A token's class if it may be a slot (a plain number, a temporal text), else None."""
    if token.token_type == TokenType.NUMBER and NUMBER.fullmatch(token.text):
        return type_of(token.text)
    if token.token_type == TokenType.STRING and TEMPORAL.fullmatch(token.text):
        return re.sub(r"\d", "9", token.text)
    return None


def _slot_text(literal: exp.Literal) -> bool:
    """Whether ``literal`` is of a slot's kind: a plain number, or a temporal text."""
    if literal.is_string:
        return TEMPORAL.fullmatch(literal.this) is not None
    return NUMBER.fullmatch(literal.this) is not None and type_of(literal.this) != literal.this


def _slot_literals(tree: exp.Expression) -> Iterator[exp.Literal]:
    """The literals of ``tree`` in the audited slot class (module docstring)."""
    if not isinstance(tree, exp.Select) or tree.args.get("joins") or tree.args.get("with"):
        return
    where = tree.args.get("where")
    if where is None or any(q is not tree for q in tree.find_all(exp.Query, exp.Subquery)):
        return
    group = tree.args.get("group")
    keyed = {c.name.lower() for c in group.find_all(exp.Column)} if group is not None else set()
    for literal in where.find_all(exp.Literal):
        parent = literal.parent
        if not _slot_text(literal) or not isinstance(parent, _SLOT_PARENTS):
            continue
        if isinstance(parent, exp.In | exp.Between) and literal.arg_key == "this":
            continue
        column = _compared_column(literal)
        if column is not None and column not in keyed:
            yield literal


def _compared_column(literal: exp.Literal) -> str | None:
    """The name (lower case) of the bare column ``literal`` is compared with, or None."""
    parent = literal.parent
    assert parent is not None
    column = parent.this if literal.arg_key != "this" else parent.args.get("expression")
    return column.name.lower() if isinstance(column, exp.Column) else None


def _temporal_column(p: Plan, literal: exp.Literal) -> bool:
    """Whether the column ``literal`` is compared with is declared a date or a timestamp."""
    name = _compared_column(literal)
    column = p.table.column(name) if name is not None else None
    return column is not None and column.type in _TEMPORAL_COLUMNS


def _folded_slots(where: exp.Expression, planned: exp.Expression,
                  slots: tuple[_Slot, ...]) -> list[str] | None:
    """The slots' constants in ``where`` (the new WHERE, folded) where it is ``planned`` (the
    template's) but for their values: at each slot's place a literal of the template's kind
    (text, or a number of the same width class), everything else equal. Else None."""
    nodes = list(where.walk())
    values = []
    for s in slots:
        node = nodes[s.planned] if s.planned < len(nodes) else None
        if not isinstance(node, exp.Literal):
            return None
        values.append(node.this)
    old = list(planned.walk())
    for s, value in zip(slots, values, strict=True):
        before = old[s.planned]
        if not isinstance(before, exp.Literal) or before.is_string != nodes[s.planned].is_string \
                or (not before.is_string and type_of(before.this) != type_of(value)):
            return None
    same = _substituted(planned, {s.planned: v for s, v in zip(slots, values, strict=True)})
    return values if same == where else None


def _indices(tree: exp.Expression, start: int) -> list[int] | None:
    """The walk indices of the literals of ``tree`` read at ``start``: None where another
    node was read there (the constant is no longer a literal alone)."""
    found = [(i, node) for i, node in enumerate(tree.walk())
             if isinstance(node, exp.Expression) and _start(node) == start]
    if not all(isinstance(node, exp.Literal) for _, node in found):
        return None
    return [i for i, _ in found]


def _index(tree: exp.Expression, start: int) -> int | None:
    """The walk index of the one literal of ``tree`` read at ``start``; None unless exactly one."""
    found = [i for i, node in enumerate(tree.walk())
             if isinstance(node, exp.Literal) and _start(node) == start]
    return found[0] if len(found) == 1 else None


def _expressions(value: object, depth: int = 0) -> Iterator[exp.Expression]:
    """Every sqlglot tree held in ``value`` (a plan: its dataclasses, tuples, lists, dicts)."""
    if isinstance(value, exp.Expression):
        yield value
    elif depth > 12 or isinstance(value, str | bytes | int | float | type(None)):
        return
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _expressions(getattr(value, field.name), depth + 1)
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _expressions(item, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _expressions(item, depth + 1)


def _read_at(p: Plan, start: int) -> int:
    """How many nodes of ``p``'s trees outside its WHERE were read at ``start``."""
    where = p.query.where
    return sum(1 for tree in _expressions(p) if tree is not where
               for node in tree.walk() if isinstance(node, exp.Expression)
               and _start(node) == start)


def _start(node: exp.Expression) -> int | None:
    """Where the parser read ``node`` (None for a node it did not read), without creating
    its meta (``node.meta`` would)."""
    meta = getattr(node, "_meta", None)
    start = meta.get("start") if meta else None
    return start if isinstance(start, int) else None


def _substituted(tree: exp.Expression, at: dict[int, str],
                 nodes: dict[int, exp.Literal] | None = None) -> exp.Expression:
    """A copy of ``tree`` with the literal at each walk index ``i`` of ``at`` now ``at[i]``
    (each such literal of the copy put in ``nodes``, by its index, if given)."""
    copy = tree.copy()
    for i, node in enumerate(list(copy.walk())):
        if i in at:
            assert isinstance(node, exp.Literal)
            node.set("this", at[i])
            if nodes is not None:
                nodes[i] = node
    return copy


class Templates:
    """The templates of one planner (its metadata and public data)."""

    def __init__(self, metadata: Metadata, public: PublicRows | None,
                 size: int = TEMPLATE_CACHE_SIZE) -> None:
        self.metadata = metadata
        self.public = public
        self.cache: LRU[tuple[object, ...], _Template] = LRU(size)

    def reuse(self, sql: str, parameters: tuple[object, ...]) -> Reused | None:
        """``sql`` (its clause read and its clock folded) planned by reusing a template's plan
        with its new constants (module docstring), or None: plan it from scratch.
        ``parameters``: epsilon, delta, mechanism, bounds and the report flag."""
        tokens = _tokens(sql)
        if tokens is None:
            return None
        entry = self.cache.get((_key(tokens), parameters))
        if entry is None or len(tokens) <= max((s.token for s in entry.slots), default=-1) \
                or any(tokens[i].text != text for i, text in entry.fixed):
            return None
        values = [tokens[s.token].text for s in entry.slots]

        def moved(tree: exp.Expression, where: str) -> exp.Expression:
            """A copy of the template's ``tree`` with the new constants at its slots."""
            return _substituted(tree, {getattr(s, where): v
                                       for s, v in zip(entry.slots, values, strict=True)})

        tree = moved(entry.tree, "parsed")
        table = entry.plan.query.table
        try:
            if empty_probe(tree) is not None:  # a free answer: the planner's route
                return None
            checked = moved(entry.checked, "checked")
            check_condition(checked, table, "WHERE")
            where = fold(checked, table)
            assert entry.plan.query.where is not None
            folded = _folded_slots(where, entry.plan.query.where, entry.slots)
            if folded is None:
                return None  # a constant folded otherwise than the template's
            filters = key_filters(where)  # as plan narrows each key's public domain
            if any(key_domain(k.expression, table, filters) != k.domain
                   for k in entry.plan.keys):
                return None
            query = check_cost(replace(entry.plan.query, where=where))
        except QueryRefused:  # refused from scratch, with the same message
            return None
        normalised = tree.sql(dialect="duckdb")
        moved_at = tuple((s.start, v) for s, v in zip(entry.slots, folded, strict=True))
        return Reused(PrivatePlan(replace(entry.plan, query=query)), normalised, normalised, tree,
                      entry.plan, moved_at)

    def learn(self, sql: str, tree: exp.Expression, normalised: str, key_text: str,
              route: object, bounds: ContributionBounds | None,
              parameters: tuple[object, ...]) -> None:
        """Keep ``route``, planned from scratch for ``sql`` (bound as ``tree``, never mutated),
        as the template of the texts that differ from it in slots only, where that is proved
        (module docstring). ``bounds``: the query's contribution bounds, among
        ``parameters`` (the key, as for :meth:`reuse`)."""
        if not isinstance(route, PrivatePlan) or normalised != key_text:
            return
        p = route.plan
        if not p.measurements or p.query.relation is not None or p.query.post is not None \
                or p.query.where is None or not lower_case_names(tree):
            return
        # A column a key reads, however the GROUP BY names it (an alias, a position): no slot.
        keyed = {c.name.lower() for k in p.keys for c in k.expression.find_all(exp.Column)}
        literals = [literal for literal in _slot_literals(tree)
                    if _compared_column(literal) not in keyed and (
                        not literal.is_string or _temporal_column(p, literal))]
        tokens = _tokens(sql)
        if not literals or tokens is None:
            return
        checked = self._checked(tree, bounds)
        if checked is None or fold(checked, p.query.table) != p.query.where:
            return
        at = {t.start: i for i, t in enumerate(tokens) if _class(t) is not None}
        slots: list[_Slot] = []
        for literal in literals:
            start = _start(literal)
            token = at.get(start) if start is not None else None
            if start is None or token is None or tokens[token].text != literal.this \
                    or _read_at(p, start) > 0:  # held outside the WHERE: no template
                return
            where = (_index(tree, start), _index(checked, start), _index(p.query.where, start))
            if None in where or list(checked.walk())[where[1]] != literal:
                return  # bind or check changed it: a reuse, which skips them, could not
            slots.append(_Slot(token, start, *where))  # type: ignore[arg-type]
        taken = {s.token for s in slots}
        fixed = tuple((i, tokens[i].text) for i in at.values() if i not in taken)
        self.cache.put((_key(tokens), parameters), _Template(
            fixed, tuple(slots), tree, checked, p))

    def _checked(self, tree: exp.Expression, bounds: ContributionBounds | None
                 ) -> exp.Expression | None:
        """The checked WHERE of ``tree`` before folding: bind and check it again, as
        :func:`dpsql.routes.pipeline.prepare_plan` does (once per template)."""
        select = tree.copy()
        assert isinstance(select, exp.Select)
        normalise(select)
        expand_quantile_lists(select)
        try:
            bound = bind_in_force(select, self.metadata, self.public, bounds)
            return check(bound).where
        except QueryRefused:
            return None



# ------------------------------------------------------------- the engine's SQL, moved too


@dataclass(frozen=True)
class _Rewrite:
    """A template plan's engine query for one engine, and where its slots are in it."""

    tree: exp.Query
    salted: bool
    schema: Mapping[str, str]
    at: dict[int, list[int]]  # slot start -> walk indices in ``tree`` (a constant written
    # more than once: a timestamp's range guard)
    filter: exp.Expression  # its WHERE as the rewrite writes it (:func:`total`)
    at_filter: dict[int, list[int]]  # slot start -> walk indices in ``filter``
    shape: str | None  # ``tree``'s dry-run shape (dpsql.query.dry_shapes)
    classes: dict[int, list[str | None]]  # slot start -> its literals' opaque classes


#: Per template plan and engine: its rewrite, or None where its slots cannot be moved in it.
_REWRITES: LRU[tuple[int, int], tuple[Plan, Engine, _Rewrite | None]] = LRU(256)


def keep_moved_engine_sql(reused: Reused, engine: Engine) -> None:
    """Write the engine query of ``reused``'s plan by moving its new constants into its
    template's rewritten query, where that is proved the same (:func:`_moved_rewrite`), and
    keep it as :func:`dpsql.routes.pipeline.engine_sql` would; else nothing (engine_sql then
    rewrites the plan itself). The query is checked (dry-run shape, dry run) as any is."""
    p, template = reused.route.plan, reused.template
    if k_to_choose(p) or values_to_choose(p) or p.query.where is None:
        return
    key = (id(template), id(engine))
    entry = _REWRITES.get(key)
    if entry is None or entry[0] is not template or entry[1] is not engine:
        entry = _REWRITES.put(key, (template, engine, _rewritten(template, engine, reused)))
    rewrite_ = entry[2]
    if rewrite_ is None:
        return
    moved = dict(reused.moved)
    # The rewrite reads a WHERE's constants only through total() (the clamp intervals, typed
    # numbers, NaN guards): the new WHERE's, written again, must be the template's moved.
    written = total(p.query.where, p.table, Reader(p.table, rewrite_.schema), filtering=True)
    if written != _substituted(rewrite_.filter, {i: moved[s] for s, where in
                                                 rewrite_.at_filter.items() for i in where}):
        return
    nodes: dict[int, exp.Literal] = {}
    tree = _substituted(rewrite_.tree, {i: moved[s] for s, where in rewrite_.at.items()
                                        for i in where}, nodes)
    assert isinstance(tree, exp.Query)
    # The moved tree's dry-run shape is the template's when every slot is an opaque constant
    # of the same class in both (the shape writes such a constant as its class alone).
    same = all(c is not None and opaque(nodes[i]) == c for s, where in rewrite_.at.items()
               for i, c in zip(where, rewrite_.classes[s], strict=True))
    keep_engine_sql(p, tree, rewrite_.salted, engine, rewrite_.shape if same else None)


def _rewritten(template: Plan, engine: Engine, reused: Reused) -> _Rewrite | None:
    """``template``'s rewrite with each slot found once in it, inside its WHERE; else None."""
    tree, salted, schema = rewritten_tree(template, engine)
    assert template.query.where is not None
    written = total(template.query.where, template.table, Reader(template.table, schema),
                    filtering=True)
    at: dict[int, list[int]] = {}
    at_filter: dict[int, list[int]] = {}
    for start, _ in reused.moved:
        i, j = _indices(tree, start), _indices(written, start)
        if not i or not j or len(i) != len(j):
            return None
        at[start], at_filter[start] = i, j
    nodes = list(tree.walk())
    classes = {start: [opaque(n) if isinstance(n := nodes[i], exp.Literal) else None
                       for i in where] for start, where in at.items()}
    return _Rewrite(tree, salted, schema, at, written, at_filter,
                    dry_shape(tree, DuckDBDialect), classes)
