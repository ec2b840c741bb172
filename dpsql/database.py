"""The one library API that every front door calls: a private view of one database.

    >>> db = dpsql.Database()                       # the bundled sample data
    >>> result = db.query("SELECT sex, COUNT(*) FROM people GROUP BY sex", epsilon=0.5)

The command line, the DB-API connection and the wire-protocol server hold no privacy logic of
their own; they go through :class:`Database`.

**Metering.** When the metadata declares analysts (``[analysts.NAME]``, see
:mod:`dpsql.metadata`), every answer is paid for from that analyst's budget in the ledger
(:mod:`dpsql.budget`), shared by every process and front door that opens the same metadata.
:meth:`Database.query` runs, in this order:

1. bind the parameters into the parsed SQL as literals (:func:`bind_parameters`; never by
   pasting text) and normalise it (sqlglot's DuckDB text of the bound tree);
2. plan it: every refusal happens here, with no data read and nothing charged;
3. reuse: if the analyst already paid for the same normalised query with the same epsilon,
   delta and mechanism (on the same database and table declarations), the stored noisy answer
   is returned again at no cost. Releasing it again is post-processing; answering afresh would
   let an analyst average independent noise away by repetition. ``[budget] reuse_answers =
   false`` turns this off (each repetition is then charged in full);
4. charge the plan's cost to the ledger (check and charge in one transaction) -- *before* the
   query runs. A charge is never refunded, even if the engine then fails;
5. answer: rewrite, execute, perturb, post-process; the answer (or the engine's failure) is
   stored with its charge. Time limits and the answer-time grid are the owner's
   (:meth:`Database.run`).

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

import atexit
import base64
import datetime as dt
import decimal
import getpass
import hashlib
import heapq
import json
import logging
import math
import numbers
import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.tokens import TokenType

from dpsql.budget import BudgetStatus, Cost, Ledger, UnknownAnalyst, query_cost
from dpsql.cache import LRU
from dpsql.engines import DuckDBEngine, check_metadata
from dpsql.errors import (
    EngineError,
    EngineFailure,
    Error,
    InterfaceError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    QueryTimeout,
)
from dpsql.metadata import EVERY_OTHER_ANALYST, Metadata, load_metadata
from dpsql.parse import parse
from dpsql.pipeline import Explanation, answer, explain, prepare
from dpsql.plan import Plan
from dpsql.postprocess import Result, ResultColumn

log = logging.getLogger(__name__)

ANALYST_ENV = "DPSQL_ANALYST"
LEDGER_ENV = "DPSQL_LEDGER"
_DIALECT = "duckdb"


def sample_paths() -> tuple[Path, Path]:
    """The bundled sample database folder and its metadata file."""
    folder = Path(str(resources.files("dpsql.sample_data")))
    return folder, folder / "metadata.toml"


# --- parameters -------------------------------------------------------------------------------

Parameters = Sequence[Any] | Mapping[str, Any] | None


_MEMO_SIZE = 1024


def _frozen(parameters: Parameters) -> object:
    """A hashable image of the parameters (type included: 1 and 1.0 and True bind apart)."""
    if parameters is None:
        return None
    if not isinstance(parameters, list | tuple | Mapping):
        raise TypeError("only lists, tuples and mappings are memoised")  # e.g. an iterator
    if isinstance(parameters, Mapping):
        return tuple(sorted((k, type(v).__name__, v) for k, v in parameters.items()))
    return tuple((type(v).__name__, v) for v in parameters)  # type: ignore[union-attr]


def bind_parameters(sql: str, parameters: Parameters = None) -> str:
    """Bind ``parameters`` into ``sql`` and return the normalised SQL text (DuckDB dialect).

    The SQL is parsed with sqlglot and each placeholder node is replaced by a literal built from
    the Python value, so a value can never become SQL. Placeholders: ``?`` (qmark, bound in
    order from a sequence), ``$1`` (numeric, 1-based into a sequence; each index used at least
    once) and ``:name`` / ``$name`` (named, from a mapping). Values: None, bool, int, float
    (finite), Decimal, str, datetime.date, datetime.datetime and datetime.time; others are
    refused with :class:`~dpsql.errors.ProgrammingError`, as is a wrong number of parameters.

    Without placeholders and parameters this still normalises: the same query written with
    different spacing, keyword case or comments gives the same text. Parse errors and statements
    other than one SELECT are refused by :func:`dpsql.parse.parse`.
    """
    return bind_tree(sql, parameters).sql(dialect=_DIALECT, comments=False, copy=False)


def bind_tree(sql: str, parameters: Parameters = None) -> exp.Select:
    """:func:`bind_parameters`, returning the bound sqlglot tree."""
    numbered, qmarks = _number_qmarks(sql)
    tree = parse(numbered, _DIALECT)
    placeholders = list(tree.find_all(exp.Placeholder))
    if not placeholders:
        if parameters:
            raise ProgrammingError(f"the query has no placeholders but {len(parameters)} "
                                   "parameter(s) were given")
        return tree
    if parameters is None:
        raise ProgrammingError(f"the query has {max(qmarks, len(placeholders))} placeholder(s) "
                               "but no parameters were given")
    names = [str(p.this) for p in placeholders]
    numeric = [n for n in names if n.isdigit()]
    if numeric and len(numeric) != len(names):
        raise ProgrammingError("the query mixes positional (? or $1) and named (:name) "
                               "placeholders; use one style")
    if numeric:
        values = _positional(parameters, {int(n) for n in numeric}, qmarks)
    else:
        values = _named(parameters, set(names))
    for placeholder, name in zip(placeholders, names, strict=True):
        placeholder.replace(_literal(values[name], name))
    return tree


def _number_qmarks(sql: str) -> tuple[str, int]:
    """Turn each ``?`` placeholder token into ``$k`` so the parsed tree keeps their order."""
    if not isinstance(sql, str) or "?" not in sql:
        return sql, 0
    try:
        tokens = sqlglot.Dialect.get_or_raise(_DIALECT).tokenize(sql)
    except SqlglotError:
        return sql, 0  # parse() reports the syntax error
    qmarks = [t for t in tokens if t.token_type == TokenType.PLACEHOLDER and t.text == "?"]
    if qmarks and any(t.token_type == TokenType.PARAMETER for t in tokens):
        raise ProgrammingError("the query mixes ? and $ placeholders; use one style")
    out = sql
    for k, token in reversed(list(enumerate(qmarks, start=1))):
        out = f"{out[:token.start]} ${k} {out[token.end + 1:]}"
    return out, len(qmarks)


def _positional(parameters: Parameters, indices: set[int], qmarks: int) -> dict[str, Any]:
    if isinstance(parameters, Mapping | str | bytes) or not isinstance(parameters, Sequence):
        raise ProgrammingError("positional placeholders (? or $1) need a sequence of "
                               f"parameters, such as a tuple, not {type(parameters).__name__}")
    wanted = qmarks if qmarks else max(indices)
    if len(parameters) != wanted or (not qmarks and indices != set(range(1, wanted + 1))):
        raise ProgrammingError(f"the query has {wanted} placeholder(s) but "
                               f"{len(parameters)} parameter(s) were given")
    return {str(i): parameters[i - 1] for i in indices}


def _named(parameters: Parameters, names: set[str]) -> dict[str, Any]:
    if not isinstance(parameters, Mapping):
        raise ProgrammingError("named placeholders (:name) need a mapping of parameters, such "
                               f"as a dict, not {type(parameters).__name__}")
    missing = sorted(names - set(parameters))
    if missing:
        raise ProgrammingError(f"no value given for the named parameter(s) {', '.join(missing)}")
    return {name: parameters[name] for name in names}


def _literal(value: Any, name: str) -> exp.Expression:
    where = f"parameter {'$' + name if name.isdigit() else ':' + name}"
    if value is None:
        return exp.Null()
    if isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", "") == "b":
        return exp.Boolean(this=bool(value))
    if isinstance(value, bytes | bytearray | memoryview):
        raise NotSupportedError(f"{where}: binary values are not supported (dpsql columns are "
                                "int, float, text, bool or date)")
    if isinstance(value, decimal.Decimal | numbers.Real):
        if isinstance(value, numbers.Integral):
            text = str(int(value))
        elif isinstance(value, decimal.Decimal):
            if not value.is_finite():
                raise ProgrammingError(f"{where}: {value!r} is not a finite number")
            text = str(value)
        else:
            number = float(value)
            if not math.isfinite(number):
                raise ProgrammingError(f"{where}: {value!r} is not a finite number")
            text = repr(number)
        if text.startswith("-"):
            return exp.Paren(this=exp.Neg(this=exp.Literal.number(text[1:])))
        return exp.Literal.number(text)
    if isinstance(value, str):
        if "\x00" in value:
            raise ProgrammingError(f"{where}: text must not contain NUL characters")
        return exp.Literal.string(value)
    if isinstance(value, dt.datetime):
        kind = "TIMESTAMP" if value.tzinfo is None else "TIMESTAMPTZ"
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), kind)
    if isinstance(value, dt.date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    if isinstance(value, dt.time):
        return exp.cast(exp.Literal.string(value.isoformat()), "TIME")
    raise ProgrammingError(f"{where}: cannot bind a value of type {type(value).__name__}; use "
                           "None, bool, int, float, Decimal, str, date, datetime or time")


# --- stored answers ---------------------------------------------------------------------------

_ANSWER_FORMAT = 1


def encode_result(result: Result) -> bytes:
    """Serialize a result to JSON that :func:`decode_result` turns back into an equal Result
    (values keep their Python types: int, float, Decimal, date, ...)."""
    document = {
        "format": _ANSWER_FORMAT,
        "columns": [[c.name, c.type, c.accuracy_unit] for c in result.columns],
        "rows": [[_encode(v) for v in row] for row in result.rows],
        "accuracy": [[_encode(a) for a in acc] for acc in result.accuracy],
        "epsilon": _encode(result.epsilon),
        "delta": _encode(result.delta),
        "notes": list(result.notes),
    }
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode()


def decode_result(data: bytes) -> Result:
    document = json.loads(data)
    if document.get("format") != _ANSWER_FORMAT:
        raise OperationalError(f"stored answer has format {document.get('format')!r}; this "
                               f"dpsql reads format {_ANSWER_FORMAT}")
    return Result(
        columns=[ResultColumn(name, ctype, unit) for name, ctype, unit in document["columns"]],
        rows=[tuple(_decode(v) for v in row) for row in document["rows"]],
        accuracy=[tuple(_decode(a) for a in acc) for acc in document["accuracy"]],
        epsilon=_decode(document["epsilon"]),
        delta=_decode(document["delta"]),
        notes=list(document["notes"]),
    )


def _encode(value: Any) -> Any:
    """JSON primitives as they are; everything else as a tagged object {"t": type, "v": ...}."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"t": "float", "v": repr(value)}
    if isinstance(value, decimal.Decimal):
        return {"t": "decimal", "v": str(value)}
    if isinstance(value, dt.datetime):
        return {"t": "datetime", "v": value.isoformat()}
    if isinstance(value, dt.date):
        return {"t": "date", "v": value.isoformat()}
    if isinstance(value, dt.time):
        return {"t": "time", "v": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"t": "timedelta", "v": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, uuid.UUID):
        return {"t": "uuid", "v": str(value)}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"t": "bytes", "v": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, list | tuple):
        return {"t": type(value).__name__, "v": [_encode(v) for v in value]}
    if isinstance(value, dict):
        return {"t": "dict", "v": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if hasattr(value, "item"):  # a numpy scalar
        return _encode(value.item())
    raise TypeError(f"cannot store a value of type {type(value).__name__}")


def _decode(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    kind, data = value["t"], value["v"]
    decoders: dict[str, Any] = {
        "float": float,
        "decimal": decimal.Decimal,
        "datetime": dt.datetime.fromisoformat,
        "date": dt.date.fromisoformat,
        "time": dt.time.fromisoformat,
        "timedelta": lambda v: dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
        "uuid": uuid.UUID,
        "bytes": base64.b64decode,
        "list": lambda v: [_decode(x) for x in v],
        "tuple": lambda v: tuple(_decode(x) for x in v),
        "dict": lambda v: {_decode(k): _decode(x) for k, x in v},
    }
    return decoders[kind](data)


# --- costs ------------------------------------------------------------------------------------


# --- the database -----------------------------------------------------------------------------


@dataclass
class Answer:
    """A query's result with what it cost: ``cost`` is the new charge (None when nothing was
    charged: a reused answer, or an unmetered database)."""

    result: Result
    sql: str  # the normalised SQL that was answered
    analyst: str | None
    cost: Cost | None
    reused: bool = False


def resolve_analyst(*candidates: str | None) -> str:
    """The first given name, else ``DPSQL_ANALYST``, else the operating-system user."""
    name = next((c for c in candidates if c is not None), None)
    if name is None:
        name = os.environ.get(ANALYST_ENV) or None
    if name is None:
        try:
            name = getpass.getuser()
        except (OSError, KeyError, ImportError):
            raise InterfaceError(f"cannot tell who is asking: pass analyst= or set "
                                 f"{ANALYST_ENV}") from None
    if not isinstance(name, str) or not name.strip():
        raise InterfaceError(f"an analyst must be a non-empty name, got {name!r}")
    if name == EVERY_OTHER_ANALYST:
        raise UnknownAnalyst(f"{EVERY_OTHER_ANALYST!r} is not an analyst name; it stands for "
                             "every analyst not listed in the metadata")
    return name


def ledger_path(metadata: Metadata) -> Path | None:
    """The ledger file: ``DPSQL_LEDGER`` if set, else the metadata's; None when unmetered."""
    if metadata.budget is None:
        return None
    override = os.environ.get(LEDGER_ENV)
    return Path(override).expanduser().absolute() if override else metadata.budget.ledger


def open_ledger(metadata: Metadata) -> Ledger | None:
    """Open (creating if needed) the ledger the metadata declares; None when unmetered."""
    path = ledger_path(metadata)
    if path is None or metadata.budget is None:
        return None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise OperationalError(f"cannot create the folder of the budget ledger {path}: "
                               f"{e.strerror or e}") from None
    budget = metadata.budget
    return Ledger(path, budget.analysts, accounting=budget.accounting,  # type: ignore[arg-type]
                  default=budget.default)


class Database:
    """A DuckDB database (file or folder of CSV/Parquet) seen through its metadata.

    ``analyst`` is who asks by default (see :func:`resolve_analyst`). A Database may be shared
    by threads; each process opens its own. ``engine``, an already opened engine, replaces
    opening ``database`` (the tests inject one whose queries wait to be interrupted); the
    Database then owns it and closes it.
    """

    def __init__(self, database: str | Path | None = None,
                 metadata: str | Path | Metadata | None = None,
                 analyst: str | None = None, engine: DuckDBEngine | None = None) -> None:
        if engine is not None and database is None:
            database = engine.path
        if database is None and metadata is None:
            database, metadata = sample_paths()
        elif database is None or metadata is None:
            raise ValueError("pass both database and metadata, or neither for the sample data")
        self.metadata = metadata if isinstance(metadata, Metadata) else load_metadata(metadata)
        if analyst is not None:
            resolve_analyst(analyst)  # refuse an invalid name now
        self.analyst = analyst
        self.engine = engine if engine is not None else DuckDBEngine(database)
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
        self._scope = hashlib.sha256(
            f"{self.engine.path.resolve()}\0{tables}".encode()).hexdigest()
        # (SQL text, parameters) -> (normalised text, answer-key text): see _texts.
        self._memo: LRU[tuple[object, ...], tuple[str, str]] = LRU(_MEMO_SIZE)

    @property
    def metered(self) -> bool:
        """Whether queries are charged to a privacy budget (the metadata declares analysts)."""
        return self.ledger is not None

    @property
    def reuse_answers(self) -> bool:
        return self.metadata.budget is not None and self.metadata.budget.reuse_answers

    def plan(self, sql: str, epsilon: float = 1.0, delta: float = 0.0,
             mechanism: str = "laplace", parameters: Parameters = None) -> Plan:
        """Check and plan ``sql``; raises a :class:`~dpsql.errors.QueryRefused` if refused."""
        return prepare(bind_parameters(sql, parameters), self.metadata, epsilon, delta,
                       mechanism)

    def query(self, sql: str, epsilon: float = 1.0, delta: float = 0.0,
              mechanism: str = "laplace", parameters: Parameters = None,
              analyst: str | None = None, *, timeout: float | None = None) -> Result:
        """Answer ``sql`` with noise calibrated to (epsilon, delta), charged to ``analyst``."""
        return self.run(sql, epsilon, delta, mechanism, parameters, analyst,
                        timeout=timeout).result

    def run(self, sql: str, epsilon: float = 1.0, delta: float = 0.0,
            mechanism: str = "laplace", parameters: Parameters = None,
            analyst: str | None = None, *, timeout: float | None = None) -> Answer:
        """Like :meth:`query`, and also say what was charged (see the module docstring).

        **Time.** The data owner's ``[server] statement_timeout`` bounds the engine's running
        time of every private query, from every front door; ``timeout`` is a front door's own
        owner-side cap (the server's ``ServerConfig.statement_timeout``) and can only lower it:
        it must never come from the analyst, whose limit would turn a data-dependent running
        time into a data-dependent error. A query stopped by the limit raises
        :class:`~dpsql.errors.QueryTimeout` (charged; its text names only the limit). With
        ``[server] time_grid = g > 0`` a freshly computed outcome -- answer, engine failure
        or timeout -- is returned only at the next multiple of ``g`` after this call began, so
        the answer time shows only which grid cell the running time fell in.

        **Engine failures.** The engine failing on a checked query is a dpsql bug (the
        checker should have refused it) and its message may quote a private value: the
        analyst gets the fixed :class:`~dpsql.errors.EngineFailure`, the owner's log (logger
        ``dpsql.owner``) gets the engine's message, and the failure is stored as the charge's
        answer, so the same query asked again returns the same error at no new charge.
        """
        started = time.monotonic()
        normalised, key_text = self._texts(sql, parameters)
        p = prepare(normalised, self.metadata, epsilon, delta, mechanism)
        ledger = self.ledger
        if ledger is None:
            result = self._compute(p, normalised, None, None, timeout, started)
            return Answer(result, normalised, None, None)
        who = resolve_analyst(analyst, self.analyst)
        key = self._answer_key(key_text, p)
        if self.reuse_answers:
            stored = self._stored(ledger.lookup(who, key), p)
            if stored is not None:
                return Answer(stored, normalised, who, None, reused=True)
        cost = query_cost(p, ledger.accounting)
        entry = ledger.reserve(who, cost, sql=normalised, cache_key=key)
        # the charge stands even if what follows fails
        result = self._compute(p, normalised, who, entry.id, timeout, started)
        return Answer(result, normalised, who, cost)

    def _compute(self, p: Plan, sql: str, who: str | None, entry_id: int | None,
                 timeout: float | None, started: float) -> Result:
        """Answer a charged plan under the owner's time limit, store the outcome with its
        charge (``entry_id``), and return on the owner's time grid (see :meth:`run`)."""
        settings = self.metadata.server
        limit = settings.statement_timeout if timeout is None or timeout <= 0 else \
            min(timeout, settings.statement_timeout)
        try:
            result = self._answer_within(p, limit, sql, who, entry_id)
            if entry_id is not None:
                self._store(entry_id, result)
            return result
        finally:
            pad_to_grid(started, settings.grid(self.metered))

    def _answer_within(self, p: Plan, limit: float, sql: str, who: str | None,
                       entry_id: int | None) -> Result:
        deadline = Deadline(self.engine.cursor(), limit)
        try:
            return answer(p, self.engine)
        except EngineError as e:
            if e.interrupted and deadline.fired:
                owner_log.warning("query of %s stopped at the statement_timeout of %g s: %s",
                                  who, limit, sql)
                raise QueryTimeout(limit) from None
            if e.interrupted:  # an interrupt from the process itself (a signal), not the data
                raise
            owner_log.error("the engine failed on a checked query of %s (a dpsql bug; the "
                            "analyst got the generic EngineFailure): %s\nquery: %s", who,
                            e.owner_detail or e, sql)
            if entry_id is not None:
                self._store(entry_id, None)
            raise EngineFailure() from None
        finally:
            deadline.stop()

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

    def _texts(self, sql: str, parameters: Parameters) -> tuple[str, str]:
        """The bound query's normalised text (what is planned) and the text its stored
        answers are keyed by; memoised per SQL text and parameters, because BI tools and
        dashboards send the same text again and again (parsing it twice costs ~0.5 ms)."""
        try:
            memo: tuple[object, ...] | None = (sql, _frozen(parameters))
            hash(memo)
        except TypeError:  # unhashable parameter values: no memo
            memo = None
        if memo is None:
            return self._bound_texts(sql, parameters)
        return self._memo.get_or_compute(memo, lambda: self._bound_texts(sql, parameters))

    def _bound_texts(self, sql: str, parameters: Parameters) -> tuple[str, str]:
        tree = bind_tree(sql, parameters)
        return tree.sql(dialect=_DIALECT, comments=False), self.key_text(tree)

    def cache_key(self, tree: exp.Expression, p: Plan) -> str:
        """The key of stored answers for ``tree`` (see :meth:`key_text`) planned as ``p``."""
        return self._answer_key(self.key_text(tree), p)

    def _answer_key(self, text: str, p: Plan) -> str:
        key = json.dumps([1, self._scope, text, repr(float(p.epsilon)), repr(float(p.delta)),
                          p.mechanism])
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
    def _stored(data: bytes | None, p: Plan) -> Result | None:
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
        names = p.query.output_names
        if len(names) != len(result.columns):
            return None
        result.columns = [ResultColumn(name, c.type, c.accuracy_unit)
                          for name, c in zip(names, result.columns, strict=True)]
        return result

    def explain(self, sql: str, epsilon: float = 1.0, delta: float = 0.0,
                mechanism: str = "laplace", parameters: Parameters = None) -> Explanation:
        """The rewritten SQL and every cell's noise, without reading data or charging."""
        return explain(self.plan(sql, epsilon, delta, mechanism, parameters), self.engine)

    def budget(self, analyst: str | None = None) -> BudgetStatus | None:
        """What ``analyst`` (resolved as for queries) has spent and has left; None when the
        database is unmetered."""
        if self.ledger is None:
            return None
        return self.ledger.status(resolve_analyst(analyst, self.analyst))

    def close(self) -> None:
        if self.ledger is not None:
            self.ledger.close()
        self.engine.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- the owner's limits -----------------------------------------------------------------------

#: The data owner's log: what the analyst must not see (the engine's own error messages, which
#: may quote private values) and the queries stopped by the statement_timeout.
owner_log = logging.getLogger("dpsql.owner")

#: The stored answer of a charged query on which the engine failed (see :meth:`Database.run`).
ENGINE_FAILURE_ANSWER = b'{"format":1,"failure":"engine"}'


class Deadline:
    """Interrupts the engine on ``cursor`` once ``seconds`` have passed, unless stopped first.

    The lock makes the interrupt happen only while the query may still be running: after
    :meth:`stop` returns, the watchdog can no longer touch the cursor (whose next query belongs
    to someone else). One watchdog thread serves every deadline of the process (a thread per
    query cost 0.2 ms)."""

    def __init__(self, cursor: Any, seconds: float) -> None:
        self._cursor = cursor
        self._lock = threading.Lock()
        self._active = True
        self.fired = False
        _WATCHDOG.add(time.monotonic() + seconds, self)

    @property
    def active(self) -> bool:
        return self._active

    def fire(self) -> None:
        with self._lock:
            if self._active:
                self.fired = True
                self._cursor.interrupt()

    def stop(self) -> None:
        with self._lock:
            self._active = False
            self._cursor = None  # the watchdog may hold this object until its due time


class _Watchdog:
    """A daemon thread that fires each :class:`Deadline` at its time (stopped ones are fired
    too, and do nothing)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Deadline]] = []
        self._wake = threading.Condition()
        self._count = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, when: float, deadline: Deadline) -> None:
        with self._wake:
            self._count += 1
            if len(self._due) >= 1024:  # mostly stopped deadlines, due minutes from now
                self._due = [d for d in self._due if d[2].active]
                heapq.heapify(self._due)
            heapq.heappush(self._due, (when, self._count, deadline))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="dpsql-deadlines",
                                                daemon=True)
                self._thread.start()
            if self._due[0][2] is deadline:
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closed and (not self._due or
                                            self._due[0][0] > time.monotonic()):
                    self._wake.wait(self._due[0][0] - time.monotonic() if self._due else None)
                if self._closed:
                    return
                _, _, deadline = heapq.heappop(self._due)
            deadline.fire()

    def close(self) -> None:
        """End the thread (at exit: a thread still waiting then keeps DuckDB's objects from
        being freed, and DuckDB's bindings report them as leaks)."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout=1)


_WATCHDOG = _Watchdog()
atexit.register(_WATCHDOG.close)


def pad_to_grid(started: float, grid: float) -> None:
    """Sleep until the next multiple of ``grid`` seconds after ``started`` (time.monotonic()),
    so that when an outcome is released shows only which grid cell its running time fell in.
    ``grid = 0``: return at once."""
    if grid <= 0:
        return
    elapsed = time.monotonic() - started
    target = started + max(1, math.ceil(elapsed / grid)) * grid
    while (left := target - time.monotonic()) > 0:  # sleep may wake early on some platforms
        time.sleep(left)
