"""``dpsql metadata init``: a metadata skeleton from a database's schema.

Without proposals only the schema is read (names and types), never a value: bounds, domains, the
privacy unit and the contribution limits are public policy that the data owner must write in. With
``proposals`` (``dpsql metadata init --unit COLUMN``, :func:`dpsql.owner.metadata_check.propose`,
the owner's exact read of the data) the skeleton also writes the privacy unit, the k and g that keep
most rows, and ``nullable = false`` / ``unique = true`` where the data has no NULL / no repeated
value, each marked as read from the data, for the owner to confirm as policy.

Without the data, the schema's own PRIMARY KEY, UNIQUE and NOT NULL constraints
(:mod:`dpsql.engines.constraints`) give ``nullable = false`` and ``unique = true``; where they
cannot be read the skeleton says so and keeps ``nullable = true``, the safe default.

The skeleton is metered from its first query: it declares a ``[budget]`` with a ledger next to
the metadata file and an ``[analysts.NAME]`` budget for the user who ran it (also one of
``owners``, who see every analyst's spending), each commented for the owner to change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import tomli_w

from dpsql.engines import declared_type
from dpsql.engines.constraints import Constraints
from dpsql.metadata.owner_settings import DEFAULT_LEDGER
from dpsql.owner.metadata_check import Proposal

_HEADER = """\
# dpsql metadata skeleton, written from the database schema only (no values read).
# Fill in: the privacy unit of each table, contribution bounds, numeric bounds
# (lower/upper) and public key domains (values = [...] or public_range = true).
# Bounds and domains must come from public knowledge, never from the data.
"""
_TABLE_TODO = """\
# TODO: privacy_unit = "..." (the column naming the person protected),
# max_rows_per_unit (rows one unit may contribute),
# max_groups_per_unit (GROUP BY groups one unit may reach).
"""
_COLUMN_TODO = {"int": "lower = ..., upper = ...", "float": "lower = ..., upper = ...",
                "date": "lower = YYYY-MM-DD, upper = YYYY-MM-DD",
                "timestamp": "lower = YYYY-MM-DDTHH:MM:SS, upper = YYYY-MM-DDTHH:MM:SS",
                "text": "values = [...] if the keys are public"}


#: The budget a skeleton grants its author: enough for a first session of queries at the
#: default epsilon 1, small enough to be a real limit.
FIRST_EPSILON, FIRST_DELTA = 10.0, 1e-6


def budget_section(analyst: str) -> str:
    """The commented ``[budget]`` and ``[analysts.NAME]`` sections for ``analyst``."""
    return ("# The privacy budget: every query is charged to the analyst who asks, in the\n"
            "# ledger below (an SQLite file, relative to this file; DPSQL_LEDGER overrides it).\n"
            "# owners: the logins that see every analyst's spending (dpsql.spending, ...).\n"
            + tomli_w.dumps({"budget": {"ledger": DEFAULT_LEDGER, "owners": [analyst]}})
            + "\n# Each analyst's total over all their queries (by default the command line\n"
            "# charges the operating-system user; --analyst or DPSQL_ANALYST name another).\n"
            "# Add one section per analyst, or [analysts.\"*\"] for everyone not listed.\n"
            + tomli_w.dumps({"analysts": {analyst: {"epsilon": FIRST_EPSILON,
                                                    "delta": FIRST_DELTA}}}))


def skeleton(tables: Mapping[str, Sequence[tuple[str, str]]],
             proposals: Mapping[str, Proposal] | None = None,
             constraints: Constraints | None = None, analyst: str | None = None) -> str:
    """TOML text declaring every table and column, with the decisions left as TODO comments;
    with ``analyst``, metered (:func:`budget_section`). ``constraints``: the schema's keys and
    NOT NULL (:mod:`dpsql.engines.constraints`).

    Every key and value is written by tomli-w, so any table or column name (quotes,
    backslashes, newlines) reads back the same; only the comments between its pieces are ours.
    """
    out = [_HEADER if proposals is None else _HEADER.replace(
        "schema only (no values read)", "schema, with proposals read from the data")]
    if analyst is not None:
        out.append(budget_section(analyst))
    if constraints is not None:
        out.append(f"# nullable and unique: {constraints.unknown}; nullable = true is the safe "
                   "default\n" if constraints.unknown is not None else
                   "# nullable = false and unique = true below come from the schema's PRIMARY "
                   "KEY, UNIQUE and NOT NULL constraints\n")
    found = constraints if constraints is not None else Constraints()
    for table, columns in tables.items():
        proposal = (proposals or {}).get(table)
        key = table.lower()
        not_null, unique = found.not_null.get(key, set()), found.unique.get(key, set())
        out.append(_table_head(table, proposal))
        for name, dtype in columns:
            kind = declared_type(dtype.upper())
            if dtype.upper().startswith("TIMESTAMP"):  # an instant (one with a zone in UTC)
                kind = "timestamp"
            if kind is None:  # refused when the database is opened: left out, and said why
                shown = name.encode("unicode_escape").decode()  # one comment line
                out.append(f"# {shown}: {dtype} has no dpsql type; cast it in a view to "
                           "declare it\n")
                continue
            todo = f"# TODO: {_COLUMN_TODO[kind]}\n" if kind in _COLUMN_TODO else ""
            declared = name.lower() in not_null
            spec: dict[str, object] = {"type": kind, "nullable": not declared}
            if proposal is not None:
                spec["nullable"] = not declared and name not in proposal.not_null
            if name.lower() in unique or (proposal is not None and name in proposal.unique):
                spec["unique"] = True
            out.append(todo + tomli_w.dumps({"tables": {table: {"columns": {name: spec}}}}))
    return "\n".join(out)


def _table_head(table: str, proposal: Proposal | None) -> str:
    """The table's section: k and g proposed from the data, or placeholders and a TODO."""
    if proposal is None or proposal.k is None:
        todo = {"max_rows_per_unit": 1, "max_groups_per_unit": 1}
        return _TABLE_TODO + tomli_w.dumps({"tables": {table: todo}})
    limits: dict[str, object] = {"privacy_unit": proposal.unit,
                                 "max_rows_per_unit": proposal.k,
                                 "max_groups_per_unit": proposal.g}
    if proposal.unit in proposal.unique:  # each unit has one row: the fast path
        limits = {"privacy_unit": proposal.unit, "max_rows_per_unit": 1,
                  "max_groups_per_unit": 1, "one_row_per_unit": True}
    return ("# Proposed from the data: k with the smallest bias + noise of a COUNT(*)\n"
            "# (the table printed on stderr; dpsql metadata check shows what they keep);\n"
            "# nullable and unique below were read from the data too: confirm them as policy.\n"
            + tomli_w.dumps({"tables": {table: limits}}))
