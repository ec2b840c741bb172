"""What a plan's contribution bounds and clamping do to its answer, in words for the analyst.

The noise interval (``--accuracy``, EXPLAIN, the DB-API's ``accuracy``) covers the noise only.
Bounding and clamping change the exact answer itself, before any noise: a unit's rows beyond k
(``max_rows_per_unit``) and groups beyond g (``max_groups_per_unit``) do not count, and every
value entering a sum, an average or a quantile is clamped to its column's declared bounds.
These notes say so with the numbers in force, read from the plan alone (the bounds and bounds
in force are public: the metadata's, or the analyst's own per-query choice), so they release
nothing. How much is actually dropped is the owner's to see (``dpsql metadata check``).
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.privacy.aggregates import Cell
from dpsql.privacy.plan import AutoValue, Plan
from dpsql.query.dp_clause import counted_as_written

#: How the note on the bounds in force begins: EXPLAIN states the bounds once, in this note,
#: where there is one (:func:`dpsql.explanation.render.render`).
BOUNDS_NOTE = "Contribution bounds in force"

#: Aggregates whose argument is only counted, never clamped into a sum.
_COUNTED = ("count",)


def bounding_notes(p: Plan) -> list[str]:
    """One sentence on the contribution bounds in force, one on clamped columns (if any)."""
    notes = []
    table = p.table
    if table.needs_bounding:
        # Counts and sums over public keys weigh a unit's rows instead of sampling them
        # (dpsql.privacy.aggregates, "Bounding by weights").
        how = (f"each of the t rows of a unit with more counts as {table.rows_per_unit}/t of "
               "a row" if p.weight_bits else "a unit's other rows are left out at random")
        text = (f"{BOUNDS_NOTE}: each privacy unit counts with at most "
                f"{table.rows_per_unit} row(s) (max_rows_per_unit; {how})")
        if p.keys and p.group_cap is not None:
            text += (f" in at most {p.group_cap} group(s) (max_groups_per_unit; its "
                     "other groups are left out)")
        elif p.keys:  # dpsql.privacy.aggregates.groups_cap: the cap would not lower the noise
            text += " across all its groups (no groups cap over these keys)"
        notes.append(text + ". This bias is not in the +/- intervals, which cover the noise "
                     "only; larger bounds (SET dpsql.max_rows, or WITH DIFFERENTIAL_PRIVACY "
                     "OPTIONS(epsilon = ..., delta = ..., max_rows_contributed = ..., "
                     "max_groups_contributed = ...), within the owner's caps) mean less "
                     "bias and more noise.")
    if p.auto is not None:
        notes.append(auto_note(p))
    notes.extend(value_note(p, v) for v in p.values)
    notes.extend(per_unit_note(cell) for cell in p.cells
                 if cell.call.per_person or cell.call.per_group is not None)
    clamped = clamped_columns(p)
    if clamped:
        notes.append("Values are clamped to their declared bounds before they are aggregated: "
                     + ", ".join(clamped) + ".")
    return notes


def per_unit_note(cell: Cell) -> str:
    """Which bounds ZetaSQL's per-unit aggregate (BigQuery's clause) used, and what they
    clamp: each unit's own total or average in a group, not each row."""
    call = cell.call
    written = call.per_group is not None
    lo, hi = call.per_group if call.per_group is not None else (
        (cell.bound.lo, cell.bound.hi) if cell.bound is not None else (None, None))
    what = "average" if call.kind == "avg" else "total"
    source = ("contribution_bounds_per_group as written" if written else
              "no bounds written: the column's bounds (declared, or chosen from the data)")
    count = counted_as_written(call.arg) if call.kind == "sum" else None
    if count is not None:  # ZetaSQL's per-group COUNT (dpsql.query.dp_clause)
        return (f"{count} is the sum over privacy units of each unit's own count in its "
                f"group, clamped to [{lo:g}, {hi:g}] ({source}).")
    shown = f"{call.kind.upper()}({call.arg.sql(dialect='duckdb') if call.arg else '*'})"
    return (f"{shown} is the {'average' if what == 'average' else 'sum'} over privacy "
            f"units of each unit's own {what} in its group, clamped to [{lo:g}, {hi:g}] "
            f"({source}); a unit without a non-NULL value there counts for nothing.")


def auto_note(p: Plan) -> str:
    """What an automatic k costs and, after a run, which k the data chose (a DP release: the
    choice is part of the answer, :mod:`dpsql.privacy.auto_bounds`)."""
    auto = p.auto
    assert auto is not None
    cost = (f"{auto.share:.0%} of the query's epsilon (epsilon {auto.epsilon:.4g}) buys a "
            f"private choice of max_rows_per_unit in [1, {auto.cap}] from the units' numbers of "
            f"rows (aimed where about {auto.above} units have more rows); the measurements get "
            f"the rest (epsilon {auto.rest:.4g})")
    if auto.k is None:
        return (f"max_rows_per_unit is chosen from the data when the query runs: {cost}. "
                f"The noise shown is for k = {auto.cap}, its largest; the run's notes give the "
                "k chosen. Give k yourself (max_rows_contributed) to spend the whole epsilon on "
                "the measurements.")
    return f"max_rows_per_unit = {auto.k} was chosen from the data: {cost}."


def value_note(p: Plan, v: AutoValue) -> str:
    """What an automatic value bound costs and, after a run, the bound the data chose (a DP
    release, part of the answer: :mod:`dpsql.privacy.auto_values`)."""
    cap = v.upper if v.side == "upper" else v.lower
    beyond = "above" if v.side == "upper" else "below"
    cost = (f"{v.share:.0%} of the query's epsilon (epsilon {v.epsilon:.4g}) buys a private "
            f"choice of {v.column}'s {v.side} bound in [{v.lower:g}, {v.upper:g}] from each "
            f"unit's {'largest' if v.side == 'upper' else 'smallest'} value (aimed where about "
            f"{v.above} units have a value {beyond} it), for its SUM, AVG, VAR and STDDEV")
    if v.value is None:
        return (f"{v.column}'s {v.side} bound is chosen from the data when the query runs: "
                f"{cost}. The noise shown is for {v.side} = {cap:g}, the declared one; the "
                "run's notes give the bound chosen. Clamp the argument yourself (SUM(LEAST("
                "GREATEST(x, lo), hi))) to spend nothing on it.")
    return f"{v.column}'s {v.side} bound {v.value:g} was chosen from the data: {cost}."


def clamped_columns(p: Plan) -> list[str]:
    """``name to [lower, upper]`` for each bounded column a non-count aggregate reads."""
    seen: dict[str, str] = {}
    for cell in p.cells:
        if cell.call.kind in _COUNTED or cell.call.arg is None:
            continue
        for node in cell.call.arg.find_all(exp.Column):
            column = p.table.column(node.name)
            if column is not None and column.lower is not None and column.upper is not None:
                seen.setdefault(column.name, f"{column.name} to [{column.lower}, "
                                             f"{column.upper}]")
    chosen = {v.column for v in p.values if v.value is not None}
    for name in chosen & seen.keys():  # its sums read the bounds chosen from the data
        lo, hi = (next((v.value for v in p.values if v.column == name and v.side == side),
                       None) for side in ("lower", "upper"))
        column = p.table.column(name)
        assert column is not None
        lo = column.lower if lo is None else lo
        hi = column.upper if hi is None else hi
        seen[name] += f" (for its SUM, AVG, VAR and STDDEV: [{lo:g}, {hi:g}], chosen from the data)"
    return list(seen.values())
