"""The query pipeline, in order, in one place.

    SQL text -> parse -> bind -> check -> fold_constants -> cost -> plan -> rewrite -> execute
             -> perturb -> post-process

Each pass is a module with one main function from the previous pass's output to its own. The
first six never read data, so a query's cost is known, and every refusal happens, before
anything runs; :func:`prepare_plan` is those six (a :class:`~dpsql.routes.planner.Planner` caches
what it prepares). :func:`answer` runs the rest for a prepared plan.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import duckdb
from sqlglot import exp

from dpsql.cache import LRU
from dpsql.engines import Engine
from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.engines.duckdb_engine.dry import run_dry
from dpsql.errors import EngineError, QueryTooComplex, UnsupportedQuery
from dpsql.execution.choices import UNITS_TABLE, choices_from, split, unit_choices, unit_table
from dpsql.execution.expected import expected
from dpsql.execution.perturb import perturb_cells
from dpsql.execution.postprocess import Result, check_outer, postprocess
from dpsql.execution.rewrite import rewrite, shares_totals, unit_counts, unit_values
from dpsql.explanation.bias import bounding_notes
from dpsql.explanation.explanation import CellExplanation, Explanation
from dpsql.metadata.contribution import (
    ContributionBounds,
    check_caps,
    check_per_group,
    check_unit,
    requested,
)
from dpsql.metadata.metadata import ColumnType, Metadata
from dpsql.privacy.aggregates import Measurement, MeasurementKind
from dpsql.privacy.auto_bounds import automatic, choose_k, planned, with_rows
from dpsql.privacy.auto_values import chosen_bounds, draw, with_values
from dpsql.privacy.mechanisms import Mechanism, accuracy
from dpsql.privacy.plan import AutoValue, Plan, calibrated, plan
from dpsql.privacy.quantiles import quantile_rank_accuracy
from dpsql.privacy.randomness import Randomness
from dpsql.query import dry_shapes
from dpsql.query.bind import BoundQuery, bind
from dpsql.query.check import check, refuse_float_overflow
from dpsql.query.cost import check_cost
from dpsql.query.dates import normalise
from dpsql.query.dry_runs import empty_creates, empty_tables
from dpsql.query.fold_constants import fold_constants
from dpsql.query.joins import PublicRows, physical
from dpsql.query.parse import only_select, parse, parse_query
from dpsql.query.quantile_lists import expand_quantile_lists

#: The passes, in the order :meth:`dpsql.database.Database.run` runs them (it parses once:
#: ``parse_query``): :func:`prepare_plan` runs bind to plan (no data read), :func:`answer` runs
#: rewrite to postprocess (``execute`` is the engine's :meth:`~dpsql.engines.Engine.execute`).
#: docs/architecture.md's table lists them so.
PASSES: tuple[Callable[..., Any], ...] = (
    parse_query, bind, check, fold_constants, check_cost, plan, rewrite, Engine.execute,
    perturb_cells, postprocess)
#: Plans calibrated to an automatic k, per (plan identity, k): see :func:`_chosen`.
_CHOSEN: LRU[tuple[int, int], tuple[Plan, Plan]] = LRU(512)
#: Plans calibrated to automatic value bounds, per (plan identity, bounds): see :func:`_valued`.
_VALUED: LRU[tuple[int, tuple[float, ...]], tuple[Plan, Plan]] = LRU(512)
#: Per plan identity, its engine and SQL where the per-unit table is shared: the statement
#: keeping it and the choices over it (:func:`_shared_units`); the plan's query reading its
#: totals (:func:`_shared_query`).
_UNITS: LRU[int, tuple[Plan, Engine, str, str]] = LRU(512)
_TOTALS: LRU[int, tuple[Plan, Engine, str, bool]] = LRU(512)


def prepare_plan(sql: str | exp.Expression, metadata: Metadata, public: PublicRows | None,
                 epsilon: float = 1.0, delta: float = 0.0, mechanism: str = "laplace",
                 dialect: str = "duckdb", bounds: ContributionBounds | None = None) -> Plan:
    """parse -> bind -> check -> fold_constants -> cost -> plan: every refusal, no private data
    read (a join with a public table reads ``public``: :mod:`dpsql.query.joins`). ``sql`` is the
    text, or its tree already parsed (:func:`dpsql.query.parse.parse_query`), which this mutates.
    ``bounds``: the query's own contribution bounds (:mod:`dpsql.metadata.contribution`).

    Not cached: :class:`dpsql.routes.planner.Planner` caches what it prepares, so call
    :meth:`~dpsql.routes.planner.Planner.prepare`.
    """
    tree = parse(sql, dialect) if isinstance(sql, str) else only_select(sql)
    normalise(tree)  # date functions as the checker knows them (dpsql.query.dates)
    expand_quantile_lists(tree)  # APPROX_QUANTILES as a list of quantiles
    # Refusals quote the analyst's text (dpsql.query.dates.written), joined columns included.
    try:
        checked = check_cost(fold_constants(check(bind_in_force(tree, metadata, public,
                                                                bounds))))
        result = (planned if automatic(checked) else plan)(  # k from the data, if automatic
            checked, epsilon, delta, mechanism)
    except RecursionError:  # a shape parse's depth limit lets through: refused, not a crash
        raise QueryTooComplex("the query's expressions nest too deeply to be checked; flatten "
                              "them") from None
    check_outer(result)
    return result


def bind_in_force(tree: exp.Select, metadata: Metadata, public: PublicRows | None,
                  bounds: ContributionBounds | None) -> BoundQuery:
    """bind, then the table carries the contribution bounds in force: the one place every
    later pass reads k and g from (:func:`dpsql.metadata.contribution.in_force`)."""
    if bounds is None:
        return _single_auto(bind(tree, metadata, public))
    asked = replace(metadata, tables={name: requested(table, bounds)
                                      for name, table in metadata.tables.items()})
    bound = _single_auto(bind(tree, asked, public))
    read = ([s.table.name for s in bound.relation.sources if not s.hidden]
            if bound.relation is not None else [bound.table.name])
    for name in read:  # each table read, against its caps as the owner declared them
        declared = metadata.table(name)
        if declared is not None:
            check_caps(declared, bounds)
    check_unit(bound.table, bounds)
    check_per_group(bound.table, bounds)
    if bounds.groups_bound and bounds.max_groups is not None:
        # BigQuery's g counts the query's groups: of the joined relation too (whose own g is
        # the product over its tables), and always applied (aggregates.groups_cap)
        table = bound.table
        bound = replace(bound, table=replace(table, groups_bound=True, max_groups_per_unit=min(
            table.max_groups_per_unit, bounds.max_groups)))
    return bound


def _single_auto(bound: BoundQuery) -> BoundQuery:
    """An automatic k (:mod:`dpsql.privacy.auto_bounds`) is chosen for a query of one table:
    a join reading such a table needs the analyst's own k."""
    if bound.relation is None:
        return bound
    auto = [s.table.name for s in bound.relation.sources if s.table.rows_auto is not None]
    if auto:
        raise UnsupportedQuery(
            f"{auto[0]}: its max_rows_per_unit is chosen from the data (auto) only for a "
            "query of that table alone; for a join give k yourself: SET dpsql.max_rows = k, "
            "or WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = e, delta = d, "
            "max_rows_contributed = k)")
    return bound


