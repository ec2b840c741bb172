"""An SQLAlchemy dialect for ``dpsql serve``: ``dpsql://user:password@host:port/dbname``
(also ``dpsql+psycopg2://``), registered under the ``sqlalchemy.dialects`` entry point.

It is SQLAlchemy's PostgreSQL psycopg2 dialect under its own name, so that tools which pick
behaviour by dialect name (Apache Superset's engine specs, see
:mod:`dpsql.integrations.superset`) can tell a dpsql server from a PostgreSQL one. Reflection
(``get_table_names``, ``get_columns``, ``get_pk_constraint``, ``get_foreign_keys``,
``get_indexes``) runs the PostgreSQL dialect's own catalog queries, which the server answers from
the metadata only (dpsql/server/catalog/): table and column names, types, nullability, and
the declared bounds and domains as column comments. All of that is public by the privacy model
(the metadata is the owner's public declaration), so reflecting costs no budget.

The server has no hstore or other extension types; the dialect does not look for them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects.postgresql.psycopg2 import PGDialect_psycopg2


class DpsqlDialect(PGDialect_psycopg2):
    """PostgreSQL over psycopg2, named ``dpsql``; answers are the server's noisy answers."""

    name = "dpsql"
    driver = "psycopg2"
    supports_statement_cache = True

    def __init__(self, **kwargs: Any) -> None:
        # dpsql's catalog declares no hstore type: skip the lookup psycopg2 would make for it.
        kwargs.setdefault("use_native_hstore", False)
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]


dialect = DpsqlDialect
