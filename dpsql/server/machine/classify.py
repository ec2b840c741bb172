"""What a statement is, decided from its text alone (no session, no socket, no data).

* ``SET``/``SHOW``/``RESET``, ``BEGIN``/``COMMIT``/``ROLLBACK``, ``SAVEPOINT``, ``DISCARD``,
  ``DEALLOCATE``, ``LISTEN``: session commands, answered by the session itself;
* ``DECLARE``/``FETCH``/``MOVE``/``CLOSE``: server-side cursors (their query classified too);
* a SELECT that reads only ``pg_catalog``, ``information_schema`` or no table, and calls no
  engine or file function: a catalog query, answered by the
  :class:`~dpsql.server.catalog.Catalog`, which holds no data;
* ``EXPLAIN``: the plan of the query it wraps;
* everything else -- every query that names a declared table, and every statement that is not
  understood -- is a private query: it goes to :meth:`dpsql.Database.query`, whose checks
  answer it privately or refuse it.

The deny lists below keep the catalog's surface small; they are not what keeps private data
private (the catalog engine holds none): a query they turn away goes to the library, which
refuses it with its own message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import cast

import sqlglot
from sqlglot import Dialect, exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from dpsql.cache import LRU
from dpsql.errors import QueryTooComplex
from dpsql.query.denied import CATALOG_ALLOWED, denied
from dpsql.query.parse import check_size, check_tree_depth
from dpsql.server.catalog import function_name, pg_column_names, remember_names
from dpsql.server.machine import cursors
from dpsql.server.wire import paramtypes, sqltext

_TABLE_FUNCTIONS = {"generate_series", "exploding_generate_series", "unnest", "explode", "range",
                    "pg_get_keywords", "pg_show_all_settings", "json_each", "regexp_split_to_table",
                    "string_to_table"}

# -- statements ------------------------------------------------------------------------------


class StatementKind(StrEnum):
    """What a statement is to the server: which handler answers it (dpsql.server.machine.commands,
    machine). A query goes to Database; a catalog query to the catalog; the rest are
    session commands and cursors."""

    EMPTY = "empty"
    QUERY = "query"
    CATALOG = "catalog"
    EXPLAIN = "explain"
    SET = "set"
    SHOW = "show"
    RESET = "reset"
    BEGIN = "begin"
    COMMIT = "commit"
    ROLLBACK = "rollback"
    ROLLBACK_TO = "rollback_to"
    SAVEPOINT = "savepoint"
    RELEASE = "release"
    DISCARD = "discard"
    DEALLOCATE = "deallocate"
    NOOP = "noop"
    DECLARE = "declare"
    FETCH = "fetch"
    MOVE = "move"
    CLOSE = "close"


@dataclass
class Statement:
    """One SQL statement, classified once (cached by text)."""

    text: str
    kind: StatementKind
    tag: str = ""  # the CommandComplete tag of session commands
    tree: exp.Expression | None = None  # PostgreSQL-dialect parse (catalog and names)
    engine_sql: str = ""  # the text handed to Database (private queries)
    names: list[str] | None = None  # PostgreSQL's column names
    nparams: int = 0
    argument: str = ""  # SHOW/RESET/DEALLOCATE target; FETCH/MOVE/CLOSE cursor (None: ALL)
    declaration: cursors.Declaration | None = None  # DECLARE: what it says
    inner: Statement | None = None  # DECLARE: its query, classified
    direction: cursors.Direction | None = None  # FETCH/MOVE
    error: str = ""  # a cursor statement that cannot be read (sent as 42601 when run)


_COMMANDS = {"BEGIN": ("begin", "BEGIN"), "START": ("begin", "START TRANSACTION"),
             "COMMIT": ("commit", "COMMIT"), "END": ("commit", "COMMIT"),
             "ROLLBACK": ("rollback", "ROLLBACK"), "ABORT": ("rollback", "ROLLBACK"),
             "SAVEPOINT": ("savepoint", "SAVEPOINT"), "RELEASE": ("release", "RELEASE"),
             "SET": ("set", "SET"), "SHOW": ("show", "SHOW"), "RESET": ("reset", "RESET"),
             "DISCARD": ("discard", "DISCARD ALL"), "DEALLOCATE": ("deallocate", "DEALLOCATE"),
             "UNLISTEN": ("noop", "UNLISTEN"), "LISTEN": ("noop", "LISTEN")}


class Classifier:
    """Classifies statement texts; shared by the sessions of a server (cached)."""

    def __init__(self, declared: set[str], catalog_tables: set[str], size: int = 2048,
                 columns: paramtypes.ColumnTypes | None = None) -> None:
        self.declared = declared
        self.catalog_tables = catalog_tables
        self.columns: paramtypes.ColumnTypes = columns or {}
        self._cache: LRU[str, Statement] = LRU(size)
        self._inferred: LRU[str, dict[int, int]] = LRU(size)
        # a private query's output names by its numbers-free template (see _query)
        self._templates: LRU[_Template, tuple[list[str] | None]] = LRU(size)

    def classify(self, text: str) -> Statement:
        return self._cache.get_or_compute(text, lambda: self._classify(text))

    def inferred(self, statement: Statement) -> dict[int, int]:
        """The parameter types the statement's text implies (casts, compared columns)."""
        if not statement.nparams:
            return {}
        text = statement.inner.text if statement.inner is not None else statement.text
        return self._inferred.get_or_compute(text, lambda: paramtypes.infer(text, self.columns))

    def _classify(self, text: str) -> Statement:
        try:
            # Before any scan or parse: too long or too deep goes to the library as written,
            # which refuses it with the same check (54001).
            check_size(text)
        except QueryTooComplex:
            return Statement(text, "query", engine_sql=text)
        try:
            if sqltext.is_blank(text):
                return Statement(text, StatementKind.EMPTY)
            nparams = sqltext.parameters(text)
        except sqltext.SQLTextError as e:
            return Statement(text, StatementKind.QUERY, engine_sql=text, nparams=0, argument=str(e))
        words = sqltext.keywords(text, 4)
        first = words[0] if words else ""
        if first in ("DECLARE", "FETCH", "MOVE", "CLOSE"):
            return self._cursor_statement(text, first, nparams)
        if first in _COMMANDS:
            return _command(text, words, nparams)
        if first == "EXPLAIN":
            body = re.sub(r"^\s*EXPLAIN(\s+\((?:[^)]*)\))?(\s+(ANALYZE|VERBOSE))*\s+", "",
                          sqltext.strip_comments(text), flags=re.I)
            inner = self._classify(body)
            return Statement(text, StatementKind.EXPLAIN, engine_sql=inner.engine_sql or body,
                             nparams=nparams)
        return self._query(text, nparams)

    def _cursor_statement(self, text: str, first: str, nparams: int) -> Statement:
        statement = Statement(text, StatementKind(first.lower()), nparams=nparams)
        try:
            if first == "DECLARE":
                statement.declaration = cursors.parse_declare(text)
                statement.inner = self._classify(statement.declaration.query)
                statement.tag = "DECLARE CURSOR"
            elif first == "CLOSE":
                name = cursors.parse_close(text)
                statement.argument = name or ""
                statement.tag = "CLOSE CURSOR" + (" ALL" if name is None else "")
            else:
                statement.direction, statement.argument = cursors.parse_fetch(text)
        except cursors.CursorSyntaxError as e:
            statement.error = str(e)
        return statement

    def _query(self, text: str, nparams: int) -> Statement:
        """A query, classified from its PostgreSQL parse -- or, for a text that differs from
        one parsed before only in its numbers (a dashboard's moving filter value, issue 39),
        from that text's classification, without a parse: numbers are leaves of the parse,
        whatever their value, so the tree has the same tables, functions and output names.
        Only a private query (the library's checks answer it) is classified so, and only one
        whose engine text is its own text; a catalog query is parsed every time."""
        template = _template(text)
        known = self._templates.get(template) if template is not None else None
        if known is not None:
            names = known[0]
            return Statement(text, StatementKind.QUERY, engine_sql=text,
                             names=None if names is None else list(names), nparams=nparams)
        statement = self._parsed_query(text, nparams)
        if template is not None and statement.kind is StatementKind.QUERY and \
                statement.tree is not None and statement.engine_sql is text:
            self._templates.put(template, (statement.names,))
        return statement

    def _parsed_query(self, text: str, nparams: int) -> Statement:
        cleaned = clean(text)
        try:
            # cast: sqlglot types parse results as its Expr trait; every node is an Expression
            tree = cast(exp.Expression, sqlglot.parse_one(cleaned, read="postgres"))
            if tree is not None:
                check_tree_depth(tree)
        except (SqlglotError, ValueError, RecursionError, QueryTooComplex):
            tree = None
        if tree is None:
            return Statement(text, StatementKind.QUERY, engine_sql=text, nparams=nparams)
        try:
            if isinstance(tree, exp.Select | exp.SetOperation) and self._is_catalog(tree):
                return Statement(text, StatementKind.CATALOG, tree=tree, nparams=nparams)
            remember_names(tree, cleaned)  # DATE_TRUNC is named date_trunc, as written
            names = pg_column_names(tree)
            return Statement(text, StatementKind.QUERY, tree=tree,
                             engine_sql=self._engine_sql(text, tree), names=names,
                             nparams=nparams)
        except RecursionError:  # the library reads it again, and refuses it (54001)
            return Statement(text, StatementKind.QUERY, engine_sql=text, nparams=nparams)

    def _is_catalog(self, tree: exp.Expression) -> bool:
        """No table other than catalog tables (or CTEs), and no engine or file function:
        nothing private can be reached. (The catalog holds no data anyway; this keeps its
        surface small and lets the library refuse such queries with its own message.)"""
        for fn in tree.find_all(exp.Func):
            name = function_name(fn)
            if denied(name, CATALOG_ALLOWED):  # engine internals, files, settings, secrets
                return False
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for table in tree.find_all(exp.Table):
            name, schema = table.name.lower(), table.db.lower()
            if not name:  # a table function, e.g. generate_series(1, 3)
                function = table.this
                if not isinstance(function, exp.Func) or \
                        function_name(function) not in _TABLE_FUNCTIONS:
                    return False
                continue
            if schema in ("pg_catalog", "information_schema"):
                continue
            if not schema and (name in ctes or name in self.catalog_tables) and \
                    name not in self.declared:
                continue
            return False
        return True

    def _engine_sql(self, text: str, tree: exp.Expression) -> str:
        """The text for the engine: as written, unless it names tables in schema ``public``
        (PostgreSQL's default schema), which is then dropped (DuckDB text from sqlglot)."""
        qualified = [tb for tb in tree.find_all(exp.Table)
                     if tb.db.lower() == "public" and tb.name.lower() in self.declared]
        if not qualified:
            return text
        tree = tree.copy()
        for tb in tree.find_all(exp.Table):
            if tb.db.lower() == "public":
                tb.set("db", None)
                tb.set("catalog", None)
        for col in tree.find_all(exp.Column):
            if col.db.lower() == "public":
                col.set("db", None)
                col.set("catalog", None)
        try:
            return tree.sql(dialect="duckdb")
        except SqlglotError:
            return text


