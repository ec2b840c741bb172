"""ZetaSQL's meaning of BigQuery's clause, proved by execution on ZetaSQL's own four tables
(``zetasql/compliance/testdata/differential_privacy.test``): with the noise removed (every
noise draw zero, the test support that reads exact answers), each answer is ZetaSQL's expected
value at epsilon = 1e20."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.privacy import mechanisms

# ZetaSQL's TestTableWithUid..4: (id, uid, int64_val, double_val); TestTableWithUid has
# one row per uid (its id is the uid).
_N = None
ZETA_TABLES = {
    "TestTableWithUid": [(1, 1, _N, _N), (2, 2, 2, 1.5), (3, 3, 1, 1.5), (4, 4, _N, 2.5),
                         (5, 5, 1, 3.5), (6, 6, 2, _N), (7, 7, 1, -0.5), (8, 8, 4, -1.5),
                         (9, 9, 2, 1.5), (10, 10, 3, 2.5)],
    "TestTableWithUid2": [(1, 1, _N, _N), (2, 2, 2, 1.5), (3, 3, 1, 1.5), (4, 1, _N, 2.5),
                          (5, 2, 1, 3.5), (6, 2, 2, _N), (7, 1, 1, -0.5), (8, 2, 4, -1.5),
                          (9, 3, 2, 1.5), (10, 2, 3, 2.5)],
    "TestTableWithUid3": [(1, 1, _N, _N), (2, 2, 2, 1.5), (3, 1, 1, 1.5), (4, 1, _N, 2.5),
                          (5, 1, 1, 3.5), (6, 2, 2, _N), (7, 1, 1, -0.5), (8, 1, 4, -1.5),
                          (9, 3, 2, 1.5), (10, 1, 3, 2.5)],
    "TestTableWithUid4": [(1, 1, _N, _N), (2, 2, _N, _N), (3, 1, _N, _N), (4, 1, _N, _N),
                          (5, 1, _N, _N), (6, 2, _N, _N), (7, 1, _N, _N)],
}


def zeta_metadata() -> str:
    """Each table bounded at k = 10 rows per uid (none is dropped), the values' bounds wide
    enough that no declared bound bites."""
    parts = []
    for name in ZETA_TABLES:
        parts.append(f"""
[tables.{name}]
privacy_unit = "uid"
max_rows_per_unit = 10
max_groups_per_unit = 3

[tables.{name}.columns]
id = {{ type = "int", lower = 1, upper = 10 }}
uid = {{ type = "int" }}
int64_val = {{ type = "int", lower = -10, upper = 10, nullable = true }}
double_val = {{ type = "float", lower = -10, upper = 10, nullable = true }}
""")
    return "".join(parts)


@pytest.fixture(scope="module")
def zeta_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("zeta")
    db, toml = folder / "zeta.duckdb", folder / "metadata.toml"
    with duckdb.connect(str(db)) as con:
        for name, rows in ZETA_TABLES.items():
            con.execute(f"CREATE TABLE {name} (id BIGINT, uid BIGINT, int64_val BIGINT, "
                        "double_val DOUBLE)")
            con.executemany(f"INSERT INTO {name} VALUES (?, ?, ?, ?)", rows)
    toml.write_text(zeta_metadata())
    return db, toml


@pytest.fixture()
def no_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every noise draw zero: the released values are the exact measurements (on the noise
    grid), as ZetaSQL's at epsilon = 1e20."""
    monkeypatch.setattr(mechanisms, "_noise", lambda spec, n, rng: np.zeros(n, dtype=np.int64))


@pytest.fixture()
def zeta(zeta_files: tuple[Path, Path], no_noise: None) -> Iterator[dpsql.Connection]:
    with dpsql.connect(database=zeta_files[0], metadata=zeta_files[1], epsilon=1.0) as conn:
        yield conn


def answer(conn: dpsql.Connection, sql: str) -> list[tuple[object, ...]]:
    cur = conn.cursor()
    cur.execute(sql)
    return cur.fetchall()


