"""How DuckDB groups the rows by unit: always with its general hash table, never with a
perfect hash chosen from the unit column's statistics (issue 39.4; docs/audit.md, "Attacker's
pass, 2026-12-06 (afternoon)").

Bounding groups the rows by unit (the per-unit totals of bounding by weights, the per-unit
sums and counts). DuckDB groups integer keys whose statistics (the column's minimum and
maximum) span at most ``perfect_ht_threshold`` bits with a *perfect hash*, one slot per
possible value. The statistics are the data's: one person whose id lies far from the others
(10^12 beside ids below a million) widens the span past the threshold, and the same query
then takes the general hash table instead, a time that depends on whether that person is in
the table (9 ms against 45 ms at 4M rows with a 20-bit threshold; the slots allocated follow
the span too). So every read of an integer unit spells it ``~(~unit)``, the same value of
the same type, whose statistics DuckDB does not derive (:func:`opaque_units`): the plan is
the same whatever the ids, and the engine keeps DuckDB's default threshold for the keys it
still groups by statistics (a few thousand slots, far below the answer grid).

The perfect hash was 2-3x faster for the per-unit ``GROUP BY`` of dense ids
(``benchmarks/README.md``, "MEDIAN: a perfect hash for the units"): a speed given up for a
plan that does not depend on one person."""

from __future__ import annotations

from sqlglot import exp

from dpsql.engines.physical import INTEGER_TYPES


def opaque_units(tree: exp.Expression, schema: dict[str, dict[str, str]]) -> None:
    """In place: the unit ``__unit`` of every read of a table whose unit column is an integer
    (``schema``: table -> column -> DuckDB type) spelled ``~(~unit)``, so that its
    ``GROUP BY`` never takes a perfect hash sized by the data (module docstring). ``~`` is its
    own inverse on every integer type and keeps the type: the groups, the salted hashes of the
    unit and the joins on it are unchanged."""
    for alias in list(tree.find_all(exp.Alias)):
        if alias.alias != "__unit" or not isinstance(alias.this, exp.Column):
            continue
        select = alias.parent
        if not isinstance(select, exp.Select) or select.args.get("joins"):
            continue  # a joined read's unit may be another table's column
        table = select.args.get("from_")
        source = table.this if table is not None else None
        if not isinstance(source, exp.Table) or source.args.get("db") is not None:
            continue
        kind = schema.get(source.name.lower(), {}).get(alias.this.name.lower())
        if kind in INTEGER_TYPES:  # the types whose statistics can make a perfect hash
            unit = alias.this.copy()
            alias.set("this", exp.BitwiseNot(this=exp.Paren(this=exp.BitwiseNot(this=unit))))
