"""The command line, through click's CliRunner and as a real subprocess.

The sample data's metadata declares a privacy budget; the repository's root conftest gives the
whole run a throwaway ledger and each test its own analyst (environment variables, which the
subprocesses inherit).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest
from click.testing import CliRunner, Result

import dpsql
from dpsql.cli import main
from dpsql.metadata.metadata import load_metadata

GROUPED = "SELECT sex, COUNT(*) AS n, AVG(income) AS avg_income FROM people GROUP BY sex"


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def ok(*args: str) -> Result:
    result = cli(*args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def refused(result: Result | subprocess.CompletedProcess[str], error: str) -> str:
    code = result.exit_code if isinstance(result, Result) else result.returncode
    assert code == 2
    assert f"dpsql: {error}:" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout == ""
    return result.stderr


# ------------------------------------------------------------------ query on the sample data


def test_query_table_format() -> None:
    result = ok("query", GROUPED, "--epsilon", "0.5")
    lines = result.stdout.splitlines()
    assert re.match(r"sex\s*\|\s*n\s*\|\s*avg_income", lines[0])
    assert set(lines[1]) <= {"-", "+"}
    assert [line.split("|")[0].strip() for line in lines[2:]] == ["F", "M"]
    assert "(2 rows;" in result.stderr and "epsilon=0.5" in result.stderr


def test_query_csv_format() -> None:
    result = ok("query", GROUPED, "--format", "csv", "--epsilon", "0.5")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["sex"] for r in rows] == ["F", "M"]
    for r in rows:
        assert int(r["n"]) > 5000  # an integer cell prints as an integer
        assert 10_000 < float(r["avg_income"]) < 100_000
    assert "(2 rows;" in result.stderr and "epsilon=0.5" in result.stderr


def test_query_json_format() -> None:
    """One object: columns, rows with each noisy cell's ±95% beside it, caveats, notes, the
    label of randomized rows (null here), the cost."""
    result = ok("query", GROUPED, "--format", "json", "--epsilon", "0.5")
    answer = json.loads(result.stdout)
    rows = answer["rows"]
    assert [r["sex"] for r in rows] == ["F", "M"]
    assert all(isinstance(r["n"], int) and isinstance(r["avg_income"], float) for r in rows)
    assert all(r["n ±95%"] > 0 and r["avg_income ±95%"] > 0 for r in rows)
    assert [c["name"] for c in answer["columns"]] == ["sex", "n", "avg_income"]
    assert answer["columns"][0]["accuracy"] is None
    assert answer["columns"][1] == {"name": "n", "type": "BIGINT", "accuracy": "n ±95%",
                                    "accuracy_unit": "value"}
    assert answer["randomized"] is None and answer["retention"] is None
    assert answer["cost"]["epsilon"] == 0.5 and answer["cost"]["charged"]
    assert answer["cost"]["remaining"]["epsilon"] > 0
    assert any("clamped" in n for n in answer["notes"])
    assert "(2 rows;" in result.stderr and "epsilon=0.5" in result.stderr


def test_report_format_json_column() -> None:
    """BigQuery's report_format => 'JSON': the column holds ZetaSQL's JSON report, its
    interval the noise's 95% interval (the cell's accuracy)."""
    result = ok("query", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5, delta = 0) "
                "COUNT(*, report_format => 'JSON') AS n FROM visits", "--format", "csv")
    [row] = list(csv.DictReader(io.StringIO(result.stdout)))
    report = json.loads(row["n"])
    interval = report["result"]["noise_confidence_interval"]
    assert isinstance(report["result"]["value"], int) and interval["confidence_level"] == 0.95
    assert interval["lower_bound"] == -interval["upper_bound"] < 0
    assert "epsilon=0.5" in result.stderr
    refused(cli("query", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) "
                "COUNT(*, report_format => 'PROTO') "
                "FROM visits"), "UnsupportedQuery")


def test_report_read_by_field_access_and_quantile_reports() -> None:
    """A report is a value the query reads (BigQuery's field access): each group's interval,
    the same for every group (a function of the plan); APPROX_QUANTILES' report lists each
    quantile with the bounds it was drawn within; charged once, as the query's epsilon."""
    result = ok("query", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0, epsilon = 0.5) "
                         "category, "
                "COUNT(*, report_format => 'JSON').result.noise_confidence_interval.upper_bound "
                "AS hi, APPROX_QUANTILES(amount, 2, contribution_bounds_per_row => (0, 100), "
                "report_format => 'JSON') AS q FROM visits GROUP BY category", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 8 and len({r["hi"] for r in rows}) == 1 and float(rows[0]["hi"]) > 0
    for row in rows:
        quantiles = json.loads(row["q"])["result"]
        assert len(quantiles) == 3
        assert all(q["noise_confidence_interval"]["lower_bound"] == 0
                   and q["noise_confidence_interval"]["upper_bound"] == 100 for q in quantiles)
    assert "epsilon=0.5" in result.stderr


def test_accuracy_columns() -> None:
    result = ok("query", GROUPED, "--format", "json", "--accuracy", "--epsilon", "0.5")
    rows = json.loads(result.stdout)["rows"]
    assert list(rows[0]) == ["sex", "n", "n ±95%", "avg_income", "avg_income ±95%"]
    assert all(r["n ±95%"] > 0 and r["avg_income ±95%"] > 0 for r in rows)
    result = ok("query", "SELECT MEDIAN(age) AS m FROM people", "--format", "csv", "--accuracy")
    assert result.stdout.splitlines()[0] == "m,m ±95% (ranks)"
    result = ok("query", GROUPED, "--accuracy")
    assert "n ±95%" in result.stdout.splitlines()[0]


def test_privacy_options() -> None:
    small = json.loads(ok("query", "SELECT COUNT(*) AS n FROM people", "--format", "json",
                          "--accuracy", "--epsilon", "0.1").stdout)["rows"]
    large = json.loads(ok("query", "SELECT COUNT(*) AS n FROM people", "--format", "json",
                          "--accuracy", "-e", "10").stdout)["rows"]
    assert small[0]["n ±95%"] > 10 * large[0]["n ±95%"]
    result = ok("query", "SELECT state, COUNT(*) AS n FROM people GROUP BY state",
                "--delta", "1e-6", "--format", "json")
    states = [r["state"] for r in json.loads(result.stdout)["rows"]]
    assert "CA" in states and "VT" not in states  # VT has 4 members: thresholded
    result = ok("query", "SELECT COUNT(*) AS n FROM people", "--mechanism", "gaussian",
                "--delta", "1e-6")
    assert "delta=1e-06" in result.stderr


@pytest.mark.parametrize(("args", "error", "says"), [
    (["SELECT amount FROM visits"], "NonAggregatedColumn", "without aggregating"),
    (["SELECT state, COUNT(*) FROM people GROUP BY state"], "KeyReleaseRefused",
     "(pass --delta 1e-06)"),
    (["DROP TABLE people"], "NotASingleSelect", "only SELECT"),
    (["SELECT COUNT(*) FROM nosuch"], "UnknownTable", "declared tables"),
    (["SELECT COUNT(*) FROM read_csv('/etc/passwd')"], "ForbiddenFunction", "not a table"),
    (["SELECT COUNT(*) FROM people", "--epsilon", "0"], "InvalidPrivacyParameter", "epsilon"),
    (["SELECT COUNT(*) FROM people", "--epsilon", "nan"], "InvalidPrivacyParameter", "epsilon"),
    (["SELECT COUNT(*) FROM people", "--delta", "-1"], "InvalidPrivacyParameter", "delta"),
    (["SELECT COUNT(*) FROM people", "--mechanism", "gaussian"], "InvalidPrivacyParameter",
     "delta > 0"),
    (["SELECT SUM(person_id) FROM people"], "UnboundedExpression", "person_id"),
    (["SELECT COUNT(*) FROM people p JOIN visits v ON p.age = v.duration_min"],
     "JoinRefused", "privacy unit"),
])
def test_refusals_go_to_stderr(args: list[str], error: str, says: str) -> None:
    assert says in refused(cli("query", *args), error)


def test_usage_errors() -> None:
    result = cli("query", "SELECT COUNT(*) FROM people", "--database", "x.duckdb")
    assert result.exit_code == 2 and "both --database and --metadata" in result.stderr
    result = cli("query", "SELECT COUNT(*) FROM people", "--mechanism", "uniform")
    assert result.exit_code == 2 and "Traceback" not in result.stderr


def test_metadata_init_quotes_any_name(tmp_path: Path) -> None:
    """Names with a quote, a backslash, a newline, a TOML comment sign or non-ASCII letters
    read back as the same names (a hand-written f-string once produced broken TOML)."""
    names = ['say "hi"', "back\\slash", "two\nlines", "# not a comment", "größe", "t\tab"]
    path = tmp_path / "odd.duckdb"
    columns = ", ".join(f'"{n.replace(chr(34), 2 * chr(34))}" INTEGER' for n in names)
    with duckdb.connect(str(path)) as con:
        con.execute(f'CREATE TABLE "odd ""table"" \\ name" ({columns})')
    out = tmp_path / "odd.toml"
    ok("metadata", "init", "-d", str(path), "-o", str(out))
    data = tomllib.loads(out.read_text(encoding="utf-8"))
    assert list(data["tables"]) == ['odd "table" \\ name']
    assert list(data["tables"]['odd "table" \\ name']["columns"]) == names


DAILY = ("SELECT day, COUNT(*) AS n, AVG(amount) AS a FROM visits "
         "WHERE day < DATE '2025-01-15' GROUP BY day")
#: At epsilon 0.05 about 11 of DAILY's 14 AVGs sit at a bound of [0, 5000] (a noisy count
#: near zero pins them there): none at all has a chance of about 1e-8.
AT_BOUND = "AVG at a bound: a at "


def test_caveats_in_the_footer_and_in_json() -> None:
    """Daily counts and AVGs at epsilon 0.05 (±95% in the tens of thousands): the footer says
    the noise exceeds the values and AVGs sit at a bound, without --accuracy; JSON carries
    both; --no-caveats leaves them out."""
    result = ok("query", DAILY, "-e", "0.05")
    assert "note: The noise exceeds the value in " in result.stderr
    assert "Coarser groups" in result.stderr
    assert f"note: {AT_BOUND}" in result.stderr and "the owner's bounds" in result.stderr
    assert "Contribution bounds in force" not in result.stderr  # the bias: with --accuracy
    answer = json.loads(ok("query", DAILY, "-e", "0.05", "--format", "json").stdout)
    noise, bound = answer["caveats"]
    assert noise.startswith("The noise exceeds the value in ") and bound.startswith(AT_BOUND)
    assert noise in answer["notes"] and bound in answer["notes"] and answer["cost"]["reused"]
    quiet = ok("query", DAILY, "-e", "0.05", "--no-caveats")
    assert "noise exceeds" not in quiet.stderr and AT_BOUND not in quiet.stderr
    assert "(14 rows;" in quiet.stderr
    quiet_json = json.loads(ok("query", DAILY, "-e", "0.05", "--no-caveats", "--format",
                               "json").stdout)
    assert quiet_json["caveats"] == [] and not any(AT_BOUND in n for n in quiet_json["notes"])


# ------------------------------------------------------------------ explain


def test_explain_for_analysts() -> None:
    """Cost first, then each aggregate's accuracy in its column's units (AVG's own ±, a
    quantile's in values), the bounds; no engine SQL without --sql; JSON with the same parts."""
    sql = "SELECT category, COUNT(*), AVG(amount), MEDIAN(amount) FROM visits GROUP BY category"
    out = ok("explain", sql, "-e", "1").stdout
    lines = out.splitlines()
    assert lines[0].startswith("Privacy cost: epsilon=1, delta=0")
    assert "Rewritten SQL:" not in out and "SELECT" not in out
    avg = next(x for x in lines if x.startswith("AVG(amount) ") and "|" in x)
    assert "[0, 5000]" in avg and "at 1,000 rows" in avg and "at 100,000 rows" in avg
    median = next(x for x in lines if x.startswith("MEDIAN(amount) ") and "|" in x)
    assert "ranks:" in median and "at 100,000 rows" in median
    assert lines.index(avg) < lines.index(next(x for x in lines if x.startswith("Key release")))
    assert "Contribution bounds in force" in out and "amount to [0.0, 5000.0]" in out
    plan = json.loads(ok("explain", sql, "-e", "1", "--format", "json").stdout)
    assert "sql" not in plan and plan["cost"] == {"epsilon": 1.0, "delta": 0.0}
    count, mean, middle = plan["accuracy"]
    assert count["aggregate"] == "COUNT(*)" and count["half_width"] > 0
    at = mean["half_width_at_rows"]
    assert mean["half_width"] is None and at["1000"] == pytest.approx(100 * at["100000"])
    assert middle["ranks"] > 0 and middle["bounds"] == [0.0, 5000.0]
    assert plan["contribution_bounds"]["rows_per_unit"] == 150
    assert [m["mechanism"] for m in plan["measurements"]][-1] == "exponential"
    with_sql = json.loads(ok("explain", sql, "--format", "json", "--sql").stdout)
    assert with_sql["sql"].startswith("WITH") and "Rewritten SQL:" in ok("explain", sql,
                                                                         "--sql").stdout


def test_explain() -> None:
    result = ok("explain", "SELECT category, COUNT(*), SUM(amount) FROM visits GROUP BY category",
                "--epsilon", "0.8", "--max-rows", "10", "--max-groups", "3", "--sql")
    out = result.stdout
    # Contribution bounding in SQL: a unit's rows weighted by min(1, k / t) over all its
    # groups (no groups cap over public keys under Laplace: issue 21; no sample: issue 23).
    assert "Rewritten SQL:" in out and "WITH __tot AS" in out and "__by" in out
    assert "LEAST(1048576, 10485760 // __t)" in out and "ROW_NUMBER()" not in out
    # Nothing is sampled, so no salt at all (a sampled query's salt is a parameter: below).
    assert "$1" not in out and "HASH(" not in out.upper()
    lines = out.splitlines()
    table = [line for line in lines[lines.index(next(x for x in lines if "sensitivity" in x)):]
             if "|" in line]
    assert "sensitivity" in table[0] and "epsilon" in table[0] and "mechanism" in table[0]
    count = next(line for line in table if line.startswith("COUNT(*) ["))
    total = next(line for line in table if line.startswith("SUM(amount) ["))
    cells = [c.strip() for c in count.split("|")]
    assert cells[2] == "10" and cells[3] == "0.4" and cells[4] == "laplace"  # k = 10, eps/2
    assert [c.strip() for c in total.split("|")][2] == "50000"  # k * 5000
    assert "public domain" in out and "at most 10 row(s)" in out
    assert "epsilon=0.8, delta=0" in out


def test_explain_does_not_charge_or_read() -> None:
    result = ok("explain", "SELECT state, COUNT(*) FROM people GROUP BY state", "--delta", "1e-6",
                "--mechanism", "gaussian")
    assert "thresholding" in result.stdout and "gaussian" in result.stdout
    assert "state" in refused(cli("explain", "SELECT state, COUNT(*) FROM people GROUP BY state"),
                              "KeyReleaseRefused")


# ------------------------------------------------------------------ own databases


@pytest.fixture
def own(tmp_path: Path, kit: SimpleNamespace) -> SimpleNamespace:
    """A DuckDB file and a CSV folder with the same table, and their metadata."""
    rows = "SELECT range AS pid, 20 + range % 50 AS age, ['F', 'M'][1 + range % 2] AS sex " \
           "FROM range(300)"
    db = tmp_path / "own.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TABLE people AS {rows}")
    folder = tmp_path / "csv"
    folder.mkdir()
    with duckdb.connect() as con:
        con.execute(f"COPY ({rows}) TO '{folder}/people.csv' (HEADER)")
    meta = kit.write_metadata(tmp_path / "own.toml", {"people": {
        "privacy_unit": "pid", "one_row_per_unit": True, "columns": {
            "pid": {"type": "int"}, "age": {"type": "int", "lower": 0, "upper": 120},
            "sex": {"type": "text", "values": ["F", "M", "X"]}}}})
    return SimpleNamespace(db=db, folder=folder, meta=meta)


