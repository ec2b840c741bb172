"""What every way of answering a query says about itself: the :class:`Route` protocol.

The planner (:meth:`dpsql.routes.planner.Planner.route`) returns a :class:`Route`; the
:class:`~dpsql.database.Database` then runs every route the same way, top to bottom, without
asking which kind it has:

1. ``check``: what is checked before anything is charged (the engine queries dry-run on
   empty tables; an analyst without a budget refused a free answer);
2. reuse or charge: a route that is ``charged`` costs ``cost(accounting)`` (the arithmetic of
   :mod:`dpsql.privacy.accounting`), under an answer key made of its ``epsilon``, ``delta`` and
   ``mechanism``; a stored answer is read back with its ``output_names``. Local rows keep a
   randomized copy per analyst and table instead (``copy_table``, ``answer_from_copy``);
3. ``answer``: the result, on the engine and with the randomness of an :class:`Answering`,
   under the owner's time limit (``interrupts``: what it stops; an ``exact`` route reads
   public information only, so it skips the time grid and shows its own errors);
4. ``explain``, ``columns``, ``caveats``, ``retained``: EXPLAIN, the server's Describe, the
   notes on a released answer, the plan a retention estimate reads;
5. ``measured``, ``as_written``: what the audits (:mod:`dpsql.audit`) compare, so that they
   too never ask which kind of route they have: the private releases whose exact
   measurements the neighbour harness checks (:class:`Measured`), and whether the answer is
   the query as written over the owner's tables, which the oracle reads as plain SQL.

The implementations: :mod:`dpsql.routes.exact` (public reads, free answers, the ledger views),
:mod:`dpsql.routes.private` (one private plan), :mod:`dpsql.routes.local` (randomized local
rows), :mod:`dpsql.routes.series` (two releases) and :mod:`dpsql.routes.releases` (a
composite's parts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpsql.errors import UnsupportedQuery

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from dpsql.engines import CancelToken, Engine
    from dpsql.execution.postprocess import Result
    from dpsql.execution.retention import Retention
    from dpsql.explanation.explanation import Explanation
    from dpsql.ledger.budget import Ledger
    from dpsql.metadata.metadata import Metadata
    from dpsql.privacy.accounting import Cost
    from dpsql.privacy.plan import Plan
    from dpsql.privacy.randomness import Randomness
    from dpsql.query.joins import PublicRows


@dataclass(frozen=True)
class Answering:
    """What a route answers with: the engine, the randomness, the planner's metadata and
    public tables (two releases plan their second with the keys the first released), the
    ledger and the analyst asking (None: unmetered), and the owner's time limit in seconds."""

    engine: Engine
    rng: Randomness
    metadata: Metadata
    public: PublicRows | None = None
    ledger: Ledger | None = None
    analyst: str | None = None
    limit: float = 0.0
    sql: str = ""  # the query answered, as the owner's log names it


@dataclass(frozen=True)
class Measured:
    """One private release whose exact (noise-free) measurements the audits compare: the
    neighbour harness on neighbouring data (:mod:`dpsql.audit.neighbours`), the oracle against
    its reference (:mod:`dpsql.audit.oracle`)."""

    plan: Plan
    label: str = ""  # how a report names it among a route's releases ("release 1: ")
    #: The release planned from the keys this one gave (two releases: the outer query filtered
    #: by the inner's keys), given rows holding those keys at the columns its links read, the
    #: metadata and the public rows; None: nothing follows.
    then: Callable[[Sequence[tuple[object, ...]], Metadata, PublicRows | None],
                   Measured] | None = None


class Route:
    """One way of answering a prepared query (module docstring). The defaults are those of a
    private release answered on the engine; each route overrides what differs."""

    #: Charged to the analyst's budget, its answer stored with the charge.
    charged: bool = True
    #: Answered exactly from public information alone: free, off the time grid.
    exact: bool = False
    #: The table whose stored randomized copy answers this route (local rows), else None.
    copy_table: str | None = None
    epsilon: float = 0.0
    delta: float = 0.0
    mechanism: str = "laplace"
    #: The answer is the query as written, read over the owner's tables: exactly, or released
    #: by the one plan of :attr:`measured` (the oracle compares it with that SQL read plainly).
    #: Not the ledger views (the ledger's rows), local rows (randomized rows), nor releases
    #: combined (two releases, a composite's parts).
    as_written: bool = True

    @property
    def prepared(self) -> object:
        """What the planner prepared (a :class:`~dpsql.privacy.plan.Plan`, a public read,
        ...): :meth:`dpsql.database.Database.plan` returns it."""
        return self

    @property
    def output_names(self) -> list[str]:
        raise NotImplementedError

    @property
    def cost_epsilon(self) -> float:
        """The epsilon charged (0 for a free route)."""
        return 0.0

    @property
    def cost_delta(self) -> float:
        return 0.0

    @property
    def reports(self) -> bool:
        """Whether ``report_format => 'JSON'`` may ask for this route's report: one private
        release, or a free answer's columns (:func:`dpsql.routes.releases.check_report_route`)."""
        return False

    @property
    def measured(self) -> tuple[Measured, ...]:
        """The plans this route answers with, in order, whose exact measurements the audits
        compare (a free answer's plan too: its keys must not move on any neighbour); none for
        a read of public tables or of the ledger views, nor for local rows (randomized rows,
        checked row by row: ``tests/neighbours/test_neighbours_local.py``)."""
        raise NotImplementedError

    def cost(self, accounting: str) -> Cost:
        """The ledger cost under ``accounting`` (:mod:`dpsql.privacy.accounting`)."""
        raise NotImplementedError

    def check(self, engine: Engine, ledger: Ledger | None, analyst: str | None) -> None:
        """Refuse, before anything is charged, what would fail later."""

    def retained(self) -> Plan:
        """The plan a retention estimate (:mod:`dpsql.execution.retention`) reads, or a refusal,
        before anything is charged."""
        raise UnsupportedQuery("a retention estimate is made for one aggregate query over "
                               "private rows, not for a series limit or local rows; ask "
                               "without it (or without the LIMIT over the series)")

    def interrupts(self, context: Answering) -> CancelToken | None:
        """What the owner's time limit interrupts while this route answers (None: nothing
        runs long enough to need it)."""
        return context.engine.cancel_token()

    def answer(self, context: Answering) -> Result:
        raise NotImplementedError

    def answer_from_copy(self, context: Answering, key: str,
                         draw: Callable[[Route, int, Result | None], Result]
                         ) -> tuple[Result, Cost | None]:
        """Answer from the analyst's stored copy (a route with a ``copy_table``), drawing and
        charging (as ledger entry ``id``) what it lacks; the cost charged now, if any."""
        raise NotImplementedError

    def explain(self, engine: Engine | None) -> Explanation:
        raise NotImplementedError

    def columns(self) -> list[tuple[str, str]]:
        """(name, DuckDB type) of each column of the answer, from the route alone: no data
        read, nothing charged (the server's Describe)."""
        raise NotImplementedError

    def caveats(self, result: Result, retention: Retention | None) -> None:
        """Attach the caveats of a released answer (:mod:`dpsql.execution.caveats`)."""
