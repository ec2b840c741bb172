"""Pass 1, parse: SQL text -> one sqlglot SELECT tree, or a refusal.

Only a single SELECT statement is ever answered. Everything else (DDL, DML, PRAGMA, SET, COPY,
ATTACH, INSTALL, LOAD, CALL, EXPORT, several statements in one string, set operations) is refused
here, before any name is resolved.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import sqlglot
from sqlglot import Token, TokenType, exp
from sqlglot.errors import ParseError, TokenError

from dpsql.errors import (
    NotASingleSelect,
    QueryTooComplex,
    SQLSyntaxError,
    UnsupportedQuery,
    did_you_mean,
)
from dpsql.query.dates import spelled
from dpsql.query.names import remember_names
from dpsql.query.wrappers import unwrapped

# sqlglot logs a warning when it falls back to a generic Command; the refusal says enough.
logging.getLogger("sqlglot").setLevel(logging.ERROR)

# The limits checked on the raw text before sqlglot sees it (:func:`check_size`): sqlglot's
# parser recurses about twenty Python frames per parenthesis (it overflows Python's stack near
# 45 levels) and takes ~0.2 ms per token, so these bound a parse's time, memory and stack.
MAX_SQL_LENGTH = 100_000
MAX_NESTING = 32  # parentheses
MAX_TOKENS = 10_000
# Levels of the parsed tree (an OR chain of n terms is n deep): the passes after the parse
# recurse over it. The cost model's limit on row-level expressions is tighter (dpsql.query.cost).
MAX_TREE_DEPTH = 200
# Quoted text and comments, skipped by the scan (an unterminated one counts as code).
_NOT_CODE = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.S)
_TOKEN = re.compile(r"\w+|[^\w\s]")
_PAREN = re.compile(r"[()]")


def check_size(sql: str) -> None:
    """Refuse (:class:`QueryTooComplex`, 54001) a text too long, too deeply parenthesised or of
    too many tokens to parse in bounded time and stack, with one linear scan that does not
    recurse: every front door runs it before any parse."""
    if len(sql) > MAX_SQL_LENGTH:
        raise QueryTooComplex(f"the query is longer than {MAX_SQL_LENGTH} characters; shorten "
                              "it (long IN lists and OR chains are better as a public table)")
    code = _NOT_CODE.sub(" ", sql)
    depth = 0
    for m in _PAREN.finditer(code):
        depth += 1 if m.group() == "(" else -1
        if depth > MAX_NESTING:
            raise QueryTooComplex(f"the query nests parentheses deeper than {MAX_NESTING} "
                                  "levels; flatten it")
    tokens = sum(1 for _ in _TOKEN.finditer(code))
    if tokens > MAX_TOKENS:
        raise QueryTooComplex(f"the query has {tokens} tokens, more than the {MAX_TOKENS} "
                              "allowed; shorten it (long IN lists and OR chains are better as "
                              "a public table)")


def parse(sql: str, dialect: str = "duckdb") -> exp.Select:
    """Parse ``sql`` and return its only statement, which must be a SELECT."""
    return only_select(parse_query(sql, dialect))


#: Where a syntax error is shown: the text as the analyst wrote it, and the map from a
#: 1-based position in the text parsed to one in it (the text parsed numbers ``?``).
Written = tuple[str, Callable[[int], int]]


def parse_query(sql: str, dialect: str = "duckdb", written: Written | None = None
                ) -> exp.Select | exp.SetOperation:
    """Parse ``sql`` and return its only statement, a SELECT or a set operation of SELECTs
    (answered only over public tables: :mod:`dpsql.execution.public`). ``written``: the text
    a syntax error's position is given in, when ``sql`` is not it."""
    if not isinstance(sql, str) or not sql.strip():
        raise SQLSyntaxError("the query is empty; send one SELECT statement")
    check_size(sql)
    try:
        # A comment after the last ";" comes back as a Semicolon node: not a statement.
        statements = [s for s in sqlglot.parse(sql, read=dialect)
                      if s is not None and not isinstance(s, exp.Semicolon)]
    except RecursionError:  # nesting check_size cannot see (NOT NOT ..., - - ...)
        raise QueryTooComplex("the query nests its expressions too deeply to be read; flatten "
                              "it") from None
    except (ParseError, TokenError) as e:
        keyword = _leading_keyword(sql, dialect)
        if keyword in _OTHER_STATEMENTS:  # e.g. EXPORT DATABASE, which sqlglot cannot parse
            raise NotASingleSelect(
                f"only SELECT queries are answered, and this reads as {keyword}; dpsql never "
                "changes data, settings or files") from None
        raise _syntax_error(sql, dialect, e, written) from None
    if len(statements) != 1:
        raise NotASingleSelect(
            f"the text holds {len(statements)} statements; send exactly one SELECT statement")
    statement = statements[0]
    check_tree_depth(statement)
    remember_names(statement, sql)  # DATE_TRUNC is named date_trunc, as written
    if not isinstance(statement, exp.SetOperation):
        # A tool's SELECT * FROM (q) AS a LIMIT n wrapper is q (dpsql.query.wrappers).
        statement = unwrapped(only_select(statement))
    spelled(statement)  # date functions whose text sqlglot would rewrite (dpsql.query.dates)
    return statement


