"""The grammar corpus: SQL cases with their expected verdicts, read from ``cases/*.sql``.

The format is described in ``README.md`` next to this file. :func:`load_corpus` parses every
file; a malformed file raises :class:`CorpusFormatError` naming the file and the line.
"""

from __future__ import annotations

import ast
import math
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import dpsql.errors

CASES_DIR = Path(__file__).parent / "cases"

_DIRECTIVE = re.compile(r"^--\s*(case|expect|options|text|database)\s*:(.*)$",
                        re.IGNORECASE)
_FACT = re.compile(r"^([a-z_][a-z0-9_]*)(?:\[(\d+)\])?(<=|>=|=)(.*)$")
# fact name -> how its value is parsed
_NUMBER_FACTS = {"columns", "cells", "measurements", "keys", "rows"}
_FLOAT_FACTS = {"l1"}
_LIST_FACTS = {"names", "types"}
_OPTION_DEFAULTS: dict[str, object] = {"epsilon": 1.0, "delta": 0.0, "mechanism": "laplace"}
_CELL_TYPES = {"BIGINT", "DOUBLE", "DATE", "TIMESTAMP", "VARCHAR", "BOOLEAN"}  # last two: public
#: The databases a file may name in its header (``-- database: NAME``); see databases.py.
DATABASES = ("sample", "events", "central", "auto", "autoval")
#: dpsql.routes.planner: the path that answers a query.
_PATHS = ("private", "public", "two", "free", "local", "ledger")


class CorpusFormatError(ValueError):
    """A malformed case file; the message starts with ``file:line:``."""


Fail = Callable[[str], CorpusFormatError]


@dataclass
class Case:
    file: str
    line: int  # the line of its "-- case:" directive
    name: str
    sql: str
    verdict: str = ""  # "accepted" or "refused"
    error: str | None = None  # the expected exception class name, when refused
    mentions: list[str] = field(default_factory=list)  # substrings of the refusal message
    facts: list[tuple[str, int | None, str, object]] = field(default_factory=list)
    options: dict[str, object] = field(default_factory=lambda: dict(_OPTION_DEFAULTS))
    run: bool = False  # execute it on the sample data
    database: str = "sample"  # or a crafted one of databases.py, named in the file's header

    @property
    def id(self) -> str:
        return f"{self.file}:{self.name}"


def load_corpus(folder: Path = CASES_DIR) -> list[Case]:
    """Every case of every ``*.sql`` file of ``folder``, in file order."""
    cases: list[Case] = []
    for path in sorted(folder.glob("*.sql")):
        cases.extend(parse_file(path))
    return cases


def parse_file(path: Path) -> list[Case]:
    return parse_text(path.read_text(encoding="utf-8"), path.name)


def parse_text(text: str, filename: str) -> list[Case]:
    """Parse one case file. Lines before the first ``-- case:`` may only be comments."""
    cases: list[Case] = []
    current: Case | None = None
    body: list[str] = []
    explicit_text = False
    database = "sample"

    def fail(lineno: int, message: str) -> CorpusFormatError:
        return CorpusFormatError(f"{filename}:{lineno}: {message}")

    def finish() -> None:
        if current is None:
            return
        if not current.verdict:
            raise fail(current.line, f"case {current.name!r} has no '-- expect: accepted' or "
                                     "'-- expect: refused ErrorClass' line")
        sql = "\n".join(body).strip()
        if explicit_text:
            if sql:
                raise fail(current.line, f"case {current.name!r} has both '-- text:' and SQL "
                                         "lines; use one")
        else:
            if not sql:
                raise fail(current.line, f"case {current.name!r} has no SQL")
            current.sql = sql
        cases.append(current)

    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        match = _DIRECTIVE.match(line.strip())
        kind = match.group(1).lower() if match else None
        if kind == "case":
            finish()
            name = match.group(2).strip()  # type: ignore[union-attr]
            if not name:
                raise fail(lineno, "'-- case:' needs a name")
            current, body, explicit_text = Case(filename, lineno, name, ""), [], False
            current.database = database
            continue
        if current is None:
            if line.strip() and not line.strip().startswith("--"):
                raise fail(lineno, "SQL before the first '-- case: name' line")
            if kind == "database":
                database = match.group(2).strip()  # type: ignore[union-attr]
                if database not in DATABASES:
                    raise fail(lineno, f"unknown database {database!r}; one of {DATABASES}")
                continue
            if kind is not None:
                raise fail(lineno, f"'-- {kind}:' before the first '-- case: name' line")
            continue
        if kind is not None and not any(b.strip() for b in body):
            value = match.group(2).strip()  # type: ignore[union-attr]
            if kind == "database":
                raise fail(lineno, "'-- database:' belongs in the file's header, before the "
                                   "first case")
            if kind == "expect":
                _parse_expect(current, value, lambda m, n=lineno: fail(n, m))
            elif kind == "options":
                _parse_options(current, value, lambda m, n=lineno: fail(n, m))
            else:
                try:
                    sql = _string_expression(ast.parse(value, mode="eval").body)
                except (ValueError, SyntaxError):
                    raise fail(lineno, "'-- text:' needs a Python string literal, e.g. "
                                       "'-- text: \"  \"', optionally with + and * N") from None
                current.sql, explicit_text = sql, True
            continue
        if kind is not None:
            raise fail(lineno, f"'-- {kind}:' after the SQL of case {current.name!r}; put "
                               "directives right after '-- case:'")
        body.append(line)
    finish()
    return cases


