"""End to end on small crafted databases with known contents: answers near the truth, key
release (public domains with empty groups, thresholding), the grid and the types of cells, and
statistical tests that the noise that comes out of the engine has the scale the plan claims.

Statistical bands have a false-alarm probability of about 1e-6 each; a one-unit group escapes
the threshold with probability at most delta per run (200 runs at delta = 1e-6: 2e-4).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import sqlglot.parser
from scipy import stats

import dpsql
from dpsql.privacy.mechanisms import NoiseSpec
from dpsql.routes.pipeline import answer

pytestmark = pytest.mark.usefixtures("seeded_randomness")  # same verdict every run: conftest.py

N = 400  # rows (= units) of table t

T_SQL = [
    # x: reals spread over [0, 100); n: integers 0..5 (the domain is 0..10, so 6..10 are
    # empty groups); grp: 'a', 'b', 'c' (the domain also lists 'none', never in the data);
    # city: 'big' for 300 units, 'mid' for 99, 'solo' for one.
    f"""CREATE TABLE t AS SELECT i AS uid,
        ((i * 37) % 1000) / 10.0 + 0.05 AS x,
        i % 6 AS n,
        ['a', 'b', 'c'][1 + i % 3] AS grp,
        CASE WHEN i < 300 THEN 'big' WHEN i < {N - 1} THEN 'mid' ELSE 'solo' END AS city
        FROM range({N}) r(i)""",
    # v: many rows per unit. 200 units with 8 rows each in 'common'; unit 999 has 40 rows, all
    # in 'lonely' (one unit however many rows).
    """CREATE TABLE v AS
        SELECT u, 'common' AS kind, (u % 50 + j)::DOUBLE AS amount
        FROM range(200) a(u), range(8) b(j)
        UNION ALL SELECT 999, 'lonely', 1.0 FROM range(40)""",
]
T_META: dict[str, Any] = {
    "t": {
        "privacy_unit": "uid", "max_rows_per_unit": 1, "one_row_per_unit": True,
        "columns": {
            "uid": {"type": "int"},
            "x": {"type": "float", "lower": 0, "upper": 100},
            "n": {"type": "int", "lower": 0, "upper": 10, "public_range": True},
            "grp": {"type": "text", "values": ["a", "b", "c", "none"]},
            "city": {"type": "text"},
        },
    },
    "v": {
        "privacy_unit": "u", "max_rows_per_unit": 4, "max_groups_per_unit": 1,
        "columns": {
            "u": {"type": "int"},
            "kind": {"type": "text"},
            "amount": {"type": "float", "lower": 0, "upper": 100},
        },
    },
}


@pytest.fixture
def db(make_db: Any) -> dpsql.Database:
    return make_db(T_SQL, T_META).db


def truth(db: dpsql.Database, sql: str) -> Any:
    return db.engine.execute(sql)[1][0][0]


# ------------------------------------------------------------------ near the truth


@pytest.mark.parametrize(("sql", "exact"), [
    ("SELECT COUNT(*) FROM t", "SELECT COUNT(*) FROM t"),
    ("SELECT COUNT(x) FROM t WHERE n > 2", "SELECT COUNT(x) FROM t WHERE n > 2"),
    ("SELECT SUM(x) FROM t", "SELECT SUM(x) FROM t"),
    ("SELECT SUM(n) FROM t", "SELECT SUM(n) FROM t"),
    ("SELECT SUM(CASE WHEN x > 50 THEN 1 ELSE 0 END) FROM t",
     "SELECT SUM(CASE WHEN x > 50 THEN 1 ELSE 0 END) FROM t"),
    ("SELECT AVG(x) FROM t", "SELECT AVG(x) FROM t"),
    ("SELECT AVG(x / 10) FROM t WHERE grp = 'a'", "SELECT AVG(x / 10) FROM t WHERE grp = 'a'"),
    ("SELECT VAR(x) FROM t", "SELECT VAR_SAMP(x) FROM t"),
    ("SELECT VAR_POP(n) FROM t", "SELECT VAR_POP(n) FROM t"),
    ("SELECT STDDEV(x) FROM t", "SELECT STDDEV_SAMP(x) FROM t"),
    ("SELECT COUNT(DISTINCT uid) FROM t", "SELECT COUNT(DISTINCT uid) FROM t"),
])
def test_answers_are_near_the_truth(sql: str, exact: str, db: dpsql.Database) -> None:
    expected = float(truth(db, exact))
    for _ in range(3):
        result = db.query(sql, epsilon=10)
        (value,), (acc,) = result.rows[0], result.accuracy[0]
        assert acc is not None and acc >= 0  # 0 when the count is exact 95% of the time
        slack = 2 if result.columns[0].type == "BIGINT" else 1e-9
        assert abs(value - expected) <= 5 * acc + slack, (value, expected, acc)


@pytest.mark.parametrize(("sql", "q"), [
    ("SELECT MEDIAN(x) FROM t", 0.5),
    ("SELECT QUANTILE_CONT(x, 0.9) FROM t", 0.9),
    ("SELECT PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY n) FROM t", 0.25),
    ("SELECT MIN(x) FROM t", 0.0),
    ("SELECT MAX(x) FROM t", 1.0),
])
def test_quantiles_are_near_the_truth_in_ranks(sql: str, q: float, db: dpsql.Database) -> None:
    column = "n" if "ORDER BY n" in sql else "x"
    values = np.sort([r[0] for r in db.engine.execute(f"SELECT {column} FROM t")[1]])
    for _ in range(3):
        result = db.query(sql, epsilon=10)
        (value,), (ranks,) = result.rows[0], result.accuracy[0]
        assert result.columns[0].accuracy_unit == "rank"
        # The ranks of the answer: from the values strictly below it to those at or below.
        below, upto = np.searchsorted(values, value, "left"), np.searchsorted(values, value,
                                                                              "right")
        target = q * len(values)
        distance = max(0.0, below - target, target - upto)
        assert distance <= 2 * ranks + 1, (value, below, upto, target, ranks)


def test_every_aggregate_in_one_query(db: dpsql.Database) -> None:
    result = db.query("SELECT COUNT(*), SUM(x), AVG(x), VAR(x), STDDEV(x), MEDIAN(x), MIN(n), "
                      "MAX(n) FROM t", epsilon=20)
    count, total, avg, var, sd, median, lo, hi = result.rows[0]
    assert abs(count - N) < 30 and abs(avg - 50) < 5 and abs(median - 50) < 10
    assert abs(total - float(truth(db, "SELECT SUM(x) FROM t"))) < 1000
    assert abs(sd - math.sqrt(var)) < 1e-6 and 600 < var < 1100
    assert 0 <= lo <= hi <= 10


def test_a_query_is_parsed_once(db: dpsql.Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Database parses a query's text once; its paths (public read, two releases, the
    passes) read copies of that tree, and a repetition parses nothing."""
    parses: list[object] = []
    parse = sqlglot.parser.Parser.parse

    def counted(self: sqlglot.parser.Parser, *args: Any, **kwargs: Any) -> Any:
        parses.append(args)
        return parse(self, *args, **kwargs)

    monkeypatch.setattr(sqlglot.parser.Parser, "parse", counted)
    sql = "SELECT city, COUNT(*), SUM(x) FROM t WHERE x > 12.5 GROUP BY city"
    db.query(sql, epsilon=1.0, delta=1e-6)
    assert len(parses) == 1
    db.query(sql, epsilon=1.0, delta=1e-6)
    assert len(parses) == 1


