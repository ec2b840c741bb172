"""The owner's timeout stops the engine's work, not only the wait for its answer.

A query that would run for minutes (a filtered cross join of two generated ranges: billions
of pairs) runs on each server engine under a :class:`~dpsql.execution.time_limits.Deadline`
of half a second, exactly as :meth:`dpsql.Database._answer_within` runs a private query: the
deadline fires the engine's cancel token, the engine raises an interrupted
:class:`~dpsql.errors.EngineError` (which the database turns into the owner's
:class:`~dpsql.errors.QueryTimeout`), and the engine itself has stopped: PostgreSQL's
``pg_stat_activity`` shows no active query of dpsql's session (the backend's cancel), the
classic Spark session's status tracker no active job (its job group cancelled), the Spark
Connect server's REST API no running job (its operation tag interrupted).

The one bound here is generous (``STOPPED_WITHIN``, against minutes of work); an engine that
ignores the cancel fails it, whatever the machine's load.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpsql.engines import Engine, open_engine
from dpsql.errors import EngineError
from dpsql.execution.time_limits import Deadline

LIMIT = 0.5  # the owner's statement_timeout, seconds
STOPPED_WITHIN = 60.0  # the work takes minutes; a cancelled query ends long before this
#: Billions of pairs each: minutes on any engine here, unless cancelled.
CROSS_JOIN = {
    "postgres": "SELECT COUNT(*) FROM generate_series(1, 200000) a(i), "
                "generate_series(1, 200000) b(j) WHERE (i + j) % 1009 = 7",
    "spark": "SELECT COUNT(*) FROM range(1000000) a CROSS JOIN range(1000000) b "
             "WHERE (a.id + b.id) % 1009 = 7",
}


def _one_table(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT 1 AS pid) TO '{folder / 't.parquet'}' (FORMAT parquet)")
    return folder


def _postgres(request: pytest.FixtureRequest, folder: Path) -> tuple[Engine, Callable[[], Any]]:
    from dpsql.engines.postgres.engine import PostgresEngine

    cluster = request.getfixturevalue("pg_cluster").database("cancel")
    url = cluster.load_duckdb_file(_one_table(folder))
    # The session's own backstop (limit + 1 s) far away: the cancel under test is dpsql's.
    engine = PostgresEngine(url, statement_timeout=600)

    def active() -> list[str]:
        import psycopg

        with psycopg.connect(cluster.url(), autocommit=True) as con:
            rows = con.execute("SELECT query FROM pg_stat_activity WHERE state = 'active' "
                               "AND query LIKE '%generate_series%' AND pid <> "
                               "pg_backend_pid()").fetchall()
        return [r[0] for r in rows]

    return engine, active


def _spark(backend: str) -> Callable[[pytest.FixtureRequest, Path],
                                      tuple[Engine, Callable[[], Any]]]:
    def open_spark(request: pytest.FixtureRequest, folder: Path
                   ) -> tuple[Engine, Callable[[], Any]]:
        cluster = request.getfixturevalue("spark_cluster")
        folder = _one_table(folder)
        url = cluster.url(folder) if backend == "cluster" else cluster.connect_url(folder)
        engine = open_engine(url)
        if backend == "connect":
            return engine, cluster.connect_running_jobs
        tracker = engine._session.sparkContext.statusTracker()  # type: ignore[attr-defined]
        return engine, lambda: list(tracker.getActiveJobsIds())

    return open_spark


ENGINES = {
    "postgres": pytest.param((_postgres, "postgres"), marks=pytest.mark.pg, id="postgres"),
    "cluster": pytest.param((_spark("cluster"), "spark"), marks=pytest.mark.spark,
                            id="spark-cluster"),
    "connect": pytest.param((_spark("connect"), "spark"), marks=pytest.mark.spark,
                            id="spark-connect"),
}


@pytest.fixture
def opened(request: pytest.FixtureRequest, tmp_path: Path
           ) -> Iterator[tuple[Engine, Callable[[], Any], str]]:
    opener, dialect = request.param
    engine, active = opener(request, tmp_path)
    yield engine, active, dialect
    engine.close()


@pytest.mark.parametrize("opened", list(ENGINES.values()), indirect=True)
def test_the_deadline_stops_the_engines_work(opened: tuple[Engine, Callable[[], Any], str]
                                             ) -> None:
    engine, active, dialect = opened
    outcome: list[BaseException | None] = []

    def run() -> None:  # as Database._answer_within runs a private query
        deadline = Deadline(engine.cancel_token(), LIMIT)
        try:
            engine.execute(CROSS_JOIN[dialect])
            outcome.append(None)
        except BaseException as e:  # reported below
            outcome.append(e)
        finally:
            deadline.stop()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(STOPPED_WITHIN)
    assert not worker.is_alive(), "the engine's query ran on after the owner's deadline"
    error = outcome[0]
    assert isinstance(error, EngineError) and error.interrupted, error
    assert "interrupted" in str(error) or "cancel" in str(error), error
    # The work itself has stopped, not only the wait: nothing of it still runs.
    left = active()
    end = time.monotonic() + 10  # Spark reports a cancelled job's end asynchronously
    while left and time.monotonic() < end:
        time.sleep(0.2)
        left = active()
    assert left == [], f"still running after the deadline: {left}"
    # The engine's session answers the next query.
    assert engine.execute("SELECT 1 AS one")[1] == [(1,)]
