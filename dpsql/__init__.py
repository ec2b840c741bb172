"""dpsql: a differentially private SQL proxy on DuckDB.

The package is also a DB-API 2.0 (PEP 249) module: ``dpsql.connect(...)`` returns a connection,
and ``apilevel``, ``threadsafety``, ``paramstyle``, the type objects, constructors and the
exception hierarchy are here (see :mod:`dpsql.dbapi`).
"""

from dpsql.database import Database
from dpsql.dbapi import (
    BINARY,
    BOOLEAN,
    DATETIME,
    NUMBER,
    ROWID,
    STRING,
    Binary,
    Connection,
    Cursor,
    Date,
    DateFromTicks,
    Time,
    TimeFromTicks,
    Timestamp,
    TimestampFromTicks,
    apilevel,
    connect,
    paramstyle,
    threadsafety,
)
from dpsql.errors import *  # noqa: F403 - the PEP 249 exception hierarchy is public
from dpsql.errors import __all__ as _errors

__version__ = "0.1.0"
__all__ = [
    "BINARY",
    "BOOLEAN",
    "DATETIME",
    "NUMBER",
    "ROWID",
    "STRING",
    "Binary",
    "Connection",
    "Cursor",
    "Database",
    "Date",
    "DateFromTicks",
    "Time",
    "TimeFromTicks",
    "Timestamp",
    "TimestampFromTicks",
    "__version__",
    "apilevel",
    "connect",
    "paramstyle",
    "threadsafety",
    *_errors,
]
