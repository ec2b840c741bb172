"""The data owner's commands: ``dpsql metadata``, ``dpsql budget``, ``dpsql analyst`` (who may
log in to ``dpsql serve``) and ``dpsql release`` (a table under local DP)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from dpsql.cli.common import (
    METADATA_HELP,
    F,
    budget_metadata,
    cost_note,
    database_options,
    format_csv,
    format_json,
    open_database,
    unmetered_warning,
    user_errors,
)
from dpsql.ledger.opening import init_ledger, ledger_path, open_ledger, resolve_analyst
from dpsql.ledger.report import budget_report
from dpsql.metadata.metadata import Metadata
from dpsql.metadata.owner_settings import EVERY_OTHER_ANALYST
from dpsql.texttable import format_table


@click.group()
def metadata() -> None:
    """Work with the data owner's metadata file."""


@metadata.command("init")
@click.option("--database", "-d", required=True, type=str,
              help="A DuckDB file, a folder of CSV/Parquet files or a postgresql:// URL.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Write here instead of standard output.")
@click.option("--unit", metavar="COLUMN", help="The privacy unit's column: read the data to "
              "propose k, g, NOT NULL and unique columns (without it: the schema only).")
@click.option("--target", type=click.FloatRange(0.0, 1.0, min_open=True), default=0.95,
              show_default=True, help="With --unit: the share of rows the proposed g keeps "
              "(and the k shown beside the recommended one).")
@click.option("--epsilon", "-e", type=click.FloatRange(0.0, min_open=True), default=1.0,
              show_default=True, help="With --unit: a query's epsilon, at which each k's "
              "noise is shown and the recommended k is chosen.")
@click.option("--analyst", "-a", metavar="NAME", help="Whose budget [analysts.NAME] "
              "declares (default: $DPSQL_ANALYST, else the operating-system user).")
@user_errors
def metadata_init(database: str, output: Path | None, unit: str | None, target: float,
                  epsilon: float, analyst: str | None) -> None:
    """Write a metadata skeleton from the database's schema (its keys and NOT NULL too) and,
    with --unit, proposals read from its data. It declares a [budget] and your
    [analysts.NAME], so that the first query is metered."""
    from dpsql.engines import DuckDBEngine, open_engine
    from dpsql.engines.constraints import read_constraints
    from dpsql.owner.metadata_check import propose
    from dpsql.owner.metadata_init import skeleton

    who = resolve_analyst(analyst)
    engine = open_engine(database)
    try:  # DuckDB keeps the names' case; a server's schema is in DuckDB's type names too
        tables = (engine.tables() if isinstance(engine, DuckDBEngine) else
                  {t: list(columns.items()) for t, columns in engine.schema.items()})
        proposals = None if unit is None else {
            t: propose(engine, t, [c for c, _ in cols], unit if any(
                c == unit for c, _ in cols) else None, target, epsilon)
            for t, cols in tables.items()}
        text = skeleton(tables, proposals, read_constraints(engine), who)
    finally:
        engine.close()
    for proposal in (proposals or {}).values():
        if proposal.report:  # the owner's exact numbers: on the terminal, not in the file
            click.echo(proposal.report, err=True)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}: metered for {who!r} (its [budget] and [analysts]); fill in "
                   "bounds, domains and contribution limits", err=True)


@metadata.command("check")
@database_options
@click.option("--target", type=click.FloatRange(0.0, 1.0, min_open=True), default=0.95,
              show_default=True, help="The share of rows the suggested k and g keep.")
@click.option("--epsilon", "-e", type=click.FloatRange(0.0, min_open=True), default=1.0,
              show_default=True, help="The epsilon at which the noise of a suggestion is shown.")
@user_errors
def metadata_check(database: str | None, metadata: Path | None, target: float,
                   epsilon: float) -> None:
    """The owner's check (reads the data exactly): the rows and units that the declared
    max_rows_per_unit and max_groups_per_unit keep, the values clamped, and suggested bounds."""
    from dpsql.owner.metadata_check import check_metadata_bounds, report_text

    with open_database(database, metadata) as db:
        checks = check_metadata_bounds(db.engine, db.metadata, target, epsilon)
    click.echo(report_text(checks, target, epsilon), nl=False)


@click.group(invoke_without_command=True)
@click.option("--metadata", "-m", type=click.Path(dir_okay=False, path_type=Path),
              help=METADATA_HELP)
@click.option("--analyst", "-a", metavar="NAME", help="Show this analyst only.")
@click.option("--limit", "-n", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many recent queries to list.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table",
              show_default=True, help="json: the budgets and recent queries as one object; "
              "csv: the budgets table (with --by day: the daily totals).")
@click.option("--since", type=click.DateTime(["%Y-%m-%d"]), metavar="YYYY-MM-DD",
              help="Only charges from this UTC day on (the queries listed, the daily totals).")
