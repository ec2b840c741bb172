"""What a catalog query depends on and what it answers."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class SessionInfo:
    """What catalog answers may depend on: the session, never the data."""

    user: str
    database: str
    pid: int
    settings: Mapping[str, str]
    start_time: dt.datetime
    version: str  # the version() text

    def key(self) -> tuple[object, ...]:
        return (self.user, self.database, self.pid, tuple(sorted(self.settings.items())))


@dataclass(frozen=True)
class CatalogQuery:
    """A rewritten catalog query; cached and shared by sessions, so never changed."""

    sql: str  # DuckDB SQL over the catalog
    names: list[str] | None  # PostgreSQL's column names, when they can be computed


@dataclass
class CatalogResult:
    names: list[str]
    types: list[str]  # DuckDB type names
    rows: list[tuple[object, ...]] = field(default_factory=list)


class CatalogError(Exception):
    """A catalog query that cannot be answered at all (SQLSTATE in ``sqlstate``)."""

    def __init__(self, message: str, sqlstate: str = "0A000") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate

