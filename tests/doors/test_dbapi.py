"""The DB-API 2.0 (PEP 249) surface of dpsql, and pandas.read_sql over it.

Each test gets its own metadata (the sample tables, a budget for alice) and ledger in tmp.
"""

from __future__ import annotations

import datetime as dt
import threading
import warnings
from pathlib import Path

import pytest

import dpsql
from dpsql.ledger.budget import Cost
from tests.support.helpers import SAMPLE, sample_tables_toml

pytestmark = pytest.mark.usefixtures("no_dpsql_env")
BY_SEX = "SELECT sex, COUNT(*) AS n, AVG(income) AS income FROM people GROUP BY sex"




@pytest.fixture
def metadata(tmp_path: Path) -> Path:
    path = tmp_path / "metadata.toml"
    path.write_text('[budget]\nledger = "ledger.sqlite"\n[analysts.alice]\nepsilon = 20.0\n'
                    "delta = 1e-5\n" + sample_tables_toml())
    return path


@pytest.fixture
def conn(metadata: Path) -> dpsql.Connection:
    with dpsql.connect(database=SAMPLE, metadata=metadata, analyst="alice") as connection:
        yield connection


DAILY = ("SELECT day, COUNT(*) AS n, AVG(amount) AS a FROM visits "
         "WHERE day < DATE '2025-01-15' GROUP BY day")
#: At epsilon 0.05 about 11 of DAILY's 14 AVGs sit at a bound of [0, 5000] (a noisy count
#: near zero pins them there): none at all has a chance of about 1e-8.
AT_BOUND = "AVG at a bound: a at "


def test_caveats_on_the_cursor(metadata: Path) -> None:
    """cursor.caveats (also in notes) when the noise exceeds the values and AVGs sit at a
    bound; caveats=False on execute or on connect leaves them out."""
    with dpsql.connect(database=SAMPLE, metadata=metadata, analyst="alice",
                       epsilon=0.05) as conn:
        cur = conn.execute(DAILY)
        [noise] = [c for c in cur.caveats if c.startswith("The noise exceeds the value in ")]
        [bound] = [c for c in cur.caveats if c.startswith(AT_BOUND)]
        assert noise in cur.notes and bound in cur.notes and len(cur.fetchall()) == 14
        cur.execute(DAILY, caveats=False)
        assert cur.caveats == [] and noise not in cur.notes and bound not in cur.notes
        assert cur.reused
    with dpsql.connect(database=SAMPLE, metadata=metadata, analyst="alice", epsilon=0.05,
                       caveats=False) as conn:
        cur = conn.execute(DAILY)
        assert cur.caveats == [] and not any("noise exceeds" in n for n in cur.notes)
        conn.caveats = True
        assert conn.execute(DAILY).caveats


# --- module ----------------------------------------------------------------------------------


def test_module_globals() -> None:
    assert dpsql.apilevel == "2.0"
    assert dpsql.threadsafety in (1, 2)
    assert dpsql.paramstyle == "qmark"
    assert callable(dpsql.connect)


def test_exception_hierarchy() -> None:
    assert issubclass(dpsql.Warning, Exception) and issubclass(dpsql.Error, Exception)
    assert not issubclass(dpsql.Warning, dpsql.Error)
    for name in ("InterfaceError", "DatabaseError"):
        assert issubclass(getattr(dpsql, name), dpsql.Error)
    for name in ("DataError", "OperationalError", "IntegrityError", "InternalError",
                 "ProgrammingError", "NotSupportedError"):
        assert issubclass(getattr(dpsql, name), dpsql.DatabaseError)
    assert issubclass(dpsql.BudgetExhausted, dpsql.OperationalError)
    assert issubclass(dpsql.QueryRefused, dpsql.ProgrammingError)
    assert issubclass(dpsql.InvalidPrivacyParameter, dpsql.QueryRefused)
    assert dpsql.Connection.ProgrammingError is dpsql.ProgrammingError  # optional extension


