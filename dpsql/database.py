"""The one library API that every front door calls: a private view of one database.

    >>> db = dpsql.Database()                       # the bundled sample data
    >>> result = db.query("SELECT sex, COUNT(*) FROM people GROUP BY sex", epsilon=0.5)

The command line, the DB-API connection and the wire-protocol server hold no privacy logic of
their own; they go through :class:`Database`.

**Metering.** When the metadata declares analysts (``[analysts.NAME]``, see
:mod:`dpsql.metadata.metadata`), every answer is paid for from that analyst's budget in the ledger
(:mod:`dpsql.ledger.budget`), shared by every process and front door that opens the same metadata.
:meth:`Database.query` runs, in this order:

1. bind the parameters into the parsed SQL as literals (:func:`bind_parameters`; never by
   pasting text) and normalise it (sqlglot's DuckDB text of the bound tree);
2. route it (:mod:`dpsql.routes`: a :class:`~dpsql.routes.route.Route`, whatever its kind)
   and check it: every refusal happens here, with no data read and nothing charged;
3. reuse: if the analyst already paid for the same normalised query with the same epsilon,
   delta and mechanism (on the same database and table declarations), the stored noisy answer
   is returned again at no cost. Releasing it again is post-processing; answering afresh would
   let an analyst average independent noise away by repetition. ``[budget] reuse_answers =
   false`` turns this off (each repetition is then charged in full);
4. charge the plan's cost to the ledger (check and charge in one transaction) -- *before* the
   query runs. A charge is never refunded, even if the engine then fails;
5. answer (the route's: for one private plan rewrite, execute, perturb, post-process) under
   the owner's time limit and answer-time grid (:meth:`Database.run`); the answer (or the
   engine's failure) is stored with its charge.

Without any declared analyst the database is *unmetered* (:attr:`Database.metered` is False):
queries are answered and nothing limits the total privacy loss.

The analyst is, in order: the ``analyst`` argument of the call, the Database's ``analyst``,
the ``DPSQL_ANALYST`` environment variable, the operating-system user. The ledger file is the
metadata's ``[budget] ledger``, or ``DPSQL_LEDGER`` when set. Both are conveniences for a
trusted environment: someone who controls the process (its environment, the files) controls
the budget too. Analysts who must not exceed their budget have to go through a front door run
by the data owner, such as the server, without access to the data, metadata or ledger files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from dpsql.cache import LRU
from dpsql.engines import Engine, check_metadata, open_engine
from dpsql.errors import EngineFailure, Error, MetadataError, OperationalError
from dpsql.execution.local_rows import joined
from dpsql.execution.postprocess import Result, ResultColumn
from dpsql.execution.public import PublicStore
from dpsql.execution.retention import Retention, estimate
from dpsql.execution.time_limits import grid_point, limited, pad_to_grid
from dpsql.execution.watch import Watch, current
from dpsql.explanation.explanation import Explanation
from dpsql.ledger.answers import ENGINE_FAILURE_ANSWER, decode_result, encode_result
from dpsql.ledger.budget import BudgetStatus, Cost
from dpsql.ledger.opening import ANALYST_ENV as ANALYST_ENV  # their home before it
from dpsql.ledger.opening import LEDGER_ENV as LEDGER_ENV
from dpsql.ledger.opening import init_ledger as init_ledger
from dpsql.ledger.opening import ledger_path as ledger_path
from dpsql.ledger.opening import open_ledger, resolve_analyst
from dpsql.ledger.spending import warn
from dpsql.metadata.contribution import ContributionBounds
from dpsql.metadata.metadata import Metadata, load_metadata
from dpsql.metadata.sample import sample_paths as sample_paths
from dpsql.privacy.accounting import pure_cost
from dpsql.privacy.mechanisms import validate_privacy_parameters
from dpsql.privacy.plan import Plan
from dpsql.privacy.randomness import Randomness
from dpsql.privacy.randomness import default as default_randomness
from dpsql.query.dates import fold_clock
from dpsql.query.dp_clause import resolve_query
from dpsql.query.parameters import Parameters, bound_query, frozen_parameters, lower_case_names
from dpsql.routes.local import write_local_release
from dpsql.routes.planner import Planner, Prepared
from dpsql.routes.private import PrivatePlan
from dpsql.routes.releases import Releases, composite_of, prepare_releases
from dpsql.routes.route import Answering, Route
from dpsql.routes.templates import keep_moved_engine_sql
from dpsql.shortcut import Answer as Answer  # its home: light, for the command line's shortcut

log = logging.getLogger(__name__)
_MEMO_SIZE = 1024
_T = TypeVar("_T")

#: A query's epsilon when neither the query nor the analyst's ``query_epsilon`` gives one.
DEFAULT_EPSILON = 1.0
_DIALECT = "duckdb"
#: A bound query: its normalised text, its answer-key text and its tree (never mutated).
_Statement = tuple[str, str, exp.Expression]


@dataclass(frozen=True)
class _Routed:
    """A query read once and routed: its route, its normalised text, the text its stored
    answers are keyed by."""

    route: Route
    normalised: str
    key_text: str


# --- the database -----------------------------------------------------------------------------




class Database:
    """A database seen through its metadata: a DuckDB file or folder of CSV/Parquet, or a
    server URL (``postgresql://...``, see :func:`dpsql.engines.open_engine`; a URL needs its
    metadata file).

    ``analyst`` is who asks by default (see :func:`resolve_analyst`). A Database may be shared
    by threads; each process opens its own. ``engine``, an already opened engine, replaces
    opening ``database`` (the tests inject one whose queries wait to be interrupted); the
    Database then owns it and closes it. ``randomness`` is where every noise draw and salt
    comes from (:mod:`dpsql.privacy.randomness`): the operating system's CSPRNG unless given.
    """

    def __init__(self, database: str | Path | None = None,
                 metadata: str | Path | Metadata | None = None,
                 analyst: str | None = None, engine: Engine | None = None,
                 randomness: Randomness | None = None) -> None:
        if engine is not None and database is None:
            database = engine.location
        if database is None and metadata is None:
            database, metadata = sample_paths()
        elif database is None or metadata is None:
            raise ValueError("pass both database and metadata, or neither for the sample data")
        self.metadata = metadata if isinstance(metadata, Metadata) else load_metadata(metadata)
        if analyst is not None:
            resolve_analyst(analyst)  # refuse an invalid name now
        self.analyst = analyst
        self._randomness = randomness
        self.engine: Engine = engine if engine is not None else open_engine(database,
                                                                             self.metadata)
        try:
            # Every declared table, column and type against the engine's, before any query
            # can be charged (see dpsql.engines.check_metadata).
            for warning in check_metadata(self.metadata, self.engine.schema, database):
                log.warning("%s", warning)
            self.ledger = open_ledger(self.metadata)
        except BaseException:
            self.engine.close()
            raise
        tables = json.dumps(self.metadata.raw.get("tables"), sort_keys=True, default=str)
        self._scope = hashlib.sha256(f"{self.engine.location}\0{tables}".encode()).hexdigest()
        # (SQL text, parameters) -> (normalised text, answer-key text, tree): see _texts.
        self._memo: LRU[tuple[object, ...], _Statement] = LRU(_MEMO_SIZE)
        self._public = PublicStore(self.metadata, self.engine)  # loaded on first use
        # This database's plans: joins read its public tables (multiplicities, key domains).
        self.planner = Planner(self.metadata, self._public)

    @property
    def randomness(self) -> Randomness:
        """The Randomness given to the constructor, else the process default
        (:data:`dpsql.privacy.randomness.DEFAULT`, looked up on every answer)."""
        return self._randomness if self._randomness is not None else default_randomness()

    @property
    def metered(self) -> bool:
        """Whether queries are charged to a privacy budget (the metadata declares analysts)."""
        return self.ledger is not None

    @property
    def reuse_answers(self) -> bool:
        return self.metadata.budget is not None and self.metadata.budget.reuse_answers

    def plan(self, sql: str, epsilon: float | None = None, delta: float = 0.0,
             mechanism: str = "laplace", parameters: Parameters = None,
             bounds: ContributionBounds | None = None) -> Prepared | Releases:
        """Check and plan ``sql``; raises a :class:`~dpsql.errors.QueryRefused` if refused.
        What the planner prepared on the query's route (:meth:`route`): a private query's
        :class:`Plan`, an exact read of public tables
        (:class:`~dpsql.execution.public.PublicRead`), two private releases
        (:class:`~dpsql.routes.series.TwoReleases`), a composite query's
        (:class:`~dpsql.routes.releases.Releases`), ...: see :mod:`dpsql.routes.planner`."""
        return cast("Prepared | Releases",
                    self.route(sql, epsilon, delta, mechanism, parameters, bounds).prepared)

    def route(self, sql: str, epsilon: float | None = None, delta: float = 0.0,
              mechanism: str = "laplace", parameters: Parameters = None,
              bounds: ContributionBounds | None = None) -> Route:
        """The route of ``sql`` (:class:`~dpsql.routes.route.Route`: its cost, its columns,
        its explanation), every refusal raised, nothing read or charged. Without ``epsilon``:
        :meth:`query_epsilon`. ``bounds``: the query's contribution bounds (None: the
        metadata's; BigQuery's ``WITH DIFFERENTIAL_PRIVACY OPTIONS`` in ``sql`` wins,
        :mod:`dpsql.query.dp_clause`)."""
        return self._route(sql, epsilon, delta, mechanism, parameters, bounds, None).route

    def check_parameters(self, epsilon: float, delta: float, mechanism: str) -> None:
        """Refuse privacy parameters beyond the owner's per-query limits (``[budget]
        max_query_epsilon`` and ``max_query_delta``) or malformed: what a front door calls for
        its session defaults, so that no door holds the limits itself."""
        validate_privacy_parameters(epsilon, delta, mechanism, self.metadata.limits)

    def query_epsilon(self, analyst: str | None = None, fallback: float | None = None
                      ) -> float:
        """The epsilon of a query that gives none: the analyst's ``query_epsilon`` in the
        metadata (``[analysts.NAME]``, else ``[analysts."*"]``), else ``fallback`` (a front
        door's own default, such as the server's ``--epsilon``), else
        :data:`DEFAULT_EPSILON`. Every front door's default (the server's session,
        ``dpsql.connect``, the CLI)."""
        budget = self.metadata.budget
        if budget is not None and budget.query_epsilon:
            declared = budget.default_epsilon(resolve_analyst(analyst, self.analyst))
            if declared is not None:
                return declared
        return DEFAULT_EPSILON if fallback is None else fallback

    def query(self, sql: str, epsilon: float | None = None, delta: float = 0.0,
              mechanism: str = "laplace", parameters: Parameters = None,
              analyst: str | None = None, *, timeout: float | None = None,
              bounds: ContributionBounds | None = None, retention: float | None = None
              ) -> Result:
        """Answer ``sql`` with noise calibrated to (epsilon, delta), charged to ``analyst``."""
        return self.run(sql, epsilon, delta, mechanism, parameters, analyst,
                        timeout=timeout, bounds=bounds, retention=retention).result

    def run(self, sql: str, epsilon: float | None = None, delta: float = 0.0,
            mechanism: str = "laplace", parameters: Parameters = None,
            analyst: str | None = None, *, timeout: float | None = None,
            release: list[float] | None = None,
            bounds: ContributionBounds | None = None, retention: float | None = None,
            caveats: bool = True) -> Answer:
        """Like :meth:`query`, and also say what was charged (see the module docstring).
        Without ``epsilon``, the analyst's default (:meth:`query_epsilon`).

        **Caveats.** A private answer whose noise exceeds its values in some cells, whose AVG
        or quantile sits at a bound, or whose retention estimate shows the bounds dropping a
        large share of rows says so in ``Result.caveats`` (also in ``notes``), each naming
        the cause and the fix (:mod:`dpsql.execution.caveats`: post-processing of released
        values, free). ``caveats=False`` leaves them out.

        **Retention.** ``retention``: an epsilon for a noisy estimate of the share of its rows
        the query's contribution bounds keep (:mod:`dpsql.execution.retention`), charged as a
        release of its own (a ledger entry of that epsilon, reused as answers are), reported
        in ``Answer.retention`` and as a note. Refused before anything is charged for a
        query it does not apply to (a series limit, local rows).

        **Time.** The data owner's ``[server] statement_timeout`` bounds the engine's running
        time of every private query, from every front door; ``timeout`` is a front door's own
        owner-side cap (the server's ``ServerConfig.statement_timeout``) and can only lower it:
        it must never come from the analyst, whose limit would turn a data-dependent running
        time into a data-dependent error. A query stopped by the limit raises
        :class:`~dpsql.errors.QueryTimeout` (charged; its text names only the limit). With
        ``[server] time_grid = g > 0`` a freshly computed outcome -- answer, engine failure
        or timeout -- is returned only at the next multiple of ``g`` after this call began, so
        the answer time shows only which grid cell the running time fell in. A front door
        that must not hold its thread for that wait (the server, whose threads serve every
        connection) passes a list as ``release``: the outcome then returns at once, the time
        (``time.monotonic()``) before which it must not be released -- answer or error -- is
        appended to the list, and the front door waits for it without a thread.

        **Free answers.** A query whose answer is fixed by public information -- ``LIMIT 0``
        or a constant-false WHERE (BI tools probe column types so), a GROUP BY or DISTINCT
        over public domains with no aggregate -- is answered exactly, without running the
        engine or charging (:mod:`dpsql.execution.free`): that answer is the same for every
        database.

        **Engine failures.** The engine failing on a checked query is a dpsql bug (the
        checker should have refused it) and its message may quote a private value: the
        analyst gets the fixed :class:`~dpsql.errors.EngineFailure`, the owner's log (logger
        ``dpsql.owner``) gets the engine's message, and the failure is stored as the charge's
        answer, so the same query asked again returns the same error at no new charge.
        """
        started = time.monotonic()
        if retention is not None:  # refused whatever the query, before anything is charged
            validate_privacy_parameters(retention, 0.0, "laplace", self.metadata.limits)
        routed = self._route(sql, epsilon, delta, mechanism, parameters, bounds, analyst)
        route, normalised = routed.route, routed.normalised
        who = resolve_analyst(analyst, self.analyst) if self.ledger is not None else None
        route.check(self.engine, self.ledger, who)  # every refusal: before any charge
        context = Answering(self.engine, self.randomness, self.metadata, self._public,
                            self.ledger, who, self._limit(timeout), normalised)
        if route.exact:  # public information alone: free, exact, off the time grid
            return Answer(self._within(route, context, None), normalised, who, None)
        retained = route.retained() if retention is not None else None
        answer = self._reuse_or_charge(route, context, routed.key_text, bounds, started,
                                       release)
        if retained is not None and retention is not None:
            self._retention(answer, retained, retention, routed.key_text, bounds, timeout,
                            release)
        if answer.cost is not None and self.ledger is not None and who is not None:
            warn(answer.result, self.ledger.status(who))  # past 80%: said
        if caveats:  # after the answer was stored: from its released numbers
            route.caveats(answer.result, answer.retention)
        return answer

    def _route(self, sql: str, epsilon: float | None, delta: float, mechanism: str,
               parameters: Parameters, bounds: ContributionBounds | None,
               analyst: str | None) -> _Routed:
        """Read the query once -- a composite's parts, else BigQuery's clause, the clock and
        the parameters -- and route it (:meth:`dpsql.routes.planner.Planner.route`)."""
        composite = composite_of(sql, self.metadata)  # a UNION of private queries, ...
        if composite is not None:
            releases = prepare_releases(
                composite, self.planner.route, self.metadata, self.query_epsilon(analyst)
                if epsilon is None else epsilon, delta, mechanism, bounds, parameters)
            return _Routed(releases, sql, releases.key_text(sql))
        clause = resolve_query(sql, epsilon, delta, bounds)  # BigQuery's clause
        # NOW(), CURRENT_DATE: read once, here, so the stored answers' key holds the instant.
        folded = fold_clock(clause.sql)
        query_epsilon = self.query_epsilon(analyst) if clause.epsilon is None else clause.epsilon
        asked = (query_epsilon, clause.delta, mechanism, clause.bounds, clause.report)
        new = parameters is None and (folded, None) not in self._memo
        if new:  # a text not seen: maybe one planned before but for its constants
            reused = self.planner.reuse(folded, *asked)
            if reused is not None:
                keep_moved_engine_sql(reused, self.engine)  # its engine SQL: moved, not rewritten
                self._memo.put((folded, None), (reused.normalised, reused.key_text, reused.tree))
                return _Routed(reused.route, reused.normalised, reused.key_text)
        normalised, key_text, tree = self._texts(folded, parameters)
        route = self.planner.route(
            normalised, query_epsilon, clause.delta, mechanism, tree=tree,
            bounds=clause.bounds, report=clause.report)  # report_format => 'JSON': refused
        if new:  # before any charge
            self.planner.learn(folded, tree, normalised, key_text, route, *asked)
        return _Routed(route, normalised, key_text)

    def _reuse_or_charge(self, route: Route, context: Answering, key_text: str,
                         bounds: ContributionBounds | None, started: float,
                         release: list[float] | None) -> Answer:
        """Charge (or reuse) and answer a route that reads private data (see :meth:`run`)."""
        ledger, who, sql = self.ledger, context.analyst, context.sql

        def compute(entry_id: int | None, held: Result | None = None,
                    on: Route = route) -> Result:
            return self._compute(on, context, entry_id, started, release, held)

        if ledger is None or who is None or not route.charged:  # unmetered, or all parts free
            return Answer(compute(None), sql, who, None)
        if route.copy_table is not None and self.reuse_answers:  # one copy per analyst
            # keyed by the table on this database and declarations: not the text, not epsilon
            copy_key = hashlib.sha256(json.dumps([1, self._scope, "local copy",
                                                  route.copy_table.lower()]).encode()
                                      ).hexdigest()
            result, cost = route.answer_from_copy(
                context, copy_key, lambda extra, entry_id, held: compute(entry_id, held, extra))
            return Answer(result, sql, who, cost, reused=cost is None)
        key = self._answer_key(key_text, route, bounds)
        result, cost = self._charge(
            who, key, route.cost(ledger.accounting), sql,
            lambda data: self._stored(data, route), compute, current())
        return Answer(result, sql, who, cost, reused=cost is None, key=key)

    def _charge(self, who: str, key: str, cost: Cost, sql: str,
                stored: Callable[[bytes], _T | None], compute: Callable[[int], _T],
                watch: Watch | None) -> tuple[_T, Cost | None]:
        """Reuse or charge, the one place: the analyst's outcome stored under ``key``
        (``stored`` reads it back; None: unreadable, charged anew) when answers are reused,
        else ``cost`` charged -- before ``compute`` reads anything, and never refunded -- and
        ``compute`` run as that ledger entry. The cost charged now, None when reused."""
        ledger = self.ledger
        assert ledger is not None  # metered
        if self.reuse_answers:
            data = ledger.lookup(who, key)
            found = None if data is None else stored(data)
            if found is not None:
                return found, None
        # a cancel before the charge: nothing charged (execution/watch.py)
        with watch.charging(cost.epsilon, cost.delta) if watch is not None else nullcontext():
            entry = ledger.reserve(who, cost, sql=sql, cache_key=key)
        return compute(entry.id), cost  # the charge stands even if what follows fails

    def _retention(self, answer: Answer, p: Plan, epsilon: float, key_text: str,
                   bounds: ContributionBounds | None, timeout: float | None,
                   release: list[float] | None) -> None:
        """Estimate what ``p``'s bounds keep at ``epsilon``, charged as a release of its own
        (a stored estimate is reused at no cost), and attach it to ``answer``."""
        ledger, started = self.ledger, time.monotonic()

        def estimated(entry_id: int | None) -> Retention:
            kept = self._estimate(p, epsilon, timeout, started, release)
            if entry_id is not None and ledger is not None:
                ledger.store_answer(entry_id, json.dumps(kept.as_json()).encode())
            return kept

        if ledger is not None and answer.analyst is not None and p.table.needs_bounding:
            key = f"{self._answer_key(key_text, PrivatePlan(p), bounds)}|retention|{epsilon!r}"
            kept, answer.retention_cost = self._charge(
                answer.analyst, key, pure_cost(epsilon, ledger.accounting),
                "retention of: " + answer.sql, lambda data: Retention(**json.loads(data)),
                estimated, None)
        else:
            kept = estimated(None)
        answer.retention = kept
        answer.result.notes.append(kept.note())

    def _estimate(self, p: Plan, epsilon: float, timeout: float | None, started: float,
                  release: list[float] | None) -> Retention:
        """:func:`dpsql.execution.retention.estimate` under the owner's time limit and grid, as
        any answer (:meth:`run`)."""
        try:
            with limited(self.engine.cancel_token(), self._limit(timeout),
                         "a retention estimate"):
                return estimate(p, self.engine, epsilon, self.randomness)
        finally:
            grid = self.metadata.server.grid(self.metered)
            if release is None:
                pad_to_grid(started, grid)
            else:
                release.append(grid_point(started, grid))

    def _limit(self, timeout: float | None) -> float:
        settings = self.metadata.server
        return settings.statement_timeout if timeout is None or timeout <= 0 else \
            min(timeout, settings.statement_timeout)

    def _compute(self, route: Route, context: Answering, entry_id: int | None, started: float,
                 release: list[float] | None, held: Result | None = None) -> Result:
        """Answer a route that reads private data under the owner's time limit, store the
        outcome with its charge (``entry_id``), and return on the owner's time grid (see
        :meth:`run`). ``held``: the analyst's copy of local rows that ``route``'s new draws
        join (:func:`dpsql.routes.local.answer_from_stored_copy`)."""
        watch, released = current(), False
        try:
            result = self._within(route, context, entry_id)
            if held is not None:
                result = joined(held, result)
            if entry_id is not None and watch is not None:
                # The grid first: whether a cancel finds the answer stored must not tell when
                # the engine finished, finer than the grid (execution/watch.py).
                self._release(started, release)
                released = True
                watch.storing(lambda: self._store(entry_id, result))
            elif entry_id is not None:
                self._store(entry_id, result)
            return result
        finally:
            if not released:
                self._release(started, release)

    def _release(self, started: float, release: list[float] | None) -> None:
        """Wait for the owner's time grid (a local door's cancel ends the wait: the answer is
        then not stored, execution/watch.py), or hand its point to the caller (see run)."""
        grid, watch = self.metadata.server.grid(self.metered), current()
        if release is not None:  # the caller waits
            release.append(grid_point(started, grid))
        elif watch is not None and grid > 0:
            watch.wait_until(grid_point(started, grid))
        else:
            pad_to_grid(started, grid)

    def _within(self, route: Route, context: Answering, entry_id: int | None) -> Result:
        """``route``'s answer under the one time-limit and engine-failure policy
        (:func:`dpsql.execution.time_limits.limited`); an engine failure is stored as the
        charge's outcome (``entry_id``), so that asked again it is the same failure, free."""
        exact = route.exact
        with limited(route.interrupts(context), context.limit,
                     f"the query of {context.analyst} ({context.sql})",
                     watch=None if exact else current(), private=not exact,
                     failed=None if entry_id is None else lambda: self._store(entry_id, None)):
            return route.answer(context)

    def _store(self, entry_id: int, result: Result | None) -> None:
        """Attach the released outcome to its charge: the result, or (None) the engine's
        failure."""
        ledger = self.ledger
        assert ledger is not None  # a charge was made
        try:
            data = ENGINE_FAILURE_ANSWER if result is None else encode_result(result)
            ledger.store_answer(entry_id, data)
        except (Error, TypeError, ValueError) as e:
            log.warning("the answer to ledger entry %d was not stored: %s", entry_id, e)

    def _texts(self, sql: str, parameters: Parameters) -> _Statement:
        """The bound query's normalised text (what is planned, and the planner's cache key),
        the text its stored answers are keyed by, and its tree (parsed once: the planner reads
        copies); memoised per SQL text and parameters, because BI tools and dashboards send
        the same text again and again."""
        try:
            memo: tuple[object, ...] | None = (sql, frozen_parameters(parameters))
            hash(memo)
        except TypeError:  # unhashable parameter values: no memo
            memo = None
        if memo is None:
            return self._bound_texts(sql, parameters)
        return self._memo.get_or_compute(memo, lambda: self._bound_texts(sql, parameters))

    def _bound_texts(self, sql: str, parameters: Parameters) -> _Statement:
        text, tree = bound_query(sql, parameters)
        # In lower case already: key_text would write the same text again (issue 39).
        return text, text if lower_case_names(tree) else self.key_text(tree.copy()), tree

    def cache_key(self, tree: exp.Expression, route: Route) -> str:
        """The key of stored answers for ``tree`` (see :meth:`key_text`) routed as ``route``."""
        return self._answer_key(self.key_text(tree), route)

    def _answer_key(self, text: str, p: Route,
                    bounds: ContributionBounds | None = None) -> str:
        parts = [1, self._scope, text, repr(float(p.epsilon)), repr(float(p.delta)),
                 p.mechanism]
        if bounds is not None:  # the same text under other bounds is another answer
            parts.append(repr(bounds))
        key = json.dumps(parts)
        return hashlib.sha256(key.encode()).hexdigest()

    @staticmethod
    def key_text(tree: exp.Expression) -> str:
        """The key of stored answers: the bound query (sqlglot's text without comments, and
        with identifiers in lower case as DuckDB compares them), epsilon, delta and mechanism,
        on this database with these table declarations. It does not depend on the analyst (the
        ledger keeps each analyst's answers apart).

        Only the same text is recognised: a query written differently but with the same meaning
        (``30 < age`` for ``age > 30``) is a new query and is charged again. Reuse spares the
        budget of honest repetitions; the budget itself is what bounds the privacy loss.
        The tree is normalised in place: pass one that is not needed afterwards.
        """
        return normalize_identifiers(tree, dialect=_DIALECT).sql(dialect=_DIALECT,
                                                                 comments=False, copy=False)

    @staticmethod
    def _stored(data: bytes | None, route: Route) -> Result | None:
        """A stored answer, its columns named as in this query (identifier case may differ)."""
        if data is None:
            return None
        if data == ENGINE_FAILURE_ANSWER:  # the stored outcome of a charged query
            raise EngineFailure()
        try:
            result = decode_result(data)
        except (ValueError, KeyError, TypeError, OperationalError) as e:
            log.warning("ignoring an unreadable stored answer: %s", e)
            return None
        names = route.output_names
        if len(names) != len(result.columns):
            return None
        result.columns = [ResultColumn(name, c.type, c.accuracy_unit)
                          for name, c in zip(names, result.columns, strict=True)]
        return result

    def explain(self, sql: str, epsilon: float | None = None, delta: float = 0.0,
                mechanism: str = "laplace", parameters: Parameters = None,
                bounds: ContributionBounds | None = None) -> Explanation:
        """The rewritten SQL and every cell's noise, without reading data or charging."""
        return self.route(sql, epsilon, delta, mechanism, parameters, bounds).explain(
            self.engine)

    def release_local(self, table: str, out: str | Path, analyst: str | None = None) -> Answer:
        """``dpsql release --local``: the whole table's randomized rows (local DP, see
        :mod:`dpsql.privacy.local`) written to the Parquet file ``out`` with their release
        parameters in its key-value metadata; withheld columns are left out. Charged once, as
        the query ``SELECT * FROM table`` (asked again, the stored rows are written again, free).
        Queries over the file are post-processing."""
        declared = self.metadata.table(table)
        if declared is None or declared.local is None:
            raise MetadataError(f"table {table!r} has no local section in {self.metadata.source}"
                                "; the owner opts a table in to local releases there")
        sql = f"SELECT * FROM {exp.to_identifier(declared.name, quoted=True).sql('duckdb')}"
        answered = self.run(sql, analyst=analyst)
        write_local_release(self.route(sql), answered.result, Path(out))
        return answered

    def budget(self, analyst: str | None = None) -> BudgetStatus | None:
        """What ``analyst`` (resolved as for queries) has spent and has left; None when the
        database is unmetered."""
        if self.ledger is None:
            return None
        return self.ledger.status(resolve_analyst(analyst, self.analyst))

    def close(self) -> None:
        self._public.close()
        if self.ledger is not None:
            self.ledger.close()
        self.engine.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