def _command(text: str, words: list[str], nparams: int) -> Statement:
    """A session command, by its first keywords."""
    kind, tag = _COMMANDS[words[0]]
    statement = Statement(text, StatementKind(kind), tag, nparams=nparams)
    if kind == "rollback" and (words[1:2] == ["TO"] or
                               words[1:3] in (["TRANSACTION", "TO"], ["WORK", "TO"])):
        statement.kind = StatementKind.ROLLBACK_TO
    if kind in ("show", "reset", "deallocate", "discard"):
        statement.argument = _target(text)
        if kind == "discard":
            statement.tag = "DISCARD " + (words[1] if len(words) > 1 else "ALL")
    if kind in ("show", "reset"):
        statement.argument = _SPECIAL_TARGETS.get(tuple(words[1:3])) or \
            _SPECIAL_TARGETS.get(tuple(words[1:2]), statement.argument)
    return statement


# SHOW and RESET of settings PostgreSQL's grammar names in several words
_SPECIAL_TARGETS = {("TRANSACTION",): "transaction_isolation", ("TIME", "ZONE"): "timezone",
                    ("SESSION", "AUTHORIZATION"): "session_authorization"}


def clean(text: str) -> str:
    """The text as sqlglot can parse it: PostgreSQL-only spellings sqlglot misreads rewritten.

    Read as sqlglot's PostgreSQL tokens: a string constant (``'...'``, ``E'...'``,
    ``$$...$$``) or a quoted name is one token, and a comment is no token at all, so only SQL
    code is matched and only the matched tokens' span of the text is replaced; everything else
    stays as written. A text that does not tokenize (an unterminated quote) is returned as it
    is, for the parse that follows to refuse."""
    try:
        tokens = _POSTGRES.tokenize(text)
    except (SqlglotError, ValueError):
        return text
    spans = [(t.start, t.end + 1) for t in tokens]
    words = [text[start:end] for start, end in spans]  # as written: quotes included
    edits: list[tuple[int, int, str]] = []
    i = 0
    while i < len(tokens):
        for rule in (_operator, _collate, _catalog_array, _keyword_alias):
            found = rule(spans, words, i)
            if found is not None:
                edits.append(found[0])
                i = found[1]
                break
        else:
            i += 1
    for start, end, replacement in reversed(edits):
        text = text[:start] + replacement + text[end:]
    return text


