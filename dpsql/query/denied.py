"""The one deny-list: engine functions that no analyst's SQL may call, wherever dpsql runs it.

Three places run SQL that an analyst wrote on DuckDB: the post-processing query over the noisy
cells (:mod:`dpsql.query.check`), an exact read of public tables (:mod:`dpsql.execution.public`) and
a query of the server's PostgreSQL catalog (:mod:`dpsql.server.machine.classify`). None of them
holds private data, but a function that reads files, the environment or the engine's own settings
and catalog, runs SQL given as text, or changes the engine's state reaches past what the query is
about. Each is refused by name here, before anything runs, with a clear message rather than an
engine error; the engine connection itself is locked as a second wall (:mod:`dpsql.engines.locked`).

The post-processing query also may not draw the engine's random numbers (:data:`RANDOM`): all
randomness comes from dpsql's own :class:`~dpsql.privacy.randomness.Randomness`. The catalog
emulates PostgreSQL's settings, so ``current_setting()`` is allowed there (:data:`CATALOG_ALLOWED`).
"""

from __future__ import annotations

#: Denied by exact (upper-case) name.
DENIED_FUNCTIONS = frozenset({
    # files
    "READ_CSV", "READ_CSV_AUTO", "READ_PARQUET", "PARQUET_SCAN", "READ_JSON", "READ_JSON_AUTO",
    "READ_TEXT", "READ_BLOB", "GLOB",
    # the environment, the engine's settings, catalog and secrets
    "GETENV", "CURRENT_SETTING", "WHICH_SECRET", "DUCKDB_TABLES", "DUCKDB_COLUMNS",
    "DUCKDB_SETTINGS", "DUCKDB_DATABASES", "DUCKDB_EXTENSIONS", "DUCKDB_FUNCTIONS",
    "DUCKDB_SECRETS", "PRAGMA_VERSION", "PRAGMA_TABLE_INFO", "PRAGMA_DATABASE_SIZE",
    "TEST_ALL_TYPES", "SUMMARY", "SQL_AUTO_COMPLETE",
    # SQL run from text
    "QUERY", "QUERY_TABLE", "JSON_EXECUTE_SERIALIZED_SQL",
    # the engine's state
    "SETSEED", "CHECKPOINT", "FORCE_CHECKPOINT", "ENABLE_PROFILING", "DISABLE_PROFILING",
    "LOAD", "INSTALL",
})
#: Denied by (upper-case) prefix: whole families of engine internals and file readers.
DENIED_PREFIXES = ("DUCKDB_", "PRAGMA_", "READ_", "SNIFF_", "PARQUET_", "ICEBERG_", "DELTA_",
                   "JSON_EXECUTE", "CURRENT_SETTING_", "ICU_", "TPCH", "TPCDS")
#: The engine's random numbers: denied in the post-processing query.
RANDOM = frozenset({"RANDOM", "RAND"})
#: Allowed in catalog queries, which emulate PostgreSQL's settings.
CATALOG_ALLOWED = frozenset({"CURRENT_SETTING"})


def denied(name: str | None, allowed: frozenset[str] = frozenset()) -> bool:
    """Whether a call of the function ``name`` (any case; None for no function) is refused,
    unless ``allowed`` lists it."""
    if name is None:
        return False
    upper = name.upper()
    if upper in allowed:
        return False
    return upper in DENIED_FUNCTIONS or upper.startswith(DENIED_PREFIXES)
