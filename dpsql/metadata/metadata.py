"""What the data owner declares: tables, privacy units, contribution bounds, column bounds and
public key domains, read from a TOML file with the standard library's ``tomllib``.

The layout is dpsql's public interface::

    [tables.people]
    privacy_unit = "person_id"      # optional; without it each row is its own unit
    max_rows_per_unit = 1           # contribution bound k, enforced on every query; or
                                    # { auto = true, max = 100 }: chosen per query from the
                                    # data under DP (dpsql.metadata.auto)
    max_groups_per_unit = 1         # g, for GROUP BY
    one_row_per_unit = true         # optional owner's promise; skips contribution bounding

    [tables.people.columns]
    age    = { type = "int",   lower = 0, upper = 100, public_range = true }
    income = { type = "float", lower = 0, upper = 200000, nullable = true }
    sex    = { type = "text",  values = ["F", "M"] }
    state  = { type = "text" }
    # upper = { auto = true, max = 200000 } (lower = { auto = true, min = ... }): the bound of
    # SUM/AVG/VAR/STDDEV chosen per query from the data under DP (dpsql.metadata.auto)

    [tables.prescriptions]
    unit_path = "visit_id -> visits.visit_id"  # instead of privacy_unit: the unit of the
    max_rows_per_unit = 20          # visits row it names (visit_id there: unique = true);
                                    # k and g per unit. dpsql joins along it (dpsql.query.joins).

    [tables.states]
    public = true                   # reference data: no unit, no bounds; joined on any key

Column keys: ``unique`` (no two rows share a value: the target of a ``unit_path``),
``type`` (int, float, text, bool, date, timestamp), ``lower``/``upper`` (bounds;
every value that enters a query is clamped to them; TOML dates for a date, TOML datetimes for a
timestamp, an offset datetime read in UTC), ``nullable`` (``nullable = false`` written out
promises no NULL: COUNT(x) and the count of AVG(x) then share COUNT(*)'s measurement),
``values`` (a public domain of GROUP BY keys) and ``public_range`` (for int, date and
timestamp columns: the range lower..upper is a public key domain; for a date or a timestamp,
so are its DATE_TRUNC grains, years, months... between the bounds, at most MAX_DOMAIN_SIZE of
them).
When a database is opened, each declared table and column must exist in it with a physical
type that matches its declared type (see :func:`dpsql.engines.check_metadata` for the rule:
int from integers and DECIMAL(p, 0); float from any number; text from VARCHAR; bool from
BOOLEAN; date from DATE or TIMESTAMP; timestamp from TIMESTAMP, DATE or TIMESTAMP WITH TIME
ZONE (read in UTC); any of them from VARCHAR, read with TRY_CAST, NULL when a
value does not convert), or opening fails with a :class:`~dpsql.errors.MetadataError`.

The privacy budget (see :mod:`dpsql.ledger.budget` and :mod:`dpsql.database`)::

    [budget]
    ledger = "dpsql-ledger.sqlite"  # the ledger file, relative to this file; ~ is expanded
    accounting = "basic"            # or "zcdp"; fixed once the ledger file exists
    reuse_answers = true            # the same query asked again gets its stored answer, free
    max_query_epsilon = 100.0       # the largest epsilon one query may ask for (default 100)
    max_query_delta = 0.1           # the largest delta one query may ask for (default 0.1)
    owners = ["dana"]               # logins that see every analyst's rows in dpsql.spending, ...

    [analysts.alice]                # alice's total over all her queries
    epsilon = 10.0
    delta = 1e-5                    # optional, default 0
    query_epsilon = 0.1             # optional: each query's epsilon when it gives none

    [analysts."*"]                  # optional: the total of *each* analyst not listed
    epsilon = 1.0

The owner's settings of every front door (see :mod:`dpsql.database` and ``docs/server.md``)::

    [server]
    passwords = "dpsql-passwords.toml"  # the analysts' password verifiers, relative to this file
    statement_timeout = 300.0       # seconds (> 0) any private query may run, from every door
    time_grid = 0.05                # seconds (>= 0): fresh answers are released on this grid;
                                    # 0: off; default 0.05 when metered, else 0

Every key is checked: a misspelt section or setting (``[analyst.bob]``, ``uper = 10``) is an
error naming the file, the section, the key and the likely intended spelling, never silently
ignored (a misspelt ``[analysts]`` would otherwise turn metering off). Every section may carry a
``description`` (shown to analysts in the server's catalog for tables and columns).

Without any ``[analysts.*]`` section nothing is metered: every query is answered and nothing
limits the total privacy loss. An analyst with ``epsilon = 0`` is declared but can ask nothing
(the way to lock one analyst out while ``"*"`` grants everyone else a budget).
Validation errors name the file, the table, the column (or the analyst) and what is wrong.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from dpsql.errors import MetadataError
from dpsql.metadata.auto import (
    AutoBound,
    AutoValueBound,
    check_auto,
    check_shares,
    parse_auto,
    parse_auto_value,
)
from dpsql.metadata.local_release import LocalSpec, parse_local
from dpsql.metadata.owner_settings import (
    Budget,
    QueryLimits,
    ServerSettings,
    parse_budget,
    parse_query_limits,
    parse_server,
)
from dpsql.metadata.toml_values import (
    Scalar,
    check_unit_path,
    description_of,
    flag,
    no_unknown_keys,
    positive_int,
    typed_bound,
    typed_values,
    unit_path,
)


class ColumnType(StrEnum):
    """A column's declared type, equal to its spelling in the metadata TOML."""

    INT = "int"
    FLOAT = "float"
    TEXT = "text"
    BOOL = "bool"
    DATE = "date"
    TIMESTAMP = "timestamp"


