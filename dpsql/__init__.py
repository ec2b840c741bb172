"""dpsql: a differentially private SQL proxy on DuckDB."""

from dpsql.database import Database
from dpsql.errors import *  # noqa: F403 - the PEP 249 exception hierarchy is public
from dpsql.errors import __all__ as _errors

__version__ = "0.1.0"
__all__ = ["Database", "__version__", *_errors]
