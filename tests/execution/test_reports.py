"""ZetaSQL's ``report_format => 'JSON'`` (dpsql.execution.reports): a report is a value of the
post-processing query, built from released values only, read as BigQuery users read it; and
ZetaSQL's per-group COUNT (each unit's count in a group, clamped). Through the DB-API on
ZetaSQL's own tables (tests/query/test_zetasql_semantics.py), noise removed where an exact
answer is compared."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.privacy import mechanisms
from tests.query.test_zetasql_semantics import ZETA_TABLES, zeta_metadata

CLAUSE = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0, epsilon = 1) "
SUM = "SUM(double_val, contribution_bounds_per_group => (0, 10)"
#: Every key a report may hold (module docstring of dpsql.execution.reports)
KEYS = {"result", "value", "noise_confidence_interval", "confidence_level", "lower_bound",
        "upper_bound", "bounding_report"}


def write_tables(path: Path, skip_unit: int | None = None) -> Path:
    """ZetaSQL's tables in a DuckDB file (without the unit ``skip_unit``: a neighbour)."""
    with duckdb.connect(str(path)) as con:
        for name, rows in ZETA_TABLES.items():
            con.execute(f"CREATE TABLE {name} (id BIGINT, uid BIGINT, int64_val BIGINT, "
                        "double_val DOUBLE)")
            con.executemany(f"INSERT INTO {name} VALUES (?, ?, ?, ?)",
                            [r for r in rows if r[1] != skip_unit])
    return path


@pytest.fixture(scope="module")
def zeta_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("reports")
    (folder / "metadata.toml").write_text(zeta_metadata())
    return write_tables(folder / "zeta.duckdb"), folder / "metadata.toml"


