"""``dpsql audit``: the statistical audit, the neighbour test of the owner's queries and the
local-DP audit. The only front door that imports :mod:`dpsql.audit` (it patches the library to
measure it)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dpsql.cli.common import budget_metadata, user_errors
from dpsql.privacy.mechanism_names import MECHANISMS
from dpsql.texttable import format_table


@click.command("audit")
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
              path_type=Path), help="With --neighbours or --oracle: the metadata (default: the "
              "sample's).")
@click.option("--queries", "queries_path", type=click.Path(exists=True, dir_okay=False,
              path_type=Path), help="With --neighbours or --oracle: SQL queries separated by ';'.")
@click.option("--epsilon", type=float, default=1.0, show_default=True)
@click.option("--delta", type=float, default=0.0, show_default=True)
@click.option("--mechanism", type=click.Choice(MECHANISMS), default=MECHANISMS[0])
@click.option("--oracle", is_flag=True, help="Instead: the semantic oracle on --queries: each "
              "answered without noise on a synthetic database built from --metadata (never your "
              "data) and compared with the answer the query asks for (docs/audit.md).")
@click.option("--local", "local_rows", is_flag=True, help="Instead: one released row under "
              "local DP, per column kind and their composition (--runs draws per row).")
def audit_command(scenarios: tuple[str, ...], runs: int | None, confidence: float, fmt: str,
                  list_only: bool, neighbours: bool, metadata_path: Path | None,
                  queries_path: Path | None, epsilon: float, delta: float,
                  mechanism: str, oracle: bool, local_rows: bool) -> None:
    """Audit the privacy guarantee statistically: answer each built-in scenario's query many
    times on a database and on its worst neighbour (one more person, beyond every bound), and
    print a lower confidence bound on the privacy loss. A scenario passes when the bound does
    not exceed the declared epsilon. Exit status 1 if any fails.

    With --neighbours, test your own queries without noise on synthetic databases built from
    your metadata and on their neighbours (docs/audit.md). Exit status 1 on a violation.
    With --oracle, check what your queries' answers estimate, on a synthetic database built
    from your metadata. Exit status 1 on a disagreement."""
    from dpsql.audit import audit as auditing

    if neighbours:
        _neighbour_audit(metadata_path, queries_path, epsilon, delta, mechanism, fmt)
        return
    if oracle:
        _oracle_audit(metadata_path, queries_path, delta, mechanism)
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
    md = budget_metadata(metadata_path)
    verdicts = nb.audit_queries(md, queries, epsilon, delta, mechanism)
    for v in (v for v in verdicts if v.violations):
        click.echo(v.report(), err=True)
    click.echo(nb.format_verdicts(verdicts) if fmt == "markdown" else
               format_table(nb.VERDICT_COLUMNS, nb.verdict_rows(verdicts)))
    sys.exit(1 if any(v.status == "violation" for v in verdicts) else 0)


def _oracle_audit(metadata_path: Path | None, queries_path: Path | None, delta: float,
                  mechanism: str) -> None:
    from dpsql.audit import neighbours as nb
    from dpsql.audit.oracle import Oracle, check_all
    from dpsql.audit.oracle_worlds import oracle_world

    queries = nb.split_statements(queries_path.read_text("utf-8")) if queries_path else []
    if not queries:
        raise click.UsageError("--oracle needs --queries FILE (SQL separated by ';')")
    checker = Oracle(oracle_world(budget_metadata(metadata_path), bounds_bite=True))
    try:
        summary = check_all(checker, [(sql, 0.0, delta, mechanism) for sql in queries])
    finally:
        checker.close()
    for v in summary.disagreements:
        click.echo(v.report(0), err=True)
    click.echo(format_table(["query", "oracle", "why"], [
        [v.sql, v.known or v.status, v.detail.splitlines()[0] if v.detail else ""]
        for v in summary.verdicts]))
    click.echo(summary.line())
    sys.exit(1 if summary.disagreements else 0)