def answer(p: Plan, engine: Engine, rng: Randomness) -> Result:
    """rewrite -> execute -> perturb -> post-process for a prepared plan, drawing the salt
    and the noise from ``rng``. An automatic k is drawn first, on the engine
    (:mod:`dpsql.privacy.auto_bounds`), and the plan calibrated to it."""
    shared = _shares_units(p, engine) and (k_to_choose(p) or values_to_choose(p))
    try:
        p, (sql, salted) = _after_charge(p, engine, rng)
        # The salt keys the contribution-bounding sample: fresh, secret, never shown.
        parameters = [rng.salt()] if salted else []
        _, rows = engine.execute(sql, parameters)
    finally:
        if shared:  # the per-unit table of this run (_shared_units), in this thread's cursor;
            # never masking the query's own outcome: a table left behind is replaced by the
            # next run's and ends with the cursor
            with contextlib.suppress(EngineError):
                engine.execute(f"DROP TABLE IF EXISTS temp.{UNITS_TABLE}")
    result = postprocess(p, perturb_cells(p, rows, rng))
    result.epsilon, result.delta = p.cost_epsilon, p.cost_delta
    result.notes.extend(bounding_notes(p))  # the bias the +/- intervals do not cover
    result.chosen_rows = p.auto.k if p.auto is not None else None
    result.chosen_bounds = chosen_bounds(p)
    return result


