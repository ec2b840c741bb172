"""The SQL of an automatic k and of automatic value bounds after the charge (issue 21, item 2;
dpsql.privacy.auto_bounds, dpsql.privacy.auto_values).

A query over a table whose k is automatic is charged, then k is drawn from the data and the
plan re-made for it (:func:`~dpsql.privacy.auto_bounds.with_rows`) and compiled for the engine
(:func:`dpsql.routes.pipeline.answer`). Were the re-plan or the compile to fail for some k in
``[1, max]``, the analyst would be charged for a failure. So for every accepted case of the
grammar corpus's ``auto`` database and the automatic neighbour shapes, the plan at the cap is
re-made at k = 1, 2, around g, in between and the cap, and its SQL compiled for DuckDB (with
DuckDB's dry run, as before a charge), PostgreSQL and Spark (their dialects only: no server):
each must differ from the cap's SQL in the values of its constants only (the same tokens, each
number of the same class: a 64-bit integer, a wider one, or a real), with the same
measurements. The cap's SQL is what was checked and compiled before the charge.

The same for value bounds (:func:`test_sql_after_the_value_draw_differs_in_constants_only`): the
corpus's ``autoval`` database and shapes that read a bound through an expression, re-planned
at the bounds of the lowest bucket and the cap (an int column's rounded), both sides of a
column together and crossed (the lower drawn above the upper).
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from sqlglot import exp

import dpsql
import dpsql.routes.pipeline
from dpsql.audit.scenarios import VISITS_AUTO
from dpsql.engines import DuckDBEngine
from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.engines.postgres.dialect import PostgresDialect
from dpsql.engines.spark.dialect import SparkDialect, spark_tree
from dpsql.errors import EngineFailure, UnsupportedQuery
from dpsql.execution.rewrite import rewrite
from dpsql.metadata.metadata import ColumnType, load_metadata, parse_metadata
from dpsql.privacy.auto_bounds import auto_rows_per_unit, with_rows
from dpsql.privacy.auto_values import placed, with_values
from dpsql.privacy.plan import Plan
from dpsql.privacy.randomness import Randomness
from dpsql.routes.pipeline import check_engine_query
from dpsql.routes.planner import Planner
from dpsql.routes.series import TwoReleases
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
    """1, 2, g + 1 (the groups cap min(g, k) is k up to g: g is 2 or 3 here), the middle and
    the cap."""
    assert p.auto is not None
    cap, g = p.auto.cap, p.table.max_groups_per_unit
    return sorted(k for k in {1, 2, g + 1, cap // 2, cap} if 1 <= k <= cap)


#: A number in SQL text: not part of a name (``__k0``) or of the salt's parameter (``$1``).
NUMBER = re.compile(r"(?<![\w$.])\d+(?:\.\d*)?(?:[eE][+-]?\d+)?(?![\w.])")


def _number_class(match: re.Match[str]) -> str:
    text = match.group(0)
    if not text.isdigit():
        return "<real>"
    return "<int64>" if int(text) < 2**63 else "<wide>"


def _masked(sql: str) -> str:
    """``sql`` with each number replaced by its class (module docstring), its sign part of
    the constant: ``(-<int64>)`` and ``(CAST(-<real> AS DOUBLE))`` are the constants'
    spellings when negative."""
    masked = NUMBER.sub(_number_class, sql)
    masked = re.sub(r"\(-(<\w+>)\)", r"\1", masked)
    return re.sub(r"\(CAST\(-(<\w+>) AS ([^)]*)\)\)", r"CAST(\1 AS \2)", masked)


def _compiled(p: Plan, engine: DuckDBEngine, schema: dict[str, str]) -> dict[str, str]:
    """``p``'s engine SQL for each engine, DuckDB's checked on empty tables as
    :func:`dpsql.routes.pipeline.engine_sql` does (a refusal raises)."""
    tree = rewrite(p, schema)
    salted = tree.find(exp.Placeholder) is not None
    duckdb_sql = engine.compile(tree, salted, ())
    check_engine_query(p, duckdb_sql, salted, schema)
    sums = {m.name for m in p.measurements}
    return {"duckdb": duckdb_sql,
            "postgres": tree.sql(dialect=PostgresDialect),
            # with the exact sums that Spark's analysis asks for (SparkEngine.generate: the
            # text without them differs only in those sums' wrappers)
            "spark": spark_tree(tree, sums).sql(dialect=SparkDialect)}


def _measurements(p: Plan) -> list[tuple[object, ...]]:
    return [(m.kind, m.name, m.mechanism, m.per_group is not None, m.weight_bits)
            for m in p.measurements]


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Plan, DuckDBEngine]]:
    """The plan at the cap of each case (the corpus's ``auto`` database, then the shapes on
    an empty table of the scenario's), with its engine."""
    folder = tmp_path_factory.mktemp("auto-sql")
    db = open_database("auto", folder)
    assert isinstance(db.engine, DuckDBEngine)
    corpus = [(c.sql, float(c.options["epsilon"]), float(c.options["delta"]),  # type: ignore
               str(c.options["mechanism"])) for c in load_corpus()
              if c.database == "auto" and c.verdict == "accepted"]
    metadata = folder / "visits.toml"
    metadata.write_text(VISITS_AUTO, encoding="utf-8")
    with duckdb.connect(str(folder / "visits.duckdb")) as con:
        con.execute("CREATE TABLE visits (pid BIGINT, grp VARCHAR, amount DOUBLE, qty BIGINT)")
    shapes = [(sql, 1.0, 1e-6, "laplace") for sql in SHAPES]
    out = []
    for planner, engine, cases in ((db.planner, db.engine, corpus),
                                   (Planner(load_metadata(metadata)),
                                    DuckDBEngine(folder / "visits.duckdb"), shapes)):
        for sql, epsilon, delta, mechanism in cases:
            prepared = planner.prepare_query(sql, epsilon, delta, mechanism)
            parts = (prepared.inner, prepared.outer) if isinstance(prepared, TwoReleases) \
                else (prepared,)  # the outer with stand-in keys: the released ones' shape
            out += [(sql, p, engine) for p in parts if isinstance(p, Plan) and p.auto is not None]
    assert len(out) >= 7 + len(SHAPES)  # every automatic case of the corpus, every shape
    return out


def test_sql_after_the_charge_differs_in_constants_only(
        plans: list[tuple[str, Plan, DuckDBEngine]]) -> None:
    for sql_text, p, engine in plans:
        schema = dict(engine.schema.get(p.table.name.lower(), {}))
        at_cap = {name: _masked(sql) for name, sql in _compiled(p, engine, schema).items()}
        for k in _ks(p):
            where = f"{sql_text} at k = {k}"
            chosen = with_rows(p, k)
            assert chosen.auto is not None and chosen.auto.k == k
            assert (chosen.cost_epsilon, chosen.cost_delta) == (p.cost_epsilon, p.cost_delta)
            assert _measurements(chosen) == _measurements(p), where
            assert (chosen.threshold is None, chosen.group_cap is None, chosen.domain) == \
                (p.threshold is None, p.group_cap is None, p.domain), where
            for name, sql in _compiled(chosen, engine, schema).items():
                assert _masked(sql) == at_cap[name], f"{name}, {where}:\n{sql}"


def test_k_at_most_g_keeps_the_groups_rank(plans: list[tuple[str, Plan, DuckDBEngine]]
                                           ) -> None:
    """The regression: with thresholded keys (g' = min(g, k)) a drawn k <= g made the groups
    rank redundant and the rewrite dropped it, a SQL shape compiled only after the charge."""
    p = next(p for sql, p, _ in plans if "GROUP BY duration_min" in sql)
    assert p.group_cap == 3
    for k in (1, 3, 4):
        assert "DENSE_RANK" in rewrite(with_rows(p, k), {}).sql(dialect=DuckDBDialect)


def test_a_failure_after_the_charge_is_the_fixed_engine_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Backstop of the above (dpsql.routes.pipeline._after_charge): were re-planning at the drawn k
    to refuse, the charged query's outcome is the generic EngineFailure stored with its charge,
    not the refusal's text."""
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)
    with duckdb.connect(str(tmp_path / "v.duckdb")) as con:
        con.execute("CREATE TABLE visits AS SELECT range % 20 AS pid, 'a' AS grp, "
                    "1.0::DOUBLE AS amount, 1::BIGINT AS qty FROM range(100)")
    metadata = tmp_path / "meta.toml"
    metadata.write_text(f'[budget]\nledger = "{tmp_path / "ledger.sqlite"}"\n'
                        f'[analysts.ann]\nepsilon = 10.0\n{VISITS_AUTO}', encoding="utf-8")

    def refuse(p: Plan, k: int) -> Plan:
        raise UnsupportedQuery(f"refused at k = {k}")

    monkeypatch.setattr(dpsql.routes.pipeline, "with_rows", refuse)
    with dpsql.Database(tmp_path / "v.duckdb", metadata, analyst="ann") as db:
        with pytest.raises(EngineFailure) as raised:
            db.run("SELECT COUNT(*) AS n FROM visits WHERE qty > 0", epsilon=1.0)
        assert "k =" not in str(raised.value)
        spent = db.budget()
        assert spent is not None and spent.spent.epsilon == pytest.approx(1.0)


