"""Answers fixed by public information alone: exact, no noise, no charge (0-DP).

Two kinds, chosen by :meth:`dpsql.routes.planner.Planner.prepare_query` (the one place that
chooses):

* **an empty probe** (:func:`empty_probe`): a SELECT whose answer has no rows whatever the
  data -- its outermost ``LIMIT`` (or ``FETCH FIRST``) is the literal 0, or its outermost
  WHERE has a conjunct that is a constant evaluating to false or NULL (``WHERE 1=0``,
  ``WHERE false``) and no row can come from an implicit group (no aggregate, or a GROUP BY of
  plain keys). BI tools send these to learn column names and types (JupySQL, Tableau,
  Superset's virtual datasets). The answer is the column names and types and no rows: the
  types of the private plan when the query plans (what the same query without the probe
  returns), else of a dry run on *empty* tables of the declared types
  (:func:`dpsql.execution.public.dry_run`), for any SELECT over declared tables, row-level included.
  Both depend on the text and the metadata only.
* **a public domain** (:func:`public_domain`): a planned GROUP BY or DISTINCT with no
  aggregate, whose keys all have a public domain (no thresholding). The plan releases every
  key of the domain, empty groups included, and no measurement: its answer is the
  post-processed domain, computed here without running the engine (so not even its running
  time depends on the data). The domain is the declared one, narrowed only by the analyst's
  own constant filters on the keys (:mod:`dpsql.privacy.key_filters`): public text.

**Why no charge.** Each answer is a function of the SQL text and the metadata: it is the same
on every pair of neighbouring databases, so releasing it is 0-DP. What never takes this path:
a query with any measurement (its cells are noisy and charged), a key without a public domain
(thresholding reads the data), a constant-false WHERE under an aggregate without GROUP BY (its
one row holds values), a WHERE that depends on a column, a subquery, a parameter or a function
call (only literals, casts, arithmetic, comparisons and logic are evaluated), and a table that
is not declared.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
from sqlglot import exp

from dpsql.errors import QueryRefused
from dpsql.execution.perturb import perturb_cells
from dpsql.execution.postprocess import Result, ResultColumn, postprocess, typed_empty
from dpsql.execution.public import check_functions, declared_tables, dry_run
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.plan import Plan
from dpsql.privacy.randomness import Randomness
from dpsql.query.local_evaluator import scratch

#: The nodes a constant WHERE conjunct may hold to be evaluated at plan time.
_CONSTANT_NODES = (exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Not, exp.Connector,
                   exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Is, exp.Add,
                   exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Cast, exp.DataType)


@dataclass(frozen=True)
class FreeAnswer:
    """A query whose answer is fixed by public information: ``plan`` is a public-domain plan
    answered from its domain, or None for an empty probe (``columns`` and no rows)."""

    sql: str
    reason: str  # why it is free, as ``explain`` shows it
    columns: tuple[ResultColumn, ...]
    plan: Plan | None = None

    @property
    def output_names(self) -> list[str]:
        return [c.name for c in self.columns]


def empty_probe(tree: object) -> str | None:
    """Why ``tree``'s answer has no rows whatever the data (module docstring), or None."""
    if not isinstance(tree, exp.Select | exp.SetOperation):
        return None
    if _limit_zero(tree):
        return "LIMIT 0"
    where = tree.args.get("where") if isinstance(tree, exp.Select) else None
    if where is None or not isinstance(tree, exp.Select) or not _no_implicit_group(tree):
        return None
    condition: exp.Expression = where.this
    conjuncts = condition.flatten() if isinstance(condition, exp.And) else [condition]
    for conjunct in conjuncts:
        if isinstance(conjunct, exp.Expression) and _constant_false(conjunct):
            return f"WHERE {conjunct.sql(dialect='duckdb')} (always false)"
    return None


def probe(sql: str, tree: exp.Query, why: str, metadata: Metadata, planned: Plan | None,
          refused: QueryRefused | None) -> FreeAnswer:
    """The free answer to an :func:`empty_probe`: the private plan's typed columns when it
    plans (``planned``), else a dry run on empty tables of the declared types; a query that
    reads anything but declared tables, or that the dry run cannot bind, keeps the private
    pipeline's refusal (``refused``)."""
    reason = f"{why}: no rows whatever the data, only column names and types; no privacy cost"
    if planned is not None:
        return FreeAnswer(sql, reason, tuple(typed_empty(planned).columns))
    assert refused is not None
    tables = declared_tables(tree, metadata)
    if tables is None:
        raise refused
    check_functions(tree)
    try:
        columns = dry_run(tree.sql(dialect="duckdb"), list(metadata.tables.values()))
    except QueryRefused:
        raise refused from None
    return FreeAnswer(sql, reason, columns)


def public_domain(sql: str, p: Plan) -> FreeAnswer | None:
    """The free answer to a plan that releases a public domain and measures nothing."""
    if p.measurements or p.threshold is not None or p.domain is None or not p.keys:
        return None
    keys = ", ".join(k.expression.sql(dialect="duckdb") for k in p.keys)
    reason = (f"public domain of {keys} with no aggregate: the answer is its {len(p.domain)} "
              "declared key(s), whatever the data; no noise, no privacy cost")
    return FreeAnswer(sql, reason, tuple(typed_empty(p).columns), p)


def answer_free(free: FreeAnswer, rng: Randomness) -> Result:
    """The exact answer: no rows, or the plan's domain post-processed (no engine, no data; the
    plan measures nothing, so ``rng`` is never drawn from)."""
    if free.plan is None:
        return Result(list(free.columns), [], [])
    return postprocess(free.plan, perturb_cells(free.plan, [], rng))


def _limit_zero(tree: exp.Query) -> bool:
    limit = tree.args.get("limit")
    count = limit.args.get("count") if isinstance(limit, exp.Fetch) else \
        limit.expression if isinstance(limit, exp.Limit) else None
    return isinstance(count, exp.Literal) and not count.is_string and count.this == "0"


def _no_implicit_group(select: exp.Select) -> bool:
    """No aggregate makes one row of zero rows: none at all, or a GROUP BY of plain keys."""
    if select.find(exp.AggFunc) is None:
        return True
    group = select.args.get("group")
    if group is None or group.args.get("all") or not group.expressions:
        return False
    return not any(isinstance(e, exp.GroupingSets | exp.Rollup | exp.Cube)
                   for e in group.expressions) and not any(
        group.args.get(k) for k in ("grouping_sets", "rollup", "cube", "totals"))


def _constant_false(node: exp.Expression) -> bool:
    """Whether ``node`` is made of literals and operators only and evaluates to false or
    NULL (which WHERE treats as false); evaluated now, on no table."""
    if not all(isinstance(n, _CONSTANT_NODES) for n in node.walk()):
        return False
    try:
        rows = scratch().execute(f"SELECT CAST(({node.sql(dialect='duckdb')}) AS BOOLEAN)"
                                 ).fetchall()
    except duckdb.Error:  # not a constant boolean: the ordinary path decides
        return False
    return bool(rows) and rows[0][0] is not True