def choose(p: Plan, engine: Engine, rng: Randomness) -> Plan:
    """The choices from the data a plan leaves to its run, in order (k, then each value
    bound, given the released k: :mod:`dpsql.privacy.auto_values`), and ``p`` calibrated to
    them; ``p`` itself when it has none left. Their inputs are read in one engine pass
    (:mod:`dpsql.execution.choices`)."""
    if not (k_to_choose(p) or values_to_choose(p)):
        return p
    if _shares_units(p, engine):  # the per-unit table kept for the query: _after_charge
        keep, over = _shared_units(p, engine)
        engine.execute(keep)
        _, rows = engine.execute(over)
    else:
        _, rows = engine.execute(choices_sql(p, engine))
    counts, buckets = split(rows, len(_sides(p)))
    if k_to_choose(p):
        p = _chosen(p, choose_k(p, counts, rng))
    if values_to_choose(p):
        drawn = [draw(v, buckets[i], p.table.columns[v.column].type == ColumnType.INT, rng)
                 for i, v in enumerate(p.values)]
        p = _valued(p, tuple(drawn))
    return p


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
    if k_to_choose(p) or values_to_choose(p):
        choices_sql(p, engine)  # the choices run first: checked before any charge too
        if _shares_units(p, engine):
            _shared_units(p, engine)
            _shared_query(p, engine)  # the shape of every calibrated plan's query
    entry = engine.rewritten.get(id(p))
    if entry is None or entry[0] is not p:
        sql, salted = _engine_sql(p, _schema(p, engine), engine)
        entry = engine.rewritten.put(id(p), (p, sql, salted))
    return entry[1], entry[2]


def rewritten_tree(p: Plan, engine: Engine) -> tuple[exp.Query, bool, Mapping[str, str]]:
    """``p``'s engine query as :func:`engine_sql` writes it, as a tree not yet generated,
    whether it takes the salt, and the physical column types it was written for:
    :mod:`dpsql.routes.templates` moves a reused plan's constants in it."""
    schema = _schema(p, engine)
    tree = rewrite(p, schema)
    return tree, tree.find(exp.Placeholder) is not None, schema


def keep_engine_sql(p: Plan, tree: exp.Query, salted: bool, engine: Engine,
                    shape: str | None = None) -> None:
    """Check and generate ``tree`` as ``p``'s engine query, as :func:`engine_sql` does the
    one it rewrites, and cache it for ``p``: a reused plan's query is its template's with the
    new constants moved in (:mod:`dpsql.routes.templates`), not rewritten again. ``shape``:
    ``tree``'s dry-run shape (:func:`dpsql.query.dry_shapes.dry_shape`) where the caller
    knows it, else None (then computed)."""
    if k_to_choose(p) or values_to_choose(p):  # its choices' queries: engine_sql's own
        return
    sql = _checked(p, tree, salted, _schema(p, engine), engine, shape=shape)
    engine.rewritten.put(id(p), (p, sql, salted))


def _after_charge(p: Plan, engine: Engine, rng: Randomness
                  ) -> tuple[Plan, tuple[str, bool]]:
    """``p`` with its choices from the data made (:func:`choose`) and its engine SQL, after the
    charge. That SQL differs from the one checked and compiled before the charge in constants
    only (k: :func:`dpsql.execution.rewrite.shape_rows`; value bounds:
    :func:`dpsql.execution.rewrite._on_grid_allowed`, DOUBLE and whole constants of
    :func:`dpsql.query.total_expressions.clamp`; tests/privacy/test_auto_sql.py), so nothing
    here fails. Were it to, the analyst gets the fixed
    :class:`~dpsql.errors.EngineFailure`, stored with the charge
    (:class:`~dpsql.database.Database`), never a refusal's text: its outcome is then a
    function of the released choices alone."""
    if not (k_to_choose(p) or values_to_choose(p)):
        return p, engine_sql(p, engine)
    try:
        chosen = choose(p, engine, rng)
        if _shares_units(p, engine):
            return chosen, _shared_query(chosen, engine)
        return chosen, engine_sql(chosen, engine)
    except EngineError:
        raise
    except Exception as e:  # a bug (the test above says none): the owner's log has it
        raise EngineError("the engine failed on the rewritten query (a dpsql bug)",
                          owner_detail=f"planning at the bounds chosen from the data: "
                                       f"{type(e).__name__}: {e}") from None


def k_to_choose(p: Plan) -> bool:
    """Whether ``p``'s k is still to be chosen from the data."""
    return p.auto is not None and p.auto.k is None


def values_to_choose(p: Plan) -> bool:
    """Whether ``p``'s value bounds are still to be chosen (all are drawn together)."""
    return bool(p.values) and p.values[0].value is None


def _chosen(p: Plan, k: int) -> Plan:
    """``p`` calibrated to the released ``k`` (:func:`dpsql.privacy.auto_bounds.with_rows`),
    once per plan and k: the engine's SQL of that plan is then cached too. The entry holds
    ``p``, so its identity is not reused while the entry lives."""
    entry = _CHOSEN.get((id(p), k))
    if entry is None or entry[0] is not p:
        entry = _CHOSEN.put((id(p), k), (p, with_rows(p, k)))
    return entry[1]


