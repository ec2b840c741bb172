"""An :class:`~dpsql.explanation.explanation.Explanation` for analysts: what ``dpsql explain``
prints (as text, or as JSON with ``--format json``) and what the server's ``EXPLAIN`` returns (one
line per row of its ``QUERY PLAN`` column), rendered here once.

It shows only what the plan fixes before any data is read, in the order an analyst asks:
what the query costs; what each output's accuracy will be, in its column's own units (an
AVG's own ±, a quantile's in values: :mod:`dpsql.execution.expected`) and what its values are
clamped to; how groups are released; which contribution bounds apply and what they may drop
(:mod:`dpsql.explanation.bias`); then how the noise is drawn (each measurement's sensitivity,
share of epsilon, mechanism and scale). The engine SQL (its salt a parameter, never a number) only
when asked for (``--sql``; the server's EXPLAIN shows it).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from dpsql.execution.expected import READING
from dpsql.explanation.bias import BOUNDS_NOTE
from dpsql.explanation.explanation import Explanation
from dpsql.texttable import format_table

HEADER = ["cell", "measurement", "sensitivity", "epsilon", "mechanism", "noise scale",
          "95% accuracy"]
ACCURACY_HEADER = ["aggregate", "values clamped to", "95% accuracy (in the column's units)"]


def render(e: Explanation, sql: bool = False) -> list[str]:
    """The lines of the explanation, without line ends; the engine SQL last, with ``sql``."""
    lines = [f"Privacy cost: epsilon={e.epsilon:g}, delta={e.delta:g} (charged when the query "
             "runs; explaining it is free)"]
    if e.outputs:
        rows = [[o.output, "-" if o.bounds is None else f"[{o.bounds[0]:g}, {o.bounds[1]:g}]",
                 o.text()] for o in e.outputs]
        lines += ["", "Accuracy:", *format_table(ACCURACY_HEADER, rows).splitlines()]
        if any(o.fixed is None for o in e.outputs):
            lines.append(READING)
    lines += ["", f"Key release: {e.key_release}",
              # The bounds, stated once: by the bias note where the table is bounded (it says
              # what they leave out), by this line otherwise (0 rows: a public read).
              *([_bounds(e)] if e.rows_per_unit and not _noted(e) else []),
              *e.notes]
    if e.cells:
        rows = [[c.output, c.measurement, f"{c.sensitivity:g}", f"{c.epsilon:.4g}",
                 c.mechanism, "-" if c.noise_scale is None else f"{c.noise_scale:.4g}",
                 f"±{c.accuracy:.4g}" + (" ranks" if c.accuracy_unit == "rank" else "")]
                for c in e.cells]
        lines += ["", "How the noise is drawn (epsilon is split across the measurements by "
                  "their part of the error):", *format_table(HEADER, rows).splitlines()]
    if sql:
        lines += ["", "Rewritten SQL:", *e.sql.splitlines()]
    return lines


def as_json(e: Explanation, sql: bool = False) -> dict[str, Any]:
    """The explanation as a JSON object: the same parts as :func:`render`, in the same order
    (``sql`` only when asked for)."""
    out: dict[str, Any] = {
        "cost": {"epsilon": e.epsilon, "delta": e.delta},
        "accuracy": [o.as_json() for o in e.outputs],
        "key_release": e.key_release,
        "contribution_bounds": {"rows_per_unit": e.rows_per_unit,
                                "groups_per_unit": e.groups_per_unit,
                                "groups_capped": e.groups_capped} if e.rows_per_unit else None,
        "notes": list(e.notes),
        "measurements": [asdict(c) for c in e.cells],
    }
    if sql:
        out["sql"] = e.sql
    return out


def _noted(e: Explanation) -> bool:
    return any(note.startswith(BOUNDS_NOTE) for note in e.notes)


def _bounds(e: Explanation) -> str:
    if e.groups_capped:
        return (f"Contribution bounds: {e.rows_per_unit} row(s) per unit in at most "
                f"{e.groups_per_unit} group(s)")
    return (f"Contribution bounds: {e.rows_per_unit} row(s) per unit in at most "
            f"{e.groups_per_unit} group(s) (its k rows over all its groups: no groups cap, "
            "which over these keys would not lower the noise)")
