"""Date functions as analysts (and BI tools) write them, in the forms the checker knows.

:func:`spelled` runs when a query is parsed, :func:`normalise` before it is checked. sqlglot
reads PostgreSQL's date functions in the DuckDB dialect as unknown functions or as its own
rewritings (``TO_TIMESTAMP(text, fmt)`` as ``UNIX_TO_TIME``, ``TIMESTAMP`` as
``TIMESTAMPNTZ``); these passes turn them into the few nodes that :mod:`dpsql.query.bounds`
allows, and remember what the analyst wrote (``meta["written"]``) so that
errors quote it:

- ``TO_DATE(text, 'YYYY-MM-DD')`` -> ``StrToDate`` with DuckDB's strptime format ``'%Y-%m-%d'``
  (translated with sqlglot's PostgreSQL mapping), ``TO_TIMESTAMP(text, fmt)`` -> ``StrToTime``;
  ``STRPTIME(text, fmt)`` is already a ``StrToTime``. The format must be a constant made of
  the directives in :data:`FORMAT_DIRECTIVES` (no time zones: ``%z`` would make a TIMESTAMPTZ).
  The engine reads them with TRY_STRPTIME (:mod:`dpsql.query.total_expressions`), a constant is
  evaluated strictly when the query is planned (:mod:`dpsql.query.fold_constants`): a text
  that does not match its format is an :class:`~dpsql.errors.InvalidConstant`, never a row's error.
- ``TO_TIMESTAMP(seconds)`` -> ``UnixToTime``: the UTC TIMESTAMP that many seconds after
  1970-01-01 (PostgreSQL gives a TIMESTAMPTZ; dpsql reads every instant in UTC).
- ``DATE_PART('year', d)`` -> ``EXTRACT(YEAR FROM d)``.
- ``TIMESTAMP`` (sqlglot's ``TIMESTAMPNTZ``) -> ``TIMESTAMP``; a constant cast to
  ``TIMESTAMPTZ`` (psycopg2 sends aware datetimes as ``'...+00:00'::timestamptz``) -> the UTC
  TIMESTAMP it denotes. A column cast to TIMESTAMPTZ stays, and is refused by the checker.

Nothing here reads data: the rewriting depends on the query text only.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import SqlglotError
from sqlglot.time import format_time

from dpsql.errors import InvalidConstant

#: sqlglot's type names: a cast built from one is not parsed (from a string it is, ~0.1 ms).
DType = exp.DataType.Type

#: strptime directives a format may use (after translation from PostgreSQL's): dates and
#: times of day, no time zones.
FORMAT_DIRECTIVES = frozenset("YymdjHIMSfbBaAp%")
_DIRECTIVE = re.compile(r"%-?(.)")
_TZ = DType.TIMESTAMPTZ
_NTZ = DType.TIMESTAMPNTZ


def spelled(tree: exp.Expression) -> exp.Expression:
    """At parse time, the forms whose SQL text sqlglot would regenerate wrongly or under
    another name: ``TO_TIMESTAMP(text, fmt)`` stays ``TO_TIMESTAMP`` (sqlglot reads it as
    UNIX_TO_TIME and writes ``TO_TIMESTAMP(text / POWER(10, fmt))``), ``TIMESTAMPNTZ`` is
    ``TIMESTAMP``. The normalised text of a query (its answer key) is written from this tree."""
    return tree.transform(_spelled, copy=False)


def _spelled(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.DataType) and node.this == _NTZ:
        return exp.DataType.build(DType.TIMESTAMP)
    if isinstance(node, exp.UnixToTime):  # refused with one argument, under its own name
        scale = node.args.get("scale")
        return exp.Anonymous(this="TO_TIMESTAMP", expressions=[node.this] + (
            [scale] if scale is not None else []))
    return node


def normalise(tree: exp.Expression) -> exp.Expression:
    """Before checking, the date functions in the forms the checker knows (see the module)."""
    return tree.transform(_normalised, copy=False)


def written(node: exp.Expr) -> str:
    """What the analyst wrote for ``node``, as refusals quote it: its DuckDB SQL, where each
    part that remembers what the analyst wrote (``meta["written"]``: a date function before
    :func:`normalise`, a joined column before :mod:`dpsql.query.bind_joins` named it
    ``alias__column``) is shown as written."""
    if _written(node):
        return _written(node)
    if not any(_written(n) for n in node.walk()):
        return node.sql(dialect="duckdb")
    shown = node.copy().transform(
        lambda n: exp.Var(this=_written(n)) if _written(n) else n, copy=False)
    return shown.sql(dialect="duckdb")


def _written(node: exp.Expr) -> str:
    meta = getattr(node, "_meta", None)  # read without creating it (node.meta would)
    return str(meta.get("written") or "") if meta else ""


_STRPTIME = {"TO_DATE": exp.StrToDate, "TO_TIMESTAMP": exp.StrToTime}


def _normalised(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Cast) and node.to.this == _TZ and _is_text(node.this):
        return _utc_literal(node)
    if isinstance(node, exp.Anonymous):
        name = node.name.upper()
        if name in _STRPTIME and len(node.expressions) == 2:
            return _strptime(_STRPTIME[name], node, *node.expressions)
        if name == "TO_TIMESTAMP" and len(node.expressions) == 1:  # seconds since 1970, UTC
            epoch = exp.UnixToTime(this=node.expressions[0])
            epoch.meta["written"] = node.sql(dialect="duckdb")
            return epoch
        if name == "DATE_PART" and len(node.expressions) == 2 and _is_text(node.expressions[0]):
            part, value = node.expressions
            return exp.Extract(this=exp.var(part.name.upper()), expression=value)
    if isinstance(node, exp.StrToTime) and "written" not in node.meta:
        node.meta["written"] = node.sql(dialect="duckdb")
        check_format(node.args.get("format"), node.meta["written"], translated=True)
    return node


def _strptime(kind: type[exp.Func], node: exp.Expression, text: exp.Expression,
              fmt: exp.Expression) -> exp.Expression:
    what = node.sql(dialect="duckdb")
    check_format(fmt, what, translated=False)
    translated = format_time(fmt.name, Postgres.TIME_MAPPING, Postgres.TIME_TRIE) or ""
    check_format(exp.Literal.string(translated), what, translated=True)
    out = cast(exp.Expression, kind(this=text, format=exp.Literal.string(translated)))
    out.meta["written"] = what
    return out


def check_format(fmt: exp.Expression | None, what: str, translated: bool) -> None:
    """A format must be a constant text; translated, it may use :data:`FORMAT_DIRECTIVES`
    only (DuckDB refuses an unknown directive when a row reaches it; %z would give a time
    zone)."""
    if not _is_text(fmt):
        raise InvalidConstant(f"{what}: the format must be a constant text such as "
                              "'YYYY-MM-DD'")
    if not translated:
        return
    assert fmt is not None
    bad = sorted({d for d in _DIRECTIVE.findall(fmt.name) if d not in FORMAT_DIRECTIVES})
    if bad or (fmt.name.endswith("%") and not fmt.name.endswith("%%")) or not fmt.name:
        raise InvalidConstant(
            f"{what}: the format has parts dpsql cannot read ({', '.join(bad) or 'empty'}); "
            "use YYYY, MM, DD, HH24, MI, SS (TO_DATE) or %Y, %m, %d, %H, %M, %S (STRPTIME), "
            "without time zones")


def _is_text(node: exp.Expression | None) -> bool:
    return isinstance(node, exp.Literal) and node.is_string


def _utc_literal(node: exp.Cast) -> exp.Expression:
    """``'2025-06-01 00:00:00+02'::TIMESTAMPTZ`` as the UTC TIMESTAMP it denotes."""
    text = node.this.name
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidConstant(f"{node.sql(dialect='duckdb')}: '{text}' is not a timestamp; "
                              "write one such as '2025-06-01 00:00:00+00'") from None
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), DType.TIMESTAMP)


def date_text(text: str) -> str:
    """A text compared with a date, read as PostgreSQL reads it: a timestamp with a zone at
    midnight UTC is that UTC date (how drivers send an aware date), any other timestamp text
    is its date as written (time and zone dropped); any other text as is."""
    stripped = text.strip()
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2})\s*([+-]\d{2}(?::?\d{2})?|Z|UTC)", stripped)
    if match:  # '2025-06-01 +00': a date with a zone
        zone = "+00" if match.group(2) in ("Z", "UTC") else match.group(2)
        stripped = f"{match.group(1)} 00:00:00{zone}"
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}[ T].+", stripped):
        return text
    try:
        value = dt.datetime.fromisoformat(stripped)
    except ValueError:
        return text  # not ISO: left to DuckDB's cast, which refuses it or reads it
    if value.tzinfo is not None and value.astimezone(dt.UTC).time() == dt.time(0):
        return value.astimezone(dt.UTC).date().isoformat()  # a driver's aware date
    # Any other time of day: the date as written, time and zone dropped, as PostgreSQL's
    # date input reads it ('2025-03-07T23:59:59.999Z' is 2025-03-07: Grafana's
    # $__timeFilter(day) on a date column keeps its last day).
    return value.date().isoformat()


def timestamp_text(text: str) -> str:
    """A text compared with a timestamp: one with a zone (``'2025-06-01 02:00:00+02'``, as
    drivers send aware datetimes) is the UTC instant it denotes, since dpsql reads every
    timestamp in UTC; any other text as is (DuckDB's cast reads it, or it is refused)."""
    stripped = text.strip()
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2})\s*([+-]\d{2}(?::?\d{2})?|Z|UTC)", stripped)
    if match:  # '2025-06-01 +00': midnight in that zone
        zone = "+00:00" if match.group(2) in ("Z", "UTC") else match.group(2)
        stripped = f"{match.group(1)} 00:00:00{zone}"
    stripped = re.sub(r"\s*(Z|UTC)$", "+00:00", stripped)
    try:
        value = dt.datetime.fromisoformat(stripped)
    except ValueError:
        return text
    if value.tzinfo is None:
        return text
    return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat(sep=" ")


