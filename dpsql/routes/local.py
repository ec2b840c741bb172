"""The route of randomized local rows (:mod:`dpsql.execution.local_rows`, local DP:
:mod:`dpsql.privacy.local`): charged pure ``epsilon`` (:func:`dpsql.privacy.accounting.
pure_cost`); where the ledger keeps answers, once per analyst and table for their stored copy
(:func:`answer_from_stored_copy`), every later row-level query of the table answered from it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dpsql.engines import Engine
from dpsql.errors import EngineFailure, OperationalError
from dpsql.execution.local_rows import (
    LocalRead,
    answer_from_copy,
    answer_local,
    write_release,
)
from dpsql.execution.postprocess import Result
from dpsql.explanation.explanation import Explanation
from dpsql.ledger.answers import ENGINE_FAILURE_ANSWER, decode_result
from dpsql.ledger.budget import Ledger
from dpsql.privacy.accounting import Cost, pure_cost
from dpsql.privacy.randomness import Randomness
from dpsql.routes.route import Answering, Measured, Route

log = logging.getLogger(__name__)
#: Draws a copy release charged as ledger entry ``id``, joined to the copy held (if any).
DrawCopy = Callable[[Route, int, Result | None], Result]


@dataclass(frozen=True)
class LocalRoute(Route):
    read: LocalRead

    as_written = False  # randomized rows, each released on its own

    @property
    def prepared(self) -> LocalRead:
        return self.read

    @property
    def copy_table(self) -> str | None:  # type: ignore[override]
        return self.read.table.name

    @property
    def epsilon(self) -> float:  # type: ignore[override]
        return self.read.epsilon  # the owner's, whatever is asked

    @property
    def delta(self) -> float:  # type: ignore[override]
        return self.read.delta

    @property
    def mechanism(self) -> str:  # type: ignore[override]
        return self.read.mechanism

    @property
    def cost_epsilon(self) -> float:
        return self.read.epsilon

    @property
    def output_names(self) -> list[str]:
        return self.read.output_names

    @property
    def measured(self) -> tuple[Measured, ...]:
        return ()  # randomized rows: no exact measurement to compare

    def cost(self, accounting: str) -> Cost:
        return pure_cost(self.read.epsilon, accounting)

    def answer(self, context: Answering) -> Result:
        return answer_local(self.read, context.engine, context.rng)

    def answer_from_copy(self, context: Answering, key: str, draw: DrawCopy
                         ) -> tuple[Result, Cost | None]:
        assert context.ledger is not None and context.analyst is not None  # metered
        return answer_from_stored_copy(self.read, context.ledger, context.analyst, key, draw,
                                       context.rng)

    def explain(self, engine: Engine | None) -> Explanation:
        read = self.read
        return Explanation(sql=read.sql, cells=[], key_release=read.describe(),
                           epsilon=read.epsilon, delta=0.0,
                           rows_per_unit=read.table.rows_per_unit, groups_per_unit=1)

    def columns(self) -> list[tuple[str, str]]:
        return [(c.name, c.type) for c in self.read.columns]


def local_route(read: LocalRead | None) -> LocalRoute | None:
    return None if read is None else LocalRoute(read)


def write_local_release(route: Route, result: Result, out: Path) -> None:
    """``dpsql release --local``: ``result``, the answer to ``route`` (a whole table's local
    rows), written to the Parquet file ``out`` (:func:`dpsql.execution.local_rows.
    write_release`)."""
    assert isinstance(route, LocalRoute)  # SELECT * of a table with a local section
    write_release(result, route.read, out)


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
        cost = pure_cost(extra.epsilon, ledger.accounting)
        entry = ledger.reserve(analyst, cost, sql=f"randomized copy of {p.table.name}",
                               cache_key=key)  # the charge stands even if what follows fails
        copy = draw(LocalRoute(extra), entry.id, copy)
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