def test_group_by_answers(db: dpsql.Database) -> None:
    result = db.query("SELECT grp, COUNT(*) AS c, AVG(x) AS m FROM t GROUP BY grp ORDER BY grp",
                      epsilon=10)
    exact = dict(db.engine.execute("SELECT grp, COUNT(*) FROM t GROUP BY grp")[1])
    for (grp, c, m), (_, acc_c, _) in zip(result.rows, result.accuracy, strict=True):
        assert abs(c - exact.get(grp, 0)) <= 5 * acc_c + 2  # type: ignore[operator]
        assert 0 <= m <= 100


# ------------------------------------------------------------------ key release


def test_public_domain_releases_every_key_including_empty_groups(db: dpsql.Database) -> None:
    for _ in range(5):
        result = db.query("SELECT grp, COUNT(*) FROM t GROUP BY grp", epsilon=1)
        assert [r[0] for r in result.rows] == ["a", "b", "c", "none"]
        result = db.query("SELECT n, SUM(x) FROM t GROUP BY n", epsilon=1)
        assert [r[0] for r in result.rows] == list(range(11))  # 6..10 hold no row
        result = db.query("SELECT grp, n, COUNT(*) FROM t GROUP BY grp, n", epsilon=1)
        assert len(result.rows) == 4 * 11


