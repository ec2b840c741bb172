"""Texts compared with dates and timestamps (dpsql.query.fold_constants): the plain ISO forms
are converted in Python (``_iso_converted``), everything else by DuckDB's cast; both must give
the same typed literal, and the texts DuckDB alone reads (year 0, hour 24) or neither reads
(31 February) go to DuckDB's cast, which accepts or refuses them as before."""

from __future__ import annotations

import random

import duckdb
import pytest
from sqlglot import exp

from dpsql.errors import InvalidConstant
from dpsql.query.fold_constants import _converted, _iso_converted


def _texts() -> list[str]:
    rng = random.Random(20261206)
    days = [f"{rng.randint(0, 9999):04d}-{rng.randint(0, 13):02d}-{rng.randint(0, 32):02d}"
            for _ in range(400)]
    edges = ["0001-01-01", "0999-12-31", "1000-01-01", "2024-02-29", "2025-02-29",
             "9999-12-31", "0000-01-01", "1582-10-10", "1900-02-29", "2000-02-29"]
    seconds = [f"{d} {rng.randint(0, 25):02d}:{rng.randint(0, 60):02d}:{rng.randint(0, 60):02d}"
               for d in days[:200]] + ["2025-01-01 24:00:00", "2025-12-31 23:59:59"]
    return edges + days + seconds


@pytest.mark.parametrize("kind", ["date", "timestamp"])
def test_the_python_conversion_is_duckdbs(kind: str) -> None:
    con = duckdb.connect()
    target = "DATE" if kind == "date" else "TIMESTAMP"
    fast = 0
    for text in _texts():
        quick = _iso_converted(text, kind)
        if quick is None:
            continue
        fast += 1
        value, form = con.execute(f"SELECT TRY_CAST(? AS {target}), "
                                  f"CAST(TRY_CAST(? AS {target}) AS VARCHAR)",
                                  [text, text]).fetchone()  # type: ignore[misc]
        assert value is not None, text
        assert quick == exp.cast(exp.Literal.string(form), target), text
    assert fast > 100


def test_what_python_does_not_read_is_duckdbs_to_decide() -> None:
    assert _iso_converted("0000-01-01", "date") is None
    assert _iso_converted("2025-01-01 24:00:00", "timestamp") is None
    assert _iso_converted("2025-02-29", "date") is None
    assert _converted(["2025-01-01 24:00:00"], "timestamp") == [
        exp.cast(exp.Literal.string("2025-01-02 00:00:00"), "TIMESTAMP")]
    with pytest.raises(InvalidConstant, match="2025-02-29"):
        _converted(["2025-02-29"], "date")
