"""Row-level SELECTs of a table the owner opted in to local DP: randomize first, then run the
analyst's query over the randomized rows.

The mechanism and its privacy argument are :mod:`dpsql.privacy.local`; this module decides which
row-level queries take the path (:func:`local_read`, called by the planner, the one router) and
runs them (:func:`answer_local`).

**What is allowed, thinking as an attacker.** The analyst's SQL never sees a true value: the
rows are bounded to k per unit and selected in the engine (every row when the row count is
public, else m uniform draws; a ``TABLESAMPLE`` is a uniform sample keyed by a secret salt from
the CSPRNG, its method and any seed the analyst gives ignored or refused: :func:`selection`),
put in a uniformly random order, randomized
(:meth:`~dpsql.privacy.local.RowMechanism.randomize`), and only then loaded into a fresh,
locked in-memory DuckDB holding that one table under its own name. The analyst's query runs
there: WHERE, ORDER BY, LIMIT, expressions, CTEs and windows read randomized values only
(post-processing), so a filter on "the true value" filters randomized
values, ORDER BY orders them, and LIMIT without ORDER BY keeps rows in the random order, never
chosen by a true value. Refused, before any charge: a query reading any other table (a join
with a private table would link true rows; with a public one, it is not supported) or this one
twice (a self-join's work grows with the square of the rows, outside the engine's time limit), a
``TABLESAMPLE`` seed (``REPEATABLE``: randomness the analyst chooses), a percentage sample of
a table whose row count is not public (its size would show), and the functions of
:mod:`dpsql.query.denied`. A query with an aggregate, GROUP BY or DISTINCT is not row-level: it
takes the central path.

**Row counts.** With ``row_count = "public"`` the number of rows returned reveals the table's
size (after bounding), which the owner declared public. Otherwise each query releases exactly m
draws (``sample_rows``, or ``TABLESAMPLE n ROWS``), before the analyst's filters: the count the
analyst sees is a function of randomized rows only.

**Time.** Only the released rows reach Python (all bounded rows with a public row count; m
draws otherwise), so the Python work does not grow with the table or with any one unit's
rows, and no unit's rows are sorted. m draws from a table the engine holds fixed
(:meth:`~dpsql.engines.Engine.fixed`: a base table of a DuckDB file, open read-only) come from
its *kept counts* (:func:`kept_counts`): each unit's rows capped at k, counted once per engine
(a hash aggregate over every row: the first read's cost, linear in the table), kept as
arrays (16 bytes a unit for an int or float unit; :class:`KeptCounts`). A read then draws
its m positions (unit, rank) from the CSPRNG and asks the engine for the rows of the drawn
units only, ranked by a fresh salted hash (:func:`_drawn`): a scan with a filter, no
aggregate over the table, about as long as ``USING SAMPLE`` of the same size
(benchmarks/README.md, "Local rows"). The same law as the selection's
(:mod:`dpsql.privacy.local`, "From kept counts"; tests/execution/test_local_rows_kept.py). Any
other read runs :func:`selection`, one engine query whose parameter is the secret salt: it
counts each unit's rows (capped at k), draws the positions from the counts by their salted
order, and ranks the rows of the units drawn only, with a top-k aggregate. Either way one
person's extra rows cost a scan (and, on a first read or through the selection, a count:
linear, vectorized) unless one of their k positions is drawn (probability about m k / n),
when their rows are ranked. Measured (tests/neighbours/test_neighbours_local_timing.py, a
loaded 2-core machine, first reads against first reads and later against later): one person
with 300,000 extra rows moves the median time of a read of a 50,000-row table by -3 to +3 ms,
under the 50 ms answer grid (100-160 ms when a window ranked every unit's rows, 1.5 s when the
rows were bounded in Python); +20-30 ms in a read that draws that person.

**Once per analyst, and always labelled.** Where the ledger keeps answers, the rows are
released once per analyst and table, as their stored copy (:meth:`LocalRead.copy_release`,
:func:`dpsql.routes.local.answer_from_stored_copy`): every later row-level query of the table,
windows included, is the analyst's query over that copy (:func:`answer_from_copy`), post-processing
at no cost. Every answer carries :meth:`LocalRead.label` as its ``local_label`` (and first note)
and a note on what was charged and why the query's epsilon does not apply: the label travels
with the result, so no door can show these rows without it.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
from sqlglot import exp

from dpsql.engines import Engine, ir, locked
from dpsql.engines.physical import public_select
from dpsql.errors import DataError, EngineError, NonAggregatedColumn, UnsupportedQuery
from dpsql.execution.postprocess import Result, ResultColumn
from dpsql.execution.public import check_functions, declared_tables, dry_run
from dpsql.execution.result import renamed
from dpsql.execution.rewrite import SALT
from dpsql.metadata.metadata import ENGINE_TYPES, ColumnType, Metadata, Table
from dpsql.privacy.local import RowMechanism, query_epsilon, row_mechanism, uniform_integers
from dpsql.privacy.randomness import Randomness
from dpsql.privacy.samplers import uniform
from dpsql.query.check import is_aggregate
from dpsql.query.names import readable_names

_MEMORY_LIMIT = "512MB"


@dataclass(frozen=True)
class LocalRead:
    """A row-level query answered from randomized rows: its DuckDB text over the one table,
    the table, its released row, the sample asked for, and the charge."""

    sql: str
    table: Table
    rows: RowMechanism
    columns: tuple[ResultColumn, ...]
    percent: float | None  # TABLESAMPLE p PERCENT
    sample_size: int | None  # TABLESAMPLE n ROWS
    epsilon: float  # the charge (query_epsilon)
    delta: float = 0.0
    mechanism: str = "local"

    @property
    def output_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def draws(self) -> int | None:
        """m, the uniform draws of a table whose row count is not public."""
        if self.rows.public_row_count:
            return None
        return self.sample_size if self.sample_size is not None else self.rows.sample_rows

    def describe(self) -> str:
        """One paragraph for EXPLAIN: the release and its charge."""
        split = ", ".join(f"{m.name} {m.kind} eps={m.epsilon:.4g}" for m in self.rows.released)
        count = "all rows (row count declared public)" if self.rows.public_row_count else \
            f"{self.draws} uniform draws"
        return (f"local DP rows of {self.table.name}: {count}, each row randomized with "
                f"epsilon {self.rows.epsilon:g} ({split}; other columns withheld as NULL); "
                f"charge {self.epsilon:g} ({self.charge_reason()}), once per analyst where "
                f"answers are stored: later row-level queries of {self.table.name} read the "
                "analyst's stored copy at no cost")

    def charge_reason(self) -> str:
        """Why the charge is what it is, whatever epsilon the query asked for."""
        k = self.rows.rows_per_unit
        count = f"{k} row{'s' if k != 1 else ''} per unit" if self.rows.public_row_count \
            else f"{self.draws} draws"
        return (f"the owner's per-row epsilon {self.rows.epsilon:g} x {count}; the epsilon a "
                "query asks for does not apply to local rows")

    def label(self) -> str:
        """The sentence that comes with every answer of this path, on every door."""
        bounded = [self.table.columns[m.name] for m in self.rows.released if m.grid]
        spread = f" ({bounded[0].name} is declared {bounded[0].lower}..{bounded[0].upper} " \
            "but may show values far outside)" if bounded else ""
        return (f"These rows of {self.table.name} are randomized (local differential privacy), "
                f"not real: every value was replaced by a noisy one before your query read it, "
                f"so a single value is often not the true one and can lie outside its declared "
                f"range{spread}; withheld columns are NULL. Only counts and averages over many "
                f"rows are meaningful; for statistics, ask for aggregates.")

    def copy_release(self, have: int | None) -> LocalRead | None:
        """The release that makes an analyst's stored copy (``have`` rows; None: no copy yet)
        cover this query: the whole bounded table (public row count), or the draws missing
        (uniform draws, independent of those held: the copy grows, each draw charged once);
        None when the copy covers it."""
        need = None if self.rows.public_row_count else (self.draws or 0) - (have or 0)
        if have is not None and (need is None or need <= 0):
            return None
        sql = f"SELECT * FROM {_name(self.table.name)}"
        return LocalRead(sql, self.table, self.rows, dry_run(sql, [self.table]), None, need,
                         query_epsilon(self.rows, need))


def local_read(tree: exp.Expression, metadata: Metadata) -> LocalRead | None:
    """The local release answering ``tree`` (read, not kept), or None when it is not a
    row-level query of a table that opted in (the other paths answer or refuse it). Refuses
    what the local path cannot make private (module docstring)."""
    tables = [t for t in tree.find_all(exp.Table) if isinstance(t.this, exp.Identifier)
              and not t.catalog and (t.db or "").lower() in ("", "main")]
    local = [metadata.table(t.name) for t in tables]
    opted = {t.name.lower(): t for t in local if t is not None and t.local is not None}
    if not opted or not _row_level(tree):
        return None
    read = declared_tables(tree, metadata)  # type: ignore[arg-type]
    table = next(iter(opted.values()))
    reads = sum(1 for t in local if t is table)
    if read != (table.name.lower(),) or reads != 1 or not isinstance(tree, exp.Select) or \
            tree.find(exp.Join) is not None:
        raise UnsupportedQuery(f"a row-level query of {table.name} (local DP rows) may read "
                               f"that table once and nothing else, in one SELECT without joins; "
                               "join or combine its rows after fetching them, or ask for "
                               "aggregates")
    _refuse_only_withheld(tree, table)
    tree = tree.copy()
    percent, size = _sample(tree, table)
    check_functions(tree)
    sql = tree.sql(dialect="duckdb")
    rows = row_mechanism(table)
    draws = None if rows.public_row_count else size if size is not None else rows.sample_rows
    columns = dry_run(sql, [table])  # named as every answer is (dpsql.query.names)
    columns = renamed(columns, readable_names(tree, [c.name for c in columns]))
    return LocalRead(sql, table, rows, columns, percent, size, query_epsilon(rows, draws))


def _row_level(tree: exp.Expression) -> bool:
    """No aggregate (outside a window), GROUP BY or DISTINCT: rows, not a statistic."""
    for node in tree.walk():
        if isinstance(node, exp.Group | exp.Distinct):
            return False
        if isinstance(node, exp.Expression) and is_aggregate(node) and \
                node.find_ancestor(exp.Window) is None:
            return False
    return True


def _refuse_only_withheld(tree: exp.Select, table: Table) -> None:
    """A query whose output names only withheld columns would pay for NULLs: refused, as a
    private column without an aggregate (a convenience, not a privacy rule)."""
    spec = table.local
    assert spec is not None
    if any(isinstance(e, exp.Star) or e.find(exp.Star) for e in tree.expressions):
        return
    names = {c.name.lower() for e in tree.expressions for c in e.find_all(exp.Column)}
    if names and all(spec.column(n) is None for n in names):
        released = ", ".join(c.name for c in spec.columns)
        raise NonAggregatedColumn(
            f"{', '.join(sorted(names))} of {table.name} is withheld from its local DP rows (no "
            f"domain or an identifier) and can be used only inside an aggregate such as "
            f"COUNT(...); the released columns are {released}")


def _sample(tree: exp.Expression, table: Table) -> tuple[float | None, int | None]:
    """The TABLESAMPLE asked for (removed from ``tree``): a percentage or a row count."""
    samples = list(tree.find_all(exp.TableSample))
    if not samples:
        return None, None
    if len(samples) > 1 or samples[0].args.get("seed") is not None or \
            samples[0].args.get("bucket_numerator") is not None:
        raise UnsupportedQuery("TABLESAMPLE of local DP rows takes one sample without a seed "
                               "(REPEATABLE): dpsql draws it from its own randomness")
    sample = samples[0]
    # Read as the normalised text reads it (the plan cache and stored answers are keyed by it):
    # BERNOULLI (10) is 10 rows there, as sqlglot writes it; 10 PERCENT is a percentage.
    percent, size = sample.args.get("percent"), sample.args.get("size")
    value = _number(percent if percent is not None else size)
    sample.pop()
    if percent is not None:
        if not 0 <= value <= 100:
            raise UnsupportedQuery(f"TABLESAMPLE takes a percentage in 0..100, not {value:g}")
        if not table.local.public_row_count:  # type: ignore[union-attr]
            raise UnsupportedQuery(f"the row count of {table.name} is not public, so a "
                                   "percentage of it cannot be shown; use TABLESAMPLE (n ROWS)")
        return value, None
    if not value.is_integer() or not 0 <= value <= 1_000_000:
        raise UnsupportedQuery(f"TABLESAMPLE takes a whole number of rows, not {value:g}")
    return None, int(value)


def _number(node: Any) -> float:
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.this)
    raise UnsupportedQuery("TABLESAMPLE takes a number literal")


# --- answering --------------------------------------------------------------------------------


def answer_local(read: LocalRead, engine: Engine, rng: Randomness) -> Result:
    """Read, bound, select, shuffle and randomize the rows, then run the analyst's query over
    them in a fresh locked DuckDB (module docstring). Its own release, charged on its own
    (no stored copy: an unmetered database, or stored answers turned off)."""
    rows = released_rows(read.table, read.rows, engine, rng, read.percent, read.sample_size)
    return run_over(read, rows, read.epsilon, [
        f"These randomized rows cost epsilon {read.epsilon:g} ({read.charge_reason()}); with no "
        "stored copy (stored answers turned off, or no budget ledger) every row-level query "
        "draws anew and costs this again."])


def answer_from_copy(read: LocalRead, copy: Result, rng: Randomness, drawn: float) -> Result:
    """The analyst's query over their stored copy (:meth:`LocalRead.copy_release`): the rows a
    sample asks for (the first n, or each row with probability p, from ``rng``), then the
    query, in the copy's random order: post-processing of the copy, which cost ``copy.epsilon``
    in all, ``drawn`` of it for this query."""
    names = [c.name for c in copy.columns]
    n = len(copy.rows)
    chosen = np.arange(n, dtype=np.int64)
    if read.percent is not None:
        chosen = chosen[uniform(n, rng) < read.percent / 100.0] if n else chosen
    elif read.draws is not None or read.sample_size is not None:
        chosen = chosen[:read.draws if read.draws is not None else read.sample_size]
    columns = {}
    for i, name in enumerate(names):
        values = np.empty(len(chosen), dtype=object)
        values[:] = [copy.rows[j][i] for j in chosen]
        columns[name] = values
    table = read.table.name
    note = (f"Charged epsilon {drawn:g} ({read.charge_reason()}) for your randomized copy of "
            f"{table}, stored in the ledger: every later row-level query of {table} (another "
            f"LIMIT, filter or sample) reads the same copy at no cost.") if drawn else (
            f"No new privacy cost: these rows come from your randomized copy of {table}, "
            f"released once (epsilon {copy.epsilon:g} charged then); the epsilon a query asks "
            f"for does not apply to local rows.")
    return run_over(read, columns, copy.epsilon, [note])


def joined(before: Result | None, drawn: Result) -> Result:
    """An analyst's copy grown by new draws (:meth:`LocalRead.copy_release`)."""
    if before is None:
        return drawn
    return Result(before.columns, before.rows + drawn.rows, before.accuracy + drawn.accuracy,
                  epsilon=before.epsilon + drawn.epsilon, local_label=drawn.local_label)