COLUMN_TYPES: tuple[str, ...] = tuple(t.value for t in ColumnType)
#: Table names starting so are refused: the rewritten queries' own CTEs are named so.
RESERVED_PREFIX = "__"
#: The DuckDB type each declared column type is read as (dpsql.query.total_expressions.Reader), and
#: that an empty table of the declared types has (plan-time checks, the audit's databases).
ENGINE_TYPES: dict[str, str] = {
    ColumnType.INT: "BIGINT", ColumnType.FLOAT: "DOUBLE", ColumnType.TEXT: "VARCHAR",
    ColumnType.BOOL: "BOOLEAN", ColumnType.DATE: "DATE", ColumnType.TIMESTAMP: "TIMESTAMP"}
MAX_DOMAIN_SIZE = 10_000
_TABLE_KEYS = {"privacy_unit", "max_rows_per_unit", "max_groups_per_unit", "one_row_per_unit",
               "public", "columns", "description", "unit_path", "max_rows_per_unit_cap",
               "max_groups_per_unit_cap", "local"}
_PRIVATE_ONLY_KEYS = ("privacy_unit", "max_rows_per_unit", "max_groups_per_unit",
                      "one_row_per_unit", "unit_path", "max_rows_per_unit_cap",
                      "max_groups_per_unit_cap", "local")
_COLUMN_KEYS = {"type", "lower", "upper", "nullable", "values", "public_range", "description",
                "unique"}
_SECTIONS = {"tables", "budget", "analysts", "server", "description"}



@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    lower: Scalar | None = None
    upper: Scalar | None = None
    nullable: bool = False
    values: tuple[Scalar, ...] | None = None
    public_range: bool = False
    description: str | None = None
    unique: bool = False  # the owner's promise: no two rows share a value (unit_path targets)
    # ``nullable = false`` written out: the owner's promise that no value is NULL (nor, stored
    # as text, fails to convert). COUNT(x) and the count inside AVG(x)/VAR(x) are then the
    # measurement of COUNT(*) (dpsql.privacy.aggregates.counted); a broken promise costs
    # accuracy (NULL rows counted), never privacy. Left out, nothing is assumed.
    not_null: bool = False
    # lower/upper = { auto = true, min/max = N }: chosen per query from the data for SUM, AVG,
    # VAR and STDDEV, within the declared lower/upper (dpsql.metadata.auto,
    # dpsql.privacy.auto_values).
    lower_auto: AutoValueBound | None = None
    upper_auto: AutoValueBound | None = None

    @property
    def numeric(self) -> bool:
        return self.type in (ColumnType.INT, ColumnType.FLOAT)

    @property
    def temporal(self) -> bool:
        return self.type in (ColumnType.DATE, ColumnType.TIMESTAMP)

    @property
    def bounded(self) -> bool:
        return self.lower is not None and self.upper is not None

    @property
    def domain(self) -> tuple[Scalar | None, ...] | None:
        """The public domain of this column as a GROUP BY key, NULL included when nullable."""
        values: tuple[Scalar | None, ...] | None = None
        if self.values is not None:
            values = self.values
        elif self.type == ColumnType.BOOL:
            values = (False, True)
        elif self.public_range and self.type == ColumnType.DATE:
            values = public_days(self)
            if values is None:  # too many days to list: only coarser grains have a domain
                return None
        elif self.public_range and self.type == ColumnType.TIMESTAMP:
            return None  # instants are never listed: their DATE_TRUNC grains are (domains.py)
        elif self.public_range:
            assert isinstance(self.lower, int) and isinstance(self.upper, int)
            values = tuple(range(self.lower, self.upper + 1))
        if values is not None and self.nullable:
            values = (*values, None)
        return values


