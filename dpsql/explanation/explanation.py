"""What a plan will do, read off it before any data is read: an :class:`Explanation` (made by
:func:`dpsql.routes.pipeline.explain`, rendered by :mod:`dpsql.explanation.render`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dpsql.execution.expected import Expected


@dataclass
class CellExplanation:
    output: str  # the aggregate as written
    measurement: str  # what the engine computes
    sensitivity: float
    epsilon: float
    mechanism: str
    noise_scale: float | None  # Laplace b or Gaussian sigma; None for the exponential mechanism
    accuracy: float  # 95% half-width (ranks for the exponential mechanism)
    accuracy_unit: str


@dataclass
class Explanation:
    sql: str  # the rewritten SQL; its parameter $1 is the secret salt of each run
    cells: list[CellExplanation]
    key_release: str
    epsilon: float
    delta: float
    rows_per_unit: int
    groups_per_unit: int
    notes: list[str] = field(default_factory=list)  # the bias of bounding and clamping
    # each output aggregate's accuracy in its column's units (dpsql.execution.expected)
    outputs: list[Expected] = field(default_factory=list)
    # False when a unit keeps its k rows across all its groups (no groups cap applied:
    # dpsql.privacy.aggregates.groups_cap)
    groups_capped: bool = True