@click.option("--by", type=click.Choice(["day"]), help="day: each analyst's charges summed per "
              "UTC day (what dpsql.spending serves over the wire).")
@click.pass_context
@user_errors
def budget(ctx: click.Context, metadata: Path | None, analyst: str | None, limit: int,
           fmt: str, since: datetime | None, by: str | None) -> None:
    """Show each analyst's privacy budget (total, spent, remaining) and the recent queries.

    The ledger is the metadata's [budget] ledger, or $DPSQL_LEDGER when set. The columns of
    json, csv and --by day are those of the ledger views dpsql.budgets, dpsql.queries and
    dpsql.spending (docs/budget_and_dbapi.md).
    """
    ctx.obj = metadata
    if ctx.invoked_subcommand is not None:
        return
    md = budget_metadata(metadata)
    ledger = open_ledger(md)
    if ledger is None:
        click.echo(unmetered_warning(md), err=True)
        return
    start = None if since is None else since.replace(tzinfo=UTC)
    with ledger:
        statuses = ([ledger.status(analyst)] if analyst is not None else ledger.all_status())
        if fmt == "table" and by is None:
            history = [e for e in ledger.history(analyst, limit)
                       if start is None or e.at >= start]
            click.echo(budget_report(md, ledger, statuses, history, limit))
            return
        from dpsql.ledger.spending import VIEWS, view_rows  # DuckDB: only here

        rows = view_rows(ledger.charges(analyst, start), statuses)
    names = {view: [c for c, _ in VIEWS[view][0]] for view in VIEWS}
    if by == "day":
        show = {"table": format_table, "csv": format_csv, "json": format_json}[fmt]
        click.echo(show(names["spending"], rows["spending"]), nl=fmt != "csv")
    elif fmt == "csv":
        click.echo(format_csv(names["budgets"], rows["budgets"]), nl=False)
    else:
        latest = rows["queries"][::-1][:limit]
        click.echo(json.dumps({"ledger": ledger.path, "accounting": ledger.accounting,
                               "budgets": _records(names["budgets"], rows["budgets"]),
                               "queries": _records(names["queries"], latest)},
                              indent=2, default=str, ensure_ascii=False))


def _records(names: list[str], rows: list[tuple[object, ...]]) -> list[dict[str, object]]:
    return [dict(zip(names, row, strict=True)) for row in rows]


@budget.command("reset")
@click.argument("analyst")
@click.option("--metadata", "-m", type=click.Path(dir_okay=False, path_type=Path),
              help=METADATA_HELP)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
@user_errors
def budget_reset(ctx: click.Context, analyst: str, metadata: Path | None, yes: bool) -> None:
    """The data owner's action: ANALYST's spending starts again from zero.

    The ledger keeps every earlier charge (nothing is deleted), and the privacy loss of the
    earlier answers does not go away: a reset grants a new budget on top of the old one.
    """
    md = budget_metadata(metadata if metadata is not None else ctx.obj)
    path = ledger_path(md)
    if path is None:
        raise click.UsageError(f"no privacy budget is declared in {md.source}: there is nothing "
                               "to reset")
    if analyst == EVERY_OTHER_ANALYST:
        raise click.UsageError(f"{EVERY_OTHER_ANALYST!r} is not an analyst; reset analysts one "
                               "by one")
    if not yes:
        click.confirm(f"Reset the privacy budget of {analyst!r} in {path}? Their spending starts "
                      "again from zero; the earlier answers stay released", abort=True)
    ledger = open_ledger(md)
    assert ledger is not None
    with ledger:
        ledger.reset(analyst)
        left = ledger.status(analyst).remaining
    click.echo(f"reset {analyst!r}: epsilon={left.epsilon:g}, delta={left.delta:g} available "
               "(earlier charges are kept in the ledger)")


@budget.command("init")
@click.option("--metadata", "-m", type=click.Path(dir_okay=False, path_type=Path),
              help=METADATA_HELP)
@click.option("--start-over", is_flag=True,
              help="The recorded ledger is lost: start a new one (every spending from zero).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
@user_errors
def budget_init(ctx: click.Context, metadata: Path | None, start_over: bool, yes: bool) -> None:
    """Create the budget ledger that the metadata declares, and record its identity next to
    it: from then on a missing, emptied or replaced ledger is refused, never started afresh.
    """
    md = budget_metadata(metadata if metadata is not None else ctx.obj)
    if start_over and not yes:
        click.confirm(f"Start a new, empty budget ledger at {ledger_path(md)}? Every analyst's "
                      "spending starts from zero; the answers already released stay released",
                      abort=True)
    ledger, retired = init_ledger(md, start_over=start_over)
    with ledger:
        assert ledger.identity is not None
        click.echo(f"created the budget ledger {ledger.path} (id {ledger.identity.ledger_id})"
                   + (f"; the lost ledger's record is kept as {retired}" if retired else ""))


def password_options(fn: F) -> F:
    """--metadata and --passwords, as every `dpsql analyst` command reads them."""
    fn = click.option("--passwords", type=click.Path(dir_okay=False, path_type=Path),
                      help="The passwords file (default: as `dpsql serve` finds it).")(fn)
    return click.option("--metadata", "-m", type=click.Path(dir_okay=False, path_type=Path),
                        help=METADATA_HELP)(fn)


@click.group()
def analyst() -> None:
    """Manage who may log in to `dpsql serve`."""


@analyst.command("add")
@click.argument("name")
@password_options
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input "
                                                     "instead of prompting.")
