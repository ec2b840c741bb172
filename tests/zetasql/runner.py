"""ZetaSQL's differential-privacy compliance files, run unchanged through the DB-API.

The files (``tests/zetasql/data/``, Apache 2.0, Copyright Google LLC) are blocks separated by
``==`` lines: ``[prepare_database]`` blocks create a table (``OPTIONS (userid_column=uid)``:
``uid`` is its privacy unit), the other blocks are cases: ``[name=...]`` and other option
lines, the SQL, ``--``, then the expected value (``ARRAY<STRUCT<...>>[{...}, ...]`` rows or
``ERROR: ...``) and perhaps ``NOTE:`` lines. ``#`` lines are comments.

The tables are built in a DuckDB file, transpiled from the BigQuery dialect (the setup is the
harness's, not a query through dpsql), and declared to dpsql with ``privacy_unit = "uid"``,
public value bounds far outside the data (see :func:`_column`) and a database-wide
``[budget] max_query_epsilon = 1e308`` and
``max_query_delta = 1`` so that the cases' ``epsilon = 1e20`` runs verbatim. Every case's SQL
goes to ``cursor.execute`` as written. ``python3 -m tests.zetasql.runner`` prints every case's
outcome.

**Two modes.** *Verbatim* (the headline, :func:`run_all`): every case's SQL through the DB-API
as written. *With exact parts on the reference* (:func:`run_all_reference`): several cases
compare a private query with an exact query of the same table (a UNION arm or a scalar
subquery without the clause), which dpsql by design never releases; in this mode such a case
is split into its parts (:mod:`dpsql.query.composite`), each part with the clause is sent
through the DB-API as a query of its own (written back by the ``dpsql`` dialect), each part
without it runs on the raw DuckDB test database (the ground truth, as ZetaSQL's engine would
answer it), and the rows are combined as dpsql combines released parts
(:func:`dpsql.execution.combined.combine`). Every other case runs as verbatim. The second
count says how far dpsql's private answers agree with ZetaSQL's where only the exact reference
is missing; it never counts a refusal of the exact part as a pass.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import sqlglot
import tomli_w

import dpsql
from dpsql.errors import EngineFailure, InterfaceError, InternalError
from dpsql.execution.combined import combine
from dpsql.execution.postprocess import Result, ResultColumn
from dpsql.query.composite import RELEASE, Composite, outer_query, split
from dpsql.query.dp_clause import DIALECT

DATA = Path(__file__).parent / "data"
FILES = ("differential_privacy.test", "differential_privacy_errors.test")
#: Relative tolerance of a float comparison (the expected values are printed to 17 digits).
REL_TOL = 1e-9
ABS_TOL = 1e-12


@dataclass(frozen=True)
class Case:
    name: str
    sql: str
    expected: str  # the text after ``--``, NOTE lines removed

    @property
    def error(self) -> bool:
        return self.expected.startswith("ERROR:")

    @property
    def proto(self) -> bool:
        """The case asks for ZetaSQL's protocol-buffer output (refused, by design)."""
        return '"PROTO"' in self.sql


@dataclass(frozen=True)
class Table:
    name: str
    sql: str  # the CREATE TABLE ... AS SELECT, BigQuery's dialect


@dataclass(frozen=True)
class Outcome:
    case: Case
    passed: bool
    detail: str  # what dpsql said (its exception) or the rows it returned


def blocks(text: str) -> Iterator[list[str]]:
    """The ``==``-separated blocks, comment lines removed."""
    block: list[str] = []
    for line in text.splitlines():
        if line.strip() == "==":
            yield block
            block = []
        elif not line.startswith("#"):
            block.append(line)
    if any(line.strip() for line in block):
        yield block


def parse(text: str) -> tuple[list[Table], list[Case]]:
    """The tables and the cases of one .test file."""
    tables: list[Table] = []
    cases: list[Case] = []
    for block in blocks(text):
        # option lines come before "--"; after it a line may start with "[" (an expected
        # ARRAY whose type is printed on lines of its own)
        dashes = block.index("--")
        options = [line.strip() for line in block[:dashes] if line.startswith("[")]
        body = [line for line in block[:dashes] if not line.startswith("[")] + block[dashes:]
        split = body.index("--")
        sql = "\n".join(body[:split]).strip()
        expected = "\n".join(line for line in body[split + 1:]
                             if not line.startswith("NOTE:")).strip()
        if "[prepare_database]" in options:
            name = re.match(r"CREATE TABLE (\w+)", sql)
            assert name is not None, sql
            tables.append(Table(name.group(1), sql))
            continue
        names = [o[len("[name="):-1] for o in options if o.startswith("[name=")]
        assert len(names) == 1, block
        cases.append(Case(names[0], sql, expected))
    return tables, cases


def all_cases() -> tuple[list[Table], list[Case]]:
    tables: dict[str, Table] = {}
    cases: list[Case] = []
    for file in FILES:
        found, more = parse((DATA / file).read_text())
        tables.update((t.name, t) for t in found)
        cases.extend(more)
    return list(tables.values()), cases


