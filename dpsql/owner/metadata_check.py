"""``dpsql metadata check``: what the declared contribution bounds and column bounds drop.

This is the data owner's tool, and it reads the data exactly: the owner may, and the numbers it
prints are for choosing public policy (k, g, bounds), never for release to an analyst.

**What bounding keeps.** A table that needs bounding keeps at most k rows per unit
(``max_rows_per_unit``) and, with GROUP BY, at most g groups per unit (``max_groups_per_unit``),
each a random sample (:mod:`dpsql.execution.rewrite`); rows whose unit is NULL are dropped from
every query. For a unit with ``n`` rows spread over ``d`` groups of a key, the rows a query keeps
are, in expectation over the sample, at most ``min(k, n * min(1, g / d))`` (g of its d groups,
each equally likely, then k of their rows): that is the figure reported for a key, the whole
table's being the exact ``min(k, n)``. A unit is *kept whole* when ``n <= k`` and ``d <= g``.

**What a suggestion costs.** A larger k means a larger sensitivity: ``COUNT(*)`` with k rows per
unit has L1 sensitivity k, so its 95% interval at epsilon is that of discrete Laplace noise of
scale ``k / epsilon`` (:func:`dpsql.privacy.mechanisms.accuracy`); the suggestion prints it, the
noise a COUNT would carry. The smallest k (g) keeping ``target`` of the rows is suggested.

**An automatic k.** A table declaring ``max_rows_per_unit = { auto = true, max = N, share =
s }`` (:mod:`dpsql.metadata.auto`) has no one k: each query draws its own in ``[1, N]`` from the
data, for ``s`` of its epsilon, and its measurements get the rest
(:mod:`dpsql.privacy.auto_bounds`). The report then says so, shows what the cap ``N`` keeps (no
query keeps more) and the noise of a COUNT at the cap on the measurements' epsilon, and, for
the units' numbers of rows, the smallest k keeping each of a few shares of the rows: where a
drawn k falls, and what it drops.

**Clamping.** Every value of a bounded column is clamped into ``[lower, upper]`` before it enters
an aggregate; the report counts the non-NULL values outside.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from sqlglot import exp

from dpsql.engines import Engine
from dpsql.metadata.auto import AutoBound
from dpsql.metadata.metadata import ColumnType, Metadata, Table
from dpsql.privacy.mechanisms import accuracy, calibrate_laplace
from dpsql.texttable import format_table

#: The default share of rows the suggested k and g keep.
DEFAULT_TARGET = 0.95

#: The shares of rows whose smallest k the report of an automatic k lists (with the target).
AUTO_SHARES = (0.5, 0.9, 0.99, 1.0)

#: A histogram of units: (rows n, groups d) -> how many units have them.
Histogram = Mapping[tuple[int, int], int]


@dataclass(frozen=True)
class Kept:
    """What bounds (k, g) keep of a table, or of its rows grouped by one key."""

    key: str | None  # None: whole-table aggregates
    rows: int  # rows with a unit (NULL units are always dropped)
    rows_kept: float  # exact without a key, expected over the random sample with one
    units: int
    units_whole: int  # units with n <= k (and d <= g): nothing of theirs is dropped

    @property
    def share(self) -> float:
        return self.rows_kept / self.rows if self.rows else 1.0


@dataclass(frozen=True)
class Suggestion:
    """The smallest bound keeping ``target`` of the rows, and the noise it adds to a COUNT."""

    name: str  # "max_rows_per_unit" or "max_groups_per_unit"
    value: int
    kept: float  # the share of rows it keeps
    count_accuracy: float  # 95% half-width of a COUNT(*) at the report's epsilon


@dataclass(frozen=True)
class Clamped:
    column: str
    lower: object
    upper: object
    outside: int  # non-NULL values below lower or above upper
    values: int  # non-NULL values


@dataclass(frozen=True)
class TableCheck:
    table: str
    k: int
    g: int
    null_unit_rows: int
    kept: tuple[Kept, ...]  # the whole table first, then one per public key
    suggestions: tuple[Suggestion, ...]
    clamped: tuple[Clamped, ...]
    auto: AutoBound | None = None  # k chosen per query from the data, at most k (its cap)
    # With ``auto``: (share of rows, the smallest k keeping it, the units with more rows than
    # that k), for AUTO_SHARES and the target
    rows_quantiles: tuple[tuple[float, int, int], ...] = ()


def kept(histogram: Histogram, k: int, g: int, key: str | None) -> Kept:
    """What (k, g) keep of units distributed as ``histogram`` (module docstring)."""
    rows = sum(n * c for (n, _), c in histogram.items())
    rows_kept = sum(c * min(float(k), n * min(1.0, g / d)) for (n, d), c in histogram.items())
    whole = sum(c for (n, d), c in histogram.items() if n <= k and d <= g)
    return Kept(key, rows, rows_kept, sum(histogram.values()), whole)


def count_accuracy(k: int, epsilon: float) -> float:
    """The 95% half-width of ``COUNT(*)`` at ``epsilon`` with k rows per unit (L1 = k)."""
    return accuracy(calibrate_laplace(float(k), epsilon, True))


def suggest(histograms: Sequence[Histogram], target: float, epsilon: float,
            cap: int | None = None) -> tuple[Suggestion, Suggestion | None]:
    """The smallest k keeping ``target`` of the rows of the whole table (the first histogram),
    and, when keys were checked, the smallest g keeping ``target`` of the rows that k keeps
    under every key (never above k: a unit reaches at most k groups). ``cap``: k's largest
    value (an automatic k's max), when k may not exceed it."""
    whole = histograms[0]
    k = smallest_k(whole, target)
    k = k if cap is None else min(k, cap)
    k_suggestion = Suggestion("max_rows_per_unit", k, kept(whole, k, 1, None).share,
                              count_accuracy(k, epsilon))
    by_key = histograms[1:]
    if not by_key:
        return k_suggestion, None

    g = _groups(by_key, k, target)
    worst = min(kept(h, k, g, "").share for h in by_key)
    return k_suggestion, Suggestion("max_groups_per_unit", g, worst, count_accuracy(k, epsilon))


def _smallest(ok: object, top: int) -> int:
    """The smallest v in 1..top with ok(v) (ok is monotone), else top."""
    assert callable(ok)
    lo, hi = 1, max(top, 1)
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def check_table(engine: Engine, metadata: Metadata, table: Table,
                target: float = DEFAULT_TARGET, epsilon: float = 1.0) -> TableCheck | None:
    """The owner's report on one table (None for a table that is never bounded: public, or one
    row per unit)."""
    if not (table.needs_bounding or table.unit_path is not None):
        return None
    source, unit = _rows(metadata, table)
    keys = public_keys(table)
    histograms = [_histogram(engine, source, unit, None)]
    histograms += [_histogram(engine, source, unit, expr) for expr in keys.values()]
    k, g = table.max_rows_per_unit, table.max_groups_per_unit
    reports = [kept(histograms[0], k, g, None)]
    reports += [kept(h, k, g, name) for name, h in zip(keys, histograms[1:], strict=True)]
    auto = table.rows_auto
    # what a query's measurements spend (an automatic k spends its share choosing k)
    k_s, g_s = suggest(histograms, target, measured_epsilon(auto, epsilon),
                       None if auto is None else auto.cap)
    nulls = _scalar(engine, exp.select(_func("COUNT", exp.Star())).from_(source.copy())
                    .where(unit.copy().is_(exp.null())))
    quantiles = () if auto is None else tuple(
        (share, v, sum(c for (n, _), c in histograms[0].items() if n > v))
        for share, v in ((x, smallest_k(histograms[0], x))
                         for x in sorted({*AUTO_SHARES, target})))
    return TableCheck(table.name, k, g, nulls, tuple(reports),
                      tuple(s for s in (k_s, g_s) if s is not None),
                      clamped(engine, table), auto, quantiles)


def smallest_k(histogram: Histogram, share: float) -> int:
    """The smallest k keeping ``share`` of the rows of the units in ``histogram``."""
    return _smallest(lambda v: kept(histogram, v, 1, None).share >= share,
                     max((n for n, _ in histogram), default=1))


def public_keys(table: Table) -> dict[str, exp.Expression]:
    """Each column with a public domain as a GROUP BY key; a date column with a public range
    also by month (its days are keys too, but a month is the grain analysts group by)."""
    keys: dict[str, exp.Expression] = {}
    for column in table.columns.values():
        if column.name == table.privacy_unit or column.name in table.unit_columns:
            continue
        if column.type == ColumnType.DATE and column.public_range:
            keys[f"DATE_TRUNC('month', {column.name})"] = _func(
                "DATE_TRUNC", exp.Literal.string("month"), _col(column.name))
        elif column.domain is not None:
            keys[column.name] = _col(column.name)
    return keys


def clamped(engine: Engine, table: Table) -> tuple[Clamped, ...]:
    """How many values of each bounded column fall outside its declared bounds."""
    bounded = [c for c in table.columns.values() if c.lower is not None and c.upper is not None]
    if not bounded:
        return ()
    parts: list[exp.Expression] = []
    for c in bounded:
        lo, hi = (_literal(v, c.type) for v in (c.lower, c.upper))
        outside = exp.or_(exp.LT(this=_col(c.name), expression=lo),
                          exp.GT(this=_col(c.name), expression=hi))
        parts.append(_func("SUM", exp.Case(ifs=[exp.If(this=outside,
                                                             true=exp.Literal.number(1))],
                                              default=exp.Literal.number(0))))
        parts.append(_func("COUNT", _col(c.name)))
    row = _first(engine, exp.select(*parts).from_(_table(table.name)))
    return tuple(Clamped(c.name, c.lower, c.upper, _int(row[2 * i]), _int(row[2 * i + 1]))
                 for i, c in enumerate(bounded))


def _rows(metadata: Metadata, table: Table) -> tuple[exp.Expression, exp.Column]:
    """The table's rows with their unit: a unit_path table joined to its target's unit."""
    if table.unit_path is None:
        return _table(table.name), exp.column(_ident(table.privacy_unit or ""))
    column, target_name, target_column = table.unit_path
    target = metadata.table(target_name)
    assert target is not None and target.privacy_unit is not None  # validated at load
    joined = exp.select("t.*", exp.column(_ident(target.privacy_unit), table="u").as_("__unit")
                        ).from_(_table(table.name).as_("t")).join(
        _table(target.name).as_("u"),
        on=exp.EQ(this=exp.column(_ident(column), table="t"),
                  expression=exp.column(_ident(target_column), table="u")), join_type="LEFT")
    return joined.subquery("__j"), exp.column("__unit")


def _histogram(engine: Engine, source: exp.Expression, unit: exp.Column,
               key: exp.Expression | None) -> dict[tuple[int, int], int]:
    """(rows, groups) per unit -> units (NULL units left out: they are always dropped)."""
    groups: exp.Expression = exp.Literal.number(1)
    if key is not None:  # NULL is a group of its own
        null_group = _func("MAX", exp.Case(ifs=[exp.If(this=key.copy().is_(exp.null()),
                                                            true=exp.Literal.number(1))],
                                              default=exp.Literal.number(0)))
        groups = exp.Add(this=exp.Count(this=exp.Distinct(expressions=[key.copy()])),
                         expression=null_group)
    per_unit = (exp.select(_func("COUNT", exp.Star()).as_("n"), groups.as_("d"))
                .from_(source.copy()).where(unit.copy().is_(exp.null()).not_())
                .group_by(unit.copy()))
    query = (exp.select("n", "d", _func("COUNT", exp.Star())).from_(per_unit.subquery("__u"))
             .group_by("n", "d"))
    _, rows = engine.execute(query.sql(dialect=engine.dialect))
    return {(_int(n), _int(d)): _int(c) for n, d, c in rows}


def _scalar(engine: Engine, query: exp.Select) -> int:
    return _int(_first(engine, query)[0])


def _int(value: object) -> int:
    """An engine's integer (NULL for an empty SUM: 0)."""
    return int(value) if isinstance(value, (int, float)) else 0


def _first(engine: Engine, query: exp.Select) -> tuple[object, ...]:
    return engine.execute(query.sql(dialect=engine.dialect))[1][0]


def _ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _table(name: str) -> exp.Table:
    return exp.Table(this=_ident(name))


def _func(name: str, *args: exp.Expression) -> exp.Expression:
    return cast(exp.Expression, exp.func(name, *args))  # a Func, which mypy sees apart


def _col(name: str) -> exp.Column:
    return exp.column(_ident(name))


def _literal(value: object, ctype: ColumnType) -> exp.Expression:
    if ctype in (ColumnType.DATE, ColumnType.TIMESTAMP):
        kind = "DATE" if ctype == ColumnType.DATE else "TIMESTAMP"
        return exp.cast(exp.Literal.string(str(value)), kind)
    return exp.Literal.number(value)


def check_metadata_bounds(engine: Engine, metadata: Metadata, target: float = DEFAULT_TARGET,
                          epsilon: float = 1.0) -> list[TableCheck]:
    """:func:`check_table` for every declared table that is bounded, in declaration order."""
    if not 0.0 < target <= 1.0:
        raise ValueError(f"the target share of rows must be in (0, 1], got {target!r}")
    checks = [check_table(engine, metadata, t, target, epsilon) for t in metadata.tables.values()]
    return [c for c in checks if c is not None]


def report_text(checks: Sequence[TableCheck], target: float, epsilon: float) -> str:
    """The owner's report as text (``dpsql metadata check``)."""
    out: list[str] = []
    for c in checks:
        at = measured_epsilon(c.auto, epsilon)
        out.append(_heading(c))
        rows = [[r.key or "(whole table)", r.rows, round(r.rows_kept), f"{100 * r.share:.1f}%",
                 r.units, r.units_whole] for r in c.kept]
        out.append(format_table(["aggregates by", "rows", "rows kept", "kept", "units",
                                 "units kept whole"], rows))
        if c.null_unit_rows:
            out.append(f"{c.null_unit_rows} row(s) have a NULL unit: every query drops them")
        if c.auto is None:
            out.append(f"A COUNT(*) at epsilon {epsilon:g} with k = {c.k} is within "
                       f"+/-{count_accuracy(c.k, epsilon):g} (95%) of what bounding keeps.")
        else:
            out.extend(_auto_lines(c, epsilon))
        for s in c.suggestions:
            if c.auto is not None and s.name == "max_rows_per_unit":
                continue  # each query chooses its own k: _auto_lines lists the candidates
            what = "of rows" if s.name == "max_rows_per_unit" else "of rows under its worst key"
            out.append(f"suggested for {100 * target:g}% of rows: {s.name} = {s.value} (keeps "
                       f"{100 * s.kept:.1f}% {what}; a COUNT(*) at epsilon {at:g} then "
                       f"carries +/-{s.count_accuracy:g})")
        if c.clamped:
            out.append(format_table(
                ["column", "lower", "upper", "values outside (clamped)", "of values"],
                [[x.column, str(x.lower), str(x.upper), x.outside, x.values] for x in c.clamped]))
        out.append("")
    out.append("With GROUP BY the rows kept are expected values over the random sample of g "
               "groups then k rows per unit; bounds are public policy: choose them from "
               "these figures, never copy a data value into them.")
    return "\n".join(out) + "\n"


def measured_epsilon(auto: AutoBound | None, epsilon: float) -> float:
    """What a query at ``epsilon`` spends on its measurements: all of it, but the share an
    automatic k spends on its choice (:func:`dpsql.privacy.auto_bounds.planned`)."""
    return epsilon if auto is None else epsilon - epsilon * auto.share


def _heading(c: TableCheck) -> str:
    if c.auto is None:
        return f"table {c.table}: max_rows_per_unit k = {c.k}, max_groups_per_unit g = {c.g}"
    return (f"table {c.table}: max_rows_per_unit chosen by each query from the data, in "
            f"[1, {c.auto.cap}], for {100 * c.auto.share:g}% of its epsilon (auto); "
            f"max_groups_per_unit g = {c.g}. Kept at the cap k = {c.auto.cap} (no query's k "
            "keeps more):")


def _auto_lines(c: TableCheck, epsilon: float) -> list[str]:
    """An automatic k: the noise of a COUNT at the cap, and the smallest k keeping each share
    of the rows (with its COUNT's noise), where a query's drawn k falls."""
    assert c.auto is not None
    at = measured_epsilon(c.auto, epsilon)
    rows = [[f"{100 * share:g}%", f"{k} (above the cap)" if k > c.auto.cap else k, above,
             f"+/-{count_accuracy(min(k, c.auto.cap), at):g}"]
            for share, k, above in c.rows_quantiles]
    return [f"A COUNT(*) at epsilon {epsilon:g} ({at:g} for its measurements) is within "
            f"+/-{count_accuracy(c.auto.cap, at):g} (95%) at the cap, less at the k the data "
            "chooses. The smallest k keeping each share of the rows (the units' numbers of rows):",
            format_table(["rows kept", "smallest k", "units with more rows",
                          f"COUNT(*) at epsilon {at:g}"], rows),
            "A query draws its k near where about as many units have more rows as its noise "
            "is worth (dpsql explain shows that number): a larger epsilon or fewer released "
            "cells, a larger k."]


@dataclass(frozen=True)
class KChoice:
    """One k that ``dpsql metadata init --unit`` shows: what a ``COUNT(*)`` of the whole table
    would lose to bounding (its bias: the rows dropped, exact for the owner) and carry as noise
    (the 95% half-width at epsilon), and their sum, the error the recommendation minimises."""

    k: int
    kept: float  # the share of rows kept
    bias: float  # rows dropped: a COUNT(*) of the whole table is this much too low
    noise: float  # 95% half-width of that COUNT(*) at the epsilon shown

    @property
    def error(self) -> float:
        return self.bias + self.noise


def k_choices(histogram: Histogram, target: float, epsilon: float) -> list[KChoice]:
    """A few k (1, 2, 5, 10, 20, 50, ... up to the largest unit; the smallest k keeping
    ``target`` of the rows; the k keeping every row), each with its bias and noise."""
    most = max((n for n, _ in histogram), default=1)
    ks = {1, most, smallest_k(histogram, target)}
    step = 1
    while step < most:
        ks.update(v for v in (step, 2 * step, 5 * step) if v < most)
        step *= 10
    rows = sum(n * c for (n, _), c in histogram.items())
    out = []
    for k in sorted(ks):
        kept_k = kept(histogram, k, 1, None)
        out.append(KChoice(k, kept_k.share, rows - kept_k.rows_kept, count_accuracy(k, epsilon)))
    return out


def recommend(choices: Sequence[KChoice]) -> KChoice:
    """The k with the smallest bias + noise of a whole-table ``COUNT(*)`` (ties: the smaller
    k). A GROUP BY splits the bias among groups but not the noise, so a grouped query favours
    a k no larger than this one."""
    return min(choices, key=lambda c: (c.error, c.k))


def choices_text(table: str, choices: Sequence[KChoice], chosen: KChoice, target: float,
                 epsilon: float) -> str:
    """The table of k against rows kept, bias and noise, and why one was written."""
    rows = [[c.k, f"{c.kept:.1%}", round(c.bias), round(c.noise), round(c.error),
             "<- written" if c is chosen else ""] for c in choices]
    at_target = next((c for c in choices if c.kept >= target), choices[-1])
    return "\n".join([
        f"table {table}: k (max_rows_per_unit) against a COUNT(*) of the whole table at "
        f"epsilon {epsilon:g} (read exactly from your data; for you, not for release):",
        format_table(["k", "rows kept", "bias (rows dropped)", "noise (95%, +/-)",
                      "bias + noise", ""], rows),
        f"written: k = {chosen.k}, the smallest bias + noise; k = {at_target.k} would keep "
        f"{target:.0%} of the rows at +/-{at_target.noise:,.0f}. A larger epsilon per query "
        "favours a larger k (--epsilon); dpsql metadata check shows any k you choose.", ""])


@dataclass(frozen=True)
class Proposal:
    """What ``dpsql metadata init`` proposes for one table from its data (the owner's, read
    exactly): columns with no NULL, columns with no repeated value, and, given the unit, the k
    with the smallest bias + noise (:func:`recommend`, among :attr:`choices`) and the
    smallest g keeping ``target`` of the rows that k keeps (:func:`suggest`)."""

    not_null: frozenset[str]
    unique: frozenset[str]
    unit: str | None = None
    k: int | None = None
    g: int | None = None
    choices: tuple[KChoice, ...] = ()
    report: str = ""  # choices_text, for the owner's terminal


#: A column with at most this many distinct values is tried as a GROUP BY key for g.
KEY_CANDIDATE_VALUES = 50


def propose(engine: Engine, table: str, columns: Sequence[str], unit: str | None,
            target: float = DEFAULT_TARGET, epsilon: float = 1.0) -> Proposal:
    """:class:`Proposal` for ``table`` (its ``columns`` as the engine names them); ``unit`` is
    the privacy unit's column when the table has it, else no k and g are proposed. ``epsilon``:
    a query's, at which the noise of each k is shown."""
    parts: list[exp.Expression] = [_func("COUNT", exp.Star())]
    for c in columns:
        parts += [_func("COUNT", _col(c)), exp.Count(this=exp.Distinct(expressions=[_col(c)]))]
    row = _first(engine, exp.select(*parts).from_(_table(table)))
    total = _int(row[0])
    counts = {c: (_int(row[1 + 2 * i]), _int(row[2 + 2 * i])) for i, c in enumerate(columns)}
    not_null = frozenset(c for c, (n, _) in counts.items() if total and n == total)
    unique = frozenset(c for c, (n, d) in counts.items() if n and d == n)
    if unit is None or unit not in counts:
        return Proposal(not_null, unique)
    source, unit_col = _table(table), _col(unit)
    keys = [c for c, (_, d) in counts.items()
            if c != unit and c not in unique and 1 < d <= KEY_CANDIDATE_VALUES]
    histograms = [_histogram(engine, source, unit_col, None)]
    histograms += [_histogram(engine, source, unit_col, _col(c)) for c in keys]
    if not histograms[0]:  # no row with a unit: nothing to propose from
        return Proposal(not_null, unique, unit)
    choices = k_choices(histograms[0], target, epsilon)
    chosen = recommend(choices)
    g = _groups(histograms[1:], chosen.k, target)
    return Proposal(not_null, unique, unit, chosen.k, g, tuple(choices),
                    choices_text(table, choices, chosen, target, epsilon))


def _groups(by_key: Sequence[Histogram], k: int, target: float) -> int:
    """The smallest g keeping ``target`` of the rows k keeps under every key (1 without
    keys; never above k)."""
    if not by_key:
        return 1
    return _smallest(lambda g: all(kept(h, k, g, "").rows_kept >= target * kept(h, k, k, "")
                                   .rows_kept for h in by_key), k)
