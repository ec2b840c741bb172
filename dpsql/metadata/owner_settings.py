"""The data owner's ``[budget]``, ``[analysts.*]`` and ``[server]`` sections of the metadata
file (:mod:`dpsql.metadata.metadata` reads the file and its tables): who may spend how much, where
the spending is recorded, and the settings of every front door."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpsql.errors import MetadataError
from dpsql.metadata.toml_values import description_of, flag, no_unknown_keys, relative_to, seconds

_LIMIT_KEYS = {"max_query_epsilon", "max_query_delta"}
_BUDGET_KEYS = {"ledger", "accounting", "reuse_answers", "owners", "description"} | _LIMIT_KEYS
_ANALYST_KEYS = {"epsilon", "delta", "query_epsilon", "description"}
_SERVER_KEYS = {"passwords", "statement_timeout", "time_grid", "idle_timeout", "description"}
DEFAULT_STATEMENT_TIMEOUT = 300.0
#: Seconds a logged-in server session may stay silent before it is closed (57P05): long enough
#: for a person reading a result, short enough that forgotten connections give their slots
#: back. BI tools' connection pools reconnect.
DEFAULT_IDLE_TIMEOUT = 1800.0
#: The default answer-time grid of a metered database, in seconds.
#:
#: *What it protects.* One person's bounded rows change a query's running time by microseconds
#: (benchmarks/bench_timing.py: +63 +- 76 us, not significant). A difference of d seconds moves
#: an answer to the next grid point with probability about d / g: the chance that one charged
#: query's answer time shows the difference is about 0.4% for d = 0.2 ms at 50 ms, and three
#: times that at 16 ms.
#:
#: *What it costs.* The grid delays each fresh answer (25 ms on average at 50 ms; reused answers and
#: refusals read no data and are not padded). It does not serialise the server: queries waiting for
#: their grid point hold no lock and not the GIL (the server waits for them on its event loop,
#: holding no thread), so the server's throughput is bounded by its CPU, not by the grid
#: (benchmarks/bench_server.py, two cores shared with other jobs: 32 clients got 439 fresh answers
#: per second at 50 ms and 450 with no grid). What the grid does bound is a client that waits for
#: each answer before sending the next: at most 1 / g fresh answers per second, so c such clients at
#: most c / g -- 160 for 8 clients at 50 ms. Serving 500 fresh answers per second to 8 such clients
#: would need g <= 16 ms, three times the timing leak above; the default keeps 50 ms and leaves that
#: trade to the owner, who can set ``[server] time_grid`` knowing it (or have more clients in
#: flight).
#:
#: An unmetered database gets no grid unless the owner sets one: nothing bounds its total
#: privacy loss, so padding buys no guarantee there (and it would slow the bulk queries of
#: tests and audits).
DEFAULT_TIME_GRID = 0.05
DEFAULT_LEDGER = "dpsql-ledger.sqlite"
EVERY_OTHER_ANALYST = "*"


#: The largest epsilon and delta one query may ask for unless the owner sets
#: ``[budget] max_query_epsilon`` / ``max_query_delta``: beyond epsilon 100 there is no privacy
#: left to speak of, and delta is the probability of a total privacy failure.
DEFAULT_MAX_QUERY_EPSILON = 100.0
DEFAULT_MAX_QUERY_DELTA = 0.1



@dataclass(frozen=True)
class Allowance:
    """An analyst's total budget, declared by the data owner (its accounting:
    :mod:`dpsql.privacy.accounting`)."""

    epsilon: float
    delta: float


@dataclass(frozen=True)
class QueryLimits:
    """``[budget] max_query_epsilon`` and ``max_query_delta``: the largest epsilon and delta a
    single query may ask for, whoever asks (a test database may raise them to run a compliance
    suite at epsilon 1e20, where the noise vanishes). Declared with or without analysts: an
    unmetered database still bounds each query."""

    max_epsilon: float = DEFAULT_MAX_QUERY_EPSILON
    max_delta: float = DEFAULT_MAX_QUERY_DELTA


@dataclass(frozen=True)
class Budget:
    """The ``[budget]`` and ``[analysts.*]`` sections: who may spend how much, and where the
    spending is recorded."""

    ledger: Path  # as declared, ~ expanded, made absolute against the metadata file's folder
    analysts: Mapping[str, Allowance]
    default: Allowance | None = None  # [analysts."*"]: each analyst not listed gets this much
    accounting: str = "basic"
    reuse_answers: bool = True
    #: ``query_epsilon`` per analyst (``"*"``: every analyst not listed): the epsilon of each
    #: query that does not give its own (a dashboard's many small queries). A default, not a
    #: limit: the analyst may ask for another (the total is what the budget bounds).
    query_epsilon: Mapping[str, float] = field(default_factory=dict)
    #: ``owners``: the logins of the data owner, who see every analyst's rows in the ledger
    #: views (:mod:`dpsql.ledger.spending`); everyone else sees their own.
    owners: frozenset[str] = frozenset()

    def default_epsilon(self, analyst: str) -> float | None:
        """The analyst's declared ``query_epsilon`` (or that of ``"*"`` for an analyst not
        listed), or None."""
        if analyst in self.analysts:
            return self.query_epsilon.get(analyst)
        return self.query_epsilon.get(EVERY_OTHER_ANALYST)


@dataclass(frozen=True)
class ServerSettings:
    """The ``[server]`` section: the data owner's settings of every front door.

    ``statement_timeout`` bounds the running time of every private query, whichever door it
    came through (:meth:`dpsql.Database.run` stops the engine); an analyst cannot shorten it,
    because a limit the analyst chooses turns a data-dependent running time into a
    data-dependent error. ``time_grid`` (0: off) releases every freshly computed answer,
    failure or timeout only at the next multiple of the grid after the query started.
    """

    passwords: Path | None = None  # as declared, ~ expanded, absolute against the file's folder
    statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT
    time_grid: float | None = None  # None: not declared (see grid)
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT  # dpsql serve's silent sessions; 0: none
    description: str | None = None

    def grid(self, metered: bool) -> float:
        """The time grid in force: as declared, else :data:`DEFAULT_TIME_GRID` when the
        database is metered and 0 (none) when it is not."""
        if self.time_grid is not None:
            return self.time_grid
        return DEFAULT_TIME_GRID if metered else 0.0


def parse_server(spec: Any, source: str, path: Path | None) -> ServerSettings:
    where = f"{source}: [server]"
    if not isinstance(spec, dict):
        raise MetadataError(f"{where} must be a section of settings")
    no_unknown_keys(spec, _SERVER_KEYS, where)
    passwords = spec.get("passwords")
    passwords_path = None
    if passwords is not None:
        if not isinstance(passwords, str) or not passwords.strip():
            raise MetadataError(f"{where}: passwords must be the path of the passwords file, "
                                f"such as \"dpsql-passwords.toml\", not {passwords!r}")
        passwords_path = relative_to(passwords, path)
    timeout = seconds(spec, "statement_timeout", DEFAULT_STATEMENT_TIMEOUT, where)
    if timeout <= 0:
        raise MetadataError(f"{where}: statement_timeout must be a number of seconds > 0, such "
                            f"as 300, not {timeout!r}")
    grid = seconds(spec, "time_grid", 0.0, where) if "time_grid" in spec else None
    idle = seconds(spec, "idle_timeout", DEFAULT_IDLE_TIMEOUT, where)
    return ServerSettings(passwords=passwords_path, statement_timeout=timeout, time_grid=grid,
                          idle_timeout=idle, description=description_of(spec, where))


def parse_budget(data: Mapping[str, Any], source: str, path: Path | None) -> Budget | None:
    settings = data.get("budget", {})
    where = f"{source}: [budget]"
    if not isinstance(settings, dict):
        raise MetadataError(f"{where} must be a section of settings")
    no_unknown_keys(settings, _BUDGET_KEYS, where)
    analysts_raw = data.get("analysts", {})
    if not isinstance(analysts_raw, dict):
        raise MetadataError(f"{source}: [analysts] must hold one [analysts.NAME] section per "
                            "analyst, e.g. [analysts.alice] with epsilon = 1.0")
    if not analysts_raw:
        if set(settings) - _LIMIT_KEYS - {"description"}:
            raise MetadataError(
                f"{where} is declared but no analyst has a budget; add an [analysts.NAME] "
                "section with epsilon (and delta), or [analysts.\"*\"] for everyone")
        return None
    accounting = settings.get("accounting", "basic")
    if accounting not in ("basic", "zcdp"):
        raise MetadataError(f"{where}: accounting must be \"basic\" or \"zcdp\", "
                            f"not {accounting!r}")
    reuse = flag({"reuse_answers": settings.get("reuse_answers", True)}, "reuse_answers", where)
    ledger = settings.get("ledger", DEFAULT_LEDGER)
    if not isinstance(ledger, str) or not ledger.strip():
        raise MetadataError(f"{where}: ledger must be the path of the ledger file, such as "
                            f"\"{DEFAULT_LEDGER}\", not {ledger!r}")
    ledger_path = relative_to(ledger, path)
    description_of(settings, where)
    analysts: dict[str, Allowance] = {}
    query_epsilon: dict[str, float] = {}
    for name, spec in analysts_raw.items():
        where_analyst = f"{source}: analyst {name!r}"
        analysts[name] = parse_allowance(name, spec, accounting, where_analyst)
        if "query_epsilon" in spec:
            query_epsilon[name] = _query_epsilon(spec["query_epsilon"], where_analyst)
    default = analysts.pop(EVERY_OTHER_ANALYST, None)
    owners = settings.get("owners", [])
    if not isinstance(owners, list) or not all(isinstance(o, str) and o.strip() and
                                               o != EVERY_OTHER_ANALYST for o in owners):
        raise MetadataError(f"{where}: owners must be a list of the data owner's login names "
                            f"(who see every analyst's spending), such as [\"dana\"], not "
                            f"{owners!r}")
    return Budget(ledger=ledger_path, analysts=analysts, default=default, accounting=accounting,
                  reuse_answers=reuse, query_epsilon=query_epsilon, owners=frozenset(owners))


def parse_query_limits(data: Mapping[str, Any], source: str) -> QueryLimits:
    """The ``[budget]`` section's per-query limits (the section's other keys are
    :func:`parse_budget`'s)."""
    settings = data.get("budget", {})
    if not isinstance(settings, dict):
        raise MetadataError(f"{source}: [budget] must be a section of settings")
    where = f"{source}: [budget]"
    epsilon = settings.get("max_query_epsilon", DEFAULT_MAX_QUERY_EPSILON)
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or \
            not math.isfinite(epsilon) or epsilon <= 0:
        raise MetadataError(f"{where}: max_query_epsilon (the largest epsilon one query may ask "
                            f"for) must be a finite number > 0, such as 10, not {epsilon!r}")
    delta = settings.get("max_query_delta", DEFAULT_MAX_QUERY_DELTA)
    if isinstance(delta, bool) or not isinstance(delta, int | float) or \
            not 0 <= delta <= 1:
        raise MetadataError(f"{where}: max_query_delta (the largest delta one query may ask "
                            f"for) must be a number from 0 to 1, such as 1e-5, not {delta!r}")
    return QueryLimits(float(epsilon), float(delta))


