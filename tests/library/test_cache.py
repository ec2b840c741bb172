"""The one LRU cache class, and every cache built on it under threads: bounded, no exception,
each answer the one for its own query."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

import dpsql
from dpsql.cache import LRU, weigh
from dpsql.metadata.metadata import Metadata
from dpsql.routes.pipeline import engine_sql
from dpsql.routes.planner import Planner

THREADS = 8

# ------------------------------------------------------------------ the class


def test_least_recently_used_goes_first() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3)
    assert len(cache) == 2 and "b" not in cache and cache.get("a") == 1 and cache.get("c") == 3


def test_first_value_stored_wins() -> None:
    cache: LRU[str, list[int]] = LRU(4)
    first, second = [1], [1]
    assert cache.put("k", first) is first
    assert cache.put("k", second) is first  # shared, never replaced
    assert cache.get_or_compute("k", lambda: [2]) is first


def test_a_failed_computation_is_not_cached() -> None:
    cache: LRU[str, int] = LRU(4)

    def refuse() -> int:
        raise ValueError("refused")

    with pytest.raises(ValueError):
        cache.get_or_compute("k", refuse)
    assert "k" not in cache and cache.get_or_compute("k", lambda: 7) == 7


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        LRU(0)


def test_threads_keep_the_bound() -> None:
    cache: LRU[int, int] = LRU(16)
    seen: list[int] = []

    def work(offset: int) -> None:
        for i in range(2000):
            key = offset * 10_000 + i % 40
            # type: ignore[misc]
            assert cache.get_or_compute(key, lambda key=key: key * 2) == key * 2
            seen.append(len(cache))

    run_threads(work)
    assert max(seen) <= 16 and len(cache) == 16


# ------------------------------------------------------------------ the caches in use


def run_threads(work: Callable[[int], None]) -> None:
    """``work(i)`` in THREADS threads started together; any exception fails the test. The
    interpreter switches threads every microsecond instead of every 5 ms, so that races show
    (the dict these caches replaced raised KeyError and passed its cap about once in three
    runs of test_prepare_from_threads this way, never with the default interval)."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def target(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as e:  # reported below, with its type
            errors.append(e)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(THREADS)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, [f"{type(e).__name__}: {e}" for e in errors]


class SizeWatch:
    """Samples the size of some caches from its own thread while the test runs."""

    def __init__(self, caches: dict[str, LRU[Any, Any]]) -> None:
        self.caches = caches
        self.largest = dict.fromkeys(caches, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch)

    def _watch(self) -> None:
        while not self._stop.is_set():
            for name, cache in self.caches.items():
                self.largest[name] = max(self.largest[name], len(cache))

    def __enter__(self) -> SizeWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_prepare_from_threads(kit: Any) -> None:
    """8 threads preparing distinct queries with one planner: no exception, the plan cache
    never above its cap, and each plan is the plan of its own query. The cap is cut to 128
    (the code path is the same, at a quarter of the queries)."""
    metadata: Metadata = kit.metadata_from({"people": kit.PEOPLE, "visits": kit.VISITS})
    planner = Planner(metadata, cache_size=128)
    assert planner.plans.size == 128
    per_thread = 128 // 4  # twice the cap in all

    def work(t: int) -> None:
        for i in range(per_thread):
            n = t * per_thread + i
            p = planner.prepare(f"SELECT COUNT(*) FROM people WHERE age > {n}")
            assert f"> {n}" in p.query.where.sql()  # type: ignore[union-attr]
            assert planner.prepare(f"SELECT COUNT(*) FROM people WHERE age > {n}") is p

    with SizeWatch({"plans": planner.plans}) as watch:
        run_threads(work)
    assert watch.largest["plans"] <= 128
    assert len(planner.plans) == 128


def test_one_database_from_threads(make_db: Callable[..., Any], kit: Any,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """8 threads answering distinct queries through one Database: no exception, every cache
    (plans, normalised texts, rewritten SQL) within its cap, each answer for its own query.
    The caps are cut to 64 for this database (the code path is the same; over a thousand
    answered queries at the real caps took half a minute of CI)."""
    cap = 64
    monkeypatch.setattr("dpsql.routes.planner.PLAN_CACHE_SIZE", cap)
    monkeypatch.setattr("dpsql.database._MEMO_SIZE", cap)
    monkeypatch.setattr("dpsql.engines.duckdb_engine.engine.REWRITTEN_CACHE_SIZE", cap)
    db: dpsql.Database = make_db(
        ["CREATE TABLE visits (pid BIGINT, cat VARCHAR, amount DOUBLE, n INTEGER)",
         "INSERT INTO visits SELECT i % 50, 'a', 1.0, 1 FROM range(500) t(i)"],
        {"visits": kit.VISITS}).db
    # 8 * 24 = 192 distinct queries, 144 of them answered (memoised texts): above every cap.
    per_thread = 24

    def work(t: int) -> None:
        for i in range(per_thread):
            n = t * per_thread + i
            sql = f"SELECT COUNT(*) AS c{n} FROM visits WHERE n < {n}"
            if i % 4:
                assert db.query(sql, epsilon=1.0).columns[0].name == f"c{n}"
            else:
                text, salted = engine_sql(db.plan(sql), db.engine)
                assert f"< {n}" in text and not salted  # COUNT(*) per unit: no sample

    caches = {"plans": db.planner.plans, "texts": db._memo, "rewritten": db.engine.rewritten}
    assert {name: c.size for name, c in caches.items()} == dict.fromkeys(caches, cap)
    with SizeWatch(caches) as watch:
        run_threads(work)
    assert watch.largest == dict.fromkeys(caches, cap), watch.largest


def test_cached_plans_are_not_mutated_by_answering(make_db: Callable[..., Any],
                                                   kit: Any) -> None:
    """The rewritten SQL lives in the engine's cache, not on the shared plan: two databases
    with different physical types answering the same cached plan each get their own SQL."""
    metadata: Metadata = kit.metadata_from({"visits": kit.VISITS})
    tables = {"visits": kit.VISITS}
    narrow = make_db(["CREATE TABLE visits (pid BIGINT, cat VARCHAR, amount DOUBLE, n TINYINT)"],
                     tables, name="narrow").db
    text = make_db(["CREATE TABLE visits (pid BIGINT, cat VARCHAR, amount DOUBLE, n VARCHAR)"],
                   tables, name="text").db
    p = Planner(metadata).prepare("SELECT SUM(n) FROM visits")
    before = dict(vars(p))
    narrow_sql, _ = engine_sql(p, narrow.engine)
    text_sql, _ = engine_sql(p, text.engine)
    assert "TRY_CAST" not in narrow_sql and "TRY_CAST" in text_sql
    assert engine_sql(p, narrow.engine)[0] is narrow_sql  # cached per engine
    assert vars(p) == before


def test_bounded_by_estimated_bytes_not_only_entries() -> None:
    """A few long texts evict short ones instead of pinning their parses; one heavier than the
    whole budget is not kept at all."""
    cache: LRU[str, int] = LRU(1000, max_bytes=weigh("x" * 1000, 0) * 3)
    for i in range(10):
        cache.put(f"{i:04d}" + "x" * 996, i)
    assert len(cache) == 3 and cache.bytes <= cache.max_bytes
    assert cache.get("0009" + "x" * 996) == 9 and cache.get("0000" + "x" * 996) is None
    huge = "y" * 10_000
    assert cache.put(huge, 1) == 1 and huge not in cache and len(cache) == 3
