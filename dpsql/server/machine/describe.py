"""The columns of a private query's answer, from its plan alone: no data read, nothing charged.

The extended protocol's Describe must say what an Execute will return before anything runs.
The plan knows it: post-processing (:func:`dpsql.execution.postprocess.postprocess`) reads only the
released group keys and the noisy cells, whose types the plan fixes. So the answer's columns are
those of post-processing run on one made-up group
(:func:`dpsql.execution.postprocess.made_up_answer`) -- the library's own code path, fed with
nothing that came from data.
"""

from __future__ import annotations

from dpsql.execution.free import FreeAnswer
from dpsql.execution.local_rows import LocalRead
from dpsql.execution.postprocess import made_up_answer
from dpsql.execution.public import PublicRead
from dpsql.ledger.spending import LedgerRead
from dpsql.privacy.plan import Plan
from dpsql.routes.releases import Releases, made_up_columns
from dpsql.routes.series import TwoReleases


def describe(plan: Plan | PublicRead | TwoReleases | FreeAnswer | LocalRead | LedgerRead
             | Releases) -> list[tuple[str, str]]:
    """(name, DuckDB type) of each column of the answer to ``plan``: an exact public read
    knows them from its dry run on empty tables, a free answer from its route; two releases
    answer as their outer query."""
    if isinstance(plan, Releases):  # a composite: its parts' made-up answers, combined
        return made_up_columns(plan)
    if isinstance(plan, PublicRead | FreeAnswer | LocalRead | LedgerRead):  # their dry run
        return [(c.name, c.type) for c in plan.columns]
    private = plan.outer if isinstance(plan, TwoReleases) else plan
    return [(c.name, c.type) for c in made_up_answer(private).columns]
