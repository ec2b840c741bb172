"""Per-query contribution bounds (dpsql.metadata.contribution): the bounds in force reach the
sensitivities, the threshold, the bounding SQL, the notes and the stored answers' key; a
request above the owner's cap, or for another unit, is refused before anything is charged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import dpsql
from dpsql.errors import BoundsAboveCap, MetadataError
from dpsql.metadata.contribution import ContributionBounds, in_force
from dpsql.metadata.metadata import parse_metadata
from dpsql.privacy.plan import Plan
from dpsql.routes.pipeline import engine_sql
from dpsql.routes.planner import Planner
from tests.support.sandbox import sandbox

META = {"tables": {
    "v": {"privacy_unit": "pid", "max_rows_per_unit": 3, "max_groups_per_unit": 2,
          "max_rows_per_unit_cap": 8, "max_groups_per_unit_cap": 4,
          "columns": {"pid": {"type": "int"}, "grp": {"type": "text"},
                      "cat": {"type": "text", "values": ["a", "b"]},
                      "x": {"type": "int", "lower": 0, "upper": 10}}},
    "w": {"privacy_unit": "pid", "max_rows_per_unit": 3, "max_groups_per_unit": 2,
          "columns": {"pid": {"type": "int"}}},
    "p": {"privacy_unit": "pid", "one_row_per_unit": True, "columns": {"pid": {"type": "int"}}}}}


@pytest.fixture(scope="module")
def planner() -> Planner:
    return Planner(parse_metadata(META))


def prepared(planner: Planner, sql: str, bounds: ContributionBounds | None = None,
             delta: float = 0.0) -> Plan:
    p = planner.prepare_query(sql, 1.0, delta, bounds=bounds)
    assert isinstance(p, Plan)
    return p


def test_caps_default_to_the_declared_bounds_and_are_validated() -> None:
    md = parse_metadata(META)
    assert (md.tables["v"].rows_cap, md.tables["v"].groups_cap) == (8, 4)
    assert (md.tables["w"].rows_cap, md.tables["w"].groups_cap) == (3, 2)
    low = {"tables": {"v": {**META["tables"]["v"], "max_rows_per_unit_cap": 2}}}
    with pytest.raises(MetadataError, match="max_rows_per_unit_cap = 2 is below its default"):
        parse_metadata(low)


def test_sensitivity_threshold_and_sql_follow_the_bounds_in_force(planner: Planner) -> None:
    count = "SELECT COUNT(*), SUM(x) FROM v"
    default, raised = prepared(planner, count), prepared(planner, count, ContributionBounds(8))
    assert [m.l1 for m in default.measurements] == [3, 30]
    assert [m.l1 for m in raised.measurements] == [8, 80]  # k * b
    assert "8" in engine_sql(raised, None)[0] and raised.table.max_rows_per_unit == 8
    grouped = "SELECT grp, COUNT(DISTINCT pid) FROM v GROUP BY grp"
    g2 = prepared(planner, grouped, delta=1e-6)
    g4 = prepared(planner, grouped, ContributionBounds(8, 4), delta=1e-6)
    assert g2.threshold is not None and g4.threshold is not None
    assert g4.measurements[0].l1 == 4 and g4.threshold.tau > g2.threshold.tau
    lowered = prepared(planner, count, ContributionBounds(max_rows=1))
    assert [m.l1 for m in lowered.measurements] == [1, 10]


def test_refusals_name_the_cap_or_the_unit(planner: Planner) -> None:
    with pytest.raises(BoundsAboveCap, match="cap of 8 on max_rows_per_unit"):
        prepared(planner, "SELECT COUNT(*) FROM v", ContributionBounds(9))
    with pytest.raises(BoundsAboveCap, match="cap of 2 on max_groups_per_unit"):
        prepared(planner, "SELECT COUNT(*) FROM w", ContributionBounds(max_groups=3))
    with pytest.raises(BoundsAboveCap, match="not the privacy unit of v"):
        prepared(planner, "SELECT COUNT(*) FROM v", ContributionBounds(unit_column="grp"))
    with pytest.raises(BoundsAboveCap, match="whole number"):
        ContributionBounds(0)
    with pytest.raises(BoundsAboveCap, match="whole number"):
        ContributionBounds(True)  # type: ignore[arg-type]


def test_one_row_per_unit_tables_ignore_the_bounds(planner: Planner) -> None:
    table = parse_metadata(META).tables["p"]
    assert in_force(table, ContributionBounds(50, 50)) is table
    assert prepared(planner, "SELECT COUNT(*) FROM p", ContributionBounds(50)).measurements[
        0].l1 == 1


def test_bigquery_options_override_the_front_doors(planner: Planner) -> None:
    p = planner.prepare_query("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.25, "
                              "delta = 0, max_rows_contributed = 5) COUNT(*) FROM v", 1.0,
                              bounds=ContributionBounds(2))
    assert isinstance(p, Plan) and p.cost_epsilon == 0.25 and p.measurements[0].l1 == 5


# ------------------------------------------------------------- through a Database


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dpsql.Database]:
    setup = sandbox(tmp_path_factory.mktemp("bounds"), {"ann": ("pw", 100.0, 1e-5)})
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DPSQL_LEDGER", raising=False)  # the sandbox's own ledger
        database = dpsql.Database(setup.database, setup.metadata, analyst="ann")
    yield database
    database.close()


@pytest.mark.usefixtures("seeded_randomness")
def test_stored_answers_are_kept_apart_by_bounds_and_notes_say_them(db: dpsql.Database
                                                                     ) -> None:
    sql = "SELECT COUNT(*) FROM visits"
    first = db.run(sql, bounds=ContributionBounds(5))
    assert db.run(sql, bounds=ContributionBounds(5)).reused
    other = db.run(sql, bounds=ContributionBounds(6))
    assert not other.reused and other.cost is not None
    assert "at most 5 row(s)" in first.result.notes[0]
    assert "at most 6 row(s)" in other.result.notes[0]
    # BigQuery's clause, its epsilon charged as the query's own.
    answer = db.run("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5, "
                    "delta = 0, max_rows_contributed = 7) COUNT(*) AS n FROM visits")
    assert answer.cost is not None and answer.cost.epsilon == 0.5
    assert "at most 7 row(s)" in answer.result.notes[0]
    assert answer.result.columns[0].name == "n"


def test_explain_states_bias_and_clamping(db: dpsql.Database) -> None:
    from dpsql.explanation.render import render

    text = "\n".join(render(db.explain("SELECT category, SUM(amount) FROM visits GROUP BY "
                                       "category", bounds=ContributionBounds(20, 4))))
    assert "at most 20 row(s)" in text and "across all its groups" in text  # public keys
    assert text.count("row(s)") == 1  # the bounds stated once, in the bias note
    assert "not in the +/- intervals" in text
    assert "amount to [0.0, 5000.0]" in text


def test_cap_refusal_charges_nothing(db: dpsql.Database, tmp_path: Path) -> None:
    before = db.budget()
    with pytest.raises(BoundsAboveCap, match="1000"):
        db.run("SELECT COUNT(*) FROM visits", bounds=ContributionBounds(1001))
    assert db.budget() == before