def released_rows(table: Table, mechanism: RowMechanism, engine: Engine, rng: Randomness,
                  percent: float | None = None, size: int | None = None
                  ) -> dict[str, npt.NDArray[np.object_]]:
    """The randomized rows of one release (column -> values), in a uniformly random order.
    The engine bounds and selects (:func:`picked_rows`): only the rows released reach Python,
    so the time spent here does not grow with any one unit's rows."""
    names = _read_names(table, mechanism)
    m = None if mechanism.public_row_count else size if size is not None else \
        mechanism.sample_rows or 0
    picked = picked_rows(table, names, engine, rng, percent, size, m)
    if picked is None:  # an empty table: its draws are of the public phantom row
        phantom = mechanism.phantom()
        picked = [tuple(phantom[n][0] for n in names)] * (m or 0)
    columns = {n: [r[i] for r in picked] for i, n in enumerate(names)}
    return mechanism.randomize(columns, len(picked), rng)


def picked_rows(table: Table, names: list[str], engine: Engine, rng: Randomness,
                percent: float | None, size: int | None, m: int | None
                ) -> list[tuple[Any, ...]] | None:
    """The true rows a release randomizes, the ``names`` columns: every bounded row
    (``percent`` or ``size`` of them) in a uniformly random order when ``m`` is None, else m
    uniform draws with replacement from the bounded rows, in draw order (None when there is
    no bounded row to draw from). The draws come from the kept counts of a fixed table
    (:func:`_drawn`), else from :func:`selection` and :func:`_draws`: the same
    distribution (module docstring, "Time")."""
    if m and _keeps_counts(table, engine):
        return _drawn(table, names, engine, rng, m)
    tree = selection(table, names, engine.schema.get(table.name.lower(), {}), percent,
                     size if m is None else m, m is not None)
    _, rows = engine.execute(tree.sql(dialect=engine.dialect), [rng.salt()])
    if m is None:
        return [r[:len(names)] for r in rows]
    if not rows:
        return None
    return [rows[i][:len(names)] for i in _draws(int(rows[0][-1]), m, rng)]


