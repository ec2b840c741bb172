"""``[budget] max_query_epsilon`` and ``max_query_delta``: the owner's largest epsilon and delta
of one query, checked by the library with the owner's values (every door), and noise that
behaves at the epsilons they allow."""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
import tomli_w

import dpsql
from dpsql.errors import InvalidPrivacyParameter, MetadataError, UnboundedExpression
from dpsql.metadata.metadata import parse_metadata
from dpsql.privacy.mechanisms import calibrate_laplace, perturb, perturb_fixed
from dpsql.privacy.randomness import Randomness

TABLES = {"t": {"privacy_unit": "uid", "max_rows_per_unit": 1, "columns": {
    "uid": {"type": "int"},
    "x": {"type": "float", "lower": 0, "upper": 1e6},
}}}
SUM = "SELECT SUM(x) FROM t"


def database(tmp_path: Path, budget: dict[str, Any] | None = None) -> tuple[str, str]:
    path = tmp_path / "db.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT range AS uid, range * 1000.5 AS x FROM range(20)")
    document: dict[str, Any] = {"tables": TABLES}
    if budget is not None:
        document["budget"] = budget
    metadata = tmp_path / "db.toml"
    metadata.write_text(tomli_w.dumps(document))
    return str(path), str(metadata)


def test_defaults_and_declared_without_analysts() -> None:
    assert parse_metadata({"tables": TABLES}).limits.max_epsilon == 100.0
    assert parse_metadata({"tables": TABLES}).limits.max_delta == 0.1
    declared = parse_metadata({"tables": TABLES, "budget": {"max_query_epsilon": 1e20,
                                                            "max_query_delta": 1}})
    assert (declared.limits.max_epsilon, declared.limits.max_delta) == (1e20, 1.0)
    assert declared.budget is None  # still unmetered: the limits are not a budget


@pytest.mark.parametrize(("key", "value"), [
    ("max_query_epsilon", 0), ("max_query_epsilon", -1.0), ("max_query_epsilon", float("inf")),
    ("max_query_epsilon", True), ("max_query_epsilon", "10"),
    ("max_query_delta", 1.5), ("max_query_delta", -0.1), ("max_query_delta", float("nan")),
])
def test_bad_limits_are_refused(key: str, value: object) -> None:
    with pytest.raises(MetadataError, match=key):
        parse_metadata({"tables": TABLES, "budget": {key: value}})


def test_other_budget_keys_still_need_an_analyst() -> None:
    with pytest.raises(MetadataError, match="no analyst"):
        parse_metadata({"tables": TABLES, "budget": {"max_query_epsilon": 5,
                                                     "accounting": "zcdp"}})


def test_library_refuses_beyond_the_default_naming_the_setting(tmp_path: Path) -> None:
    db = dpsql.Database(*database(tmp_path))
    with db:
        with pytest.raises(InvalidPrivacyParameter, match=r"max_query_epsilon") as info:
            db.query(SUM, epsilon=150)
        assert "at most 100" in str(info.value)
        with pytest.raises(InvalidPrivacyParameter, match=r"max_query_delta"):
            db.query(SUM, epsilon=1.0, delta=0.5)
        with pytest.raises(InvalidPrivacyParameter, match=r"max_query_epsilon"):
            db.query("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1e20, delta = 0) "
                     "SUM(x) FROM t")


def test_owner_raises_the_limits_and_the_noise_vanishes(tmp_path: Path) -> None:
    exact = sum(i * 1000.5 for i in range(20))
    db = dpsql.Database(*database(tmp_path, {"max_query_epsilon": 1e308,
                                             "max_query_delta": 1.0}))
    with db:
        for epsilon in (1e20, 1e308):
            assert db.query(SUM, epsilon=epsilon, delta=1.0).rows[0][0] == pytest.approx(
                exact, rel=1e-12)
        with pytest.raises(InvalidPrivacyParameter, match="max_query_delta"):
            db.query(SUM, epsilon=1.0, delta=1.01)


def test_the_dbapi_door_uses_the_owners_limits(tmp_path: Path) -> None:
    strict = tmp_path / "strict"
    strict.mkdir()
    with pytest.raises(dpsql.dbapi.ProgrammingError, match="max_query_epsilon"):
        dpsql.connect(*database(strict), epsilon=1e20)
    loose = tmp_path / "loose"
    loose.mkdir()
    with dpsql.connect(*database(loose, {"max_query_epsilon": 1e20}), epsilon=1e20) as con:
        cursor = con.cursor()
        cursor.execute("SELECT COUNT(*) FROM t")
        assert cursor.fetchall() == [(20,)]


@pytest.mark.parametrize("epsilon", [1e20, 1e100, 1e308])
def test_noise_at_huge_epsilon_keeps_large_values(epsilon: float) -> None:
    """A tiny noise scale gives a fine grid; the values it carries are not saturated (the
    grid's bound once clipped every value above 1 at epsilon 1e308)."""
    rng = Randomness.seeded(1)
    values = np.array([11.0, -3.25, 123456.5, 1e15])
    spec = calibrate_laplace(100.0, epsilon, integer=False)
    assert np.allclose(perturb(values, spec, rng), values, rtol=1e-12)
    fixed = perturb_fixed([44, -13, 2**40], 0.25, spec, rng)
    assert np.allclose(fixed, [11.0, -3.25, 2.0**38], rtol=1e-12)


