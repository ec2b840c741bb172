"""The ``dpsql`` command line: thin commands over :class:`dpsql.Database`.

User errors (refusals, bad metadata, a missing database) print one clear message to stderr and
exit with status 2 (1 for an exhausted budget); never a traceback.

``dpsql query`` charges the analyst's budget in the ledger the metadata declares (``--analyst``,
default ``DPSQL_ANALYST`` or the operating-system user), the same ledger as the DB-API;
``dpsql budget`` shows it and ``dpsql budget reset ANALYST`` is the data owner's reset.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from dpsql.database import (
    Answer,
    Database,
    init_ledger,
    ledger_path,
    open_ledger,
    sample_paths,
)
from dpsql.errors import BudgetExhausted, Error, guarded
from dpsql.execution.postprocess import Result
from dpsql.explain import render
from dpsql.ledger.budget import BudgetStatus
from dpsql.ledger.report import budget_report
from dpsql.metadata.contribution import ContributionBounds
from dpsql.metadata.metadata import Metadata, load_metadata
from dpsql.metadata.owner_settings import EVERY_OTHER_ANALYST
from dpsql.privacy.mechanisms import MECHANISMS
from dpsql.texttable import format_table

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(fn: F) -> F:
    """Turn dpsql errors into a message on stderr and a non-zero exit status."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:  # usage errors and a declined confirmation pass: click reports them
            with guarded(passing=(Error, click.ClickException, click.exceptions.Abort,
                                  click.exceptions.Exit), on_bug=_bug,
                         debug=bool(os.environ.get("DPSQL_DEBUG"))):
                return fn(*args, **kwargs)
        except Error as e:
            click.echo(f"dpsql: {type(e).__name__}: {e}{_remedy(e)}", err=True)
            sys.exit(1 if isinstance(e, BudgetExhausted) else 2)

    return wrapper  # type: ignore[return-value]


def _bug(e: Error) -> None:  # a bug: one line for the user, the traceback on DPSQL_DEBUG=1
    click.echo(f"dpsql: InternalError: {e} (set DPSQL_DEBUG=1 to see the traceback)", err=True)
    sys.exit(3)


def _remedy(e: Error) -> str:
    """The command line's words for what the analyst can change (see errors.Remedy)."""
    said = [f"pass --{r.parameter} {r.example:g}" if r.example is not None else
            f"pass a smaller --{r.parameter}" for r in e.remedies]
    return f" ({'; '.join(said)})" if said else ""


def database_options(fn: F) -> F:
    fn = click.option("--metadata", "-m", type=click.Path(dir_okay=False, path_type=Path),
                      help="The data owner's metadata TOML (default: the sample data's).")(fn)
    # A string, not a click.Path: a URL must reach the engine as written (Path makes sc:// sc:/).
    fn = click.option("--database", "-d", type=str,
                      help="A DuckDB file, a folder of CSV/Parquet files, a postgresql:// URL "
                           "or a Spark URL (spark:local?folder=PATH, sc://host:15002; "
                           "docs/engines.md) (default: the bundled sample data).")(fn)
    return fn


def bounds_options(fn: F) -> F:
    """The query's own contribution bounds (dpsql.metadata.contribution)."""
    fn = click.option("--max-groups", type=click.IntRange(min=1), help="Groups one privacy unit "
                      "may contribute to (g; default: the metadata's, at most its cap).")(fn)
    fn = click.option("--max-rows", type=click.IntRange(min=1), help="Rows one privacy unit may "
                      "contribute (k; default: the metadata's, at most its cap): larger means "
                      "less bias, more noise.")(fn)
    return fn


def _bounds(max_rows: int | None, max_groups: int | None) -> ContributionBounds | None:
    return None if max_rows is None and max_groups is None else \
        ContributionBounds(max_rows, max_groups)