@pytest.mark.parametrize("counts", [{}, {1: 1}, {50: 10**12}, {1: 10**12, 50: 1}, {0: 3, 99: 2}])
def test_the_draw_of_k_is_total(counts: dict[int, int]) -> None:
    """The step between the engine's counts and the re-plan (dpsql.routes.pipeline.answer) gives a k
    in [1, max] whatever the counts: no units, counts far beyond the cap, huge numbers."""
    for epsilon, above in ((1e-6, 0), (0.05, 400), (1e6, 10**9)):
        k = auto_rows_per_unit(counts, 50, above, epsilon, Randomness.seeded(1))
        assert 1 <= k <= 50


#: Shapes that read an automatic bound (the ``autoval`` database: visits' amount up to 5000,
#: its duration_min (an int) down to 5; people's income) through expressions, and a column
#: whose both bounds are automatic (``both``).
VALUE_SHAPES = (
    "SELECT SUM(amount * 2) AS s, SUM(amount + duration_min) AS t FROM visits",
    "SELECT AVG(CASE WHEN amount > 100 THEN amount ELSE 0 END) AS a FROM visits",
    "SELECT SUM(amount - 2500) AS s, VAR_SAMP(amount) AS v FROM visits",
    "SELECT category, SUM(amount) AS s FROM visits GROUP BY category HAVING SUM(amount) > 10 "
    "ORDER BY s",
    "SELECT SUM(duration_min) AS s, STDDEV(duration_min) AS d FROM visits",
    "SELECT AVG(income) AS a, COUNT(*) AS n FROM people",
)
BOTH = {"tables": {"bv": {"privacy_unit": "pid", "max_rows_per_unit": 3, "columns": {
    "pid": {"type": "int"}, "cat": {"type": "text", "values": ["a", "b"]},
    "x": {"type": "float", "nullable": False, "lower": {"auto": True, "min": 0},
          "upper": {"auto": True, "max": 1000}},
    "n": {"type": "int", "lower": {"auto": True, "min": 0}, "upper": {"auto": True,
                                                                    "max": 100}},
    # a cap beyond 2^53: its grid step is above 1 at the cap, below at a drawn bound
    # (PostgreSQL's underflow guard of the division by the step must not depend on it)
    "w": {"type": "float", "nullable": False, "lower": {"auto": True, "min": 0},
          "upper": {"auto": True, "max": 1e18}}}}}}