@pytest.mark.usefixtures("seeded_randomness")  # a noisy answer within a band
@pytest.mark.parametrize("where", ["db", "folder"])
def test_own_database_and_metadata(where: str, own: SimpleNamespace) -> None:
    result = ok("query", "SELECT sex, COUNT(*) AS n, AVG(age) AS a FROM people GROUP BY sex",
                "--database", str(getattr(own, where)), "--metadata", str(own.meta),
                "--format", "json", "-e", "5")
    rows = json.loads(result.stdout)["rows"]
    assert [r["sex"] for r in rows] == ["F", "M", "X"]  # X: an empty group of the domain
    assert abs(rows[0]["n"] - 150) < 20 and 30 < rows[0]["a"] < 60
    assert "no privacy budget declared" in result.stderr  # unmetered: said so


def test_own_database_errors(own: SimpleNamespace, tmp_path: Path) -> None:
    assert "does not exist" in refused(
        cli("query", "SELECT COUNT(*) FROM people", "-d", str(tmp_path / "nope.duckdb"),
            "-m", str(own.meta)), "EngineError")
    bad = tmp_path / "bad.toml"
    bad.write_text('[tables.people.columns]\nage = { type = "int", lower = 9, upper = 1 }\n')
    message = refused(cli("query", "SELECT COUNT(*) FROM people", "-d", str(own.db),
                          "-m", str(bad)), "MetadataError")
    assert "bad.toml" in message and "'people'" in message and "'age'" in message


