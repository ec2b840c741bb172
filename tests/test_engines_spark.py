"""The Spark SQL engine on a real local Spark session (PySpark on the JDK; no mocks). A
missing PySpark or JDK fails these tests: they do not skip.

One session serves the whole test run (``dpsql.engines.spark`` keeps one JVM per process).

The differential harness (:func:`exact_rows`, :func:`differential`) runs a plan's rewritten
query on two engines over the same data and compares the exact per-group measurements. It
needs measurements that do not depend on which rows contribution bounding samples: the
sample metadata with ``visits`` bounded loosely enough (k = g = 1000) that every unit keeps
all its rows (a unit has at most 896 visits), so both engines' different
salted hashes keep the same rows. A PostgreSQL harness can call the same two functions.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

import dpsql
from dpsql.engines import DuckDBEngine, Engine
from dpsql.engines.spark import SparkEngine
from dpsql.errors import EngineError, QueryRefused, QueryTimeout
from dpsql.keys import canonical
from dpsql.metadata import Metadata, load_metadata
from dpsql.pipeline import engine_sql, prepare
from dpsql.plan import Plan
from grammar_tests.corpus import Case, load_corpus

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"
SPARK_URL = f"spark:local[2]?folder={SAMPLE}"
#: Every case runs with DPSQL_SLOW=1; by default every 4th accepted case (and every case that
#: builds a histogram, a date or a contribution bound), to keep CI time modest.
FULL = os.environ.get("DPSQL_SLOW") == "1"


def loose_metadata(folder: Path) -> Path:
    """The sample metadata with visits' contribution bounds loose enough that bounding keeps
    every row (see the module docstring), written to ``folder``."""
    text = (SAMPLE / "metadata.toml").read_text(encoding="utf-8")
    text = text.replace("max_rows_per_unit = 10 ", "max_rows_per_unit = 1000 ").replace(
        "max_groups_per_unit = 3 ", "max_groups_per_unit = 1000 ")
    assert "max_rows_per_unit = 1000" in text and "max_groups_per_unit = 1000" in text
    path = folder / "metadata.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Engine]]:
    duck, spark = DuckDBEngine(SAMPLE), SparkEngine(SPARK_URL)
    yield duck, spark
    duck.close()
    spark.close()


@pytest.fixture(scope="module")
def loose(tmp_path_factory: pytest.TempPathFactory) -> Metadata:
    return load_metadata(loose_metadata(tmp_path_factory.mktemp("loose")))


def exact_rows(engine: Engine, plan: Plan) -> dict[tuple[object, ...], list[object]]:
    """The exact measurements per canonical key of ``plan`` run on ``engine``."""
    sql, salted = engine_sql(plan, engine)
    _, rows = engine.execute(sql, [secrets.randbits(63)] if salted else [])
    keys = len(plan.keys)
    out: dict[tuple[object, ...], list[object]] = {}
    for row in rows:
        out[canonical(row[:keys])] = list(row[keys:])
    return out


def same(a: object, b: object) -> bool:
    """Equal measurements: integers (and histograms) exactly, reals up to summation order."""
    if isinstance(a, dict) or isinstance(b, dict):
        return {k: v for k, v in (a or {}).items() if v} == \
            {k: v for k, v in (b or {}).items() if v}  # type: ignore[union-attr]
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(
            float(a), float(b), rel_tol=1e-9, abs_tol=1e-6)  # type: ignore[arg-type]
    return a == b


def differential(plan: Plan, one: Engine, other: Engine) -> None:
    left, right = exact_rows(one, plan), exact_rows(other, plan)
    assert left.keys() == right.keys(), f"groups differ: {left.keys() ^ right.keys()}"
    for key, values in left.items():
        for m, a, b in zip(plan.measurements, values, right[key], strict=True):
            assert same(a, b), f"group {key}, {m.name} ({m.kind}): {a!r} != {b!r}"


def _selected(cases: list[Case]) -> list[Case]:
    if FULL:
        return cases
    special = re.compile(r"MEDIAN|QUANTILE|PERCENTILE|MIN\(|MAX\(|date|visits|CAST|//|%|/",
                         re.IGNORECASE)
    return [c for i, c in enumerate(cases) if i % 4 == 0 or (
        special.search(c.sql) and i % 2 == 0)]


CORPUS = load_corpus()
ACCEPTED = _selected([c for c in CORPUS if c.verdict == "accepted"])
REFUSED = [c for c in CORPUS if c.verdict == "refused"]


def test_corpus_accepted_same_measurements(engines: tuple[Engine, Engine],
                                           loose: Metadata) -> None:
    """The rewritten Spark SQL computes DuckDB's exact per-group measurements."""
    duck, spark = engines
    failures = []
    for case in ACCEPTED:
        try:
            plan = prepare(case.sql, loose, **case.options)  # type: ignore[arg-type]
        except QueryRefused:  # accepted under the sample's bounds only (k, g): not here
            continue
        try:
            differential(plan, duck, spark)
        except (AssertionError, EngineError, QueryRefused) as e:
            failures.append(f"{case.id}: {type(e).__name__}: {str(e)[:300]}")
    assert not failures, f"{len(failures)} of {len(ACCEPTED)}:\n" + "\n".join(failures)


def test_corpus_refused_the_same_way(engines: tuple[Engine, Engine]) -> None:
    """Every refused case is refused with the same class on both engines, before any data."""
    duck, spark = engines
    metadata = load_metadata(SAMPLE / "metadata.toml")
    for case in REFUSED:
        errors = []
        for engine in (duck, spark):
            try:
                plan = prepare(case.sql, metadata, **case.options)  # type: ignore[arg-type]
                engine_sql(plan, engine)
            except QueryRefused as e:
                errors.append(type(e).__name__)
        assert errors == [case.error, case.error], f"{case.id}: {errors}"