def privacy_options(fn: F) -> F:
    fn = click.option("--mechanism", type=click.Choice(MECHANISMS), default=MECHANISMS[0],
                      show_default=True, help="Noise: Laplace or Gaussian (needs --delta).")(fn)
    fn = click.option("--delta", type=float, default=0.0, show_default=True,
                      help="Privacy delta: > 0 allows thresholded GROUP BY keys and Gaussian "
                           "noise.")(fn)
    fn = click.option("--epsilon", "-e", type=float, help="Privacy epsilon spent by this "
                      "query (default: the analyst's query_epsilon, else 1.0).")(fn)
    return fn


def open_database(database: str | Path | None, metadata: Path | None,
                  analyst: str | None = None) -> Database:
    if (database is None) != (metadata is None):
        raise click.UsageError("pass both --database and --metadata, or neither for the "
                               "bundled sample data")
    return Database(database, metadata, analyst=analyst)


def unmetered_warning(metadata: Metadata) -> str:
    return (f"dpsql: warning: no privacy budget declared in {metadata.source}: nothing limits "
            "the total privacy loss")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dpsql")
def main() -> None:
    """dpsql: differentially private answers to ordinary aggregate SQL."""


@main.command()
@click.argument("sql")
@database_options
@privacy_options
@bounds_options
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True)
@click.option("--accuracy", is_flag=True, help="Add a +/- column (95%) after each noisy cell.")
@click.option("--analyst", "-a", metavar="NAME", help="Who is asking, charged for the query "
              "(default: $DPSQL_ANALYST, else the operating-system user).")
@user_errors
def query(sql: str, database: str | None, metadata: Path | None, epsilon: float | None,
          delta: float, mechanism: str, fmt: str, accuracy: bool, analyst: str | None,
          max_rows: int | None, max_groups: int | None) -> None:
    """Answer SQL with differentially private noise, charged to the analyst's budget."""
    with open_database(database, metadata, analyst) as db:
        if not db.metered:
            click.echo(unmetered_warning(db.metadata), err=True)
        answered = db.run(sql, epsilon=epsilon, delta=delta, mechanism=mechanism,
                          bounds=_bounds(max_rows, max_groups))
        status = db.budget() if db.metered else None
    result = answered.result
    header, rows = _tabulate(result, accuracy)
    click.echo({"table": format_table, "csv": format_csv, "json": format_json}[fmt](header, rows),
               nl=fmt != "csv")
    if accuracy:  # the bias the +/- columns do not cover (dpsql.bias)
        for note in result.notes:
            click.echo(f"note: {note}", err=True)
    # on stderr for every format, so that csv and json stay parseable on stdout
    click.echo(f"({len(rows)} row{'s' if len(rows) != 1 else ''}; "
               f"{_cost_note(answered, status)})", err=True)


def _cost_note(answered: Answer, status: BudgetStatus | None) -> str:
    result = answered.result
    cost = f"epsilon={result.epsilon:g}, delta={result.delta:g}"
    if answered.reused:
        note = (f"the stored answer to the same query (paid {cost} before): no new privacy "
                "cost")
    elif answered.cost is not None:
        note = f"privacy cost {cost} charged to {answered.analyst}"
    else:
        note = f"privacy cost {cost}"
    if status is not None:
        note += (f"; {status.analyst} has epsilon={status.remaining.epsilon:g}, "
                 f"delta={status.remaining.delta:g} left")
    return note


@main.command()
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
    click.echo(f"wrote {rows} randomized row{'s' if rows != 1 else ''} of {table} to {out} "
               f"({_cost_note(answered, status)})", err=True)


@main.command()
@click.argument("sql")
@database_options
@privacy_options
@bounds_options
@user_errors
def explain(sql: str, database: str | None, metadata: Path | None, epsilon: float | None,
            delta: float, mechanism: str, max_rows: int | None, max_groups: int | None) -> None:
    """Show the rewritten SQL and each cell's noise, without reading data."""
    with open_database(database, metadata) as db:
        e = db.explain(sql, epsilon=epsilon, delta=delta, mechanism=mechanism,
                       bounds=_bounds(max_rows, max_groups))
    click.echo("\n".join(render(e)))


