"""Answering a prepared query on its path (the path is chosen by
:meth:`dpsql.routes.planner.Planner.prepare_query`, the one place that chooses):

* :class:`~dpsql.routes.series.TwoReleases`: two private releases (a series limit);
* :class:`~dpsql.routes.releases.Releases`: a composite query's parts, the rows combined;
* :class:`~dpsql.privacy.plan.Plan`: the private pipeline's answer
(:func:`dpsql.routes.pipeline.answer`);
* :class:`~dpsql.execution.local_rows.LocalRead`: randomized rows (local DP), charged as
  :func:`local_cost` says, once per analyst and table where the ledger keeps answers
  (:func:`answer_from_stored_copy`);
* :class:`~dpsql.execution.public.PublicRead` and :class:`~dpsql.execution.free.FreeAnswer` are
answered by the
  :class:`~dpsql.database.Database` (exact, free).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from dpsql.engines import Engine
from dpsql.errors import EngineFailure, OperationalError, UnsupportedQuery
from dpsql.execution.free import FreeAnswer
from dpsql.execution.local_rows import LocalRead, answer_from_copy, answer_local
from dpsql.execution.postprocess import Result
from dpsql.execution.public import PublicRead
from dpsql.ledger.answers import ENGINE_FAILURE_ANSWER, decode_result
from dpsql.ledger.budget import Cost, Ledger
from dpsql.ledger.spending import LedgerRead
from dpsql.privacy.plan import Plan
from dpsql.privacy.randomness import Randomness
from dpsql.routes.pipeline import answer
from dpsql.routes.planner import Planner, Prepared
from dpsql.routes.releases import Releases, answer_releases
from dpsql.routes.series import TwoReleases, answer_two

log = logging.getLogger(__name__)
#: Draws a copy release charged as ledger entry ``id``, joined to the copy held (if any).
DrawCopy = Callable[[LocalRead, int, Result | None], Result]


def answer_private(p: Prepared | Releases, engine: Engine, planner: Planner, rng: Randomness
                   ) -> Result:
    """Answer a prepared private query (one release or two) on ``engine`` with ``rng``'s
    randomness; no budget here. ``planner`` prepared it (the second release of two is planned
    with the released keys)."""
    if isinstance(p, TwoReleases):
        return answer_two(p, engine, planner, rng)
    if isinstance(p, Releases):
        return answer_releases(p, engine, planner, rng)
    if isinstance(p, LocalRead):
        return answer_local(p, engine, rng)
    if isinstance(p, PublicRead | FreeAnswer | LedgerRead):
        raise UnsupportedQuery("an exact answer from public information is answered by the "
                               "Database")
    return answer(p, engine, rng)


def engine_plans(p: Plan | TwoReleases | LocalRead | Releases) -> tuple[Plan, ...]:
    """The private plans that ``p`` runs on the engine (none for local rows, whose copy is
    read otherwise): the database binds each before any charge."""
    if isinstance(p, Releases):
        return tuple(q for r in p.charged for q in engine_plans(r))
    return (p.inner, p.outer) if isinstance(p, TwoReleases) else \
        () if isinstance(p, LocalRead) else (p,)


def local_cost(p: LocalRead, accounting: str) -> Cost:
    """The ledger cost of local DP rows: pure ``epsilon`` (:func:`dpsql.privacy.local.
    query_epsilon`), no delta; under zCDP, pure epsilon-DP is ``epsilon^2 / 2``-zCDP."""
    return Cost(p.epsilon, 0.0, p.epsilon ** 2 / 2.0 if accounting == "zcdp" else 0.0)


def answer_from_stored_copy(p: LocalRead, ledger: Ledger, analyst: str, key: str,
                            draw: DrawCopy, rng: Randomness) -> tuple[Result, Cost | None]:
    """Local rows from the analyst's randomized copy of the table, and what was charged now
    (None: nothing).

    **The copy, and why later queries are free.** The first row-level query of a table by an
    analyst releases their copy C = M(D): the whole bounded table randomized row by row
    (public row count; charged k x epsilon) or m uniform draws (charged m x epsilon), stored
    in the ledger with its charge under ``key`` (the table on this database and declarations,
    never the query's text or epsilon). Every later row-level query of that table by that
    analyst is a function of C and of fresh randomness independent of D (a sample of C's rows,
    then the query over them alone): post-processing, no new cost. C is never drawn again for
    that analyst: a new draw is only ever made to add draws a sample asks for beyond those C
    holds, each charged, and C grows by them (its total charge is the sum). C serves no other
    analyst (the ledger keeps each analyst's answers apart); its size is bounded by the table's
    (or by the draws paid for). When the data changes, C stays as released -- as every stored
    answer does (the key holds the database and its declarations, not its contents); rows of
    the changed data would be a new release, which a change of the declarations charges anew.
    """
    copy = _stored_copy(ledger.lookup(analyst, key))
    extra = p.copy_release(None if copy is None else len(copy.rows))
    cost = None
    if extra is not None:
        cost = local_cost(extra, ledger.accounting)
        entry = ledger.reserve(analyst, cost, sql=f"randomized copy of {p.table.name}",
                               cache_key=key)  # the charge stands even if what follows fails
        copy = draw(extra, entry.id, copy)
    assert copy is not None
    return answer_from_copy(p, copy, rng, 0.0 if cost is None else cost.epsilon), cost


def _stored_copy(data: bytes | None) -> Result | None:
    if data is None:
        return None
    if data == ENGINE_FAILURE_ANSWER:  # the charged draw failed: the same failure again
        raise EngineFailure()
    try:
        return decode_result(data)
    except (ValueError, KeyError, TypeError, OperationalError) as e:
        log.warning("ignoring an unreadable stored copy of local rows: %s", e)
        return None  # a new copy is drawn and charged: never a free one
