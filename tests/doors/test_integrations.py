"""The ``dpsql://`` SQLAlchemy dialect and the Superset engine spec against a real server.

Superset itself is not installed (its wheel is 104 MB before dependencies and it pins
SQLAlchemy < 2, which the test extra's SQLAlchemy 2 excludes). The tests therefore run the SQL
that Superset 6.1 generates for a time-series chart, built the way Superset builds it
(``SqlaTable.get_sqla_query``: the engine spec's time-grain expression as the x-axis column,
``get_time_filter``'s ``col >= <convert_dttm(start)> AND col < <convert_dttm(end)>``, the
metric ``COUNT(*) AS count``, GROUP BY the grain, ORDER BY the metric, LIMIT the row limit),
once with PostgreSQL's literals and once with :class:`DpsqlEngineSpec`'s.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from datetime import date, datetime
from types import SimpleNamespace

import psycopg2
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import registry

from dpsql.integrations.sqlalchemy import DpsqlDialect
from dpsql.integrations.superset import DP_EXTRA_DEFAULTS, DpsqlEngineSpec
from tests.support.helpers import REPO, SAMPLE_TABLES
from tests.support.sandbox import served_sandbox

PASSWORD = "s3cret pw"

# What Superset's PostgresBaseEngineSpec.convert_dttm emits for a DATE column (postgres.py).
PG_DATE = "TO_DATE('{}', 'YYYY-MM-DD')"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    # The installed dpsql may be another checkout: register this one's dialect by hand (the
    # entry point does the same for an installed package, test_entry_points checks it).
    registry.register("dpsql", "dpsql.integrations.sqlalchemy", "DpsqlDialect")
    registry.register("dpsql.psycopg2", "dpsql.integrations.sqlalchemy", "DpsqlDialect")
    with served_sandbox(tmp_path_factory.mktemp("integrations"), PASSWORD) as running:
        yield running


def engine(served: SimpleNamespace, scheme: str = "dpsql", query: str = "") -> sa.Engine:
    return sa.create_engine(
        f"{scheme}://alice:s3cret%20pw@127.0.0.1:{served.port}/dpsql{query}")


def time_series_sql(spec_literal: str, grain: str = "P1M", limit: int = 10000) -> str:
    """The SQL of Superset's time-series chart: COUNT(*) per month of signup_date between
    2025-03-01 and 2025-06-01."""
    col = DpsqlEngineSpec._time_grain_expressions[grain].format(col="signup_date")
    start, end = (spec_literal.format(d) for d in ("2025-03-01", "2025-06-01"))
    return (f"SELECT {col} AS signup_date, COUNT(*) AS count \nFROM public.people \n"
            f"WHERE signup_date >= {start} AND signup_date < {end} "
            f"GROUP BY {col} ORDER BY count DESC \n LIMIT {limit}")


# -- packaging -------------------------------------------------------------------------------


def test_entry_points_are_declared() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    points = project["entry-points"]
    assert points["sqlalchemy.dialects"]["dpsql"] == "dpsql.integrations.sqlalchemy:DpsqlDialect"
    assert points["sqlalchemy.dialects"]["dpsql.psycopg2"] == points["sqlalchemy.dialects"][
        "dpsql"]
    assert points["superset.db_engine_specs"]["dpsql"] == \
        "dpsql.integrations.superset:DpsqlEngineSpec"
    for target in [*points["sqlalchemy.dialects"].values(),
                   *points["superset.db_engine_specs"].values()]:
        module, _, name = target.partition(":")
        assert getattr(importlib.import_module(module), name)


def test_the_analysts_extras_bring_what_their_doors_import() -> None:
    """``dpsql[pandas]`` has pandas (fetch_df); ``dpsql[sqlalchemy]`` has SQLAlchemy and the
    driver the ``dpsql://`` URL loads (the dialect's, psycopg2), so that URL works without the
    test extra."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]

    def names(extra: str) -> set[str]:
        return {req.split(">")[0].split("<")[0].split("[")[0].strip() for req in extras[extra]}

    assert "pandas" in names("pandas")
    assert DpsqlDialect.driver == "psycopg2" and DpsqlDialect.import_dbapi() is psycopg2
    assert {"sqlalchemy", "psycopg2-binary"} <= names("sqlalchemy")