_POSTGRES = Dialect.get_or_raise("postgres")
#: A text's PostgreSQL tokens, each number's value left out (:func:`_template`).
_Template = tuple[tuple[TokenType, str], ...]


def _template(text: str) -> _Template | None:
    """The text's tokens (type and text; comments and spacing are no tokens), with each
    number's value left out: two texts with one template parse to the same tree but for the
    numbers' values. None when it does not tokenize, or has no number to leave out. A number
    after ``$`` (a parameter's) is kept: it names the parameter."""
    try:
        tokens = _POSTGRES.tokenize(text)
    except (SqlglotError, ValueError):
        return None
    template = []
    numbers = 0
    for i, token in enumerate(tokens):
        if token.token_type is TokenType.NUMBER and \
                (i == 0 or tokens[i - 1].token_type is not TokenType.PARAMETER):
            template.append((TokenType.NUMBER, ""))
            numbers += 1
        else:
            template.append((token.token_type, token.text))
    return tuple(template) if numbers else None
_Edit = tuple[tuple[int, int, str], int]  # (start, end, replacement), the next token's index
_CATALOG_TYPES = re.compile(r"(oid|xid|cid|tid|aclitem|reg[a-z]+)", re.I)


def _is(words: list[str], i: int, *expected: str) -> bool:
    """Whether the tokens from ``i`` are written as ``expected`` (case-insensitive)."""
    return i + len(expected) <= len(words) and all(
        w.upper() == e for w, e in zip(words[i:], expected, strict=False))


