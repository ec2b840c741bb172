"""A noisy answer as every door shows it: its typed columns, rows, accuracies and notes.

Apart from :mod:`dpsql.execution.postprocess`, which computes it, so that a stored answer can
be read back and shown (``dpsql query`` asked again, :mod:`dpsql.shortcut`) without importing
sqlglot, DuckDB or numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from dpsql.texttable import html_table

#: The engine's integer types (DuckDB's names): their cells' accuracies are whole numbers.
WHOLE_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                         "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"})


@dataclass(frozen=True)
class ResultColumn:
    name: str
    type: str  # the DuckDB type name: BIGINT, DOUBLE, VARCHAR, ...
    accuracy_unit: str | None = None  # "value", "rank", or None (not a direct noisy cell)


@dataclass
class Result:
    """A noisy answer: typed columns, rows, and each cell's 95% accuracy half-width (None for
    keys and for values computed from several cells)."""

    columns: list[ResultColumn]
    rows: list[tuple[object, ...]]
    accuracy: list[tuple[float | None, ...]]  # an integer cell's ±: an int, rounded up
    epsilon: float = 0.0
    delta: float = 0.0
    notes: list[str] = field(default_factory=list)
    # The k chosen from the data (dpsql.privacy.auto_bounds), a DP release; None: k was fixed
    chosen_rows: int | None = None
    # Column bounds chosen from the data (dpsql.privacy.auto_values), DP releases: column ->
    # the (lower, upper) its SUM/AVG/VAR/STDDEV read; None: every bound was declared
    chosen_bounds: dict[str, tuple[float, float]] | None = None
    # Local DP rows (dpsql.execution.local_rows): the sentence that says these rows are
    # randomized, None for every other answer. It travels with the result (stored answers
    # included) and is always its first note, so no door shows such rows without it.
    local_label: str | None = None
    # The notes that say when the answer is not worth reading (dpsql.execution.caveats):
    # computed from released values when it is answered, never stored; also in ``notes``.
    caveats: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.local_label is not None and self.notes[:1] != [self.local_label]:
            self.notes.insert(0, self.local_label)
        # An integer cell's ± is a whole number (1349, not 1348.0795 nor 6.000000 in a
        # DataFrame), on every door and for stored answers alike: rounded up, so that the
        # interval shown still covers at least the 95% it says.
        whole = [c.type in WHOLE_TYPES and c.accuracy_unit == "value" for c in self.columns]
        if any(whole):
            self.accuracy = [tuple(math.ceil(a) if w and isinstance(a, float) and
                                   math.isfinite(a) else a
                                   for a, w in zip(acc, whole, strict=True))
                             for acc in self.accuracy]

    def _repr_html_(self, limit: int = 50) -> str:
        """A notebook's display: each value with its ± (95%) in one cell, at most ``limit``
        rows, then what the answer cost and the notes."""
        rows = [[_shown(v, a, c.accuracy_unit) for v, a, c in zip(row, acc, self.columns,
                                                                   strict=True)]
                for row, acc in list(zip(self.rows, self.accuracy, strict=True))[:limit]]
        more = [f"... {len(self.rows) - limit} more rows"] if len(self.rows) > limit else []
        cost = (f"{len(self.rows)} row{'s' if len(self.rows) != 1 else ''}; privacy cost "
                f"epsilon={self.epsilon:g}, delta={self.delta:g} (± is the 95% accuracy)")
        return html_table([c.name for c in self.columns], rows,
                          [*more, cost, *(f"note: {n}" for n in self.notes)])

    @property
    def randomized(self) -> bool:
        """Whether the rows are randomized local DP rows (not real rows): see local_label."""
        return self.local_label is not None


def _shown(value: object, accuracy: float | None, unit: str | None) -> str:
    text = "NULL" if value is None else str(value)
    if unit and accuracy is not None:
        text += f" ± {accuracy:.4g}" + (" ranks" if unit == "rank" else "")
    return text


def renamed(columns: Sequence[ResultColumn], names: Sequence[str]) -> tuple[ResultColumn, ...]:
    """``columns`` named ``names`` (their types and units kept)."""
    return tuple(ResultColumn(n, c.type, c.accuracy_unit)
                 for n, c in zip(names, columns, strict=True))
