"""The routes answered exactly from public information: free, never charged, off the time grid
(their time depends on public data only), an error of theirs shown as it is.

* :class:`PublicRoute`: a query of public tables only (:mod:`dpsql.execution.public`), on the
  database's locked in-memory copy of them, under the owner's time limit;
* :class:`FreeRoute`: an answer fixed by the metadata (:mod:`dpsql.execution.free`: an empty
  probe's columns, a public domain with no aggregate);
* :class:`LedgerRoute`: the ledger views (:mod:`dpsql.ledger.spending`), the asking analyst's
  own rows (every analyst's for an owner's login).
"""

from __future__ import annotations

from dataclasses import dataclass

from dpsql.engines import CancelToken, CursorCancel, Engine
from dpsql.execution.free import FreeAnswer, answer_free
from dpsql.execution.postprocess import Result, ResultColumn
from dpsql.execution.public import PublicRead, PublicStore, answer_public
from dpsql.explanation.explanation import Explanation
from dpsql.ledger.budget import Ledger
from dpsql.ledger.spending import LedgerRead, read_views
from dpsql.privacy.accounting import Cost
from dpsql.routes.route import Answering, Measured, Route


class ExactRoute(Route):
    """What every exact route shares: free, exact, its columns known from its dry run."""

    charged = False
    exact = True

    @property
    def result_columns(self) -> tuple[ResultColumn, ...]:
        raise NotImplementedError

    @property
    def output_names(self) -> list[str]:
        return [c.name for c in self.result_columns]

    @property
    def measured(self) -> tuple[Measured, ...]:
        return ()  # no private data read

    def cost(self, accounting: str) -> Cost:
        return Cost(0.0, 0.0)

    def check(self, engine: Engine, ledger: Ledger | None, analyst: str | None) -> None:
        if ledger is not None and analyst is not None:
            ledger.status(analyst)  # an analyst without a budget is refused, as for any query

    def interrupts(self, context: Answering) -> CancelToken | None:
        return None

    def columns(self) -> list[tuple[str, str]]:
        return [(c.name, c.type) for c in self.result_columns]

    def _explained(self, sql: str, why: str) -> Explanation:
        return Explanation(sql=sql, cells=[], key_release=why, epsilon=0.0, delta=0.0,
                           rows_per_unit=0, groups_per_unit=0)


@dataclass(frozen=True)
class PublicRoute(ExactRoute):
    read: PublicRead

    @property
    def prepared(self) -> PublicRead:
        return self.read

    @property
    def result_columns(self) -> tuple[ResultColumn, ...]:
        return self.read.columns

    def interrupts(self, context: Answering) -> CancelToken | None:
        return CursorCancel(_store(context).cursor())  # this thread's cursor, as answer's

    def answer(self, context: Answering) -> Result:
        return answer_public(self.read, _store(context).cursor())

    def explain(self, engine: Engine | None) -> Explanation:
        return self._explained(self.read.sql, "exact read of public table(s) "
                               f"{', '.join(self.read.tables)}: no noise, no privacy cost")


def _store(context: Answering) -> PublicStore:
    store = context.public
    assert isinstance(store, PublicStore)  # a public read was prepared with one
    return store


@dataclass(frozen=True)
class FreeRoute(ExactRoute):
    free: FreeAnswer

    @property
    def prepared(self) -> FreeAnswer:
        return self.free

    @property
    def result_columns(self) -> tuple[ResultColumn, ...]:
        return self.free.columns

    @property
    def reports(self) -> bool:
        return True  # a report asks for the columns of a probe: they are its answer

    @property
    def measured(self) -> tuple[Measured, ...]:
        """The plan that fixed the answer, if any (a public domain's, a probe's): no private
        data read, and its keys must not move on any neighbour."""
        return () if self.free.plan is None else (Measured(self.free.plan),)

    def answer(self, context: Answering) -> Result:
        return answer_free(self.free, context.rng)

    def explain(self, engine: Engine | None) -> Explanation:
        return self._explained(self.free.sql, self.free.reason)


@dataclass(frozen=True)
class LedgerRoute(ExactRoute):
    read: LedgerRead

    as_written = False  # the ledger's rows, not the owner's tables

    @property
    def prepared(self) -> LedgerRead:
        return self.read

    @property
    def result_columns(self) -> tuple[ResultColumn, ...]:
        return self.read.columns

    def check(self, engine: Engine, ledger: Ledger | None, analyst: str | None) -> None:
        """Nothing: the views show an owner's login every row without a budget of its own,
        and refuse an unknown analyst themselves (:func:`dpsql.ledger.spending.read_views`)."""

    def answer(self, context: Answering) -> Result:
        # Unmetered (no analyst), read_views refuses: there is no ledger to read.
        return read_views(self.read, context.ledger, context.metadata, context.analyst or "",
                          context.limit)

    def explain(self, engine: Engine | None) -> Explanation:
        return self._explained(self.read.sql, self.read.reason)


def public_route(read: PublicRead | None) -> PublicRoute | None:
    return None if read is None else PublicRoute(read)


def free_route(free: FreeAnswer | None) -> FreeRoute | None:
    return None if free is None else FreeRoute(free)


def ledger_route(read: LedgerRead | None) -> LedgerRoute | None:
    return None if read is None else LedgerRoute(read)