def _read_names(table: Table, mechanism: RowMechanism) -> list[str]:
    """The columns read: only what is released (a withheld column never leaves the engine),
    and the unit, to bound and to drop rows of no unit."""
    names = [m.name for m in mechanism.released]
    if table.privacy_unit is not None and table.privacy_unit not in names:
        names.append(table.privacy_unit)
    return names


def selection(table: Table, names: list[str], stored: Mapping[str, str],
              percent: float | None, limit: int | None, counted: bool) -> exp.Select:
    """The engine query that bounds and selects the released rows (its parameter is the
    secret salt, from the CSPRNG), the ``names`` columns then ``__u``, in ``__u`` order.

    **What it selects** (the definition; the privacy argument is :mod:`dpsql.privacy.local`'s):

    * **Bounding**, as the central path bounds (:mod:`dpsql.execution.rewrite`): rows of a
      NULL (or NaN) unit dropped, in a ``one_row_per_unit`` table too; each unit's rows ranked
      ``r`` = 1, 2, ... in the order of the salted hash of the unit and the row's values,
      ``r <= k`` kept: a uniformly random k of the unit's rows (identical rows tie, and which
      of two identical rows is kept changes nothing). Without bounding, the "unit" is the
      row's values and ``r`` numbers identical rows, so that every row has a key of its own.
    * **Order.** ``__u``, the salted hash of the row's key (its unit or values, and ``r``),
      is a secret uniform 64-bit word per row, independent between rows: ordering by it is a
      uniform random order (ties, of probability below n^2 / 2^65, broken arbitrarily). The
      hash's inputs start with a tag (0: ranking, 1: order), so no ranking input is an order
      input.
    * **Selection.** ``percent``: each row kept when ``__u / 2^64 < p / 100``, independently;
      ``limit``: the first ``limit`` rows in the random order; ``counted``: each row also
      carries ``__n``, the number of bounded rows (for :func:`_draws`; it never leaves dpsql).

    **How the engine computes it**, without sorting any unit's rows (a sort of one person's
    300,000 rows was a timing channel on whether they exceed k): ``__u`` depends on the unit
    and ``r`` only, and the unit keeps ``r = 1 .. min(rows, k)``, so

    1. ``__c``: each unit's number of kept rows, ``min(rows, k)`` (a hash aggregate);
    2. ``__p``: the positions ``(unit, r)`` for ``r`` in ``1 .. __c`` with their ``__u``,
       selected (top ``limit`` by ``__u``, or ``__u`` under the percentage): the same
       positions the definition selects;
    3. ``__k``: for the units selected only, their values in rank order
       (:class:`~dpsql.engines.ir.SmallestBy`, DuckDB's top-k aggregate, no sort), and the
       row at rank ``r`` read from them (a collision of two distinct rows' ranking hashes,
       probability below rows^2 / 2^65, may mix their columns: values of the same unit).

    Without bounding, a position's row is its key: step 3 is not needed."""
    unit = table.privacy_unit
    bounded = unit is not None and table.needs_bounding
    source = _source(table, names, stored)
    key = [unit] if bounded and unit is not None else names
    counts = _counts(table, key, source)
    if counted:
        counts = counts.select(exp.alias_(exp.Window(this=exp.Sum(this=_kept(table))), "__n"))
    extra = ["__u", "__n"] if counted else ["__u"]
    picked = _positions(key, percent, limit, extra)
    if not bounded or unit is None:  # a position's row is its key
        out = exp.select(*_columns(names, "__p"), *_columns(extra, "__p")).from_("__p")
        return out.order_by(exp.column("__u", "__p")).with_("__c", counts).with_(
            "__p", picked, materialized=True)
    others = [n for n in names if n != unit]
    lists = _ranked(table, names, source, exp.select(*_columns([unit])).from_("__p"))
    values = [exp.column(unit, "__p", quoted=True) if n == unit else exp.alias_(ir.Element(
        this=exp.column(f"__l{others.index(n)}", "__k"), expression=exp.column("__r", "__p")),
        n, quoted=True) for n in names]
    out = exp.select(*values, *_columns(extra, "__p")).from_("__p").join("__k", on=exp.EQ(
        this=exp.column(unit, "__p", quoted=True), expression=exp.column(unit, "__k",
                                                                         quoted=True)))
    return out.order_by(exp.column("__u", "__p")).with_("__c", counts).with_(
        "__p", picked, materialized=True).with_("__k", lists)


