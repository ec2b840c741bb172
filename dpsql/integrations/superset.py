"""Apache Superset support: :class:`DpsqlEngineSpec`, registered under Superset's
``superset.db_engine_specs`` entry point for the ``dpsql://`` SQLAlchemy dialect
(:mod:`dpsql.integrations.sqlalchemy`).

Superset is imported only if it is installed: without it this module still imports, and
:class:`DpsqlEngineSpec` is built on a small stand-in base so that its dpsql-specific choices
(time grains, literals, the column probe, the defaults below) can be used and tested alone.

What the spec changes from PostgreSQL, and why (the privacy argument: every choice only shapes
the SQL Superset sends; dpsql's server still checks, bounds, noises and charges every query, so
nothing here can weaken the guarantee, it only avoids queries dpsql must refuse):

* ``convert_dttm``: a time-range filter on a DATE column becomes ``DATE 'YYYY-MM-DD'``, on a
  TIMESTAMP column ``TIMESTAMP 'YYYY-MM-DD HH:MM:SS.ffffff'``: constants dpsql types at plan
  time, instead of PostgreSQL's ``TO_DATE(...)`` / ``TO_TIMESTAMP(...)`` (which dpsql accepts
  too, and folds to the same constants).
* ``select_star`` (SQL Lab's table preview): ``LIMIT 0``. dpsql releases no real rows of a
  private table: a row-level read is refused (SQLSTATE 42803, before any budget is charged)
  or, on a table whose owner declared local rows, answered with randomized rows charged to
  the analyst's budget. A preview must do neither as a side effect of opening a table, so a
  ``LIMIT 0`` probe asks for the shape alone, and the defaults also switch the preview off.
* ``get_extra_params``: ``disable_data_preview`` and ``disable_drill_to_detail`` default to
  true (both would ask for private rows: "samples", "drill to detail"); an owner may still set
  them in the database's "extra" JSON.
* ``allows_joins = True``: Superset's series limit joins an aggregate subquery (its top-n
  groups) to the main query; dpsql answers that as two private releases charged once
  (:mod:`dpsql.routes.series`). ``allows_subqueries = False``: a virtual dataset would wrap its SQL
  in a subquery, which dpsql refuses unless it is a row-level transformation of one table.
* ``get_default_schema``: ``public``, the only schema holding dpsql's tables, without a
  round trip.
* ``supports_file_upload = False``, ``supports_dynamic_schema = False``, no cost estimate, no
  query cancellation through ``pg_terminate_backend``: the server is read-only and has neither.

``epoch_to_dttm``, ``epoch_ms_to_dttm`` and the error messages are PostgreSQL's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

try:  # Superset is optional: only its own process imports this module through the entry point.
    from superset.db_engine_specs.postgres import PostgresEngineSpec as _Base

    SUPERSET_INSTALLED = True
except ImportError:  # pragma: no cover - depends on the environment
    SUPERSET_INSTALLED = False

    class _Base:  # type: ignore[no-redef]
        """What DpsqlEngineSpec needs from Superset's base when Superset is absent."""

        engine = ""
        engine_name = ""

        @classmethod
        def epoch_to_dttm(cls) -> str:
            return "(timestamp 'epoch' + {col} * interval '1 second')"

        @classmethod
        def epoch_ms_to_dttm(cls) -> str:
            return cls.epoch_to_dttm().replace("{col}", "({col}/1000)")

        @staticmethod
        def get_extra_params(database: Any, source: Any = None) -> dict[str, Any]:
            import json

            extra = getattr(database, "extra", None)
            return dict(json.loads(extra)) if extra else {}