_CLOCK_NAMES = re.compile(r"\b(now|current_date|current_timestamp|localtimestamp|today|"
                          r"get_current_timestamp|transaction_timestamp|statement_timestamp)\b",
                          re.I)
_CLOCK_FUNCTIONS = {"NOW", "TODAY", "GET_CURRENT_TIMESTAMP", "TRANSACTION_TIMESTAMP",
                    "STATEMENT_TIMESTAMP"}


def reads_clock(sql: str) -> bool:
    """Whether ``sql`` may name the clock (:func:`fold_clock` would then fold it): a stored
    answer to such a text is keyed by the instant it was asked at, not by the text alone."""
    return _CLOCK_NAMES.search(sql) is not None


def fold_clock(sql: str, now: dt.datetime | None = None, dialect: str = "duckdb") -> str:
    """``sql`` with the clock read once, now: ``NOW()``, ``CURRENT_TIMESTAMP``,
    ``LOCALTIMESTAMP`` (and DuckDB's and PostgreSQL's other names) become the UTC instant
    ``TIMESTAMP '...'`` and ``CURRENT_DATE``/``TODAY()`` the UTC date ``DATE '...'``.

    The clock is public, so a query's relative filter (``day >= CURRENT_DATE - INTERVAL 7
    DAY``, as Metabase and Grafana send) is a constant like any other, typed and folded when
    the query is planned, never read per row. Folding the *text* keeps every cache honest:
    plans, routes and stored answers are keyed by the folded text, so a plan made at one
    instant is never reused at another. Texts without a clock name are returned as they are
    (nothing parsed); one that does not parse is returned as it is (the parse pass refuses
    it with its message)."""
    if not _CLOCK_NAMES.search(sql):
        return sql
    try:
        statements = sqlglot.parse(sql, read=dialect)
    except SqlglotError:
        return sql
    if len(statements) != 1 or statements[0] is None:
        return sql
    instant = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).replace(tzinfo=None)
    stamp = exp.cast(exp.Literal.string(instant.isoformat(sep=" ")), DType.TIMESTAMP)
    day = exp.cast(exp.Literal.string(instant.date().isoformat()), DType.DATE)

    def fold(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.CurrentTimestamp | exp.Localtimestamp):
            return stamp.copy()
        if isinstance(node, exp.CurrentDate):
            return day.copy()
        if isinstance(node, exp.Anonymous) and node.name.upper() in _CLOCK_FUNCTIONS \
                and not node.expressions:
            return day.copy() if node.name.upper() == "TODAY" else stamp.copy()
        return node

    folded = statements[0].transform(fold)
    return folded.sql(dialect=dialect) if folded != statements[0] else sql


__all__ = ["FORMAT_DIRECTIVES", "check_format", "date_text", "fold_clock", "normalise",
           "spelled", "timestamp_text", "written"]
