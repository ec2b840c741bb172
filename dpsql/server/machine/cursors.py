"""Server-side cursors: ``DECLARE``, ``FETCH``, ``MOVE`` and ``CLOSE``.

psycopg2's named cursors, psycopg 3's server-side cursors and SQLAlchemy's ``stream_results``
send a query as ``DECLARE name CURSOR FOR <query>`` and read it with ``FETCH``. The session
answers the query once when it is declared -- a private query through the library, charged
once like any other; a catalog query through the catalog -- and keeps the released rows here.
``FETCH`` and ``MOVE`` only page through those rows: they read no data and cost nothing, so
reading a cursor in any order, any number of times, is post-processing of one answer.

Positions follow PostgreSQL: 0 is before the first row, ``k`` is on row ``k`` and ``n + 1`` is
after the last. A ``NO SCROLL`` cursor refuses to move backward (SQLSTATE 55000) as PostgreSQL
does; other cursors can scroll, since the whole answer is at hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dpsql.server.wire import protocol as p
from dpsql.server.wire import sqltext


class CursorSyntaxError(ValueError):
    """A DECLARE, FETCH, MOVE or CLOSE that cannot be read (SQLSTATE 42601)."""


_NAME = r'"(?:[^"]|"")+"|[A-Za-z_][\w$]*'
_DECLARE = re.compile(
    rf"\s*DECLARE\s+(?P<name>{_NAME})\s+(?P<options>(?:\w+\s+)*?)CURSOR\s+"
    r"(?:(?P<hold>WITH|WITHOUT)\s+HOLD\s+)?FOR\s+(?P<query>.+?)\s*;?\s*$", re.I | re.S)
_TOKEN = re.compile(rf'{_NAME}|[+-]?\d+|\S', re.I)
_OPTIONS = {"BINARY", "INSENSITIVE", "ASENSITIVE", "SCROLL", "NO SCROLL"}


@dataclass(frozen=True)
class Declaration:
    """What a DECLARE says: the cursor's name, its options and its query's text."""

    name: str
    query: str
    hold: bool = False
    binary: bool = False
    scroll: bool = True  # False: declared NO SCROLL


@dataclass(frozen=True)
class Direction:
    """Where a FETCH or MOVE goes: ``kind`` is forward, backward, absolute or relative;
    ``count`` None means ALL."""

    kind: str
    count: int | None = 1


@dataclass
class Cursor:
    """An open cursor: the released rows of its query and where it stands."""

    declaration: Declaration
    fields: list[p.Field] | None
    rows: list[tuple[object, ...]]
    position: int = 0
    in_transaction: bool = False  # declared in the open transaction (a rollback drops it)

    def fetch(self, direction: Direction) -> list[tuple[object, ...]]:
        """The rows ``direction`` reaches, moving the cursor (PostgreSQL's semantics)."""
        n = len(self.rows)
        if direction.kind in ("absolute", "relative"):
            target = direction.count or 0
            if direction.kind == "relative":
                target += self.position
            elif target < 0:
                target += n + 1
            self._check_backward(target < self.position or (
                direction.kind == "absolute" and target == self.position and target > 0))
            self.position = max(0, min(target, n + 1))
            return [self.rows[self.position - 1]] if 1 <= self.position <= n else []
        count = n + 1 if direction.count is None else direction.count
        if direction.kind == "backward":
            self._check_backward(count > 0)
            return self._backward(count)
        if count == 0:  # FETCH FORWARD 0: the current row again
            return [self.rows[self.position - 1]] if 1 <= self.position <= n else []
        start = self.position
        self.position = min(start + count, n + 1)
        return self.rows[start:min(start + count, n)]

    def _backward(self, count: int) -> list[tuple[object, ...]]:
        n = len(self.rows)
        if count == 0:
            return [self.rows[self.position - 1]] if 1 <= self.position <= n else []
        end = min(self.position - 1, n)  # rows end, end-1, ... are returned
        first = max(self.position - count, 1)
        self.position = max(self.position - count, 0)
        return [self.rows[i - 1] for i in range(end, first - 1, -1)]

    def _check_backward(self, backward: bool) -> None:
        if backward and not self.declaration.scroll:
            raise CursorStateError("cursor can only scan forward")


class CursorStateError(ValueError):
    """A NO SCROLL cursor asked to move backward (SQLSTATE 55000)."""


def parse_name(text: str) -> str:
    """An identifier as PostgreSQL folds it: quoted as written, otherwise in lower case."""
    if text.startswith('"'):
        return text[1:-1].replace('""', '"')
    return text.lower()


def parse_declare(text: str) -> Declaration:
    m = _DECLARE.match(sqltext.strip_comments(text))
    if m is None:
        raise CursorSyntaxError("cannot read the DECLARE: write DECLARE name [BINARY] "
                                "[NO SCROLL] CURSOR [WITH HOLD | WITHOUT HOLD] FOR query")
    options = " ".join(m.group("options").upper().split())
    words = re.findall(r"NO SCROLL|\w+", options)
    unknown = [w for w in words if w not in _OPTIONS]
    if unknown:
        raise CursorSyntaxError(f"unknown DECLARE option {unknown[0]}")
    return Declaration(parse_name(m.group("name")), m.group("query"),
                       hold=(m.group("hold") or "").upper() == "WITH",
                       binary="BINARY" in words, scroll="NO SCROLL" not in words)


def parse_fetch(text: str) -> tuple[Direction, str]:
    """The direction and cursor name of a FETCH or MOVE."""
    body = sqltext.strip_comments(text).strip().rstrip(";").strip()
    tokens = _TOKEN.findall(body)[1:]  # without FETCH / MOVE
    if not tokens or tokens[-1].startswith(("+", "-")) or tokens[-1][0].isdigit():
        raise CursorSyntaxError("FETCH and MOVE need a cursor name")
    name, words = parse_name(tokens[-1]), [w.upper() for w in tokens[:-1]]
    if words and words[-1] in ("FROM", "IN"):
        words.pop()
    return _direction(words), name


def _direction(words: list[str]) -> Direction:
    simple = {(): Direction("forward"), ("NEXT",): Direction("forward"),
              ("PRIOR",): Direction("backward"), ("FIRST",): Direction("absolute", 1),
              ("LAST",): Direction("absolute", -1), ("ALL",): Direction("forward", None),
              ("FORWARD",): Direction("forward"), ("BACKWARD",): Direction("backward"),
              ("FORWARD", "ALL"): Direction("forward", None),
              ("BACKWARD", "ALL"): Direction("backward", None)}
    if tuple(words) in simple:
        return simple[tuple(words)]
    if len(words) == 1 and _is_int(words[0]):
        count = int(words[0])
        return Direction("forward", count) if count >= 0 else Direction("backward", -count)
    if len(words) == 2 and _is_int(words[1]) and words[0] in ("ABSOLUTE", "RELATIVE"):
        return Direction(words[0].lower(), int(words[1]))
    if len(words) == 2 and _is_int(words[1]) and words[0] in ("FORWARD", "BACKWARD"):
        count = int(words[1])
        forward = (words[0] == "FORWARD") == (count >= 0)
        return Direction("forward" if forward else "backward", abs(count))
    raise CursorSyntaxError(f"cannot read the FETCH direction {' '.join(words)!r}")


def _is_int(word: str) -> bool:
    return re.fullmatch(r"[+-]?\d{1,18}", word) is not None


def parse_close(text: str) -> str | None:
    """The cursor CLOSE names; None for CLOSE ALL."""
    tokens = _TOKEN.findall(sqltext.strip_comments(text).strip().rstrip(";").strip())
    if len(tokens) != 2:
        raise CursorSyntaxError("write CLOSE name or CLOSE ALL")
    return None if tokens[1].upper() == "ALL" else parse_name(tokens[1])
