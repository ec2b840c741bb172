"""How ``dpsql query`` shows an answer: the table (or CSV, or JSON) on stdout, then its notes
and its cost on stderr, so that CSV and JSON stay parseable on stdout.

The notes that say when an answer is not worth reading (``Result.caveats``,
:mod:`dpsql.execution.caveats`) always print, as ``note:`` lines in the footer (``--no-caveats``
leaves them out of the answer); the bias notes print with ``--accuracy``, the retention
estimate's when asked for, and the charge of randomized rows with them. ``--format json`` is
one object holding it all (:func:`answer_json`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from dpsql.cli.common import cost_note, format_csv, tabulate
from dpsql.texttable import format_table, unique_names

if TYPE_CHECKING:  # types only: the command line imports the library where it is used
    from dpsql.database import Answer
    from dpsql.ledger.budget import BudgetStatus


def show_answer(answered: Answer, status: BudgetStatus | None, fmt: str,
                accuracy: bool) -> None:
    """Print ``answered`` in ``fmt`` (table, csv or json) and its footer."""
    result = answered.result
    if fmt == "json":
        click.echo(answer_json(answered, status))
    else:
        if result.local_label is not None:  # randomized rows: said first
            click.echo(result.local_label, err=fmt == "csv")  # csv stays parseable on stdout
        header, rows = tabulate(result, accuracy)
        out = format_table(header, rows) if fmt == "table" else format_csv(header, rows)
        click.echo(out, nl=fmt != "csv")
    for note in result.notes:
        if note in result.caveats or accuracy or note.startswith("Retention") or (
                result.randomized and note != result.local_label):  # the charge, explained
            click.echo(f"note: {note}", err=True)
    click.echo(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''}; "
               f"{cost_note(answered, status)})", err=True)


def answer_json(answered: Answer, status: BudgetStatus | None) -> str:
    """The answer as one JSON object: ``columns`` (name, type, the name of its ± entry and its
    unit; a repeated name numbered, ``count`` and ``count_1``, as rows are objects by name),
    ``rows`` (objects by column name, each noisy cell's 95% half-width beside it as
    ``"<name> ±95%"``), ``caveats``, ``notes`` (all of them, caveats included), ``randomized``
    (the sentence that says the rows are randomized local DP rows, else null), ``cost`` and
    ``retention``."""
    result = answered.result
    header, rows = tabulate(result, True, unique=True)  # count, count_1: JSON keys
    columns: list[dict[str, Any]] = []
    for name, c in zip(unique_names([c.name for c in result.columns]), result.columns,
                       strict=True):
        plus = f"{name} ±95%" + (" (ranks)" if c.accuracy_unit == "rank" else "") \
            if c.accuracy_unit else None
        columns.append({"name": name, "type": c.type, "accuracy": plus,
                        "accuracy_unit": c.accuracy_unit})
    charged = answered.cost
    retention = answered.retention_cost
    document = {
        "columns": columns,
        "rows": [dict(zip(header, row, strict=True)) for row in rows],
        "caveats": list(result.caveats),
        "notes": list(result.notes),
        "randomized": result.local_label,
        "cost": {
            "epsilon": result.epsilon, "delta": result.delta, "analyst": answered.analyst,
            "charged": charged is not None, "reused": answered.reused,
            "retention_epsilon": None if retention is None else retention.epsilon,
            "remaining": None if status is None else {"epsilon": status.remaining.epsilon,
                                                      "delta": status.remaining.delta}},
        "retention": None if answered.retention is None else answered.retention.as_json(),
    }
    return json.dumps(document, default=str, indent=2, ensure_ascii=False)
