"""What the ``dpsql`` commands share: user errors as one line on stderr, the common options,
opening the database, and the output formats."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import click

from dpsql.cli.defaults import metadata_source, sources
from dpsql.cli.status import INTERRUPTED, interrupted
from dpsql.errors import BudgetExhausted, Error, QueryCancelled, SQLSyntaxError, guarded
from dpsql.ledger.budget import BudgetStatus
from dpsql.ledger.opening import ANALYST_ENV, LEDGER_ENV
from dpsql.metadata.contribution import ContributionBounds
from dpsql.metadata.metadata import Metadata, load_metadata
from dpsql.metadata.sample import sample_paths
from dpsql.privacy.mechanism_names import MECHANISMS
from dpsql.texttable import unique_names

if TYPE_CHECKING:  # imported where used: `dpsql --help` and `budget` start without them
    from dpsql.database import Answer, Database
    from dpsql.execution.postprocess import Result

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
        except QueryCancelled as e:  # Ctrl-C during a query: one line, exit 130
            interrupted(e)
        except KeyboardInterrupt:  # Ctrl-C elsewhere: no traceback either
            click.echo("dpsql: interrupted", err=True)
            sys.exit(INTERRUPTED)
        except Error as e:
            click.echo(f"dpsql: {type(e).__name__}: {e}{_remedy(e)}", err=True)
            for note in getattr(e, "__notes__", ()):  # e.g. the caret of pointing_into
                click.echo(note, err=True)
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


@contextmanager
def pointing_into(sql: str) -> Iterator[None]:
    """A syntax error shows the query's line with a caret under where parsing stopped."""
    try:
        yield
    except SQLSyntaxError as e:
        if e.position is not None:
            e.add_note(caret(sql, e.position))
        raise


def caret(sql: str, position: int) -> str:
    """``sql``'s line holding the 1-based ``position``, and a caret under it (as psql does).
    The caret's line repeats the tabs of the query's line and gives a wide character (CJK)
    two columns, so the caret stands under the token on a terminal; a CR of CRLF is dropped."""
    before = sql[:position - 1]
    line_no = before.count("\n") + 1
    start = before.rfind("\n") + 1
    end = sql.find("\n", start)
    text = sql[start:end if end >= 0 else len(sql)].rstrip("\r")
    prefix = f"LINE {line_no}: "
    pad = "".join("\t" if c == "\t" else "  " if unicodedata.east_asian_width(c) in "WF"
                  else " " for c in sql[start:position - 1])
    return f"{prefix}{text}\n{' ' * len(prefix)}{pad}^"


#: The --metadata option's help, wherever it is (dpsql.cli.defaults finds the default).
METADATA_HELP = ("The data owner's metadata TOML (default: $DPSQL_METADATA, else a config "
                 "file's metadata, else the sample data's).")


def database_options(fn: F) -> F:
    fn = click.option("--metadata", "-m", type=click.Path(dir_okay=False, path_type=Path),
                      help=METADATA_HELP)(fn)
    # A string, not a click.Path: a URL must reach the engine as written (Path makes sc:// sc:/).
    fn = click.option("--database", "-d", type=str,
                      help="A DuckDB file, a folder of CSV/Parquet files, a postgresql:// URL "
                           "or a Spark URL (spark:local?folder=PATH, sc://host:15002; "
                           "docs/engines.md) (default: $DPSQL_DATABASE, else a config file's "
                           "database, else the bundled sample data).")(fn)
    return fn


def sql_options(fn: F) -> F:
    """The query's text: an argument, ``-`` for standard input, or ``--file``."""
    fn = click.option("--file", "-f", type=click.File("r", encoding="utf-8"),
                      help="Read the SQL from this file (- for standard input).")(fn)
    return click.argument("sql", required=False)(fn)


def read_sql(sql: str | None, file: TextIO | None) -> str:
    """The one statement given as SQL, ``-`` (standard input) or ``--file``."""
    if file is not None and sql is None:
        text = file.read()
    elif sql is not None and file is None:
        text = sys.stdin.read() if sql == "-" else sql
    else:
        raise click.UsageError("give the SQL as an argument, or - to read standard input, or "
                               "--file FILE; exactly one of them")
    if not text.strip():
        raise click.UsageError("the SQL is empty")
    return text


def bounds_options(fn: F) -> F:
    """The query's own contribution bounds (dpsql.metadata.contribution)."""
    fn = click.option("--max-groups", type=click.IntRange(min=1), help="Groups one privacy unit "
                      "may contribute to (g; default: the metadata's, at most its cap).")(fn)
    fn = click.option("--max-rows", type=click.IntRange(min=1), help="Rows one privacy unit may "
                      "contribute (k; default: the metadata's, at most its cap): larger means "
                      "less bias, more noise.")(fn)
    return fn


def query_bounds(max_rows: int | None, max_groups: int | None) -> ContributionBounds | None:
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
    """The database of the flags, else of DPSQL_DATABASE/DPSQL_METADATA, else of the config
    file, else the sample data (:mod:`dpsql.cli.defaults`)."""
    from dpsql.database import Database

    database, metadata = sources(None if database is None else str(database), metadata)
    return Database(database, metadata, analyst=analyst)


def unmetered_warning(metadata: Metadata) -> str:
    return (f"dpsql: warning: no privacy budget declared in {metadata.source}: nothing limits "
            "the total privacy loss")


def budget_metadata(metadata: Path | None) -> Metadata:
    """The metadata of the flag, else of DPSQL_METADATA or the config file, else the sample's."""
    found = metadata_source(metadata)
    return load_metadata(found if found is not None else sample_paths()[1])


def tabulate(result: Result, accuracy: bool, unique: bool = False
             ) -> tuple[list[str], list[list[object]]]:
    """The header and rows of ``result`` (each noisy cell's ±95% after it with
    ``accuracy``); ``unique``: repeated names numbered (``count``, ``count_1``), for JSON."""
    names = [c.name for c in result.columns]
    header: list[str] = []
    for name, c in zip(unique_names(names) if unique else names, result.columns, strict=True):
        header.append(name)
        if accuracy and c.accuracy_unit:
            header.append(f"{name} ±95%" + (" (ranks)" if c.accuracy_unit == "rank" else ""))
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
                      indent=2, ensure_ascii=False)  # keys such as "n ±95%" as written


def cost_note(answered: Answer, status: BudgetStatus | None) -> str:
    result = answered.result
    cost = f"epsilon={result.epsilon:g}, delta={result.delta:g}"
    if answered.reused and result.randomized:
        note = (f"rows from your stored randomized copy of the table (paid {cost} when it was "
                "released): no new privacy cost")
    elif answered.reused:
        note = (f"the stored answer to the same query (paid {cost} before): no new privacy "
                "cost")
    elif answered.cost is not None:
        note = f"privacy cost {cost} charged to {answered.analyst}"
    else:
        note = f"privacy cost {cost}"
    if answered.retention_cost is not None:
        note += f", and epsilon={answered.retention_cost.epsilon:g} for the retention estimate"
    if status is not None:
        note += (f"; {status.analyst} has epsilon={status.remaining.epsilon:g}, "
                 f"delta={status.remaining.delta:g} left")
    return note


def first_charge_note(db: Database, answered: Answer, given: str | None) -> str | None:
    """Said once, on an analyst's first charge in a ledger: who was charged, how that name was
    chosen, where the ledger is, and how to change either (a first run on the sample data
    charges the operating-system user in ~/.dpsql/ without being asked)."""
    ledger = db.ledger
    if ledger is None or answered.cost is None or answered.analyst is None or \
            len(ledger.history(answered.analyst, 2)) != 1:
        return None
    how = ("--analyst" if given is not None else ANALYST_ENV if os.environ.get(ANALYST_ENV)
           else "the operating-system user")
    where = (LEDGER_ENV if os.environ.get(LEDGER_ENV) else
             f"[budget] ledger in {db.metadata.source}")
    return (f"dpsql: note: this is the first charge to analyst {answered.analyst!r} ({how}; "
            f"pass --analyst NAME or set {ANALYST_ENV} to be charged as someone else). Their "
            f"spending is recorded in {ledger.path} ({where}; set {LEDGER_ENV} or the "
            "metadata's [budget] ledger to keep it elsewhere). `dpsql budget` shows it.")


def budget_lines(db: Database, answered: Answer, given: str | None) -> list[str]:
    """The command line's lines about the budget after a charge: the 80% warning
    (:func:`dpsql.ledger.spending.budget_warning`, a note of the answer) and the first-charge
    note."""
    from dpsql.ledger.report import BUDGET_NOTE

    lines = [f"dpsql: warning: {note}" for note in answered.result.notes
             if note.startswith(BUDGET_NOTE)]
    first = first_charge_note(db, answered, given)
    return lines + ([first] if first is not None else [])
