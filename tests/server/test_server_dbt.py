"""dbt (dbt-core with dbt-postgres) against a real ``dpsql serve``: ``dbt debug``'s connection
test, ``dbt show --inline`` of a private count, ``dbt show`` of a model file (a private AVG), of
a GROUP BY on a public domain (free) and of row-level SQL (refused, nothing charged).

dbt sends, besides the query: ``BEGIN`` / ``ROLLBACK`` around each statement (autocommit off),
``set role alice`` (the profile's ``role``, accepted for the session's own analyst),
``select 1 as id`` (debug's connection test), its relation cache's catalog queries
(``pg_tables`` union ``pg_views``, ``pg_matviews`` and ``pg_proc`` joined to ``pg_namespace``;
the ``pg_depend`` / ``pg_rewrite`` view-dependency query), each preceded by a ``/* {...} */``
comment, and ``show``'s query with ``limit N`` appended (dbt-core >= 1.8).

dbt pins its own dependencies, so it lives in its own virtual environment: ``DPSQL_DBT`` names
its ``dbt`` executable (scripts/test builds .ci/dbt-venv at .ci/dbt-constraints.txt and sets
it). Without the variable this test fails: CI must run it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import duckdb
import psycopg
import pytest

PASSWORD = "dbt pw"  # alice's, for conftest's served
DBT = os.environ.get("DPSQL_DBT")
SESSION = Path(__file__).parent.parent / "clients" / "dbt" / "session.py"
EPSILON = 1.0  # the server's default per query (no query_epsilon in the sandbox)

MODELS = {
    "income_by_sex": "select sex, avg(income) as mean_income from people group by sex\n",
    "sexes": "select sex from people group by sex\n",
    "emails": "select email from people\n",
}


def profile(port: int) -> str:
    return (f"dpsql:\n  target: dev\n  outputs:\n    dev:\n      type: postgres\n"
            f"      host: 127.0.0.1\n      port: {port}\n      user: alice\n"
            f"      password: {PASSWORD}\n      dbname: dpsql\n      schema: public\n"
            "      threads: 1\n      role: alice\n")  # dbt sends set role alice: a no-op


@pytest.fixture(scope="module")
def dbt(served: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[SimpleNamespace]:
    """A dbt project and profiles.yml for the served data; ``run(*args)`` runs ``dbt ARGS`` on
    them (in one dbt process for the module: tests/clients/dbt/session.py) and returns (success,
    output, epsilon charged to alice meanwhile)."""
    if not DBT:
        pytest.fail("DPSQL_DBT is not set: it names dbt's executable in its own virtual "
                    "environment (scripts/test builds .ci/dbt-venv and sets it)")
    folder = tmp_path_factory.mktemp("dbt")
    project = folder / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        "name: dpsql_dbt\nversion: '1.0'\nconfig-version: 2\nprofile: dpsql\n")
    for name, sql in MODELS.items():
        (project / "models" / f"{name}.sql").write_text(sql)
    (folder / "profiles.yml").write_text(profile(served.port))
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DBT_USE_COLORS": "false"}
    python = Path(DBT).parent / "python"  # the dbt executable's own environment
    common = ["--profiles-dir", str(folder), "--project-dir", str(project)]
    with subprocess.Popen([str(python), str(SESSION)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, env=env, cwd=folder) as session:
        assert session.stdin is not None and session.stdout is not None
        stdin, stdout = session.stdin, session.stdout

        def run(*args: str) -> tuple[bool, str, float]:
            before = served.db.budget("alice").spent.epsilon
            stdin.write(json.dumps([*args, *common]) + "\n")
            stdin.flush()
            line = stdout.readline()
            assert line, "dbt's session ended (its error is on stderr above)"
            answer = json.loads(line)
            return (answer["success"], answer["output"],
                    served.db.budget("alice").spent.epsilon - before)

        yield SimpleNamespace(run=run)
        stdin.close()


def true_counts(served: SimpleNamespace) -> dict[str, int]:
    people = Path(served.setup.database) / "people.parquet"
    with duckdb.connect() as con:
        rows = con.execute("SELECT sex, count(*) FROM read_parquet(?) GROUP BY sex",
                           [str(people)]).fetchall()
    return {str(sex): int(n) for sex, n in rows}


def table_rows(output: str) -> dict[str, str]:
    """``| key | value |`` lines of dbt's text preview, header and rule left out."""
    cells = [[c.strip() for c in line.strip().strip("|").split("|")]
             for line in output.splitlines() if line.strip().startswith("|")]
    return {row[0]: row[1] for row in cells[2:]}


def test_dbt_debug_connection_test_passes_free(dbt: SimpleNamespace) -> None:
    ok, output, charged = dbt.run("debug")
    assert ok, output[-3000:]
    assert "Connection test: [OK connection ok]" in output and "All checks passed!" in output
    assert charged == 0


def test_dbt_show_inline_private_count(dbt: SimpleNamespace, served: SimpleNamespace) -> None:
    ok, output, charged = dbt.run(
        "show", "--inline", "select sex, count(*) as n from people group by sex",
        "--limit", "5")
    assert ok, output[-3000:]
    shown = table_rows(output)
    assert set(shown) == {"F", "M"}
    truth = true_counts(served)
    for sex, n in shown.items():  # noisy (discrete Laplace, scale 1), near the truth
        assert abs(int(n.replace(",", "")) - truth[sex]) < 60
    assert charged == pytest.approx(EPSILON)


def test_dbt_show_model_private_average(dbt: SimpleNamespace) -> None:
    ok, output, charged = dbt.run("show", "--select", "income_by_sex", "--output", "json")
    assert ok, output[-3000:]
    shown = json.loads(output[output.index("{"):output.rindex("}") + 1])["show"]
    assert sorted(row["sex"] for row in shown) == ["F", "M"]
    assert all(0 < float(row["mean_income"]) < 1e6 for row in shown)
    assert charged == pytest.approx(EPSILON)


def test_dbt_show_public_domain_is_free(dbt: SimpleNamespace) -> None:
    ok, output, charged = dbt.run("show", "--select", "sexes")
    assert ok, output[-3000:]
    assert "| F " in output and "| M " in output
    assert charged == 0


def test_dbt_show_row_level_is_refused_uncharged(dbt: SimpleNamespace) -> None:
    ok, output, charged = dbt.run("show", "--select", "emails")
    assert not ok
    assert "email" in output and "aggregate" in output.lower(), output[-3000:]
    assert charged == 0


def test_older_dbt_limit_wrapper_is_the_query_it_wraps(served: SimpleNamespace) -> None:
    """dbt-core < 1.8 previews as ``select * from (<sql>) as model_limit_subq limit N``: the
    wrapped aggregate is answered and charged once; a wrapped row-level select is refused."""
    wrapper = "select * from ({}) as model_limit_subq limit 5"
    with psycopg.connect(host="127.0.0.1", port=served.port, user="alice", password=PASSWORD,
                         dbname="dpsql", autocommit=True, connect_timeout=10) as conn:
        before = served.db.budget("alice").spent.epsilon
        fresh = "select sex, count(*) as n from people where age >= 30 group by sex"  # not reused
        rows = conn.execute(wrapper.format(fresh)).fetchall()
        assert sorted(sex for sex, _ in rows) == ["F", "M"]
        assert served.db.budget("alice").spent.epsilon - before == pytest.approx(EPSILON)
        with pytest.raises(psycopg.Error, match="email"):
            conn.execute(wrapper.format(MODELS["emails"].strip()))
        assert served.db.budget("alice").spent.epsilon - before == pytest.approx(EPSILON)
