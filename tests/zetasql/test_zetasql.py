"""ZetaSQL's differential-privacy compliance cases through the DB-API (docs/zetasql.md): each
passes, or is listed in docs/zetasql.md's one table with its reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.zetasql.runner import (
    Outcome,
    all_cases,
    expected_rows,
    run_all,
    run_all_reference,
    same_rows,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "zetasql.md"
#: The pass rate of the cases that do not ask for PROTO that this branch reaches: it may only
#: rise (raise it when more cases pass).
FLOOR = 50 / 70
#: The same in the second mode, the exact parts of a case on the raw database
#: (tests/zetasql/runner.py, "Two modes"): it may only rise too.
FLOOR_REFERENCE = 57 / 70
#: The aim of issue 35.
AIM = 0.90


@pytest.fixture(scope="module")
def outcomes() -> list[Outcome]:
    return run_all()


def listed() -> dict[str, str]:
    """docs/zetasql.md's table: case name -> reason."""
    rows = re.findall(r"^\| `(\w+)` \| (.+) \|$", DOCS.read_text(), re.MULTILINE)
    return dict(rows)


def test_the_files_are_read_whole() -> None:
    tables, cases = all_cases()
    assert {t.name for t in tables} == {f"TestTableWithUid{s}" for s in ("", "2", "3", "4")}
    assert len(cases) == 84
    assert len({c.name for c in cases}) == 84
    assert sum(c.error for c in cases) == 16


def test_every_case_passes_or_is_listed_with_its_reason(outcomes: list[Outcome]) -> None:
    table = listed()
    failing = {o.case.name: o.detail for o in outcomes if not o.passed}
    unlisted = {name: detail for name, detail in failing.items() if name not in table}
    assert not unlisted, f"cases that fail, missing from docs/zetasql.md's table: {unlisted}"
    stale = sorted(set(table) - set(failing))
    assert not stale, f"cases that pass (or do not exist), still in docs/zetasql.md: {stale}"
    assert all(reason.strip() for reason in table.values())


def test_pass_rate_floor(outcomes: list[Outcome]) -> None:
    counted = [o for o in outcomes if not o.case.proto]
    assert len(counted) == 70
    assert sum(o.passed for o in counted) / len(counted) >= FLOOR


def test_pass_rate_floor_with_exact_parts_on_the_reference(outcomes: list[Outcome]) -> None:
    """The second mode passes every case the verbatim mode passes (it runs them as verbatim
    unless an exact part sits beside a private one), and at least its own floor."""
    reference = run_all_reference()
    counted = [o for o in reference if not o.case.proto]
    assert len(counted) == 70
    assert sum(o.passed for o in counted) / len(counted) >= FLOOR_REFERENCE
    verbatim = {o.case.name for o in outcomes if o.passed}
    assert verbatim <= {o.case.name for o in reference if o.passed}


@pytest.mark.xfail(strict=True, reason="issue 35's aim: several of the 70 non-PROTO cases differ "
                   "by design (docs/zetasql.md), so 90% cannot pass")
def test_pass_rate_aim(outcomes: list[Outcome]) -> None:
    counted = [o for o in outcomes if not o.case.proto]
    assert sum(o.passed for o in counted) / len(counted) >= AIM


def test_the_comparison_can_fail() -> None:
    """The harness's own comparison: a wrong value, a missing row, a float beyond the tolerance
    fail; order matters only when asked."""
    rows = expected_rows("ARRAY<STRUCT<x INT64, INT64>>[{1, 10}, {2, 10.5}, {3, NULL}]")
    assert rows == [(1, 10), (2, 10.5), (3, None)]
    assert same_rows([(3, None), (1, 10), (2, 10.5)], rows, ordered=False)
    assert not same_rows([(3, None), (1, 10), (2, 10.5)], rows, ordered=True)
    assert not same_rows([(1, 10), (2, 10.5)], rows, ordered=False)
    assert not same_rows([(1, 10), (2, 10.5 + 1e-6), (3, None)], rows, ordered=False)
    assert not same_rows([(1, 10), (2, 10.5), (3, 0)], rows, ordered=False)
    assert expected_rows("ARRAY<STRUCT<BOOL, BOOL>>[{true, true}]") == [(True, True)]
    assert not same_rows([(True, 1)], [(True, True)], ordered=False)
