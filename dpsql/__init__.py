"""dpsql: a differentially private SQL proxy on DuckDB.

The package is also a DB-API 2.0 (PEP 249) module: ``dpsql.connect(...)`` returns a connection,
and ``apilevel``, ``threadsafety``, ``paramstyle``, the type objects, constructors and the
exception hierarchy are here (see :mod:`dpsql.dbapi`).
"""

from dpsql.database import Database
from dpsql.dbapi import *  # noqa: F403 - the PEP 249 module surface is public
from dpsql.dbapi import __all__ as _dbapi
from dpsql.errors import *  # noqa: F403 - the PEP 249 exception hierarchy is public
from dpsql.errors import __all__ as _errors

__version__ = "0.1.0"
__all__ = ["Database", "__version__", *dict.fromkeys([*_dbapi, *_errors])]
