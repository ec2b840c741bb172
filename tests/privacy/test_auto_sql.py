"""The SQL of an automatic k after the charge (issue 21, item 2; dpsql.privacy.auto_bounds).

A query over a table whose k is automatic is charged, then k is drawn from the data and the
plan re-made for it (:func:`~dpsql.privacy.auto_bounds.with_rows`) and compiled for the engine
(:func:`dpsql.pipeline.answer`). Were the re-plan or the compile to fail for some k in
``[1, max]``, the analyst would be charged for a failure. So for every accepted case of the
grammar corpus's ``auto`` database and the automatic neighbour shapes, the plan at the cap is
re-made at k = 1, 2, around g, in between and the cap, and its SQL compiled for DuckDB (with
DuckDB's dry run, as before a charge), PostgreSQL and Spark (their dialects only: no server):
each must differ from the cap's SQL in the values of its constants only (the same tokens, each
number of the same class: a 64-bit integer, a wider one, or a real), with the same
measurements. The cap's SQL is what was checked and compiled before the charge.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

from dpsql.audit.scenarios import VISITS_AUTO
from dpsql.engines import DuckDBEngine
from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.engines.postgres.dialect import PostgresDialect
from dpsql.engines.spark.dialect import SparkDialect, spark_tree
from dpsql.execution.rewrite import rewrite
from dpsql.metadata.metadata import load_metadata
from dpsql.pipeline import check_engine_query
from dpsql.planner import Planner
from dpsql.privacy.auto_bounds import with_rows
from dpsql.privacy.plan import Plan
from grammar_tests.corpus import load_corpus
from grammar_tests.databases import open_database

#: The automatic neighbour shapes: the ``auto_rows`` scenario's table (k in [1, 10], g = 2)
#: under each bounding path of the rewrite (rows sampled, per-unit aggregates, weights, the
#: groups cap of thresholded keys and of a count of units).
SHAPES = (
    "SELECT COUNT(*) AS n FROM visits",
    "SELECT grp, COUNT(*) AS n, SUM(qty) AS q FROM visits GROUP BY grp",
    "SELECT grp, COUNT(DISTINCT pid) AS units FROM visits GROUP BY grp",
    "SELECT amount, COUNT(*) AS n FROM visits GROUP BY amount",
    "SELECT qty, AVG(amount) AS a FROM visits GROUP BY qty",
    "SELECT MEDIAN(amount) AS m, COUNT(DISTINCT qty) AS d FROM visits",
    "SELECT grp, SUM(amount, contribution_bounds_per_group => (0, 50)) AS s FROM visits "
    "GROUP BY grp",
)


def _ks(p: Plan) -> list[int]:
    """1, 2, g and g + 1 (where the groups cap min(g, k) stops being k), the middle and the
    cap."""
    assert p.auto is not None
    cap, g = p.auto.cap, p.table.max_groups_per_unit
    return sorted(k for k in {1, 2, g, g + 1, cap // 2, cap} if 1 <= k <= cap)


def _number_class(text: str) -> str:
    try:
        value = int(text)
    except ValueError:
        return "real"
    return "int64" if -2**63 <= value < 2**63 else "wide"


def _masked(sql: str, dialect: type[Dialect]) -> list[tuple[str, str]]:
    """``sql``'s tokens, each number replaced by its class (module docstring)."""
    return [(t.token_type.name, _number_class(t.text) if t.token_type == TokenType.NUMBER
             else t.text) for t in dialect().tokenize(sql)]


def _compiled(p: Plan, engine: DuckDBEngine, schema: dict[str, str]
              ) -> dict[str, tuple[str, type[Dialect]]]:
    """``p``'s engine SQL for each engine, DuckDB's checked on empty tables as
    :func:`dpsql.pipeline.engine_sql` does (a refusal raises)."""
    tree = rewrite(p, schema)
    salted = tree.find(exp.Placeholder) is not None
    check_engine_query(p, tree, salted, schema)
    sums = {m.name for m in p.measurements}
    return {"duckdb": (engine.compile(tree, p, salted), DuckDBDialect),
            "postgres": (tree.sql(dialect=PostgresDialect), PostgresDialect),
            "spark": (spark_tree(tree).sql(dialect=SparkDialect), SparkDialect),
            # the exact sums Spark's analysis asks for (SparkEngine.generate)
            "spark exact": (spark_tree(tree, sums).sql(dialect=SparkDialect), SparkDialect)}


def _measurements(p: Plan) -> list[tuple[object, ...]]:
    return [(m.kind, m.name, m.mechanism, m.per_group is not None, m.weight_bits)
            for m in p.measurements]


def _planners() -> Iterator[tuple[str, Planner, DuckDBEngine, list[tuple[str, float, float,
                                                                         str]]]]:
    folder = Path(tempfile.mkdtemp(prefix="dpsql-auto-sql-"))
    db = open_database("auto", folder)
    cases = [(c.sql, float(c.options["epsilon"]), float(c.options["delta"]),  # type: ignore
              str(c.options["mechanism"])) for c in load_corpus()
             if c.database == "auto" and c.verdict == "accepted"]
    assert isinstance(db.engine, DuckDBEngine)
    yield "corpus", db.planner, db.engine, cases
    metadata = folder / "visits.toml"
    metadata.write_text(VISITS_AUTO, encoding="utf-8")
    with duckdb.connect(str(folder / "visits.duckdb")) as con:
        con.execute("CREATE TABLE visits (pid BIGINT, grp VARCHAR, amount DOUBLE, qty BIGINT)")
    engine = DuckDBEngine(folder / "visits.duckdb")
    yield "shapes", Planner(load_metadata(metadata)), engine, [
        (sql, 1.0, 1e-6, "laplace") for sql in SHAPES]


def _plans() -> list[tuple[str, Plan, DuckDBEngine]]:
    out = []
    for source, planner, engine, cases in _planners():
        for sql, epsilon, delta, mechanism in cases:
            p = planner.prepare_query(sql, epsilon, delta, mechanism)
            if isinstance(p, Plan) and p.auto is not None:
                out.append((f"{source}: {sql}", p, engine))
    return out


PLANS = _plans()


def test_every_automatic_case_is_covered() -> None:
    assert len(PLANS) >= 5 + len(SHAPES)


@pytest.mark.parametrize(("label", "p", "engine"), PLANS, ids=[x[0] for x in PLANS])
def test_sql_after_the_charge_differs_in_constants_only(label: str, p: Plan,
                                                        engine: DuckDBEngine) -> None:
    schema = dict(engine.schema.get(p.table.name.lower(), {}))
    at_cap = {name: _masked(sql, dialect)
              for name, (sql, dialect) in _compiled(p, engine, schema).items()}
    for k in _ks(p):
        chosen = with_rows(p, k)
        assert chosen.auto is not None and chosen.auto.k == k
        assert (chosen.cost_epsilon, chosen.cost_delta) == (p.cost_epsilon, p.cost_delta)
        assert _measurements(chosen) == _measurements(p), f"k = {k}"
        assert (chosen.threshold is None, chosen.group_cap is None, chosen.domain) == \
            (p.threshold is None, p.group_cap is None, p.domain), f"k = {k}"
        for name, (sql, dialect) in _compiled(chosen, engine, schema).items():
            assert _masked(sql, dialect) == at_cap[name], f"{name}, k = {k}:\n{sql}"
