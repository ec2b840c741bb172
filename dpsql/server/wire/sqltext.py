"""A small lexer for PostgreSQL SQL text: split a simple Query into statements, find the
``$n`` parameters of an extended-protocol statement and substitute them.

It knows exactly what can hide a ``;`` or a ``$1``: string constants (``'...'`` with ``''``,
``E'...'`` with backslash escapes), quoted identifiers, dollar-quoted strings (``$tag$...$tag$``),
``--`` comments and nested ``/* */`` comments. It never interprets SQL beyond that; everything
the text means is decided by the checks behind :class:`dpsql.Database`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$")
_PARAM = re.compile(r"\$(\d+)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SQLTextError(ValueError):
    """Unterminated quotes or comments (SQLSTATE 42601)."""


@dataclass
class Token:
    kind: str  # "param" or ";"
    start: int
    end: int
    number: int = 0


def scan(sql: str) -> list[Token]:
    """The ``;`` separators and ``$n`` parameters of ``sql``, outside quotes and comments."""
    tokens: list[Token] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "'":
            escapes = i > 0 and sql[i - 1] in "eE" and (i < 2 or not _ident_char(sql[i - 2]))
            i = _skip_string(sql, i, escapes)
        elif c == '"':
            end = sql.find('"', i + 1)
            while end != -1 and end + 1 < n and sql[end + 1] == '"':
                end = sql.find('"', end + 2)
            if end == -1:
                raise SQLTextError("unterminated quoted identifier")
            i = end + 1
        elif c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end == -1 else end + 1
        elif c == "/" and sql.startswith("/*", i):
            i = _skip_comment(sql, i)
        elif c == "$":
            m = _PARAM.match(sql, i)
            if m and not (i > 0 and _ident_char(sql[i - 1])):
                tokens.append(Token("param", i, m.end(), int(m.group(1))))
                i = m.end()
                continue
            tag = _DOLLAR_TAG.match(sql, i)
            if tag and not (i > 0 and _ident_char(sql[i - 1])):
                end = sql.find(tag.group(0), tag.end())
                if end == -1:
                    raise SQLTextError("unterminated dollar-quoted string")
                i = end + len(tag.group(0))
            else:
                i += 1
        elif c == ";":
            tokens.append(Token(";", i, i + 1))
            i += 1
        else:
            i += 1
    return tokens


def _ident_char(c: str) -> bool:
    return c.isalnum() or c == "_" or c == "$"


def _skip_string(sql: str, i: int, escapes: bool) -> int:
    j, n = i + 1, len(sql)
    while j < n:
        c = sql[j]
        if escapes and c == "\\":
            j += 2
            continue
        if c == "'":
            if j + 1 < n and sql[j + 1] == "'":
                j += 2
                continue
            return j + 1
        j += 1
    raise SQLTextError("unterminated quoted string")


def _skip_comment(sql: str, i: int) -> int:
    depth, j, n = 0, i, len(sql)
    while j < n:
        if sql.startswith("/*", j):
            depth += 1
            j += 2
        elif sql.startswith("*/", j):
            depth -= 1
            j += 2
            if depth == 0:
                return j
        else:
            j += 1
    raise SQLTextError("unterminated /* comment")


def split(sql: str) -> list[str]:
    """The statements of a simple Query, without empty ones (a text of only ``;`` and comments
    gives an empty list: PostgreSQL's EmptyQueryResponse)."""
    parts, start = [], 0
    for t in scan(sql):
        if t.kind == ";":
            parts.append(sql[start:t.start])
            start = t.end
    parts.append(sql[start:])
    return [p for p in parts if not is_blank(p)]


def is_blank(sql: str) -> bool:
    """Only whitespace and comments."""
    return not strip_comments(sql).strip()


def strip_comments(sql: str) -> str:
    """``sql`` with each comment replaced by one space (quoted text kept verbatim)."""
    out, last = [], 0
    for start, end, kind in quoted_spans(sql):
        if kind == "-":
            out += [sql[last:start], " "]
            last = end
    out.append(sql[last:])
    return "".join(out)


def quoted_spans(sql: str) -> list[tuple[int, int, str]]:
    """The ``(start, end, kind)`` of every string constant (``'``), dollar-quoted string
    (``$``), quoted identifier (``"``) and comment (``-``) of ``sql``, in order."""
    spans: list[tuple[int, int, str]] = []
    i, n = 0, len(sql)
    while i < n:
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            j = n if end == -1 else end + 1
            spans.append((i, j, "-"))
        elif sql.startswith("/*", i):
            j = _skip_comment(sql, i)
            spans.append((i, j, "-"))
        elif sql[i] in "'\"$" and not (sql[i] == "$" and _PARAM.match(sql, i)):
            j = _end_of_quoted(sql, i)
            if j > i + 1:
                spans.append((i, j, sql[i]))
        else:
            j = i + 1
        i = j
    return spans


def _end_of_quoted(sql: str, i: int) -> int:
    c = sql[i]
    if c == "'":
        escapes = i > 0 and sql[i - 1] in "eE"
        return _skip_string(sql, i, escapes)
    if c == '"':
        end = sql.find('"', i + 1)
        if end == -1:
            raise SQLTextError("unterminated quoted identifier")
        return end + 1
    tag = _DOLLAR_TAG.match(sql, i)
    if tag and not _PARAM.match(sql, i):
        end = sql.find(tag.group(0), tag.end())
        if end == -1:
            raise SQLTextError("unterminated dollar-quoted string")
        return end + len(tag.group(0))
    return i + 1


def keywords(sql: str, n: int = 3) -> list[str]:
    """The first ``n`` words of a statement, upper-case (comments and punctuation skipped)."""
    text = strip_comments(sql).lstrip(" \t\r\n(")
    return [w.upper() for w in _WORD.findall(text[:400])[:n]]


def parameters(sql: str) -> int:
    """The highest parameter number ``$n`` used in ``sql`` (0 when none)."""
    return max((t.number for t in scan(sql) if t.kind == "param"), default=0)


def substitute(sql: str, value_of: Callable[[int], str]) -> str:
    """``sql`` with every ``$n`` replaced by ``value_of(n)`` (an SQL literal)."""
    out, last = [], 0
    for t in scan(sql):
        if t.kind == "param":
            out.append(sql[last:t.start])
            out.append(value_of(t.number))
            last = t.end
    out.append(sql[last:])
    return "".join(out)