def test_type_objects_and_constructors() -> None:
    assert dpsql.NUMBER == "BIGINT" and dpsql.NUMBER == "DOUBLE" and dpsql.NUMBER == "HUGEINT"
    assert dpsql.NUMBER == "DECIMAL(18,3)" and dpsql.NUMBER != "VARCHAR"
    assert dpsql.STRING == "VARCHAR" and dpsql.STRING != "BIGINT"
    assert dpsql.DATETIME == "DATE" and dpsql.DATETIME == "TIMESTAMP WITH TIME ZONE"
    assert dpsql.BINARY == "BLOB" and dpsql.BOOLEAN == "BOOLEAN"
    assert dpsql.ROWID != "BIGINT"
    assert len({dpsql.STRING, dpsql.NUMBER, dpsql.DATETIME, dpsql.BINARY, dpsql.ROWID}) == 5
    assert dpsql.Date(2025, 1, 2) == dt.date(2025, 1, 2)
    assert dpsql.Time(1, 2, 3) == dt.time(1, 2, 3)
    assert dpsql.Timestamp(2025, 1, 2, 3, 4, 5) == dt.datetime(2025, 1, 2, 3, 4, 5)
    assert dpsql.DateFromTicks(86400 * 365) == dt.date.fromtimestamp(86400 * 365)
    assert dpsql.TimestampFromTicks(1e9) == dt.datetime.fromtimestamp(1e9).replace(microsecond=0)
    assert dpsql.TimeFromTicks(1e9) == dt.datetime.fromtimestamp(1e9).time().replace(microsecond=0)
    assert dpsql.Binary(b"ab") == b"ab"


# --- connection ------------------------------------------------------------------------------


def test_connection_defaults_and_extensions(conn: dpsql.Connection) -> None:
    assert conn.epsilon == 1.0 and conn.delta == 0.0 and conn.mechanism == "laplace"
    assert conn.analyst == "alice" and conn.metered and not conn.closed
    conn.commit()
    assert conn.budget().spent.epsilon == 0  # type: ignore[union-attr]


def test_invalid_connection_defaults_are_refused(metadata: Path) -> None:
    with pytest.raises(dpsql.InterfaceError):
        dpsql.connect(database=SAMPLE)
    for kwargs in ({"epsilon": 0.0}, {"epsilon": float("nan")}, {"delta": 1.5},
                   {"mechanism": "gaussian"}):
        with pytest.raises(dpsql.InvalidPrivacyParameter):
            dpsql.connect(SAMPLE, metadata, analyst="alice", **kwargs)  # type: ignore[arg-type]


def test_close_and_context_managers(metadata: Path) -> None:
    with dpsql.connect(SAMPLE, metadata, analyst="alice") as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM people")
        assert cur.closed
        other = conn.cursor()
    assert conn.closed
    with pytest.raises(dpsql.InterfaceError):
        conn.cursor()
    with pytest.raises(dpsql.InterfaceError):
        other.execute("SELECT COUNT(*) FROM people")
    with pytest.raises(dpsql.InterfaceError):
        conn.commit()
    conn.close()  # closing twice is harmless


def test_rollback_refunds_nothing(conn: dpsql.Connection) -> None:
    conn.cursor().execute("SELECT COUNT(*) FROM people", epsilon=0.5)
    conn.rollback()
    assert conn.budget().spent.epsilon == 0.5  # type: ignore[union-attr]


# --- cursor ----------------------------------------------------------------------------------


