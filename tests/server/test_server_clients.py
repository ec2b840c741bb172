"""Real clients against the server: psql, SQLAlchemy with pandas, pg8000 and pgjdbc (psycopg 3
is in test_server.py). Each connects, lists the tables, gets private answers and clear
refusals.

psql (postgresql-client), the JDK and pgjdbc (libpostgresql-jdbc-java) are installed by
``.ci/run``; a missing one fails these tests instead of skipping them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from types import SimpleNamespace

import pandas as pd
import pg8000.dbapi
import pg8000.native
import pytest
import sqlalchemy as sa

from tests.support.helpers import SAMPLE_TABLES, run_java

PASSWORD = "s3cret pw"


def tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is not installed; .ci/run installs it (see its apt-get line)"
    return path


# -- psql ------------------------------------------------------------------------------------


def psql(served: SimpleNamespace, *commands: str, verbose: bool = False
         ) -> subprocess.CompletedProcess[str]:
    args = [tool("psql"), "-X", "-h", "127.0.0.1", "-p", str(served.port), "-U", "alice",
            "-d", "dpsql", "-v", "ON_ERROR_STOP=0"]
    if verbose:
        args += ["-v", "VERBOSITY=verbose"]
    for c in commands:
        args += ["-c", c]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PGPASSWORD": PASSWORD,
           "PGCLIENTENCODING": "UTF8", "LANG": "C.UTF-8", "PGCONNECT_TIMEOUT": "10"}
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)


def test_psql_lists_and_describes_tables(served) -> None:
    out = psql(served, r"\dt", r"\d people", r"\d+ visits", r"\dn", r"\l", r"\conninfo")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    text = out.stdout
    assert re.search(r"public \| people +\| table", text)
    assert re.search(r"public \| visits +\| table", text)
    assert 'Table "public.people"' in text
    assert "income      | double precision |           |          |" in text
    assert "signup_date | date             |           | not null |" in text
    assert 'Table "public.visits"' in text and "declared bounds 0.0 .. 5000.0" in text
    assert 'connected to database "dpsql" as user "alice"' in text


def test_psql_private_answers_settings_and_refusals(served) -> None:
    out = psql(served, "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex",
               "SET dpsql.epsilon = 0.5", "SHOW dpsql.epsilon",
               "SELECT email FROM people", "SELECT COUNT(*) FROM nope",
               "EXPLAIN SELECT AVG(amount) FROM visits", verbose=True)
    assert out.returncode == 0
    assert " F   |" in out.stdout and " M   |" in out.stdout and "(2 rows)" in out.stdout
    assert " 0.5\n" in out.stdout
    assert "ERROR:  42803: " in out.stderr  # the SQLSTATE of the refusal
    assert "ERROR:  42P01: " in out.stderr
    assert "Rewritten SQL:" in out.stdout


def test_psql_shows_the_caveats_and_set_dpsql_caveats_off_hides_them(served) -> None:
    """Daily counts at epsilon 0.05: psql prints the NOTICE that the noise exceeds the values;
    after SET dpsql.caveats = off the same (stored) answer comes without it."""
    daily = ("SELECT day, COUNT(*) AS n FROM visits WHERE day < DATE '2025-01-08' "
             "GROUP BY day ORDER BY day")
    out = psql(served, "SET dpsql.epsilon = 0.05", daily)
    assert out.returncode == 0 and "(7 rows)" in out.stdout
    assert "NOTICE:  The noise exceeds the value in " in out.stderr
    quiet = psql(served, "SET dpsql.epsilon = 0.05", "SET dpsql.caveats = off", daily)
    assert quiet.returncode == 0 and "(7 rows)" in quiet.stdout
    assert "noise exceeds" not in quiet.stderr and "NOTICE:  Contribution bounds" in quiet.stderr


def test_psql_fetch_count_reads_through_a_cursor_charged_once(served) -> None:
    """psql's FETCH_COUNT wraps the query in BEGIN; DECLARE ... NO SCROLL CURSOR; FETCH."""
    before = served.db.budget("alice").spent.epsilon
    out = psql(served, r"\set FETCH_COUNT 1",
               "SELECT sex, COUNT(*) AS n FROM people WHERE age > 33 GROUP BY sex ORDER BY sex")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert [line.split("|")[0].strip() for line in out.stdout.splitlines()[2:4]] == ["F", "M"]
    assert "(2 rows)" in out.stdout
    assert served.db.budget("alice").spent.epsilon == before + 1.0


