"""Opening the ledger's SQLite file: its schema, its settings and the checks of
:mod:`dpsql.ledger.identity` (a ledger is created only where none was ever recorded).

The storage choices (WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE``, append-only triggers) are
argued in :mod:`dpsql.ledger.budget`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dpsql.errors import LedgerError, LedgerUnavailable, MetadataError
from dpsql.ledger.identity import (
    Watch,
    assign_identity,
    check_against_record,
    create_file,
    identity_of,
    read_record,
    unavailable,
)

SCHEMA_VERSION = 1

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # AUTOINCREMENT: ids are never reused, so "after the latest reset" is "id > a marker".
    """CREATE TABLE IF NOT EXISTS charges (
        id        INTEGER PRIMARY KEY AUTOINCREMENT,
        analyst   TEXT NOT NULL,
        at        TEXT NOT NULL,
        sql       TEXT NOT NULL,
        epsilon   REAL NOT NULL CHECK (epsilon >= 0),
        delta     REAL NOT NULL CHECK (delta >= 0 AND delta < 1),
        rho       REAL NOT NULL CHECK (rho >= 0),
        cache_key TEXT,
        answer    BLOB
    )""",
    "CREATE INDEX IF NOT EXISTS charges_by_analyst ON charges (analyst, id)",
    "CREATE INDEX IF NOT EXISTS charges_by_cache_key ON charges (analyst, cache_key, id)",
    """CREATE TABLE IF NOT EXISTS resets (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        analyst      TEXT NOT NULL,
        at           TEXT NOT NULL,
        after_charge INTEGER NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS resets_by_analyst ON resets (analyst, after_charge)",
    """CREATE TRIGGER IF NOT EXISTS charges_are_never_deleted BEFORE DELETE ON charges
       BEGIN SELECT RAISE(ABORT, 'dpsql ledger: charges are never deleted'); END""",
    """CREATE TRIGGER IF NOT EXISTS charges_are_never_changed BEFORE UPDATE ON charges
       WHEN OLD.answer IS NOT NULL OR NEW.id IS NOT OLD.id OR NEW.analyst IS NOT OLD.analyst
         OR NEW.at IS NOT OLD.at OR NEW.sql IS NOT OLD.sql OR NEW.epsilon IS NOT OLD.epsilon
         OR NEW.delta IS NOT OLD.delta OR NEW.rho IS NOT OLD.rho
         OR NEW.cache_key IS NOT OLD.cache_key
       BEGIN SELECT RAISE(ABORT, 'dpsql ledger: only an answer may be attached, once'); END""",
    """CREATE TRIGGER IF NOT EXISTS resets_are_never_deleted BEFORE DELETE ON resets
       BEGIN SELECT RAISE(ABORT, 'dpsql ledger: resets are never deleted'); END""",
    """CREATE TRIGGER IF NOT EXISTS resets_are_never_changed BEFORE UPDATE ON resets
       BEGIN SELECT RAISE(ABORT, 'dpsql ledger: resets are never changed'); END""",
)


