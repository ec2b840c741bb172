"""Answering a prepared query on its path (the path is chosen by
:meth:`dpsql.planner.Planner.prepare_query`, the one place that chooses):

* :class:`~dpsql.series.TwoReleases`: two private releases (a series limit);
* :class:`~dpsql.privacy.plan.Plan`: the private pipeline's answer (:func:`dpsql.pipeline.answer`);
* :class:`~dpsql.execution.local_rows.LocalRead`: randomized rows (local DP), charged as
  :func:`local_cost` says;
* :class:`~dpsql.execution.public.PublicRead` and :class:`~dpsql.execution.free.FreeAnswer` are
answered by the
  :class:`~dpsql.database.Database` (exact, free).
"""

from __future__ import annotations

from dpsql.engines import Engine
from dpsql.errors import UnsupportedQuery
from dpsql.execution.free import FreeAnswer
from dpsql.execution.local_rows import LocalRead, answer_local
from dpsql.execution.postprocess import Result
from dpsql.execution.public import PublicRead
from dpsql.ledger.budget import Cost
from dpsql.pipeline import answer
from dpsql.planner import Planner, Prepared
from dpsql.privacy.randomness import Randomness
from dpsql.series import TwoReleases, answer_two


def answer_private(p: Prepared, engine: Engine, planner: Planner, rng: Randomness
                   ) -> Result:
    """Answer a prepared private query (one release or two) on ``engine`` with ``rng``'s
    randomness; no budget here. ``planner`` prepared it (the second release of two is planned
    with the released keys)."""
    if isinstance(p, TwoReleases):
        return answer_two(p, engine, planner, rng)
    if isinstance(p, LocalRead):
        return answer_local(p, engine, rng)
    if isinstance(p, PublicRead | FreeAnswer):
        raise UnsupportedQuery("an exact answer from public information is answered by the "
                               "Database")
    return answer(p, engine, rng)


def local_cost(p: LocalRead, accounting: str) -> Cost:
    """The ledger cost of local DP rows: pure ``epsilon`` (:func:`dpsql.privacy.local.
    query_epsilon`), no delta; under zCDP, pure epsilon-DP is ``epsilon^2 / 2``-zCDP."""
    return Cost(p.epsilon, 0.0, p.epsilon ** 2 / 2.0 if accounting == "zcdp" else 0.0)
