"""A stored answer found from the query as typed, before the planner is imported.

``dpsql query`` asked again returns the stored answer at no cost (:mod:`dpsql.database`, step
3). That answer is stored under a key made from the *bound, normalised* query
(:meth:`dpsql.database.Database.key_text`, sqlglot's text of the parsed tree) on the opened
database, so finding it takes sqlglot, DuckDB, numpy and the engine: about a second for a
command line that then prints a stored table. This module lets the command line skip that:

* after a query is answered the normal way, :func:`remember` writes, in a small SQLite index
  beside the ledger (``<ledger>.typed``), the *typed key* of the call -- the text exactly as
  typed, epsilon, delta, mechanism and contribution bounds as given, the analyst, the database
  and the whole metadata (its file and every setting in it), the caveats option -- and the
  ledger key its answer is stored under, with the column names and caveats the analyst was
  shown;
* :func:`stored_answer`, asked the same typed key, reads the answer from the ledger under that
  ledger key, for that analyst (:meth:`dpsql.ledger.budget.Ledger.lookup`, exactly the lookup
  of the normal path), importing neither sqlglot, DuckDB nor numpy.

**Why it answers only what the normal path would.** The ledger key is a function of the typed
key's parts: the text is parsed, bound and normalised (by this dpsql: an upgrade that
normalised differently would still find the answer paid for under the same typed text); epsilon
defaults to the analyst's ``query_epsilon`` in the metadata; the per-query limits, the tables
and their declarations are the metadata's; the scope is the database's location. The one other
input, the clock, is left out: a text that may name it (``NOW()``, ``CURRENT_DATE``) is never
indexed (its answer is keyed by the instant it was asked at). Nothing is released that the
analyst was not already shown: the answer is theirs, stored with its charge in the ledger,
whose lookup still checks the analyst and finds only their own answers; the index holds hashes,
column names and caveats (post-processing of that answer, :mod:`dpsql.execution.caveats`).
Whatever is missing, unreadable or different -- no index, another analyst, a changed metadata,
a stored engine failure, a retention estimate -- falls through to the normal path, which plans,
checks and charges as always. One thing the shortcut does not redo: checking the metadata
against the database's schema, done when the answer was first stored; the normal path does
not key stored answers by the data either (a stored answer is returned after the data changed).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from dpsql.errors import Error
from dpsql.execution.result import Result, ResultColumn
from dpsql.ledger.answers import ENGINE_FAILURE_ANSWER, decode_result
from dpsql.ledger.budget import BudgetStatus, Cost
from dpsql.ledger.opening import ledger_path, open_ledger, resolve_analyst
from dpsql.metadata.contribution import ContributionBounds
from dpsql.metadata.metadata import Metadata, load_metadata
from dpsql.metadata.sample import sample_paths

if TYPE_CHECKING:
    from dpsql.execution.retention import Retention

log = logging.getLogger(__name__)

_FORMAT = 1
_SCHEMA = ("CREATE TABLE IF NOT EXISTS typed (key TEXT PRIMARY KEY, answer_key TEXT NOT NULL, "
           "shown TEXT NOT NULL)")


@dataclass
class Answer:
    """A query's result with what it cost: ``cost`` is the new charge (None when nothing was
    charged: a reused answer, or an unmetered database). ``key``: the ledger key its answer is
    stored under (None when it is not stored: free answers, local rows, unmetered)."""

    result: Result
    sql: str  # the normalised SQL that was answered
    analyst: str | None
    cost: Cost | None
    reused: bool = False
    #: The estimate of what the bounds keep, when asked (:mod:`dpsql.execution.retention`), and
    #: its own charge (None: reused, unmetered, or exact from the metadata).
    retention: Retention | None = None
    retention_cost: Cost | None = None
    key: str | None = None


@dataclass(frozen=True)
class Asked:
    """A query as typed: the arguments of :meth:`dpsql.database.Database.run` that the answer
    key depends on, before anything is parsed (``epsilon`` None: the analyst's default)."""

    sql: str
    epsilon: float | None
    delta: float
    mechanism: str
    bounds: ContributionBounds | None
    analyst: str | None
    caveats: bool = True


#: What the database and metadata were given as (``dpsql.cli.defaults.sources``): both, or
#: neither for the sample data.
Source = tuple[str | None, Path | None]


def stored_answer(source: Source, asked: Asked) -> tuple[Answer, BudgetStatus] | None:
    """The stored answer to ``asked`` and the analyst's budget, if :func:`remember` indexed it
    and the ledger still holds it; else None (the caller takes the normal path)."""
    try:
        metadata = load_metadata(_located(source)[1])
        if metadata.budget is None or not metadata.budget.reuse_answers:
            return None
        index = _index_path(metadata)
        if index is None or not index.exists():
            return None
        who = resolve_analyst(asked.analyst)
        with closing(sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=1.0)) as conn:
            row = conn.execute("SELECT answer_key, shown FROM typed WHERE key = ?",
                               (typed_key(source, metadata, who, asked),)).fetchone()
        if row is None:
            return None
        ledger = open_ledger(metadata)
        if ledger is None:
            return None
        with ledger:
            data = ledger.lookup(who, row[0])
            if data is None or data == ENGINE_FAILURE_ANSWER:  # the normal path says why
                return None
            result, shown = decode_result(data), json.loads(row[1])
            if len(shown["names"]) != len(result.columns):
                return None
            result.columns = [ResultColumn(name, c.type, c.accuracy_unit)
                              for name, c in zip(shown["names"], result.columns, strict=True)]
            result.caveats = list(shown["caveats"])  # as Database.run attaches them
            result.notes.extend(n for n in result.caveats if n not in result.notes)
            return Answer(result, shown["sql"], who, None, reused=True), ledger.status(who)
    except (Error, OSError, sqlite3.Error, ValueError, KeyError, TypeError) as e:
        log.debug("no stored answer from the typed text: %s", e)
        return None


