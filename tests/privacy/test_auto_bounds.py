"""Automatic k (issue 21, item 2; dpsql.metadata.auto, dpsql.privacy.auto_bounds): the owner's
declaration and its refusals, the plan's split of epsilon, the analyst's override, the choice on
the engine, and what explain, the notes, the DB-API and the ledger say about it. Its neighbour
test and statistical audit are the ``auto_rows`` scenario (tests/neighbours, tests/audit)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

import dpsql
from dpsql.errors import BoundsAboveCap, MetadataError, UnsupportedQuery
from dpsql.metadata.contribution import ContributionBounds
from dpsql.metadata.metadata import parse_metadata
from dpsql.privacy.accounting import query_cost
from dpsql.privacy.auto_bounds import auto_rows_per_unit, with_rows
from dpsql.privacy.plan import Plan
from dpsql.privacy.randomness import Randomness
from dpsql.routes.planner import Planner

AUTO = {"auto": True, "max": 50}
COLUMNS = {"pid": {"type": "int"}, "cat": {"type": "text", "values": ["a", "b", "c"]},
           "x": {"type": "float", "lower": 0, "upper": 10}}


def meta(rows: Any = AUTO, **more: Any) -> dict[str, Any]:
    return {"tables": {
        "v": {"privacy_unit": "pid", "max_rows_per_unit": rows, "max_groups_per_unit": 2,
              "columns": COLUMNS, **more},
        "p": {"privacy_unit": "pid", "one_row_per_unit": True,
              "columns": {"pid": {"type": "int"}, "age": {"type": "int"}}}}}


def test_declaration_is_read_with_its_defaults() -> None:
    table = parse_metadata(meta()).tables["v"]
    assert table.rows_auto is not None and (table.rows_auto.cap, table.rows_auto.share) == (50, 0.1)
    assert (table.max_rows_per_unit, table.rows_cap) == (50, 50)  # max is k's cap
    shared = parse_metadata(meta({**AUTO, "share": 0.25})).tables["v"].rows_auto
    assert shared is not None and shared.share == 0.25


@pytest.mark.parametrize(("spec", "more", "message"), [
    ({"auto": False, "max": 5}, {}, "needs auto = true"),
    ({"auto": True}, {}, "max .* must be a whole number"),
    ({"auto": True, "max": 0}, {}, "max .* must be a whole number"),
    ({**AUTO, "share": 1.0}, {}, "share .* strictly between 0 and 1"),
    ({**AUTO, "share": True}, {}, "share"),
    ({**AUTO, "quantile": 0.9}, {}, "unknown setting 'quantile'"),
    (AUTO, {"max_rows_per_unit_cap": 80}, "its max is the cap"),
    (AUTO, {"one_row_per_unit": True}, "needs a privacy_unit and no one_row_per_unit"),
    (3, {"max_groups_per_unit": AUTO}, "only max_rows_per_unit can be automatic"),
])
def test_bad_declarations_name_the_field(spec: Any, more: dict[str, Any], message: str
                                         ) -> None:
    with pytest.raises(MetadataError, match=message) as raised:
        parse_metadata(meta(spec, **more))
    assert "table" in str(raised.value) and "max_" in str(raised.value)


@pytest.fixture(scope="module")
def planner() -> Planner:
    return Planner(parse_metadata(meta()))


def prepared(planner: Planner, sql: str, epsilon: float = 1.0,
             bounds: ContributionBounds | None = None) -> Plan:
    p = planner.prepare_query(sql, epsilon, bounds=bounds)
    assert isinstance(p, Plan)
    return p


def test_plan_spends_its_share_on_k_and_costs_the_whole_epsilon(planner: Planner) -> None:
    p = prepared(planner, "SELECT cat, COUNT(*), SUM(x) FROM v GROUP BY cat", 2.0)
    auto = p.auto
    assert auto is not None and auto.k is None
    assert math.isclose(auto.epsilon, 0.2) and auto.epsilon + auto.rest <= 2.0
    assert math.fsum(m.epsilon for m in p.measurements) <= auto.rest
    assert (p.epsilon, p.cost_epsilon) == (2.0, 2.0)
    assert query_cost(p).epsilon == 2.0
    zcdp = query_cost(p, "zcdp").rho
    assert math.isclose(zcdp, sum(m.epsilon ** 2 / 2 for m in p.measurements) + 0.2 ** 2 / 2)
    # a = G sqrt(2) / eps_m + 2 ln(cap / 0.1) / eps_auto, G = 3 public keys, eps_m = 0.9
    assert auto.above == math.ceil(3 * math.sqrt(2) / 0.9 + 2 * math.log(500) / 0.2)
    # the placeholder plan is calibrated at the cap; the chosen one at k, same cost
    assert [m.l1 for m in p.measurements] == [50, 500]
    chosen = with_rows(p, 7)
    assert [m.l1 for m in chosen.measurements] == [7, 70]
    assert chosen.auto is not None and chosen.auto.k == 7 and chosen.cost_epsilon == 2.0
    assert [m.epsilon for m in chosen.measurements] == [m.epsilon for m in p.measurements]


def test_the_analysts_k_overrides_and_costs_nothing_extra(planner: Planner) -> None:
    sql = "SELECT COUNT(*) FROM v"
    own = prepared(planner, sql, bounds=ContributionBounds(max_rows=5))
    assert own.auto is None and own.measurements[0].epsilon == 1.0
    assert own.measurements[0].l1 == 5
    clause = prepared(planner, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, "
                      "max_rows_contributed = 4) COUNT(*) FROM v")
    assert clause.auto is None and clause.measurements[0].l1 == 4
    with pytest.raises(BoundsAboveCap, match="cap of 50"):
        prepared(planner, sql, bounds=ContributionBounds(max_rows=51))
    # a g alone leaves k automatic
    assert prepared(planner, sql, bounds=ContributionBounds(max_groups=1)).auto is not None


def test_join_needs_the_analysts_k(planner: Planner) -> None:
    sql = "SELECT COUNT(*) FROM v JOIN p ON v.pid = p.pid"
    with pytest.raises(UnsupportedQuery, match="max_rows_contributed"):
        prepared(planner, sql)
    assert prepared(planner, sql, bounds=ContributionBounds(max_rows=3)).auto is None


def test_choice_aims_where_about_a_units_have_more_rows() -> None:
    rng = Randomness.seeded(21)
    # 1000 units: 900 with 2 rows, 100 with 30: aiming at 50 units above k, k lands in the
    # 30s bucket, never below 2 nor above the cap; with more units above than the target it
    # lands low
    many = {2: 900, 30: 100}
    ks = [auto_rows_per_unit(many, 100, 50, 1.0, rng) for _ in range(40)]
    assert sum(k == 30 for k in ks) >= 36 and all(1 <= k <= 100 for k in ks)
    assert sum(auto_rows_per_unit(many, 100, 500, 1.0, rng) == 2 for _ in range(40)) >= 36
    assert auto_rows_per_unit({}, 5, 3, 1.0, rng) in range(1, 6)
    assert auto_rows_per_unit({500: 10}, 8, 100, 1.0, rng) in range(1, 9)  # read as the cap
    for bad in ({"cap": 0}, {"epsilon": 0.0}, {"units_by_count": {2: -1}}, {"above": -1}):
        arguments = {"units_by_count": {1: 1}, "cap": 4, "above": 1, "epsilon": 1.0, **bad}
        with pytest.raises(ValueError):
            auto_rows_per_unit(**arguments, rng=rng)  # type: ignore[arg-type]


# ------------------------------------------------------------- through a Database


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("auto")
    database = folder / "v.duckdb"
    with duckdb.connect(str(database)) as con:
        # 400 units with 3 rows, 100 with 12: k lands on 12 (most of the time)
        con.execute("CREATE TABLE v AS SELECT u.pid, ['a', 'b', 'c'][1 + j % 3] AS cat, "
                    "(j % 7)::DOUBLE AS x FROM range(500) u(pid), "
                    "range(CASE WHEN u.pid < 400 THEN 3 ELSE 12 END) r(j)")
        con.execute("CREATE TABLE p AS SELECT range AS pid, 30 AS age FROM range(10)")
    metadata = folder / "meta.toml"
    metadata.write_text(f"""
