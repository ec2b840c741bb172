"""Server-side cursors (DECLARE / FETCH / MOVE / CLOSE): the paging rules as units, then
psycopg2 named cursors, psycopg 3 server-side cursors and SQLAlchemy's ``stream_results``
through a real server. A cursor's query is answered (and charged) once, when it is declared."""

from __future__ import annotations

from types import SimpleNamespace

import psycopg
import psycopg2
import psycopg2.errors
import pytest
import sqlalchemy as sa
from psycopg import errors as pg_errors

from dpsql.server.machine.cursors import (
    Cursor,
    CursorStateError,
    CursorSyntaxError,
    Declaration,
    Direction,
    parse_close,
    parse_declare,
    parse_fetch,
)
from dpsql.server.wire import protocol as p

PASSWORD = "s3cret pw"
GROUPED = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex"
BY_AGE = "SELECT age, COUNT(*) AS n FROM people GROUP BY age ORDER BY age"  # public domain


# -- units ------------------------------------------------------------------------------------


def test_declare_parsing() -> None:
    d = parse_declare('DECLARE "My Cur" BINARY NO SCROLL CURSOR WITH HOLD FOR SELECT 1;')
    assert d == Declaration("My Cur", "SELECT 1", hold=True, binary=True, scroll=False)
    d = parse_declare("declare C cursor without hold for\n  select 'a;b' -- x\n")
    assert (d.name, d.query, d.hold, d.scroll) == ("c", "select 'a;b'", False, True)
    for bad in ("DECLARE c FOR SELECT 1", "DECLARE c SHINY CURSOR FOR SELECT 1"):
        with pytest.raises(CursorSyntaxError):
            parse_declare(bad)


@pytest.mark.parametrize(("text", "direction"), [
    ("FETCH c", Direction("forward", 1)), ("FETCH NEXT FROM c", Direction("forward", 1)),
    ("FETCH FORWARD 5 FROM c", Direction("forward", 5)), ("FETCH 7 IN c", Direction("forward", 7)),
    ("FETCH ALL c", Direction("forward", None)), ("FETCH FORWARD ALL FROM c",
                                                  Direction("forward", None)),
    ("FETCH PRIOR c", Direction("backward", 1)), ("FETCH -2 c", Direction("backward", 2)),
    ("MOVE ABSOLUTE 3 FROM c", Direction("absolute", 3)), ("FETCH LAST c",
                                                          Direction("absolute", -1)),
    ("MOVE RELATIVE -1 IN c", Direction("relative", -1)),
])
def test_fetch_parsing(text: str, direction: Direction) -> None:
    assert parse_fetch(text) == (direction, "c")


def test_fetch_and_close_syntax_errors() -> None:
    for bad in ("FETCH", "FETCH 5", "FETCH SIDEWAYS c", "FETCH FORWARD x y c"):
        with pytest.raises(CursorSyntaxError):
            parse_fetch(bad)
    assert parse_close('CLOSE "A b"') == "A b" and parse_close("close all") is None
    with pytest.raises(CursorSyntaxError):
        parse_close("CLOSE")


def _cursor(n: int, scroll: bool = True) -> Cursor:
    field = [p.Field("x", 20)]
    return Cursor(Declaration("c", "q", scroll=scroll), field, [(i,) for i in range(1, n + 1)])


def test_paging_follows_postgresql_positions() -> None:
    c = _cursor(5)
    assert c.fetch(Direction("forward", 2)) == [(1,), (2,)]
    assert c.fetch(Direction("forward", 0)) == [(2,)]  # the current row again
    assert c.fetch(Direction("forward", None)) == [(3,), (4,), (5,)]
    assert c.position == 6 and c.fetch(Direction("forward", 1)) == []
    assert c.fetch(Direction("backward", 2)) == [(5,), (4,)]
    assert c.fetch(Direction("absolute", -1)) == [(5,)]
    assert c.fetch(Direction("absolute", 9)) == [] and c.position == 6
    assert c.fetch(Direction("relative", -5)) == [(1,)]
    assert c.fetch(Direction("backward", None)) == [] and c.position == 0
    assert c.fetch(Direction("absolute", 0)) == [] and c.position == 0


def test_no_scroll_refuses_backward_only() -> None:
    c = _cursor(3, scroll=False)
    assert c.fetch(Direction("absolute", 2)) == [(2,)]
    assert c.fetch(Direction("relative", 1)) == [(3,)]
    for backward in (Direction("backward", 1), Direction("absolute", 1),
                     Direction("relative", -1)):
        with pytest.raises(CursorStateError):
            c.fetch(backward)
    assert c.position == 3  # a refused move does not move


# -- through a real server --------------------------------------------------------------------


def spent(served: SimpleNamespace) -> float:
    return served.db.budget("alice").spent.epsilon


def pg3(served: SimpleNamespace, **kwargs: object) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=served.port, user="alice",
                           password=PASSWORD, dbname="dpsql", connect_timeout=10,
                           **kwargs)  # type: ignore[arg-type]


def pg2(served: SimpleNamespace) -> psycopg2.extensions.connection:
    return psycopg2.connect(host="127.0.0.1", port=served.port, user="alice",
                            password=PASSWORD, dbname="dpsql", connect_timeout=10)


