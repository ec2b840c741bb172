"""Automatic value bounds (issue 21, item 2, second half; dpsql.metadata.auto,
dpsql.privacy.auto_values): the owner's declaration and its refusals, the plan's split of
epsilon, which aggregates take the bound (and which keep the declared one or the analyst's),
the choice (geometric buckets, the target rank), with an automatic k, and what the notes,
explain, the command line, the DB-API and the ledger say. Its neighbour tests and statistical
audit are the ``auto_values`` scenario (tests/neighbours, tests/audit) and the corpus's
``autoval`` database."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

import dpsql
from dpsql.errors import MetadataError, UnsupportedQuery
from dpsql.execution.rewrite import unit_values
from dpsql.metadata.metadata import parse_metadata
from dpsql.privacy.accounting import query_cost
from dpsql.privacy.auto_values import BUCKETS, RATIO, draw, edge, origin, with_values
from dpsql.privacy.plan import AutoValue, Plan
from dpsql.privacy.randomness import Randomness
from dpsql.routes.planner import Planner

UPPER = {"auto": True, "max": 1000, "share": 0.2}


def meta(x: Any = None, rows: Any = 3, **more: Any) -> dict[str, Any]:
    x = x if x is not None else {"type": "float", "lower": 0, "upper": UPPER}
    return {"tables": {
        "v": {"privacy_unit": "pid", "max_rows_per_unit": rows, "max_groups_per_unit": 2,
              "columns": {"pid": {"type": "int"}, "cat": {"type": "text",
                                                          "values": ["a", "b", "c"]},
                          "x": x, "n": {"type": "int", "lower": {"auto": True, "min": -50},
                                        "upper": 50}}, **more},
        "p": {"privacy_unit": "pid", "one_row_per_unit": True,
              "columns": {"pid": {"type": "int"}, "age": {"type": "int"}}}}}


def test_declaration_keeps_the_cap_as_the_declared_bound() -> None:
    column = parse_metadata(meta()).tables["v"].columns["x"]
    assert (column.lower, column.upper) == (0.0, 1000.0)
    assert column.upper_auto is not None and column.upper_auto.share == 0.2
    assert column.lower_auto is None
    n = parse_metadata(meta()).tables["v"].columns["n"]
    assert (n.lower, n.upper) == (-50, 50) and n.lower_auto is not None
    assert n.lower_auto.share == 0.1  # the default share


@pytest.mark.parametrize(("x", "more", "message"), [
    ({"type": "float", "lower": 0, "upper": {"auto": True}}, {}, "needs max = N"),
    ({"type": "float", "lower": 0, "upper": {"auto": True, "min": 3}}, {},
     "unknown setting 'min'"),
    ({"type": "float", "lower": {"auto": True, "max": 3}, "upper": 9}, {},
     "unknown setting 'max'"),
    ({"type": "float", "lower": 0, "upper": {"auto": False, "max": 9}}, {}, "needs auto = true"),
    ({"type": "float", "lower": 0, "upper": {**UPPER, "share": 0}}, {}, "strictly between"),
    ({"type": "date", "lower": 0, "upper": UPPER}, {}, "only an int or float column"),
    ({"type": "int", "lower": 0, "upper": UPPER, "public_range": True}, {},
     "no public_range or values"),
    ({"type": "float", "upper": UPPER}, {}, "declare both lower and upper"),
    ({"type": "float", "lower": 0, "upper": {**UPPER, "share": 0.5}},
     {"max_rows_per_unit": {"auto": True, "max": 9, "share": 0.45}}, "sum to 1 or more"),
])
def test_bad_declarations_name_the_field(x: Any, more: dict[str, Any], message: str) -> None:
    with pytest.raises(MetadataError, match=message) as raised:
        parse_metadata(meta(x, **more))
    assert "table 'v'" in str(raised.value)


def test_a_public_table_has_no_automatic_bound() -> None:
    declared = meta()
    declared["tables"]["s"] = {"public": True, "columns": {"y": {
        "type": "float", "lower": 0, "upper": UPPER}}}
    with pytest.raises(MetadataError, match="declare the bound as a number"):
        parse_metadata(declared)


@pytest.fixture(scope="module")
def planner() -> Planner:
    return Planner(parse_metadata(meta()))


def prepared(planner: Planner, sql: str, epsilon: float = 1.0) -> Plan:
    p = planner.prepare_query(sql, epsilon)
    assert isinstance(p, Plan)
    return p


def test_plan_spends_its_share_and_costs_the_whole_epsilon(planner: Planner) -> None:
    p = prepared(planner, "SELECT cat, SUM(x), AVG(n) FROM v GROUP BY cat", 2.0)
    assert [(v.column, v.side) for v in p.values] == [("x", "upper"), ("n", "lower")]
    x, n = p.values
    assert math.isclose(x.epsilon, 0.4) and math.isclose(n.epsilon, 0.2)
    assert x.value is None and x.rest == n.rest and x.epsilon + n.epsilon + x.rest <= 2.0
    assert math.fsum(m.epsilon for m in p.measurements) <= x.rest
    assert (p.epsilon, p.cost_epsilon) == (2.0, 2.0) and query_cost(p).epsilon == 2.0
    rho = query_cost(p, "zcdp").rho
    assert math.isclose(rho, sum(m.epsilon ** 2 / 2 for m in p.measurements) +
                        0.4 ** 2 / 2 + 0.2 ** 2 / 2)
    # a = G sqrt(2) k / eps_m + 2 ln(B / 0.1) / eps_v, G = 3 public keys, k = 3
    smallest = min(m.epsilon for m in p.measurements if m.kind == "sum")
    assert x.above == math.ceil(3 * math.sqrt(2) * 3 / smallest + 2 * math.log(BUCKETS / 0.1) / 0.4)
    # planned at the declared bounds; calibrated to the chosen ones at the same cost
    sums = [m for m in p.measurements if m.kind == "sum"]
    assert sums[0].l1 == 3 * 1000
    chosen = with_values(p, (40.0, -5.0))
    assert chosen.cost_epsilon == 2.0 and [v.value for v in chosen.values] == [40.0, -5.0]
    assert next(m.l1 for m in chosen.measurements if m.kind == "sum") == 3 * 40
    assert "LEAST(GREATEST(x, 0.0), 40.0)" in chosen.cells[0].call.arg.sql()  # type: ignore[union-attr]


@pytest.mark.parametrize(("sql", "sides"), [
    ("SELECT SUM(x * 2) FROM v", [("x", "upper")]),
    ("SELECT STDDEV(x), VAR_POP(n) FROM v", [("x", "upper"), ("n", "lower")]),
    ("SELECT MEDIAN(x), MAX(n), COUNT(x) FROM v", []),  # the declared domain
    ("SELECT SUM(CASE WHEN x > 3 THEN 1 ELSE 0 END) FROM v", []),  # x bounds nothing
    ("SELECT SUM(LEAST(GREATEST(x, 0), 5)) FROM v", []),  # the analyst's own bounds
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
     "SUM(x, contribution_bounds_per_row => (0, 5)) FROM v", []),
    ("SELECT SUM(x) FROM v WHERE n > 3", [("x", "upper")]),
])
def test_only_sums_that_read_the_bound_choose_it(planner: Planner, sql: str,
                                                 sides: list[tuple[str, str]]) -> None:
    p = prepared(planner, sql)
    assert [(v.column, v.side) for v in p.values] == sides
    if not sides:  # nothing chosen: the whole epsilon on the measurements
        assert math.isclose(math.fsum(m.epsilon for m in p.measurements), 1.0)


def test_a_join_needs_the_analysts_bounds(planner: Planner) -> None:
    with pytest.raises(UnsupportedQuery, match="contribution_bounds_per_row"):
        prepared(planner, "SELECT SUM(v.x) FROM v JOIN p ON v.pid = p.pid")
    own = prepared(planner, "SELECT SUM(LEAST(GREATEST(v.x, 0), 9)) FROM v JOIN p "
                   "ON v.pid = p.pid")
    assert own.values == ()


def _side(side: str = "upper", lower: float = 0.0, upper: float = 1000.0,
          above: int = 50) -> AutoValue:
    return AutoValue("x", side, 1.0, 1.0, 0.1, lower, upper, above)


def test_buckets_are_geometric_from_the_origin() -> None:
    up, down = _side(), _side("lower", -1000.0, 1000.0)
    assert edge(up, BUCKETS - 1) == 1000.0 and math.isclose(edge(up, BUCKETS - 2), 1000 / RATIO)
    assert math.isclose(edge(up, 0), 1000 * RATIO ** -(BUCKETS - 1))
    assert edge(down, BUCKETS - 1) == -1000.0 and origin(-1000, 1000, "lower") == 0.0
    assert origin(-100, 0, "upper") == -100  # 0 is the capped bound: from the other one
    assert origin(5, 240, "lower") == 240 and origin(5, 240, "upper") == 5


def test_choice_aims_where_about_a_units_are_above() -> None:
    rng = Randomness.seeded(21)
    up = _side()
    # 1000 units: 900 at about 10 (bucket 48), 100 at about 500 (bucket 60): aiming at 50
    # units above, the bound lands at 500's bucket edge; aiming at 500, at 10's
    low, high = 48, 60
    many = {low: 900, high: 100}
    bounds = [draw(up, many, False, rng) for _ in range(40)]
    assert sum(math.isclose(b, edge(up, high)) for b in bounds) >= 36
    assert all(0 <= b <= 1000 for b in bounds)
    deep = _side(above=500)
    assert sum(math.isclose(draw(deep, many, False, rng), edge(up, low))
               for _ in range(40)) >= 36
    assert 0 <= draw(up, {}, False, rng) <= 1000  # no units: any bound
    whole = draw(_side("lower", -50, 50), {3: 10}, True, rng)
    assert whole == math.floor(whole) and -50 <= whole <= 0


def test_the_engine_query_counts_one_value_per_unit(planner: Planner) -> None:
    p = prepared(planner, "SELECT SUM(x) FROM v WHERE cat = 'a'")
    con = duckdb.connect()
    con.execute("CREATE TABLE v (pid BIGINT, cat VARCHAR, x DOUBLE, n BIGINT)")
    con.execute("INSERT INTO v VALUES (1, 'a', 5, 0), (1, 'a', 500, 0), (1, 'b', 1e9, 0), "
                "(2, 'a', 'NaN', 0), (2, 'a', 2000, 0), (3, 'a', NULL, 0), (NULL, 'a', 7, 0), "
                "(4, 'a', 0, 0)")
    from dpsql.engines.duckdb_engine.dialect import DuckDBDialect

    schema = {"pid": "BIGINT", "cat": "VARCHAR", "x": "DOUBLE", "n": "BIGINT"}
    rows = con.execute(unit_values(p, p.values[0], schema).sql(dialect=DuckDBDialect)).fetchall()
    by_bucket = dict(rows)
    # unit 1: 500 (not 1e9: another category); unit 2: 2000 read as 1000; unit 4: 0
    assert sum(by_bucket.values()) == 3
    assert by_bucket[BUCKETS - 1] == 1 and by_bucket[0] == 1
    assert edge(p.values[0], max(k for k in by_bucket if k < BUCKETS - 1)) >= 500


def test_no_value_fails_the_engine_query() -> None:
    """The regression: span / distance overflowed to Infinity for a tiny positive value (one
    unit's 5e-324 or 1e-306 failed the charged query: CAST(inf AS BIGINT) on DuckDB, the
    division itself on PostgreSQL), so whether the query failed told whether such a value
    existed. Every value lands in a bucket instead (the lowest, here), extreme ints too."""
    low = -(2**63)
    declared = meta()
    declared["tables"]["v"]["columns"]["n"]["lower"]["min"] = low
    p = prepared(Planner(parse_metadata(declared)), "SELECT SUM(x), SUM(n) FROM v")
    con = duckdb.connect()
    con.execute("CREATE TABLE v (pid BIGINT, cat VARCHAR, x DOUBLE, n BIGINT)")
    con.execute(f"INSERT INTO v VALUES (1, 'a', 5e-324, {low}), (2, 'a', 1e-306, {low} + 1), "
                "(3, 'a', 1000, 50)")
    schema = {"pid": "BIGINT", "cat": "VARCHAR", "x": "DOUBLE", "n": "BIGINT"}
    from dpsql.engines.duckdb_engine.dialect import DuckDBDialect

    for v, lowest in zip(p.values, (2, 2), strict=True):
        rows = dict(con.execute(unit_values(p, v, schema).sql(dialect=DuckDBDialect)).fetchall())
        assert rows == {0: 1, BUCKETS - 1: lowest} if v.side == "lower" else \
            rows == {0: lowest, BUCKETS - 1: 1}, (v.side, rows)


def test_spark_and_postgres_spell_the_engine_query(planner: Planner) -> None:
    from dpsql.engines.postgres.dialect import PostgresDialect
    from dpsql.engines.spark.dialect import SparkDialect

    p = prepared(planner, "SELECT SUM(x), AVG(n) FROM v")
    for v in p.values:
        tree = unit_values(p, v)
        for dialect in (SparkDialect, PostgresDialect):
            sql = tree.sql(dialect=dialect)
            assert "LN(" in sql.upper() and "__per_unit" in sql


# ------------------------------------------------------------- through a Database


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("autoval")
    database = folder / "v.duckdb"
    with duckdb.connect(str(database)) as con:
        # 2000 units, 3 rows each, x mostly under 20 and 40 units up to 400
        con.execute("CREATE TABLE v AS SELECT u.pid, ['a', 'b', 'c'][1 + j % 3] AS cat, "
                    "(CASE WHEN u.pid < 40 THEN 400 - j ELSE (u.pid + j) % 20 END)::DOUBLE AS x, "
                    "(u.pid % 7)::BIGINT AS n FROM range(2000) u(pid), range(3) r(j)")
        con.execute("CREATE TABLE p AS SELECT range AS pid, 30 AS age FROM range(10)")
    metadata = folder / "meta.toml"
    metadata.write_text(f"""
