"""Session commands: transactions, settings, prepared-statement housekeeping and server-side
cursors, each kind of :class:`~dpsql.server.machine.classify.Statement` answered by one handler of
:data:`COMMANDS`.

None of them reads private data. A cursor's DECLARE answers its query through the session like
any other statement (charged once); FETCH and MOVE then page through the released rows.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence

from dpsql.errors import InvalidPrivacyParameter
from dpsql.server.machine import cursors
from dpsql.server.machine import settings as st
from dpsql.server.machine.classify import Statement, StatementKind
from dpsql.server.machine.host import SessionState
from dpsql.server.machine.outcome import (
    Outcome,
    PgError,
    copy_fields,
    no_cursor,
    show_column,
    with_formats,
)
from dpsql.server.wire import protocol as p
from dpsql.server.wire import types as t

Handler = Callable[[SessionState, Statement], Awaitable[Outcome]]


# -- transactions ----------------------------------------------------------------------------


async def begin(m: SessionState, statement: Statement) -> Outcome:
    if m.status != "I":
        return Outcome(None, tag=statement.tag, extra=[p.notice_response(
            "25001", "there is already a transaction in progress")])
    m.status = "T"
    return Outcome(None, tag="BEGIN")


async def end(m: SessionState, statement: Statement) -> Outcome:
    """COMMIT or ROLLBACK (a failed block's COMMIT rolls back, as in PostgreSQL)."""
    extra = []
    tag = "COMMIT" if statement.kind == StatementKind.COMMIT and m.status != "E" else "ROLLBACK"
    if m.status == "I":
        extra.append(p.notice_response("25P01", "there is no transaction in progress"))
    m.status = "I"
    m.portals.clear()  # portals live until the end of their transaction
    end_cursors(m, committed=tag == "COMMIT")
    return Outcome(None, tag=tag, extra=extra)


async def rollback_to(m: SessionState, statement: Statement) -> Outcome:
    if m.status == "I":
        raise PgError("25P01", "ROLLBACK TO SAVEPOINT can only be used in transaction blocks")
    m.status = "T"
    return Outcome(None, tag="ROLLBACK")


async def savepoint(m: SessionState, statement: Statement) -> Outcome:
    if m.status == "I":
        raise PgError("25P01", f"{statement.tag} can only be used in transaction blocks")
    return Outcome(None, tag=statement.tag)


# -- housekeeping ----------------------------------------------------------------------------


async def discard(m: SessionState, statement: Statement) -> Outcome:
    if statement.argument not in ("all", ""):
        return Outcome(None, tag=statement.tag)
    if m.status != "I":
        raise PgError("25001", "DISCARD ALL cannot run inside a transaction block")
    m.statements = {k: v for k, v in m.statements.items() if k == ""}
    m.portals.clear()
    m.cursors.clear()
    return reset_all(m, statement.tag)


async def deallocate(m: SessionState, statement: Statement) -> Outcome:
    target = statement.argument
    if target == "all":
        m.statements = {k: v for k, v in m.statements.items() if k == ""}
    elif m.statements.pop(target, None) is None:
        raise PgError("26000", f'prepared statement "{target}" does not exist')
    return Outcome(None, tag="DEALLOCATE" + (" ALL" if target == "all" else ""))


async def noop(m: SessionState, statement: Statement) -> Outcome:
    return Outcome(None, tag=statement.tag)


# -- settings --------------------------------------------------------------------------------


def apply_setting(m: SessionState, name: str, value: str | None) -> bytes | None:
    """Set (or with None reset) one setting; the ParameterStatus to send if reported."""
    if value is None:
        config = m.server.config
        epsilon = m.server.db.query_epsilon(m.user, config.epsilon)
        default = m.initial.get(name, st.defaults(m.user, epsilon, config.delta,
                                                  config.mechanism, 0, "").get(name))
        if name in st.READ_ONLY:
            raise st.SettingError(f"parameter \"{st.display_name(name)}\" cannot be changed",
                                  "55P02")
        if default is None:
            if m.settings.pop(name, None) is None:
                raise st.SettingError(f'unrecognized configuration parameter "{name}"',
                                      "42704")
            return None
        value = default
    else:
        value = st.normalise(name, value, m.settings)
        _within_owner_limits(m, name, value)
    changed = m.settings.get(name) != value
    m.settings[name] = value
    if name == "datestyle":
        m.settings["datestyle_order"] = value.split(",")[-1].strip()
    if changed and name in st.CANONICAL:
        return p.parameter_status(st.CANONICAL[name], value)
    return None


def _within_owner_limits(m: SessionState, name: str, value: str) -> None:
    """A session epsilon or delta beyond the owner's per-query limits is refused at SET, where
    the analyst typed it, not at each later query (the planner checks them again there)."""
    if name not in ("dpsql.epsilon", "dpsql.delta"):
        return
    epsilon, delta, mechanism = m.privacy()
    if name == "dpsql.epsilon":
        epsilon = float(value)
    else:
        delta = float(value)
    try:
        m.server.db.check_parameters(epsilon, delta, mechanism)
    except InvalidPrivacyParameter as e:
        raise st.SettingError(str(e), e.sqlstate) from None


async def do_set(m: SessionState, statement: Statement) -> Outcome:
    try:
        command = st.parse_set(statement.text, m.user)
        if command.name is None:
            return Outcome(None, tag="SET")
        status = apply_setting(m, command.name, command.value)
    except st.SettingError as e:
        raise PgError(e.sqlstate, str(e)) from None
    return Outcome(None, tag="SET", extra=[status] if status else [])


async def do_reset(m: SessionState, statement: Statement) -> Outcome:
    target = statement.argument.strip().strip(";").strip()
    if target == "all":
        return reset_all(m, "RESET")
    try:
        status = apply_setting(m, target, None)
    except st.SettingError as e:
        raise PgError(e.sqlstate, str(e)) from None
    return Outcome(None, tag="RESET", extra=[status] if status else [])


def reset_all(m: SessionState, tag: str) -> Outcome:
    extra = []
    for name, value in m.initial.items():
        if m.settings.get(name) != value and name in st.CANONICAL:
            extra.append(p.parameter_status(st.CANONICAL[name], value))
    m.settings = dict(m.initial)
    return Outcome(None, tag=tag, extra=extra)


async def do_show(m: SessionState, statement: Statement) -> Outcome:
    target = statement.argument.strip().strip(";").strip()
    if target == "all":
        rows: list[tuple[object, ...]] = [
            (st.display_name(k), v, "") for k, v in sorted(m.settings.items())
            if k != "datestyle_order"]
        return Outcome([p.Field("name", t.TEXT), p.Field("setting", t.TEXT),
                        p.Field("description", t.TEXT)], rows, f"SHOW {len(rows)}")
    name = target.lower()
    if name == "dpsql.budget":
        value = await m.blocking(lambda: budget_text(m))
    elif name in m.settings and name != "datestyle_order":
        value = m.settings[name]
    else:
        raise PgError("42704", f'unrecognized configuration parameter "{target}"')
    return Outcome([p.Field(show_column(target), t.TEXT)], [(value,)], "SHOW")


def budget_text(m: SessionState) -> str:
    status = m.server.budget(m.user)
    if status is None:
        return "unmetered: no analyst budgets are declared"
    return (f"spent epsilon={status.spent.epsilon:g}, delta={status.spent.delta:g} of "
            f"epsilon={status.total.epsilon:g}, delta={status.total.delta:g}; left "
            f"epsilon={status.remaining.epsilon:g}, delta={status.remaining.delta:g}")


def startup_options(text: str) -> list[tuple[str, str]]:
    """``-c name=value`` and ``--name=value`` pairs of the ``options`` startup parameter."""
    out = []
    words = re.findall(r"(?:\\.|\S)+", text)
    words = [re.sub(r"\\(.)", r"\1", w) for w in words]
    i = 0
    while i < len(words):
        word = words[i]
        if word == "-c" and i + 1 < len(words):
            pair = words[i + 1]
            i += 2
        elif word.startswith("-c") or word.startswith("--"):
            pair = word[2:]
            i += 1
        else:
            raise st.SettingError(f"invalid command-line argument in options: {word!r}",
                                  "22023")
        name, sep, value = pair.partition("=")
        if not sep:
            raise st.SettingError(f"option {pair!r} needs a value (-c name=value)", "22023")
        out.append((name.replace("-", "_"), value))
    return out


# -- server-side cursors (see dpsql.server.machine.cursors)
# ------------------------------------------


async def declare(m: SessionState, statement: Statement, params: list[object],
                  privacy: tuple[float, float, str], param_types: Sequence[int]) -> Outcome:
    """Answer the cursor's query once (charged once, like any query) and keep its rows.

    Every check that can refuse comes before the query runs, so a DECLARE that fails
    for its name or its transaction state charges nothing."""
    declaration, inner = statement.declaration, statement.inner
    assert declaration is not None and inner is not None  # set by the classifier
    name = declaration.name
    if name in m.cursors or (name and name in m.portals):
        raise PgError("42P03", f'cursor "{name}" already exists')
    if not declaration.hold and m.status == "I" and not m.implicit:
        raise PgError("25P01", "DECLARE CURSOR can only be used in transaction blocks")
    if inner.kind not in ("query", "catalog"):
        raise PgError("42601", "DECLARE CURSOR needs a SELECT query")
    outcome = await m.execute(inner, params, privacy, param_types)
    fields = with_formats(outcome.fields, [1]) if declaration.binary else outcome.fields
    m.cursors[name] = cursors.Cursor(declaration, fields, outcome.rows,
                                     in_transaction=m.status == "T" or m.implicit)
    # The answer's notices (randomized local rows say so; the bias of bounding) come with
    # DECLARE, which answered the query: FETCH only pages through its rows.
    return Outcome(None, tag=statement.tag, extra=outcome.extra)


async def close(m: SessionState, statement: Statement) -> Outcome:
    if not statement.argument:
        m.cursors.clear()
    elif m.cursors.pop(statement.argument, None) is None:
        raise no_cursor(statement.argument)
    return Outcome(None, tag=statement.tag)


async def fetch(m: SessionState, statement: Statement) -> Outcome:
    """FETCH and MOVE: the released rows of a cursor, at no cost."""
    cursor = find_cursor(m, statement.argument)
    assert statement.direction is not None  # set with the name by the classifier
    try:
        rows = cursor.fetch(statement.direction)
    except cursors.CursorStateError as e:
        raise PgError("55000", str(e), hint="Declare it with SCROLL option to enable "
                                            "backward scan.") from None
    if statement.kind == StatementKind.MOVE:
        return Outcome(None, tag=f"MOVE {len(rows)}")
    return Outcome(copy_fields(cursor.fields), rows, f"FETCH {len(rows)}")


def find_cursor(m: SessionState, name: str) -> cursors.Cursor:
    cursor = m.cursors.get(name)
    if cursor is None:
        raise no_cursor(name)
    return cursor


def end_cursors(m: SessionState, committed: bool) -> None:
    """The end of a transaction: cursors WITHOUT HOLD close; on a rollback, so do those
    declared in it. Those WITH HOLD declared in a committed transaction live on."""
    for name, cursor in list(m.cursors.items()):
        if not cursor.declaration.hold or (cursor.in_transaction and not committed):
            del m.cursors[name]
        else:
            cursor.in_transaction = False


COMMANDS: dict[str, Handler] = {
    "begin": begin, "commit": end, "rollback": end, "rollback_to": rollback_to,
    "savepoint": savepoint, "release": savepoint, "set": do_set, "reset": do_reset,
    "show": do_show, "discard": discard, "deallocate": deallocate, "noop": noop,
    "close": close, "fetch": fetch, "move": fetch,
}


async def run_command(m: SessionState, statement: Statement, params: list[object],
                      privacy: tuple[float, float, str], param_types: Sequence[int]) -> Outcome:
    """Answer a session command or cursor statement (DECLARE's query with these arguments)."""
    if statement.error:  # a cursor statement that could not be read
        raise PgError("42601", statement.error)
    if statement.kind == StatementKind.DECLARE:
        return await declare(m, statement, params, privacy, param_types)
    handler = COMMANDS.get(statement.kind)
    if handler is None:
        raise PgError("0A000", "not supported")
    return await handler(m, statement)