@main.group()
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
              show_default=True, help="With --unit: the share of rows the proposed k, g keep.")
@user_errors
def metadata_init(database: str, output: Path | None, unit: str | None, target: float) -> None:
    """Write a metadata skeleton from the database's schema (and, with --unit, proposals read
    from its data)."""
    from dpsql.engines import DuckDBEngine, open_engine
    from dpsql.retention import propose
    from dpsql.skeleton import skeleton

    engine = open_engine(database)
    try:  # DuckDB keeps the names' case; a server's schema is in DuckDB's type names too
        tables = (engine.tables() if isinstance(engine, DuckDBEngine) else
                  {t: list(columns.items()) for t, columns in engine.schema.items()})
        proposals = None if unit is None else {
            t: propose(engine, t, [c for c, _ in cols], unit if any(
                c == unit for c, _ in cols) else None, target) for t, cols in tables.items()}
        text = skeleton(tables, proposals)
    finally:
        engine.close()
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}; fill in bounds, domains and contribution limits", err=True)


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
    from dpsql.retention import check_metadata_bounds, report_text

    with open_database(database, metadata) as db:
        checks = check_metadata_bounds(db.engine, db.metadata, target, epsilon)
    click.echo(report_text(checks, target, epsilon), nl=False)


@main.group(invoke_without_command=True)
@click.option("--metadata", "-m", type=click.Path(dir_okay=False, path_type=Path),
              help="The data owner's metadata TOML (default: the sample data's).")
