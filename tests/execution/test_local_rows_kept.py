"""Draws of local rows from a fixed table's kept counts (dpsql/execution/local_rows.py,
``kept_counts``, ``_drawn``): each unit's kept rows, ``min(rows, k)``, counted once per engine;
each read then draws its m positions (unit, rank) from the CSPRNG and the engine ranks the rows
of the drawn units only. The positions are uniform, and a read from the kept counts has the
same distribution as a read through the engine's selection (``selection`` and ``_draws``),
checked against the exact distribution with a false-failure rate of 1e-6 per test (seeded:
the same verdict on every run)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from scipy import stats

from dpsql.engines import DuckDBEngine
from dpsql.execution.local_rows import KeptCounts, kept_counts, picked_rows
from dpsql.metadata.metadata import Table, parse_metadata
from dpsql.privacy.randomness import Randomness

P_MIN = 1e-6  # goodness-of-fit tests fail only below this p-value
SLOW = os.environ.get("DPSQL_SLOW") == "1"
K = 3
# Units 1..6 with 1, 2, 3, 4, 5 and 9 rows (k = 3: 1, 2, 3, 3, 3, 3 kept, N = 15), every
# row told apart by its value; and one row of no unit, never drawn.
ROWS = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 9}
DATA = ("SELECT * FROM (VALUES " + ", ".join(
    f"({u}, {u * 100 + i})" for u, n in ROWS.items() for i in range(n)) +
    ", (NULL, 999)) t(pid, v)")
KEPT = {u: min(n, K) for u, n in ROWS.items()}
N = sum(KEPT.values())


def _table(unit_type: str = "int") -> Table:
    table = parse_metadata({"tables": {"visits": {
        "privacy_unit": "pid", "max_rows_per_unit": K,
        "columns": {"pid": {"type": unit_type}, "v": {"type": "int", "lower": 0, "upper": 1000}},
        "local": {"epsilon": 1.0, "sample_rows": 2, "columns": {"v": "laplace"}}}}}
        ).table("visits")
    assert table is not None
    return table


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[DuckDBEngine]:
    path = tmp_path / "d.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE visits AS {DATA}")
        con.execute("CREATE VIEW visits_view AS SELECT * FROM visits")
    engine = DuckDBEngine(path)
    yield engine
    engine.close()


def test_only_a_duckdb_files_base_tables_are_fixed(engine: DuckDBEngine, tmp_path: Path
                                                   ) -> None:
    # A view may read random() or the clock; a folder's files may be rewritten at any time.
    assert engine.fixed("visits") and engine.fixed("VISITS")
    assert not engine.fixed("visits_view") and not engine.fixed("nothing")
    folder = tmp_path / "folder"
    folder.mkdir()
    duckdb.sql(f"COPY ({DATA}) TO '{folder / 'visits.parquet'}' (FORMAT PARQUET)")
    files = DuckDBEngine(folder)
    try:
        assert not files.fixed("visits")
    finally:
        files.close()


def test_the_counts_are_kept_per_engine_and_capped_at_k(engine: DuckDBEngine,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    run = engine.execute_arrays

    def counted(*args: Any) -> dict[str, Any]:
        calls.append(args)
        return run(*args)

    monkeypatch.setattr(engine, "execute_arrays", counted)
    counts = kept_counts(_table(), engine)
    assert kept_counts(_table(), engine) is counts and len(calls) == 1  # computed once
    assert dict(zip(counts.units.tolist(), np.diff(counts.starts).tolist(), strict=True)) \
        == KEPT
    assert counts.total == N


def test_the_positions_drawn_are_uniform() -> None:
    # Units of 1 to 7 kept rows: every position (unit, rank) 1/N, whatever its unit's count.
    sizes = np.array([1, 7, 2, 5, 3, 1, 4])
    starts = np.concatenate([[0], np.cumsum(sizes)])
    counts = KeptCounts(np.arange(len(sizes)) * 10, starts)
    unit, rank = counts.draw(70_000, Randomness.seeded(21))
    assert ((rank >= 1) & (rank <= sizes[unit])).all()
    seen = Counter(zip((starts[unit] + rank - 1).tolist(), strict=True))
    observed = [seen[(p,)] for p in range(int(starts[-1]))]
    assert stats.chisquare(observed).pvalue > P_MIN


def _expected_pairs() -> dict[tuple[int, int, bool], float]:
    """Two draws with replacement from the bounded rows (a uniformly random k of each
    unit's): units a and b with probability c_a c_b / N^2; of one unit, the same row exactly
    when the same position (1 / c_u)."""
    out = {}
    for a, ca in KEPT.items():
        for b, cb in KEPT.items():
            p = ca * cb / N**2
            if a != b:
                out[(a, b, False)] = p
            else:
                out[(a, a, True)] = p / ca
                if ca > 1:
                    out[(a, a, False)] = p * (ca - 1) / ca
    return out


def _pairs(table: Table, engine: DuckDBEngine, rng: Randomness, trials: int
           ) -> tuple[Counter[tuple[int, int, bool]], Counter[int]]:
    """Over ``trials`` reads of m = 2 draws: the (unit, unit, same row) of the two draws, and
    the row (its value) of the first."""
    pairs: Counter[tuple[int, int, bool]] = Counter()
    first: Counter[int] = Counter()
    for _ in range(trials):
        rows = picked_rows(table, ["v", "pid"], engine, rng, None, None, 2)
        assert rows is not None and len(rows) == 2
        (va, ua), (vb, ub) = rows
        assert va // 100 == int(ua) and vb // 100 == int(ub)  # a true row of its unit
        pairs[(int(ua), int(ub), va == vb)] += 1
        first[va] += 1
    return pairs, first


@pytest.mark.parametrize("kept", [True, False])
def test_a_read_from_kept_counts_has_the_selections_distribution(
        engine: DuckDBEngine, monkeypatch: pytest.MonkeyPatch, kept: bool) -> None:
    # The same exact law, from the kept counts and through the engine's selection (its
    # top-m by a salted hash and the first-appearance renaming of _draws): which units two
    # draws hit and whether they are the same row (the bounding within one read), and the
    # row of one draw, min(rows, k) / (rows N) for each row of a unit.
    if not kept:
        monkeypatch.setattr(engine, "fixed", lambda table: False)
    trials = 2400 if SLOW else 800  # the engine's selection: ~35 ms a read
    pairs, first = _pairs(_table(), engine, Randomness.seeded(7 if kept else 8), trials)
    expected = _expected_pairs()
    assert set(pairs) <= set(expected)
    assert stats.chisquare([pairs[c] for c in expected],
                           [p * trials for p in expected.values()]).pvalue > P_MIN
    rows = {u * 100 + i: KEPT[u] / (n * N) for u, n in ROWS.items() for i in range(n)}
    assert stats.chisquare([first[v] for v in rows],
                           [p * trials for p in rows.values()]).pvalue > P_MIN


@pytest.mark.parametrize("unit_type", ["text", "float"])
def test_text_and_float_units_go_back_to_the_engine_as_they_came(
        tmp_path: Path, unit_type: str) -> None:
    path = tmp_path / "d.duckdb"
    cast = "VARCHAR" if unit_type == "text" else "DOUBLE"
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE visits AS SELECT CAST(pid AS {cast}) AS pid, v FROM ({DATA})")
    engine = DuckDBEngine(path)
    try:
        rows = picked_rows(_table(unit_type), ["v", "pid"], engine, Randomness.seeded(3),
                           None, None, 200)
    finally:
        engine.close()
    assert rows is not None and len(rows) == 200
    assert all(v // 100 == int(float(u)) for v, u in rows)
    assert {int(float(u)) for _, u in rows} == set(ROWS)  # 200 draws reach every unit


def test_an_empty_fixed_table_has_no_row_to_draw(tmp_path: Path) -> None:
    path = tmp_path / "d.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE visits (pid BIGINT, v BIGINT)")
        con.execute("INSERT INTO visits VALUES (NULL, 1)")  # a row of no unit only
    engine = DuckDBEngine(path)
    try:
        assert kept_counts(_table(), engine).total == 0
        assert picked_rows(_table(), ["v", "pid"], engine, Randomness.seeded(3), None, None,
                           5) is None
    finally:
        engine.close()




def test_counts_that_no_longer_match_the_rows_are_an_error_and_dropped(
        engine: DuckDBEngine) -> None:
    # Impossible while the table is fixed; were it to happen (a dpsql bug), a read must fail
    # rather than release other rows, and the next read count again.
    from dpsql.errors import EngineError
    from dpsql.execution import local_rows

    kept = local_rows._by_engine.setdefault(engine, {})
    kept_counts(_table(), engine)
    (key,) = kept
    kept[key] = KeptCounts(np.array([1]), np.array([0, 3]))  # unit 1 has 1 row, not 3
    with pytest.raises(EngineError, match="changed while the database was open"):
        for _ in range(20):  # until a rank above 1 is drawn (2/3 a draw)
            picked_rows(_table(), ["v", "pid"], engine, Randomness.seeded(4), None, None, 3)
    assert kept_counts(_table(), engine).total == N  # counted again
