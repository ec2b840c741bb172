"""Shared fixtures: small crafted databases with known contents, and their metadata.

``make_db(sql, tables)`` builds a DuckDB file in the test's tmp folder by running ``sql`` (one
string of statements, or a list), writes the metadata ``{"tables": tables}`` as a TOML file next
to it, and returns a :class:`Crafted` with both paths and an open :class:`dpsql.Database`
(closed at teardown). The ``kit`` fixture carries the helpers: ``kit.metadata_from(tables)``
validates a metadata dict without any file, ``kit.write_metadata(path, tables)`` writes one,
``kit.run_rewritten(con, plan)`` runs a plan's engine query, and ``kit.PEOPLE`` /
``kit.VISITS`` are table declarations used by many tests; ``md`` is their metadata.

``served`` is the sample data served by ``dpsql serve`` for a whole module, alice's password
the module's ``PASSWORD``; ``no_dpsql_env`` clears ``DPSQL_LEDGER`` and ``DPSQL_ANALYST`` (use
it with ``pytest.mark.usefixtures``). Helpers that are not fixtures: :mod:`tests.support`.
"""

from __future__ import annotations

import datetime as dt
import itertools
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest
import tomli_w

import dpsql
from dpsql.engines.duckdb_engine.dialect import DuckDBDialect
from dpsql.execution.rewrite import rewrite
from dpsql.metadata.metadata import Metadata, parse_metadata
from dpsql.privacy.plan import Plan
from tests.support.sandbox import served_sandbox


def toml_dumps(tables: Mapping[str, Mapping[str, Any]]) -> str:
    """The metadata file declaring ``tables`` (written by tomli-w, like dpsql's own files)."""
    return tomli_w.dumps({"tables": tables})


def write_metadata(path: Path, tables: Mapping[str, Mapping[str, Any]]) -> Path:
    path.write_text(toml_dumps(tables), encoding="utf-8")
    return path


def metadata_from(tables: Mapping[str, Mapping[str, Any]]) -> Metadata:
    """Validated metadata for ``{"tables": tables}``, no file involved."""
    return parse_metadata({"tables": dict(tables)}, source="test.toml")


@dataclass
class Crafted:
    path: Path  # the DuckDB file
    metadata_path: Path
    db: dpsql.Database

    @property
    def metadata(self) -> Metadata:
        return self.db.metadata


#: Words of a statement whose effect is not a function of its text alone (the clock, random
#: draws, files outside the database): such a database is built afresh, never copied.
_VOLATILE = ("random", "now()", "current_", "uuid", "setseed", "copy ", "attach", "export",
             "read_", "'/", "install", "load ")


def _cacheable(statements: Sequence[str]) -> bool:
    return not any(word in s.lower() for s in statements for word in _VOLATILE)


@pytest.fixture(scope="session")
def _built_duckdb(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Sequence[str]], Path]:
    """The DuckDB file that ``statements`` build, built once per worker and kept: many tests
    build the same small database, and a build costs ~60 ms, a copy of the file ~1 ms."""
    folder = tmp_path_factory.mktemp("built-duckdb")
    built: dict[tuple[str, ...], Path] = {}
    names = itertools.count()

    def build(statements: Sequence[str]) -> Path:
        key = tuple(statements)
        if key not in built:
            path = folder / f"{next(names)}.duckdb"  # a failed build's file is never reused
            with duckdb.connect(str(path)) as con:
                for statement in statements:
                    con.execute(statement)
            built[key] = path
        return built[key]

    return build


@pytest.fixture
def make_db(tmp_path: Path, _built_duckdb: Callable[[Sequence[str]], Path]
            ) -> Iterator[Callable[..., Crafted]]:
    """Factory: ``make_db(sql, tables, name="db")`` -> :class:`Crafted`. The file is the
    test's own copy of a database built once per worker (``_built_duckdb``) when the
    statements are plain DDL and DML; a failing statement raises here as it always did."""
    opened: list[dpsql.Database] = []

    def make(sql: str | Sequence[str], tables: Mapping[str, Mapping[str, Any]],
             name: str = "db") -> Crafted:
        path = tmp_path / f"{name}.duckdb"
        statements = [sql] if isinstance(sql, str) else list(sql)
        if _cacheable(statements):
            shutil.copyfile(_built_duckdb(statements), path)
        else:
            with duckdb.connect(str(path)) as con:
                for statement in statements:
                    con.execute(statement)
        metadata_path = write_metadata(tmp_path / f"{name}.toml", tables)
        db = dpsql.Database(path, metadata_path)
        opened.append(db)
        return Crafted(path, metadata_path, db)

    yield make
    for db in opened:
        db.close()


