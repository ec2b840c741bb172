"""Per-query contribution bounds: the analyst's choice of k and g, within the owner's caps.

The metadata declares, per table, the default k (``max_rows_per_unit``) and g
(``max_groups_per_unit``) and, optionally, the largest values an analyst may ask for
(``max_rows_per_unit_cap``, ``max_groups_per_unit_cap``; without them the defaults are the caps,
so an analyst may only lower them). A query may ask for other bounds -- BigQuery's
``WITH DIFFERENTIAL_PRIVACY OPTIONS(max_rows_contributed = k, max_groups_contributed = g)``,
the server's ``SET dpsql.max_rows`` / ``SET dpsql.max_groups``, the DB-API's and the CLI's
arguments -- and :func:`in_force` makes the table the query is planned on carry them. That
table is then the one object every later pass reads k and g from: the sensitivities of
:mod:`dpsql.privacy.aggregates` (``k * b`` for a sum, ``g' = min(g, k)`` units), the threshold
tau of :mod:`dpsql.privacy.thresholds` and the bounding SQL of :mod:`dpsql.execution.rewrite`.

**Why any bound is private.** Every sensitivity is derived from the k and g in force and the
bounding SQL enforces that same k and g, so the privacy argument holds for any k, g >= 1:
larger bounds mean more noise (and less bias), never more privacy loss. The bounds are chosen
before the query runs, from the analyst's text and settings alone (no data), and they are in
the plan cache's key. The cap is the owner's policy on that trade (and on the work one unit
can cost a query), enforced here: a request above it is refused, naming it.

Tables that are never bounded (one row per unit, or no privacy unit) keep their k = g = 1:
a request does not apply to them. A request applies to each bounded table the query reads
(:func:`requested`, before binding), so a joined relation's k and g are the products of the
requested ones as they are of the declared ones (:mod:`dpsql.query.joins`, which refuses a
product above its limit: a join refused with the declared bounds may be accepted with lower
ones); each table read is checked against its own caps (:func:`check_caps`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dpsql.errors import BoundsAboveCap, UnsupportedQuery
from dpsql.metadata.metadata import Table


@dataclass(frozen=True)
class ContributionBounds:
    """What one query asks for; None: the metadata's default. ``unit_column`` is BigQuery's
    ``privacy_unit_column``: dpsql's unit is the owner's, so it must name it.
    ``per_group_clamps``: the per-row form of VAR, STDDEV and PERCENTILE_CONT given per-group
    bounds (:mod:`dpsql.query.dp_clause`), accepted only where it is BigQuery's answer
    (:func:`check_per_group`)."""

    max_rows: int | None = None
    max_groups: int | None = None
    unit_column: str | None = None
    per_group_clamps: tuple[str, ...] = ()
    #: ``max_groups`` is BigQuery's ``max_groups_contributed`` written in the clause: it
    #: always binds (each unit keeps at most that many of the query's groups), as in BigQuery
    groups_bound: bool = False

    def __post_init__(self) -> None:
        for name, value in (("max_rows", self.max_rows), ("max_groups", self.max_groups)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise BoundsAboveCap(f"{name} (rows or groups one privacy unit may "
                                     f"contribute) must be a whole number >= 1, not {value!r}")

    def merged(self, over: ContributionBounds | None) -> ContributionBounds:
        """These bounds with every value ``over`` sets taken from it (a query's own OPTIONS
        over a session's or a connection's settings)."""
        if over is None:
            return self
        return ContributionBounds(
            over.max_rows if over.max_rows is not None else self.max_rows,
            over.max_groups if over.max_groups is not None else self.max_groups,
            over.unit_column if over.unit_column is not None else self.unit_column,
            over.per_group_clamps or self.per_group_clamps,
            over.groups_bound if over.max_groups is not None else self.groups_bound)


def in_force(table: Table, bounds: ContributionBounds | None) -> Table:
    """``table`` with the bounds ``bounds`` asks for, checked against the owner's caps."""
    if bounds is None:
        return table
    check_caps(table, bounds)
    return requested(table, bounds)


def requested(table: Table, bounds: ContributionBounds) -> Table:
    """``table`` with the requested k and g, unchecked (:func:`check_caps` checks the tables
    a query reads); a table that is never bounded as it is."""
    if not (table.needs_bounding or table.unit_path is not None):
        return table
    # The analyst's own k overrides an automatic one (dpsql.metadata.auto): nothing to choose.
    return replace(table, max_rows_per_unit=bounds.max_rows or table.max_rows_per_unit,
                   max_groups_per_unit=bounds.max_groups or table.max_groups_per_unit,
                   rows_auto=None if bounds.max_rows else table.rows_auto)


def check_caps(table: Table, bounds: ContributionBounds) -> None:
    """Refuse bounds above ``table``'s caps (the declared table, as the owner wrote it)."""
    if not (table.needs_bounding or table.unit_path is not None):
        return
    _within(bounds.max_rows, table.rows_cap, "max_rows_per_unit", table)
    _within(bounds.max_groups, table.groups_cap, "max_groups_per_unit", table)


def check_unit(table: Table, bounds: ContributionBounds) -> None:
    """BigQuery's ``privacy_unit_column`` must name the unit of the table (or relation) read."""
    _check_unit(table, bounds.unit_column)


def check_per_group(table: Table, bounds: ContributionBounds) -> None:
    """BigQuery's ``contribution_bounds_per_group => (lo, hi)`` clamps a unit's total in a group
    (``k``: of the table or joined relation read, as bound). SUM's and AVG's are computed as
    ZetaSQL's (:mod:`dpsql.query.dp_clause`), never listed here. On VAR, STDDEV and
    PERCENTILE_CONT dpsql clamps each row instead: the same when a unit contributes one row
    (k = 1), where its total in its one group is that row; otherwise refused. COUNT's are
    ZetaSQL's too (each unit's count in a group, clamped: :mod:`dpsql.query.dp_clause`)."""
    k = table.rows_per_unit
    if bounds.per_group_clamps and k != 1:
        raise UnsupportedQuery(
            "contribution_bounds_per_group clamps each privacy unit's total in a group, which "
            f"dpsql computes only when a unit contributes one row (here up to {k}); write "
            f"{', '.join(bounds.per_group_clamps)} to clamp each row instead (the sum of a "
            "unit's rows is then bounded by max_rows_contributed times the bound), or ask "
            "for OPTIONS(max_rows_contributed = 1)")


def _within(asked: int | None, cap: int, name: str, table: Table) -> None:
    if asked is not None and asked > cap:
        raise BoundsAboveCap(
            f"{table.name}: {asked} is above the data owner's cap of {cap} on {name} (rows or "
            f"groups one privacy unit may contribute to a query); ask for at most {cap}, or "
            f"ask the owner to raise {name}_cap")


def _check_unit(table: Table, column: str | None) -> None:
    if column is None:
        return
    units = {table.privacy_unit, *table.unit_columns} - {None}
    short = {u.split(".")[-1].split("__")[-1] for u in units if u}
    if column.lower() not in units and column.lower().split(".")[-1] not in short:
        raise BoundsAboveCap(
            f"privacy_unit_column = {column} is not the privacy unit of {table.name} "
            f"({', '.join(sorted(short)) or 'none: each row is its own unit'}); the unit is "
            "the data owner's choice: name it, or leave privacy_unit_column out")