[budget]
ledger = "{folder / 'ledger.sqlite'}"
reuse_answers = false
[analysts.ann]
epsilon = 100.0
[tables.v]
privacy_unit = "pid"
max_rows_per_unit = {{ auto = true, max = 50, share = 0.2 }}
max_groups_per_unit = 2
[tables.v.columns]
pid = {{ type = "int" }}
cat = {{ type = "text", values = ["a", "b", "c"] }}
x = {{ type = "float", lower = 0, upper = 10 }}
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
def test_a_run_chooses_k_on_the_engine_and_says_it(db: dpsql.Database) -> None:
    before = db.budget()
    answer = db.run("SELECT cat, COUNT(*) AS n, SUM(x) AS s FROM v GROUP BY cat", epsilon=1.0)
    k = answer.result.chosen_rows
    assert k is not None and 1 <= k <= 50
    assert answer.cost is not None and answer.cost.epsilon == 1.0  # the whole epsilon, once
    after = db.budget()
    assert before is not None and after is not None
    assert math.isclose(after.spent.epsilon - before.spent.epsilon, 1.0)
    notes = " ".join(answer.result.notes)
    assert f"max_rows_per_unit = {k} was chosen from the data" in notes
    assert f"at most {k} row(s)" in notes and "20% of the query's epsilon" in notes
    counts = [auto.result.chosen_rows for auto in (db.run("SELECT COUNT(*) FROM v")
                                                    for _ in range(10))]
    assert sum(8 <= c <= 14 for c in counts if c is not None) >= 6  # near the 100 units' 12