def public_days(column: Column) -> tuple[dt.date, ...] | None:
    """Every day of a date column's public range, or None when there are more than
    :data:`MAX_DOMAIN_SIZE` (DATE_TRUNC to a coarser grain still has a domain:
    :mod:`dpsql.privacy.domains`)."""
    lo, hi = column.lower, column.upper
    assert isinstance(lo, dt.date) and isinstance(hi, dt.date)
    if (hi - lo).days + 1 > MAX_DOMAIN_SIZE:
        return None
    return tuple(lo + dt.timedelta(days=i) for i in range((hi - lo).days + 1))


@dataclass(frozen=True)
class Table:
    name: str
    columns: Mapping[str, Column]
    privacy_unit: str | None = None
    max_rows_per_unit: int = 1
    max_groups_per_unit: int = 1
    one_row_per_unit: bool = False
    description: str | None = None
    # Reference data the owner declares public (regions, category names, calendars): it
    # protects no one, so it may be read exactly and its multiplicities used to plan.
    public: bool = False
    # unit_path = "visit_id -> visits.visit_id": (visit_id, visits, visit_id); the unit is the
    # target table's. Such a table is always read joined along its path (dpsql.query.joins).
    unit_path: tuple[str, str, str] | None = None
    # A joined relation (dpsql.query.joins): every column that names the unit (never a GROUP BY
    # key).
    unit_columns: frozenset[str] = frozenset()
    # The largest k and g an analyst may ask for in one query (dpsql.metadata.contribution);
    # None: the declared k and g (an analyst may only lower them).
    max_rows_cap: int | None = None
    max_groups_cap: int | None = None
    # The owner's opt-in to row-level releases under local DP (dpsql.metadata.local_release).
    local: LocalSpec | None = None
    # max_rows_per_unit = { auto = true, max = N }: k chosen per query from the data, at most
    # N = max_rows_per_unit (dpsql.metadata.auto; dpsql.privacy.auto_bounds).
    rows_auto: AutoBound | None = None
    # BigQuery's ``UNNEST([1, 2, 3]) AS x`` in a join: a public table written in the query, one
    # column (named as the alias) holding these values, one row each (dpsql.query.joins).
    literal: tuple[int | float | str, ...] | None = None
    # BigQuery's ``max_groups_contributed`` written in the clause: each unit keeps at most g
    # groups always (dpsql.privacy.aggregates.groups_cap), not only where that lowers noise.
    groups_bound: bool = False

    @property
    def rows_cap(self) -> int:
        return self.max_rows_per_unit if self.max_rows_cap is None else self.max_rows_cap

    @property
    def groups_cap(self) -> int:
        return self.max_groups_per_unit if self.max_groups_cap is None else self.max_groups_cap

    @property
    def needs_bounding(self) -> bool:
        """Contribution bounding runs in SQL unless each row is already its own unit."""
        return self.privacy_unit is not None and not self.one_row_per_unit

    @property
    def rows_per_unit(self) -> int:
        """k: the rows one unit can contribute to a query after bounding."""
        return 1 if not self.needs_bounding else self.max_rows_per_unit

    @property
    def groups_per_unit(self) -> int:
        """The number of GROUP BY groups one unit can reach after bounding: min(g, k)."""
        return 1 if not self.needs_bounding else min(self.max_groups_per_unit,
                                                     self.max_rows_per_unit)

    def column(self, name: str) -> Column | None:
        return self.columns.get(name.lower())


