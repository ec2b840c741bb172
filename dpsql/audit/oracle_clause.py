"""BigQuery's ``SELECT WITH DIFFERENTIAL_PRIVACY`` in the reference model of the semantic oracle
(:mod:`dpsql.audit.oracle`): the clause's query as the plain SQL it means, read off the tree
that :func:`dpsql.query.dp_clause.clause_tree` parses (the parse only; the meaning is the
reference's own, ZetaSQL's):

* the clause and its options go (``epsilon``, ``delta`` do not change a noise-free answer;
  ``max_rows_contributed`` and ``max_groups_contributed`` are the plan's k and g, which
  :mod:`dpsql.audit.oracle_bounds` reads);
* :func:`per_row` -- ``contribution_bounds_per_row => (lo, hi)`` clamps each row's argument,
  a NULL staying NULL (ZetaSQL skips a NULL row); on COUNT it changes nothing;
* :func:`per_group` -- ``contribution_bounds_per_group => (lo, hi)``: SUM is
  ``PERSON_SUM(x, lo, hi)``, each unit's total in the group clamped, a unit without a non-NULL
  value contributing nothing; AVG is ``PERSON_AVG(x, lo, hi)``, the average over units of each
  unit's clamped average; COUNT is ``PERSON_SUM`` of its rows' 1s (each unit's count in the
  group clamped; COUNT(DISTINCT) unchanged); any other
  aggregate clamps its rows (ZetaSQL's answer where a unit has one row);
* :func:`person_average` -- an AVG in the clause without bounds is ``PERSON_AVG(x)``: the
  average of each unit's average (ZetaSQL's meaning, whatever the bounds);
* ``report_format`` (a JSON report) is not modelled.

``PERSON_SUM`` and ``PERSON_AVG`` are aggregates of the reference
(:data:`dpsql.audit.oracle_reference.PER_PERSON`), answered on per-unit partials by
:mod:`dpsql.audit.oracle_bounds` (:data:`~dpsql.audit.oracle_bounds.PER_PERSON_RULES`).
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.audit.oracle_reference import NotModelled, PersonAvg, PersonSum
from dpsql.errors import Error
from dpsql.query.dp_clause import NamedArguments, clause_tree, might_hold_clause


def plain_form(sql: str) -> str:
    """``sql`` without BigQuery's clause, in the reference's SQL (module docstring); ``sql``
    itself when it holds neither the clause nor a named argument."""
    if not might_hold_clause(sql):
        return sql
    try:
        tree = clause_tree(sql)
    except Error as e:
        raise NotModelled(f"the clause does not parse: {e}") from None
    clauses = [s for s in tree.find_all(exp.Select) if s.args.get("differential_privacy")]
    for select in clauses:
        select.set("differential_privacy", None)
        for avg in list(select.find_all(exp.Avg)):
            if not isinstance(avg.parent, NamedArguments):
                avg.replace(person_average(avg.this))
    for node in list(tree.find_all(NamedArguments)):
        node.replace(_call(node))
    return tree.sql(dialect="duckdb")


def person_average(x: exp.Expression, lo: exp.Expression | None = None,
                   hi: exp.Expression | None = None) -> exp.Expression:
    """ZetaSQL's AVG: the average over units of each unit's average (clamped to [lo, hi])."""
    bounds = [b.copy() for b in (lo, hi) if b is not None]
    return PersonAvg(this=x.copy(), expressions=bounds)


def per_row(arg: exp.Expression, lo: exp.Expression, hi: exp.Expression) -> exp.Expression:
    """Each row's argument clamped to ``[lo, hi]``, NULL kept NULL."""
    return exp.Case(ifs=[exp.If(this=exp.Is(this=arg.copy(), expression=exp.Null()),
                                true=exp.Null()),
                         exp.If(this=arg.copy() < lo.copy(), true=lo.copy()),
                         exp.If(this=arg.copy() > hi.copy(), true=hi.copy())],
                    default=arg.copy())


def per_group(call: exp.Expression, lo: exp.Expression, hi: exp.Expression) -> exp.Expression:
    """``call`` with ZetaSQL's per-group bounds (module docstring)."""
    if isinstance(call, exp.Count) and not isinstance(call.this, exp.Distinct):
        # each unit's count in the group, clamped: the total of its rows' 1s (NULLs none)
        one = exp.Literal.number(1)
        row = one if isinstance(call.this, exp.Star) else exp.Case(ifs=[exp.If(
            this=exp.Not(this=exp.Is(this=call.this.copy(), expression=exp.Null())),
            true=one)])
        return PersonSum(this=row, expressions=[lo.copy(), hi.copy()])
    if isinstance(call, exp.Count):
        return call
    if isinstance(call, exp.Sum):
        return PersonSum(this=call.this.copy(), expressions=[lo.copy(), hi.copy()])
    if isinstance(call, exp.Avg):
        return person_average(call.this, lo, hi)
    call.set("this", per_row(call.this, lo, hi))
    return call


def _call(node: NamedArguments) -> exp.Expression:
    call: exp.Expression = node.this.copy()
    for kwarg in node.expressions:
        name = kwarg.this.name.lower()
        value = kwarg.expression
        if name == "report_format":
            raise NotModelled("report_format (a JSON report)")
        parts = value.expressions if isinstance(value, exp.Tuple) else []
        if len(parts) != 2:
            raise NotModelled(f"{name} => {value.sql()}")
        if name == "contribution_bounds_per_group":
            call = per_group(call, *parts)
        elif not isinstance(call, exp.Count):
            call.set("this", per_row(call.this, *parts))
    return call