CLAUSE = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6) "


@pytest.mark.parametrize(("select", "table", "expected"), [
    # per-group SUM: a uid whose values are all NULL contributes nothing (not its lower bound)
    ("SUM(int64_val, contribution_bounds_per_group => (2, 3))", "TestTableWithUid", 18),
    ("SUM(int64_val, contribution_bounds_per_group => (2, 3))", "TestTableWithUid2", 8),
    ("SUM(double_val, contribution_bounds_per_group => (0, 10))", "TestTableWithUid", 13),
    ("SUM(double_val, contribution_bounds_per_group => (0, 10))", "TestTableWithUid2", 11),
    # per-group AVG: the average over persons of each one's clamped average
    ("AVG(int64_val, contribution_bounds_per_group => (2, 3))", "TestTableWithUid2",
     2.1333333333333333),
    ("AVG(int64_val, contribution_bounds_per_group => (2, 3))", "TestTableWithUid", 2.25),
    ("AVG(double_val, contribution_bounds_per_group => (0, 10))", "TestTableWithUid", 1.625),
    ("AVG(double_val, contribution_bounds_per_group => (0, 10))", "TestTableWithUid2",
     1.3333333333333335),
    # AVG without bounds in the clause: the same per-person meaning, the owner's bounds
    ("AVG(double_val)", "TestTableWithUid", 1.375),
    ("AVG(double_val)", "TestTableWithUid2", 1.3333333333333333),
    ("AVG(int64_val)", "TestTableWithUid", 2),
    # SUM without bounds: no bound bites, the plain sum
    ("SUM(double_val)", "TestTableWithUid2", 11),
    ("SUM(int64_val)", "TestTableWithUid2", 16),
    # per-group COUNT: a person's count, in [0, k]
    ("COUNT(double_val, contribution_bounds_per_group => (0, 10))", "TestTableWithUid", 8),
    ("COUNT(*, contribution_bounds_per_group => (0, 10))", "TestTableWithUid2", 10),
    # per-row bounds keep NULLs NULL, whatever the literals' type
    ("VAR_POP(double_val, contribution_bounds_per_row => (2.0, 3.0))", "TestTableWithUid2",
     0.125),
    ("VAR_POP(int64_val, contribution_bounds_per_row => (2.0, 3.0))", "TestTableWithUid2",
     0.1875),
    ("SUM(int64_val, contribution_bounds_per_row => (2.0, 3.0))", "TestTableWithUid", 18),
    ("SUM(int64_val, contribution_bounds_per_row => (2, 3))", "TestTableWithUid", 18),
    ("STDDEV_POP(int64_val, contribution_bounds_per_row => (2, 3))", "TestTableWithUid2",
     0.4330127018922193),
])
def test_zetasql_values(zeta: dpsql.Connection, select: str, table: str,
                        expected: float) -> None:
    [(value,)] = answer(zeta, f"{CLAUSE}{select} FROM {table}")
    assert value == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_all_null_persons_contribute_nothing(zeta: dpsql.Connection) -> None:
    """TestTableWithUid4: every value NULL. No person contributes to a per-group SUM or COUNT
    of values; the per-person AVG of nobody is the midpoint of its bounds (c + 0 / max(0, 1)),
    as ZetaSQL's VAR_POP of nobody is that of its bounds."""
    [(total, count, avg)] = answer(zeta, f"{CLAUSE}SUM(int64_val, contribution_bounds_per_group"
                                         " => (2, 3)), COUNT(double_val, contribution_bounds_"
                                         "per_group => (0, 10)), AVG(double_val, contribution_"
                                         "bounds_per_group => (2, 4)) FROM TestTableWithUid4")
    assert (total, count, avg) == (0, 0, 3.0)