@dataclass(frozen=True)
class Metadata:
    tables: Mapping[str, Table]
    source: str = "<metadata>"
    path: Path | None = None
    # The parsed document, every key of it validated. Read the typed fields above, never this:
    # it is kept only as a fingerprint of the declarations (the scope of stored answers).
    raw: Mapping[str, Any] = field(default_factory=dict)
    budget: Budget | None = None  # None: no analyst declared, nothing is metered
    server: ServerSettings = field(default_factory=ServerSettings)
    limits: QueryLimits = field(default_factory=QueryLimits)  # [budget] max_query_epsilon, ...

    def table(self, name: str) -> Table | None:
        return self.tables.get(name.lower())


def load_metadata(path: str | Path) -> Metadata:
    """Read and validate a metadata TOML file."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise MetadataError(f"{path}: metadata file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise MetadataError(f"{path}: not valid TOML: {e}") from None
    return parse_metadata(data, source=str(path), path=path.resolve())


def parse_metadata(data: Mapping[str, Any], source: str = "<metadata>",
                   path: Path | None = None) -> Metadata:
    """Validate already-parsed TOML data."""
    no_unknown_keys(data, _SECTIONS, source, kind="section")
    tables_raw = data.get("tables")
    if not isinstance(tables_raw, dict) or not tables_raw:
        raise MetadataError(f"{source}: no [tables.NAME] section; declare at least one table")
    tables = {}
    for name, spec in tables_raw.items():
        table = _parse_table(name, spec, f"{source}: table {name!r}")
        if name.lower() in tables:
            raise MetadataError(f"{source}: table {name!r} is declared twice (names ignore case)")
        tables[name.lower()] = table
    for table in tables.values():
        check_unit_path(table, tables, f"{source}: table {table.name!r}")
    budget = parse_budget(data, source, path)
    description_of(data, source)
    return Metadata(tables=tables, source=source, path=path, raw=dict(data), budget=budget,
                    server=parse_server(data.get("server", {}), source, path),
                    limits=parse_query_limits(data, source))


def _parse_table(name: str, spec: Any, where: str) -> Table:
    if name.startswith(RESERVED_PREFIX):
        # The rewritten query's own CTEs are named so (__rows, __tot, ...): a table of that
        # name would be shadowed by one of them, and a query would read dpsql's CTE instead.
        raise MetadataError(f"{where}: names starting with {RESERVED_PREFIX!r} are reserved "
                            "for dpsql's rewritten queries; rename the table, or declare a "
                            "view of it under another name")
    if not isinstance(spec, dict):
        raise MetadataError(f"{where}: must be a table of settings")
    no_unknown_keys(spec, _TABLE_KEYS, where)
    columns_raw = spec.get("columns")
    if not isinstance(columns_raw, dict) or not columns_raw:
        raise MetadataError(f"{where}: no [tables.{name}.columns] section; declare its columns")
    columns = {}
    for cname, cspec in columns_raw.items():
        columns[cname.lower()] = _parse_column(cname, cspec, f"{where}, column {cname!r}")
    public = flag(spec, "public", where)
    shares = {f"column {c.name!r} {side}": a.share for c in columns.values()
              for side, a in (("lower", c.lower_auto), ("upper", c.upper_auto)) if a is not None}
    if shares and (public or "unit_path" in spec):
        raise MetadataError(f"{where}: {next(iter(shares))} is automatic, which only a "
                            "private table read alone can use (a public table is read exactly, "
                            "a unit_path table always joined); declare the bound as a number")
    if public:
        declared = [key for key in _PRIVATE_ONLY_KEYS if key in spec]
        if declared:
            raise MetadataError(f"{where}: a public table protects no one, so it takes no "
                                f"{', '.join(declared)}; remove it, or drop public = true")
        return Table(name=name, columns=columns, public=True,
                     description=description_of(spec, where))
    unit = spec.get("privacy_unit")
    if unit is not None and (not isinstance(unit, str) or unit.lower() not in columns):
        raise MetadataError(f"{where}: privacy_unit {unit!r} is not one of its declared columns")
    one_row = flag(spec, "one_row_per_unit", where)
    path = unit_path(spec.get("unit_path"), unit, one_row, columns, where)
    auto = parse_auto(spec, "max_rows_per_unit", where)
    check_auto(spec, auto, unit, one_row, where)
    check_shares({**shares, **({"max_rows_per_unit": auto.share} if auto else {})}, where)
    k = auto.cap if auto is not None else positive_int(spec, "max_rows_per_unit", where)
    g = positive_int(spec, "max_groups_per_unit", where)
    if one_row and k != 1:
        raise MetadataError(f"{where}: one_row_per_unit = true needs max_rows_per_unit = 1")
    if path is not None and "local" in spec:
        raise MetadataError(f"{where}: local releases need a table with its own privacy_unit "
                            "(a unit_path table's rows belong to another table's units)")
    local = None if "local" not in spec else parse_local(
        spec["local"], columns, unit.lower() if unit else None, where)
    caps = [_cap(spec, f"{key}_cap", default, where)
            for key, default in (("max_rows_per_unit", k), ("max_groups_per_unit", g))]
    return Table(name=name, columns=columns, privacy_unit=unit.lower() if unit else None,
                 max_rows_per_unit=k, max_groups_per_unit=g, one_row_per_unit=one_row,
                 description=description_of(spec, where), unit_path=path,
                 max_rows_cap=caps[0], max_groups_cap=caps[1], local=local, rows_auto=auto)


def _cap(spec: Mapping[str, Any], key: str, default: int, where: str) -> int | None:
    """The cap on an analyst's per-query bound: at least the declared default."""
    if key not in spec:
        return None
    cap = positive_int(spec, key, where)
    if cap < default:
        raise MetadataError(f"{where}: {key} = {cap} is below its default "
                            f"{key.removesuffix('_cap')} = {default}; raise the cap or lower "
                            "the default")
    return cap