#: Queries whose measurements weigh more than 1 in the budget split (a median beside a variance,
#: a threshold's count of units): their share of epsilon was computed as ``epsilon * w``.
SPLIT = ["SELECT MEDIAN(x), VAR_POP(x), STDDEV_SAMP(x) FROM t",
         "SELECT SUM(x), AVG(x) FROM t"]


@pytest.mark.parametrize("sql", SPLIT)
@pytest.mark.parametrize(("epsilon", "mechanism"), [
    (float(np.finfo(np.float64).max), "laplace"), (float(np.finfo(np.float64).max), "gaussian"),
    (1e308, "gaussian"), (5e-324, "laplace"), (5e-324, "gaussian"), (1e-300, "gaussian")])
def test_every_epsilon_the_owner_allows_plans_or_is_refused_with_a_dpsql_error(
        tmp_path: Path, sql: str, epsilon: float, mechanism: str) -> None:
    """At the edges of what ``max_query_epsilon`` allows (up to the largest double, down to
    the smallest), planning ends at once, with a plan or an InvalidPrivacyParameter: the split
    of epsilon once overflowed to inf (an endless loop in plan._shares, a server thread spent
    for ever by one query) or underflowed to 0 (a bare ValueError)."""
    db = dpsql.Database(*database(tmp_path, {"max_query_epsilon": epsilon if epsilon > 1
                                             else 100, "max_query_delta": 0.5}))
    with db:
        started = time.monotonic()
        with contextlib.suppress(InvalidPrivacyParameter):
            db.plan(sql, epsilon=epsilon, delta=1e-6, mechanism=mechanism)
        assert time.monotonic() - started < 5


def test_bounds_near_the_largest_double(tmp_path: Path) -> None:
    """Per-group bounds a double holds: one group's sum is answered (a finite number: the
    noise alone could pass the largest double, an OverflowError after the charge before);
    where a unit reaches 2 groups the sensitivity overflows, and the query is refused naming
    the bounds, before anything runs (a bare ValueError before)."""
    path, metadata = tmp_path / "g.duckdb", tmp_path / "g.toml"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE v AS SELECT range % 7 AS uid, range * 1.5 AS x, "
                    "CASE WHEN range % 2 = 0 THEN 'a' ELSE 'b' END AS g FROM range(40)")
    metadata.write_text(tomli_w.dumps({"tables": {"v": {
        "privacy_unit": "uid", "max_rows_per_unit": 3, "max_groups_per_unit": 2, "columns": {
            "uid": {"type": "int"}, "x": {"type": "float", "lower": 0, "upper": 100},
            "g": {"type": "text", "values": ["a", "b"]}}}}}))
    with dpsql.Database(path, metadata) as db:
        for _ in range(20):
            (value,), = db.query("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                                 "SUM(x, "
                                 "contribution_bounds_per_group => (-1e308, 1e308)) FROM v",
                                 epsilon=1.0).rows
            assert math.isfinite(value)
        with pytest.raises(UnboundedExpression, match="too wide"):
            db.query("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                     "g, SUM(x, contribution_bounds_per_group "
                     "=> (-1e308, 1e308)) FROM v GROUP BY g", epsilon=1.0)


def test_per_person_avg_on_bounds_near_the_largest_double(tmp_path: Path) -> None:
    """ZetaSQL's per-person AVG with contribution_bounds_per_group => (-1e308, 1e308): its
    half-width (hi - lo) / 2 overflowed to inf, a bare OverflowError while planning; now the
    plan's own refusal (the noise a share of epsilon 1 needs is beyond a double), before
    anything runs; at a narrower half-width, an answer inside the bounds."""
    with dpsql.Database(*database(tmp_path)) as db:
        with pytest.raises(InvalidPrivacyParameter, match="infinite"):
            db.query("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                     "AVG(x, contribution_bounds_per_group "
                     "=> (-1e308, 1e308)) FROM t", epsilon=1.0)
        (value,), = db.query("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                             "AVG(x, contribution_bounds_per_"
                             "group => (-1e290, 1e290)) FROM t", epsilon=1.0).rows
        assert math.isfinite(value) and -1e290 <= value <= 1e290


@pytest.mark.parametrize(("sql", "mechanism"), [
    ("SELECT x, COUNT(*) FROM t GROUP BY x", "laplace"),  # keys released by thresholding
    (SUM, "gaussian"),
])
def test_delta_one_refuses_what_would_promise_nothing(tmp_path: Path, sql: str,
                                                      mechanism: str) -> None:
    """An owner may allow delta = 1 (ZetaSQL's suite runs at it): pure measurements still
    answer, but thresholding or Gaussian noise at delta 1 is refused by name, not a crash."""
    path, metadata = database(tmp_path, {"max_query_delta": 1.0})
    with dpsql.connect(path, metadata=metadata) as conn:
        assert conn.cursor().execute(SUM, epsilon=1.0, delta=1.0).fetchone() is not None
        with pytest.raises(InvalidPrivacyParameter, match="delta < 1"):
            conn.cursor().execute(sql, epsilon=1.0, delta=1.0, mechanism=mechanism)