#: The words a query may begin with (a misspelt one is suggested among them).
_STARTS = ("SELECT", "WITH", "VALUES", "FROM", "EXPLAIN")
_SQLGLOT_PLACE = re.compile(r"\.? *Line \d+, Col: \d+\.?")
_MISSING = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]+'>")


def _syntax_error(sql: str, dialect: str, e: ParseError | TokenError,
                  written: Written | None = None) -> SQLSyntaxError:
    """The refusal of a text that does not parse, with the 1-based position of the token the
    parser stopped at (for a caret: the command line's, psql's from the P field), and that
    place said in lines and columns of characters, as the caret shows it. A text that begins
    with a word that starts no statement (``SELEC``) is pointed at that word, as PostgreSQL
    does, not at the token after it where the parser gave up."""
    first = _first_token(sql, dialect)
    if first is not None and first.token_type == TokenType.VAR:
        word = first.text
        return SQLSyntaxError(f"cannot parse the query: it begins with {word}, which begins "
                              f"no statement{did_you_mean(word, _STARTS)}; a query begins "
                              "with SELECT or WITH", first.start + 1)
    position = _error_position(sql, e)
    reason = _SQLGLOT_PLACE.sub("", _first_line(e)).rstrip(". ")
    missing = _MISSING.match(reason) is not None  # sqlglot's words: a node left incomplete
    if missing:
        reason = "an operand is missing"
    elif reason == "Invalid expression / Unexpected token":
        reason = ""
    if position is None:
        return SQLSyntaxError(f"cannot parse the query: {reason}")
    near = (getattr(e, "errors", None) or [{}])[0].get("highlight") or ""
    end = not sql[position - 1 + len(near):].strip()
    if written is not None:
        sql, position = written[0], written[1](position)
    before = sql[:position - 1]
    where = f"line {before.count(chr(10)) + 1}, column {position - 1 - before.rfind(chr(10))}"
    at = "at end of input" if missing and end else \
        f"at or near {near!r}" if near else "here"
    return SQLSyntaxError(f"cannot parse the query: syntax error {at} ({where})"
                          f"{': ' + reason if reason else ''}", position)


def _first_token(sql: str, dialect: str) -> Token | None:
    try:
        tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(sql)
    except (TokenError, ValueError):
        return None
    return tokens[0] if tokens else None


def _error_position(sql: str, e: ParseError | TokenError) -> int | None:
    """The 1-based offset in ``sql`` of the token sqlglot stopped at: its errors give the line
    and the column of the token's last character."""
    errors = getattr(e, "errors", None) or [{}]
    line, col = errors[0].get("line"), errors[0].get("col")
    if not isinstance(line, int) or not isinstance(col, int) or line < 1:
        return None
    lines = sql.split("\n")
    if line > len(lines):
        return None
    start = max(1, min(col - len(errors[0].get("highlight") or " ") + 1, len(lines[line - 1])))
    return sum(len(text) + 1 for text in lines[:line - 1]) + start


def check_tree_depth(tree: exp.Expr) -> None:
    """Refuse a tree deeper than :data:`MAX_TREE_DEPTH` (measured without recursion)."""
    stack: list[tuple[exp.Expr, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            raise QueryTooComplex(f"the query's expressions nest deeper than {MAX_TREE_DEPTH} "
                                  "levels (a long chain of OR, AND or +, say); flatten it, "
                                  "for example with IN (...)")
        stack.extend((child, depth + 1) for child in node.iter_expressions())


def only_select(statement: exp.Expr) -> exp.Select:
    """``statement`` (from :func:`parse_query`) if it is a SELECT; else the refusal."""
    if isinstance(statement, exp.Select):
        return statement
    if isinstance(statement, exp.SetOperation):
        kind = type(statement).__name__.upper()
        raise UnsupportedQuery(
            f"set operations ({kind}) are not supported; ask each SELECT separately")
    raise NotASingleSelect(
        f"only SELECT queries are answered, and this reads as {_statement_kind(statement)}; "
        "dpsql never changes data, settings or files")


def _statement_kind(statement: exp.Expr) -> str:
    if isinstance(statement, exp.Command):
        return str(statement.this).upper()
    return type(statement).__name__.upper()


# First words of statements that are not queries; used to name them when sqlglot cannot parse.
_OTHER_STATEMENTS = {"ALTER", "ANALYZE", "ATTACH", "BEGIN", "CALL", "CHECKPOINT", "COMMIT", "COPY",
                     "CREATE", "DEALLOCATE", "DELETE", "DESCRIBE", "DETACH", "DROP", "EXECUTE",
                     "EXPLAIN", "EXPORT", "GRANT", "IMPORT", "INSERT", "INSTALL", "LOAD", "MERGE",
                     "PRAGMA", "PREPARE", "RESET", "REVOKE", "ROLLBACK", "SET", "SHOW",
                     "SUMMARIZE", "TRUNCATE", "UPDATE", "UPSERT", "USE", "VACUUM"}


def _leading_keyword(sql: str, dialect: str) -> str:
    first = _first_token(sql, dialect)
    return first.text.upper() if first is not None else ""


def _first_line(error: Exception) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text.replace("\x1b[4m", "").replace("\x1b[0m", "")