def _source(table: Table, names: list[str], stored: Mapping[str, str]) -> exp.Select:
    """The ``names`` columns of the table's rows, read as declared, rows of a NULL (or NaN)
    unit dropped."""
    unit = table.privacy_unit
    read = {n: table.columns[n].type for n in names}
    cols = [exp.column(n, quoted=True) for n in names]
    source = exp.select(*[c.copy() for c in cols]).from_(
        _sub(public_select(table.name, read, stored), "__s"))
    if unit is not None:
        u = exp.column(unit, quoted=True)
        kept: exp.Expression = exp.Not(this=exp.Is(this=u.copy(), expression=exp.Null()))
        if read[unit] == ColumnType.FLOAT:
            kept = exp.and_(kept, exp.Not(this=exp.IsNan(this=u.copy())))
        source = source.where(kept)
    return source


def _kept(table: Table) -> exp.Expression:
    """A group's kept rows: ``COUNT(*)``, at most k where the table is bounded."""
    rows: exp.Expression = exp.Count(this=exp.Star())
    if table.privacy_unit is not None and table.needs_bounding:
        rows = ir.least(rows, exp.Literal.number(table.max_rows_per_unit))
    return rows


def _counts(table: Table, key: list[str], source: exp.Select) -> exp.Select:
    """``key`` (the unit, or a row's values) and ``__c``, its kept rows, one row a key."""
    return exp.select(*_columns(key), exp.alias_(_kept(table), "__c")).from_(
        _sub(source.copy(), "__b")).group_by(*_columns(key))


