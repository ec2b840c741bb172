"""Neighbour testing by execution on PostgreSQL (dpsql.neighbours): the same worlds as
tests/test_neighbours.py, one schema per neighbour in one database of the run's throw-away
cluster, queried through dpsql's PostgresEngine (its own SQL, its own compile checks)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from dpsql.database import sample_paths
from dpsql.engines.pgcluster import Cluster
from dpsql.metadata import load_metadata
from dpsql.neighbour_queries import LEAK_CLASSES, generate, leak_class, metadata
from dpsql.neighbours import (
    Neighbourhood,
    Summary,
    check_queries,
    check_query,
    postgres_neighbourhood,
    synthesize,
)
from grammar_tests.corpus import load_corpus

SLOW = os.environ.get("DPSQL_SLOW") == "1"
N_GENERATED = 1500 if SLOW else 150
CLASS_1 = "issue 17 class 1 (three-valued logic of anti-joins), fixed on branch fix17"
CLASS_2 = "issue 17 class 2 (unit spellings: bounding vs typed filters), fixed on branch fix17"
CLASS_3 = ("issue 17 class 3, found by this harness: a unit_path table read through a CTE or "
           "a FROM subquery is planned with k = 1 and no bounding; not fixed yet")


@pytest.fixture(scope="module")
def database(pg_cluster: Cluster) -> str:
    return pg_cluster.database("neighbours").url()


def _hood(url: str, md: object, prefix: str, **kw: object) -> Iterator[Neighbourhood]:
    hood = postgres_neighbourhood(synthesize(md, **kw), url, prefix)  # type: ignore[arg-type]
    yield hood
    hood.close()


@pytest.fixture(scope="module")
def typed(database: str) -> Iterator[Neighbourhood]:
    yield from _hood(database, metadata(), "typed", seed=3)


@pytest.fixture(scope="module")
def text_units(database: str) -> Iterator[Neighbourhood]:
    yield from _hood(database, metadata(), "text", seed=3, text_units=True)


@pytest.fixture(scope="module")
def sample(database: str) -> Iterator[Neighbourhood]:
    yield from _hood(database, load_metadata(sample_paths()[1]), "sample", seed=5)


def report(summary: Summary, what: str) -> None:
    print(f"\n[neighbours, postgres] {what}: {summary.line()}")


@pytest.mark.parametrize(("klass", "sql"), [(k, q) for k in (1, 3) for q in LEAK_CLASSES[k]])
def test_finds_classes_1_and_3(typed: Neighbourhood, klass: int, sql: str) -> None:
    verdict = check_query(sql, typed)
    assert verdict.status == "violation", (klass, verdict.status)


@pytest.mark.parametrize("sql", LEAK_CLASSES[2])
def test_finds_class_2(text_units: Neighbourhood, sql: str) -> None:
    assert check_query(sql, text_units).status == "violation"


@pytest.mark.parametrize("klass", [
    pytest.param(1, marks=pytest.mark.xfail(strict=True, reason=CLASS_1)),
    pytest.param(2, marks=pytest.mark.xfail(strict=True, reason=CLASS_2)),
    pytest.param(3, marks=pytest.mark.xfail(strict=True, reason=CLASS_3))])
def test_class_fixed(typed: Neighbourhood, text_units: Neighbourhood, klass: int) -> None:
    hood = text_units if klass == 2 else typed
    verdicts = [check_query(q, hood) for q in LEAK_CLASSES[klass]]
    assert all(v.status == "passed" for v in verdicts), [v.report() for v in verdicts]


@pytest.fixture(scope="module")
def generated(typed: Neighbourhood) -> Summary:
    summary = check_queries(generate(N_GENERATED, seed=17), typed)
    report(summary, f"{N_GENERATED} generated queries")
    return summary


def test_generated(generated: Summary) -> None:
    assert generated.accepted >= 0.9 * len(generated.verdicts), generated.line()
    new = [v for v in generated.violations if leak_class(v.sql) is None]
    assert not new, "\n".join(v.report() for v in new[:5])


@pytest.mark.xfail(strict=True, reason=f"{CLASS_1}; {CLASS_3}")
def test_generated_all_clean(generated: Summary) -> None:
    assert not generated.violations, generated.report()


def test_corpus(sample: Neighbourhood) -> None:
    """The grammar corpus's accepted cases on the sample data's metadata (every one in
    DPSQL_SLOW=1, one in three otherwise); a case PostgreSQL cannot run is refused, before
    any data is read, and counted as such."""
    cases = [c for c in load_corpus() if c.database == "sample" and c.verdict == "accepted"]
    queries = [(c.sql, float(c.options["epsilon"]), float(c.options["delta"]),  # type: ignore
                str(c.options["mechanism"])) for c in cases[::1 if SLOW else 3]]
    summary = check_queries(queries, sample)
    report(summary, "grammar corpus (sample)")
    assert not summary.violations, summary.report()
    assert summary.accepted >= 0.9 * len(queries), summary.line()