def _string_expression(node: ast.expr) -> str:
    """A string literal, or literals joined with + and repeated with * N (for long texts)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _string_expression(node.left) + _string_expression(node.right)
    if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)
            and isinstance(node.right, ast.Constant) and type(node.right.value) is int):
        return _string_expression(node.left) * node.right.value
    raise ValueError("not a string expression")


def _parse_expect(case: Case, value: str, fail: Fail) -> None:
    try:
        words = shlex.split(value)
    except ValueError as e:
        raise fail(f"cannot split the expect line: {e}") from None
    if not words:
        raise fail("'-- expect:' is empty")
    if words[0] in ("accepted", "refused"):
        if case.verdict:
            raise fail(f"case {case.name!r} already expects {case.verdict}")
        case.verdict = words.pop(0)
        if case.verdict == "refused":
            if not words or "=" in words[0]:
                raise fail("'refused' needs the error class, e.g. "
                           "'-- expect: refused UnsupportedQuery'")
            name = words.pop(0)
            cls = getattr(dpsql.errors, name, None)
            if not (isinstance(cls, type) and issubclass(cls, dpsql.errors.Error)):
                raise fail(f"{name!r} is not an error class of dpsql.errors")
            case.error = name
    elif not case.verdict:
        raise fail("the first '-- expect:' must start with 'accepted' or "
                   "'refused ErrorClass'")
    for word in words:
        if word == "run":
            _require_accepted(case, word, fail)
            case.run = True
            continue
        match = _FACT.match(word)
        if match is None:
            raise fail(f"cannot read {word!r}; facts look like name=value, "
                       "e.g. cells=1 or l1[0]=95")
        name, index, op, text = match.groups()
        if name == "mentions":
            if case.verdict != "refused" or op != "=":
                raise fail("'mentions=' belongs to refused cases")
            case.mentions.append(text)
            continue
        _require_accepted(case, name, fail)
        case.facts.append((name, None if index is None else int(index), op,
                           _fact_value(name, index, op, text, fail)))
        if name == "rows":
            case.run = True


def _require_accepted(case: Case, what: str, fail: Fail) -> None:
    if case.verdict != "accepted":
        raise fail(f"{what!r} is a fact of accepted cases only")


def _fact_value(name: str, index: str | None, op: str, text: str, fail: Fail) -> object:
    if (index is not None) != (name in _FLOAT_FACTS):
        raise fail(f"{name}: an index [i] is for l1[i] only")
    if op != "=" and name != "rows":
        raise fail(f"{name}: only rows takes <= or >=")
    try:
        if name in _NUMBER_FACTS:
            return int(text)
        if name in _FLOAT_FACTS:
            return float(text)
        if name == "cost":
            eps, dlt = text.split(",")
            return (float(eps), float(dlt))
        if name in _LIST_FACTS:
            items = text.split("|")
            if name == "types" and not set(items) <= _CELL_TYPES:
                raise ValueError(f"cell types are {sorted(_CELL_TYPES)}")
            return items
        if name == "path":
            if text not in _PATHS:
                raise ValueError(f"path is one of {', '.join(_PATHS)}")
            return text
        if name == "release":
            kind, _, size = text.partition(":")
            if kind not in ("none", "domain", "threshold") or (size and kind != "domain"):
                raise ValueError("release is none, threshold, domain or domain:N")
            return (kind, int(size) if size else None)
    except ValueError as e:
        raise fail(f"bad value for {name}: {text!r} ({e})") from None
    raise fail(f"unknown fact {name!r}; known: cells, columns, cost, keys, l1[i], "
               "measurements, names, path, release, rows, types, run, mentions")


def _parse_options(case: Case, value: str, fail: Fail) -> None:
    for word in value.split():
        key, sep, text = word.partition("=")
        if not sep or key not in _OPTION_DEFAULTS:
            raise fail(f"options are epsilon=, delta= and mechanism=; got {word!r}")
        if key == "mechanism":
            case.options[key] = text
            continue
        try:
            case.options[key] = float(text)  # accepts nan, inf, -1, 1e6
        except ValueError:
            raise fail(f"{key} must be a number, got {text!r}") from None


def same_float(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