def _ranked(table: Table, names: list[str], source: exp.Select, units: exp.Select
            ) -> exp.Select:
    """For the units ``units`` selects only, the unit and ``__l0``, ``__l1``, ...: the
    values of each other column of ``names``, its rows in the order of their ranking hash
    (tag 0, keyed by the salt), at least the first k (:class:`~dpsql.engines.ir.SmallestBy`:
    DuckDB's top-k aggregate, no sort)."""
    unit = table.privacy_unit
    assert unit is not None
    cols = [exp.column(n, quoted=True) for n in names]
    # The ranking hash once per row (not once per column's list).
    ranked = source.copy().select(
        exp.alias_(_hash(0, [exp.column(unit, quoted=True), *cols]), "__h"))
    others = [n for n in names if n != unit]
    return exp.select(*_columns([unit]), *[exp.alias_(ir.SmallestBy(
        this=exp.column(n, quoted=True), expression=exp.column("__h"),
        count=exp.Literal.number(table.max_rows_per_unit)), f"__l{i}")
        for i, n in enumerate(others)]).from_(_sub(ranked, "__b")).where(
        exp.column(unit, quoted=True).isin(query=units)).group_by(*_columns([unit]))


def _positions(key: list[str], percent: float | None, limit: int | None,
               extra: list[str]) -> exp.Select:
    """``__p``: the positions ``(key, __r)`` of ``__c``, ``__r`` in ``1 .. __c``, each with
    its order hash ``__u`` (and ``__n``), selected by ``percent`` or ``limit``
    (:func:`selection`)."""
    r = exp.column("__r", "__t")
    order = _hash(1, [*_columns(key, "__c"), r])
    series = exp.Table(this=exp.ExplodingGenerateSeries(
        start=exp.Literal.number(1), end=exp.column("__c", "__c")),
        alias=exp.TableAlias(this=exp.to_identifier("__t"), columns=[exp.to_identifier("__r")]))
    picked = exp.select(*_columns(key, "__c"), r, exp.alias_(order, "__u"),
                        *_columns(extra[1:], "__c")).from_("__c").join(
        series, join_type="CROSS")
    if percent is not None:  # the hash itself: PostgreSQL's WHERE reads no output name
        picked = picked.where(exp.LT(
            this=exp.Div(this=exp.cast(order.copy(), "DOUBLE"),
                         expression=exp.Literal.number(2**64)),
            expression=exp.Literal.number(percent / 100.0)))
    return picked.order_by(exp.column("__u")).limit(limit) if limit is not None else picked


