"""Attacks on the paths landed with the routes package (docs/audit.md, "Attacker's pass,
2026-12-06 (routes)"): the one pass of :meth:`dpsql.Database.run` over every route, the
per-unit table that automatic bounds keep on DuckDB (``temp.__dpsql_units``), a composite's
answer key, the memo of bound texts and the dry-run shapes. Each test fails if the hole it
names is open.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
import sqlglot
import tomli_w
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB

import dpsql
from dpsql.engines import Engine
from dpsql.errors import EngineError, EngineFailure, QueryTimeout, UnknownTable
from dpsql.query.dry_shapes import dry_shape
from dpsql.query.parameters import frozen_parameters
from grammar_tests.databases import auto_metadata
from tests.support.helpers import SAMPLE, sample_tables_toml

pytestmark = pytest.mark.usefixtures("no_dpsql_env")

#: A count and a sum per public key of a table whose k is drawn from the data: bounded by
#: weights, its per-unit totals read from the choices' table (routes.pipeline._shares_units).
SHARED = "SELECT category, COUNT(*) AS n, SUM(amount) AS s FROM visits GROUP BY category"


def _spent(db: dpsql.Database, analyst: str) -> float:
    status = db.budget(analyst)
    assert status is not None
    return status.spent.epsilon


def _temporary(engine: Engine) -> int:
    (count,), = engine.execute("SELECT COUNT(*) FROM duckdb_tables() WHERE temporary")[1]
    assert isinstance(count, int)
    return count


@pytest.fixture
def auto_db(tmp_path: Path) -> Iterator[dpsql.Database]:
    """The sample data with visits' k drawn from the data, metered: alice and bob."""
    declared = auto_metadata()
    declared["budget"] = {"ledger": str(tmp_path / "ledger.sqlite")}
    declared["analysts"] = {"alice": {"epsilon": 20.0}, "bob": {"epsilon": 20.0}}
    path = tmp_path / "auto.toml"
    path.write_text(tomli_w.dumps(declared), encoding="utf-8")
    with dpsql.Database(SAMPLE, path, analyst="alice") as db:
        yield db


@pytest.fixture
def sample_db(tmp_path: Path) -> Iterator[dpsql.Database]:
    path = tmp_path / "metadata.toml"
    path.write_text('[budget]\nledger = "ledger.sqlite"\n[analysts.alice]\nepsilon = 20.0\n'
                    "delta = 1e-5\n[analysts.bob]\nepsilon = 20.0\nquery_epsilon = 0.25\n" +
                    sample_tables_toml(), encoding="utf-8")
    with dpsql.Database(SAMPLE, path, analyst="alice") as db:
        yield db


# --- the per-unit table of automatic bounds -------------------------------------------------


@pytest.mark.parametrize("name", ["__dpsql_units", "temp.__dpsql_units",
                                  "temp.main.__dpsql_units", "memory.temp.__dpsql_units"])
def test_the_per_unit_table_is_out_of_every_analysts_reach(auto_db: dpsql.Database,
                                                            name: str) -> None:
    """The table that a shared run keeps between its choices and its query holds exact
    per-unit counts: gone once the answer is out, and never nameable by a query (of the analyst
    who ran it or of another on the same thread's cursor), refused before any charge."""
    answer = auto_db.run(SHARED, epsilon=1.0)
    assert answer.cost is not None and answer.result.chosen_rows is not None
    assert _temporary(auto_db.engine) == 0
    for analyst in ("alice", "bob"):
        before = _spent(auto_db, analyst)
        with pytest.raises(UnknownTable):
            auto_db.query(f"SELECT COUNT(*) AS n, SUM(__n) AS s FROM {name}", epsilon=1.0,
                          analyst=analyst)
        assert _spent(auto_db, analyst) == before


def test_an_analysts_cte_does_not_stand_in_for_the_per_unit_table(
        auto_db: dpsql.Database) -> None:
    """A CTE or alias named as the table (or as the totals it feeds) is the analyst's own:
    the engine query reads the totals from the table the choices made, never from a relation
    the analyst wrote (which could claim one row per unit and undo the bounding)."""
    import dpsql.routes.pipeline as pipeline
    from dpsql.privacy.randomness import Randomness

    forged = ("WITH __dpsql_units AS (SELECT person_id AS __unit, 1 AS __n FROM visits) "
              + SHARED)
    p = auto_db.plan(forged, epsilon=1.0)
    chosen = pipeline.choose(p, auto_db.engine, Randomness.seeded(1))  # type: ignore[arg-type]
    try:
        sql, _ = pipeline._shared_query(chosen, auto_db.engine)
    finally:
        auto_db.engine.execute("DROP TABLE IF EXISTS temp.__dpsql_units")
    assert sql.count("__dpsql_units") == 1 and "FROM __dpsql_units" in sql
    assert "1 AS __n" not in sql


