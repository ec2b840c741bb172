"""The server's classifier and protocol state machine, without sockets: statement texts in,
kinds out; frontend messages in, backend messages out (dpsql.server.machine.classify and .machine).

The machine runs against a real :class:`~dpsql.server.Server` over the sample data (never
started: no socket is opened), its blocking work run inline.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator

import asyncpg.introspection
import pytest

from dpsql.database import Database
from dpsql.explanation.render import render
from dpsql.server import Server, ServerConfig
from dpsql.server.machine.classify import Classifier
from dpsql.server.machine.machine import Machine
from dpsql.server.machine.outcome import Terminate
from dpsql.server.wire import protocol as p
from dpsql.server.wire import types as t
from tests.support.sandbox import error_fields, sandbox

# -- the classifier --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    setup = sandbox(tmp_path_factory.mktemp("machine"), {"alice": ("pw", 1000.0, 1e-3)})
    db = Database(setup.database, setup.metadata)
    server = Server(db, ServerConfig(port=0, passwords=setup.passwords))
    yield server
    server.executor.shutdown(wait=False)
    server.catalog.close()
    db.close()


@pytest.mark.parametrize(("text", "kind"), [
    ("", "empty"), ("  -- nothing\n", "empty"),
    ("SELECT 1", "catalog"), ("SELECT version()", "catalog"),
    ("SELECT relname FROM pg_catalog.pg_class WHERE relkind = ANY('{r,p}')", "catalog"),
    ("SELECT * FROM information_schema.columns c LEFT JOIN pg_depend d ON true", "catalog"),
    ("SELECT $1::regtype[]", "catalog"),
    ("SELECT * FROM generate_series(1, 3)", "catalog"),
    (asyncpg.introspection.INTRO_LOOKUP_TYPES, "catalog"),
    ("SELECT COUNT(*) FROM people", "query"),
    ("SELECT COUNT(*) FROM public.people WHERE age > $1", "query"),
    # a declared table, a file, an engine function: never the catalog (the library refuses)
    ("SELECT * FROM pg_catalog.pg_class, people", "query"),
    ("SELECT * FROM read_parquet('people.parquet')", "query"),
    ("SELECT duckdb_settings()", "query"),
    ("SELECT * FROM query('SELECT 1')", "query"),
    ("SELECT 'unterminated", "query"),
    ("this is not SQL", "query"),
    ("EXPLAIN SELECT COUNT(*) FROM people", "explain"),
    ("SET dpsql.epsilon = 0.5", "set"), ("SHOW ALL", "show"), ("RESET ALL", "reset"),
    ("BEGIN", "begin"), ("START TRANSACTION", "begin"), ("END", "commit"),
    ("ABORT", "rollback"), ("ROLLBACK TO SAVEPOINT s", "rollback_to"),
    ("ROLLBACK WORK TO s", "rollback_to"), ("SAVEPOINT s", "savepoint"),
    ("DISCARD ALL", "discard"), ("DEALLOCATE PREPARE s1", "deallocate"), ("LISTEN x", "noop"),
    ("DECLARE c CURSOR WITH HOLD FOR SELECT COUNT(*) FROM people", "declare"),
    ("FETCH 5 FROM c", "fetch"), ("MOVE ABSOLUTE 0 IN c", "move"), ("CLOSE ALL", "close"),
])
def test_classifier_kinds(server: Server, text: str, kind: str) -> None:
    assert server.classifier.classify(text).kind == kind


def test_classifier_details(server: Server) -> None:
    c = server.classifier
    statement = c.classify("SELECT COUNT(*) AS n FROM public.people WHERE age > $1")
    assert statement.nparams == 1 and statement.names == ["n"]
    assert "public" not in statement.engine_sql.lower()  # PostgreSQL's default schema dropped
    assert c.inferred(statement) == {1: t.INT8}  # compared with an int column
    assert c.classify("SHOW TIME ZONE").argument == "timezone"
    assert c.classify("SHOW TRANSACTION ISOLATION LEVEL").argument == "transaction_isolation"
    assert c.classify('SHOW "DateStyle"').argument == "DateStyle"
    assert c.classify("DEALLOCATE PREPARE s1").argument == "s1"
    assert c.classify("DISCARD PLANS").tag == "DISCARD PLANS"
    declare = c.classify("DECLARE c NO SCROLL CURSOR FOR SELECT * FROM pg_catalog.pg_type")
    assert declare.inner is not None and declare.inner.kind == "catalog"
    assert declare.declaration is not None and declare.declaration.name == "c"
    assert c.classify("DECLARE c CURSOR").error  # read when run: 42601
    explain = c.classify("EXPLAIN (FORMAT TEXT) SELECT COUNT(*) FROM public.people")
    assert explain.engine_sql.upper().startswith("SELECT COUNT(*) FROM")
    assert c.classify("SELECT 1") is c.classify("SELECT 1")  # cached by text


@pytest.mark.parametrize("template", [
    "SELECT COUNT(*) FROM people WHERE age > {} AND income < {}",
    "SELECT date_trunc('month', day) AS m, SUM(amount) FROM visits WHERE amount < {} "
    "GROUP BY 1 ORDER BY {}",
    "SELECT VAR_SAMP(income), (age + {})::numeric(10, 2) FROM people LIMIT {}",
    "SELECT COUNT(*) FROM public.people WHERE age > {} AND income < {}",  # public. dropped
    "SELECT COUNT(*) FROM people WHERE age > ${} OR income < {}",  # $n: a parameter's name
])
def test_classifier_numbers_only_reuse_the_classification(template: str) -> None:
    """A text that differs from one classified before only in its numbers (a dashboard's moving
    value) is classified as a fresh parse would classify it -- kind, engine text, output names,
    parameters -- whether or not it skipped the parse."""
    warm = Classifier({"people", "visits"}, set())
    warm.classify(template.format(1, 2))
    for values in ((1, 3), (2, 2), (7, 1.5e3)):
        text = template.format(*values)
        reused, parsed = warm.classify(text), Classifier({"people", "visits"}, set()).classify(text)
        assert (reused.kind, reused.engine_sql, reused.names, reused.nparams) == \
            (parsed.kind, parsed.engine_sql, parsed.names, parsed.nparams) and \
            reused.kind == "query" and reused.engine_sql == text.replace("public.", "")


def test_classifier_skips_the_parse_only_for_a_private_query() -> None:
    c = Classifier({"people"}, {"pg_class"})
    c.classify("SELECT COUNT(*) FROM people WHERE age > 30")
    assert c.classify("SELECT COUNT(*) FROM people WHERE age > 31").tree is None  # not parsed
    assert c.classify("SELECT COUNT(*) FROM people WHERE age > 'x'").tree is not None
    assert c.classify("SELECT COUNT(*) FROM people  WHERE age > 32 -- moved").tree is None
    # a catalog query is parsed (and checked) every time, never classified by its template
    for n in range(1, 4):
        statement = c.classify(f"SELECT relname FROM pg_class LIMIT {n}")
        assert statement.kind == "catalog" and statement.tree is not None
    # ... and a text whose engine text is rewritten (public.) as well
    c.classify("SELECT COUNT(*) FROM public.people WHERE age > 30")
    statement = c.classify("SELECT COUNT(*) FROM public.people WHERE age > 31")
    assert statement.tree is not None and "public" not in statement.engine_sql.lower()


# -- the state machine -----------------------------------------------------------------------


def msg(kind: bytes, body: bytes = b"") -> tuple[bytes, p.Reader]:
    return kind, p.Reader(body)


def cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def parse(sql: str, name: str = "", types: tuple[int, ...] = ()) -> tuple[bytes, p.Reader]:
    return msg(b"P", cstr(name) + cstr(sql) + struct.pack("!h", len(types))
               + b"".join(struct.pack("!i", o) for o in types))


def bind(params: tuple[str | None, ...] = (), portal: str = "", name: str = ""
         ) -> tuple[bytes, p.Reader]:
    body = cstr(portal) + cstr(name) + struct.pack("!hh", 0, len(params))
    for v in params:
        body += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v.encode()
    return msg(b"B", body + struct.pack("!h", 0))


def describe(kind: str, name: str = "") -> tuple[bytes, p.Reader]:
    return msg(b"D", kind.encode() + cstr(name))


def execute(portal: str = "", max_rows: int = 0) -> tuple[bytes, p.Reader]:
    return msg(b"E", cstr(portal) + struct.pack("!i", max_rows))


SYNC, FLUSH = msg(b"S"), msg(b"H")


def query(sql: str) -> tuple[bytes, p.Reader]:
    return msg(b"Q", cstr(sql))


def split(out: bytearray) -> list[tuple[bytes, bytes]]:
    """The backend messages in the machine's output (which is then emptied)."""
    data, messages = bytes(out), []
    out.clear()
    while data:
        length = struct.unpack("!i", data[1:5])[0]
        messages.append((data[:1], data[5:1 + length]))
        data = data[1 + length:]
    return messages


