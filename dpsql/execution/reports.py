"""ZetaSQL's ``report_format => 'JSON'``: an aggregate's released value as its JSON report.

``SELECT WITH DIFFERENTIAL_PRIVACY SUM(x, report_format => 'JSON') FROM t`` is lowered to
``DPSQL_REPORT(SUM(x))`` (:data:`dpsql.query.dp_clause.REPORT`); the checker turns the SUM into
its cell's placeholder, so the post-processing query holds ``DPSQL_REPORT(__a0)``, which
:func:`replace_reports` turns into a JSON column of ``__cells`` that :func:`report_columns`
fills, row by row, as ZetaSQL (and BigQuery) write it, keys sorted, no spaces::

    {"bounding_report":{"lower_bound":lo,"upper_bound":hi},
     "result":{"noise_confidence_interval":{"confidence_level":0.95,
               "lower_bound":-a,"upper_bound":a},"value":v}}

Because the report is a value of the post-processing query, the analyst's SQL can read it as
BigQuery users do: ``SUM(...).result.noise_confidence_interval``, ``JSON_VALUE(r,
'$.result.value')``, ``JSON_QUERY_ARRAY(APPROX_QUANTILES(x, 4, ...).result)``, or in a query
over the released rows (:mod:`dpsql.query.over_released`); BigQuery's JSON functions are read
by :mod:`dpsql.query.bigquery_json`. The column's type is ``JSON``: the DB-API returns the JSON
text (a ``str``, as DuckDB's own client does), the CLI prints it, the wire server sends it as
``json`` (OID 114).

**What a report holds: released values only.** Everything in it is computed from what the
answer already releases and from the plan (which reads no data), so it costs nothing:

* ``value``: the cell's noisy value;
* ``noise_confidence_interval``: for a SUM, COUNT, AVG or variance, the 95% interval of the
  *noise*, centred on zero as ZetaSQL's is, ``a`` the cell's accuracy half-width from the
  mechanism's public scale (``cursor.accuracy``); for a quantile (an exponential mechanism,
  whose error is in ranks, not values), the clamping bounds ``[lo, hi]`` the quantile was
  drawn within: an interval in value space that holds the true (clamped) quantile and the
  released one whatever the data, where ZetaSQL's quantile tree narrows it with its released
  noisy tree, which dpsql does not release;
* ``bounding_report``: only where the aggregate's bounds were chosen from the data
  (:mod:`dpsql.privacy.auto_values`): the drawn ``lower_bound`` and ``upper_bound``, which the
  exponential mechanism released already (``Result.chosen_bounds``). ZetaSQL adds
  ``num_inputs`` and ``num_outside``, counts of private rows: dpsql does not release them (an
  exact count of private rows would leak; a noisy one would need a share of the budget).

An APPROX_QUANTILES report holds ``"result": [{"noise_confidence_interval": ..., "value": q0},
...]``, one element per quantile. ``DPSQL_REPORT`` of anything but one cell or a quantile list
is refused when the query is planned (:func:`check_reports`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
from sqlglot import exp

from dpsql.errors import UnsupportedQuery
from dpsql.privacy.aggregates import Cell
from dpsql.privacy.auto_values import chosen_bounds
from dpsql.privacy.plan import Plan
from dpsql.query.dp_clause import REPORT

CONFIDENCE_LEVEL = 0.95
#: The JSON column of ``__cells`` that holds the i-th report of the outer query
_COLUMN = "__report_{}"


def _reports(tree: exp.Expr) -> list[exp.Anonymous]:
    return [n for n in tree.find_all(exp.Anonymous) if str(n.this).upper() == REPORT]


def check_reports(plan: Plan) -> None:
    """Refuse a report of anything but one aggregate's cell or an APPROX_QUANTILES list, and a
    report in a query over the released rows (its argument would not be a released cell)."""
    if plan.query.post is not None and _reports(plan.query.post):
        raise UnsupportedQuery("report_format => 'JSON' reports an aggregate of the private "
                               "query itself, not of a query over its answer; move it inside")
    for node in _reports(plan.query.outer):
        _cells(plan, node)


def _cells(plan: Plan, node: exp.Anonymous) -> list[Cell]:
    """The cells a report shows: one, or a quantile list's."""
    args = node.expressions
    parts = args[0].expressions if len(args) == 1 and isinstance(args[0], exp.Array) else args
    by_name = {c.call.placeholder: c for c in plan.cells}
    cells = [by_name.get(p.name) if isinstance(p, exp.Column) else None for p in parts]
    if len(args) != 1 or not cells or None in cells:
        raise UnsupportedQuery("report_format => 'JSON' reports one aggregate (SUM, COUNT, AVG, "
                               "a variance, a quantile or APPROX_QUANTILES), written with it: "
                               "SUM(x, report_format => 'JSON'); not an expression")
    return [c for c in cells if c is not None]