def test_avg_outside_the_clause_keeps_its_row_meaning(zeta: dpsql.Connection) -> None:
    """Plain dpsql AVG averages rows (1.375 on TestTableWithUid2); inside the clause it is
    ZetaSQL's per-person average (1.333...)."""
    [(rows,)] = answer(zeta, "SELECT AVG(double_val) FROM TestTableWithUid2")
    [(persons,)] = answer(zeta, f"{CLAUSE}AVG(double_val) FROM TestTableWithUid2")
    assert rows == pytest.approx(1.375) and persons == pytest.approx(4 / 3)


ZETA_JSON = ('{"result":{"noise_confidence_interval":{"confidence_level":0.95,"lower_bound":'
             '-A,"upper_bound":A},"value":V}}')


def test_report_format_json_through_the_dbapi(zeta: dpsql.Connection) -> None:
    """report_format => 'JSON': ZetaSQL's report as a JSON column (the text, type JSON), its
    interval the noise's 95% interval, which is the cell's accuracy."""
    cur = zeta.cursor()
    cur.execute(f"{CLAUSE}COUNT(double_val, contribution_bounds_per_group => (0, 10), "
                "report_format => 'JSON') AS n, SUM(double_val, contribution_bounds_per_group "
                "=> (0, 10), report_format => \"JSON\") FROM TestTableWithUid2")
    assert [d[1] for d in cur.description] == ["JSON", "JSON"]
    [(count, total)] = cur.fetchall()
    assert isinstance(count, str) and isinstance(total, str)
    for text, value in ((count, "8"), (total, "11.0")):
        half = json.loads(text)["result"]["noise_confidence_interval"]["upper_bound"]
        assert half > 0
        assert text == ZETA_JSON.replace("V", value).replace("A", repr(half))
    [(n_accuracy, sum_accuracy)] = cur.accuracy
    assert n_accuracy is None and sum_accuracy is None  # a report is not a number


def test_report_format_refusals_charge_nothing(zeta: dpsql.Connection) -> None:
    cur = zeta.cursor()
    for sql in (f"{CLAUSE}COUNT(*, report_format => 'PROTO') FROM TestTableWithUid",
                f"{CLAUSE}DPSQL_REPORT(COUNT(*) * 2) FROM TestTableWithUid"):
        with pytest.raises(dpsql.NotSupportedError, match=r"report_format|JSON"):
            cur.execute(sql)


def test_notes_say_which_bounds_were_used(zeta: dpsql.Connection) -> None:
    cur = zeta.cursor()
    cur.execute(f"{CLAUSE}AVG(double_val), SUM(int64_val, contribution_bounds_per_group => "
                "(2, 3)) FROM TestTableWithUid2")
    notes = " ".join(cur.notes)
    assert "each unit's own average in its group, clamped to [-10, 10] (no bounds written" \
        in notes
    assert "each unit's own total in its group, clamped to [2, 3] (contribution_bounds_per_" \
        "group as written)" in notes


def test_bounds_chosen_from_the_data_are_reported(zeta_files: tuple[Path, Path],
                                                  tmp_path: Path, no_noise: None) -> None:
    """Where a column's bound is chosen from the data (an automatic value bound), the JSON
    report adds ZetaSQL's bounding report, and ZetaSQL's AVG reads the chosen bounds."""
    auto = tmp_path / "auto.toml"
    auto.write_text(zeta_metadata().replace(
        'double_val = { type = "float", lower = -10, upper = 10, nullable = true }',
        'double_val = { type = "float", lower = -10, upper = { auto = true, max = 10, '
        'share = 0.2 }, nullable = true }'))
    with dpsql.connect(database=zeta_files[0], metadata=auto, epsilon=1.0) as conn:
        [(text, avg)] = answer(conn, f"{CLAUSE}SUM(double_val, report_format => 'JSON'), "
                                     "AVG(double_val) FROM TestTableWithUid2")
    report = json.loads(text)
    bounding = report["bounding_report"]
    lower, upper = bounding["lower_bound"], bounding["upper_bound"]
    assert lower == -10 and 0 < upper <= 10
    assert -10 <= avg <= upper