@click.option("--analyst", "-a", metavar="NAME", help="Show this analyst only.")
@click.option("--limit", "-n", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many recent queries to list.")
@click.pass_context
@user_errors
def budget(ctx: click.Context, metadata: Path | None, analyst: str | None, limit: int) -> None:
    """Show each analyst's privacy budget (total, spent, remaining) and the recent queries.

    The ledger is the metadata's [budget] ledger, or $DPSQL_LEDGER when set.
    """
    ctx.obj = metadata
    if ctx.invoked_subcommand is not None:
        return
    md = _budget_metadata(metadata)
    ledger = open_ledger(md)
    if ledger is None:
        click.echo(unmetered_warning(md), err=True)
        return
    with ledger:
        statuses = ([ledger.status(analyst)] if analyst is not None else ledger.all_status())
        history = ledger.history(analyst, limit)
    click.echo(budget_report(md, ledger, statuses, history, limit))


@budget.command("reset")
@click.argument("analyst")
@click.option("--metadata", "-m", type=click.Path(dir_okay=False, path_type=Path),
              help="The data owner's metadata TOML (default: the sample data's).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
@user_errors
def budget_reset(ctx: click.Context, analyst: str, metadata: Path | None, yes: bool) -> None:
    """The data owner's action: ANALYST's spending starts again from zero.

    The ledger keeps every earlier charge (nothing is deleted), and the privacy loss of the
    earlier answers does not go away: a reset grants a new budget on top of the old one.
    """
    md = _budget_metadata(metadata if metadata is not None else ctx.obj)
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
              help="The data owner's metadata TOML (default: the sample data's).")
@click.option("--start-over", is_flag=True,
              help="The recorded ledger is lost: start a new one (every spending from zero).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
@user_errors
def budget_init(ctx: click.Context, metadata: Path | None, start_over: bool, yes: bool) -> None:
    """Create the budget ledger that the metadata declares, and record its identity next to
    it: from then on a missing, emptied or replaced ledger is refused, never started afresh.
    """
    md = _budget_metadata(metadata if metadata is not None else ctx.obj)
    if start_over and not yes:
        click.confirm(f"Start a new, empty budget ledger at {ledger_path(md)}? Every analyst's "
                      "spending starts from zero; the answers already released stay released",
                      abort=True)
    ledger, retired = init_ledger(md, start_over=start_over)
    with ledger:
        assert ledger.identity is not None
        click.echo(f"created the budget ledger {ledger.path} (id {ledger.identity.ledger_id})"
                   + (f"; the lost ledger's record is kept as {retired}" if retired else ""))


@main.command()
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
    from dpsql.server.config import ServerConfig
    from dpsql.server.server import run

    if (tls_cert is None) != (tls_key is None) or (require_tls and tls_cert is None):
        raise click.UsageError("--tls-cert and --tls-key go together; --require-tls needs them")
    with open_database(database, metadata) as db:
        if not db.metered:
            click.echo(unmetered_warning(db.metadata), err=True)
        run(db, ServerConfig(host=host, port=port, passwords=passwords, tls_cert=tls_cert,
                             tls_key=tls_key, require_tls=require_tls, epsilon=epsilon,
                             delta=delta, mechanism=mechanism,
                             statement_timeout=statement_timeout,
                             max_connections=max_connections, workers=workers,
                             idle_timeout=idle_timeout))


@main.group()
def analyst() -> None:
    """Manage who may log in to `dpsql serve`."""


@analyst.command("add")
@click.argument("name")
@click.option("--metadata", "-m", type=click.Path(dir_okay=False, path_type=Path),
              help="The metadata the server will use (default: the sample data's).")
@click.option("--passwords", type=click.Path(dir_okay=False, path_type=Path),
              help="The passwords file (default: as `dpsql serve` finds it).")
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

    md = _budget_metadata(metadata)
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

@main.command("audit")
@user_errors
@click.argument("scenarios", nargs=-1, metavar="[SCENARIO]...")
@click.option("--runs", "-n", type=click.IntRange(min=10), default=None,
              help="Runs per database per scenario (default: DPSQL_AUDIT_N, else 1000); more "
                   "runs give a tighter bound.")
@click.option("--confidence", type=click.FloatRange(0.5, 1.0, max_open=True), default=0.99,
              show_default=True, help="Probability that every bound holds.")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown"]), default="table",
              show_default=True)
@click.option("--list", "list_only", is_flag=True, help="List the built-in scenarios.")
@click.option("--neighbours", is_flag=True, help="Instead: the neighbour test of --queries on "
              "synthetic adversarial databases built from --metadata (never your data).")
@click.option("--metadata", "metadata_path", type=click.Path(exists=True, dir_okay=False,
              path_type=Path), help="With --neighbours: the metadata (default: the sample's).")
@click.option("--queries", "queries_path", type=click.Path(exists=True, dir_okay=False,
              path_type=Path), help="With --neighbours: SQL queries separated by ';'.")
@click.option("--epsilon", type=float, default=1.0, show_default=True)
@click.option("--delta", type=float, default=0.0, show_default=True)
@click.option("--mechanism", type=click.Choice(MECHANISMS), default=MECHANISMS[0])
@click.option("--local", "local_rows", is_flag=True, help="Instead: one released row under "
              "local DP, per column kind and their composition (--runs draws per row).")
def audit_command(scenarios: tuple[str, ...], runs: int | None, confidence: float, fmt: str,
                  list_only: bool, neighbours: bool, metadata_path: Path | None,
                  queries_path: Path | None, epsilon: float, delta: float,
                  mechanism: str, local_rows: bool) -> None:
    """Audit the privacy guarantee statistically: answer each built-in scenario's query many
    times on a database and on its worst neighbour (one more person, beyond every bound), and
    print a lower confidence bound on the privacy loss. A scenario passes when the bound does
    not exceed the declared epsilon. Exit status 1 if any fails.

    With --neighbours, test your own queries without noise on synthetic databases built from
    your metadata and on their neighbours (docs/audit.md). Exit status 1 on a violation."""
    from dpsql.audit import audit as auditing

    if neighbours:
        _neighbour_audit(metadata_path, queries_path, epsilon, delta, mechanism, fmt)
        return
    if local_rows:
        _local_audit(runs or 20_000)
    if list_only:
        click.echo(format_table(["scenario", "query", "epsilon", "delta"], [
            [s.name, s.sql, f"{s.epsilon:g}", f"{s.delta:g}"]
            for s in auditing.SCENARIOS.values()]))
        return
    unknown = [name for name in scenarios if name not in auditing.SCENARIOS]
    if unknown:
        raise click.BadParameter(f"unknown scenario {unknown[0]!r}; choose from "
                                 f"{', '.join(auditing.SCENARIOS)}", param_hint="SCENARIO")
    results = []
    for name in scenarios or tuple(auditing.SCENARIOS):
        result = auditing.audit(auditing.SCENARIOS[name], runs, confidence=confidence)
        click.echo(f"{name}: epsilon >= {result.epsilon_lb:.3f} (declared {result.declared}; "
                   f"{result.seconds:.1f} s)", err=True)
        results.append(result)
    if fmt == "markdown":
        click.echo(auditing.format_results(results))
    else:
        click.echo(format_table(
            ["scenario", "declared epsilon (delta)", "audited lower bound", "N", "pass"],
            [[r.scenario, r.declared, f"{r.epsilon_lb:.3f}", r.n, "yes" if r.passed else "NO"]
             for r in results]))
    sys.exit(0 if all(r.passed for r in results) else 1)


def _local_audit(runs: int) -> None:
    from dpsql.audit import local_audit
    from dpsql.privacy.randomness import Randomness

    verdicts = [v for s in local_audit.scenarios()
                for v in local_audit.audit(s, runs, Randomness())]
    click.echo(format_table(
        ["scenario", "column", "declared epsilon", "exact ln ratio", "audited lower bound",
         "pass"],
        [[v.name, v.what, f"{v.epsilon:g}", f"{v.exact:.3f}", f"{v.measured:.3f}",
          "yes" if v.passed else "NO"] for v in verdicts]))
    sys.exit(0 if all(v.passed for v in verdicts) else 1)


def _neighbour_audit(metadata_path: Path | None, queries_path: Path | None, epsilon: float,
                     delta: float, mechanism: str, fmt: str) -> None:
    from dpsql.audit import neighbours as nb

    queries = nb.split_statements(queries_path.read_text("utf-8")) if queries_path else []
    if not queries:
        raise click.UsageError("--neighbours needs --queries FILE (SQL separated by ';')")
    md = load_metadata(metadata_path if metadata_path is not None else sample_paths()[1])
    verdicts = nb.audit_queries(md, queries, epsilon, delta, mechanism)
    for v in (v for v in verdicts if v.violations):
        click.echo(v.report(), err=True)
    click.echo(nb.format_verdicts(verdicts) if fmt == "markdown" else
               format_table(nb.VERDICT_COLUMNS, nb.verdict_rows(verdicts)))
    sys.exit(1 if any(v.status == "violation" for v in verdicts) else 0)


def _budget_metadata(metadata: Path | None) -> Metadata:
    return load_metadata(metadata if metadata is not None else sample_paths()[1])


def _tabulate(result: Result, accuracy: bool) -> tuple[list[str], list[list[object]]]:
    header: list[str] = []
    for c in result.columns:
        header.append(c.name)
        if accuracy and c.accuracy_unit:
            header.append(f"{c.name} ±95%" + (" (ranks)" if c.accuracy_unit == "rank" else ""))
    rows = []
    for row, acc in zip(result.rows, result.accuracy, strict=True):
        out: list[object] = []
        for value, a, c in zip(row, acc, result.columns, strict=True):
            out.append(value)
            if accuracy and c.accuracy_unit:
                out.append(a)
        rows.append(out)
    return header, rows


def format_csv(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([["" if v is None else v for v in row] for row in rows])
    return buffer.getvalue()


def format_json(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    return json.dumps([dict(zip(header, row, strict=True)) for row in rows], default=str,
                      indent=2)


if __name__ == "__main__":
    main()