def test_psql_wrong_password(served) -> None:
    args = [tool("psql"), "-X", "-h", "127.0.0.1", "-p", str(served.port), "-U", "alice",
            "-d", "dpsql", "-c", "SELECT 1"]
    out = subprocess.run(args, env={"PATH": os.environ.get("PATH", ""), "PGPASSWORD": "no"},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert 'password authentication failed for user "alice"' in out.stderr


# -- SQLAlchemy and pandas -------------------------------------------------------------------


def test_sqlalchemy_inspector_and_pandas(served) -> None:
    engine = sa.create_engine(
        f"postgresql+psycopg://alice:s3cret%20pw@127.0.0.1:{served.port}/dpsql")
    try:
        inspector = sa.inspect(engine)
        assert inspector.get_table_names() == list(SAMPLE_TABLES)
        assert inspector.get_schema_names() == ["public"] or "public" in \
            inspector.get_schema_names()
        columns = {c["name"]: c for c in inspector.get_columns("people")}
        assert list(columns)[:3] == ["person_id", "age", "sex"]
        assert isinstance(columns["income"]["type"], sa.Float)
        assert isinstance(columns["signup_date"]["type"], sa.Date)
        assert columns["income"]["nullable"] and not columns["age"]["nullable"]
        assert "public GROUP BY keys: F, M" in columns["sex"]["comment"]
        assert inspector.get_pk_constraint("people")["constrained_columns"] == []
        assert inspector.get_foreign_keys("visits") == []
        assert inspector.get_indexes("people") == []
        df = pd.read_sql("SELECT education, COUNT(*) AS n, AVG(income) AS mean_income "
                         "FROM people GROUP BY education", engine)
        assert list(df.columns) == ["education", "n", "mean_income"]
        assert len(df) == 6 and df["n"].dtype.kind == "i"
        df = pd.read_sql(sa.text("SELECT category, SUM(amount) AS total FROM visits "
                                 "WHERE duration_min >= :m GROUP BY category"), engine,
                         params={"m": 30})
        assert len(df) == 8
        with engine.connect() as conn, pytest.raises(sa.exc.ProgrammingError) as e:
            conn.execute(sa.text("SELECT email FROM people"))
        assert e.value.orig.sqlstate == "42803"
    finally:
        engine.dispose()


# -- pg8000 ----------------------------------------------------------------------------------


def test_pg8000_native_and_dbapi(served) -> None:
    con = pg8000.native.Connection("alice", host="127.0.0.1", port=served.port,
                                   password=PASSWORD, database="dpsql", timeout=30)
    try:
        (n,), = con.run("SELECT COUNT(*) FROM people WHERE age > :a", a=40)
        assert 10000 < n < 20000
        rows = con.run("SELECT married, AVG(children) FROM people GROUP BY married")
        assert {r[0] for r in rows} == {True, False}
        with pytest.raises(pg8000.native.DatabaseError) as e:
            con.run("SELECT COUNT(*) FROM people, visits")
        assert e.value.args[0]["C"] in ("0A000", "42501")
    finally:
        con.close()
    conn = pg8000.dbapi.connect(user="alice", host="127.0.0.1", port=served.port,
                                password=PASSWORD, database="dpsql", timeout=30)
    try:
        cur = conn.cursor()
        cur.execute("SELECT category, COUNT(*) FROM visits GROUP BY category ORDER BY 1")
        assert [r[0] for r in cur.fetchall()][:2] == ["checkup", "dental"]
        conn.rollback()
    finally:
        conn.close()


# -- pgjdbc ----------------------------------------------------------------------------------

JAVA = r"""
import java.sql.*;

public class DpsqlJdbc {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], args[1], args[2])) {
            DatabaseMetaData md = c.getMetaData();
            System.out.println("product " + md.getDatabaseProductName() + " "
                + md.getDatabaseProductVersion());
            try (ResultSet rs = md.getTables(null, null, "%", new String[]{"TABLE"})) {
                while (rs.next()) System.out.println("table " + rs.getString("TABLE_SCHEM") + "."
                    + rs.getString("TABLE_NAME") + " " + rs.getString("TABLE_TYPE"));
            }
            try (ResultSet rs = md.getColumns(null, "public", "people", "%")) {
                while (rs.next()) System.out.println("column " + rs.getString("COLUMN_NAME") + " "
                    + rs.getString("TYPE_NAME") + " " + rs.getInt("DATA_TYPE") + " "
                    + rs.getString("IS_NULLABLE"));
            }
            String sql = "SELECT sex, COUNT(*) AS n FROM people WHERE age > ? GROUP BY sex "
                + "ORDER BY sex";
            try (PreparedStatement ps = c.prepareStatement(sql)) {
                for (int i = 0; i < 7; i++) {  // past prepareThreshold: a named statement
                    ps.setInt(1, 30 + i);
                    try (ResultSet rs = ps.executeQuery()) {
                        while (rs.next()) System.out.println("row " + i + " " + rs.getString(1)
                            + " " + rs.getLong(2));
                    }
                }
            }
            try (Statement st = c.createStatement();
                 ResultSet rs = st.executeQuery("SELECT AVG(income), COUNT(*) FROM people")) {
                rs.next();
                System.out.println("avg " + rs.getDouble(1) + " count " + rs.getLong(2));
            }
            try (Statement st = c.createStatement()) {
                st.executeQuery("SELECT email FROM people");
                System.out.println("not refused");
            } catch (SQLException e) {
                System.out.println("refused " + e.getSQLState());
            }
        }
    }
}
"""


def test_pgjdbc_metadata_queries_and_refusals(served) -> None:
    lines = run_java("DpsqlJdbc", JAVA, served.port, PASSWORD).splitlines()
    assert lines[0].startswith("product PostgreSQL 16")
    assert "table public.people TABLE" in lines and "table public.visits TABLE" in lines
    assert "column person_id int8 -5 NO" in lines
    assert "column income float8 8 YES" in lines
    assert "column signup_date date 91 NO" in lines
    assert sum(line.startswith("row 6 ") for line in lines) == 2
    assert any(line.startswith("avg ") for line in lines)
    assert "refused 42803" in lines