def test_psycopg2_named_cursor_is_charged_once(served) -> None:
    conn = pg2(served)
    try:
        before = spent(served)
        with conn.cursor(name="decades") as cur:
            cur.itersize = 2
            cur.execute(BY_AGE)
            assert spent(served) == pytest.approx(before + 1.0)
            first = cur.fetchone()
            assert cur.description[0].name == "age" and cur.description[1].name == "n"
            rest = list(cur)  # fetched two at a time
        ages = [r[0] for r in [first, *rest]]
        assert len(ages) > 10 and ages == list(range(ages[0], ages[0] + len(ages)))
        assert all(isinstance(r[1], int) for r in rest)
        assert spent(served) == pytest.approx(before + 1.0)  # FETCH costs nothing
        conn.commit()
        with conn.cursor(name="catalog") as cur:  # a catalog query: nothing charged
            cur.execute("SELECT table_name FROM information_schema.tables "
                        "WHERE table_schema = 'public' ORDER BY 1")
            assert [r[0] for r in cur.fetchall()] == [
                "categories", "people", "prescriptions", "states", "visits"]
        assert spent(served) == pytest.approx(before + 1.0)
    finally:
        conn.close()


def test_psycopg2_named_cursor_refusal_charges_nothing(served) -> None:
    conn = pg2(served)
    try:
        before = spent(served)
        with pytest.raises(psycopg2.ProgrammingError) as refused, \
                conn.cursor(name="bad") as cur:
            cur.execute("SELECT email FROM people")
        assert refused.value.pgcode != "42601"  # the library's refusal, not a syntax error
        assert spent(served) == before
    finally:
        conn.close()


def test_psycopg3_server_cursor(served) -> None:
    with pg3(served) as conn:
        before = spent(served)
        with conn.cursor(name="by_sex") as cur:
            cur.execute(GROUPED)
            assert [d.name for d in cur.description] == ["sex", "n"]
            assert cur.fetchone()[0] == "F"
            assert [r[0] for r in cur.fetchmany(5)] == ["M"]
            cur.scroll(0, mode="absolute")
            assert [r[0] for r in cur.fetchall()] == ["F", "M"]
        assert spent(served) == pytest.approx(before + 1.0)
        with conn.cursor(name="params", binary=True) as cur:  # $1 over the extended protocol
            cur.execute("SELECT COUNT(*) AS n FROM people WHERE age > %s", [30])
            (n,) = cur.fetchone()
            assert isinstance(n, int) and n > 1000
        assert spent(served) == pytest.approx(before + 2.0)


def test_cursor_errors_and_lifetime(served) -> None:
    with pg3(served, autocommit=True) as conn:
        with pytest.raises(pg_errors.InvalidCursorName):
            conn.execute("FETCH 1 FROM nope")
        with pytest.raises(pg_errors.NoActiveSqlTransaction):
            conn.execute(f"DECLARE c CURSOR FOR {GROUPED}")
        before = spent(served)
        conn.execute("BEGIN")
        conn.execute("DECLARE c CURSOR FOR SELECT COUNT(*) FROM people WHERE age > 41")
        with pytest.raises(pg_errors.DuplicateCursor):
            conn.execute(f"DECLARE c CURSOR FOR {GROUPED}")
        assert spent(served) == pytest.approx(before + 1.0)  # the duplicate was not charged
        conn.execute("ROLLBACK")
        conn.execute("BEGIN")
        conn.execute(f"DECLARE c NO SCROLL CURSOR FOR {GROUPED}")
        cur = conn.execute("FETCH 1 FROM c")
        assert cur.statusmessage == "FETCH 1" and cur.fetchall()[0][0] == "F"
        assert conn.execute("MOVE ALL IN c").statusmessage == "MOVE 1"
        assert conn.execute("FETCH NEXT FROM c").statusmessage == "FETCH 0"
        with pytest.raises(pg_errors.ObjectNotInPrerequisiteState):
            conn.execute("FETCH PRIOR FROM c")
        conn.execute("ROLLBACK")
        conn.execute("BEGIN")
        conn.execute(f"DECLARE h CURSOR WITH HOLD FOR {GROUPED}")
        conn.execute(f"DECLARE w CURSOR WITHOUT HOLD FOR {GROUPED}")
        conn.execute("COMMIT")
        assert len(conn.execute("FETCH ALL FROM h").fetchall()) == 2  # held past COMMIT
        with pytest.raises(pg_errors.InvalidCursorName):
            conn.execute("FETCH ALL FROM w")  # closed by COMMIT
        assert conn.execute("CLOSE h").statusmessage == "CLOSE CURSOR"
        with pytest.raises(pg_errors.InvalidCursorName):
            conn.execute("CLOSE h")
        assert conn.execute("CLOSE ALL").statusmessage == "CLOSE CURSOR ALL"


def test_simple_query_of_several_statements_is_one_transaction(served) -> None:
    conn = pg2(served)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f"DECLARE q CURSOR FOR {GROUPED}; FETCH 2 FROM q")
            assert [r[0] for r in cur.fetchall()] == ["F", "M"]
            with pytest.raises(psycopg2.errors.InvalidCursorName):
                cur.execute("FETCH 1 FROM q")  # gone with its implicit transaction
    finally:
        conn.close()


def test_sqlalchemy_stream_results(served) -> None:
    engine = sa.create_engine(
        f"postgresql+psycopg2://alice:s3cret%20pw@127.0.0.1:{served.port}/dpsql")
    try:
        before = spent(served)
        with engine.connect() as conn:
            result = conn.execution_options(stream_results=True, max_row_buffer=2).execute(
                sa.text("SELECT age, COUNT(*) AS n FROM people WHERE sex = 'F' GROUP BY age "
                        "ORDER BY age"))
            assert list(result.keys()) == ["age", "n"]
            ages = [r.age for r in result]
            assert len(ages) > 10 and ages == sorted(ages)
        assert spent(served) == pytest.approx(before + 1.0)
    finally:
        engine.dispose()
