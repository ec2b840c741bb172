"""A query made to read empty tables: the dry run of an engine that has no database of empty
tables of its own (PostgreSQL's ``compile``; the outer query's check,
:func:`dpsql.execution.postprocess.check_outer`). The empty tables themselves are built above,
from the declared tables (:func:`dpsql.query.dry_runs.empty_tables`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp


def with_empty(tree: exp.Query, empties: Sequence[tuple[str, exp.Select]]) -> exp.Query:
    """A copy of ``tree`` in which each name of ``empties`` reads its empty, typed SELECT (a
    CTE placed before ``tree``'s own, which may read it): the dry run of an engine that has no
    database of empty tables (each engine's ``compile``, the outer query's check), as a tree,
    never spliced as text."""
    dry = tree.copy()
    ctes = [exp.CTE(this=empty, alias=exp.TableAlias(this=exp.to_identifier(name, quoted=True)))
            for name, empty in empties]
    existing = dry.args.get("with_")
    dry.set("with_", exp.With(expressions=ctes + (existing.expressions if existing else [])))
    return dry