def test_explain_says_k_is_chosen_and_what_it_costs(db: dpsql.Database) -> None:
    from dpsql.explanation.render import render

    text = "\n".join(render(db.explain("SELECT COUNT(*) FROM v", epsilon=1.0)))
    assert "chosen from the data when the query runs" in text
    assert "20% of the query's epsilon (epsilon 0.2)" in text and "k = 50" in text
    own = "\n".join(render(db.explain("SELECT COUNT(*) FROM v", epsilon=1.0,
                                      bounds=ContributionBounds(max_rows=4))))
    assert "chosen from the data" not in own


@pytest.mark.usefixtures("seeded_randomness")
def test_dbapi_notes_carry_the_chosen_k(files: tuple[Path, Path],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)
    with dpsql.connect(str(files[0]), str(files[1]), analyst="ann") as conn:
        cursor = conn.cursor()
        cursor.execute("SELECT COUNT(*) FROM v")
        assert any("was chosen from the data" in n for n in cursor.notes)
        cursor.execute("SELECT COUNT(*) FROM v")
    with dpsql.connect(str(files[0]), str(files[1]), analyst="ann", max_rows=3) as conn:
        cursor = conn.cursor()
        cursor.execute("SELECT COUNT(*) FROM v")
        assert not any("chosen from the data" in n for n in cursor.notes)


def test_a_stored_answer_keeps_its_k() -> None:
    from dpsql.execution.postprocess import Result, ResultColumn
    from dpsql.ledger.answers import decode_result, encode_result

    result = Result([ResultColumn("n", "BIGINT")], [(5,)], [(1.0,)], 1.0, 0.0, ["k"], 12)
    assert decode_result(encode_result(result)).chosen_rows == 12