@pytest.fixture()
def zeta(zeta_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[dpsql.Connection]:
    """A connection whose noise draws are all zero (exact answers, as at epsilon 1e20)."""
    monkeypatch.setattr(mechanisms, "_noise", lambda spec, n, rng: np.zeros(n, dtype=np.int64))
    with dpsql.connect(database=zeta_files[0], metadata=zeta_files[1], epsilon=1.0) as conn:
        yield conn


def keys(value: object) -> set[str]:
    """Every key of a JSON value, at any depth."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys(v)}
    return set()


def test_a_report_is_a_value_the_query_reads(zeta: dpsql.Connection) -> None:
    """Field access and BigQuery's JSON functions on a report: its value is the aggregate's
    released value, its interval the noise's 95% interval (the cell's accuracy)."""
    cur = zeta.cursor()
    cur.execute(f"{CLAUSE}{SUM}) AS s, "
                f"{SUM}, report_format => 'JSON').result.noise_confidence_interval AS ci, "
                f"JSON_VALUE({SUM}, report_format => 'JSON'), '$.result.value') AS v, "
                f"DOUBLE({SUM}, report_format => 'JSON').result.value) * 2 AS twice "
                "FROM TestTableWithUid2")
    assert [d[0] for d in cur.description] == ["s", "ci", "v", "twice"]
    assert [d[1] for d in cur.description] == ["DOUBLE", "JSON", "VARCHAR", "DOUBLE"]
    [(s, ci, v, twice)] = cur.fetchall()
    [(half, *_)] = cur.accuracy
    assert s == 11.0 and float(v) == s and twice == 2 * s
    assert json.loads(ci) == {"confidence_level": 0.95, "lower_bound": -half,
                              "upper_bound": half}
    assert half > 0


def test_a_quantile_list_report(zeta: dpsql.Connection) -> None:
    """APPROX_QUANTILES' report lists each quantile with its interval: the clamping bounds it
    was drawn within (an exponential mechanism's error is in ranks, not values)."""
    cur = zeta.cursor()
    cur.execute(f"{CLAUSE}APPROX_QUANTILES(double_val, 2, contribution_bounds_per_row => "
                "(1, 3), report_format => 'JSON') AS r, APPROX_QUANTILES(double_val, 2, "
                "contribution_bounds_per_row => (1, 3)) AS q FROM TestTableWithUid2")
    [(r, q)] = cur.fetchall()
    report = json.loads(r)
    assert [e["value"] for e in report["result"]] == q and len(q) == 3
    for element in report["result"]:
        assert element["noise_confidence_interval"] == {
            "confidence_level": 0.95, "lower_bound": 1, "upper_bound": 3}
    cur.execute("SELECT DOUBLE(r[OFFSET(2)].noise_confidence_interval.upper_bound) AS hi, "
                "DOUBLE(r[OFFSET(0)].value) AS lo FROM (SELECT WITH DIFFERENTIAL_PRIVACY "
                "OPTIONS(epsilon = 1, delta = 0) "
                "JSON_QUERY_ARRAY(APPROX_QUANTILES(double_val, 2, contribution_bounds_per_row "
                "=> (1, 3), report_format => 'JSON').result) AS r FROM TestTableWithUid2)")
    [(hi, lo)] = cur.fetchall()  # another release: its own draw
    assert hi == 3.0 and 1 <= lo <= 3


def test_reports_over_no_rows(zeta: dpsql.Connection) -> None:
    """Over no rows a report holds the released (noisy) value and the same intervals."""
    cur = zeta.cursor()
    cur.execute(f"{CLAUSE}COUNT(*, report_format => 'JSON') AS n, {SUM}, report_format => "
                "'JSON').result AS s FROM TestTableWithUid2 WHERE id > 1000")
    [(n, s)] = [tuple(json.loads(c) for c in row) for row in cur.fetchall()]
    cur.execute(f"{CLAUSE}APPROX_QUANTILES(int64_val, 2, contribution_bounds_per_row => (1, 10),"
                " report_format => 'JSON') AS q FROM TestTableWithUid2 WHERE id > 1000")
    [(q,)] = [tuple(json.loads(c) for c in row) for row in cur.fetchall()]
    assert n["result"]["value"] == 0 and s["value"] == 0
    assert n["result"]["noise_confidence_interval"]["upper_bound"] > 0
    assert [e["noise_confidence_interval"]["lower_bound"] for e in q["result"]] == [1, 1, 1]
    assert [e["noise_confidence_interval"]["upper_bound"] for e in q["result"]] == [10] * 3


@pytest.mark.parametrize("written, lo, hi", [
    ("*", 0, 1), ("*", 0, 2), ("int64_val", 0, 2), ("int64_val", 2, 10), ("double_val", 1, 3)])
def test_per_group_count_is_zetasqls(zeta: dpsql.Connection, written: str, lo: int,
                                     hi: int) -> None:
    """COUNT(x, contribution_bounds_per_group => (lo, hi)) is the sum over units of each
    unit's count clamped to [lo, hi] (ZetaSQL's); (0, 1) on COUNT(*) counts the units. The
    reference is plain SQL on the same table."""
    cur = zeta.cursor()
    cur.execute(f"{CLAUSE}COUNT({written}, contribution_bounds_per_group => ({lo}, {hi})) "
                "FROM TestTableWithUid2")
    with duckdb.connect() as con:
        con.execute("CREATE TABLE TestTableWithUid2 (id BIGINT, uid BIGINT, int64_val BIGINT, "
                    "double_val DOUBLE)")
        con.executemany("INSERT INTO TestTableWithUid2 VALUES (?, ?, ?, ?)",
                        ZETA_TABLES["TestTableWithUid2"])
        [(expected,)] = con.execute(
            f"SELECT SUM(LEAST(GREATEST(c, {lo}), {hi})) FROM (SELECT uid, COUNT({written}) "
            "AS c FROM TestTableWithUid2 GROUP BY uid)").fetchall()
    assert cur.fetchall() == [(expected,)]
    assert cur.description[0][1] == "BIGINT"
    assert any(n.startswith(f"COUNT({written}) is the sum over privacy units of each unit's "
                            f"own count in its group, clamped to [{lo}, {hi}]")
               for n in cur.notes), cur.notes


def test_bounds_chosen_from_the_data_are_the_released_ones(zeta_files: tuple[Path, Path],
                                                            tmp_path: Path) -> None:
    """The bounding report holds the bounds drawn from the data, as the answer releases them
    (Result.chosen_bounds), and nothing else: no count of private rows (ZetaSQL's num_inputs
    and num_outside read NULL)."""
    auto = tmp_path / "auto.toml"
    auto.write_text(zeta_metadata().replace(
        'double_val = { type = "float", lower = -10, upper = 10, nullable = true }',
        'double_val = { type = "float", lower = -10, upper = { auto = true, max = 10, '
        'share = 0.2 }, nullable = true }'))
    db = dpsql.Database(zeta_files[0], auto)
    result = db.query("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                      "SUM(double_val, report_format => "
                      "'JSON') AS r, SUM(double_val, report_format => 'JSON')"
                      ".bounding_report.num_inputs AS n FROM TestTableWithUid2", epsilon=1.0)
    [(text, inputs)] = result.rows
    report = json.loads(text)
    assert result.chosen_bounds is not None
    assert tuple(report["bounding_report"].values()) == result.chosen_bounds["double_val"]
    assert list(report["bounding_report"]) == ["lower_bound", "upper_bound"]
    assert inputs is None


def test_a_report_of_dates(tmp_path: Path) -> None:
    """A quantile of dates is reported as its ISO text (the interval is in days: none given),
    and the column keeps the name written, APPROX_QUANTILES included."""
    database, metadata = tmp_path / "d.duckdb", tmp_path / "m.toml"
    with duckdb.connect(str(database)) as con:
        con.execute("CREATE TABLE t AS SELECT i % 7 AS pid, DATE '2020-01-01' + (i % 100)::INT "
                    "AS d FROM range(500) r(i)")
    metadata.write_text('[tables.t]\nprivacy_unit = "pid"\nmax_rows_per_unit = 100\n'
                        '[tables.t.columns]\npid = { type = "int" }\n'
                        'd = { type = "date", lower = 2020-01-01, upper = 2020-12-31 }\n')
    with dpsql.connect(database=database, metadata=metadata) as conn:
        cur = conn.cursor()
        cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                    "APPROX_QUANTILES(d, 2, report_format => "
                    "'JSON') FROM t")
        [(text,)] = cur.fetchall()
        assert cur.description[0][:2] == ("APPROX_QUANTILES(d, 2)", "JSON")
    for element in json.loads(text)["result"]:
        assert "2020-01-01" <= element["value"] <= "2020-12-31"
        assert element["noise_confidence_interval"]["lower_bound"] is None


# --------------------------------------------------------------------------- attacks


def test_a_report_carries_only_released_values(zeta_files: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    """On neighbouring databases, with real noise, every report holds the same keys and
    the same intervals (a function of the plan), the value is the released aggregate asked
    beside it, and a field that would read anything else (an exact value, a count of private
    rows) is NULL: the data reaches a report only through its released value."""
    sql = (f"{CLAUSE}SUM(double_val) AS s, SUM(double_val, report_format => 'JSON') AS r, "
           "SUM(double_val, report_format => 'JSON').result.exact AS exact, "
           "APPROX_QUANTILES(double_val, 2, contribution_bounds_per_row => (1, 3), "
           "report_format => 'JSON') AS q FROM TestTableWithUid2")
    seen = []
    for database in (zeta_files[0], write_tables(tmp_path / "neighbour.duckdb", skip_unit=3)):
        with dpsql.connect(database=database, metadata=zeta_files[1]) as conn:
            cur = conn.cursor()
            cur.execute(sql)
            [(s, r, exact, q)] = cur.fetchall()
        report, quantiles = json.loads(r), json.loads(q)
        assert keys(report) <= KEYS and keys(quantiles) <= KEYS
        assert report["result"]["value"] == s and exact is None
        for part in (report, *quantiles["result"]):
            part.get("result", part).pop("value")
        seen.append((report, quantiles))
    assert seen[0] == seen[1]


@pytest.mark.parametrize("sql, words", [
    (f"{CLAUSE}DPSQL_REPORT(COUNT(*) + 1) FROM TestTableWithUid", "not an expression"),
    (f"{CLAUSE}DPSQL_REPORT(COUNT(*), SUM(double_val)) FROM TestTableWithUid",
     "not an expression"),
    ("SELECT DPSQL_REPORT(n) FROM (SELECT WITH DIFFERENTIAL_PRIVACY "
     "OPTIONS(epsilon = 1, delta = 0) "
     "COUNT(*) AS n FROM "
     "TestTableWithUid)", "move it inside"),
    (f"{CLAUSE}COUNT(*, report_format => 'PROTO') FROM TestTableWithUid", "'JSON'"),
    (f"{CLAUSE}COUNT(*, report_format => 'JSON') + 1 FROM TestTableWithUid", "outer part"),
])
def test_a_report_of_anything_else_is_refused(zeta: dpsql.Connection, sql: str,
                                              words: str) -> None:
    """A report shows one released aggregate (or a quantile list) of the private query: of an
    expression, of two cells, of a query over released rows, or as a number, it is refused
    when the query is planned."""
    with pytest.raises(dpsql.NotSupportedError, match=words):
        zeta.cursor().execute(sql)


@pytest.mark.parametrize("column", ["__report_0", "__acc___a0", "__a0"])
def test_the_post_processing_columns_cannot_be_named(zeta: dpsql.Connection,
                                                      column: str) -> None:
    """The scratch table's report, accuracy and cell columns are not the analyst's to read:
    named in a query (beside a report, or inside one) they are unknown columns."""
    for sql in (f"{CLAUSE}COUNT(*, report_format => 'JSON'), {column} FROM TestTableWithUid",
                f"{CLAUSE}COUNT(*), DPSQL_REPORT({column}) FROM TestTableWithUid"):
        with pytest.raises(dpsql.ProgrammingError, match="not declared"):
            zeta.cursor().execute(sql)