def test_superset_module_imports_without_superset() -> None:
    code = ("import sys; sys.modules['superset'] = None\n"  # any `import superset` now fails
            "from dpsql.integrations.superset import DpsqlEngineSpec, SUPERSET_INSTALLED\n"
            "assert not SUPERSET_INSTALLED and DpsqlEngineSpec.engine == 'dpsql'\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr


# -- the dialect -----------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["dpsql", "dpsql+psycopg2"])
def test_dialect_reflects_the_catalog(served, scheme: str) -> None:
    eng = engine(served, scheme)
    try:
        assert isinstance(eng.dialect, DpsqlDialect) and eng.dialect.name == "dpsql"
        inspector = sa.inspect(eng)
        assert inspector.default_schema_name == "public"
        assert inspector.get_table_names() == list(SAMPLE_TABLES)
        assert inspector.get_view_names() == []
        columns = {c["name"]: c for c in inspector.get_columns("people")}
        assert list(columns)[:3] == ["person_id", "age", "sex"]
        assert isinstance(columns["signup_date"]["type"], sa.Date)
        assert isinstance(columns["income"]["type"], sa.Float)
        assert "declared bounds 18 .. 95" in columns["age"]["comment"]
        for table in ("people", "visits"):
            assert "privacy unit person_id" in inspector.get_table_comment(table)["text"]
        # keys from the declarations: visit_id is unique = true, prescriptions' unit_path
        assert inspector.get_pk_constraint("people")["constrained_columns"] == []
        primary = inspector.get_pk_constraint("visits")
        assert (primary["constrained_columns"], primary["name"]) == (["visit_id"], "visits_pkey")
        assert [(fk["constrained_columns"], fk["referred_table"], fk["referred_columns"])
                for fk in inspector.get_foreign_keys("prescriptions")] == [
            (["visit_id"], "visits", ["visit_id"])]
        assert inspector.get_foreign_keys("visits") == []
        assert inspector.get_indexes("people") == []
    finally:
        eng.dispose()


def test_dialect_runs_a_group_by_and_refuses_rows(served) -> None:
    eng = engine(served)
    try:
        with eng.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex")).all()
            assert [r.sex for r in rows] == ["F", "M"]  # the public domain, in order
            assert all(isinstance(r.n, int) and r.n > 5000 for r in rows)  # 20,002 people
        with eng.connect() as conn, pytest.raises(sa.exc.ProgrammingError) as e:
            conn.execute(sa.text("SELECT email FROM people"))
        assert e.value.orig.pgcode == "42803"
    finally:
        eng.dispose()


# -- Superset's SQL --------------------------------------------------------------------------


def test_superset_postgres_time_series_sql(served) -> None:
    """With PostgreSQL's engine spec the time filter is TO_DATE(...). dpsql refused that
    function when this was written (42501, before any charge); support for it is being added in
    the core, so an answer is accepted too, and must then have the chart's shape."""
    sql = time_series_sql(PG_DATE)
    eng = engine(served, query="?options=-c%20dpsql.delta%3D1e-6")
    try:
        with eng.connect() as conn:
            try:
                rows = conn.execute(sa.text(sql)).all()
            except sa.exc.DBAPIError as e:
                assert isinstance(e.orig, psycopg2.errors.InsufficientPrivilege)
                assert "is not allowed in dpsql queries" in str(e.orig)
                return
        assert {r.signup_date for r in rows} <= {date(2025, m, 1) for m in (3, 4, 5)}  # a date
    finally:
        eng.dispose()


def test_dpsql_spec_time_series_sql_is_answered(served) -> None:
    """With DpsqlEngineSpec's DATE literal and delta > 0 (thresholding the month keys, which
    have no public domain) the chart's query is answered: three months, ordered by the noisy
    count, descending."""
    literal = DpsqlEngineSpec.convert_dttm("DATE", datetime(2025, 3, 1)).replace(
        "2025-03-01", "{}")
    # The URI documented in docs/server.md: both costs as startup options.
    eng = engine(served, query="?options=-c%20dpsql.epsilon%3D0.5%20-c%20dpsql.delta%3D1e-6")
    try:
        with eng.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1  # Superset's ping
            assert conn.execute(sa.text("SHOW dpsql.epsilon")).scalar() == "0.5"
            rows = conn.execute(sa.text(time_series_sql(literal))).all()
    finally:
        eng.dispose()
    assert [r.signup_date for r in sorted(rows)] == [date(2025, m, 1) for m in (3, 4, 5)]
    counts = [r.count for r in rows]
    assert counts == sorted(counts, reverse=True)
    assert all(150 < n < 500 for n in counts)  # ~ 20,002 members over 132 months


def series_limit_sql(limit: int = 5) -> str:
    """Superset's series-limit chart (``allows_joins``): COUNT(*) per category, joined to the
    top ``limit`` categories of an inner aggregate labelled ``col__`` and ``mme_inner__``
    (``SqlaTable.get_sqla_query``, ``SERIES_LIMIT_SUBQ_ALIAS``), ON the unqualified labels."""
    return ("SELECT category AS category, COUNT(*) AS count \nFROM public.visits "
            "JOIN (SELECT category AS category__, COUNT(*) AS mme_inner__ \nFROM public.visits "
            f"GROUP BY category ORDER BY mme_inner__ DESC \n LIMIT {limit}) AS series_limit "
            "ON category = category__ GROUP BY category ORDER BY count DESC \n LIMIT 10000"
            )


def test_dpsql_spec_series_limit_is_two_releases_charged_once(served) -> None:
    eng = engine(served, query="?options=-c%20dpsql.epsilon%3D0.5")
    try:
        before = served.db.budget("alice").spent.epsilon
        with eng.connect() as conn:
            rows = conn.execute(sa.text(series_limit_sql(3))).all()
            again = conn.execute(sa.text(series_limit_sql(3))).all()
    finally:
        eng.dispose()
    assert len(rows) == 3 and again == rows  # the repeat is the stored answer
    counts = [r.count for r in rows]
    assert counts == sorted(counts, reverse=True)
    assert served.db.budget("alice").spent.epsilon == pytest.approx(before + 0.5)


def test_dpsql_spec_time_series_without_delta(served) -> None:
    """Without delta the month keys need a public domain (a date public_range, being added in
    the core): until the metadata declares one the query is refused with the remedy named."""
    literal = "DATE '{}'"
    eng = engine(served)
    try:
        with eng.connect() as conn:
            try:
                rows = conn.execute(sa.text(time_series_sql(literal, grain="P1Y"))).all()
            except sa.exc.DBAPIError as e:
                assert isinstance(e.orig, psycopg2.errors.InsufficientPrivilege)
                assert "delta > 0" in str(e.orig) and "public_range" in str(e.orig)
                return
        assert [r.signup_date.year for r in rows] == [2025]
    finally:
        eng.dispose()


def test_select_star_probe_is_limit_0_and_free(served) -> None:
    dialect = DpsqlDialect()
    table = SimpleNamespace(table="people", schema="public", catalog=None)
    sql = DpsqlEngineSpec.select_star(None, table, dialect, limit=100, indent=False)
    assert sql == "SELECT * FROM public.people LIMIT 0"
    cols = [{"column_name": "age"}, {"column_name": "Mixed Case"}]
    assert DpsqlEngineSpec.select_star(None, table, dialect, show_cols=True, cols=cols) == \
        'SELECT age, "Mixed Case"\nFROM public.people\nLIMIT 0'
    before = served.db.budget("alice")
    assert before is not None
    eng = engine(served)
    try:
        with eng.connect() as conn:
            result = conn.execute(sa.text(sql))
            names, rows = list(result.keys()), result.fetchall()
    finally:
        eng.dispose()
    # Column names and types only (dpsql/execution/free.py): no rows, nothing charged.
    assert rows == [] and names[:3] == ["person_id", "age", "sex"]
    assert served.db.budget("alice") == before


# -- the engine spec's choices ---------------------------------------------------------------


def test_spec_time_grains_and_literals() -> None:
    grains = DpsqlEngineSpec._time_grain_expressions
    assert grains[None] == "{col}"
    assert grains["P1M"] == "DATE_TRUNC('month', {col})"
    assert grains["P3M"] == "DATE_TRUNC('quarter', {col})"
    assert set(grains) >= {"P1D", "P1W", "P1M", "P3M", "P1Y"}
    when = datetime(2025, 3, 1, 12, 30)
    assert DpsqlEngineSpec.convert_dttm("DATE", when) == "DATE '2025-03-01'"
    assert DpsqlEngineSpec.convert_dttm("date", when) == "DATE '2025-03-01'"
    assert DpsqlEngineSpec.convert_dttm("TIMESTAMP WITHOUT TIME ZONE", when) == \
        "TIMESTAMP '2025-03-01 12:30:00.000000'"
    assert DpsqlEngineSpec.convert_dttm("VARCHAR", when) is None
    assert DpsqlEngineSpec.epoch_to_dttm() == "(timestamp 'epoch' + {col} * interval '1 second')"


def test_spec_dp_defaults() -> None:
    spec = DpsqlEngineSpec
    assert spec.engine == "dpsql" and spec.default_driver == "psycopg2"
    assert spec.sqlalchemy_uri_placeholder.startswith("dpsql://")
    assert not spec.allows_subqueries and spec.allows_joins  # series limit: dpsql.routes.series
    assert not spec.supports_file_upload
    assert spec.get_default_schema(None, None) == "public"
    assert spec.get_prequeries(None, None, "public") == []
    assert not spec.get_allow_cost_estimate({})
    assert spec.get_extra_params(SimpleNamespace(extra=None, server_cert=None)) == dict(
        DP_EXTRA_DEFAULTS)
    owner = SimpleNamespace(extra='{"disable_data_preview": false}', server_cert=None)
    assert spec.get_extra_params(owner)["disable_data_preview"] is False
    assert spec.get_extra_params(owner)["disable_drill_to_detail"] is True