def test_key_of_fewer_units_than_the_threshold_never_appears(db: dpsql.Database) -> None:
    p = db.planner.prepare("SELECT city, COUNT(*) FROM t GROUP BY city", epsilon=1, delta=1e-6)
    assert p.threshold is not None and 1 < p.threshold.tau < 99
    released: set[Any] = set()
    for _ in range(200):
        keys = [r[0] for r in answer(p, db.engine, db.randomness).rows]
        assert "solo" not in keys and "big" in keys and "mid" in keys
        released.update(keys)
    assert released == {"big", "mid"}


def test_threshold_counts_units_not_rows(db: dpsql.Database) -> None:
    # 'lonely' has 40 rows of a single unit: never released; 'common' has 200 units.
    p = db.planner.prepare("SELECT kind, COUNT(*), SUM(amount) FROM v GROUP BY kind", epsilon=1,
                           delta=1e-7)
    for _ in range(200):
        assert [r[0] for r in answer(p, db.engine, db.randomness).rows] == ["common"]


def test_no_domain_no_delta_is_refused(db: dpsql.Database) -> None:
    with pytest.raises(dpsql.KeyReleaseRefused, match="delta"):
        db.query("SELECT city, COUNT(*) FROM t GROUP BY city")


# ------------------------------------------------------------------ mechanisms, grid, types


def test_gaussian_mechanism(db: dpsql.Database) -> None:
    result = db.query("SELECT COUNT(*), SUM(x) FROM t", epsilon=10, delta=1e-5,
                      mechanism="gaussian")
    (count, total), (acc_count, acc_total) = result.rows[0], result.accuracy[0]
    assert result.epsilon == 10 and result.delta == 1e-5
    assert abs(count - N) <= 4 * acc_count  # type: ignore[operator]
    assert abs(total - truth(db, "SELECT SUM(x) FROM t")) <= 4 * acc_total  # type: ignore[operator]
    p = db.plan("SELECT COUNT(*), SUM(x) FROM t", epsilon=10, delta=1e-5, mechanism="gaussian")
    # type: ignore[attr-defined]
    assert all(m.noise.mechanism == "gaussian" for m in p.measurements)


def test_noisy_reals_are_multiples_of_a_power_of_two(db: dpsql.Database) -> None:
    for sql in ("SELECT SUM(x) FROM t", "SELECT grp, SUM(x / 3) FROM t GROUP BY grp"):
        p = db.plan(sql, epsilon=0.7)
        g = p.measurements[0].noise.granularity  # type: ignore[attr-defined]
        assert math.frexp(g)[0] == 0.5  # g = 2**k
        for _ in range(5):
            for row in answer(p, db.engine, db.randomness).rows:
                value = row[-1]
                assert isinstance(value, float) and value / g == math.floor(value / g)


def test_integer_cells_stay_int(db: dpsql.Database) -> None:
    result = db.query("SELECT COUNT(*), SUM(n), COUNT(DISTINCT uid), SUM(x), AVG(n) FROM t",
                      epsilon=1)
    assert [c.type for c in result.columns] == ["BIGINT", "BIGINT", "BIGINT", "DOUBLE", "DOUBLE"]
    count, total, units, real, avg = result.rows[0]
    assert type(count) is int and type(total) is int and type(units) is int
    assert type(real) is float and type(avg) is float
    result = db.query("SELECT grp, COUNT(*) FROM t GROUP BY grp", epsilon=1)
    assert all(type(c) is int for _, c in result.rows)


def test_cost_is_reported(db: dpsql.Database) -> None:
    result = db.query("SELECT city, COUNT(*) FROM t GROUP BY city", epsilon=0.5, delta=1e-6)
    assert (result.epsilon, result.delta) == (0.5, 1e-6)
    result = db.query("SELECT grp, COUNT(*) FROM t GROUP BY grp", epsilon=0.5, delta=1e-6)
    assert (result.epsilon, result.delta) == (0.5, 0.0)  # a public domain spends no delta