# ------------------------------------------------------------------ metadata init


@pytest.fixture
def schema_db(tmp_path: Path) -> Path:
    path = tmp_path / "schema.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE patients (id BIGINT, name VARCHAR, score DOUBLE, ok BOOLEAN, "
                    "born DATE, small TINYINT, amount DECIMAL(10, 2), n INTEGER, f FLOAT)")
        con.execute("INSERT INTO patients VALUES (987654321, 'SECRET_NAME', 31.4159, true, "
                    "DATE '1961-07-23', 77, 12345.67, 424242, 2.71828)")
        con.execute('CREATE TABLE "Visit Log" ("Visit Day" DATE, cost DOUBLE, seen TIMESTAMP, '
                    "logged TIMESTAMPTZ)")
        con.execute("INSERT INTO \"Visit Log\" VALUES (DATE '2020-02-02', 99999.5, "
                    "TIMESTAMP '2020-02-02 10:00', TIMESTAMPTZ '2020-02-02 10:00+00')")
    return path


EXPECTED_TYPES = {"patients": {"id": "int", "name": "text", "score": "float", "ok": "bool",
                               "born": "date", "small": "int", "amount": "float", "n": "int",
                               "f": "float"},
                  "Visit Log": {"Visit Day": "date", "cost": "float", "seen": "timestamp",
                                "logged": "timestamp"}}