BOTH_SHAPES = ("SELECT cat, COUNT(*) AS c, AVG(x) AS a, SUM(n) AS s FROM bv GROUP BY cat",
               "SELECT cat, AVG(w) AS a, VAR_SAMP(w) AS v FROM bv GROUP BY cat")


@pytest.fixture(scope="module")
def valued(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Plan, DuckDBEngine]]:
    """The plan at the declared bounds of each case that chooses a bound, with its engine."""
    folder = tmp_path_factory.mktemp("autoval-sql")
    db = open_database("autoval", folder)
    assert isinstance(db.engine, DuckDBEngine)
    cases = [(c.sql, float(c.options["epsilon"]), float(c.options["delta"]),  # type: ignore
              str(c.options["mechanism"])) for c in load_corpus()
             if c.database == "autoval" and c.verdict == "accepted"]
    cases += [(sql, 1.0, 0.0, "laplace") for sql in VALUE_SHAPES]
    with duckdb.connect(str(folder / "bv.duckdb")) as con:
        con.execute("CREATE TABLE bv (pid BIGINT, cat VARCHAR, x DOUBLE, n INTEGER, w DOUBLE)")
    both = Planner(parse_metadata(BOTH))
    out = []
    for planner, engine, todo in ((db.planner, db.engine, cases),
                                  (both, DuckDBEngine(folder / "bv.duckdb"),
                                   [(sql, 1.0, 0.0, "laplace") for sql in BOTH_SHAPES])):
        for sql, epsilon, delta, mechanism in todo:
            p = planner.prepare_query(sql, epsilon, delta, mechanism)
            if isinstance(p, Plan) and p.values:
                out.append((sql, p, engine))
    assert len(out) >= 7 + len(VALUE_SHAPES) + len(BOTH_SHAPES)
    return out