def run_rewritten(con: duckdb.DuckDBPyConnection, plan: Plan, salt: int = 12345,
                  sql: str | None = None) -> list[tuple[object, ...]]:
    """Run the rewritten query of ``plan`` (or ``sql``, a part of it) on ``con``, binding the
    salt parameter when the query has one."""
    text = sql if sql is not None else rewrite(plan).sql(dialect=DuckDBDialect)
    parameters = [salt] if "$1" in text else None
    return con.execute(text, parameters).fetchall()


# A small table used by many unit tests: one row per unit, every kind of column.
PEOPLE = {
    "privacy_unit": "pid",
    "max_rows_per_unit": 1,
    "one_row_per_unit": True,
    "columns": {
        "pid": {"type": "int"},
        "age": {"type": "int", "lower": 0, "upper": 100},
        "income": {"type": "float", "lower": 0, "upper": 1000, "nullable": True},
        "sex": {"type": "text", "values": ["F", "M"]},
        "state": {"type": "text"},
        "kids": {"type": "int", "lower": 0, "upper": 3, "public_range": True},
        "married": {"type": "bool"},
        "born": {"type": "date", "lower": dt.date(1950, 1, 1), "upper": dt.date(2000, 12, 31)},
        "code": {"type": "text", "nullable": True},
    },
}
# Many rows per unit: contribution bounding runs.
VISITS = {
    "privacy_unit": "pid",
    "max_rows_per_unit": 3,
    "max_groups_per_unit": 2,
    "columns": {
        "pid": {"type": "int"},
        "cat": {"type": "text", "values": ["a", "b", "c"]},
        "amount": {"type": "float", "lower": -10, "upper": 40},
        "n": {"type": "int", "lower": 0, "upper": 5},
    },
}


@pytest.fixture
def people_meta() -> Metadata:
    return metadata_from({"people": PEOPLE, "visits": VISITS})


@pytest.fixture
def kit() -> SimpleNamespace:
    return SimpleNamespace(metadata_from=metadata_from, write_metadata=write_metadata,
                           toml_dumps=toml_dumps, run_rewritten=run_rewritten,
                           PEOPLE=PEOPLE, VISITS=VISITS)


@pytest.fixture
def md(kit: SimpleNamespace) -> Metadata:
    """``people`` and ``visits`` (kit.PEOPLE, kit.VISITS), validated."""
    return kit.metadata_from({"people": kit.PEOPLE, "visits": kit.VISITS})


@pytest.fixture(scope="module")
def served(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """The sample data served on a free port for the whole module (``port``, ``db``, ``setup``,
    ``server``), to alice with the module's ``PASSWORD``, on its own ledger."""
    password = request.module.PASSWORD
    folder = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    with served_sandbox(folder, password) as running:
        yield running


@pytest.fixture
def no_dpsql_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ledger or analyst from the environment: the test's own metadata decides."""
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)
    monkeypatch.delenv("DPSQL_ANALYST", raising=False)


@pytest.fixture
def noise_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every noise draw is 0 (dpsql.privacy.mechanisms._noise): each answer is its exact
    measurements on the noise grid, then the same post-processing, thresholds and key release
    as ever -- the noise-free answer that the rules of SQL semantics are checked on."""
    import numpy as np
    import numpy.typing as npt

    def zeros(spec: object, size: int, rng: object) -> npt.NDArray[np.int64]:
        return np.zeros(size, dtype=np.int64)

    monkeypatch.setattr("dpsql.privacy.mechanisms._noise", zeros)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A standalone Spark cluster (a master, a worker, two executors in JVMs of their own)
    and a Spark Connect server (local mode) on loopback for the whole run
    (tests.support.sparkcluster), started from pyspark's own scripts. Every ``spark`` test
    runs on it (in one pytest-xdist worker, see pytest_collection_modifyitems):
    ``spark_cluster.url(folder)`` is the classic session, ``spark_cluster.connect_url(folder)``
    the Connect server. A missing JDK or Connect
    package is a failure, not a skip (scripts/test installs them)."""
    from tests.support.sparkcluster import standalone_cluster

    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def _spark_cluster_for_spark_tests(request: pytest.FixtureRequest) -> None:
    """A ``spark`` test's classic session runs on the cluster: the cluster is up before the
    process's one SparkContext is created (dpsql.engines.spark.engine keeps one per process)."""
    if request.node.get_closest_marker("spark") is not None:
        request.getfixturevalue("spark_cluster")
