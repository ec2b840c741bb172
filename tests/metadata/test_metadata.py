"""Metadata: loading and validation; every error names the file, the table and the column."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dpsql.database import sample_paths
from dpsql.errors import MetadataError
from dpsql.metadata.metadata import MAX_DOMAIN_SIZE, load_metadata, parse_metadata
from tests.support.helpers import assert_names


def table(columns: dict[str, Any], **settings: Any) -> dict[str, Any]:
    return {**settings, "columns": columns}


def load_error(kit: SimpleNamespace, tmp_path: Path, tables: dict[str, Any]) -> str:
    path = kit.write_metadata(tmp_path / "owner.toml", tables)
    with pytest.raises(MetadataError) as info:
        load_metadata(path)
    return str(info.value)


# ------------------------------------------------------------------ valid metadata


def test_sample_metadata_loads() -> None:
    _, path = sample_paths()
    md = load_metadata(path)
    assert set(md.tables) >= {"people", "visits"}
    assert md.table("PEOPLE") is md.table("people")
    assert md.path == path.resolve()


def test_full_layout_round_trip(kit: SimpleNamespace, tmp_path: Path) -> None:
    path = kit.write_metadata(tmp_path / "m.toml", {
        "People": table({
            "Person_ID": {"type": "int"},
            "age": {"type": "int", "lower": 0, "upper": 100, "public_range": True},
            "income": {"type": "float", "lower": 0, "upper": 2e5, "nullable": True},
            "sex": {"type": "text", "values": ["F", "M"]},
            "state": "text",
            "ok": {"type": "bool", "nullable": True},
            "day": {"type": "date", "lower": dt.date(2020, 1, 1), "upper": dt.date(2020, 12, 31)},
        }, privacy_unit="Person_ID", max_rows_per_unit=1, max_groups_per_unit=1,
            one_row_per_unit=True, description="one row per person"),
    })
    md = load_metadata(path)
    people = md.table("people")
    assert people is not None and people.name == "People"
    assert people.privacy_unit == "person_id"
    assert not people.needs_bounding and people.rows_per_unit == 1
    age = people.column("AGE")
    assert age is not None and age.lower == 0 and age.upper == 100
    assert isinstance(age.lower, int)
    assert age.domain == tuple(range(0, 101))
    income = people.column("income")
    assert income is not None and isinstance(income.upper, float) and income.domain is None
    assert people.column("sex").domain == ("F", "M")  # type: ignore[union-attr]
    assert people.column("state").type == "text"  # type: ignore[union-attr]
    assert people.column("state").domain is None  # type: ignore[union-attr]
    assert people.column("ok").domain == (False, True, None)  # type: ignore[union-attr]
    assert people.column("day").lower == dt.date(2020, 1, 1)  # type: ignore[union-attr]


def test_nullable_domain_includes_null() -> None:
    md = parse_metadata({"tables": {"t": table(
        {"c": {"type": "text", "values": ["x"], "nullable": True}})}})
    assert md.table("t").column("c").domain == ("x", None)  # type: ignore[union-attr]


def test_contribution_bounds() -> None:
    md = parse_metadata({"tables": {
        "many": table({"u": "int"}, privacy_unit="u", max_rows_per_unit=5, max_groups_per_unit=2),
        "few": table({"u": "int"}, privacy_unit="u", max_rows_per_unit=2, max_groups_per_unit=9),
        "rows": table({"u": "int"}, max_rows_per_unit=1),
    }})
    many, few, rows = md.table("many"), md.table("few"), md.table("rows")
    assert many.needs_bounding and many.rows_per_unit == 5 and many.groups_per_unit == 2
    assert few.groups_per_unit == 2  # min(g, k): k rows reach at most k groups
    # Without a privacy unit each row is its own unit: nothing to bound.
    assert not rows.needs_bounding and rows.rows_per_unit == 1 and rows.groups_per_unit == 1


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(("tables", "parts"), [
    ({"people": table({"age": {"type": "int", "lowr": 0}})},
     ["table 'people'", "column 'age'", "unknown setting 'lowr'"]),
    ({"people": table({"age": "int"}, max_rows=3)},
     ["table 'people'", "unknown setting 'max_rows'"]),
    ({"people": table({"age": {"type": "integer"}})},
     ["table 'people'", "column 'age'", "type 'integer'"]),
    ({"people": table({"age": {"lower": 0, "upper": 1}})},
     ["table 'people'", "column 'age'", "type None"]),
    ({"people": table({"age": {"type": "int", "lower": 10, "upper": 1}})},
     ["table 'people'", "column 'age'", "lower 10 is greater than upper 1"]),
    ({"people": table({"age": {"type": "int", "lower": 0}})},
     ["table 'people'", "column 'age'", "both lower and upper"]),
    ({"people": table({"age": {"type": "int", "lower": "0", "upper": 9}})},
     ["column 'age'", "lower must be a finite number"]),
    ({"people": table({"age": {"type": "int", "lower": 0.5, "upper": 9}})},
     ["column 'age'", "whole number"]),
    # Bounds an int column (read as BIGINT by every engine) cannot hold (issue 22).
    ({"people": table({"age": {"type": "int", "lower": 0, "upper": 2 ** 70}})},
     ["column 'age'", f"upper = {2 ** 70}", "-9223372036854775808 to 9223372036854775807"]),
    ({"people": table({"age": {"type": "int", "lower": -(2 ** 63) - 1, "upper": 0}})},
     ["column 'age'", "lower", "read as BIGINT"]),
    ({"people": table({"age": {"type": "int", "lower": 0, "upper": 1e30}})},
     ["column 'age'", "upper", "read as BIGINT"]),
    ({"people": table({"age": {"type": "int", "values": [1, 2 ** 64]}})},
     ["column 'age'", "value in values", "read as BIGINT"]),
    ({"people": table({"age": {"type": "float", "lower": True, "upper": 9}})},
     ["column 'age'", "finite number"]),
    ({"people": table({"name": {"type": "text", "lower": 0, "upper": 9}})},
     ["column 'name'", "only for int, float, date and timestamp"]),
    ({"people": table({"day": {"type": "date", "lower": 0, "upper": 9}})},
     ["column 'day'", "TOML date"]),
    ({"people": table({"age": {"type": "int", "lower": 0,
                               "upper": MAX_DOMAIN_SIZE + 5, "public_range": True}})},
     ["table 'people'", "column 'age'", "public_range", f"more than {MAX_DOMAIN_SIZE} keys"]),
    ({"people": table({"x": {"type": "float", "lower": 0, "upper": 9, "public_range": True}})},
     ["column 'x'", "public_range needs type int"]),
    ({"people": table({"age": {"type": "int", "public_range": True}})},
     ["column 'age'", "public_range needs type int, date or timestamp with lower and upper"]),
    ({"people": table({"age": "int"}, privacy_unit="person_id")},
     ["table 'people'", "privacy_unit 'person_id' is not one of its declared columns"]),
    ({"people": table({"pid": "int"}, privacy_unit="pid", one_row_per_unit=True,
                      max_rows_per_unit=3)},
     ["table 'people'", "one_row_per_unit = true needs max_rows_per_unit = 1"]),
    ({"people": table({"pid": "int"}, max_rows_per_unit=0)},
     ["table 'people'", "max_rows_per_unit must be a whole number >= 1"]),
    ({"people": table({"pid": "int"}, max_groups_per_unit=True)},
     ["table 'people'", "max_groups_per_unit"]),
    ({"people": table({"pid": "int"}, one_row_per_unit="yes")},
     ["table 'people'", "one_row_per_unit must be true or false"]),
    ({"people": table({"sex": {"type": "text", "values": []}})},
     ["column 'sex'", "non-empty list"]),
    ({"people": table({"sex": {"type": "text", "values": ["F", 1]}})},
     ["column 'sex'", "value 1", "not of type text"]),
    ({"people": table({"n": {"type": "int", "values": [1, True]}})},
     ["column 'n'", "value True"]),
    ({"people": table({"sex": {"type": "text", "values": ["F", "F"]}})},
     ["column 'sex'", "twice"]),
    ({"people": table({"sex": {"type": "text", "nullable": "no"}})},
     ["column 'sex'", "nullable must be true or false"]),
    ({"people": table({"sex": 3})},
     ["column 'sex'", "must be a table"]),
    ({"people": {"privacy_unit": "pid"}},
     ["table 'people'", "no [tables.people.columns] section"]),
])
def test_validation_errors_name_file_table_column(kit: SimpleNamespace, tmp_path: Path,
                                                  tables: dict[str, Any],
                                                  parts: list[str]) -> None:
    message = load_error(kit, tmp_path, tables)
    assert_names(message, "owner.toml", *parts)


def test_table_declared_twice_ignoring_case(tmp_path: Path) -> None:
    path = tmp_path / "owner.toml"
    path.write_text('[tables.T.columns]\na = "int"\n[tables.t.columns]\na = "int"\n')
    with pytest.raises(MetadataError, match=r"owner\.toml.*declared twice"):
        load_metadata(path)


@pytest.mark.parametrize("name", ["__tot", "__rows", "__h0", "__anything"])
def test_table_names_of_the_rewrites_ctes_are_reserved(tmp_path: Path, name: str) -> None:
    """The rewritten query's own CTEs start with two underscores: a table named so would be
    shadowed by one (a public "__tot" joined to a private table read dpsql's per-unit totals
    instead), so the owner is told to rename it."""
    path = tmp_path / "owner.toml"
    path.write_text(f'[tables."{name}"]\npublic = true\n[tables."{name}".columns]\na = "int"\n')
    with pytest.raises(MetadataError, match=rf"owner\.toml: table '{name}': names starting "
                                            r"with '__' are reserved.*rename the table"):
        load_metadata(path)
    path.write_text('[tables._one.columns]\na = "int"\n')  # one underscore: a name as any
    assert "_one" in load_metadata(path).tables


def test_no_tables(tmp_path: Path) -> None:
    path = tmp_path / "owner.toml"
    path.write_text("description = 'nothing'\n")
    with pytest.raises(MetadataError, match=r"owner\.toml: no \[tables\.NAME\] section"):
        load_metadata(path)


def test_invalid_toml(tmp_path: Path) -> None:
    path = tmp_path / "owner.toml"
    path.write_text("[tables.people\n")
    with pytest.raises(MetadataError, match=r"owner\.toml: not valid TOML"):
        load_metadata(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MetadataError, match=r"nowhere\.toml: metadata file not found"):
        load_metadata(tmp_path / "nowhere.toml")


def test_metadata_error_is_a_dpsql_error() -> None:
    import dpsql

    with pytest.raises(dpsql.Error):
        parse_metadata({"tables": {}})


# ------------------------------------------------------------------ strict sections and keys

PEOPLE_TOML = '[tables.people.columns]\nage = { type = "int", lower = 0, upper = 100 }\n'


def toml_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "owner.toml"
    path.write_text(text)
    with pytest.raises(MetadataError) as info:
        load_metadata(path)
    return str(info.value)


def test_a_misspelt_analysts_section_does_not_turn_metering_off(tmp_path: Path) -> None:
    """``[analyst.bob]`` (for ``[analysts.bob]``) once loaded as unmetered metadata."""
    message = toml_error(tmp_path, PEOPLE_TOML + "[analyst.bob]\nepsilon = 1.0\n")
    assert_names(message, "owner.toml", "unknown section [analyst]",
                 "did you mean [analysts]?")


@pytest.mark.parametrize(("text", "parts"), [
    ("[budgets]\nledger = 'x.sqlite'\n", ["[budgets]", "did you mean [budget]?"]),
    ("[sever]\npasswords = 'p.toml'\n", ["[sever]", "did you mean [server]?"]),
    ("[table.t.columns]\na = 'int'\n", ["[table]", "did you mean [tables]?"]),
    ("titel = 'x'\n", ["setting 'titel'"]),
    ("[server]\nstatment_timeout = 3\n",
     ["[server]", "'statment_timeout'", "did you mean 'statement_timeout'?"]),
    ("[server]\ntime_grd = 0.1\n", ["[server]", "did you mean 'time_grid'?"]),
    ("[budget]\nreuse_answer = false\n[analysts.a]\nepsilon = 1.0\n",
     ["[budget]", "did you mean 'reuse_answers'?"]),
    ("[analysts.bob]\nepsilom = 1.0\n", ["analyst 'bob'", "did you mean 'epsilon'?"]),
    ("[tables.people]\nmax_row_per_unit = 2\n",
     ["table 'people'", "did you mean 'max_rows_per_unit'?"]),
    ("[tables.people.columns.income]\ntype = 'float'\nuper = 10\n",
     ["table 'people'", "column 'income'", "'uper'", "did you mean 'upper'?"]),
])
def test_unknown_sections_and_keys_name_the_intended_spelling(
        tmp_path: Path, text: str, parts: list[str]) -> None:
    assert_names(toml_error(tmp_path, text + PEOPLE_TOML), "owner.toml", *parts)


def test_the_server_section_is_typed(tmp_path: Path) -> None:
    path = tmp_path / "owner.toml"
    path.write_text(PEOPLE_TOML + '[server]\npasswords = "pw/analysts.toml"\n'
                    'statement_timeout = 12\ntime_grid = 0.25\ndescription = "the front door"\n')
    server = load_metadata(path).server
    assert server.passwords == tmp_path / "pw" / "analysts.toml"
    assert server.statement_timeout == 12.0 and server.time_grid == 0.25
    assert server.description == "the front door"
    defaults = parse_metadata({"tables": {"t": table({"a": "int"})}}).server
    assert defaults.passwords is None and defaults.statement_timeout == 300.0
    assert defaults.time_grid is None  # not declared: 50 ms when metered, none when not
    assert defaults.grid(metered=True) == 0.05 and defaults.grid(metered=False) == 0.0
    assert server.grid(metered=False) == 0.25


@pytest.mark.parametrize(("text", "parts"), [
    ("[server]\nstatement_timeout = 0\n", ["statement_timeout must be", "> 0"]),
    ("[server]\nstatement_timeout = -1\n", ["statement_timeout", ">= 0"]),
    ("[server]\nstatement_timeout = 'long'\n", ["statement_timeout", "'long'"]),
    ("[server]\ntime_grid = nan\n", ["time_grid", "finite"]),
    ("[server]\ntime_grid = true\n", ["time_grid", "True"]),
    ("[server]\npasswords = ''\n", ["passwords must be the path"]),
    ("server = 3\n", ["[server] must be a section"]),
    ("[server]\ndescription = 3\n", ["description must be text"]),
    ("[tables.people]\ndescription = 3\n", ["table 'people'", "description must be text"]),
])
def test_server_settings_are_validated(tmp_path: Path, text: str, parts: list[str]) -> None:
    assert_names(toml_error(tmp_path, text + PEOPLE_TOML), "owner.toml", *parts)


def test_descriptions_are_typed_on_tables_and_columns() -> None:
    md = parse_metadata({"tables": {"t": table(
        {"a": {"type": "int", "description": "the a"}}, description="the t")}})
    t = md.table("t")
    assert t is not None and t.description == "the t"
    assert t.columns["a"].description == "the a"


def test_every_metadata_file_of_the_repository_is_valid() -> None:
    root = Path(__file__).resolve().parents[2]
    files = [f for f in root.rglob("*.toml") if f.name != "pyproject.toml"
             and "tables" in f.read_text()]
    assert files, "the sample metadata at least"
    for file in files:
        load_metadata(file)
