"""``dpsql metadata check`` (dpsql.owner.metadata_check): the owner's exact report of what k,
g and the column bounds drop, and the suggested bounds, on a small database whose answers are
known."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from dpsql.cli import main
from dpsql.database import Database
from dpsql.owner.metadata_check import check_metadata_bounds, count_accuracy, kept, suggest

META = """
[tables.v]
privacy_unit = "pid"
max_rows_per_unit = 2
max_groups_per_unit = 1

[tables.v.columns]
pid = { type = "int", nullable = true }
cat = { type = "text", values = ["a", "b", "c"] }
x = { type = "int", lower = 0, upper = 10 }

[tables.p]
unit_path = "vid -> w.vid"
max_rows_per_unit = 1
max_groups_per_unit = 1

[tables.p.columns]
vid = { type = "int" }

[tables.w]
privacy_unit = "pid"
max_rows_per_unit = 1
max_groups_per_unit = 1
one_row_per_unit = true

[tables.w.columns]
vid = { type = "int", unique = true }
pid = { type = "int" }
"""


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    """Unit 1: 1 row; unit 2: 2 rows in a, b; unit 3: 5 rows in a, b, c (x = 20 once, out of
    bounds); one row with a NULL unit. p: unit 7 has 3 rows through w, unit 8 one."""
    folder = tmp_path_factory.mktemp("retention")
    path = folder / "r.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE v (pid BIGINT, cat VARCHAR, x BIGINT)")
        con.execute("INSERT INTO v VALUES (1, 'a', 1), (2, 'a', 1), (2, 'b', 1), (3, 'a', 1), "
                    "(3, 'a', 1), (3, 'b', 20), (3, 'c', 1), (3, 'c', -1), (NULL, 'a', 1)")
        con.execute("CREATE TABLE w (vid BIGINT, pid BIGINT)")
        con.execute("INSERT INTO w VALUES (1, 7), (2, 7), (3, 8)")
        con.execute("CREATE TABLE p (vid BIGINT)")
        con.execute("INSERT INTO p VALUES (1), (1), (2), (3)")
    meta = folder / "m.toml"
    meta.write_text(META)
    database = Database(path, meta)
    yield database
    database.close()


def test_rows_units_and_clamping_are_exact(db: Database) -> None:
    checks = {c.table: c for c in check_metadata_bounds(db.engine, db.metadata)}
    assert set(checks) == {"v", "p"}  # w is one row per unit: never bounded
    v = checks["v"]
    whole, by_cat = v.kept
    assert (whole.key, whole.rows, whole.rows_kept, whole.units, whole.units_whole) == \
        (None, 8, 1 + 2 + 2, 3, 2)
    assert v.null_unit_rows == 1
    # g = 1 of d groups: unit 2 keeps 2 * 1/2 = 1 row, unit 3 keeps min(2, 5 * 1/3).
    assert by_cat.key == "cat" and by_cat.rows_kept == pytest.approx(1 + 1 + 5 / 3)
    assert by_cat.units_whole == 1
    (x,) = v.clamped
    assert (x.column, x.outside, x.values) == ("x", 2, 9)
    p = checks["p"]  # per unit through the path: unit 7 has 3 rows, unit 8 one
    assert (p.kept[0].rows, p.kept[0].rows_kept, p.kept[0].units_whole) == (4, 2, 1)


def test_suggestions_keep_the_target_and_say_their_noise() -> None:
    histogram = {(1, 1): 10, (4, 2): 5, (100, 4): 1}  # 130 rows
    k, g = suggest([{(n, 1): c for (n, _), c in histogram.items()}, histogram], 0.8, 0.5)
    assert k.name == "max_rows_per_unit" and kept(histogram, k.value, 99, None).share >= 0.8
    assert kept(histogram, k.value - 1, 99, None).share < 0.8  # the smallest such k
    assert k.count_accuracy == count_accuracy(k.value, 0.5) > count_accuracy(1, 0.5)
    assert g is not None and 1 <= g.value <= k.value


def test_cli_prints_the_report(db: Database) -> None:
    result = CliRunner().invoke(main, ["metadata", "check", "-d", str(db.engine.location), "-m",
                                       str(db.metadata.path), "--target", "0.9"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "table v: max_rows_per_unit k = 2, max_groups_per_unit g = 1" in out
    assert "(whole table) |    8 |         5 | 62.5%" in out
    assert "suggested for 90% of rows: max_rows_per_unit = 5" in out
    assert "1 row(s) have a NULL unit" in out


def test_init_proposes_k_g_not_null_and_unique(db: Database, tmp_path: Path) -> None:
    out = tmp_path / "proposed.toml"
    result = CliRunner().invoke(main, ["metadata", "init", "-d", str(db.engine.location),
                                       "--unit", "pid", "-e", "100", "-o", str(out)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    tables = tomllib.loads(out.read_text())["tables"]
    v = tables["v"]
    # Rows per unit 1, 2, 5 (the NULL unit's row is dropped): at epsilon 100 the noise is
    # small, so k = 5, which keeps them all (no bias), has the smallest bias + noise.
    assert (v["privacy_unit"], v["max_rows_per_unit"]) == ("pid", 5)
    assert 1 <= v["max_groups_per_unit"] <= 3
    assert v["columns"]["pid"]["nullable"] is True and v["columns"]["x"]["nullable"] is False
    assert tables["w"]["columns"]["vid"]["unique"] is True
    assert "unique" not in tables["w"]["columns"]["pid"]
    assert "privacy_unit" not in tables["p"]  # no unit column: left to the owner


def test_init_shows_k_against_bias_and_noise(db: Database, tmp_path: Path) -> None:
    """``--unit`` prints, per k, the rows a whole-table COUNT(*) drops (its bias, exact) and
    its noise at the query's epsilon, and writes the k with the smallest sum: at epsilon 1,
    k = 1 drops 5 of the 8 rows (units of 1, 2, 5 rows) but its noise is a fifth of k = 5's."""
    out = tmp_path / "proposed.toml"
    result = CliRunner().invoke(main, ["metadata", "init", "-d", str(db.engine.location),
                                       "--unit", "pid", "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    errors = {k: bias + count_accuracy(k, 1.0) for k, bias in ((1, 5), (2, 3), (5, 0))}
    best = min(errors, key=lambda k: (errors[k], k))
    assert tomllib.loads(out.read_text())["tables"]["v"]["max_rows_per_unit"] == best == 1
    shown = result.stderr[result.stderr.index("table v:"):]
    shown = shown[:shown.index("written:")]  # table v's k (w's follow)
    lines = [line for line in shown.splitlines() if line.split("|")[0].strip().isdigit()]
    assert [line.split("|")[2].strip() for line in lines] == ["5", "3", "0"]  # rows dropped
    assert [line.split("|")[3].strip() for line in lines] == [
        str(round(count_accuracy(k, 1.0))) for k in (1, 2, 5)]
    assert "<- written" in lines[0] and f"written: k = {best}" in result.stderr


def test_cli_reports_an_automatic_k(db: Database, tmp_path: Path) -> None:
    """An automatic k (dpsql.metadata.auto) has no one k: the report says each query chooses
    it in [1, max] for its share of epsilon, shows what the cap keeps, and the smallest k
    keeping each share of the rows (units of 1, 2 and 5 rows: 8 rows)."""
    meta = tmp_path / "auto.toml"
    meta.write_text(META.replace("max_rows_per_unit = 2\n", "max_rows_per_unit = { auto = "
                                 "true, max = 4, share = 0.25 }\n", 1), encoding="utf-8")
    result = CliRunner().invoke(main, ["metadata", "check", "-d", str(db.engine.location), "-m",
                                       str(meta)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert ("table v: max_rows_per_unit chosen by each query from the data, in [1, 4], for 25% "
            "of its epsilon (auto); max_groups_per_unit g = 1. Kept at the cap k = 4") in out
    assert "(whole table) |    8 |         7 | 87.5%" in out  # 1 + 2 + 4 rows at the cap
    assert "table v: max_rows_per_unit k =" not in out
    assert "max_rows_per_unit = " not in out.split("table p:")[0]  # no one k to declare
    assert f"(0.75 for its measurements) is within +/-{count_accuracy(4, 0.75):g}" in out
    table = {cells[0]: cells[1:] for line in out.splitlines()
             if (cells := [c.strip() for c in line.split("|")])[0].endswith("%")
             and len(cells) == 4}
    assert table["50%"][:2] == ["2", "1"]  # k = 2 keeps 5 of 8 rows; unit 3 has more
    assert table["95%"][:2] == ["5 (above the cap)", "0"]
    assert table["50%"][2] == f"+/-{count_accuracy(2, 0.75):g}"
    assert set(table) == {"50%", "90%", "95%", "99%", "100%"}
    assert "table p: max_rows_per_unit k = 1" in out  # other tables as before


def test_the_check_is_the_owners_alone() -> None:
    """``metadata check`` reads the data exactly: only the owner's command calls it (no server
    route, no analyst command), with the database's own path or URL."""
    import dpsql

    root = Path(dpsql.__file__).parent
    callers = {p.relative_to(root).as_posix() for p in root.rglob("*.py")
               if "check_metadata_bounds" in p.read_text(encoding="utf-8")}
    assert callers == {"owner/metadata_check.py", "cli/owner.py"}