# ------------------------------------------------------------------ noise scale, statistically


def laplace_moments(spec: NoiseSpec) -> tuple[float, float]:
    """Variance and kurtosis of the discrete Laplace noise in grid units: Z = G1 - G2 of two
    geometric variables with ratio a = exp(-1/s); Var = 2a/(1-a)^2, kurtosis 6 + (1-a)^2/(2a)."""
    a = math.exp(-1.0 / spec.grid_scale)
    one_minus_a = -math.expm1(-1.0 / spec.grid_scale)
    return 2 * a / one_minus_a**2, 6 + one_minus_a**2 / (2 * a)


def gaussian_moments(spec: NoiseSpec) -> tuple[float, float]:
    """Exact variance and kurtosis of the discrete Gaussian, by summing its pmf."""
    sigma = spec.grid_scale
    z = np.arange(-int(14 * sigma) - 10, int(14 * sigma) + 11, dtype=np.float64)
    w = np.exp(-(z * z) / (2 * sigma * sigma))
    w /= w.sum()
    var = float((w * z**2).sum())
    return var, float((w * z**4).sum()) / var**2


def assert_variance_in_band(errors: np.ndarray, variance: float, kurtosis: float) -> None:
    """mean(err^2) / variance ~ chi2(nu) / nu with nu = 2n / (kurtosis - 1): the chi-square
    band of a normal sample, widened (Satterthwaite) for the heavier tails of Laplace noise.
    Also the mean error must be zero (no bias)."""
    n = errors.size
    ratio = float(np.mean(errors * errors)) / variance
    nu = 2 * n / (kurtosis - 1)
    alpha = 1e-6
    low, high = stats.chi2.ppf(alpha / 2, nu) / nu, stats.chi2.ppf(1 - alpha / 2, nu) / nu
    assert low <= ratio <= high, (ratio, low, high)
    assert abs(float(np.mean(errors))) <= 5.3 * math.sqrt(variance / n)


def draws(db: dpsql.Database, sql: str, times: int, **privacy: Any
          ) -> tuple[np.ndarray, NoiseSpec]:
    p = db.planner.prepare(sql, **privacy)
    (m,) = p.measurements
    values = np.array([answer(p, db.engine, db.randomness).rows[0][0] for _ in range(times)],
                      dtype=np.float64)
    return values, m.noise  # type: ignore[return-value]


def test_count_noise_has_the_discrete_laplace_scale(db: dpsql.Database) -> None:
    values, spec = draws(db, "SELECT COUNT(*) FROM t", 1000, epsilon=0.5)
    assert spec.mechanism == "laplace" and spec.granularity == 1 and spec.grid_scale == 2.0
    assert np.all(values == np.round(values))
    assert_variance_in_band(values - N, *laplace_moments(spec))
    # The band is narrow enough to notice noise calibrated to twice the epsilon.
    half = NoiseSpec("laplace", True, 1.0, spec.grid_scale / 2, spec.scale / 2)
    with pytest.raises(AssertionError):
        assert_variance_in_band(values - N, *laplace_moments(half))


def test_real_sum_noise_has_the_discrete_laplace_scale(db: dpsql.Database) -> None:
    exact = float(truth(db, "SELECT SUM(x) FROM t"))
    values, spec = draws(db, "SELECT SUM(x) FROM t", 800, epsilon=2.0)
    assert spec.mechanism == "laplace" and not spec.integer
    assert spec.scale == pytest.approx(100 / 2.0, rel=1e-6)
    variance, kurtosis = laplace_moments(spec)
    errors = (values - exact) / spec.granularity  # in grid units
    assert_variance_in_band(errors, variance, kurtosis)


def test_count_noise_has_the_discrete_gaussian_scale(db: dpsql.Database) -> None:
    values, spec = draws(db, "SELECT COUNT(*) FROM t", 1000, epsilon=2.0, delta=1e-5,
                         mechanism="gaussian")
    assert spec.mechanism == "gaussian" and spec.granularity == 1
    variance, kurtosis = gaussian_moments(spec)
    assert variance == pytest.approx(spec.grid_scale**2, rel=1e-3)
    assert_variance_in_band(values - N, variance, kurtosis)
