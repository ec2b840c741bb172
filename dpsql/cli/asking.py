"""The analyst's commands: ``dpsql query``, ``dpsql explain`` and ``dpsql serve``."""

from __future__ import annotations

import errno
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

import click

from dpsql.cli.common import (
    bounds_options,
    budget_lines,
    database_options,
    open_database,
    pointing_into,
    privacy_options,
    query_bounds,
    read_sql,
    sql_options,
    unmetered_warning,
    user_errors,
)
from dpsql.cli.defaults import sources
from dpsql.cli.output import show_answer
from dpsql.cli.status import status_line
from dpsql.errors import OperationalError
from dpsql.execution.watch import Watch, call_watched
from dpsql.shortcut import Asked, remember, stored_answer

if TYPE_CHECKING:
    from dpsql.database import Answer
    from dpsql.ledger.budget import BudgetStatus

T = TypeVar("T")


@click.command()
@sql_options
@database_options
@privacy_options
@bounds_options
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True)
@click.option("--accuracy", is_flag=True, help="Add a +/- column (95%) after each noisy cell.")
@click.option("--retention", type=float, metavar="EPSILON", help="Also estimate, at this "
              "epsilon (charged), the share of a unit's rows the contribution bounds keep.")
@click.option("--analyst", "-a", metavar="NAME", help="Who is asking, charged for the query "
              "(default: $DPSQL_ANALYST, else the operating-system user).")
@click.option("--no-caveats", is_flag=True, help="Leave out the notes that say when the answer "
              "is not worth reading (noise above the values, an AVG or quantile at a bound).")
@user_errors
def query(sql: str | None, file: TextIO | None, database: str | None, metadata: Path | None,
          epsilon: float | None, delta: float, mechanism: str, fmt: str, accuracy: bool,
          analyst: str | None, max_rows: int | None, max_groups: int | None,
          retention: float | None, no_caveats: bool) -> None:
    """Answer SQL with differentially private noise, charged to the analyst's budget.

    SQL is the query's text, or - to read it from standard input (or pass -f FILE).

    A query without an aggregate of a table the owner opted in to local DP (people in the
    sample data) returns randomized rows, never real ones: a line says so before the table
    (on stderr with --format csv; with --format json the output is an object whose "rows" are
    the rows and "randomized" the sentence). Such rows cost the owner's per-row epsilon times k
    once per analyst and table, whatever --epsilon says; every later row-level query of that
    table reads the same randomized copy for free.

    When the noise exceeds the value in some cells, or an AVG or quantile sits at a bound, a
    note on stderr says so, with the fix (--no-caveats: none). --format json prints one
    object: columns, rows (with each noisy cell's ±95%), caveats, notes, randomized, cost."""
    sql = read_sql(sql, file)
    source = sources(database, metadata)
    asked = Asked(sql, epsilon, delta, mechanism, query_bounds(max_rows, max_groups), analyst,
                  caveats=not no_caveats)
    # Asked again: the stored answer, found before the planner is imported (dpsql.shortcut).
    found = stored_answer(source, asked) if retention is None else None
    if found is not None:
        show_answer(*found, fmt, accuracy)
        return

    def ask() -> tuple[Answer, BudgetStatus | None, list[str]]:
        with open_database(*source, analyst) as db, pointing_into(sql):
            if not db.metered:
                click.echo(unmetered_warning(db.metadata), err=True)
            answer = db.run(sql, epsilon=epsilon, delta=delta, mechanism=mechanism,
                            bounds=asked.bounds, retention=retention, caveats=asked.caveats)
            if retention is None:
                remember(source, db, asked, answer)
            status = db.budget() if db.metered else None
            return answer, status, budget_lines(db, answer, analyst)  # past 80%; first charge

    answered, status, said = watched(ask)
    show_answer(answered, status, fmt, accuracy)
    for line in said:
        click.echo(line, err=True)


def watched(ask: Callable[[], T]) -> T:
    """``ask`` on a worker thread, with the status line on a terminal and Ctrl-C as one line
    (:mod:`dpsql.cli.status`); the status line is erased before anything else prints."""
    watch, line = Watch(), status_line()
    try:
        return call_watched(ask, watch, line)
    except KeyboardInterrupt:  # a second Ctrl-C while the first one's cancel ran
        raise watch.error() from None
    finally:
        if line is not None:
            line.clear()