# --------------------------------------------------------------------------- the database


def build(tables: Sequence[Table], folder: Path) -> tuple[Path, Path]:
    """The DuckDB file and the metadata file of ``tables``."""
    database = folder / "zetasql.duckdb"
    declared: dict[str, Any] = {}
    with duckdb.connect(str(database)) as con:
        for table in tables:
            select = re.sub(r"^CREATE TABLE \w+ OPTIONS \(userid_column=uid\) AS", "",
                            table.sql).strip()
            duck = sqlglot.transpile(select, read="bigquery", write="duckdb")[0]
            con.execute(f"CREATE TABLE {table.name} AS {duck}")
            columns = [row[0] for row in con.execute(f"DESCRIBE {table.name}").fetchall()]
            declared[table.name] = {
                "privacy_unit": "uid",
                # ZetaSQL bounds no rows per person by default: generous k and g (the tables
                # hold at most 7 rows a person; TestTableWithUid, joined with a 3-element array, 3).
                "max_rows_per_unit": 10,
                "max_groups_per_unit": 3,
                "columns": {c: _column(c) for c in columns},
            }
    metadata = folder / "zetasql.toml"
    metadata.write_text(tomli_w.dumps({
        "budget": {"max_query_epsilon": 1e308, "max_query_delta": 1.0},
        "tables": declared,
    }))
    return database, metadata


def _column(name: str) -> dict[str, Any]:
    if name in ("uid", "id"):
        return {"type": "int"}
    # Public bounds far outside the data, declared by the harness (docs/zetasql.md, "Bounds"):
    # nothing is clamped, so at epsilon 1e20 the answer is the exact one, as ZetaSQL's.
    # Automatic bounds ({ auto = true, ... }) are drawn at random and aim to leave about one
    # person beyond them (dpsql.privacy.auto_values): answers that vary from run to run.
    return {"type": "int" if name == "int64_val" else "float", "nullable": True,
            "lower": -100, "upper": 100}


# --------------------------------------------------------------------------- expected values


class Unparsed(Exception):
    """An expected value this harness does not read (ZetaSQL's PROTO text)."""


def expected_rows(text: str) -> list[tuple[Any, ...]]:
    """The rows of ``ARRAY<STRUCT<...>>[{...}, ...]``."""
    depth, start = 0, None
    for i, char in enumerate(text):  # the type ends at the '[' after the last '>'
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "[" and depth == 0:
            start = i
            break
    if start is None or not text.rstrip().endswith("]"):
        raise Unparsed(text[:60])
    rows = _split(text.rstrip()[start + 1:-1])
    return [tuple(_value(v) for v in _split(row.strip()[1:-1])) for row in rows]


def _split(text: str) -> list[str]:
    """Top-level comma-separated items of ``text`` (a list of rows, or one row's values)."""
    text = text.strip()
    items: list[str] = []
    depth, start, quoted = 0, 0, False
    for i, char in enumerate(text):
        if char == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif quoted:
            continue
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        items.append(text[start:].strip())
    return items


def _value(text: str) -> Any:
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        inner = text[1:-1].strip()
        if inner.startswith("{"):  # a JSON value printed inside its row's braces
            return json.loads(inner)
        if inner.startswith('"') or not inner:
            return json.loads(text)
        raise Unparsed(text[:60])
    if text == "NULL":
        return None
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"'):
        return json.loads(text)
    try:
        return int(text)
    except ValueError:
        return float(text)


def same(actual: Any, expected: Any) -> bool:
    """Equal, floats within the relative tolerance, lists and JSON objects element-wise."""
    if isinstance(actual, str) and isinstance(expected, dict):
        try:
            actual = json.loads(actual)
        except ValueError:
            return False
    if isinstance(expected, bool) or expected is None:
        return actual is expected or (expected is not None and actual == expected
                                      and isinstance(actual, bool))
    if isinstance(expected, int | float):
        return (isinstance(actual, int | float) and not isinstance(actual, bool)
                and math.isclose(actual, expected, rel_tol=REL_TOL, abs_tol=ABS_TOL))
    if isinstance(expected, dict):
        return (isinstance(actual, dict) and actual.keys() == expected.keys()
                and all(same(actual[k], expected[k]) for k in expected))
    if isinstance(expected, list | tuple):
        return (isinstance(actual, list | tuple) and len(actual) == len(expected)
                and all(same(a, e) for a, e in zip(actual, expected, strict=True)))
    return bool(actual == expected)


def same_rows(actual: list[tuple[Any, ...]], expected: list[tuple[Any, ...]],
              ordered: bool) -> bool:
    if len(actual) != len(expected):
        return False
    if ordered:
        return all(same(a, e) for a, e in zip(actual, expected, strict=True))
    left = list(actual)
    for row in expected:  # unordered: each expected row matches a distinct actual row
        match = next((i for i, a in enumerate(left) if same(a, row)), None)
        if match is None:
            return False
        left.pop(match)
    return True


# --------------------------------------------------------------------------- running


