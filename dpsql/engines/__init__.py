"""The engines: which one a database argument names (:func:`open_engine`), and the declared
types checked against what it stores (:func:`check_metadata`).

The protocol every engine satisfies is :mod:`dpsql.engines.protocol`; each engine lives in
``engines/<name>/engine.py`` with its dialect of the engine IR (:mod:`dpsql.engines.ir`):
DuckDB (:mod:`dpsql.engines.duckdb_engine.engine`, the default and the reference), PostgreSQL
and Spark. They are re-exported here, the package's face.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from dpsql.engines.duckdb_engine.engine import CursorCancel as CursorCancel
from dpsql.engines.duckdb_engine.engine import DuckDBEngine as DuckDBEngine
from dpsql.engines.physical import INTEGER_TYPES as INTEGER_TYPES
from dpsql.engines.physical import compatible as compatible
from dpsql.engines.physical import declared_type as declared_type
from dpsql.engines.protocol import CancelToken as CancelToken
from dpsql.engines.protocol import Engine as Engine
from dpsql.errors import EngineError, MetadataError
from dpsql.metadata.metadata import ColumnType

if TYPE_CHECKING:
    from dpsql.metadata.metadata import Metadata


# --- which engine a database argument names ----------------------------------------------


def _postgres(url: str, metadata: Metadata | None) -> Engine:
    from dpsql.engines.postgres.engine import PostgresEngine

    tables = None if metadata is None else [t.lower() for t in metadata.tables]
    timeout = None if metadata is None else metadata.server.statement_timeout
    return PostgresEngine(url, tables=tables, statement_timeout=timeout)


def _spark(url: str, metadata: Metadata | None) -> Engine:
    from dpsql.engines.spark.engine import SparkEngine

    return SparkEngine(url)


#: URL scheme -> how to open that engine (the URL, the metadata); anything else is a DuckDB
#: file or folder. One line per engine.
ENGINES: dict[str, Callable[[str, Metadata | None], Engine]] = {
    "postgresql": _postgres,
    "postgres": _postgres,
    "sc": _spark,  # Spark Connect
    "spark": _spark,  # a Spark cluster's master (spark://host), or spark:local[N]
}
#: Schemes written without "//" (``spark:local``).
_BARE = ("spark",)


def url_scheme(database: str | Path) -> str | None:
    """The scheme of a database URL (``postgresql://...``, ``sc://...``, ``spark:local``),
    lower-case; None for a path. A :class:`~pathlib.Path` is always a path, so a folder may
    be named ``local`` or ``spark:x``; a text is a URL only when it starts with a scheme and
    ``://``, or with ``spark:``."""
    if not isinstance(database, str):
        return None
    found = re.match(r"^([a-z][a-z0-9+.-]*):(//)?", database, re.I)
    if found is None or (found.group(2) is None and found.group(1).lower() not in _BARE):
        return None
    return found.group(1).lower()


def is_url(database: str | Path) -> bool:
    """Whether ``database`` names a server by URL rather than a path (:func:`url_scheme`)."""
    return url_scheme(database) is not None


def open_engine(database: str | Path, metadata: Metadata | None = None) -> Engine:
    """The engine ``database`` names: a URL of :data:`ENGINES` (kept as text, never made a
    :class:`~pathlib.Path`), else a DuckDB file or folder of CSV/Parquet files. ``metadata``
    gives a server engine the declared tables and the owner's statement timeout."""
    scheme = url_scheme(database)
    if scheme is None:
        return DuckDBEngine(database)
    opener = ENGINES.get(scheme)
    if opener is None:
        raise EngineError(f"unknown database URL scheme {scheme!r}: use a DuckDB file or "
                          f"folder, or one of {', '.join(s + '://' for s in ENGINES)}")
    return opener(str(database), metadata)


# --- declared types against physical types ---------------------------------------------------

#: What each declared type may be stored as, and what the owner reads in the error message.
_STORED_AS = {
    "int": "an integer type, DECIMAL(p, 0) or VARCHAR",
    "float": "FLOAT, DOUBLE, DECIMAL, an integer type or VARCHAR",
    "text": "VARCHAR",
    "bool": "BOOLEAN or VARCHAR",
    "date": "DATE, TIMESTAMP (without time zone) or VARCHAR",
    "timestamp": "TIMESTAMP, TIMESTAMP WITH TIME ZONE (read in UTC), DATE or VARCHAR",
}


def check_metadata(metadata: Metadata, schema: Mapping[str, Mapping[str, str]],
                   database: str | Path) -> list[str]:
    """Refuse, with a :class:`~dpsql.errors.MetadataError`, a declared table or column that
    the database does not hold, or a declared type its physical type does not match.

    Run when a database is opened, so that no such mismatch ever surfaces as an engine error
    after a charge, or as a silently wrong answer. A declared type accepts these physical
    types, each read exactly (widened to BIGINT or DOUBLE by the rewrite):

    * int: any integer type (TINYINT ... HUGEINT, unsigned too) and DECIMAL(p, 0); a value
      beyond BIGINT reads as NULL;
    * float: FLOAT, DOUBLE, any DECIMAL, any integer type;
    * text: VARCHAR;
    * bool: BOOLEAN;
    * date: DATE, and TIMESTAMP without time zone (TIMESTAMP_S/_MS/_NS too), read as its
      date. TIMESTAMP WITH TIME ZONE is refused: its date depends on the session time zone;
    * timestamp: TIMESTAMP (TIMESTAMP_S/_MS/_NS too), DATE (its midnight) and TIMESTAMP WITH
      TIME ZONE, read as its UTC instant (``AT TIME ZONE 'UTC'``, whatever the session zone).

    VARCHAR is accepted for every type (a CSV column with one malformed value is read as
    text): it is read with TRY_CAST, so a value that does not convert is NULL, never an error,
    and counts as a missing value. Those columns are returned, one message each, for a warning.
    Anything else (DOUBLE declared int, INTEGER declared text, UUID, lists, ...) is refused.
    """
    warnings = []
    for table in metadata.tables.values():
        stored_columns = schema.get(table.name.lower())
        if stored_columns is None:
            raise MetadataError(
                f"{metadata.source}: table {table.name!r} is declared but the database "
                f"{database} has no such table (it has {_names(schema)}); fix the name in the "
                "metadata or remove the table's section")
        for column in table.columns.values():
            stored = stored_columns.get(column.name.lower())
            where = f"{metadata.source}: table {table.name!r}, column {column.name!r}"
            if stored is None:
                raise MetadataError(
                    f"{where} is declared but the database's table has no such column (it has "
                    f"{_names(stored_columns)}); fix the name or remove the column")
            if not compatible(column.type, stored):
                raise MetadataError(f"{where} is declared {column.type} but the database "
                                    f"stores it as {stored}; {_remedy(column.type, stored)}")
            if column.type != ColumnType.TEXT and stored.upper() == "VARCHAR":
                warnings.append(f"{where} is declared {column.type} but stored as VARCHAR: "
                                "a value that does not convert is read as NULL")
    return warnings


def _remedy(declared: str, stored: str) -> str:
    kind = declared_type(stored.upper())
    store = (f"or store it as {_STORED_AS[declared]} (for a DuckDB file, a view with a "
             "CAST does)")
    if kind is None:
        return f"{declared} columns must be stored as {_STORED_AS[declared]}: " + store[3:]
    return f"declare it as type \"{kind}\" {store}"


def _names(names: Mapping[str, object]) -> str:
    shown = sorted(names)[:20]
    more = f" and {len(names) - len(shown)} more" if len(names) > len(shown) else ""
    return (", ".join(shown) + more) if shown else "none"