def _valued(p: Plan, bounds: tuple[float, ...]) -> Plan:
    """``p`` calibrated to the released value bounds (:func:`dpsql.privacy.auto_values.
    with_values`), once per plan and bounds (as :func:`_chosen`)."""
    entry = _VALUED.get((id(p), bounds))
    if entry is None or entry[0] is not p:
        entry = _VALUED.put((id(p), bounds), (p, with_values(p, bounds)))
    return entry[1]


def choices_sql(p: Plan, engine: Engine | None) -> str:
    """The one engine query of every choice ``p`` has still to make
    (:func:`dpsql.execution.choices.unit_choices`), in the engine's SQL: compiled once per plan
    and checked before any charge (:class:`~dpsql.database.Database` asks for it through
    :func:`engine_sql`); cached beside the plan's own SQL (``id(p)``) under ``-id(p)``."""
    auto = p.auto
    cap = auto.cap if auto is not None and k_to_choose(p) else None

    def build(schema: Mapping[str, str]) -> exp.Query:
        return unit_choices(p, cap, _sides(p), schema)

    if engine is None:
        return build(_schema(p, None)).sql(dialect=DuckDBDialect)
    entry = engine.rewritten.get(-id(p))
    if entry is None or entry[0] is not p:
        entry = engine.rewritten.put(-id(p), (p, _choice_sql(p, build, engine), False))
    return entry[1]


def _sides(p: Plan) -> tuple[AutoValue, ...]:
    return p.values if values_to_choose(p) else ()


def _shares_units(p: Plan, engine: Engine) -> bool:
    """Whether the choices' per-unit aggregate is kept for the query to read its per-unit
    totals from (:func:`dpsql.execution.choices.unit_table`, issue 39.2: one ``GROUP BY``
    unit where there were two): on DuckDB, whose cursor of the calling thread keeps a
    temporary table between statements, for a query bounded by weights
    (:func:`dpsql.execution.rewrite.shares_totals`). Elsewhere the choices run in one query
    of their own (:func:`choices_sql`)."""
    return engine.name == "duckdb" and shares_totals(p)


def _shared_units(p: Plan, engine: Engine) -> tuple[str, str]:
    """The statement that keeps ``p``'s per-unit aggregate as the temporary
    :data:`~dpsql.execution.choices.UNITS_TABLE`, and the choices' query over it; checked
    on empty tables before any charge (the table made there from the empty ones) and
    compiled once per plan."""
    entry = _UNITS.get(id(p))
    if entry is None or entry[0] is not p or entry[1] is not engine:
        schema = _schema(p, engine)
        auto = p.auto
        cap = auto.cap if auto is not None and k_to_choose(p) else None
        units = unit_table(p, _sides(p), schema).sql(dialect=DuckDBDialect)
        over = choices_from(UNITS_TABLE, cap, _sides(p))
        check_engine_query(p, over.sql(dialect=DuckDBDialect), False, schema,
                           _units_create(units))
        keep = f"CREATE OR REPLACE TEMP TABLE {UNITS_TABLE} AS {units}"
        compiled = engine.compile(over, False, empty_tables(p.query.relation, p.table, schema))
        entry = _UNITS.put(id(p), (p, engine, keep, compiled))
    return entry[2], entry[3]


def _shared_query(p: Plan, engine: Engine) -> tuple[str, bool]:
    """``p``'s engine query reading its per-unit totals from the table that
    :func:`_shared_units` keeps (:func:`dpsql.execution.rewrite.rewrite`'s ``totals``):
    the same function as :func:`engine_sql`'s, with the drawn constants, checked on empty
    tables (a moved k or bound: the shape already checked, :mod:`dpsql.query.dry_shapes`)."""
    entry = _TOTALS.get(id(p))
    if entry is None or entry[0] is not p or entry[1] is not engine:
        schema = _schema(p, engine)
        tree = rewrite(p, schema, totals=UNITS_TABLE)
        salted = tree.find(exp.Placeholder) is not None
        units = unit_table(p, (), schema).sql(dialect=DuckDBDialect)  # its __unit, __n
        sql = _checked(p, tree, salted, schema, engine, _units_create(units))
        entry = _TOTALS.put(id(p), (p, engine, sql, salted))
    return entry[2], entry[3]


def _units_create(units: str) -> tuple[str, ...]:
    """The per-unit table among a dry run's empty tables: made from them."""
    return (f"CREATE TABLE {UNITS_TABLE} AS {units}",)