# Superset's TimeGrain is a StrEnum of ISO 8601 durations: these plain strings are equal to,
# and hash like, its members, so the table works with and without Superset.
TIME_GRAINS: Mapping[str | None, str] = {
    None: "{col}",
    "PT1S": "DATE_TRUNC('second', {col})",
    "PT1M": "DATE_TRUNC('minute', {col})",
    "PT1H": "DATE_TRUNC('hour', {col})",
    "P1D": "DATE_TRUNC('day', {col})",
    "P1W": "DATE_TRUNC('week', {col})",
    "P1M": "DATE_TRUNC('month', {col})",
    "P3M": "DATE_TRUNC('quarter', {col})",
    "P1Y": "DATE_TRUNC('year', {col})",
}

# Switched on unless the database's "extra" says otherwise: both would ask dpsql for rows.
DP_EXTRA_DEFAULTS: Mapping[str, bool] = {"disable_data_preview": True,
                                        "disable_drill_to_detail": True}


class DpsqlEngineSpec(_Base):  # type: ignore[misc]
    """Superset's view of a ``dpsql serve`` server (see the module docstring for each choice)."""

    engine = "dpsql"
    engine_name = "dpsql (differentially private PostgreSQL)"
    engine_aliases: ClassVar[set[str]] = set()
    default_driver = "psycopg2"
    sqlalchemy_uri_placeholder = "dpsql://user:password@host:port/dbname"
    _time_grain_expressions: ClassVar[dict[str | None, str]] = dict(TIME_GRAINS)
    allows_subqueries = False
    allows_joins = True
    allows_alias_in_select = True
    allows_alias_in_orderby = True
    supports_file_upload = False
    supports_dynamic_schema = False
    supports_catalog = False

    @classmethod
    def convert_dttm(cls, target_type: str, dttm: datetime,
                     db_extra: dict[str, Any] | None = None) -> str | None:
        """A DATE or TIMESTAMP literal, typed by dpsql when it plans the query."""
        kind = target_type.strip().upper()
        if kind.startswith("DATE"):
            return f"DATE '{dttm.date().isoformat()}'"
        if kind.startswith("TIMESTAMP"):
            return f"TIMESTAMP '{dttm.isoformat(sep=' ', timespec='microseconds')}'"
        return None

    @classmethod
    def select_star(cls, database: Any, table: Any, dialect: Any, limit: int = 100,
                    show_cols: bool = False, indent: bool = True,
                    latest_partition: bool = True,
                    cols: Sequence[Mapping[str, Any]] | None = None) -> str:
        """The shape of ``table`` and never its rows: ``LIMIT 0`` whatever ``limit`` asks."""
        quote = dialect.identifier_preparer.quote
        fields = ", ".join(quote(c["column_name"] if "column_name" in c else c["name"])
                           for c in cols) if show_cols and cols else "*"
        name = quote(table.table)
        if getattr(table, "schema", None):
            name = f"{quote(table.schema)}.{name}"
        sep = "\n" if indent else " "
        return f"SELECT {fields}{sep}FROM {name}{sep}LIMIT 0"

    @classmethod
    def get_default_schema(cls, database: Any, catalog: str | None) -> str | None:
        return "public"

    @classmethod
    def get_prequeries(cls, database: Any = None, catalog: str | None = None,
                       schema: str | None = None) -> list[str]:
        """Superset 6.1's signature (``database`` first)."""
        return []  # one schema: no search_path to set

    @classmethod
    def get_allow_cost_estimate(cls, extra: dict[str, Any]) -> bool:
        return False  # dpsql's EXPLAIN shows the rewritten SQL, not a cost

    @classmethod
    def get_cancel_query_id(cls, cursor: Any, query: Any) -> str | None:
        return None  # no pg_terminate_backend; the owner's statement_timeout bounds a query

    @classmethod
    def cancel_query(cls, cursor: Any, query: Any, cancel_query_id: str) -> bool:
        return False

    @staticmethod
    def get_extra_params(database: Any, source: Any = None) -> dict[str, Any]:
        extra: dict[str, Any] = _Base.get_extra_params(database, source)
        for key, value in DP_EXTRA_DEFAULTS.items():
            extra.setdefault(key, value)
        return extra