class AnsweringDatabase(Protocol):
    """What :func:`remember` reads of the :class:`~dpsql.database.Database` that answered (a
    protocol: the database imports :class:`Answer` from here, so this module cannot import
    it)."""

    @property
    def metadata(self) -> Metadata: ...

    @property
    def reuse_answers(self) -> bool: ...


def remember(source: Source, db: AnsweringDatabase, asked: Asked, answer: Answer) -> None:
    """Index ``answer`` (just given to ``asked`` on ``db``, opened from ``source``) by its
    typed key, so that :func:`stored_answer` finds it (nothing when it is not stored)."""
    from dpsql.query.dates import reads_clock

    if answer.key is None or answer.analyst is None or not db.reuse_answers or \
            reads_clock(asked.sql):
        return
    index = _index_path(db.metadata)
    if index is None:
        return
    shown = {"sql": answer.sql, "names": [c.name for c in answer.result.columns],
             "caveats": list(answer.result.caveats)}
    try:
        with closing(sqlite3.connect(index, timeout=1.0)) as conn, conn:
            conn.execute(_SCHEMA)
            conn.execute("INSERT OR REPLACE INTO typed VALUES (?, ?, ?)",
                         (typed_key(source, db.metadata, answer.analyst, asked), answer.key,
                          json.dumps(shown)))
    except (OSError, sqlite3.Error) as e:  # only a later repetition is slower
        log.debug("the typed text was not indexed: %s", e)


def typed_key(source: Source, metadata: Metadata, analyst: str, asked: Asked) -> str:
    """The key of the index: every input of the ledger key, as typed (module docstring);
    ``metadata`` is the one ``source`` names."""
    database, metadata_path = _located(source)
    parts = [_FORMAT, database, os.path.abspath(metadata_path),
             json.dumps(metadata.raw, sort_keys=True, default=str), analyst, asked.sql,
             None if asked.epsilon is None else repr(float(asked.epsilon)),
             repr(float(asked.delta)), asked.mechanism, repr(asked.bounds), asked.caveats]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _located(source: Source) -> tuple[str, Path]:
    """The database (a file or folder as an absolute path; a URL as written) and metadata."""
    database, metadata = source
    if database is None or metadata is None:
        sample, sample_metadata = sample_paths()
        database, metadata = str(sample), Path(sample_metadata)
    return (os.path.abspath(database) if os.path.exists(database) else database), metadata


def _index_path(metadata: Metadata) -> Path | None:
    ledger = ledger_path(metadata)
    return None if ledger is None else ledger.with_name(ledger.name + ".typed")
