"""An :class:`~dpsql.pipeline.Explanation` as text: what ``dpsql explain`` prints and what the
server's ``EXPLAIN`` returns (one line per row of its ``QUERY PLAN`` column), rendered here once.

It shows only what the plan fixes before any data is read: the rewritten SQL (its salt a
parameter, never a number), each cell's sensitivity, share of epsilon, mechanism, noise scale
and accuracy, the key release, the contribution bounds and the cost.
"""

from __future__ import annotations

from dpsql.bias import BOUNDS_NOTE
from dpsql.pipeline import Explanation
from dpsql.texttable import format_table

HEADER = ["cell", "measurement", "sensitivity", "epsilon", "mechanism", "noise scale",
          "95% accuracy"]


def render(e: Explanation) -> list[str]:
    """The lines of the explanation, without line ends."""
    rows = [[c.output, c.measurement, f"{c.sensitivity:g}", f"{c.epsilon:.4g}", c.mechanism,
             "-" if c.noise_scale is None else f"{c.noise_scale:.4g}",
             f"±{c.accuracy:.4g}" + (" ranks" if c.accuracy_unit == "rank" else "")]
            for c in e.cells]
    return ["Rewritten SQL:", *e.sql.splitlines(), "",
            *format_table(HEADER, rows).splitlines(), "",
            f"Key release: {e.key_release}",
            # The bounds, stated once: by the bias note where the table is bounded (it says
            # what they leave out), by this line otherwise (0 rows: a public read).
            *([_bounds(e)] if e.rows_per_unit and not _noted(e) else []),
            *e.notes,
            f"Privacy cost: epsilon={e.epsilon:g}, delta={e.delta:g} (epsilon is split "
            "across the measurements above by their part of the error)"]


def _noted(e: Explanation) -> bool:
    return any(note.startswith(BOUNDS_NOTE) for note in e.notes)


def _bounds(e: Explanation) -> str:
    if e.groups_capped:
        return (f"Contribution bounds: {e.rows_per_unit} row(s) per unit in at most "
                f"{e.groups_per_unit} group(s)")
    return (f"Contribution bounds: {e.rows_per_unit} row(s) per unit in at most "
            f"{e.groups_per_unit} group(s) (its k rows over all its groups: no groups cap, "
            "which over these keys would not lower the noise)")
