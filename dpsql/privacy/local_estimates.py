"""Debiased estimates over local DP rows (:mod:`dpsql.privacy.local`): post-processing of a
release, free, each with its variance.

Randomized rows are biased towards uniform: a count of ``col = v`` over n released rows has
expectation ``c_v p + (n - c_v) q`` for c_v true rows with v (p, q: the column's keep and flip
probabilities, in the release parameters). Inverting it:

    estimate(c_v) = (observed_v - n q) / (p - q)
    Var = (n q (1 - q) + c_v (p - q)(1 - p - q)) / (p - q)^2

(the observed count is a sum of n independent coins: c_v of them heads with probability p,
the others with q), reported with the estimate plugged in for c_v (clipped to [0, n]).
The same holds within any subset selected by other *randomized* columns, since a column is
randomized independently of the others given the true row.

A column released by clamped discrete Laplace has unbiased values (of the clamped truth): its
mean is the released values' mean, its variance estimated by their sample variance over n
(which includes the noise's ``2a/(1-a)^2`` grid steps squared per value).

* :func:`estimate_counts`: a pandas helper, every value of one column;
* :func:`rr_count_sql`: the same estimate as SQL over the release (the documented rewrite of
  ``rr_count(column, value)``), for a release read as a public table or in DuckDB;
* :func:`estimate_mean`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sqlglot import exp

from dpsql.errors import DataError


def debiased_count(observed: float, n: float, p: float, q: float) -> tuple[float, float]:
    """The unbiased estimate of a value's true count from its ``observed`` count among ``n``
    rows released by randomized response (keep ``p``, flip to it ``q``), and its variance."""
    if not p > q:
        raise DataError("the column was released with p <= q: it carries no information")
    estimate = (observed - n * q) / (p - q)
    plugged = min(max(estimate, 0.0), n)
    variance = (n * q * (1 - q) + plugged * (p - q) * (1 - p - q)) / (p - q) ** 2
    return estimate, variance


def column_params(params: Mapping[str, Any], column: str) -> Mapping[str, Any]:
    """One column's parameters from a release's (or the column's own, passed through)."""
    if "release" in params:
        return params
    columns = params.get("columns", {})
    if column not in columns:
        withheld = column in params.get("withheld", ())
        raise DataError(f"column {column!r} was {'withheld' if withheld else 'not released'}"
                        " in this release: there is nothing to estimate")
    return columns[column]  # type: ignore[no-any-return]


def estimate_counts(df: Any, column: str, params: Mapping[str, Any]) -> Any:
    """A pandas DataFrame with, for every value of ``column``'s released domain: the observed
    count in ``df`` (the release, or rows of it), the debiased estimate, its variance and a
    95% interval half-width (normal approximation)."""
    import pandas as pd  # type: ignore[import-untyped]  # an analysis dependency

    spec = column_params(params, column)
    if "domain" not in spec:
        raise DataError(f"column {column!r} was released by {spec.get('release')}, not "
                        "randomized response: use estimate_mean")
    values = df[column]
    n = float(len(values))
    rows = []
    for v in _domain(spec):
        observed = float(values.isna().sum() if v is None else (values == v).sum())
        estimate, variance = debiased_count(observed, n, spec["p"], spec["q"])
        rows.append((v, observed, estimate, variance, 1.96 * math.sqrt(variance)))
    return pd.DataFrame(rows, columns=["value", "observed", "estimate", "variance", "ci95"])


def estimate_mean(values: Sequence[float], params: Mapping[str, Any], column: str = ""
                  ) -> tuple[float, float]:
    """The mean of a column released by clamped discrete Laplace, and its variance."""
    spec = column_params(params, column) if column else params
    if spec.get("release") != "laplace":
        raise DataError("estimate_mean needs a column released by laplace")
    xs = [float(v) for v in values]
    n = len(xs)
    if n < 2:
        raise DataError("estimate_mean needs at least two released rows")
    mean = sum(xs) / n
    return mean, sum((x - mean) ** 2 for x in xs) / (n - 1) / n


def rr_count_sql(column: str, value: Any, params: Mapping[str, Any]) -> str:
    """``rr_count(column, value)`` rewritten as SQL over the release: the debiased count of
    ``value`` (:func:`debiased_count`) among the rows the query reads."""
    spec = column_params(params, column)
    p, q = float(spec["p"]), float(spec["q"])
    col = exp.column(column, quoted=True)
    test = exp.Is(this=col, expression=exp.Null()) if value is None else \
        exp.EQ(this=col, expression=exp.convert(value))
    hits = f"COUNT(*) FILTER (WHERE {test.sql(dialect='duckdb')})"
    return f"(({hits}) - COUNT(*) * {q!r}) / {p - q!r}"


def _domain(spec: Mapping[str, Any]) -> list[Any]:
    """The released values; dates come back from JSON as ISO text."""
    import datetime as dt

    if spec.get("release") == "grain":
        return [None if v is None else dt.date.fromisoformat(v) for v in spec["domain"]]
    return list(spec["domain"])