def test_description_rowcount_and_fetching(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    assert cur.description is None and cur.rowcount == -1 and cur.arraysize == 1
    assert cur.lastrowid is None
    assert cur.execute(BY_SEX + " ORDER BY sex") is cur
    names = [d[0] for d in cur.description]  # type: ignore[union-attr]
    assert names == ["sex", "n", "income"]
    assert all(len(d) == 7 for d in cur.description)  # type: ignore[union-attr]
    codes = [d[1] for d in cur.description]  # type: ignore[union-attr]
    assert codes[0] == dpsql.STRING and codes[1] == dpsql.NUMBER and codes[2] == dpsql.NUMBER
    assert codes == ["VARCHAR", "BIGINT", "DOUBLE"]
    assert cur.rowcount == 2
    first = cur.fetchone()
    assert first is not None and first[0] == "F" and isinstance(first[1], int)
    assert isinstance(first[2], float)
    assert cur.fetchmany() == [cur.result.rows[1]]  # type: ignore[union-attr]
    assert cur.fetchone() is None and cur.fetchall() == [] and cur.fetchmany(5) == []


def test_fetchmany_arraysize_and_iteration(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    cur.execute("SELECT age, COUNT(*) FROM people GROUP BY age ORDER BY age")
    assert cur.rowcount == 95 - 18 + 1
    cur.arraysize = 10
    batch = cur.fetchmany()
    assert [row[0] for row in batch] == list(range(18, 28))
    assert [row[0] for row in cur.fetchmany(3)] == [28, 29, 30]
    assert cur.rownumber == 13
    rest = list(cur)
    assert [row[0] for row in rest] == list(range(31, 96))
    cur.execute("SELECT COUNT(*) FROM people")
    assert cur.fetchall() == [cur.result.rows[0]]  # type: ignore[union-attr]


def test_fetch_before_execute_and_after_close(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    with pytest.raises(dpsql.ProgrammingError):
        cur.fetchone()
    cur.execute("SELECT COUNT(*) FROM people")
    cur.close()
    cur.close()
    for call in (cur.fetchone, cur.fetchall, cur.fetchmany, lambda: next(iter(cur)),
                 lambda: cur.execute("SELECT COUNT(*) FROM people"),
                 lambda: cur.executemany("SELECT COUNT(*) FROM people", [()])):
        with pytest.raises(dpsql.InterfaceError):
            call()


def test_optional_methods(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    cur.setinputsizes([None])
    cur.setoutputsize(10)
    with pytest.raises(dpsql.NotSupportedError):
        cur.callproc("anything")
    cur.execute("SELECT COUNT(*) FROM people")
    assert cur.nextset() is None


def test_a_failed_execute_clears_the_previous_result(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM people")
    with pytest.raises(dpsql.UnknownTable):
        cur.execute("SELECT COUNT(*) FROM nowhere")
    assert cur.description is None and cur.rowcount == -1
    with pytest.raises(dpsql.ProgrammingError):
        cur.fetchall()


def test_refusals_name_the_db_api_remedy(conn: dpsql.Connection) -> None:
    """The library's message is door-neutral; the DB-API adds its own knob (delta=), never
    the command line's --delta."""
    cur = conn.cursor()
    with pytest.raises(dpsql.KeyReleaseRefused) as refused:
        cur.execute("SELECT state, COUNT(*) FROM people GROUP BY state")
    message = str(refused.value)
    assert message.endswith("(pass delta=1e-06 to execute() or connect())")
    assert "--" not in message
    cur.execute("SELECT state, COUNT(*) FROM people GROUP BY state", delta=1e-6)
    assert cur.rowcount > 0


def test_limit_0_reads_nothing_and_charges_nothing(conn: dpsql.Connection) -> None:
    """BI tools probe column types with LIMIT 0: the typed empty answer comes from the plan
    (or, for a query the pipeline refuses, from empty tables of the declared types), free;
    what reads undeclared tables or columns or forbidden functions is refused."""
    cur = conn.cursor()
    cur.execute(BY_SEX)
    full = cur.description
    spent = conn.budget().spent.epsilon  # type: ignore[union-attr]
    ledger = len(conn.database.ledger.history("alice"))  # type: ignore[union-attr]
    cur.execute(BY_SEX + " ORDER BY n DESC LIMIT 0")
    assert cur.fetchall() == [] and cur.rowcount == 0
    assert cur.description == full
    cur.execute("SELECT COUNT(*) + 1 AS x, AVG(age) / 2 AS half FROM people "
                "FETCH FIRST 0 ROWS ONLY")
    assert [(d[0], d[1]) for d in cur.description] == [("x", dpsql.NUMBER),
                                                          ("half", dpsql.NUMBER)]
    assert conn.budget().spent.epsilon == spent  # type: ignore[union-attr]
    assert len(conn.database.ledger.history("alice")) == ledger  # type: ignore[union-attr]
    # Row-level and thresholded probes release column names and types only: free too.
    for probe, names in (("SELECT age, email FROM people LIMIT 0", ["age", "email"]),
                         ("SELECT state, COUNT(*) AS n FROM people GROUP BY state LIMIT 0",
                          ["state", "n"])):
        cur.execute(probe)
        assert cur.fetchall() == [] and [d[0] for d in cur.description] == names
    assert conn.budget().spent.epsilon == spent  # type: ignore[union-attr]
    for refused in ("SELECT age FROM nowhere LIMIT 0",
                    "SELECT read_csv('/etc/passwd') FROM people LIMIT 0",
                    "SELECT nope FROM people LIMIT 0"):
        with pytest.raises(dpsql.QueryRefused):
            cur.execute(refused)
    cur.execute(BY_SEX + " LIMIT 1")  # a LIMIT that is not 0 is charged as usual
    assert conn.budget().spent.epsilon > spent  # type: ignore[union-attr]


def test_decimal_columns_report_precision_and_scale(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    cur.execute("SELECT CAST(AVG(income) AS DECIMAL(12,2)) AS m FROM people")
    assert cur.description[0][1] == dpsql.NUMBER  # type: ignore[index]
    assert cur.description[0][4:6] == (12, 2)  # type: ignore[index]


# --- parameters, epsilon, accuracy ------------------------------------------------------------


def test_parameters_in_every_style(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM people WHERE sex = ? AND age >= ?", ("F", 60))
    qmark = cur.fetchall()
    cur.execute("SELECT COUNT(*) FROM people WHERE sex = $1 AND age >= $2", ["F", 60])
    assert cur.reused and cur.fetchall() == qmark  # the same query: its stored answer
    cur.execute("SELECT COUNT(*) FROM people WHERE sex = :s AND age >= :a", {"s": "F", "a": 60})
    assert cur.reused and cur.cost is None
    cur.execute("SELECT COUNT(*) FROM people WHERE signup_date < ?", (dpsql.Date(2016, 1, 1),))
    assert isinstance(cur.fetchone()[0], int)  # type: ignore[index]


def test_a_quote_in_a_parameter_stays_a_value(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM people WHERE sex = ?", ("F' OR sex = 'M",))
    assert cur.rowcount == 1
    spent = conn.budget().spent.epsilon  # type: ignore[union-attr]
    with pytest.raises(dpsql.ProgrammingError):
        cur.execute("SELECT COUNT(*) FROM people WHERE sex = ?", ("F", "M"))
    with pytest.raises(dpsql.ProgrammingError):
        cur.execute("SELECT COUNT(*) FROM people WHERE sex = ?")
    assert conn.budget().spent.epsilon == spent  # type: ignore[union-attr]


def test_per_query_epsilon_and_connection_default(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM people", epsilon=0.5)
    assert cur.cost == Cost(0.5, 0.0, 0.0) and not cur.reused
    narrow = cur.accuracy[0][0]
    conn.epsilon = 0.25
    cur.execute("SELECT COUNT(*) FROM visits")
    assert cur.cost == Cost(0.25, 0.0, 0.0)
    cur.execute("SELECT COUNT(*) FROM people", epsilon=0.125)
    assert cur.accuracy[0][0] > narrow  # less epsilon, wider interval
    cur.execute("SELECT state, COUNT(*) FROM people GROUP BY state", delta=1e-6,
                mechanism="gaussian", epsilon=1.0)
    assert cur.cost is not None and cur.cost.delta == 1e-6 and cur.cost.rho > 0
    assert conn.budget().spent.epsilon == 0.5 + 0.25 + 0.125 + 1.0  # type: ignore[union-attr]


def test_accuracy_is_per_row_and_cell(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    cur.execute(BY_SEX + " ORDER BY sex")
    assert len(cur.accuracy) == cur.rowcount == 2
    for acc in cur.accuracy:
        assert acc[0] is None  # a group key: public, no noise
        assert acc[1] is not None and acc[1] > 0 and acc[2] is not None and acc[2] > 0
    cur.execute("SELECT COUNT(*) * 2 AS twice, COUNT(*) AS n FROM people")
    (twice, n), = cur.accuracy
    assert twice is None and n is not None and n > 0  # computed from a cell: no interval here
    cur.execute("SELECT MEDIAN(age) FROM people")
    assert cur.accuracy[0][0] > 0
    assert cur.result.columns[0].accuracy_unit == "rank"  # type: ignore[union-attr]


def test_executemany_answers_each_parameter_set(conn: dpsql.Connection) -> None:
    cur = conn.cursor()
    cur.executemany("SELECT COUNT(*) AS n FROM people WHERE age >= ?", [(30,), (50,), (70,)],
                    epsilon=0.5)
    rows = cur.fetchall()
    assert len(rows) == 3 == cur.rowcount and len(cur.accuracy) == 3
    assert cur.description[0][0] == "n"  # type: ignore[index]
    assert cur.cost == Cost(1.5, 0.0, 0.0)
    assert rows[0][0] > rows[2][0]  # noise is small next to the true differences
    cur.executemany("SELECT COUNT(*) FROM people WHERE age >= ?", [])
    assert cur.rowcount == 0 and cur.description is None


def test_connection_execute_shortcut(conn: dpsql.Connection) -> None:
    assert conn.execute("SELECT COUNT(*) FROM people", epsilon=0.5).fetchone() is not None


def test_budget_exhaustion_through_the_cursor(metadata: Path) -> None:
    with dpsql.connect(SAMPLE, metadata, analyst="alice", epsilon=10.0) as conn:
        cur = conn.cursor()
        cur.execute("SELECT COUNT(*) FROM people")
        cur.execute("SELECT COUNT(*) FROM visits")
        with pytest.raises(dpsql.BudgetExhausted):
            cur.execute("SELECT AVG(age) FROM people")
        assert conn.budget().remaining.epsilon == 0  # type: ignore[union-attr]
        cur.execute("SELECT COUNT(*) FROM people")  # asked before: stored, free
        assert cur.reused


def test_threads_may_share_a_connection(conn: dpsql.Connection) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            cur = conn.cursor()
            for i in range(5):
                cur.execute("SELECT COUNT(*) FROM people WHERE age > ?", (n * 5 + i,),
                            epsilon=0.25)
                assert cur.fetchone() is not None
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert conn.budget().spent.epsilon == 20 * 0.25  # type: ignore[union-attr]


def test_an_unmetered_connection(tmp_path: Path) -> None:
    metadata = tmp_path / "metadata.toml"
    metadata.write_text(sample_tables_toml())
    with dpsql.connect(SAMPLE, metadata) as conn:
        assert not conn.metered and conn.analyst is None and conn.budget() is None
        cur = conn.cursor()
        cur.execute("SELECT COUNT(*) FROM people")
        assert cur.cost is None and not cur.reused and cur.rowcount == 1


# --- pandas ----------------------------------------------------------------------------------


def test_pandas_read_sql_gives_typed_columns(conn: dpsql.Connection) -> None:
    pd = pytest.importorskip("pandas")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="pandas only supports SQLAlchemy")
        df = pd.read_sql("SELECT sex, married, COUNT(*) AS n, AVG(income) AS income, "
                         "SUM(children) AS kids FROM people WHERE age >= ? "
                         "GROUP BY sex, married ORDER BY sex, married", conn, params=(30,))
    assert list(df.columns) == ["sex", "married", "n", "income", "kids"]
    assert len(df) == 4
    assert pd.api.types.is_integer_dtype(df["n"]) and pd.api.types.is_integer_dtype(df["kids"])
    assert pd.api.types.is_float_dtype(df["income"])
    assert pd.api.types.is_bool_dtype(df["married"])
    assert list(df["sex"]) == ["F", "F", "M", "M"]


def test_pandas_sees_refusals_as_errors(conn: dpsql.Connection) -> None:
    pd = pytest.importorskip("pandas")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="pandas only supports SQLAlchemy")
        with pytest.raises(Exception) as info:
            pd.read_sql("SELECT amount FROM visits", conn)
    error = info.value  # pandas 3 lets it through; older pandas wraps it in its DatabaseError
    assert isinstance(error, dpsql.QueryRefused) or isinstance(error.__cause__, dpsql.QueryRefused)


def test_an_unexpected_error_is_an_internal_error_without_its_text(
        conn: dpsql.Connection, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("could not convert 'Alice Smith'")

    monkeypatch.setattr(conn.database, "run", broken)
    with pytest.raises(dpsql.InternalError) as raised:
        conn.cursor().execute("SELECT COUNT(*) FROM people")
    assert "Alice" not in str(raised.value)
    assert raised.value.__suppress_context__  # the original text is not shown either
    assert "Alice Smith" in caplog.text


def test_the_front_doors_guard(caplog: pytest.LogCaptureFixture) -> None:
    """errors.guarded, the one policy of the CLI, the DB-API and the server: dpsql's errors and
    the door's own pass; anything else is a fixed InternalError, its text in the owner's log."""
    from dpsql.errors import InternalError, guarded

    with pytest.raises(dpsql.QueryRefused), guarded("q"):
        raise dpsql.QueryRefused("refused")
    with pytest.raises(KeyError), guarded("q", passing=(KeyError,)):
        raise KeyError("the door's own")
    seen: list[InternalError] = []
    with pytest.raises(InternalError) as raised, guarded("q", on_bug=seen.append):
        raise ValueError("'Alice Smith'")
    assert seen == [raised.value] and "Alice" not in str(raised.value)
    assert "'Alice Smith'" in caplog.text
    with pytest.raises(ValueError), guarded("q", debug=True):
        raise ValueError("as it is")


def test_contribution_bounds_per_connection_and_per_execute(metadata: Path) -> None:
    """max_rows / max_groups: the connection's default, execute's override, BigQuery's OPTIONS
    over both; cursor.notes says the bounds in force; above the cap: refused, nothing charged."""
    with dpsql.connect(database=SAMPLE, metadata=metadata, analyst="alice",
                       max_rows=4) as conn:
        cur = conn.cursor()
        cur.execute("SELECT COUNT(*) FROM visits")
        assert "at most 4 row(s)" in cur.notes[0] and cur.accuracy[0][0] is not None
        cur.execute("SELECT category, COUNT(*) FROM visits GROUP BY category", max_rows=6,
                    max_groups=2)
        assert "at most 6 row(s) (max_rows_per_unit" in cur.notes[0]
        assert "across all its groups (no groups cap" in cur.notes[0]  # public keys
        cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, "
                    "max_rows_contributed = 9) COUNT(*) FROM visits", max_rows=6)
        assert "at most 9 row(s)" in cur.notes[0]
        spent = conn.budget().spent.epsilon  # type: ignore[union-attr]
        with pytest.raises(dpsql.ProgrammingError, match="cap of 1000"):
            cur.execute("SELECT COUNT(*) FROM visits", max_rows=1001)
        assert conn.budget().spent.epsilon == spent  # type: ignore[union-attr]
    with pytest.raises(dpsql.ProgrammingError, match="whole number"):
        dpsql.connect(database=SAMPLE, metadata=metadata, max_groups=0)


def test_retention_estimate_is_charged_and_reused(metadata: Path) -> None:
    """retention=EPSILON (connection default, execute override): a noisy estimate of the share
    of a unit's rows the bounds keep, charged at that epsilon on top of the query's, in
    cursor.retention and cursor.notes; asked again, both answers are reused for free."""
    from dpsql.execution.retention import measure
    from dpsql.metadata.contribution import ContributionBounds

    with dpsql.connect(database=SAMPLE, metadata=metadata, analyst="alice", epsilon=0.5,
                       retention=0.25) as conn:
        cur = conn.cursor()
        spent = conn.budget().spent.epsilon  # type: ignore[union-attr]
        sql = "SELECT category, COUNT(*) FROM visits GROUP BY category"
        cur.execute(sql, max_rows=2)
        assert cur.cost == Cost(0.75, 0.0, 0.0)
        assert conn.budget().spent.epsilon == pytest.approx(spent + 0.75)  # type: ignore[union-attr]
        estimate = cur.retention
        assert estimate is not None and estimate.epsilon == 0.25
        assert 0.0 <= estimate.low <= estimate.kept <= estimate.high <= 1.0
        assert any(n.startswith("Retention (estimated at epsilon 0.25") for n in cur.notes)
        plan = conn.database.plan(sql, bounds=ContributionBounds(2))
        units, kept = measure(plan, conn.database.engine)  # the exact figures, for the test
        assert abs(estimate.kept - kept / units) < 0.02 and estimate.kept < 0.9
        cur.execute(sql, max_rows=2)
        assert cur.cost is None and cur.retention == estimate  # both reused
        cur.execute("SELECT COUNT(*) FROM people", retention=0.5)  # one row per person
        assert cur.retention is not None and cur.retention.kept == 1.0 and cur.cost == Cost(
            0.5, 0.0, 0.0)  # exact from the metadata: the query alone is charged
        spent = conn.budget().spent.epsilon  # type: ignore[union-attr]
        with pytest.raises(dpsql.ProgrammingError, match="epsilon"):
            cur.execute("SELECT COUNT(*) FROM visits", retention=-1.0)
        with pytest.raises(dpsql.NotSupportedError, match="series limit"):
            cur.execute("SELECT v.category, COUNT(*) FROM visits v JOIN (SELECT category AS c, "
                        "COUNT(*) AS n FROM visits GROUP BY category ORDER BY n DESC LIMIT 2) "
                        "AS s ON v.category = s.c GROUP BY v.category")
        assert conn.budget().spent.epsilon == spent  # type: ignore[union-attr]


def test_bigquery_per_group_bounds_computed_or_refused(conn: dpsql.Connection) -> None:
    """BigQuery's contribution_bounds_per_group: computed on SUM, AVG and COUNT (each unit's
    total, average or count per group clamped), refused on VAR_POP where a unit has several
    rows (naming the per-row form); a refusal charges nothing."""
    cur = conn.cursor()
    spent = conn.budget().spent.epsilon  # type: ignore[union-attr]
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5, delta = 1e-6, "
                "max_groups_contributed = 2) category, SUM(amount, contribution_bounds_per_group"
                " => (0, 100)) AS total FROM visits GROUP BY category")
    assert [d[0] for d in cur.description] == ["category", "total"] and cur.rowcount == 8
    assert conn.budget().spent.epsilon == pytest.approx(spent + 0.5)  # type: ignore[union-attr]
    spent += 0.5
    with pytest.raises(dpsql.NotSupportedError, match="contribution_bounds_per_row"):
        cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) category, "
                    "VAR_POP(amount, "
                    "contribution_bounds_per_group => (0, 100)) FROM visits GROUP BY category")
    assert conn.budget().spent.epsilon == spent  # type: ignore[union-attr]
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5, delta = 1e-6) "
                "category, AVG(amount, contribution_bounds_per_group => (0, 100)) AS a FROM "
                "visits GROUP BY category")
    assert all(0 <= a <= 100 for _, a in cur.fetchall())
    assert conn.budget().spent.epsilon == pytest.approx(spent + 0.5)  # type: ignore[union-attr]
    spent += 0.5
    cur.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5, delta = 0, "
                "max_groups_contributed = 1, privacy_unit_column = person_id) category, "
                "COUNT(*, contribution_bounds_per_group => (0, 1000)) AS n FROM visits "
                "GROUP BY category")
    assert [d[0] for d in cur.description] == ["category", "n"] and cur.rowcount == 8
    assert conn.budget().spent.epsilon == pytest.approx(spent + 0.5)  # type: ignore[union-attr]


def test_retention_engine_failure_shows_no_engine_text(
        conn: dpsql.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine failure on the retention estimate (a dpsql bug) is the fixed EngineFailure:
    the engine's text, which may quote a private value, goes to the owner's log only."""
    from dpsql.errors import EngineError, EngineFailure
    from dpsql.execution import retention

    def failing(*args: object) -> object:
        raise EngineError("engine says: value 'Alice Smith'", owner_detail="Alice Smith")

    monkeypatch.setattr(retention, "measure", failing)
    with pytest.raises(EngineFailure) as e:
        conn.cursor().execute("SELECT COUNT(*) FROM visits WHERE amount > 7", retention=0.1)
    assert "Alice" not in str(e.value)


def test_a_moved_filter_value_is_its_own_query(conn: dpsql.Connection) -> None:
    """A dashboard's moving value (dpsql.routes.templates, issue 39.1): the new text reuses the
    plan of the one before it, and is charged, recorded and stored as its own text; asked
    again, its stored answer comes back, free."""
    cursor = conn.cursor()
    texts = [f"SELECT COUNT(*) AS n FROM people WHERE income > {m}" for m in (40000, 41234)]
    answers = []
    for text in texts:
        cursor.execute(text)
        answers.append(cursor.fetchall())
    planner = conn.database.planner
    assert sum(1 for key in planner.plans._entries if key[0] == "plan") == 1  # one from scratch
    ledger = conn.database.ledger
    assert ledger is not None
    recorded = [entry.sql for entry in ledger.history("alice")]
    assert sorted(recorded) == sorted(texts)
    spent = ledger.status("alice").spent
    cursor.execute(texts[1])
    assert cursor.fetchall() == answers[1]  # the stored answer of that text, not the first's
    assert ledger.status("alice").spent == spent