[budget]
ledger = "{folder / 'ledger.sqlite'}"
reuse_answers = false
[analysts.ann]
epsilon = 1000.0
[tables.v]
privacy_unit = "pid"
max_rows_per_unit = {{ auto = true, max = 50, share = 0.1 }}
max_groups_per_unit = 2
[tables.v.columns]
pid = {{ type = "int" }}
cat = {{ type = "text", values = ["a", "b", "c"] }}
x = {{ type = "float", lower = 0, upper = {{ auto = true, max = 5000, share = 0.2 }} }}
n = {{ type = "int", lower = {{ auto = true, min = -50 }}, upper = 50 }}
[tables.p]
privacy_unit = "pid"
one_row_per_unit = true
[tables.p.columns]
pid = {{ type = "int" }}
age = {{ type = "int" }}
""")
    return database, metadata


@pytest.fixture(scope="module")
def db(files: tuple[Path, Path]) -> Iterator[dpsql.Database]:
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DPSQL_LEDGER", raising=False)
        database = dpsql.Database(files[0], files[1], analyst="ann")
    yield database
    database.close()


@pytest.mark.usefixtures("seeded_randomness")
def test_a_run_chooses_k_then_the_bounds_and_says_so(db: dpsql.Database) -> None:
    before = db.budget()
    answer = db.run("SELECT SUM(x) AS s, AVG(n) AS a FROM v", epsilon=5.0)
    result = answer.result
    assert result.chosen_rows is not None and result.chosen_bounds is not None
    (xlo, xhi), (nlo, nhi) = result.chosen_bounds["x"], result.chosen_bounds["n"]
    assert xlo == 0 and 0 < xhi <= 5000 and nhi == 50 and -50 <= nlo <= 0
    assert nlo == math.floor(nlo)  # an int column's bound is a whole number
    assert answer.cost is not None and answer.cost.epsilon == 5.0  # once, the whole epsilon
    after = db.budget()
    assert before is not None and after is not None
    assert math.isclose(after.spent.epsilon - before.spent.epsilon, 5.0)
    notes = " ".join(result.notes)
    assert f"x's upper bound {xhi:g} was chosen from the data" in notes
    assert "20% of the query's epsilon (epsilon 1)" in notes
    assert f"n's lower bound {nlo:g} was chosen" in notes
    assert f"[0, {xhi:g}], chosen from the data" in notes
    # 40 units reach 400, the others stay under 20: at epsilon 5 the bound lands between
    highs = [db.query("SELECT SUM(x) FROM v", epsilon=5.0).chosen_bounds["x"][1]  # type: ignore[index]
             for _ in range(10)]
    assert sum(15 <= h <= 500 for h in highs) >= 8


def test_explain_says_the_bound_is_chosen_and_what_it_costs(db: dpsql.Database) -> None:
    from dpsql.explanation.render import render

    text = "\n".join(render(db.explain("SELECT SUM(x) FROM v", epsilon=1.0)))
    assert "x's upper bound is chosen from the data when the query runs" in text
    assert "20% of the query's epsilon (epsilon 0.2)" in text and "upper = 5000" in text
    own = "\n".join(render(db.explain("SELECT SUM(LEAST(GREATEST(x, 0), 9)) FROM v",
                                      epsilon=1.0)))
    assert "bound is chosen from the data" not in own


@pytest.mark.usefixtures("seeded_randomness")
def test_doors_carry_the_chosen_bounds(files: tuple[Path, Path],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from dpsql.cli import main

    monkeypatch.delenv("DPSQL_LEDGER", raising=False)
    with dpsql.connect(str(files[0]), str(files[1]), analyst="ann") as conn:
        cursor = conn.cursor()
        cursor.execute("SELECT SUM(x) FROM v")
        assert any("x's upper bound" in n and "was chosen from the data" in n
                   for n in cursor.notes)
    out = CliRunner().invoke(main, ["query", "--database", str(files[0]), "--metadata",
                                    str(files[1]), "--analyst", "ann", "--accuracy",
                                    "SELECT SUM(x) FROM v"])
    assert out.exit_code == 0, out.output
    assert "x's upper bound" in out.stderr and "was chosen from the data" in out.stderr


def test_a_stored_answer_keeps_its_bounds() -> None:
    from dpsql.execution.postprocess import Result, ResultColumn
    from dpsql.ledger.answers import decode_result, encode_result

    result = Result([ResultColumn("s", "DOUBLE")], [(5.0,)], [(1.0,)], 1.0, 0.0, ["b"], None,
                    {"x": (0.0, 88.5)})
    assert decode_result(encode_result(result)).chosen_bounds == {"x": (0.0, 88.5)}
