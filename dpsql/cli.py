"""The ``dpsql`` command line: thin commands over :class:`dpsql.Database`.

User errors (refusals, bad metadata, a missing database) print one clear message to stderr and
exit with status 2 (1 for an exhausted budget); never a traceback.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from dpsql.database import Database
from dpsql.errors import BudgetExhausted, Error
from dpsql.postprocess import Result

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(fn: F) -> F:
    """Turn dpsql errors into a message on stderr and a non-zero exit status."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Error as e:
            click.echo(f"dpsql: {type(e).__name__}: {e}", err=True)
            sys.exit(1 if isinstance(e, BudgetExhausted) else 2)
        except Exception as e:  # a bug: one line for the user, the traceback on request
            if os.environ.get("DPSQL_DEBUG"):
                raise
            click.echo(f"dpsql: InternalError: {type(e).__name__}: {e} (this is a bug in "
                       "dpsql; set DPSQL_DEBUG=1 to see the traceback)", err=True)
            sys.exit(3)

    return wrapper  # type: ignore[return-value]


def database_options(fn: F) -> F:
    fn = click.option("--metadata", "-m", type=click.Path(dir_okay=False, path_type=Path),
                      help="The data owner's metadata TOML (default: the sample data's).")(fn)
    fn = click.option("--database", "-d", type=click.Path(path_type=Path),
                      help="A DuckDB file or a folder of CSV/Parquet files "
                           "(default: the bundled sample data).")(fn)
    return fn


def privacy_options(fn: F) -> F:
    fn = click.option("--mechanism", type=click.Choice(["laplace", "gaussian"]),
                      default="laplace", show_default=True,
                      help="Noise: Laplace (pure epsilon-DP) or Gaussian (needs --delta).")(fn)
    fn = click.option("--delta", type=float, default=0.0, show_default=True,
                      help="Privacy delta: > 0 allows thresholded GROUP BY keys and Gaussian "
                           "noise.")(fn)
    fn = click.option("--epsilon", "-e", type=float, default=1.0, show_default=True,
                      help="Privacy epsilon spent by this query.")(fn)
    return fn


def open_database(database: Path | None, metadata: Path | None) -> Database:
    if (database is None) != (metadata is None):
        raise click.UsageError("pass both --database and --metadata, or neither for the "
                               "bundled sample data")
    return Database(database, metadata)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dpsql")
def main() -> None:
    """dpsql: differentially private answers to ordinary aggregate SQL."""


@main.command()
@click.argument("sql")
@database_options
@privacy_options
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True)
@click.option("--accuracy", is_flag=True, help="Add a +/- column (95%) after each noisy cell.")
@user_errors
def query(sql: str, database: Path | None, metadata: Path | None, epsilon: float, delta: float,
          mechanism: str, fmt: str, accuracy: bool) -> None:
    """Answer SQL with differentially private noise."""
    with open_database(database, metadata) as db:
        result = db.query(sql, epsilon=epsilon, delta=delta, mechanism=mechanism)
    header, rows = _tabulate(result, accuracy)
    click.echo({"table": format_table, "csv": format_csv, "json": format_json}[fmt](header, rows),
               nl=fmt != "csv")
    if fmt == "table":
        click.echo(f"({len(rows)} row{'s' if len(rows) != 1 else ''}; privacy cost "
                   f"epsilon={result.epsilon:g}, delta={result.delta:g})", err=True)


@main.command()
@click.argument("sql")
@database_options
@privacy_options
@user_errors
def explain(sql: str, database: Path | None, metadata: Path | None, epsilon: float,
            delta: float, mechanism: str) -> None:
    """Show the rewritten SQL and each cell's noise, without reading data."""
    with open_database(database, metadata) as db:
        e = db.explain(sql, epsilon=epsilon, delta=delta, mechanism=mechanism)
    click.echo("Rewritten SQL:\n" + e.sql + "\n")
    header = ["cell", "measurement", "sensitivity", "epsilon", "mechanism", "noise scale",
              "95% accuracy"]
    rows = [[c.output, c.measurement, f"{c.sensitivity:g}", f"{c.epsilon:.4g}", c.mechanism,
             "-" if c.noise_scale is None else f"{c.noise_scale:.4g}",
             f"±{c.accuracy:.4g}" + (" ranks" if c.accuracy_unit == "rank" else "")]
            for c in e.cells]
    click.echo(format_table(header, rows))
    click.echo(f"\nKey release: {e.key_release}")
    click.echo(f"Contribution bounds: {e.rows_per_unit} row(s) per unit in at most "
               f"{e.groups_per_unit} group(s)")
    click.echo(f"Privacy cost: epsilon={e.epsilon:g}, delta={e.delta:g} (epsilon is split "
               "equally across the measurements above)")


@main.group()
def metadata() -> None:
    """Work with the data owner's metadata file."""


@metadata.command("init")
@click.option("--database", "-d", required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Write here instead of standard output.")
@user_errors
def metadata_init(database: Path, output: Path | None) -> None:
    """Write a metadata skeleton from the database's schema (never from its values)."""
    from dpsql.engines import DuckDBEngine
    from dpsql.skeleton import skeleton

    engine = DuckDBEngine(database)
    try:
        text = skeleton(engine.tables())
    finally:
        engine.close()
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        click.echo(f"wrote {output}; fill in bounds, domains and contribution limits", err=True)


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


def _cell(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) and abs(value) < 1e15 else repr(value)
    return str(value)


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(header)]
    line = "-+-".join("-" * w for w in widths)
    out = [" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)), line]
    for r in cells:
        out.append(" | ".join(v.rjust(w) if _numeric(v) else v.ljust(w)
                              for v, w in zip(r, widths, strict=True)))
    return "\n".join(out)


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


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
