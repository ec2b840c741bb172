"""Tools' row-limit wrappers, read as the query they wrap.

dbt-core before 1.8 previews a model as ``select * from (<model>) as model_limit_subq limit N``
(its ``get_limit_subquery_sql``), and other tools wrap the same way. When the model aggregates,
that is a subquery dpsql does not inline (only row-level subqueries are: :mod:`dpsql.query.bind`).
But ``SELECT * FROM (q) AS a LIMIT n`` returns exactly the first n rows of q, which is q with its
own LIMIT lowered to n, so :func:`unwrapped` answers q itself: the same SQL meaning, before any
privacy analysis, so every check and charge is q's. Only that exact shape is unwrapped (a bare
``*``, one aliased subquery of a SELECT, no other clause, literal limits); anything else is
left as written, for the usual passes to answer or refuse.
"""

from __future__ import annotations

from sqlglot import exp

# The only clauses the outer SELECT may have (sqlglot 30 spells FROM as "from_").
_OUTER_ARGS = {"expressions", "from", "from_", "limit"}


def unwrapped(select: exp.Select) -> exp.Select:
    """``select`` without its ``SELECT * FROM (...) AS a [LIMIT n]`` wrappers (see the module)."""
    while (inner := _wrapped(select)) is not None:
        limit = _literal_limit(select)
        if limit is not None:
            inner_limit = _literal_limit(inner)
            inner.set("limit", exp.Limit(expression=exp.Literal.number(
                limit if inner_limit is None else min(limit, inner_limit))))
        select = inner
    return select


def _wrapped(select: exp.Select) -> exp.Select | None:
    """The SELECT that ``select`` only wraps, or None."""
    set_args = {key for key, value in select.args.items() if value not in (None, [], False)}
    if not set_args <= _OUTER_ARGS or not _plain_limit(select):
        return None
    star = select.expressions[0] if len(select.expressions) == 1 else None
    if not isinstance(star, exp.Star) or any(v not in (None, [], False)
                                             for v in star.args.values()):
        return None  # not a bare * (EXCLUDE, REPLACE, a qualified a.*)
    source = select.args.get("from_") or select.args.get("from")
    if not isinstance(source, exp.From) or not isinstance(source.this, exp.Subquery):
        return None
    subquery = source.this
    inner = subquery.this
    alias = subquery.args.get("alias")
    extra = {key for key, value in subquery.args.items()
             if key not in ("this", "alias") and value not in (None, [], False)}
    if (extra or not isinstance(inner, exp.Select) or not _plain_limit(inner)
            or (alias is not None and alias.columns)):
        return None
    return inner


def _plain_limit(select: exp.Select) -> bool:
    """No LIMIT, or a LIMIT of a non-negative integer literal (not a parameter, not FETCH)."""
    limit = select.args.get("limit")
    return limit is None or _literal_limit(select) is not None


def _literal_limit(select: exp.Select) -> int | None:
    limit = select.args.get("limit")
    if not isinstance(limit, exp.Limit) or limit.args.get("offset") or limit.args.get(
            "expressions"):
        return None
    value = limit.expression
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return int(value.this)
    return None
