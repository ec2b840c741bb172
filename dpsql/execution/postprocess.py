"""Pass 10, postprocess: the rest of the analyst's SELECT over the noisy cells only.

Outer expressions, HAVING, ORDER BY, LIMIT/OFFSET, DISTINCT and windows over aggregates run in
DuckDB on a scratch in-memory connection whose only table is the released groups with their
noisy cells (``__cells``). The private data is not reachable from there, so nothing computed
from exact aggregates can reach the answer: this is post-processing, which costs no privacy.
A plain projection of keys and cells skips the scratch query.
"""

from __future__ import annotations

import datetime as dt
import math

import duckdb
import numpy as np
from sqlglot import exp

from dpsql.engines.empty import with_empty
from dpsql.errors import UnsupportedQuery
from dpsql.execution.perturb import NoisyCells, typed
from dpsql.execution.reports import check_reports, replace_reports, report_columns, report_names
from dpsql.execution.result import Result as Result  # its home: light, for stored answers
from dpsql.execution.result import ResultColumn as ResultColumn
from dpsql.metadata.metadata import ENGINE_TYPES
from dpsql.privacy.plan import Plan
from dpsql.query.local_evaluator import run_over, scratch
from dpsql.query.over_released import compose

_CELLS = "__cells"
_ACC = "__acc_"


def postprocess(plan: Plan, cells: NoisyCells) -> Result:
    """Evaluate the outer query over the noisy cells."""
    outer = plan.query.outer
    names = plan.query.output_names
    if plan.query.post is not None:  # a query over the answer: its columns are computed
        return _run_outer(plan, cells, names, [None] * len(names))
    direct = [_direct_cell(e) for e in outer.expressions]
    if _is_projection(outer):
        return _project(plan, cells, names, direct)
    return _run_outer(plan, cells, names, direct)


def _direct_cell(projection: exp.Expression) -> str | None:
    """The placeholder that a select item merely renames, if any."""
    node = projection.this if isinstance(projection, exp.Alias) else projection
    if isinstance(node, exp.Column) and node.name.startswith("__"):
        return node.name
    return None


def _is_projection(outer: exp.Select) -> bool:
    clauses = ("where", "having", "order", "limit", "offset", "distinct", "qualify")
    return all(_direct_cell(e) for e in outer.expressions) and not any(
        outer.args.get(c) for c in clauses)


def _cell_columns(plan: Plan, cells: NoisyCells) -> dict[str, np.ndarray]:
    columns: dict[str, np.ndarray] = {}
    for i, key in enumerate(plan.keys):
        columns[key.name] = np.array([k[i] for k in cells.keys], dtype=object)
    columns.update(cells.values)
    return columns


def _project(plan: Plan, cells: NoisyCells, names: list[str],
             direct: list[str | None]) -> Result:
    columns = _cell_columns(plan, cells)
    placeholders = [d for d in direct if d is not None]
    data = [columns[p].tolist() for p in placeholders]
    rows = list(zip(*data, strict=True)) if data else []
    acc_columns = [cells.accuracy.get(p) for p in placeholders]
    accuracy = [tuple(None if a is None else float(a[i]) for a in acc_columns)
                for i in range(len(rows))]
    result_columns = [ResultColumn(n, _type_of(plan, p), _unit(plan, p))
                      for n, p in zip(names, placeholders, strict=True)]
    return Result(result_columns, rows, accuracy)


def _run_outer(plan: Plan, cells: NoisyCells, names: list[str],
               direct: list[str | None]) -> Result:
    carry = [] if plan.query.outer.args.get("distinct") else [
        d for d in dict.fromkeys(direct) if d and d in cells.accuracy]
    columns = _cell_columns(plan, cells)
    for d in carry:
        columns[f"{_ACC}{d}"] = cells.accuracy[d]
    outer = outer_sql(plan, carry)
    reports = replace_reports(outer)  # report_format => 'JSON' (dpsql.execution.reports)
    columns.update(report_columns(plan, reports, cells.values, cells.accuracy, len(cells.keys)))
    sql = outer.sql(dialect="duckdb", copy=False)  # a fresh tree
    out_names, types, rows = run_over(sql, _CELLS, columns)
    width = len(names)
    accuracy = []
    for row in rows:
        by_cell = dict(zip(carry, row[width:], strict=True))
        accuracy.append(tuple(_float(by_cell.get(d)) if d else None for d in direct))
    result_columns = [ResultColumn(n, t, _unit(plan, d) if d else None)
                      for n, t, d in zip(out_names[:width], types[:width], direct, strict=True)]
    return Result(result_columns, [tuple(r[:width]) for r in rows], accuracy)