def _bounds(p: Plan) -> list[tuple[float, ...]]:
    """Every side at its lowest bucket (off the sums' grid, real where the cap is whole),
    then at its cap; with two sides or more, the first at its lowest and the others at their
    caps (both of a column crossed when it is lower's)."""
    sides = [[placed(v, i, p.table.columns[v.column].type == ColumnType.INT) for i in (0, 63)]
             for v in p.values]
    out = [tuple(s[0] for s in sides), tuple(s[1] for s in sides)]
    if len(sides) > 1:
        out.append(tuple(s[0] if j == 0 else s[1] for j, s in enumerate(sides)))
    return out


def test_sql_after_the_value_draw_differs_in_constants_only(
        valued: list[tuple[str, Plan, DuckDBEngine]]) -> None:
    """The regression: a drawn bound off the sums' grid (0.09 where the cap 5000 is on it)
    added their integer clamp, a bound's class (5000, CAST(0.09 AS DOUBLE)) changed the SQL's
    tokens, a column clamped to its bound was widened where the bare one was not, a NOT NULL
    column's count split from COUNT(*), and crossed sides read a constant."""
    for sql_text, p, engine in valued:
        schema = dict(engine.schema.get(p.table.name.lower(), {}))
        at_cap = {name: _masked(sql) for name, sql in _compiled(p, engine, schema).items()}
        for bounds in _bounds(p):
            where = f"{sql_text} at {bounds}"
            chosen = with_values(p, bounds)
            assert (chosen.cost_epsilon, chosen.cost_delta) == (p.cost_epsilon, p.cost_delta)
            assert _measurements(chosen) == _measurements(p), where
            assert [m.epsilon for m in chosen.measurements] == \
                [m.epsilon for m in p.measurements], where
            for name, sql in _compiled(chosen, engine, schema).items():
                assert _masked(sql) == at_cap[name], f"{name}, {where}:\n{sql}"


def test_crossed_sides_are_read_between_them(valued: list[tuple[str, Plan, DuckDBEngine]]
                                             ) -> None:
    p = next(p for sql, p, _ in valued if sql == BOTH_SHAPES[0])
    chosen = with_values(p, (900.0, 10.0, 0.0, 100.0))  # x's lower above its upper
    assert [v.value for v in chosen.values][:2] == [10.0, 900.0]
    sums = [m for m in chosen.measurements if m.kind == "sum" and "x" in m.arg.sql()]  # type: ignore[union-attr]
    assert sums and all((m.lo, m.hi) == (10.0, 900.0) for m in sums)
