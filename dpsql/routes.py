"""Which path answers a query: the one place where :class:`~dpsql.database.Database` chooses.

* :class:`~dpsql.public.PublicRead`: the query reads public tables only (exact, free);
* :class:`~dpsql.free.FreeAnswer`: the answer is fixed by public information (an empty probe:
  ``LIMIT 0`` or a constant-false WHERE; or a public domain with no aggregate): exact, free;
* :class:`~dpsql.series.TwoReleases`: the query uses a private aggregate subquery (a series
  limit): two private releases, one charge;
* :class:`~dpsql.plan.Plan`: everything else, the private pipeline (:mod:`dpsql.pipeline`).

Like plans, routes depend only on the SQL text, the privacy parameters and the metadata, and
are cached with the plans (``metadata.plans``); refusals are not cached.
"""

from __future__ import annotations

import sqlglot
from sqlglot.errors import SqlglotError

from dpsql.dates import fold_clock
from dpsql.engines import Engine
from dpsql.errors import QueryRefused, UnsupportedQuery
from dpsql.free import FreeAnswer, empty_probe, probe, public_domain
from dpsql.mechanisms import validate_privacy_parameters
from dpsql.metadata import Metadata
from dpsql.pipeline import answer, prepare
from dpsql.plan import Plan
from dpsql.postprocess import Result
from dpsql.public import PublicRead, public_read
from dpsql.series import TwoReleases, answer_two, two_releases

Prepared = Plan | PublicRead | TwoReleases | FreeAnswer


class _Private:
    """Cached for a text that takes the private pipeline (the cache holds no None)."""


_PRIVATE = _Private()


def prepare_query(sql: str, metadata: Metadata, epsilon: float = 1.0, delta: float = 0.0,
                  mechanism: str = "laplace") -> Prepared:
    """The prepared query on its path; every refusal happens here, nothing read or charged.
    The clock is read first (:func:`dpsql.dates.fold_clock`): every cache below is keyed by
    the folded text."""
    validate_privacy_parameters(epsilon, delta, mechanism)
    sql = fold_clock(sql)
    route = metadata.plans.get_or_compute(("public", sql),
                                          lambda: public_read(sql, metadata) or _PRIVATE)
    if isinstance(route, PublicRead):
        return route
    key = (sql, epsilon, delta, mechanism)
    free = metadata.plans.get_or_compute(
        ("probe", *key), lambda: _probe(sql, metadata, epsilon, delta, mechanism) or _PRIVATE)
    if isinstance(free, FreeAnswer):
        return free
    series = metadata.plans.get_or_compute(
        ("series", *key), lambda: two_releases(sql, metadata, epsilon, delta, mechanism)
        or _PRIVATE)
    if isinstance(series, TwoReleases):
        return series
    p = prepare(sql, metadata, epsilon, delta, mechanism)
    if p.measurements:
        return p  # the common case: no second lookup
    domain = metadata.plans.get_or_compute(("domain", *key),
                                           lambda: public_domain(sql, p) or _PRIVATE)
    return domain if isinstance(domain, FreeAnswer) else p


def _probe(sql: str, metadata: Metadata, epsilon: float, delta: float, mechanism: str
           ) -> FreeAnswer | None:
    """An empty probe's free answer (:func:`dpsql.free.probe`), or None for any other text."""
    try:
        statements = [s for s in sqlglot.parse(sql, read="duckdb") if s is not None]
    except SqlglotError:
        return None  # the parse pass refuses it with its message
    if len(statements) != 1:
        return None
    why = empty_probe(statements[0])
    if why is None:
        return None
    try:
        return probe(sql, statements[0], why, metadata,  # type: ignore[arg-type]
                     prepare(sql, metadata, epsilon, delta, mechanism), None)
    except QueryRefused as refused:
        return probe(sql, statements[0], why, metadata, None, refused)  # type: ignore[arg-type]


def answer_private(p: Prepared, engine: Engine, metadata: Metadata) -> Result:
    """Answer a prepared private query (one release or two) on ``engine``; no budget here."""
    if isinstance(p, TwoReleases):
        return answer_two(p, engine, metadata)
    if isinstance(p, PublicRead | FreeAnswer):
        raise UnsupportedQuery("an exact answer from public information is answered by the "
                               "Database")
    return answer(p, engine)
