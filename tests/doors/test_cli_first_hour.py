"""The first hour of a new user at the command line (issue 20, item 6): the messages and
conveniences met before any privacy question, through click's CliRunner."""

from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest
from click.testing import CliRunner, Result

from dpsql.cli import main


def cli(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=stdin, catch_exceptions=False)


def test_serve_on_a_busy_port_says_so_and_warns_without_passwords(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli("serve", "--port", str(port), "--passwords", str(tmp_path / "none.toml"))
    assert result.exit_code == 2
    assert f"dpsql: OperationalError: cannot listen on 127.0.0.1:{port}: the port is in use" \
        in result.stderr
    assert "--port 0" in result.stderr and "bug" not in result.stderr
    assert "no analyst can log in yet" in result.stderr and "dpsql analyst add" in result.stderr


SQL = "SELECT COUNT(*) AS n FROM people"


def test_sql_from_standard_input_or_a_file(tmp_path: Path) -> None:
    query = tmp_path / "q.sql"
    query.write_text(f"-- the head count\n{SQL};\n", encoding="utf-8")
    for args, stdin in [(["query", "-"], SQL), (["query", "-f", str(query)], None),
                        (["query", "--file", "-"], SQL)]:
        result = cli(*args, "--format", "csv", stdin=stdin)
        assert result.exit_code == 0, result.stderr
        assert result.stdout.splitlines()[0] == "n"
    explained = cli("explain", "-f", str(query))
    assert explained.exit_code == 0 and "Privacy cost:" in explained.stdout
    assert "Privacy cost:" in cli("explain", "-", stdin=SQL).stdout


def test_sql_exactly_once() -> None:
    for args in (["query"], ["query", SQL, "-f", "-"], ["explain"]):
        result = cli(*args, stdin=SQL)
        assert result.exit_code == 2 and "exactly one of them" in result.stderr, args
    empty = cli("query", "-", stdin="  \n")
    assert empty.exit_code == 2 and "the SQL is empty" in empty.stderr


def test_a_syntax_error_points_at_where_parsing_stopped() -> None:
    result = cli("query", "-", stdin="SELECT sex,\n  COUNT(* FROM people\nGROUP BY sex")
    assert result.exit_code == 2
    message, line, mark = result.stderr.splitlines()[-3:]
    assert message == ("dpsql: SQLSyntaxError: cannot parse the query: syntax error at or near "
                       "'FROM' (line 2, column 11): Expecting )")
    assert line == "LINE 2:   COUNT(* FROM people"
    assert mark.index("^") == line.index("FROM")
    explained = cli("explain", "SELEC COUNT(*) FROM people").stderr.splitlines()
    assert "(did you mean 'SELECT'?)" in explained[-3]
    assert explained[-1].index("^") == explained[-2].index("SELEC")  # the word, as PostgreSQL


def test_the_caret_under_the_token_with_tabs_crlf_and_wide_characters() -> None:
    """The caret's line repeats the query line's tabs, a CJK character takes two columns, a
    CRLF's CR is not printed: on a terminal the caret stands under the token."""
    for sql, line, pad in (
            ("SELECT sex,\n\t\tCOUNT(* FROM people", "LINE 2: \t\tCOUNT(* FROM people",
             " " * 8 + "\t\t" + " " * 8),
            ("SELECT COUNT(*)\r\nFROM people\r\nWHERE sex IN ('日本', 'F' AND", None, None),
            ("SELECT COUNT(*) FROM people WHERE sex = '日本' AND (age > 3 FROM",
             "LINE 1: SELECT COUNT(*) FROM people WHERE sex = '日本' AND (age > 3 FROM",
             " " * (8 + 58 + 2))):
        result = cli("query", "-", stdin=sql)
        assert result.exit_code == 2 and "\r" not in result.stderr
        shown, mark = result.stderr.splitlines()[-2:]
        if line is not None:
            assert shown == line and mark == pad + "^"
        else:  # line 3, the caret under AND: two wide characters before it
            assert shown == "LINE 3: WHERE sex IN ('日本', 'F' AND"
            assert mark == " " * (shown.index("AND") + 2) + "^"


def test_numbers_read_in_fixed_notation_and_json_keys_as_written() -> None:
    from dpsql.texttable import format_float

    assert [format_float(v) for v in (450459239.104, 45545.588, 12.0, -0.5, 1.5e-9)] == \
        ["450459239", "45545.6", "12", "-0.5", "1.5e-09"]
    sums = "SELECT SUM(income) AS total, COUNT(*) AS n FROM people"
    table = cli("query", sums, "--accuracy")
    assert table.exit_code == 0 and "e+" not in table.stdout
    total = table.stdout.splitlines()[2].split("|")[0].strip()
    assert total.lstrip("-").isdigit() and len(total) >= 8
    as_json = cli("query", sums, "--accuracy", "--format", "json")
    assert '"n ±95%"' in as_json.stdout and "\\u" not in as_json.stdout


def test_analyst_list_and_remove(tmp_path: Path) -> None:
    passwords = str(tmp_path / "passwords.toml")
    for name in ("carol", "bob"):
        added = cli("analyst", "add", name, "--passwords", passwords, "--password-stdin",
                    stdin="correct horse\n")
        assert added.exit_code == 0, added.stderr
    listed = cli("analyst", "list", "--passwords", passwords)
    assert listed.exit_code == 0 and "2 analysts in" in listed.stderr
    assert [line.split("|")[0].strip() for line in listed.stdout.splitlines()[2:]] == \
        ["bob", "carol"]
    assert "epsilon=" in listed.stdout
    removed = cli("analyst", "remove", "bob", "--passwords", passwords)
    assert removed.exit_code == 0 and "removed the password verifier of 'bob'" in removed.stdout
    assert "bob" not in cli("analyst", "list", "--passwords", passwords).stdout
    again = cli("analyst", "remove", "bob", "--passwords", passwords)
    assert again.exit_code == 1 and "'bob' has no password in" in again.stderr


@pytest.fixture
def own(tmp_path: Path, kit: SimpleNamespace) -> SimpleNamespace:
    """A DuckDB file whose table the sample data lacks, and its (unmetered) metadata."""
    with duckdb.connect(str(tmp_path / "own.duckdb")) as con:
        con.execute("CREATE TABLE things AS SELECT range AS pid FROM range(50)")
    kit.write_metadata(tmp_path / "own.toml", {"things": {
        "privacy_unit": "pid", "one_row_per_unit": True, "columns": {"pid": {"type": "int"}}}})
    return SimpleNamespace(folder=tmp_path, db=tmp_path / "own.duckdb",
                           meta=tmp_path / "own.toml")


COUNT = "SELECT COUNT(*) AS n FROM things"


def answered_from_own(result: Result, own: SimpleNamespace) -> bool:
    return result.exit_code == 0 and f"no privacy budget declared in {own.meta}" in result.stderr


def test_database_and_metadata_from_the_environment(
        own: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPSQL_DATABASE", str(own.db))
    monkeypatch.setenv("DPSQL_METADATA", str(own.meta))
    assert answered_from_own(cli("query", COUNT), own)
    assert "no privacy budget declared" in cli("budget").stderr  # the metadata alone too
    monkeypatch.setenv("DPSQL_DATABASE", str(own.folder / "nowhere.duckdb"))
    assert answered_from_own(cli("query", COUNT, "-d", str(own.db)), own)  # flag > env
    monkeypatch.delenv("DPSQL_DATABASE")
    alone = cli("query", COUNT)
    assert alone.exit_code == 2 and "the metadata comes from DPSQL_METADATA" in alone.stderr


def test_database_and_metadata_from_a_config_file(
        own: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (own.folder / "dpsql.toml").write_text('database = "own.duckdb"\nmetadata = "own.toml"\n')
    monkeypatch.delenv("DPSQL_CONFIG")  # ./dpsql.toml, relative paths from its folder
    monkeypatch.chdir(own.folder)
    assert answered_from_own(cli("query", COUNT), own)
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(f'database = "nowhere.duckdb"\nmetadata = "{own.meta}"\n')
    monkeypatch.setenv("DPSQL_CONFIG", str(elsewhere))  # env > config file
    monkeypatch.setenv("DPSQL_DATABASE", str(own.db))
    assert answered_from_own(cli("query", COUNT), own)
    elsewhere.write_text('databases = "x"\n')
    wrong = cli("query", COUNT)
    assert wrong.exit_code == 2 and "may hold only database" in wrong.stderr
