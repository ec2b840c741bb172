"""The ledger views over the wire (dpsql.ledger.spending): dpsql.spending, dpsql.queries and
dpsql.budgets answer through psycopg and SQLAlchemy, exactly and for free; each analyst sees
only their own rows, the owner's login everyone's; a NOTICE says when an analyst passes 80%."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest
import sqlalchemy as sa
from pgspecial.main import PGSpecial

from dpsql.database import Database
from dpsql.ledger.opening import LEDGER_ENV
from dpsql.ledger.spending import VIEWS
from dpsql.metadata.metadata import load_metadata
from dpsql.server.catalog import Catalog
from dpsql.server.config import ServerConfig
from dpsql.server.server import serve_in_thread
from tests.support.sandbox import sandbox

PASSWORDS = {"alice": "alice pw", "bob": "bob pw", "dana": "dana pw"}


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """alice and bob (epsilon 10 each) and dana, the owner (epsilon 1), served on their own
    ledger; alice has spent 3 and bob 8.5 (past 80%) through the library before the server."""
    folder = tmp_path_factory.mktemp("ledger_views")
    setup = sandbox(folder, {"alice": (PASSWORDS["alice"], 10.0, 1e-3),
                             "bob": (PASSWORDS["bob"], 10.0, 1e-3),
                             "dana": (PASSWORDS["dana"], 1.0, 0.0)})
    text = setup.metadata.read_text(encoding="utf-8")
    setup.metadata.write_text(text.replace("[budget]\n", '[budget]\nowners = ["dana"]\n', 1),
                              encoding="utf-8")
    saved = os.environ.pop(LEDGER_ENV, None)
    try:
        db = Database(setup.database, setup.metadata)
    finally:
        if saved is not None:
            os.environ[LEDGER_ENV] = saved
    db.run("SELECT COUNT(*) FROM visits", epsilon=1.0, analyst="alice")
    db.run("SELECT COUNT(*) FROM people", epsilon=2.0, analyst="alice")
    db.run("SELECT COUNT(*) FROM visits", epsilon=8.5, analyst="bob")
    try:
        with serve_in_thread(db, ServerConfig(port=0, passwords=setup.passwords)) as running:
            yield SimpleNamespace(port=running.port, db=db)
    finally:
        db.close()


def connect(views: SimpleNamespace, user: str) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=views.port, user=user, dbname="dpsql",
                           password=PASSWORDS[user], autocommit=True)


def spent(db: Database, analyst: str) -> float:
    status = db.budget(analyst)
    assert status is not None
    return status.spent.epsilon


def test_psycopg_reads_own_rows_exactly_and_free(views: SimpleNamespace) -> None:
    before = spent(views.db, "alice")
    with connect(views, "alice") as conn:
        rows = conn.execute("SELECT analyst, day, queries, epsilon FROM dpsql.spending").fetchall()
        assert rows == [("alice", dt.datetime.now(dt.UTC).date(), 2, 3.0)]
        queries = conn.execute("SELECT analyst, sql, epsilon FROM dpsql.queries "
                               "ORDER BY id").fetchall()
        assert queries == [("alice", "SELECT COUNT(*) FROM visits", 1.0),
                           ("alice", "SELECT COUNT(*) FROM people", 2.0)]
        # extended protocol with a parameter: described, bound and answered the same way
        budgets = conn.execute("SELECT analyst, epsilon_spent, epsilon_remaining, share_spent "
                               "FROM dpsql.budgets WHERE analyst = %s", ["alice"]).fetchall()
        assert budgets == [("alice", 3.0, 7.0, pytest.approx(0.3))]
    assert spent(views.db, "alice") == before  # nothing charged


def test_an_analyst_cannot_see_another_analysts_rows(views: SimpleNamespace) -> None:
    with connect(views, "alice") as conn:
        for view in ("spending", "queries", "budgets"):
            analysts = conn.execute(f"SELECT DISTINCT analyst FROM dpsql.{view}").fetchall()
            assert analysts == [("alice",)], view
        assert conn.execute("SELECT COUNT(*) FROM dpsql.queries WHERE analyst = 'bob'"
                            ).fetchone() == (0,)
        # not by reaching past the views either: the views' DuckDB holds nothing else
        for sql, state in (("SELECT * FROM dpsql.queries JOIN visits ON true", "0A000"),
                           ("SELECT * FROM dpsql.secrets", "42P01")):
            with pytest.raises(psycopg.Error) as e:
                conn.execute(sql)
            assert e.value.sqlstate == state, sql


def test_the_owner_sees_everyone(views: SimpleNamespace) -> None:
    with connect(views, "dana") as conn:
        rows = conn.execute("SELECT analyst, SUM(epsilon) FROM dpsql.spending GROUP BY analyst "
                            "ORDER BY analyst").fetchall()
        assert rows == [(a, spent(views.db, a)) for a in ("alice", "bob")]
        shares: dict[str, float] = dict(
            conn.execute("SELECT analyst, share_spent FROM dpsql.budgets").fetchall())
        assert set(shares) == {"alice", "bob", "dana"}  # dana has a budget, spent nothing
        assert shares["bob"] == pytest.approx(spent(views.db, "bob") / 10.0)


def test_a_notice_past_80_percent(views: SimpleNamespace) -> None:
    notices: list[str] = []
    with connect(views, "bob") as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SELECT COUNT(*) FROM people WHERE age > 40").fetchall()
    said = [n for n in notices if n.startswith("Budget: ")]
    share = spent(views.db, "bob") / 10.0  # 8.5 before, and this query's epsilon
    assert len(said) == 1 and f"bob has spent {share:.0%} " in said[0]
    notices.clear()
    with connect(views, "alice") as conn:  # 30%: nothing said
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SELECT COUNT(*) FROM people WHERE age > 50").fetchall()
    assert not [n for n in notices if n.startswith("Budget: ")]


# DBeaver's navigator: the schemas, then each schema's relations and their columns by its OID.
DBEAVER_SCHEMAS = ("SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n\nLEFT OUTER "
                   "JOIN pg_catalog.pg_description d ON d.objoid=n.oid AND d.objsubid=0 AND "
                   "d.classoid='pg_namespace'::regclass\n ORDER BY nspname")
DBEAVER_RELATIONS = ("SELECT c.oid,c.*,d.description FROM pg_catalog.pg_class c\nLEFT OUTER "
                     "JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND "
                     "d.classoid='pg_class'::regclass\nWHERE c.relnamespace=%s AND c.relkind "
                     "not in ('i','I','c')")
DBEAVER_COLUMNS = ("SELECT c.relname,a.attname,a.atttypid FROM pg_catalog.pg_attribute a\n"
                   "INNER JOIN pg_catalog.pg_class c ON (a.attrelid=c.oid)\nWHERE NOT "
                   "a.attisdropped AND c.relkind not in ('i','I','c') AND c.relnamespace=%s\n"
                   "ORDER BY c.relname, a.attnum")


def test_bi_tools_list_the_views_and_read_one(views: SimpleNamespace) -> None:
    """The views in the catalog's answers, as psql, DBeaver, information_schema readers
    (Metabase, Superset's SQLAlchemy inspector) list them, then read by the name listed."""
    expected = sorted(VIEWS)
    with connect(views, "alice") as conn:
        special = PGSpecial()
        [(_, cursor, _, _)] = list(special.execute(conn.cursor(), r"\dv dpsql.*"))
        assert [(r[0], r[1], r[2]) for r in cursor] == [("dpsql", v, "view") for v in expected]
        # not on the search path, as in PostgreSQL: \d and \dv alone list public's tables
        [(_, cursor, _, _)] = list(special.execute(conn.cursor(), r"\dv"))
        assert list(cursor) == []
        [(_, cursor, _, _)] = list(special.execute(conn.cursor(), r"\d dpsql.budgets"))
        assert [r[0] for r in cursor] == [c for c, _ in VIEWS["budgets"][0]]
        schemas = {r[2]: r[0] for r in conn.execute(DBEAVER_SCHEMAS).fetchall()}
        relations = conn.execute(DBEAVER_RELATIONS, (schemas["dpsql"],)).fetchall()
        assert sorted(r[2] for r in relations) == expected
        assert all("budget ledger" in r[-1] for r in relations)  # the description
        columns = conn.execute(DBEAVER_COLUMNS, (schemas["dpsql"],)).fetchall()
        assert [(r[1], r[2]) for r in columns if r[0] == "spending"] == [
            ("analyst", 25), ("day", 1082), ("queries", 20), ("epsilon", 701), ("delta", 701)]
        listed = conn.execute("SELECT table_name, table_type FROM information_schema.tables "
                              "WHERE table_schema = 'dpsql' ORDER BY 1").fetchall()
        assert listed == [(v, "VIEW") for v in expected]
        name = listed[0][0]
        assert conn.execute(f"SELECT analyst FROM dpsql.{name}").fetchall() == [("alice",)]
    engine = sa.create_engine(
        f"postgresql+psycopg://alice:alice%20pw@127.0.0.1:{views.port}/dpsql")
    try:
        inspector = sa.inspect(engine)
        assert "dpsql" in inspector.get_schema_names()
        assert sorted(inspector.get_view_names(schema="dpsql")) == expected
        assert inspector.get_table_names(schema="dpsql") == []  # views, not tables
        assert [c["name"] for c in inspector.get_columns("queries", schema="dpsql")] == \
            [c for c, _ in VIEWS["queries"][0]]
        with engine.connect() as conn:
            table = sa.Table("spending", sa.MetaData(), schema="dpsql", autoload_with=conn)
            assert [r.analyst for r in conn.execute(sa.select(table))] == ["alice"]
    finally:
        engine.dispose()


def chart_sql() -> str:
    """The SQL of the chart that docs/budget_and_dbapi.md describes, as written there."""
    docs = (Path(__file__).parents[2] / "docs" / "budget_and_dbapi.md").read_text("utf-8")
    section = docs[docs.index("### A chart of spending per analyst per day"):]
    start = section.index("```sql\n") + len("```sql\n")
    return section[start:section.index("\n```", start)]


def test_sqlalchemy_reads_the_chart_query(views: SimpleNamespace) -> None:
    """The chart of docs/budget_and_dbapi.md: spending per analyst per day, as the owner."""
    engine = sa.create_engine(
        f"postgresql+psycopg://dana:dana%20pw@127.0.0.1:{views.port}/dpsql")
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text(chart_sql())).fetchall()
            assert list(rows[0]._fields) == ["day", "analyst", "epsilon", "queries"]
            assert [(r.analyst, r.epsilon) for r in rows] == [
                (a, spent(views.db, a)) for a in ("alice", "bob")]
            since = conn.execute(sa.text("SELECT COUNT(*) FROM dpsql.spending WHERE day >= "
                                         ":since"), {"since": dt.date(2999, 1, 1)}).scalar()
            assert since == 0
    finally:
        engine.dispose()


def test_unmetered_database_has_no_ledger_to_read(tmp_path: Path) -> None:
    setup = sandbox(tmp_path, {"alice": ("pw", None, None)}, metered=False)
    with Database(setup.database, setup.metadata) as db, pytest.raises(Exception) as e:
        db.run("SELECT * FROM dpsql.spending", analyst="alice")
    assert "no ledger to read" in str(e.value)
    # nor does the server's catalog list views it could not answer
    schemas = "SELECT nspname FROM dpsql_pg.pg_namespace WHERE nspname = 'dpsql'"
    assert Catalog(load_metadata(setup.metadata)).cursor().execute(schemas).fetchall() == []
    (tmp_path / "metered").mkdir()
    metered = sandbox(tmp_path / "metered", {"alice": ("pw", 1.0, 0.0)})
    assert Catalog(load_metadata(metered.metadata)).cursor().execute(schemas
                                                                           ).fetchall() == [
        ("dpsql",)]