def kinds(messages: list[tuple[bytes, bytes]]) -> bytes:
    return b"".join(k for k, _ in messages)


def sqlstate(messages: list[tuple[bytes, bytes]]) -> str:
    return next(error_fields(body)["C"] for k, body in messages if k == b"E")


class Driver:
    """Feeds messages to a logged-in machine; returns what it answered and whether it asked
    for the output to be written out."""

    def __init__(self, server: Server) -> None:
        self.machine = Machine(server)
        self.machine.login("alice", "dpsql", {"application_name": "test"})

    def __call__(self, *messages: tuple[bytes, p.Reader]) -> tuple[list[tuple[bytes, bytes]],
                                                                    list[bool]]:
        flushes = [asyncio.run(self.machine.handle(kind, body)) for kind, body in messages]
        return split(self.machine.out), flushes


def test_simple_query_of_several_statements(server: Server) -> None:
    run = Driver(server)
    out, flushes = run(query("SELECT 1 AS one; SHOW dpsql.epsilon"))
    assert kinds(out) == b"TDCTDCZ" and flushes == [True]
    out, _ = run(query(""))
    assert kinds(out) == b"IZ"


def test_extended_protocol_types_parameters_from_the_columns(server: Server) -> None:
    run = Driver(server)
    out, flushes = run(parse("SELECT COUNT(*) AS n FROM people WHERE age > $1 AND married = $2"),
                       describe("S"), bind(("30", "t")), execute(), SYNC)
    assert kinds(out) == b"1tT2DCZ"
    param_description = next(body for k, body in out if k == b"t")
    assert struct.unpack("!hii", param_description) == (2, t.INT8, t.BOOL)
    assert flushes == [False, False, False, False, True]  # only Sync writes out


