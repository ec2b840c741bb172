"""Which path answers a query: the one place where :class:`~dpsql.database.Database` chooses.

* :class:`~dpsql.public.PublicRead`: the query reads public tables only (exact, free);
* :class:`~dpsql.series.TwoReleases`: the query uses a private aggregate subquery (a series
  limit): two private releases, one charge;
* :class:`~dpsql.plan.Plan`: everything else, the private pipeline (:mod:`dpsql.pipeline`).

Like plans, routes depend only on the SQL text, the privacy parameters and the metadata, and
are cached with the plans (``metadata.plans``); refusals are not cached.
"""

from __future__ import annotations

from dpsql.engines import Engine
from dpsql.errors import UnsupportedQuery
from dpsql.mechanisms import validate_privacy_parameters
from dpsql.metadata import Metadata
from dpsql.pipeline import answer, prepare
from dpsql.plan import Plan
from dpsql.postprocess import Result
from dpsql.public import PublicRead, public_read
from dpsql.randomness import Randomness
from dpsql.series import TwoReleases, answer_two, two_releases

Prepared = Plan | PublicRead | TwoReleases


class _Private:
    """Cached for a text that takes the private pipeline (the cache holds no None)."""


_PRIVATE = _Private()


def prepare_query(sql: str, metadata: Metadata, epsilon: float = 1.0, delta: float = 0.0,
                  mechanism: str = "laplace") -> Prepared:
    """The prepared query on its path; every refusal happens here, nothing read or charged."""
    validate_privacy_parameters(epsilon, delta, mechanism)
    route = metadata.plans.get_or_compute(("public", sql),
                                          lambda: public_read(sql, metadata) or _PRIVATE)
    if isinstance(route, PublicRead):
        return route
    key = ("series", sql, epsilon, delta, mechanism)
    series = metadata.plans.get_or_compute(
        key, lambda: two_releases(sql, metadata, epsilon, delta, mechanism) or _PRIVATE)
    if isinstance(series, TwoReleases):
        return series
    return prepare(sql, metadata, epsilon, delta, mechanism)


def answer_private(p: Prepared, engine: Engine, metadata: Metadata, rng: Randomness
                   ) -> Result:
    """Answer a prepared private query (one release or two) on ``engine`` with ``rng``'s
    randomness; no budget here."""
    if isinstance(p, TwoReleases):
        return answer_two(p, engine, metadata, rng)
    if isinstance(p, PublicRead):
        raise UnsupportedQuery("an exact read of public tables is answered by the Database")
    return answer(p, engine, rng)
