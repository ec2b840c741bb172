"""ZetaSQL's ``report_format => 'JSON'``: an aggregate's output column as its JSON report.

``SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*, report_format => 'JSON') AS n FROM t`` answers the
column ``n`` as ZetaSQL (and BigQuery) write it, keys sorted, no spaces::

    {"result":{"noise_confidence_interval":{"confidence_level":0.95,
     "lower_bound":-a,"upper_bound":a},"value":v}}

``v`` is the released value and ``a`` its 95% accuracy half-width, which dpsql computes for
every cell (``cursor.accuracy``): the interval is that of the *noise*, centred on zero, as
ZetaSQL's is. Where the column's bounds were chosen from the data (an automatic value bound,
a DP release already in the answer) the report adds ``"bounding_report":{"lower_bound":
lo,"upper_bound":hi}``. The column's type is ``JSON``: the DB-API returns the JSON text (a
``str``, as DuckDB's own client does), the CLI prints it, the wire server sends it as ``json``
(OID 114). Everything here is post-processing of the released answer: it costs nothing.

Only a whole output column that is one noisy aggregate of value accuracy can be reported
(:func:`check_reports`, before anything is charged): not an expression over cells, a quantile
(whose accuracy is in ranks), public or local rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from sqlglot import exp

from dpsql.errors import UnsupportedQuery
from dpsql.execution.free import FreeAnswer
from dpsql.execution.postprocess import Result, ResultColumn
from dpsql.privacy.aggregates import Cell
from dpsql.privacy.plan import Plan
from dpsql.query.dp_clause import resolve_query

CONFIDENCE_LEVEL = 0.95


def check_reports(p: object, reports: Sequence[int]) -> None:
    """Refuse ``report_format => 'JSON'`` where no report can be made (module docstring); ``p``
    is the prepared query (a :class:`Plan` or another route)."""
    if not reports or isinstance(p, FreeAnswer):  # a free answer's columns only: no cells
        return
    if not isinstance(p, Plan):
        raise UnsupportedQuery("report_format => 'JSON' reports one noisy aggregate of a "
                               "private query; this query is answered otherwise (public "
                               "tables, local rows, two releases): remove report_format")
    for index in reports:
        cell = reported_cell(p, index)
        if cell is None or cell.accuracy_unit != "value":
            raise UnsupportedQuery("report_format => 'JSON' reports a SUM, COUNT, AVG or a "
                                   "variance asked as a whole output column; remove it from "
                                   f"output column {index + 1}")


def reported_cell(plan: Plan, index: int) -> Cell | None:
    """The cell output column ``index`` merely shows, or None."""
    outer = plan.query.outer.expressions
    if index >= len(outer):
        return None
    node = outer[index].unalias()
    name = node.name if isinstance(node, exp.Column) else ""
    return next((c for c in plan.cells if c.call.placeholder == name), None)


def report_types(columns: list[tuple[str, str]], sql: str) -> list[tuple[str, str]]:
    """(name, type) of an answer's ``columns`` (from its plan) with ``sql``'s report columns
    typed ``JSON``: what a front door says before the query runs (the server's Describe)."""
    reports = resolve_query(sql, None, 0.0, None).reports
    return [(name, "JSON" if i in reports else kind) for i, (name, kind) in enumerate(columns)]


def reported(result: Result, reports: Sequence[int], plan: object = None) -> Result:
    """``result`` with the ``reports`` columns as JSON reports (a new Result)."""
    if not reports:
        return result
    chosen = result.chosen_bounds or {}
    columns = list(result.columns)
    for index in reports:
        columns[index] = ResultColumn(columns[index].name, "JSON", None)
    rows, accuracies = [], []
    for row, accuracy in zip(result.rows, result.accuracy, strict=True):
        values, widths = list(row), list(accuracy)
        for index in reports:
            values[index] = report(values[index], accuracy[index],
                                   _bounds(plan, index, chosen))
            widths[index] = None  # in the report: the column is not a number
        rows.append(tuple(values))
        accuracies.append(tuple(widths))
    return replace(result, columns=columns, rows=rows, accuracy=accuracies)


def _bounds(plan: object, index: int, chosen: dict[str, tuple[float, float]]
            ) -> tuple[float, float] | None:
    if not chosen or not isinstance(plan, Plan):
        return None
    cell = reported_cell(plan, index)
    arg = cell.call.arg if cell is not None else None
    name = arg.name.lower() if isinstance(arg, exp.Column) else ""
    return chosen.get(name)


def report(value: object, accuracy: float | None, bounds: tuple[float, float] | None) -> str:
    """One cell's JSON report (module docstring)."""
    half = float(accuracy) if accuracy is not None else None
    out: dict[str, object] = {"result": {
        "noise_confidence_interval": {"confidence_level": CONFIDENCE_LEVEL,
                                      "lower_bound": None if half is None else -half,
                                      "upper_bound": half},
        "value": _plain(value)}}
    if bounds is not None:
        out["bounding_report"] = {"lower_bound": _plain(bounds[0]),
                                  "upper_bound": _plain(bounds[1])}
    return json.dumps(out, sort_keys=True, separators=(",", ":"))


def _plain(value: object) -> object:
    """A JSON number of a numpy or Python value (None for NULL)."""
    if isinstance(value, np.generic):
        return value.item()
    return value