def open_file(path_text: str, accounting: str, create: bool,
              timeout: float) -> tuple[sqlite3.Connection, Watch | None]:
    """The writing connection of the ledger at ``path_text`` and the :class:`Watch` that checks
    it before each charge (None for ``":memory:"``). The ledger is created only if ``create``
    and none was ever recorded at the path (see :mod:`dpsql.ledger.identity`)."""
    if path_text == ":memory:":
        return _connect(path_text, accounting, timeout, new=True), None
    path = Path(path_text)
    recorded = read_record(path)  # before the file is read: see check_against_record
    if not path.exists():
        if recorded is not None:
            raise unavailable(path, "it is missing (deleted or moved)", recorded)
        if not create:
            raise LedgerUnavailable(owner_detail=f"there is no budget ledger at {path}; "
                                    "create it with `dpsql budget init -m METADATA`")
        try:
            create_file(path, lambda new: _connect(str(new), accounting, timeout,
                                                   new=True).close())
        except OSError as exc:
            raise LedgerError(owner_detail=f"cannot create the budget ledger {path}: "
                              f"{exc}") from None
    try:
        empty = path.stat().st_size == 0
    except FileNotFoundError:
        raise unavailable(path, "it is missing (deleted or moved)", recorded) from None
    if empty:
        raise unavailable(path, "it is empty (0 bytes), not a ledger", recorded)
    conn = _connect(path_text, accounting, timeout, new=False)
    try:
        found = identity_of(conn)
        check_against_record(path, found, recorded)
        return conn, Watch(path, found)
    except OSError as exc:
        conn.close()
        raise LedgerError(owner_detail=f"budget ledger {path}: cannot record its identity "
                          f"in its folder: {exc}") from None
    except BaseException:
        conn.close()
        raise


def open_reader(path_text: str, timeout: float) -> sqlite3.Connection:
    """A second connection, for reads that must not wait behind a commit's fsync."""
    try:
        conn = sqlite3.connect(path_text, timeout=timeout, isolation_level=None,
                               check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    except sqlite3.Error as exc:
        raise LedgerError(owner_detail=f"cannot open the budget ledger {path_text}: "
                          f"{exc}") from None
    return conn


def _connect(target: str, accounting: str, timeout: float, new: bool) -> sqlite3.Connection:
    """A prepared connection to ``target``: a ``new`` ledger gets its schema and identity; an
    existing file must already be a ledger."""
    try:
        # isolation_level=None: we issue BEGIN IMMEDIATE ourselves; check_same_thread=False
        # because threads share this connection under the ledger's lock.
        conn = sqlite3.connect(target, timeout=timeout, isolation_level=None,
                               check_same_thread=False)
    except sqlite3.Error as exc:
        raise LedgerError(owner_detail=f"cannot open the budget ledger {target}: "
                          f"{exc}") from None
    try:
        _prepare(conn, target, accounting, timeout, new)
    except sqlite3.Error as exc:
        conn.close()
        if new:
            raise LedgerError(owner_detail=f"cannot create the budget ledger {target}: "
                              f"{exc}") from None
        raise unavailable(Path(target), f"it is not a dpsql budget ledger ({exc})",
                          read_record(Path(target))) from None
    except BaseException:
        conn.close()
        raise
    return conn


def _prepare(conn: sqlite3.Connection, target: str, accounting: str, timeout: float,
             new: bool) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    if not new:  # an existing file that is no ledger must not become an empty one
        conn.execute("SELECT 1 FROM charges, settings, schema_version LIMIT 0")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("BEGIN IMMEDIATE")  # two processes preparing must not interleave
    try:
        for statement in _SCHEMA:  # IF NOT EXISTS: also upgrades an earlier ledger
            conn.execute(statement)
        _check_settings(conn, target, accounting)
        assign_identity(conn)  # a ledger made before identities gets one, once
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _check_settings(conn: sqlite3.Connection, target: str, accounting: str) -> None:
    conn.execute("INSERT INTO schema_version (version) SELECT ? "
                 "WHERE NOT EXISTS (SELECT 1 FROM schema_version)", (SCHEMA_VERSION,))
    conn.execute("INSERT OR IGNORE INTO settings (key, value) VALUES ('accounting', ?)",
                 (accounting,))
    (version,) = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    if version != SCHEMA_VERSION:
        raise MetadataError(f"the budget ledger {target} has schema version {version}; this "
                            f"dpsql reads version {SCHEMA_VERSION}")
    (stored,) = conn.execute("SELECT value FROM settings WHERE key = 'accounting'").fetchone()
    if stored != accounting:
        raise MetadataError(f"the budget ledger {target} uses {stored} accounting, not "
                            f"{accounting}; open it with accounting={stored!r} or start a new "
                            "ledger")
