"""BigQuery's ``APPROX_QUANTILES(x, n)``: the list of the n + 1 quantiles of x at 0, 1/n, ...,
1, as ``[PERCENTILE_CONT(x, 0), PERCENTILE_CONT(x, 1/n), ..., PERCENTILE_CONT(x, 1)]``: each
element is dpsql's private quantile (the exponential mechanism,
:mod:`dpsql.privacy.quantiles`; its argument in :mod:`dpsql.privacy.aggregates`), and the list
is built by the outer query from the released quantiles (post-processing). The plan splits the
query's epsilon across its measurements, so the n + 1 quantiles share it: each gets at most
epsilon / (n + 1), and a large n buys a long list of noisier quantiles. ``list[OFFSET(i)]``
(and ``SAFE_OFFSET``, ``ORDINAL``, ``SAFE_ORDINAL``) reads element i as BigQuery does. DuckDB's
``APPROX_QUANTILE(x, [q0, q1, ...])`` is the same list at the given fractions.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.errors import UnsupportedAggregate

#: The longest list: each quantile costs a share of the query's epsilon and a measurement.
MAX_QUANTILES = 100
_INDEX = {"OFFSET": 0, "SAFE_OFFSET": 0, "ORDINAL": 1, "SAFE_ORDINAL": 1}


def expand_quantile_lists(tree: exp.Expression) -> exp.Expression:
    """Every ``APPROX_QUANTILES(x, n)`` as its list of ``PERCENTILE_CONT``, every BigQuery
    ``[OFFSET(i)]`` as a plain index (in place)."""
    return tree.transform(_expanded, copy=False)


def _expanded(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.ApproxQuantiles):
        n = node.expression
        if not (isinstance(n, exp.Literal) and n.is_int and 1 <= int(n.this) <= MAX_QUANTILES):
            raise UnsupportedAggregate(
                f"APPROX_QUANTILES(x, n) needs a whole number n from 1 to {MAX_QUANTILES}, not "
                f"{n.sql(dialect='duckdb') if n is not None else 'none'}: it returns the n + 1 "
                "quantiles at 0, 1/n, ..., 1, each at a share of the query's epsilon")
        count = int(n.this)
        return exp.Array(expressions=[
            exp.PercentileCont(this=node.this.copy(),
                               expression=exp.Literal.number(repr(i / count)))
            for i in range(count + 1)])
    if isinstance(node, exp.ApproxQuantile) and isinstance(node.args.get("quantile"), exp.Array):
        # DuckDB's spelling of the same list, APPROX_QUANTILE(x, [q0, q1, ...]) (what
        # sqlglot writes BigQuery's APPROX_QUANTILES as): each q a constant the checker reads.
        return exp.Array(expressions=[
            exp.PercentileCont(this=node.this.copy(), expression=q.copy())
            for q in node.args["quantile"].expressions])
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
        index = node.expressions[0]
        if isinstance(index, exp.Anonymous) and str(index.this).upper() in _INDEX and \
                len(index.expressions) == 1:
            # The tree counts from 0 (sqlglot adds DuckDB's 1 when it writes the SQL).
            shift = -_INDEX[str(index.this).upper()]
            position = exp.Add(this=exp.Paren(this=index.expressions[0]),
                               expression=exp.Literal.number(shift)) if shift else \
                index.expressions[0]
            node.set("expressions", [position])  # in place: its list is expanded too
    return node