def replace_reports(outer: exp.Select) -> list[exp.Anonymous]:
    """``outer`` (a copy, changed in place) with each report read from its JSON column of
    ``__cells``; the reports in the order of their columns."""
    found = _reports(outer)
    for i, node in enumerate(found):
        node.replace(exp.cast(exp.column(_COLUMN.format(i)), exp.DataType.build("JSON")))
    return found


def report_names(count: int) -> list[str]:
    """The ``__cells`` columns of ``count`` reports (typed VARCHAR: the query casts them)."""
    return [_COLUMN.format(i) for i in range(count)]


def report_columns(plan: Plan, reports: Sequence[exp.Anonymous],
                   values: dict[str, np.ndarray], accuracy: dict[str, np.ndarray],
                   rows: int) -> dict[str, np.ndarray]:
    """The JSON text of each report, row by row, from the released ``values`` and their
    ``accuracy`` (by placeholder; none when typing the answer)."""
    # none before the bounds are drawn (the answer typed when the query is planned)
    drawn = chosen_bounds(plan) if all(v.value is not None for v in plan.values) else None
    drawn = drawn or {}
    columns = {}
    for i, node in enumerate(reports):
        cells = _cells(plan, node)
        listed = isinstance(node.expressions[0], exp.Array)
        texts = []
        for row in range(rows):
            parts = [_result(c, values[c.call.placeholder][row],
                             _at(accuracy.get(c.call.placeholder), row)) for c in cells]
            out: dict[str, object] = {"result": parts if listed else parts[0]}
            bounds = _drawn(cells[0], drawn)
            if bounds is not None:
                out["bounding_report"] = {"lower_bound": _plain(bounds[0]),
                                          "upper_bound": _plain(bounds[1])}
            # a date or timestamp (a quantile of dates) as its ISO text
            texts.append(json.dumps(out, sort_keys=True, separators=(",", ":"), default=str))
        columns[_COLUMN.format(i)] = np.array(texts, dtype=object)
    return columns


def _result(cell: Cell, value: object, half: float | None) -> dict[str, object]:
    """One released value and its interval (module docstring)."""
    if cell.accuracy_unit == "value":
        lower, upper = (None, None) if half is None else (-half, half)
    else:  # a quantile: the bounds it was drawn within
        bound = cell.bound
        lower, upper = (bound.lo, bound.hi) if bound is not None and bound.numeric \
            and bound.finite else (None, None)
        if bound is not None and bound.kind == "int" and lower is not None:
            lower, upper = int(lower), int(upper)  # type: ignore[arg-type]
    return {"noise_confidence_interval": {"confidence_level": CONFIDENCE_LEVEL,
                                          "lower_bound": lower, "upper_bound": upper},
            "value": _plain(value)}


def _at(widths: np.ndarray | None, row: int) -> float | None:
    if widths is None:
        return None
    half = float(widths[row])
    return half if np.isfinite(half) else None


def _drawn(cell: Cell, drawn: dict[str, tuple[float, float]]) -> tuple[float, float] | None:
    """The bounds chosen from the data for ``cell``'s column, if any."""
    arg = cell.call.arg
    if isinstance(arg, exp.Least) and isinstance(arg.this, exp.Greatest):
        arg = arg.this.this  # the column clamped to its drawn bounds (auto_values.clamped)
    # a plain column: the bounds are the aggregate's own
    return drawn.get(arg.name.lower()) if isinstance(arg, exp.Column) else None


def _plain(value: object) -> object:
    """A JSON value of a numpy or Python value (None for NULL, NaN and infinities)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
