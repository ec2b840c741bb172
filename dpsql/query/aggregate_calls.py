"""The aggregates an analyst may write, as the checker reads them: the SQL that names each
kind (:data:`FUNCTIONS`) and each call as written (:class:`AggregateCall`).

The vocabulary only: what each kind releases, and its privacy argument, is its entry of
:data:`dpsql.privacy.aggregates.AGGREGATES`, by the same kinds.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dpsql.query.dp_clause import AVG_PER_GROUP, SUM_PER_GROUP

#: Each kind of aggregate -> the sqlglot node types and function names (upper case) that mean
#: it (BigQuery's per-group SUM and AVG, as the clause lowers them: :mod:`dpsql.query.dp_clause`).
FUNCTIONS: dict[str, tuple[type[exp.Expression] | str, ...]] = {
    "count": (exp.Count, exp.CountIf),
    "sum": (exp.Sum, SUM_PER_GROUP),
    "avg": (exp.Avg, AVG_PER_GROUP),
    "quantile": (exp.Median, exp.PercentileCont, exp.Quantile, exp.ApproxQuantile, exp.Min,
                 exp.Max, "QUANTILE", "PERCENTILE"),
    "var_samp": (exp.Variance, "VAR", "VARIANCE_SAMP"),
    "var_pop": (exp.VariancePop,),
    "stddev_samp": (exp.Stddev, exp.StddevSamp, "STDEV"),
    "stddev_pop": (exp.StddevPop,),
}


@dataclass(frozen=True)
class AggregateCall:
    """One aggregate as the analyst wrote it, its argument over base columns."""

    kind: str  # a key of FUNCTIONS (and of dpsql.privacy.aggregates.AGGREGATES)
    arg: exp.Expression | None  # None for COUNT(*)
    distinct: bool
    quantile: float | None
    text: str  # the original SQL, for column names and explain
    placeholder: str
    #: SUM and AVG: BigQuery's contribution_bounds_per_group, each unit's total (SUM) or
    #: average (AVG) in a group clamped
    per_group: tuple[float, float] | None = None
    #: AVG only: ZetaSQL's average of each unit's average (``per_group`` None: the bounds of x)
    per_person: bool = False


def kind_of(function: exp.Expression) -> str | None:
    """The kind of an aggregate function node, or None if it is not one of ours."""
    name = str(function.this).upper() if isinstance(function, exp.Anonymous) else None
    for kind, functions in FUNCTIONS.items():
        for f in functions:
            if (isinstance(f, str) and f == name) or (isinstance(f, type) and
                                                      type(function) is f):
                return kind
    return None
