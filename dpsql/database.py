"""The one library API that every front door calls: a private view of one database.

    >>> db = dpsql.Database()                       # the bundled sample data
    >>> result = db.query("SELECT sex, COUNT(*) FROM people GROUP BY sex", epsilon=0.5)

The command line, the DB-API connection and the wire-protocol server hold no privacy logic of
their own; they go through :class:`Database`.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from dpsql.engines import DuckDBEngine
from dpsql.metadata import Metadata, load_metadata
from dpsql.pipeline import Explanation, answer, explain, prepare
from dpsql.plan import Plan
from dpsql.postprocess import Result


def sample_paths() -> tuple[Path, Path]:
    """The bundled sample database folder and its metadata file."""
    folder = Path(str(resources.files("dpsql.sample_data")))
    return folder, folder / "metadata.toml"


class Database:
    """A DuckDB database (file or folder of CSV/Parquet) seen through its metadata."""

    def __init__(self, database: str | Path | None = None,
                 metadata: str | Path | Metadata | None = None) -> None:
        if database is None and metadata is None:
            database, metadata = sample_paths()
        elif database is None or metadata is None:
            raise ValueError("pass both database and metadata, or neither for the sample data")
        self.metadata = metadata if isinstance(metadata, Metadata) else load_metadata(metadata)
        self.engine = DuckDBEngine(database)

    def plan(self, sql: str, epsilon: float = 1.0, delta: float = 0.0,
             mechanism: str = "laplace") -> Plan:
        """Check and plan ``sql``; raises a :class:`~dpsql.errors.QueryRefused` if refused."""
        return prepare(sql, self.metadata, epsilon, delta, mechanism)

    def query(self, sql: str, epsilon: float = 1.0, delta: float = 0.0,
              mechanism: str = "laplace") -> Result:
        """Answer ``sql`` with noise calibrated to (epsilon, delta)."""
        return answer(self.plan(sql, epsilon, delta, mechanism), self.engine)

    def explain(self, sql: str, epsilon: float = 1.0, delta: float = 0.0,
                mechanism: str = "laplace") -> Explanation:
        """The rewritten SQL and every cell's noise, without reading data."""
        return explain(self.plan(sql, epsilon, delta, mechanism))

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