def values_sql(p: Plan, i: int, engine: Engine | None) -> str:
    """The engine query of ``p.values[i]``'s input alone (:func:`dpsql.execution.rewrite.
    unit_values`), in the engine's SQL: what the neighbour harness audits one choice at a
    time (a query runs them together: :func:`choices_sql`)."""
    value = p.values[i]
    return _choice_sql(p, lambda schema: unit_values(p, value, schema), engine)


def units_sql(p: Plan, engine: Engine | None) -> str:
    """The engine query of an automatic k's input alone, the units per number of rows
    (:func:`dpsql.execution.rewrite.unit_counts`), as :func:`values_sql`."""
    auto = p.auto
    assert auto is not None
    return _choice_sql(p, lambda schema: unit_counts(p, auto.cap, schema), engine)


def _choice_sql(p: Plan, build: Callable[[Mapping[str, str]], exp.Query],
                engine: Engine | None) -> str:
    """The engine's SQL of a choice's input (the tree ``build`` makes for the engine's
    physical types), checked with DuckDB's semantics (:func:`_checked`)."""
    if engine is None:
        return build(_schema(p, None)).sql(dialect=DuckDBDialect)
    schema = _schema(p, engine)
    return _checked(p, build(schema), False, schema, engine)


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
    return _checked(p, tree, salted, schema, engine), salted


def _checked(p: Plan, tree: exp.Query, salted: bool, schema: Mapping[str, str],
             engine: Engine | None, extra: tuple[str, ...] = (), shape: str | None = None
             ) -> str:
    """``engine``'s SQL of the engine query ``tree`` (DuckDB's without one), refused before any
    charge where it cannot run. DuckDB's semantics are the reference: every engine's query is
    checked there too (:func:`check_engine_query`), so a query is refused the same way
    whatever the engine; on DuckDB that is the very text it runs, generated once. ``shape``:
    the tree's dry-run shape where known (:func:`keep_engine_sql`), else computed here."""
    if engine is None:
        shape = dry_shapes.dry_shape(tree, DuckDBDialect)
        text = tree.sql(dialect=DuckDBDialect)
        _check_shape(p, text, shape, salted, schema, extra)
        return text
    native = engine.dialect is DuckDBDialect
    # before compile: a histogram's is generated in place
    shape = dry_shapes.dry_shape(tree, DuckDBDialect) if shape is None else shape
    empties = empty_tables(p.query.relation, p.table, schema)
    reference = engine.compile(tree, salted, empties) if native else \
        tree.sql(dialect=DuckDBDialect)
    _check_shape(p, reference, shape, salted, schema, extra)
    if engine.raises_on_float_overflow:
        refuse_float_overflow([p.query.where, *[k.expression for k in p.keys],
                               *[m.arg for m in p.measurements]], p.table,
                              getattr(engine.dialect.generator_class, "ENGINE", engine.name))
    # Another engine's own SQL, checked on its own empty tables.
    return reference if native else engine.compile(tree, salted, empties)


def _check_shape(p: Plan, sql: str, shape: str | None, salted: bool,
                 schema: Mapping[str, str], extra: tuple[str, ...] = ()) -> None:
    """:func:`check_engine_query`, skipped where a query of the same shape passed
    (:mod:`dpsql.query.dry_shapes`: a moved filter value is not dry-run again)."""
    if shape is None:
        check_engine_query(p, sql, salted, schema, extra)
        return
    key = (shape, salted, empty_creates(p.query.relation, p.table, schema) + extra)
    if not dry_shapes.PASSED.get(key):
        check_engine_query(p, sql, salted, schema, extra)
        dry_shapes.PASSED.put(key, True)


def check_engine_query(p: Plan, sql: str, salted: bool, schema: Mapping[str, str],
                       extra: tuple[str, ...] = ()) -> None:
    """Run the engine query ``sql`` (in DuckDB's SQL) on empty tables of the engine's physical
    types (its declared ones where unknown), so that an error the engine raises whatever the
    data (a type it will not accept) is a refusal before anything is charged, never an engine
    error after it. ``extra``: statements that make more tables from those (a per-unit
    table: :func:`_shared_units`)."""
    try:
        run_dry(sql, [0] if salted else [],
                empty_creates(p.query.relation, p.table, schema) + extra)
    except duckdb.Error as e:
        raise UnsupportedQuery(f"the engine cannot run this query: {str(e).splitlines()[0]}; "
                               "check the types of the expressions it computes") from None


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
                       groups_per_unit=p.groups_per_unit, notes=bounding_notes(p),
                       outputs=expected(p), groups_capped=not p.keys or p.group_cap is not None)


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