@click.option("--iterations", type=click.IntRange(min=4096), default=4096, show_default=True,
              help="PBKDF2 iterations of the SCRAM-SHA-256 verifier.")
@user_errors
def analyst_add(name: str, metadata: Path | None, passwords: Path | None, password_stdin: bool,
                iterations: int) -> None:
    """Set NAME's password for `dpsql serve` (adds the analyst or replaces the password).

    Only a SCRAM-SHA-256 verifier (salt, iterations, StoredKey, ServerKey) is stored, never the
    password. The privacy budget is granted separately, in the metadata's [analysts.NAME].
    """
    from dpsql.server.auth import passwords_for, set_password

    md = budget_metadata(metadata)
    path = passwords or passwords_for(md)
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt(f"Password for {name}", hide_input=True,
                                confirmation_prompt=True)
    try:
        set_password(path, name, password, iterations)
    except (ValueError, OSError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"stored the password verifier of {name!r} in {path}")
    budget = md.budget
    if budget is not None and name not in budget.analysts and budget.default is None:
        click.echo(f"dpsql: warning: {name!r} has no privacy budget in {md.source}; add "
                   f"[analysts.{name}] with epsilon (and delta) before they can ask anything",
                   err=True)


@analyst.command("list")
@password_options
@user_errors
def analyst_list(metadata: Path | None, passwords: Path | None) -> None:
    """List who may log in to `dpsql serve`, with the privacy budget each is granted."""
    from dpsql.server.auth import passwords_for, read_passwords

    md = budget_metadata(metadata)
    path = passwords or passwords_for(md)
    try:
        names = sorted(read_passwords(path))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"{len(names)} analyst{'s' if len(names) != 1 else ''} in {path}", err=True)
    if names:
        click.echo(format_table(["analyst", "budget"], [[n, _granted(md, n)] for n in names]))


def _granted(md: Metadata, name: str) -> str:
    budget = md.budget
    if budget is None:
        return "unmetered (no [budget] declared)"
    allowance = budget.analysts.get(name, budget.default)
    if allowance is None:
        return f"none: add [analysts.{name}] to the metadata"
    return (f"epsilon={allowance.epsilon:g}, delta={allowance.delta:g}"
            + ("" if name in budget.analysts else ' (analysts."*")'))


@analyst.command("remove")
@click.argument("name")
@password_options
@user_errors
def analyst_remove(name: str, metadata: Path | None, passwords: Path | None) -> None:
    """Remove NAME's password: they can no longer log in (a running server reads the file
    again at the next login). Their ledger and budget stay as they are."""
    from dpsql.server.auth import passwords_for, remove_password

    path = passwords or passwords_for(budget_metadata(metadata))
    try:
        removed = remove_password(path, name)
    except (ValueError, OSError) as e:
        raise click.ClickException(str(e)) from None
    if not removed:
        raise click.ClickException(f"{name!r} has no password in {path}; `dpsql analyst list` "
                                   "shows who has one")
    click.echo(f"removed the password verifier of {name!r} from {path}")


@click.command()
@click.option("--local", "table", required=True, metavar="TABLE",
              help="The table to release under local DP (its metadata's local section).")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The Parquet file to write.")
@database_options
@click.option("--analyst", "-a", metavar="NAME", help="Who is asking, charged for the release.")
@user_errors
def release(table: str, out: Path, database: str | None, metadata: Path | None,
            analyst: str | None) -> None:
    """Write a table's randomized rows (local DP) to a Parquet file, charged once; queries over
    the file are free (post-processing)."""
    with open_database(database, metadata, analyst) as db:
        if not db.metered:
            click.echo(unmetered_warning(db.metadata), err=True)
        answered = db.release_local(table, out)
        status = db.budget() if db.metered else None
    rows = len(answered.result.rows)
    click.echo(answered.result.local_label or "", err=True)
    click.echo(f"wrote {rows} randomized row{'s' if rows != 1 else ''} of {table} to {out} "
               f"({cost_note(answered, status)})", err=True)
