"""Answers fixed by public information, through the wire with psycopg: exact and free.

The queries are the BI tools' own: Metabase's field-values sync, a Grafana template variable,
JupySQL's column probe (src/sql/inspect.py), Superset's virtual-dataset probe. Each must leave
the budget and the ledger unchanged; what depends on data must still be charged or refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import psycopg
import pytest
from psycopg import errors as pg_errors

import dpsql
import dpsql.dbapi
from dpsql.server import ServerConfig, serve_in_thread
from dpsql.server.wire import types as t
from tests.support.sandbox import sandbox

ANALYSTS = {"bi": ("bi-pw", 100.0, 1e-3), "ad": ("ad-pw", 100.0, 0.0)}
CATEGORIES = ["checkup", "dental", "emergency", "lab", "pharmacy", "specialist", "therapy",
              "vaccination"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    setup = sandbox(tmp_path_factory.mktemp("free"), ANALYSTS, query_epsilon={"bi": 0.1})
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DPSQL_LEDGER", raising=False)
        db = dpsql.Database(setup.database, setup.metadata)
    config = ServerConfig(port=0, passwords=setup.passwords, statement_timeout=60)
    with serve_in_thread(db, config) as running:
        yield SimpleNamespace(port=running.port, db=db, setup=setup)
    db.close()


def _connect(served: SimpleNamespace, user: str = "bi", **kwargs: object
             ) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=served.port, user=user,  # type: ignore[arg-type]
                           password=ANALYSTS[user][0], dbname="dpsql", connect_timeout=10,
                           autocommit=True, **kwargs)


@pytest.fixture(scope="module")
def conn(served: SimpleNamespace) -> Iterator[psycopg.Connection]:
    with _connect(served) as c:
        yield c


def _ledger(served: SimpleNamespace) -> tuple[float, int]:
    return served.db.budget("bi").spent.epsilon, len(served.db.ledger.history("bi"))


def _free(served: SimpleNamespace, conn: psycopg.Connection, sql: str,
          prepare: bool = False) -> psycopg.Cursor:
    before = _ledger(served)
    cur = conn.execute(sql, prepare=prepare)
    assert _ledger(served) == before, sql
    return cur


@pytest.mark.parametrize("prepare", [False, True])
def test_metabase_field_values_sync_is_exact_and_free(served, conn, prepare) -> None:
    # Metabase's field-values query (metabase.db.metadata-queries/field-distinct-values):
    # SELECT "col" FROM "table" GROUP BY "col" ORDER BY "col" ASC LIMIT 1000
    cur = _free(served, conn, 'SELECT "public"."people"."sex" AS "sex" FROM "public"."people" '
                'GROUP BY "public"."people"."sex" ORDER BY "public"."people"."sex" ASC '
                "LIMIT 1000", prepare)
    assert cur.fetchall() == [("F",), ("M",)]


def test_grafana_template_variable_is_exact_and_free(served, conn) -> None:
    cur = _free(served, conn, "SELECT DISTINCT category FROM visits")
    assert sorted(r[0] for r in cur.fetchall()) == CATEGORIES


def test_probes_send_names_and_types_only(served, conn) -> None:
    jupysql = _free(served, conn, 'SELECT * FROM "people" WHERE 1=0')  # inspect.py
    assert jupysql.fetchall() == []
    assert [d.name for d in jupysql.description][:3] == ["person_id", "age", "sex"]
    superset = _free(served, conn, "SELECT * FROM (SELECT category, amount FROM visits) AS "
                     "virtual_table LIMIT 0")
    assert superset.fetchall() == []
    assert [(d.name, d.type_code) for d in superset.description] == [
        ("category", t.TEXT), ("amount", t.FLOAT8)]
    tableau = _free(served, conn, "SELECT * FROM (SELECT day, amount FROM visits) "
                    "\"Custom SQL Query\" WHERE false", prepare=True)
    assert [(d.name, d.type_code) for d in tableau.description] == [
        ("day", t.DATE), ("amount", t.FLOAT8)]
    explained = conn.execute("EXPLAIN SELECT * FROM people WHERE 1=0").fetchall()
    assert "no privacy cost" in "\n".join(r[0] for r in explained)


@pytest.mark.parametrize("sql", [
    "SELECT state FROM people GROUP BY state",  # no public domain: thresholding reads data
    "SELECT * FROM visits WHERE amount = 0",  # a filter on data: still row-level
    "SELECT * FROM visits WHERE 1=0 OR amount > 3",  # not constant
    "SELECT * FROM visits LIMIT 1",  # (people's rows are local DP rows: charged, not refused)
])
def test_what_depends_on_data_is_not_free(served, conn, sql) -> None:
    before = _ledger(served)
    with pytest.raises(pg_errors.Error):
        conn.execute(sql)
    assert _ledger(served) == before


def test_an_aggregate_over_a_false_filter_is_charged(served, conn) -> None:
    # One row of values: not a probe, an ordinary noisy answer.
    before = _ledger(served)
    conn.execute("SELECT COUNT(*) FROM people WHERE 1=0").fetchall()
    assert _ledger(served)[0] > before[0]


# -- budget defaults for dashboards (query_epsilon, startup options) --------------------------


def _charged(served: SimpleNamespace, c: psycopg.Connection, user: str) -> float:
    before = served.db.budget(user).spent.epsilon
    c.execute("SELECT category, COUNT(*) FROM visits GROUP BY category").fetchall()
    return served.db.budget(user).spent.epsilon - before


def test_the_analysts_query_epsilon_is_the_sessions_default(served, conn) -> None:
    assert conn.execute("SHOW dpsql.epsilon").fetchone() == ("0.1",)
    assert _charged(served, conn, "bi") == pytest.approx(0.1)
    with _connect(served, "ad") as other:  # no query_epsilon: the server's default
        assert other.execute("SHOW dpsql.epsilon").fetchone() == ("1",)


def test_startup_options_set_the_connections_default(served) -> None:
    # What a BI tool's connection string carries: options=-c dpsql.epsilon=0.05
    with _connect(served, options="-c dpsql.epsilon=0.05") as c:
        assert c.execute("SHOW dpsql.epsilon").fetchone() == ("0.05",)
        assert _charged(served, c, "bi") == pytest.approx(0.05)
        c.execute("RESET dpsql.epsilon")  # back to the connection's own default
        assert c.execute("SHOW dpsql.epsilon").fetchone() == ("0.05",)
    with pytest.raises(psycopg.OperationalError, match="epsilon"):
        _connect(served, options="-c dpsql.epsilon=-1")


def test_library_doors_use_the_analysts_default(served) -> None:
    db = dpsql.Database(served.setup.database, served.setup.metadata, analyst="bi")
    try:
        assert db.query_epsilon() == 0.1 and db.query_epsilon("ad") == 1.0
        assert db.explain("SELECT COUNT(*) FROM people").epsilon == pytest.approx(0.1)
        with dpsql.dbapi.Connection(db) as c:
            assert c.epsilon == 0.1
    finally:
        db.close()


@pytest.mark.parametrize("value", [0, -0.5, "0.1", float("inf"), True])
def test_query_epsilon_must_be_a_positive_number(tmp_path, value) -> None:
    setup = sandbox(tmp_path, {"bi": ("pw", 1.0, 0.0)}, query_epsilon={"bi": value})
    with pytest.raises(dpsql.errors.MetadataError, match="query_epsilon"):
        dpsql.Database(setup.database, setup.metadata)