def run_case(cursor: dpsql.dbapi.Cursor, case: Case) -> Outcome:
    try:
        cursor.execute(case.sql)
        rows = [tuple(r) for r in cursor.fetchall()]
    except (InternalError, EngineFailure, InterfaceError) as e:  # a dpsql bug, never a pass
        return Outcome(case, False, f"{type(e).__name__}: {e}")
    except dpsql.Error as e:
        # An expected ERROR passes when dpsql refuses the case with one of its own stable
        # exceptions (dpsql's wording, not ZetaSQL's).
        return Outcome(case, case.error, f"{type(e).__name__}: {e}")
    return _compared(case, rows)


def _compared(case: Case, rows: list[tuple[Any, ...]], how: str = "") -> Outcome:
    if case.error:
        return Outcome(case, False, f"{how}answered {rows!r} where ZetaSQL refuses")
    try:
        expected = expected_rows(case.expected)
    except Unparsed:
        return Outcome(case, False, f"{how}answered {rows!r}; the expected value is not "
                       "readable")
    ordered = re.search(r"\bORDER\s+BY\b", case.sql, re.IGNORECASE) is not None
    ok = same_rows(rows, expected, ordered)
    return Outcome(case, ok, f"{how}answered {rows!r}" +
                   ("" if ok else f", expected {expected!r}"))


def run_all(reference: bool = False) -> list[Outcome]:
    """Every case's outcome: verbatim, or (``reference``) with exact parts on the raw
    database (module docstring)."""
    tables, cases = all_cases()
    with tempfile.TemporaryDirectory() as folder:
        database, metadata = build(tables, Path(folder))
        with dpsql.connect(str(database), str(metadata), analyst="zetasql") as connection:
            cursor = connection.cursor()
            if not reference:
                return [run_case(cursor, case) for case in cases]
            copy = Path(folder) / "reference"  # the same tables, a file of their own
            copy.mkdir()
            with duckdb.connect(str(build(tables, copy)[0])) as raw:
                return [run_case_reference(cursor, raw, case) for case in cases]


def run_all_reference() -> list[Outcome]:
    return run_all(reference=True)


def run_case_reference(cursor: dpsql.dbapi.Cursor, raw: duckdb.DuckDBPyConnection,
                       case: Case) -> Outcome:
    """The second mode (module docstring): a case whose exact parts sit beside private ones
    runs its parts apart, the exact ones on ``raw``; every other case as verbatim."""
    composite = split(case.sql)
    if composite is None or not composite.clause or (
            composite.union and all(p.clause for p in composite.parts)):
        return run_case(cursor, case)
    answers = []
    try:
        for part in composite.parts:
            if part.clause:
                cursor.execute(part.tree.sql(dialect=DIALECT))
                names = [(d[0], str(d[1])) for d in cursor.description or ()]
                rows = [tuple(r) for r in cursor.fetchall()]
            else:
                result = raw.execute(part.tree.sql(dialect="duckdb"))
                names = [(d[0], str(d[1])) for d in result.description or ()]
                rows = result.fetchall()
            answers.append(Result([ResultColumn(n, t) for n, t in names], rows,
                                  [(None,) * len(names) for _ in rows]))
        rows = combine(composite, answers, 60.0).rows if composite.union else \
            _around(composite, answers, raw)
    except (InternalError, EngineFailure, InterfaceError) as e:
        return Outcome(case, False, f"{type(e).__name__}: {e}")
    except (dpsql.Error, duckdb.Error) as e:
        return Outcome(case, False, f"{type(e).__name__}: {e}")
    return _compared(case, [tuple(r) for r in rows], "parts, exact ones on the raw "
                     "database: ")


def _around(composite: Composite, answers: list[Result], raw: duckdb.DuckDBPyConnection
            ) -> list[tuple[Any, ...]]:
    """The query around private subqueries, its exact subqueries read on ``raw``: the released
    values in temporary tables there, as dpsql's combination reads them."""
    for i, answer in enumerate(answers):
        table = f'"{RELEASE.format(i)}"'
        raw.execute(f"CREATE OR REPLACE TEMP TABLE {table} (c0 {answer.columns[0].type})")
        raw.executemany(f"INSERT INTO {table} VALUES (?)", answer.rows)
    return raw.execute(outer_query(composite, [["c0"]] * len(answers)).sql(
        dialect="duckdb")).fetchall()


def main() -> None:
    outcomes = run_all()
    for o in outcomes:
        print(f"{'PASS' if o.passed else 'FAIL'} {o.case.name}: {o.detail[:300]}")
    reference = run_all_reference()
    for o, v in zip(reference, outcomes, strict=True):
        if o.passed != v.passed:
            print(f"{'PASS' if o.passed else 'FAIL'} (exact parts on the reference) "
                  f"{o.case.name}: {o.detail[:300]}")
    for name, result in (("verbatim", outcomes), ("with exact parts on the reference",
                                                  reference)):
        counted = [o for o in result if not o.case.proto]
        print(f"{name}: {sum(o.passed for o in counted)} of {len(counted)} non-PROTO cases "
              f"pass; {sum(o.passed for o in result)} of {len(result)} in all")


if __name__ == "__main__":
    main()