def test_error_skips_until_sync_and_is_written_out_at_once(server: Server) -> None:
    run = Driver(server)
    out, flushes = run(parse("SELECT email FROM people"), describe("S"), FLUSH)
    # Parse succeeds; Describe plans and is refused (42803), written out at once even though
    # the Flush that follows is skipped: a client waiting after Flush does not hang.
    assert kinds(out) == b"1tE" and sqlstate(out) == "42803"
    assert flushes == [False, True, False]
    out, flushes = run(bind(), execute(), SYNC)
    assert kinds(out) == b"Z" and flushes == [False, False, True]
    out, _ = run(parse("SELECT 1"), bind(), execute(), SYNC)  # served again after Sync
    assert kinds(out) == b"12DCZ"


def test_flush_writes_out_and_sends_nothing(server: Server) -> None:
    run = Driver(server)
    out, flushes = run(parse("SELECT 1", "s1"), FLUSH)
    assert kinds(out) == b"1" and flushes == [False, True]
    out, _ = run(parse("SELECT 2", "s1"), SYNC)
    assert kinds(out) == b"EZ" and sqlstate(out) == "42P05"


def test_row_limit_suspends_the_portal(server: Server) -> None:
    run = Driver(server)
    out, _ = run(parse("SELECT * FROM generate_series(1, 5) AS g(x)"), bind(), execute(max_rows=2),
                 execute(max_rows=2), execute(max_rows=2), SYNC)
    assert kinds(out) == b"12DDsDDsDCZ"
    assert out[-2][1] == b"SELECT 1\0"


