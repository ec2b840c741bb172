"""dpsql: a differentially private SQL proxy on DuckDB.

The package is also a DB-API 2.0 (PEP 249) module: ``dpsql.connect(...)`` returns a connection,
and ``apilevel``, ``threadsafety``, ``paramstyle``, the type objects, constructors and the
exception hierarchy are here (see :mod:`dpsql.dbapi`).

The exception classes are imported with the package (:mod:`dpsql.errors` imports nothing
heavy); everything else is imported on first use (PEP 562 ``__getattr__``), so that
``import dpsql`` and the command line's ``--help`` and ``budget`` do not pay for sqlglot,
DuckDB and numpy (docs/performance.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dpsql.errors import *  # noqa: F403 - the PEP 249 exception hierarchy is public
from dpsql.errors import __all__ as _errors

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports them
    from dpsql.database import Database
    from dpsql.dbapi import *  # noqa: F403

__version__ = "0.1.0"

#: The PEP 249 module surface of dpsql.dbapi (tests/doors/test_startup.py checks it is its __all__).
_DBAPI = ("BINARY", "BOOLEAN", "DATETIME", "NUMBER", "ROWID", "STRING", "Binary", "Connection",
          "Cursor", "DBAPITypeObject", "Date", "DateFromTicks", "Time", "TimeFromTicks",
          "Timestamp", "TimestampFromTicks", "apilevel", "connect", "paramstyle",
          "threadsafety")
_LAZY = {"Database": "dpsql.database", **dict.fromkeys(_DBAPI, "dpsql.dbapi")}

__all__ = ["Database", "__version__", *dict.fromkeys([*_DBAPI, *_errors])]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use, and keep the name here."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dpsql' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
