"""The query pipeline, in order, in one place.

    SQL text -> parse -> bind -> check -> constants -> cost -> plan -> rewrite -> execute
             -> perturb -> post-process

Each pass is a module with one main function from the previous pass's output to its own. The
first six never read data, so a query's cost is known, and every refusal happens, before
anything runs; :func:`prepare` is those six. :func:`answer` runs the rest for a prepared plan.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import duckdb
from sqlglot import exp

from dpsql.aggregates import Measurement, MeasurementKind
from dpsql.bind import bind
from dpsql.check import check, refuse_float_overflow
from dpsql.constants import fold_constants
from dpsql.cost import check_cost
from dpsql.dates import normalise
from dpsql.engines import Engine, scratch
from dpsql.engines.duckdb_sql import DuckDBDialect
from dpsql.errors import QueryRefused, UnsupportedQuery
from dpsql.joins import empty_tables, physical
from dpsql.mechanisms import Mechanism, accuracy, validate_privacy_parameters
from dpsql.metadata import Metadata
from dpsql.parse import parse
from dpsql.perturb import perturb_cells
from dpsql.plan import Plan, calibrated, plan
from dpsql.postprocess import Result, check_outer, postprocess
from dpsql.quantiles import quantile_rank_accuracy
from dpsql.randomness import Randomness
from dpsql.rewrite import rewrite

PASSES = ("parse", "bind", "check", "constants", "cost", "plan", "rewrite", "execute", "perturb",
          "postprocess")




def prepare(sql: str, metadata: Metadata, epsilon: float = 1.0, delta: float = 0.0,
            mechanism: str = "laplace", dialect: str = "duckdb") -> Plan:
    """parse -> bind -> check -> plan: every refusal, no data read.

    Plans depend only on the SQL text, the parameters and the metadata, never on data, so they
    are cached per metadata object (``metadata.plans``, a thread-safe LRU; BI tools repeat
    their queries). A cached plan is shared by threads and never mutated: randomness enters
    only when a plan is answered, and its engine SQL is cached by the engine (:func:`engine_sql`).
    Refusals are not cached.
    """
    # Before the cache: True == 1 and Decimal(1) == 1.0, so an invalid parameter would
    # otherwise find the plan cached for a valid one.
    validate_privacy_parameters(epsilon, delta, mechanism)
    key = (sql, epsilon, delta, mechanism, dialect)
    result: Plan = metadata.plans.get_or_compute(
        key, lambda: _prepare(sql, metadata, epsilon, delta, mechanism, dialect))
    return result


def _prepare(sql: str, metadata: Metadata, epsilon: float, delta: float, mechanism: str,
             dialect: str) -> Plan:
    tree = parse(sql, dialect)
    normalise(tree)  # date functions as the checker knows them (dpsql.dates)
    try:
        checked = check_cost(fold_constants(check(bind(tree, metadata))))
        result = plan(checked, epsilon, delta, mechanism)
    except QueryRefused as e:
        if tree.find(exp.Join, exp.Subquery) is not None:
            e.args = tuple(_as_written(a) for a in e.args)
        raise
    check_outer(result)
    return result


_JOINED_NAME = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*?)__([A-Za-z_][A-Za-z0-9_]*)\b")


def _as_written(arg: object) -> object:
    """A refusal's text with the joined relation's column names (``alias__column``, see
    :mod:`dpsql.bind_joins`) spelt as the analyst wrote them, ``alias.column``."""
    return _JOINED_NAME.sub(r"\1.\2", arg) if isinstance(arg, str) else arg


def answer(p: Plan, engine: Engine, rng: Randomness) -> Result:
    """rewrite -> execute -> perturb -> post-process for a prepared plan, drawing the salt
    and the noise from ``rng``."""
    sql, salted = engine_sql(p, engine)
    # The salt keys the contribution-bounding sample: fresh, secret, never shown.
    parameters = [rng.salt()] if salted else []
    _, rows = engine.execute(sql, parameters)
    result = postprocess(p, perturb_cells(p, rows, rng))
    result.epsilon, result.delta = p.cost_epsilon, p.cost_delta
    return result


def engine_sql(p: Plan, engine: Engine | None) -> tuple[str, bool]:
    """The rewritten SQL for ``engine``'s physical column types, and whether it takes the salt
    ($1) of a contribution-bounding sample; :class:`~dpsql.database.Database` asks for it
    before charging, so that :func:`check_engine_query` refuses what the engine cannot run.

    Generated once per plan and engine, and cached by the engine (``engine.rewritten``), whose
    schema is fixed when it opens: the shared, cached plan itself is never mutated. The key is
    the plan's identity; the entry holds the plan, so that identity cannot be reused by another
    plan while the entry lives.
    """
    if engine is None:
        return _engine_sql(p, {}, None)
    entry = engine.rewritten.get(id(p))
    if entry is None or entry[0] is not p:
        sql, salted = _engine_sql(p, _schema(p, engine), engine)
        entry = engine.rewritten.put(id(p), (p, sql, salted))
    return entry[1], entry[2]


def _schema(p: Plan, engine: Engine | None) -> Mapping[str, str]:
    """The physical types of the plan's table (of every joined column, with joins)."""
    if engine is None:
        return {}
    if p.query.relation is not None:
        return physical(p.query.relation, engine.schema)
    return engine.schema.get(p.table.name.lower(), {})