def _query_epsilon(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or value <= 0:
        raise MetadataError(f"{where}: query_epsilon (the default epsilon of each query) must "
                            f"be a finite number > 0, such as 0.1, not {value!r}")
    return float(value)


def parse_allowance(name: str, spec: Any, accounting: str, where: str) -> Allowance:
    if not name.strip():
        raise MetadataError(f"{where}: an analyst name must not be empty")
    if not isinstance(spec, dict):
        raise MetadataError(f"{where}: must be a section such as [analysts.{name}] with "
                            "epsilon = 1.0 and delta = 1e-6")
    no_unknown_keys(spec, _ANALYST_KEYS, where)
    description_of(spec, where)
    if "epsilon" not in spec:
        raise MetadataError(f"{where}: declare the analyst's total epsilon, e.g. epsilon = 1.0")
    values = {}
    for key in ("epsilon", "delta"):
        value = spec.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise MetadataError(f"{where}: {key} must be a number, not {value!r}")
        if not math.isfinite(value) or value < 0:
            raise MetadataError(f"{where}: {key} must be a finite number >= 0, not {value!r}")
        values[key] = float(value)
    if values["delta"] >= 1:
        raise MetadataError(f"{where}: delta must be < 1 (a small value such as 1e-6), "
                            f"not {values['delta']!r}")
    if accounting == "zcdp" and values["delta"] == 0:
        raise MetadataError(f"{where}: zcdp accounting needs a delta > 0 in every budget; "
                            "give a delta such as 1e-6 or use accounting = \"basic\"")
    return Allowance(values["epsilon"], values["delta"])