def test_a_failure_after_the_charge_drops_the_table_and_is_its_answer(
        auto_db: dpsql.Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine failing on the query that reads the per-unit table: the analyst gets the
    fixed EngineFailure (never the engine's text, which may quote a private value), the table
    is dropped all the same, and the failure is the charge's answer (asked again: the same
    error, nothing charged)."""
    engine = auto_db.engine
    honest = engine.execute

    def failing(sql: str, parameters: object = ()) -> object:
        if "FROM __dpsql_units" in sql and "__by" in sql:  # the query, after its choices
            raise EngineError("Conversion Error: person 4242 earns 98765",
                              owner_detail="person 4242 earns 98765")
        return honest(sql, parameters)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "execute", failing)
    with pytest.raises(EngineFailure) as failed:
        auto_db.query(SHARED, epsilon=1.0)
    assert "98765" not in str(failed.value) and "4242" not in str(failed.value)
    assert _temporary(engine) == 0
    once = _spent(auto_db, "alice")
    assert once == pytest.approx(1.0)
    monkeypatch.setattr(engine, "execute", honest)
    with pytest.raises(EngineFailure):
        auto_db.query(SHARED, epsilon=1.0)
    assert _spent(auto_db, "alice") == once


# --- stored answers: a new query is a new charge ---------------------------------------------


CAST_TEXT = "SELECT COUNT(*) AS n FROM people WHERE CAST(? AS VARCHAR) = 'x'"


@pytest.mark.parametrize(("sql", "first", "second", "written"), [
    (CAST_TEXT, Decimal("1.0"), Decimal("1.00"), "1.00"),  # equal in Python, written apart
    (CAST_TEXT, 0.0, -0.0, "-0.0"),
    ("SELECT COUNT(*) AS n FROM people WHERE age = ANY(?)", (30, 40), (30.0, 40.0),
     "30.0"),  # an array's values keep their types
])
def test_parameters_equal_in_python_but_bound_apart_are_another_query(
        sample_db: dpsql.Database, sql: str, first: object, second: object, written: str
        ) -> None:
    """The memo of bound texts (Database._texts) was keyed by the values as Python compares
    them: the second value was answered as the first's text, from its stored answer (a free
    answer to another query: ``CAST(? AS VARCHAR)`` tells them apart)."""
    one = sample_db.run(sql, epsilon=0.5, parameters=[first])
    two = sample_db.run(sql, epsilon=0.5, parameters=[second])
    assert one.cost is not None and two.cost is not None and not two.reused
    assert written in two.sql and two.sql != one.sql
    assert frozen_parameters([first]) != frozen_parameters([second])
    again = sample_db.run(sql, epsilon=0.5, parameters=[second])
    assert again.reused and again.sql == two.sql  # the same values: the memo, the answer


def test_equal_parameters_through_the_db_api(tmp_path: Path) -> None:
    path = tmp_path / "metadata.toml"
    path.write_text('[budget]\nledger = "ledger.sqlite"\n[analysts.alice]\nepsilon = 20.0\n' +
                    sample_tables_toml(), encoding="utf-8")
    sql = "SELECT COUNT(*) AS n FROM people WHERE CAST(? AS VARCHAR) = '1.00'"
    with dpsql.connect(database=SAMPLE, metadata=path, analyst="alice") as conn:
        cur = conn.cursor()
        counts = []
        for value in (Decimal("1.0"), Decimal("1.00")):
            cur.execute(sql, (value,))
            counts.append(cur.fetchall()[0][0])
        status = conn.budget()
        assert status is not None and status.spent.epsilon == pytest.approx(2.0)
    # the second is true for every person, the first for none (noise of scale 1)
    assert counts[1] - counts[0] > 1000


def test_a_composite_at_another_epsilon_is_another_release(sample_db: dpsql.Database) -> None:
    """A composite's key holds its text, its parts' texts and the parts' summed cost: the same
    text at another front-door epsilon, under other bounds, or one of its parts sent alone is a
    new release, charged; the same call again is reused."""
    from dpsql.metadata.contribution import ContributionBounds

    part = "SELECT COUNT(*) AS n FROM people"
    sql = f"{part} UNION ALL SELECT COUNT(*) AS n FROM visits"
    calls: list[tuple[float, ContributionBounds | None, str]] = [
        (0.5, None, sql), (0.5, None, sql), (0.25, None, sql),
        (0.25, ContributionBounds(max_rows=2), sql), (0.5, None, part)]
    charged = []
    for epsilon, bounds, text in calls:
        answer = sample_db.run(text, epsilon=epsilon, bounds=bounds)
        charged.append(None if answer.cost is None else round(answer.cost.epsilon, 6))
    assert charged == [1.0, None, 0.5, 0.5, 0.5]


def test_each_analysts_default_epsilon_is_their_own_route(sample_db: dpsql.Database) -> None:
    """Routes are cached per text and privacy parameters: an analyst's default epsilon
    (``query_epsilon``) is read before the cache, so one analyst's cached route never sets
    another's cost."""
    sql = "SELECT COUNT(*) AS n FROM people"
    alice = sample_db.run(sql, analyst="alice")
    bob = sample_db.run(sql, analyst="bob")
    assert alice.cost is not None and bob.cost is not None
    assert (alice.cost.epsilon, bob.cost.epsilon) == pytest.approx((1.0, 0.25))