DATA_VALUES = ["987654321", "SECRET_NAME", "31.4159", "1961", "424242", "2.71828", "12345",
               "99999", "2020-02-02"]


def test_metadata_init_writes_a_skeleton(schema_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "skeleton.toml"
    result = ok("metadata", "init", "--database", str(schema_db), "--output", str(out))
    assert "wrote" in result.stderr
    text = out.read_text()
    data = tomllib.loads(text)
    types = {t: {c: spec["type"] for c, spec in table["columns"].items()}
             for t, table in data["tables"].items()}
    assert types == EXPECTED_TYPES
    for value in DATA_VALUES:
        assert value not in text
    for table in data["tables"].values():
        for spec in table["columns"].values():
            assert not {"lower", "upper", "values"} & set(spec)
    # The skeleton is valid metadata as it stands (the owner then adds bounds).
    md = load_metadata(out)
    assert set(md.tables) == {"patients", "visit log"}
    # ...and to standard output, the same text.
    assert ok("metadata", "init", "-d", str(schema_db)).stdout == text


def test_metadata_init_on_a_folder(own: SimpleNamespace) -> None:
    data = tomllib.loads(ok("metadata", "init", "-d", str(own.folder)).stdout)
    assert {c: s["type"] for c, s in data["tables"]["people"]["columns"].items()} == {
        "pid": "int", "age": "int", "sex": "text"}


def test_metadata_init_missing_database(tmp_path: Path) -> None:
    result = cli("metadata", "init", "-d", str(tmp_path / "nope.duckdb"))
    assert result.exit_code == 2 and "Traceback" not in result.stderr


# ------------------------------------------------------------------ real subprocesses


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "dpsql.cli", *args], capture_output=True,
                          text=True, timeout=120, env=env, check=False)