def _parse_column(name: str, spec: Any, where: str) -> Column:
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, dict):
        raise MetadataError(f"{where}: must be a table such as {{ type = \"int\" }}")
    no_unknown_keys(spec, _COLUMN_KEYS, where)
    ctype = spec.get("type")
    if ctype not in COLUMN_TYPES:
        raise MetadataError(f"{where}: type {ctype!r} is not one of {', '.join(COLUMN_TYPES)}")
    ctype = ColumnType(ctype)
    numeric = ctype in (ColumnType.INT, ColumnType.FLOAT)
    spec, lower_auto = parse_auto_value(spec, "lower", numeric, where)
    spec, upper_auto = parse_auto_value(spec, "upper", numeric, where)
    lower, upper = (typed_bound(spec, key, ctype, where) for key in ("lower", "upper"))
    if (lower is None) != (upper is None):
        raise MetadataError(f"{where}: declare both lower and upper, or neither")
    if lower is not None and upper is not None and lower > upper:  # type: ignore[operator]
        raise MetadataError(f"{where}: lower {lower!r} is greater than upper {upper!r}")
    values = typed_values(spec, ctype, MAX_DOMAIN_SIZE, where)
    public_range = flag(spec, "public_range", where)
    if public_range:
        if ctype not in (ColumnType.INT, ColumnType.DATE, ColumnType.TIMESTAMP) or \
                lower is None or upper is None:
            raise MetadataError(f"{where}: public_range needs type int, date or timestamp with "
                                "lower and upper")
        # A long date range is fine: its months, weeks or years are listed, not its days.
        # type: ignore[operator]
        if ctype == ColumnType.INT and upper - lower + 1 > MAX_DOMAIN_SIZE:
            raise MetadataError(f"{where}: public_range {lower}..{upper} has more than "
                                f"{MAX_DOMAIN_SIZE} keys; use thresholding (no domain) instead")
    return Column(name=name.lower(), type=ctype, lower=lower, upper=upper,
                  nullable=flag(spec, "nullable", where), values=values,
                  public_range=public_range, description=description_of(spec, where),
                  unique=flag(spec, "unique", where),
                  not_null="nullable" in spec and not flag(spec, "nullable", where),
                  lower_auto=lower_auto, upper_auto=upper_auto)