# --- dry-run shapes --------------------------------------------------------------------------


_COLUMNS = ("i", "s", "u", "h", "d", "v", "dt", "b", "e", "ts")
_NUMBERS = ("0", "1", "127", "128", "255", "256", "32767", "32768", "65536", "2147483647",
            "2147483648", "4294967296", "9223372036854775807", "9223372036854775808", "1.5",
            "0.5", "00.5", "999.5", "99999.5", "0.001", "1.00", "0010",
            "12345678901234567890.5", "99999999999999999999999999999999999999.5")
_FORMS = ("{c} = {n}", "{n} < {c}", "{c} BETWEEN {n} AND 3", "{c} IN ({n}, 3)",
          "{c} = CAST({n} AS DOUBLE)", "{c} + {n} > 0", "{c} = {n} + 1",
          "CASE WHEN {c} = {n} THEN 1 END = 1", "COALESCE({c}, {n}) = {c}",
          "{c} = ANY([{n}])", "{c} IS DISTINCT FROM {n}")


def test_one_shape_one_dry_run_outcome() -> None:
    """A dry run that passed for a shape is not repeated for another query of that shape
    (dpsql.query.dry_shapes): over every column type, comparison form and number width, two
    queries of one shape pass or fail their dry run together (else one would be refused where
    the other is charged and fails on the data)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t(i INTEGER, s TINYINT, u UTINYINT, h HUGEINT, d DECIMAL(4,1), "
                "v VARCHAR, dt DATE, b BOOLEAN, e DOUBLE, ts TIMESTAMP)")
    outcomes: dict[str, set[bool]] = {}
    for c, form, n in itertools.product(_COLUMNS, _FORMS, _NUMBERS):
        tree = sqlglot.parse_one("SELECT COUNT(*) FROM t WHERE " + form.format(c=c, n=n),
                                 read="duckdb")
        assert isinstance(tree, exp.Expression)
        shape = dry_shape(tree, DuckDB)
        if shape is None:
            continue
        try:
            con.execute(tree.sql(dialect="duckdb")).fetchall()
            passed = True
        except duckdb.Error:
            passed = False
        outcomes.setdefault(shape, set()).add(passed)
    assert len(outcomes) > 500  # opaque numbers were met, in many shapes
    assert all(len(seen) == 1 for seen in outcomes.values())


def test_the_query_around_the_parts_keeps_the_front_doors_cap(tmp_path: Path) -> None:
    """A front door's own cap on the owner's statement_timeout (the server's
    ``--statement-timeout``, passed as ``timeout``) bounds the query around a composite's
    parts too, as it bounds the parts that run on the engine: it ran up to the metadata's
    limit (300 s), on a thread the door had meant to free."""
    path = tmp_path / "metadata.toml"
    path.write_text('[budget]\nledger = "ledger.sqlite"\n[analysts.alice]\nepsilon = 20.0\n' +
                    sample_tables_toml(), encoding="utf-8")
    values = "(VALUES " + ", ".join(f"({i})" for i in range(200)) + ")"
    joined = ", ".join(f"{values} AS v{i}(x)" for i in range(5))
    private = ("(SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) "
               "FROM people)")
    sql = f"SELECT SUM(v0.x * v1.x + v2.x - v3.x * v4.x) AS n FROM {joined} " \
          f"WHERE {private} IS NOT NULL"
    outcome: list[BaseException] = []

    def ask() -> None:
        with dpsql.Database(SAMPLE, path, analyst="alice") as db:
            try:
                db.run(sql, timeout=1.0)
            except BaseException as e:  # the outcome is the test's
                outcome.append(e)

    worker = threading.Thread(target=ask, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "the combining query ran past the door's cap"
    assert len(outcome) == 1 and isinstance(outcome[0], QueryTimeout)
    assert outcome[0].seconds == 1.0 and "was charged" in str(outcome[0])