def test_failed_transaction_block(server: Server) -> None:
    run = Driver(server)
    run(query("BEGIN"))
    assert run.machine.status == "T"
    out, _ = run(query("SELECT email FROM people"))
    assert sqlstate(out) == "42803" and run.machine.status == "E" and out[-1][1] == b"E"
    out, _ = run(query("SELECT 1"))
    assert sqlstate(out) == "25P02"
    out, _ = run(query("ROLLBACK"))
    assert kinds(out) == b"CZ" and run.machine.status == "I"


def test_settings_and_cursors(server: Server) -> None:
    run = Driver(server)
    out, _ = run(query("SET dpsql.epsilon = 0.5"), query("SHOW dpsql.epsilon"))
    assert (b"D", struct.pack("!hi", 1, 3) + b"0.5") in out
    assert run.machine.privacy() == (0.5, 0.0, "laplace")
    out, _ = run(query("DECLARE c NO SCROLL CURSOR WITH HOLD FOR "
                       "SELECT * FROM generate_series(1, 4)"),
                 query("FETCH 3 FROM c"), query("FETCH BACKWARD 1 FROM c"), query("CLOSE c"),
                 query("FETCH 1 FROM c"))
    assert kinds(out) == b"CZTDDDCZEZCZEZ"
    assert [sqlstate([m]) for m in out if m[0] == b"E"] == ["55000", "34000"]
    out, _ = run(query("RESET ALL"), query("SHOW dpsql.epsilon"))
    assert (b"D", struct.pack("!hi", 1, 1) + b"1") in out


def test_terminate_and_unknown_messages(server: Server) -> None:
    run = Driver(server)
    with pytest.raises(Terminate):
        run(msg(b"X"))
    with pytest.raises(p.ProtocolViolation):
        run(msg(b"z"))
    out, flushes = run(msg(b"F", b"\0\0\0\0"), SYNC)
    assert sqlstate(out) == "0A000" and kinds(out) == b"EZ" and flushes == [True, True]


def test_explain_is_the_command_lines(server: Server) -> None:
    """The server's EXPLAIN rows are the lines ``dpsql explain`` prints (one renderer)."""
    run = Driver(server)
    sql = "SELECT category, COUNT(*), AVG(amount) FROM visits GROUP BY category"
    out, _ = run(query("EXPLAIN " + sql))
    rows = [body[6:].decode() for k, body in out if k == b"D"]
    assert rows == render(server.db.explain(sql, 1.0, 0.0, "laplace"), sql=True)
    assert any(line.startswith("cell ") and "sensitivity" in line for line in rows)


def test_catalog_timestamptz_values_are_answered(server: Server) -> None:
    """DuckDB reads timestamptz into Python with pytz, which dpsql does not depend on: such
    catalog answers (``now()``, ``$1::timestamptz``) came back empty."""
    run = Driver(server)
    out, _ = run(query("SELECT TIMESTAMPTZ '2025-06-01 12:30:00+02' AS t, "
                       "now() > DATE '2020-01-01'"))
    rows = [body for k, body in out if k == b"D"]
    assert len(rows) == 1 and b"2025-06-01 10:30:00+00" in rows[0], out