def _operator(spans: list[tuple[int, int]], words: list[str], i: int) -> _Edit | None:
    """``OPERATOR(pg_catalog.~)`` -> ``~`` (psql's and JDBC's catalog queries)."""
    if not _is(words, i, "OPERATOR", "(", "PG_CATALOG", "."):
        return None
    close = next((j for j in range(i + 5, min(i + 8, len(words))) if words[j] == ")"), None)
    if close is None:
        return None
    operator = "".join(words[i + 4:close])
    return (spans[i][0], spans[close][1], operator), close + 1


def _collate(spans: list[tuple[int, int]], words: list[str], i: int) -> _Edit | None:
    """`` COLLATE [pg_catalog.]"default"`` -> nothing (DuckDB has no such collation)."""
    if i == 0 or not _is(words, i, "COLLATE"):
        return None
    j = i + 3 if _is(words, i + 1, "PG_CATALOG", ".") else i + 1
    if j >= len(words) or words[j].strip('"').lower() != "default":
        return None
    return (spans[i - 1][1], spans[j][1], ""), j + 1


def _catalog_array(spans: list[tuple[int, int]], words: list[str], i: int) -> _Edit | None:
    """``::oid[]`` -> ``:: pg_catalog.oid[]``: sqlglot reads an unqualified catalog type's
    array as a subscript and fails; schema-qualified, it parses (asyncpg's type
    introspection writes ``$1::oid[]``)."""
    if words[i].upper() not in ("::", "AS") or not _is(words, i + 2, "[", "]") or \
            not _CATALOG_TYPES.fullmatch(words[i + 1]):
        return None
    return (spans[i][1], spans[i + 3][1], f" pg_catalog.{words[i + 1]}[]"), i + 4


# A keyword after AS is a column name to PostgreSQL; sqlglot reads it as the keyword, so it is
# quoted (lower case, as PostgreSQL folds it): Metabase's table-privileges query says
# "... as select, ... as delete". AS before a statement keyword starts nothing else in a SELECT
# (a CTE's body is parenthesised).
_ALIAS_KEYWORDS = ("select", "insert", "update", "delete", "table")


def _keyword_alias(spans: list[tuple[int, int]], words: list[str], i: int) -> _Edit | None:
    """``AS select`` -> ``AS "select"`` (Metabase's table-privileges query)."""
    if words[i].upper() != "AS" or i + 1 >= len(words) \
            or words[i + 1].lower() not in _ALIAS_KEYWORDS:
        return None
    return (spans[i + 1][0], spans[i + 1][1], f'"{words[i + 1].lower()}"'), i + 2


def _target(text: str) -> str:
    """What a SHOW, RESET, DISCARD or DEALLOCATE names: the rest of the statement, lower-case
    unless quoted (DEALLOCATE's optional PREPARE dropped)."""
    m = re.match(r"\s*\w+\s+(?:PREPARE\s+(?=\S))?(.+?)\s*;?\s*$", sqltext.strip_comments(text),
                 re.I | re.S)
    target = (m.group(1) if m else "").strip()
    if target.startswith('"') and target.endswith('"'):
        return target[1:-1].replace('""', '"')
    return target.lower()