def _engine_sql(p: Plan, schema: Mapping[str, str], engine: Engine | None
                ) -> tuple[str, bool]:
    tree = rewrite(p, schema)
    salted = tree.find(exp.Placeholder) is not None
    # DuckDB's semantics are the reference: every engine's query is checked there too, so a
    # query is refused the same way whatever the engine.
    sql = tree.sql(dialect=DuckDBDialect)
    check_engine_query(p, sql, salted, schema)
    if engine is not None and engine.raises_on_float_overflow:
        refuse_float_overflow([p.query.where, *[k.expression for k in p.keys],
                               *[m.arg for m in p.measurements]], p.table,
                              getattr(engine.dialect.generator_class, "ENGINE", engine.name))
    if engine is not None and engine.name != "duckdb":
        sql = engine.compile(tree, p, salted)  # its own SQL, checked on empty tables
    return sql, salted


def check_engine_query(p: Plan, sql: str, salted: bool, schema: Mapping[str, str]) -> None:
    """Run the engine query (DuckDB text, which opens with its WITH clause) on an empty table
    of the engine's physical types (its declared ones where unknown), so that an error the
    engine raises whatever the data (a type it will not accept) is a refusal before anything
    is charged, never an engine error after it."""
    empties = [f"{exp.to_identifier(name, quoted=True).sql(dialect='duckdb')} AS "
               f"({empty.sql(dialect='duckdb')})"
               for name, empty in empty_tables(p.query.relation, p.table, schema)]
    assert sql.startswith("WITH "), "the rewritten query starts with its CTEs"
    dry = f"WITH {', '.join(empties)}, {sql[len('WITH '):]}"
    try:
        scratch().execute(dry, [0] if salted else []).fetchall()
    except duckdb.Error as e:
        raise UnsupportedQuery(f"the engine cannot run this query: {str(e).splitlines()[0]}; "
                               "check the types of the expressions it computes") from None


@dataclass
class CellExplanation:
    output: str  # the aggregate as written
    measurement: str  # what the engine computes
    sensitivity: float
    epsilon: float
    mechanism: str
    noise_scale: float | None  # Laplace b or Gaussian sigma; None for the exponential mechanism
    accuracy: float  # 95% half-width (ranks for the exponential mechanism)
    accuracy_unit: str


@dataclass
class Explanation:
    sql: str  # the rewritten SQL; its parameter $1 is the secret salt of each run
    cells: list[CellExplanation]
    key_release: str
    epsilon: float
    delta: float
    rows_per_unit: int
    groups_per_unit: int


def explain(p: Plan, engine: Engine | None = None) -> Explanation:
    """What a plan will do, without reading data."""
    sql = rewrite(p, _schema(p, engine)).sql(dialect=DuckDBDialect, pretty=True)
    if engine is not None and engine.name != "duckdb":
        sql = engine_sql(p, engine)[0]  # what that engine runs (its dialect, one line)
    cells = []
    for cell in p.cells:
        for m in calibrated(cell):
            cells.append(_explain_measurement(cell.call.text, m))
    if p.threshold is not None:
        t = p.threshold
        shared = any(t.measurement is m for cell in p.cells for m in cell.measurements)
        if not shared:  # a measurement of its own; otherwise a cell's noisy count is reused
            cells.append(_explain_measurement("(key release)", t.measurement))
        key_release = (f"thresholding: a group is released when its noisy number of units "
                       f"({t.measurement.name}{', shared with a cell' if shared else ''}) is "
                       f">= {t.tau} (delta {t.delta:g})")
    elif p.domain is not None:
        key_release = f"public domain: all {len(p.domain)} key(s) are released, empty included"
    else:
        key_release = "no GROUP BY: one row"
    return Explanation(sql=sql, cells=cells, key_release=key_release, epsilon=p.cost_epsilon,
                       delta=p.cost_delta, rows_per_unit=p.table.rows_per_unit,
                       groups_per_unit=p.table.groups_per_unit if p.keys else 1)


def _explain_measurement(output: str, m: Measurement) -> CellExplanation:
    arg = m.arg.sql(dialect="duckdb") if m.arg is not None else "*"
    what = {MeasurementKind.COUNT: f"COUNT({arg})",
            MeasurementKind.UNITS: "COUNT(DISTINCT unit)",
            MeasurementKind.DISTINCT: f"COUNT(DISTINCT {arg})",
            MeasurementKind.HISTOGRAM: f"histogram({arg}, {m.buckets} buckets)"}.get(m.kind)
    if what is None:
        term = f"{arg} - {m.center:g}" if m.center else arg
        what = f"SUM(({term})^2)" if m.power == 2 else f"SUM({term})"
    if m.kind == MeasurementKind.HISTOGRAM:
        return CellExplanation(f"{output} [{m.name}]", what, m.l1, m.epsilon, "exponential",
                               None, quantile_rank_accuracy(m.buckets, m.epsilon, m.l1), "rank")
    sensitivity = m.l2 if m.mechanism == Mechanism.GAUSSIAN else m.l1
    assert m.noise is not None  # set by the plan for every measurement but histograms
    return CellExplanation(f"{output} [{m.name}]", what, sensitivity, m.epsilon, m.mechanism,
                           m.noise.scale, accuracy(m.noise), "value")
