"""Pass 4, plan: sensitivities, key release, the budget split and the noise of every cell.
Everything here comes from the query and the metadata only: no engine is opened."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from dpsql.errors import InvalidPrivacyParameter, KeyReleaseRefused, UnboundedExpression
from dpsql.metadata.metadata import Metadata
from dpsql.privacy.aggregates import HISTOGRAM_BUCKETS
from dpsql.privacy.mechanisms import rho_for
from dpsql.privacy.plan import Plan
from dpsql.privacy.quantile_grid import Grid
from dpsql.privacy.thresholds import threshold
from dpsql.routes.pipeline import explain
from dpsql.routes.planner import Planner

# VISITS (conftest): k = 3 rows per unit, g = 2 groups; amount in [-10, 40] (M = 40, c = 15,
# h = 25); n in [0, 5]. PEOPLE: one row per unit (k = 1).
K, G = 3, 2


def sens(p: Plan) -> list[tuple[str, float, float]]:
    return [(m.kind, m.l1, m.l2) for m in p.measurements]


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT COUNT(*) FROM visits", [("count", K, K)]),
    ("SELECT COUNT(amount) FROM visits", [("count", K, K)]),
    ("SELECT COUNT(DISTINCT pid) FROM visits", [("units", 1, 1)]),
    ("SELECT COUNT(DISTINCT cat) FROM visits", [("distinct", K, K)]),
    ("SELECT SUM(amount) FROM visits", [("sum", K * 40, K * 40)]),
    ("SELECT SUM(n) FROM visits", [("sum", K * 5, K * 5)]),
    ("SELECT SUM(amount * n) FROM visits", [("sum", K * 200, K * 200)]),
    ("SELECT SUM(CASE WHEN n > 2 THEN 1 ELSE 0 END) FROM visits", [("sum", K, K)]),
    ("SELECT AVG(amount) FROM visits", [("count", K, K), ("sum", K * 25, K * 25)]),
    ("SELECT VAR(amount) FROM visits",
     [("count", K, K), ("sum", K * 25, K * 25), ("sum", K * 625, K * 625)]),
    ("SELECT MEDIAN(amount) FROM visits", [("histogram", K, K)]),
    ("SELECT COUNT(*) FROM people", [("count", 1, 1)]),
    ("SELECT SUM(income) FROM people", [("sum", 1000, 1000)]),
    ("SELECT AVG(income / 12) FROM people", [("count", 1, 1), ("sum", 1000 / 24, 1000 / 24)]),
])
def test_sensitivity_for_k_rows(sql: str, expected: list[tuple[str, float, float]],
                                md: Metadata) -> None:
    got = sens(Planner(md).prepare(sql))
    assert [k for k, _, _ in got] == [k for k, _, _ in expected]
    for (_, l1, l2), (_, e1, e2) in zip(got, expected, strict=True):
        assert l1 == pytest.approx(e1) and l2 == pytest.approx(e2)


def test_distinct_units_with_group_by(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT cat, COUNT(DISTINCT pid) FROM visits GROUP BY cat")
    (m,) = p.measurements
    assert m.kind == "units" and m.l1 == G and m.l2 == pytest.approx(math.sqrt(G))


def test_sum_types_and_centering(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT SUM(n), SUM(amount), AVG(amount) FROM visits")
    assert [c.type for c in p.cells] == ["BIGINT", "DOUBLE", "DOUBLE"]
    sum_n, sum_amount, count, centered = p.measurements
    assert sum_n.integer and not sum_amount.integer
    assert (sum_amount.lo, sum_amount.hi, sum_amount.center) == (-10, 40, 0)
    assert centered.center == 15 and count.kind == "count"


def test_histogram_buckets(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT MEDIAN(n), MEDIAN(amount), QUANTILE_CONT(n, 0.9) FROM visits")
    per_value, real, other = p.measurements
    assert per_value.buckets == 6 and per_value.integer  # one bucket per value of 0..5
    # Reals on the fine grid: the equal buckets refined by geometric ones (quantile_grid)
    assert real.fine and not real.integer and not per_value.fine
    assert real.buckets == Grid(real.lo, real.hi).cells > HISTOGRAM_BUCKETS
    # Each quantile is its own exponential-mechanism draw: its own measurement and epsilon.
    assert other is not per_value and other.quantile == 0.9 and per_value.quantile == 0.5


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.7])
@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM visits",
    "SELECT COUNT(*), SUM(amount), AVG(amount), VAR(n), MEDIAN(n) FROM visits",
    "SELECT cat, AVG(amount), STDDEV(amount) FROM visits GROUP BY cat",
])
def test_epsilon_split_by_weight_and_sums_to_epsilon(sql: str, epsilon: float,
                                                     md: Metadata) -> None:
    """eps_i = epsilon w_i^(1/3) / sum_j w_j^(1/3), w_i the cells' squared coefficients
    (dpsql.privacy.plan, "Budget split"), and the shares never sum above epsilon."""
    p = Planner(md).prepare(sql, epsilon=epsilon)
    weights = {m.key: 0.0 for m in p.measurements}
    for cell in p.cells:
        for i, m in enumerate(cell.measurements):
            weights[m.key] += cell.aggregate.weight(i)
    roots = [weights[m.key] ** (1 / 3) for m in p.measurements]
    for m, root in zip(p.measurements, roots, strict=True):
        assert m.epsilon == pytest.approx(epsilon * root / sum(roots))
    assert math.fsum(m.epsilon for m in p.measurements) <= epsilon
    assert sum(m.epsilon for m in p.measurements) == pytest.approx(epsilon)
    assert p.cost_epsilon == epsilon and p.cost_delta == 0


@pytest.fixture
def not_null(kit: SimpleNamespace) -> Metadata:
    """kit.VISITS with ``amount`` declared ``nullable = false``, written out."""
    visits = {**kit.VISITS, "columns": {**kit.VISITS["columns"], "amount": {
        **kit.VISITS["columns"]["amount"], "nullable": False}}}
    return kit.metadata_from({"visits": visits, "people": kit.PEOPLE})


def test_one_measurement_per_quantity(not_null: Metadata, md: Metadata) -> None:
    """COUNT(*) and the count inside AVG of a NOT NULL column are one measurement (issue 21):
    two measurements, the shared count weighted 2 (COUNT and AVG), the sum 1."""
    p = Planner(not_null).prepare("SELECT COUNT(*), AVG(amount) FROM visits")
    assert (p.measurements[0].kind, p.measurements[0].arg) == ("count", None)
    assert len(p.measurements) == 2
    count, total = (m.epsilon for m in p.measurements)
    assert count / total == pytest.approx(2 ** (1 / 3))
    # A nullable column keeps its own count: COUNT(*), COUNT(income), the centred sum.
    p = Planner(md).prepare("SELECT COUNT(*), AVG(income) FROM people")
    assert [m.kind for m in p.measurements] == ["count", "count", "sum"]
    assert p.measurements[1].arg is not None
    # Without ``nullable = false`` written out, nothing is assumed.
    p = Planner(md).prepare("SELECT COUNT(*), COUNT(amount), AVG(amount) FROM visits")
    assert [m.kind for m in p.measurements] == ["count", "count", "sum"]
    p = Planner(not_null).prepare("SELECT COUNT(*), COUNT(amount), VAR(amount) FROM visits")
    assert [m.kind for m in p.measurements] == ["count", "sum", "sum"]


def test_gaussian_rho_split_by_square_root_of_weight(not_null: Metadata) -> None:
    p = Planner(not_null).prepare("SELECT COUNT(*), AVG(amount) FROM visits", epsilon=1.0,
                            delta=1e-6, mechanism="gaussian")
    count, total = (m.noise for m in p.measurements)
    assert count is not None and total is not None
    # sigma_i = Delta_i / sqrt(2 rho_i), rho_count / rho_sum = sqrt(2)
    ratio = (total.scale / (K * 25)) / (count.scale / K)
    assert ratio ** 2 == pytest.approx(math.sqrt(2), rel=1e-3)
    assert p.rho == pytest.approx(rho_for(1.0, 1e-6))


def test_measurements_are_shared(md: Metadata) -> None:
    p = Planner(md).prepare(
        "SELECT COUNT(amount), AVG(amount), VAR(amount), STDDEV(amount) FROM visits")
    # COUNT(amount) and the count of AVG/VAR/STDDEV are one measurement; the centred sum of AVG
    # is the first moment of VAR; STDDEV reuses all of VAR's.
    assert [m.kind for m in p.measurements] == ["count", "sum", "sum"]
    # weights: n 1+1+1+1 = 4, S1 1+4+4 = 9, S2 1+1 = 2 (VAR's (1, 4, 1), AVG's (1, 1))
    roots = [4 ** (1 / 3), 9 ** (1 / 3), 2 ** (1 / 3)]
    assert [m.epsilon for m in p.measurements] == pytest.approx([r / sum(roots) for r in roots])
    assert p.cells[1].measurements[0] is p.cells[0].measurements[0]


def test_noise_calibration(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT COUNT(*), SUM(amount) FROM visits", epsilon=2.0)
    count, total = p.measurements
    assert count.noise.mechanism == "laplace" and count.noise.integer  # type: ignore[attr-defined]
    assert count.noise.grid_scale == pytest.approx(K / 1.0)  # type: ignore[attr-defined]
    assert total.noise.scale == pytest.approx(K * 40 / 1.0, rel=1e-9)  # type: ignore[attr-defined]
    g = total.noise.granularity  # type: ignore[attr-defined]
    assert math.frexp(g)[0] == 0.5  # a power of two


def test_gaussian_calibration(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT COUNT(*), SUM(amount) FROM visits", epsilon=1.0, delta=1e-6,
                            mechanism="gaussian")
    assert p.cost_delta == 1e-6 and p.cost_epsilon == 1.0
    assert p.rho == pytest.approx(rho_for(1.0, 1e-6))
    count, total = p.measurements
    sigma = K / math.sqrt(2 * p.rho / 2)
    assert count.noise.mechanism == "gaussian"  # type: ignore[attr-defined]
    assert count.noise.grid_scale == pytest.approx(sigma)  # type: ignore[attr-defined]
    assert total.noise.scale == pytest.approx(40 * sigma, rel=1e-9)  # type: ignore[attr-defined]


# ------------------------------------------------------------------ key release


def test_public_domain_needs_no_delta(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT sex, COUNT(*) FROM people GROUP BY sex")
    assert p.domain == (("F",), ("M",)) and p.threshold is None and p.cost_delta == 0
    p = Planner(md).prepare("SELECT kids, married, COUNT(*) FROM people GROUP BY kids, married")
    assert p.domain is not None and len(p.domain) == 4 * 2
    assert (0, False) in p.domain and (3, True) in p.domain
    # Delta given but not needed is not spent.
    p = Planner(md).prepare("SELECT sex, COUNT(*) FROM people GROUP BY sex", delta=1e-6)
    assert p.cost_delta == 0


def test_case_with_constant_branches_is_a_public_domain(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT CASE WHEN age > 50 THEN 'old' WHEN age > 20 THEN 'mid' "
                            "END AS g, COUNT(*) FROM people GROUP BY g")
    assert p.domain == (("old",), ("mid",), (None,))
    p = Planner(md).prepare(
        "SELECT CASE WHEN age > 50 THEN 1 ELSE 0 END, COUNT(*) FROM people GROUP BY 1")
    assert p.domain == ((1,), (0,))


def test_image_of_a_public_domain(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT kids + 1, COUNT(*) FROM people GROUP BY 1")
    assert p.domain == ((1,), (2,), (3,), (4,))


def test_thresholding(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT state, COUNT(*) FROM people GROUP BY state", epsilon=1.0,
                            delta=1e-6)
    assert p.domain is None and p.threshold is not None
    units = p.threshold.measurement
    # One row per unit: the number of units is COUNT(*), shared with the query's own cell.
    assert [m.kind for m in p.measurements] == ["count"] and units is p.measurements[0]
    scale, tau = threshold(1.0, 1e-6, 1)
    assert p.threshold.tau == tau and units.noise.grid_scale == scale  # type: ignore[attr-defined]
    assert p.threshold.delta == 1e-6 and p.cost_delta == 1e-6


def test_thresholding_with_contribution_bounds(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT n, SUM(amount) FROM visits GROUP BY n", epsilon=1.0, delta=1e-5)
    assert p.threshold is not None
    units = p.threshold.measurement
    assert units.kind == "units" and units.l1 == G
    assert [m.kind for m in p.measurements] == ["sum", "units"]
    assert sum(m.epsilon for m in p.measurements) == pytest.approx(1.0)
    _, tau = threshold(0.5, 1e-5, G)
    assert p.threshold.tau == tau
    # COUNT(DISTINCT pid) is the same measurement as the threshold's.
    p = Planner(md).prepare("SELECT n, COUNT(DISTINCT pid) FROM visits GROUP BY n", delta=1e-5)
    assert len(p.measurements) == 1 and p.threshold.measurement is p.measurements[0]


def test_one_private_key_means_thresholding(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT sex, state, COUNT(*) FROM people GROUP BY sex, state",
                            delta=1e-6)
    assert p.domain is None and p.threshold is not None


def test_no_domain_and_no_delta_is_refused_naming_both_remedies(md: Metadata) -> None:
    with pytest.raises(KeyReleaseRefused) as info:
        Planner(md).prepare("SELECT state, COUNT(*) FROM people GROUP BY state")
    message = str(info.value)
    assert "state" in message and "delta" in message
    assert "values" in message and "public_range" in message


def test_delta_split_between_threshold_and_gaussian(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT state, COUNT(*) FROM people GROUP BY state", epsilon=1.0,
                            delta=1e-6, mechanism="gaussian")
    assert p.threshold is not None and p.threshold.delta == pytest.approx(5e-7)
    # The threshold's units count stays Laplace; the query's COUNT is Gaussian.
    assert sorted(m.mechanism for m in p.measurements) == ["gaussian", "laplace"]
    assert p.rho == pytest.approx(rho_for(0.5, 5e-7))
    assert p.cost_delta == pytest.approx(1e-6)
    p = Planner(md).prepare("SELECT COUNT(*) FROM people", delta=1e-6, mechanism="gaussian")
    assert p.threshold is None and p.rho == pytest.approx(rho_for(1.0, 1e-6))


@pytest.mark.parametrize(("epsilon", "delta", "mechanism"), [
    (0, 0, "laplace"), (-1, 0, "laplace"), (math.nan, 0, "laplace"), (math.inf, 0, "laplace"),
    (1e9, 0, "laplace"), (1, -1e-6, "laplace"), (1, math.nan, "laplace"), (1, 0.5, "laplace"),
    (1, 0, "gaussian"), (1, 1e-6, "uniform"), (True, 0, "laplace"), ("1", 0, "laplace"),
])
def test_invalid_privacy_parameters(epsilon: float, delta: float, mechanism: str,
                                    md: Metadata) -> None:
    with pytest.raises(InvalidPrivacyParameter):
        Planner(md).prepare("SELECT COUNT(*) FROM people", epsilon=epsilon, delta=delta,
                            mechanism=mechanism)


def test_unbounded_aggregate_names_column_and_bound(kit: SimpleNamespace) -> None:
    md = kit.metadata_from({"t": {"columns": {"x": {"type": "float"}, "y": {"type": "int"}}}})
    with pytest.raises(UnboundedExpression, match="column x of table 't' needs lower and upper"):
        Planner(md).prepare("SELECT SUM(x) FROM t")
    with pytest.raises(UnboundedExpression, match="column y of table 't' needs lower and upper"):
        Planner(md).prepare("SELECT AVG(y * 2) FROM t")
    assert Planner(md).prepare("SELECT COUNT(x) FROM t").measurements[0].kind == "count"


def test_distinct_of_public_keys_only(md: Metadata) -> None:
    p = Planner(md).prepare("SELECT DISTINCT sex FROM people")
    assert p.measurements == () and p.domain == (("F",), ("M",))


# ------------------------------------------------------------------ explain


def test_explain_shows_every_share(md: Metadata) -> None:
    e = explain(Planner(md).prepare("SELECT cat, COUNT(*), AVG(amount) FROM visits GROUP BY cat",
                                    epsilon=0.9))
    assert [c.sensitivity for c in e.cells] == [K, K, K * 25]
    assert all(c.epsilon == pytest.approx(0.3) for c in e.cells)  # equal weights
    assert all(c.mechanism == "laplace" and c.accuracy > 0 for c in e.cells)
    assert e.epsilon == 0.9 and e.delta == 0
    # No groups cap over public keys with Laplace noise: a unit's rows are weighted, and
    # reach every one of its groups (the noise grid pays one step per public key).
    assert (e.rows_per_unit, e.groups_per_unit) == (K, 3)  # the keys a, b, c
    assert "public domain" in e.key_release
    assert "$1" not in e.sql and "hash(" not in e.sql.lower()  # nothing sampled
    e = explain(Planner(md).prepare("SELECT cat, MEDIAN(amount) FROM visits GROUP BY cat"))
    assert "$1" not in e.sql and "__w" in e.sql  # a quantile's rows are weighted too
    e = explain(Planner(md).prepare("SELECT cat, COUNT(DISTINCT amount) FROM visits GROUP BY cat"))
    assert "$1" in e.sql  # the salt is a parameter, bound per run, never printed
    e = explain(Planner(md).prepare("SELECT state, COUNT(*) FROM people GROUP BY state",
                                    delta=1e-6))
    # The noisy count of the COUNT(*) cell is the thresholded count: listed once, shared.
    assert "thresholding" in e.key_release and "shared with a cell" in e.key_release
    assert len(e.cells) == 1 and e.cells[0].output.startswith("COUNT(*)")
    e = explain(Planner(md).prepare("SELECT state, SUM(age) FROM people GROUP BY state",
                                    delta=1e-6))
    assert "shared" not in e.key_release and e.cells[-1].output.startswith("(key release)")
