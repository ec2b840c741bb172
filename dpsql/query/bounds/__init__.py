"""Interval arithmetic over row-level SQL expressions, from the declared column bounds.

``bound(expression, table)`` returns a :class:`Bound`: the kind of value (int, float, bool, text,
date), an interval [lo, hi] that contains every value the expression can take on a row whose
columns were clamped to their declared bounds, and whether it can be NULL. It never reads data.

This package is also the allow list of row-level SQL: a node type without a rule in
:data:`RULES` is refused with :class:`~dpsql.errors.ForbiddenFunction`. The rules live in one
module per family, assembled here in one place:

* :mod:`dpsql.query.bounds.core` -- the dispatcher, columns, literals, predicates and conditions;
* :mod:`dpsql.query.bounds.numbers` -- arithmetic and numeric functions;
* :mod:`dpsql.query.bounds.branches` -- CASE, IF, COALESCE, NULLIF and CAST;
* :mod:`dpsql.query.bounds.temporal` -- text and date functions.

The rewrite pass makes each allowed node *total* (:mod:`dpsql.query.total_expressions`), so the
intervals hold for all rows, and an error can never depend on private values.
"""

from __future__ import annotations

from dpsql.query.bounds import branches, numbers, temporal
from dpsql.query.bounds.core import (
    COMPARISONS,
    INF,
    INT_LIMIT,
    MAX_AGGREGATED,
    RULES,
    Bound,
    bound,
    condition,
    numeric_bound,
)

for _family in (numbers, branches, temporal):
    RULES.update(_family.RULES)

__all__ = ["COMPARISONS", "INF", "INT_LIMIT", "MAX_AGGREGATED", "RULES", "Bound", "bound",
           "condition", "numeric_bound"]