def test_subprocess_query_csv_and_json(own: SimpleNamespace) -> None:
    proc = run("query", "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", "-d", str(own.db),
               "-m", str(own.meta), "--format", "csv", "--accuracy", "-e", "2")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert rows[0] == ["sex", "n", "n ±95%"] and [r[0] for r in rows[1:]] == ["F", "M", "X"]
    proc = run("query", GROUPED, "--format", "json", "-e", "0.5")
    assert proc.returncode == 0, proc.stderr
    assert [r["sex"] for r in json.loads(proc.stdout)["rows"]] == ["F", "M"]


def test_python_dash_m_dpsql_is_the_command_line() -> None:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-m", "dpsql", "--help"], capture_output=True,
                          text=True, timeout=120, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: dpsql ") and "serve" in proc.stdout


def test_subprocess_refusal_and_explain() -> None:
    message = refused(run("query", "SELECT COUNT(*) FROM people; DROP TABLE people"),
                      "NotASingleSelect")
    assert message.count("\n") == 1  # one line, no traceback
    proc = run("explain", "--sql", "SELECT COUNT(DISTINCT amount) FROM visits")  # salted
    assert proc.returncode == 0 and "Rewritten SQL:" in proc.stdout and "$1" in proc.stdout


@pytest.mark.skipif(shutil.which("dpsql") is None, reason="the console script is not installed")
def test_console_script(schema_db: Path) -> None:
    dpsql = shutil.which("dpsql")
    assert dpsql is not None
    proc = subprocess.run([dpsql, "metadata", "init", "-d", str(schema_db)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "patients" in tomllib.loads(proc.stdout)["tables"]
    proc = subprocess.run([dpsql, "query", "SELECT name FROM patients", "-d", str(schema_db),
                           "-m", "/nonexistent.toml"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 2 and "metadata file not found" in proc.stderr
    assert "Traceback" not in proc.stderr



def test_an_unexpected_error_shows_a_fixed_message_and_logs_the_details(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A bug's text can carry data (an engine's "could not convert 'Alice'"): every door shows
    the one fixed message and the owner's log gets the traceback (dpsql.errors.internal_error)."""
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("could not convert 'Alice Smith'")

    monkeypatch.setattr(dpsql.Database, "run", broken)
    monkeypatch.delenv("DPSQL_DEBUG", raising=False)
    result = CliRunner().invoke(main, ["query", "SELECT COUNT(*) FROM people"])
    assert result.exit_code == 3
    assert "dpsql: InternalError: internal error in dpsql" in result.stderr
    assert "Alice" not in result.stderr + result.stdout
    assert "Alice Smith" in caplog.text


def test_query_retention_estimate() -> None:
    """--retention EPSILON: the estimate's note on stderr (without --accuracy too), its charge
    in the cost line; an invalid epsilon is refused before anything is charged."""
    result = ok("query", "SELECT COUNT(*) FROM visits", "--max-rows", "2", "-e", "0.5",
                "--retention", "0.2")
    assert "note: Retention (estimated at epsilon 0.2, charged): the bounds keep about" \
        in result.stderr
    assert "and epsilon=0.2 for the retention estimate" in result.stderr
    assert "Contribution bounds in force" not in result.stderr  # only with --accuracy
    # Two visits per person keep well under 80% of the visits (about 49%; the estimate's 95%
    # interval is under ±1% wide): the caveat says so, in the footer and in JSON.
    assert "note: The contribution bounds left out about " in result.stderr
    answer = json.loads(ok("query", "SELECT COUNT(*) FROM visits", "--max-rows", "2", "-e",
                           "0.5", "--retention", "0.2", "--format", "json").stdout)
    [dropped] = [c for c in answer["caveats"] if c.startswith("The contribution bounds left")]
    assert "max_rows_contributed" in dropped and answer["retention"]["high"] < 0.8
    refused(cli("query", "SELECT COUNT(*) FROM visits", "--retention", "0"),
            "InvalidPrivacyParameter")


def test_query_bounds_options_and_bias_notes() -> None:
    result = ok("query", "SELECT COUNT(*) FROM visits", "--max-rows", "5", "--accuracy")
    assert "note: Contribution bounds in force: each privacy unit counts with at most 5 row(s)" \
        in result.stderr
    message = refused(cli("query", "SELECT COUNT(*) FROM visits", "--max-rows", "5000"),
                      "BoundsAboveCap")
    assert "cap of 1000" in message
    explained = ok("explain", "SELECT category, AVG(amount) FROM visits GROUP BY category",
                   "--max-rows", "10", "--max-groups", "2").stdout
    # Public keys: the asked-for groups cap would not lower the noise, so it is not applied.
    assert "at most 10 row(s)" in explained and "across all its groups" in explained
    assert explained.count("row(s)") == 1  # the bounds stated once
    assert "amount to [0.0, 5000.0]" in explained