def reads_nothing(plan: Plan) -> bool:
    """Whether the outer query is ``LIMIT 0`` (or ``FETCH FIRST 0 ROWS``): its answer is
    empty whatever the data, so it needs no data and no budget (see :func:`typed_empty`)."""
    limit = plan.query.outer.args.get("limit")
    count = limit.args.get("count") if isinstance(limit, exp.Fetch) else \
        limit.expression if isinstance(limit, exp.Limit) else None
    return isinstance(count, exp.Literal) and not count.is_string and count.this == "0"


_DUMMY_KEYS: dict[str, object] = {"int": 1, "float": 1.0, "bool": True,
                                  "date": dt.date(2000, 1, 1), "text": "a",
                                  "timestamp": dt.datetime(2000, 1, 1)}


def _dummy_key(key: object) -> object:
    domain = getattr(key, "domain", None)
    if domain:
        for value in domain:
            if value is not None:
                return value
    kind = getattr(getattr(key, "bound", None), "kind", "text")
    return _DUMMY_KEYS.get(kind, "a")


def made_up_answer(plan: Plan) -> Result:
    """Post-processing run on one *made-up* group (keys and cells set to 1, or the first value
    of a key's public domain): the answer's columns, typed by the library's own code path, fed
    with nothing that came from data. Its rows mean nothing; only its columns are used."""
    keys = [tuple(_dummy_key(k) for k in plan.keys)]
    values = {}
    for cell in plan.cells:
        dtype = np.int64 if cell.type == "BIGINT" else np.float64
        values[cell.call.placeholder] = typed(np.ones(1, dtype=dtype), cell.type)
    return postprocess(plan, NoisyCells(keys=keys, values=values, accuracy={}))


def typed_empty(plan: Plan) -> Result:
    """The answer to a query that :func:`reads_nothing`: no rows, the plan's typed columns.
    It depends on the query text and the metadata only, so releasing it costs no privacy."""
    columns = made_up_answer(plan).columns
    return Result(columns, [], [])


def outer_sql(plan: Plan, carry: list[str]) -> exp.Select:
    """The analyst's outer query over ``__cells``, plus the accuracy of the ``carry`` cells."""
    outer = plan.query.outer.copy()
    names = plan.query.released_names or plan.query.output_names
    projections = [exp.alias_(e.this if isinstance(e, exp.Alias) else e, name, quoted=True)
                   for e, name in zip(outer.expressions, names, strict=True)]
    extra = [exp.alias_(exp.column(f"{_ACC}{d}"), f"{_ACC}{d}") for d in carry]
    outer.set("expressions", projections + extra)
    outer = outer.from_(_CELLS)
    having = outer.args.get("having")
    if having is not None:  # each row of __cells is already one group: HAVING filters rows
        outer.set("having", None)
        outer = outer.where(having.this)
    if plan.query.post is not None:  # the analyst's query over this answer
        outer = compose(plan.query.post, outer)
        outer.set("expressions", [
            exp.alias_(e.this if isinstance(e, exp.Alias) else e, name, quoted=True)
            for e, name in zip(outer.expressions, plan.query.output_names, strict=True)])
    return outer


def check_outer(plan: Plan) -> None:
    """Bind the outer query against an empty, typed table of cells, so that an error in it is
    reported when the query is planned, before anything is charged or run."""
    if _is_projection(plan.query.outer) and plan.query.post is None:
        return
    check_reports(plan)
    outer = outer_sql(plan, [])
    reports = report_names(len(replace_reports(outer)))
    typed = [exp.alias_(exp.cast(exp.Null(), _type_of(plan, name)), name)
             for name in [k.name for k in plan.keys] + [c.call.placeholder for c in plan.cells]
             + reports]
    sql = with_empty(outer, [(_CELLS, exp.select(*typed).limit(0))]).sql(
        dialect="duckdb", copy=False)
    try:
        scratch().execute(sql).fetchall()
    except duckdb.Error as e:
        hint = ("; a report (report_format => 'JSON') is JSON: read its numbers as "
                "DOUBLE(r.result.value)") if reports else ""
        raise UnsupportedQuery(f"the query's outer part (over the aggregates) is not valid: "
                               f"{str(e).splitlines()[0]}{hint}") from None


def _float(value: object) -> float | None:
    if value is None:
        return None
    f = float(value)  # type: ignore[arg-type]
    return f if math.isfinite(f) else None


def _type_of(plan: Plan, placeholder: str) -> str:
    for cell in plan.cells:
        if cell.call.placeholder == placeholder:
            return cell.type
    for key in plan.keys:
        if key.name == placeholder:
            return ENGINE_TYPES.get(key.bound.kind, "VARCHAR")
    return "VARCHAR"


def _unit(plan: Plan, placeholder: str | None) -> str | None:
    for cell in plan.cells:
        if cell.call.placeholder == placeholder:
            return cell.accuracy_unit
    return None
