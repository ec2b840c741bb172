"""The ``dpsql`` command line: thin commands over :class:`dpsql.Database`.

User errors (refusals, bad metadata, a missing database) print one clear message to stderr and
exit with status 2 (1 for an exhausted budget); never a traceback.

``dpsql query`` charges the analyst's budget in the ledger the metadata declares (``--analyst``,
default ``DPSQL_ANALYST`` or the operating-system user), the same ledger as the DB-API;
``dpsql budget`` shows it and ``dpsql budget reset ANALYST`` is the data owner's reset.

The commands live by who runs them: :mod:`.asking` (the analyst's query, explain, serve),
:mod:`.owner` (metadata, budget, analyst, release), :mod:`.auditing` (audit); :mod:`.common`
holds what they share.
"""

from __future__ import annotations

import click

from dpsql.cli.asking import explain, query, serve
from dpsql.cli.auditing import audit_command
from dpsql.cli.owner import analyst, budget, metadata, release

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dpsql")
def main() -> None:
    """dpsql: differentially private answers to ordinary aggregate SQL."""


for _command in (query, explain, serve, metadata, budget, analyst, release, audit_command):
    main.add_command(_command)
