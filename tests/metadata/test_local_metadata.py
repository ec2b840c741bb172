"""The owner's local section (dpsql/metadata/local_release.py): what it declares, and every bad
declaration refused with a MetadataError naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from dpsql.errors import MetadataError
from dpsql.metadata.metadata import parse_metadata

COLUMNS: dict[str, Any] = {
    "pid": {"type": "int"},
    "sex": {"type": "text", "values": ["F", "M"]},
    "yes": {"type": "bool"},
    "age": {"type": "int", "lower": 0, "upper": 100},
    "pay": {"type": "float", "lower": 0, "upper": 100, "nullable": True},
    "note": {"type": "text"},
    "code": {"type": "int", "unique": True},
    "day": {"type": "date", "lower": "2020-01-01", "upper": "2024-12-31"},
}


def _table(local: Any, **table: Any) -> dict[str, Any]:
    import datetime as dt

    columns = {**COLUMNS, "day": {"type": "date", "lower": dt.date(2020, 1, 1),
                                  "upper": dt.date(2024, 12, 31)}}
    return {"tables": {"t": {"privacy_unit": "pid", "max_rows_per_unit": 3, "columns": columns,
                             "local": local, **table}}}


def _local(columns: Any, **spec: Any) -> dict[str, Any]:
    return {"epsilon": 2.0, "row_count": "public", "columns": columns, **spec}


def test_a_local_section_declares_each_column_and_the_split() -> None:
    md = parse_metadata(_table(_local({
        "sex": "rr", "yes": "rr", "age": {"release": "laplace", "weight": 2},
        "pay": {"release": "buckets", "edges": [0, 50, 100]},
        "day": {"release": "grain", "grain": "quarter"}})))
    spec = md.tables["t"].local
    assert spec is not None and spec.public_row_count and spec.epsilon == 2.0
    shares = {c.name: spec.share(c) for c in spec.columns}
    assert shares == pytest.approx({"sex": 1 / 3, "yes": 1 / 3, "age": 2 / 3, "pay": 1 / 3,
                                    "day": 1 / 3})
    assert sum(shares.values()) == pytest.approx(2.0)
    assert spec.column("note") is None  # withheld


@pytest.mark.parametrize(("local", "says"), [
    (_local({"sex": "rr"}, epsilon=0), "epsilon"),
    (_local({"sex": "rr"}, epsilon=float("nan")), "epsilon"),
    ({"epsilon": 1.0, "columns": {"sex": "rr"}}, "row_count"),
    (_local({"sex": "rr"}, row_count="secret"), "row_count"),
    ({"epsilon": 1.0, "sample_rows": 0, "columns": {"sex": "rr"}}, "sample_rows"),
    (_local({"sex": "rr"}, sample_rows=10), "sample_rows"),
    (_local({}), "columns"),
    (_local({"sex": "rr"}, epsilom=1), "epsilom"),
    (_local({"pid": "rr"}), "'pid'"),
    (_local({"code": "laplace"}), "'code'"),
    (_local({"note": "rr"}), "'note'"),
    (_local({"nope": "rr"}), "'nope'"),
    (_local({"sex": "coin"}), "release"),
    (_local({"sex": {"release": "rr", "weight": -1}}), "weight"),
    (_local({"sex": {"release": "rr", "edges": [1, 2]}}), "edges"),
    (_local({"pay": "laplace"}), "nullable"),
    (_local({"age": {"release": "laplace", "step": 0.5}}), "step"),
    (_local({"note": "laplace"}), "'note'"),
    (_local({"pay": {"release": "buckets", "edges": [5, 1]}}), "edges"),
    (_local({"age": {"release": "buckets", "edges": [0, 2.5, 100]}}), "whole"),
    (_local({"age": {"release": "grain", "grain": "year"}}), "date"),
    (_local({"day": {"release": "grain", "grain": "week"}}), "grain"),
    (_local({"sex": {"rellease": "rr"}}), "rellease"),
])
def test_bad_local_declarations_name_the_field(local: Any, says: str) -> None:
    with pytest.raises(MetadataError) as info:
        parse_metadata(_table(local))
    assert says in str(info.value), str(info.value)
    assert "local" in str(info.value)


def test_a_float_by_laplace_needs_its_grid_and_public_tables_take_no_local() -> None:
    with pytest.raises(MetadataError, match="step"):
        parse_metadata({"tables": {"t": {"columns": {"x": {"type": "float", "lower": 0,
                                                           "upper": 1}},
                                         "local": _local({"x": "laplace"})}}})
    with pytest.raises(MetadataError, match="public table"):
        parse_metadata({"tables": {"t": {"public": True, "columns": {"x": "int"},
                                         "local": _local({"x": "rr"})}}})


def test_the_sample_metadata_opts_people_in() -> None:
    from dpsql.database import sample_paths
    from dpsql.metadata.metadata import load_metadata

    spec = load_metadata(sample_paths()[1]).tables["people"].local
    assert spec is not None and spec.public_row_count
    assert {c.name for c in spec.columns} >= {"sex", "age", "income", "signup_date"}
    assert spec.column("person_id") is None and spec.column("email") is None