@click.command()
@sql_options
@database_options
@privacy_options
@bounds_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--sql", "show_sql", is_flag=True, help="Also show the SQL the engine runs.")
@user_errors
def explain(sql: str | None, file: TextIO | None, database: str | None,
            metadata: Path | None, epsilon: float | None, delta: float, mechanism: str,
            max_rows: int | None, max_groups: int | None, fmt: str, show_sql: bool) -> None:
    """Show what a query would cost and how accurate each answer would be, without reading
    data or charging anything: its cost, each aggregate's 95% accuracy in its column's units,
    how groups are released, the contribution bounds and what they may drop, how the noise is
    drawn; the engine's SQL with --sql.

    SQL is the query's text, or - to read it from standard input (or pass -f FILE)."""
    from dpsql.explanation.render import as_json, render

    sql = read_sql(sql, file)
    with open_database(database, metadata) as db, pointing_into(sql):
        e = db.explain(sql, epsilon=epsilon, delta=delta, mechanism=mechanism,
                       bounds=query_bounds(max_rows, max_groups))
    if fmt == "json":
        click.echo(json.dumps(as_json(e, show_sql), indent=2, ensure_ascii=False))
    else:
        click.echo("\n".join(render(e, show_sql)))


@click.command()
@database_options
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0 for every interface; use TLS then).")
@click.option("--port", "-p", type=click.IntRange(0, 65535), default=5432, show_default=True)
@click.option("--passwords", type=click.Path(dir_okay=False, path_type=Path),
              help="The analysts' password verifiers (default: dpsql-passwords.toml next to "
                   "the metadata, or [server] passwords in it).")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="PEM certificate (chain): answer SSLRequest with TLS.")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="PEM private key of --tls-cert.")
@click.option("--require-tls", is_flag=True, help="Refuse unencrypted connections.")
@privacy_options
@click.option("--statement-timeout", type=click.FloatRange(min=0), default=300.0,
              show_default=True, help="Seconds a private query may run, capping [server] "
              "statement_timeout (0: no cap); SET statement_timeout limits catalog queries only.")
@click.option("--max-connections", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--idle-timeout", type=click.FloatRange(min=0), help="Seconds a session may stay "
              "silent (0: no limit; default: [server] idle_timeout).")
@click.option("--workers", type=click.IntRange(min=0), default=0,
              help="Threads answering queries (default: one per allowed connection).")
@user_errors
def serve(database: str | None, metadata: Path | None, host: str, port: int,
          passwords: Path | None, tls_cert: Path | None, tls_key: Path | None,
          require_tls: bool, epsilon: float | None, delta: float, mechanism: str,
          statement_timeout: float, max_connections: int, idle_timeout: float | None,
          workers: int) -> None:
    """Serve the database over the PostgreSQL protocol, for psql, JDBC and BI tools.

    Analysts log in with the password set by `dpsql analyst add NAME` (SCRAM-SHA-256); every
    query is charged to the connected analyst. --epsilon/--delta/--mechanism are each query's
    defaults (an analyst's query_epsilon first); SET dpsql.epsilon = 0.5 or the startup options
    -c dpsql.epsilon=0.1 change them for a session.
    """
    from dpsql.server.auth import passwords_for
    from dpsql.server.config import ServerConfig
    from dpsql.server.server import run

    if (tls_cert is None) != (tls_key is None) or (require_tls and tls_cert is None):
        raise click.UsageError("--tls-cert and --tls-key go together; --require-tls needs them")
    with open_database(database, metadata) as db:
        if not db.metered:
            click.echo(unmetered_warning(db.metadata), err=True)
        _warn_without_passwords(passwords or passwords_for(db.metadata))
        config = ServerConfig(host=host, port=port, passwords=passwords, tls_cert=tls_cert,
                              tls_key=tls_key, require_tls=require_tls, epsilon=epsilon,
                              delta=delta, mechanism=mechanism,
                              statement_timeout=statement_timeout,
                              max_connections=max_connections, workers=workers,
                              idle_timeout=idle_timeout)
        try:
            run(db, config)
        except OSError as e:
            # Binding the address, not a file (TLS key, passwords: those name their file) nor
            # a session (its errors stay in the session).
            if e.errno not in _LISTEN_ERRORS or e.filename is not None:
                raise
            raise _cannot_listen(host, port, e) from None


def _warn_without_passwords(path: Path) -> None:
    """No analyst can log in before `dpsql analyst add`: say so at start, not at the first
    failed login (whose message must not tell an unknown analyst from a wrong password)."""
    from dpsql.server.auth import read_passwords

    try:
        names = read_passwords(path)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    if not names:
        click.echo(f"dpsql: warning: no analyst can log in yet: {path} holds no passwords; "
                   "add one with `dpsql analyst add NAME` (same --metadata)", err=True)


_LISTEN_ERRORS = {errno.EADDRINUSE: "the port is in use (another dpsql serve or PostgreSQL?)",
                  errno.EACCES: "permission denied (ports below 1024 need privileges)",
                  errno.EADDRNOTAVAIL: "this machine has no such address"}


def _cannot_listen(host: str, port: int, e: OSError) -> OperationalError:
    what = _LISTEN_ERRORS.get(e.errno or 0, str(e))
    return OperationalError(f"cannot listen on {host}:{port}: {what}; pass another --port "
                            "(--port 0 picks a free one) or --host")
