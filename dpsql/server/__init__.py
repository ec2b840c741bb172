"""``dpsql serve``: a PostgreSQL wire-protocol front door for BI tools and drivers.

Modules: :mod:`~dpsql.server.wire.protocol` (the message codec), :mod:`~dpsql.server.wire.types`
(type OIDs and value encodings), :mod:`~dpsql.server.wire.sqltext` (statement splitting and ``$n``
parameters), :mod:`~dpsql.server.auth` (SCRAM-SHA-256 and the passwords file),
:mod:`~dpsql.server.catalog` (pg_catalog and information_schema from the metadata),
:mod:`~dpsql.server.machine.settings` (SET/SHOW), :mod:`~dpsql.server.machine.classify` (what a
statement is, from its text; a private query's columns are its route's:
:meth:`dpsql.routes.route.Route.columns`),
:mod:`~dpsql.server.machine.commands` (session commands and cursors),
:mod:`~dpsql.server.machine.machine` (the protocol state machine, no I/O),
:mod:`~dpsql.server.session` (one connection: the asyncio adapter) and :mod:`~dpsql.server.server`
(listening, cancel, the thread pool).

Like every front door it holds no privacy logic: every query that touches data goes through
:meth:`dpsql.Database.query` (checks, plan, ledger, noise), charged to the connected analyst.
"""

from dpsql.server.config import ServerConfig
from dpsql.server.server import Server, serve_in_thread

__all__ = ["Server", "ServerConfig", "serve_in_thread"]