def _columns(names: list[str], table: str | None = None) -> list[exp.Column]:
    """The columns ``names`` (of ``table``), quoted as the table's names are."""
    return [exp.column(n, table, quoted=True) for n in names]


def _hash(tag: int, parts: list[exp.Column]) -> exp.Expression:
    """The salted hash (:class:`~dpsql.engines.ir.SaltedHash`) of a tag and ``parts``: uniform
    over salts whichever input varies (each engine's spelling sees to it: DuckDB's hashes
    its ``hash``, whose last input is mixed in weakly)."""
    return ir.SaltedHash(expressions=[SALT.copy(), exp.Literal.number(tag),
                                      *(p.copy() for p in parts)])


def _sub(select: exp.Select, name: str) -> exp.Subquery:
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(name)))


def _draws(n: int, m: int, rng: Randomness) -> npt.NDArray[np.int64]:
    """m uniform draws with replacement from n rows, as positions among the first
    min(m, n) rows of a uniformly random order of the n (what :func:`selection` returns).

    Exact: m CSPRNG draws in [0, n) (:func:`~dpsql.privacy.local.uniform_integers`), each
    value renamed by the order of its first appearance (0, 1, ...). Which draws coincide
    depends on n and m only, and for i.i.d. uniform draws the distinct rows, in the order of
    their first appearance, are a uniformly random ordered sample without replacement: the
    first rows of a uniformly random order of the table, which is what the engine returns."""
    index = uniform_integers(n, m, rng)
    _, first, inverse = np.unique(index, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.reshape(-1)]


# --- the kept counts of a fixed table ---------------------------------------------------------

#: The declared types of a unit whose values go back to the engine as a list parameter as
#: they came (a date or timestamp would come back as NumPy's datetime64).
_KEPT_UNIT_TYPES = frozenset({ColumnType.INT, ColumnType.FLOAT, ColumnType.TEXT})


@dataclass(frozen=True)
class KeptCounts:
    """The positions ``(unit, r)`` of a bounded table: unit ``units[i]`` holds ``min(rows,
    k)`` of them, numbered ``starts[i]`` to ``starts[i + 1] - 1`` (``starts[0] = 0``, the last
    the number N of bounded rows), the units in the engine's order. Memory: 8 bytes a unit
    for ``starts``, and the units: 8 bytes a unit more for an int or float unit; for a text
    unit, an 8-byte pointer and its Python string (49 bytes + its length, if ASCII)."""

    units: npt.NDArray[Any]
    starts: npt.NDArray[np.int64]

    @property
    def total(self) -> int:
        """N, the number of bounded rows."""
        return int(self.starts[-1])

    def draw(self, m: int, rng: Randomness
             ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """m positions uniform among the N, independently (with replacement): each one's
        unit (its index in ``units``) and rank r (from 1)."""
        at = uniform_integers(self.total, m, rng)
        unit = np.searchsorted(self.starts, at, side="right") - 1
        return unit, at - self.starts[unit] + 1


# Per engine (gone with it), per table, unit, the unit's declared type and k: its kept counts.
_by_engine: weakref.WeakKeyDictionary[Engine, dict[tuple[str, str, str, int], KeptCounts]] = \
    weakref.WeakKeyDictionary()
_kept_lock = threading.Lock()


def _keeps_counts(table: Table, engine: Engine) -> bool:
    """Whether draws from ``table`` are made from its kept counts (module docstring,
    "Time"): a bounded table that the engine holds fixed, of a unit type that round-trips."""
    unit = table.privacy_unit
    return unit is not None and table.needs_bounding and \
        table.columns[unit].type in _KEPT_UNIT_TYPES and engine.fixed(table.name)


def kept_counts(table: Table, engine: Engine) -> KeptCounts:
    """The kept counts of a fixed, bounded ``table``: computed by the engine on first use (one
    hash aggregate over every row, as :func:`selection`'s step 1), then kept for the engine's
    life: they do not depend on the salt, and the engine's data cannot change
    (:meth:`~dpsql.engines.Engine.fixed`)."""
    unit = table.privacy_unit
    assert unit is not None
    key = (table.name.lower(), unit, str(table.columns[unit].type), table.max_rows_per_unit)
    with _kept_lock:
        found = _by_engine.get(engine, {}).get(key)
    if found is not None:
        return found
    source = _source(table, [unit], engine.schema.get(table.name.lower(), {}))
    units, counts = engine.execute_arrays(
        _counts(table, [unit], source).sql(dialect=engine.dialect)).values()
    starts = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(np.asarray(counts, dtype=np.int64), out=starts[1:])
    kept = KeptCounts(np.asarray(units), starts)
    with _kept_lock:
        _by_engine.setdefault(engine, {})[key] = kept
    return kept


def forget_kept_counts(engine: Engine) -> None:
    """Drop the kept counts of ``engine`` (tests: a first read, as a fresh engine's)."""
    with _kept_lock:
        _by_engine.pop(engine, None)


def _drawn(table: Table, names: list[str], engine: Engine, rng: Randomness, m: int
           ) -> list[tuple[Any, ...]] | None:
    """m uniform draws with replacement from the bounded rows of a fixed table, the ``names``
    columns, in draw order; None when it has no bounded row. The positions come from the
    kept counts and the CSPRNG; the engine ranks the rows of the drawn units only by a fresh
    salted hash (:func:`_ranked`), and position (unit, r) is the unit's row of rank r."""
    counts = kept_counts(table, engine)
    if counts.total == 0:
        return None
    index, rank = counts.draw(m, rng)
    drawn = np.unique(index)
    value = dict(zip(drawn.tolist(), counts.units[drawn].tolist(), strict=True))
    unit = table.privacy_unit
    assert unit is not None
    units = exp.select(exp.Unnest(expressions=[exp.Placeholder(this="2")]))
    sql = _ranked(table, names, _source(table, names, engine.schema.get(
        table.name.lower(), {})), units).sql(dialect=engine.dialect)
    _, rows = engine.execute(sql, [rng.salt(), list(value.values())])
    lists: dict[Any, tuple[Any, ...]] = {row[0]: row[1:] for row in rows}
    others = [n for n in names if n != unit]
    picked = []
    for i, r in zip(index.tolist(), rank.tolist(), strict=True):
        u = value[i]
        found = lists.get(u)
        if found is None or any(len(values) < r for values in found):
            # Impossible while the engine's data is fixed (Engine.fixed): a bug, never data.
            forget_kept_counts(engine)
            raise EngineError(f"the rows of {table.name} changed while the database was open "
                              "(a dpsql bug: the table was taken as fixed)")
        picked.append(tuple(u if n == unit else found[others.index(n)][r - 1]
                            for n in names))
    return picked


def run_over(read: LocalRead, rows: dict[str, npt.NDArray[np.object_]], epsilon: float,
             notes: list[str]) -> Result:
    """The analyst's query over the randomized rows only, in a locked scratch DuckDB (one
    thread: a LIMIT without ORDER BY keeps the rows' random order), labelled as randomized,
    ``epsilon`` what the rows cost and ``notes`` the charge."""
    table = read.table

    def fill(con: duckdb.DuckDBPyConnection) -> None:
        con.register("__released", rows)
        casts = ", ".join(f"CAST({_name(n)} AS {ENGINE_TYPES[c.type]}) AS {_name(n)}"
                          for n, c in table.columns.items())
        con.execute(f"CREATE TABLE {_name(table.name)} AS SELECT {casts} FROM __released")
        con.unregister("__released")

    try:
        con = locked.in_memory(fill, memory_limit=_MEMORY_LIMIT, threads=1)
    except duckdb.Error as e:
        raise EngineError(f"loading the randomized rows failed: {e}") from None
    try:
        out = con.execute(read.sql).fetchall()
    except duckdb.InterruptException:
        raise EngineError("interrupted", interrupted=True) from None
    except duckdb.Error as e:  # randomized rows only: the message may be shown as it is
        raise DataError(f"the query over the randomized rows failed: "
                        f"{str(e).splitlines()[0]}") from None
    finally:
        con.close()
    width = len(read.columns)
    return Result(list(read.columns), out, [(None,) * width for _ in out], epsilon=epsilon,
                  notes=notes, local_label=read.label())


def _name(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


#: The key of the release parameters in a local release's Parquet metadata.
PARQUET_KEY = "dpsql.local"


def write_release(result: Result, read: LocalRead, path: Path) -> None:
    """Write the released columns of ``result`` (the randomized rows of ``SELECT *``) to the
    Parquet file ``path``, the release parameters (:meth:`~dpsql.privacy.local.RowMechanism.
    params`) as JSON under :data:`PARQUET_KEY` in its key-value metadata."""
    names = [c.name for c in result.columns]
    released = [m.name for m in read.rows.released]
    data = {n: np.array([row[names.index(n)] for row in result.rows], dtype=object)
            for n in released}
    # The file says what its rows are, as every door does (the label), for whoever opens it.
    meta = json.dumps({**read.rows.params(read.epsilon), "randomized": read.label()}
                      ).replace("'", "''")
    target = str(path).replace("'", "''")
    casts = ", ".join(f"CAST({_name(n)} AS {ENGINE_TYPES[read.table.columns[n].type]}) AS "
                      f"{_name(n)}" for n in released)

    def fill(con: duckdb.DuckDBPyConnection) -> None:  # the owner's file, before the lock
        con.register("__released", data)
        con.execute(f"COPY (SELECT {casts} FROM __released) TO '{target}' (FORMAT PARQUET, "
                    f"KV_METADATA {{'{PARQUET_KEY}': '{meta}'}})")

    try:
        locked.in_memory(fill, memory_limit=_MEMORY_LIMIT, threads=1).close()
    except duckdb.Error as e:
        raise DataError(f"writing the local release to {path} failed: "
                        f"{str(e).splitlines()[0]}") from None


def read_release_params(path: str | Path) -> dict[str, Any]:
    """The release parameters a local release's Parquet file carries (:func:`write_release`)."""
    target = str(path).replace("'", "''")
    found: list[tuple[Any, ...]] = []

    def fill(con: duckdb.DuckDBPyConnection) -> None:
        found.extend(con.execute(f"SELECT key, value FROM parquet_kv_metadata('{target}')")
                     .fetchall())

    try:
        locked.in_memory(fill, threads=1).close()
    except duckdb.Error as e:
        raise DataError(f"cannot read {path}: {str(e).splitlines()[0]}") from None
    for key, value in found:
        if bytes(key).decode() == PARQUET_KEY:
            return json.loads(bytes(value).decode())  # type: ignore[no-any-return]
    raise DataError(f"{path} is not a dpsql local release (no {PARQUET_KEY} metadata)")
