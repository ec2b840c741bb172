"""The server's configuration: what the owner sets on the command line (``dpsql serve``),
read by the server (:mod:`dpsql.server.server`) and the sessions it runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dpsql.server.wire import protocol as p


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 5432
    passwords: Path | None = None  # default: next to the metadata (see dpsql.server.auth)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    require_tls: bool = False
    #: Each query's privacy parameters, until the session SETs others; no epsilon: the
    #: analyst's query_epsilon in the metadata, else 1.0 (Database.query_epsilon).
    epsilon: float | None = None
    delta: float = 0.0
    mechanism: str = "laplace"
    # Seconds; the owner's cap, with the metadata's [server] statement_timeout, of every private
    # query (the smaller applies), and the cap of SET statement_timeout for catalog queries,
    # which read no private data. An analyst's SET never shortens a private query. 0: none.
    statement_timeout: float = 300.0
    # Seconds a client has from connecting to being logged in (PostgreSQL's
    # authentication_timeout); then 08006 and the connection is closed.
    auth_timeout: float = 30.0
    auth_failure_delay: float = 1.0
    # Logged-in sessions; more get 53300. Clients still logging in have their own slots
    # (login_slots): when they are all taken, the oldest is closed to make room, so silent
    # connections can neither fill max_connections nor keep an analyst from logging in.
    max_connections: int = 100
    login_slots: int = 32
    # Seconds a logged-in session may stay silent (57P05 then); None: the metadata's [server]
    # idle_timeout (dpsql.metadata.owner_settings); 0: none.
    idle_timeout: float | None = None
    # Failed logins allowed per source address and per analyst name in a sliding window of
    # failed_login_window seconds before further logins are refused at once (0: no limit).
    failed_logins_per_source: int = 10
    failed_logins_per_name: int = 30
    failed_login_window: float = 60.0
    max_message_size: int = p.DEFAULT_MAX_MESSAGE
    workers: int = 0  # threads answering queries; 0: 8 per core, 8 to 32 (default_workers)
