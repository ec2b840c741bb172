"""A ledger that fails closed: a missing, emptied or replaced ledger is refused, never restarted.

The ledger is the privacy record: a fresh ledger in its place resets every analyst's spending,
silently. So a ledger has an identity (a random ``ledger_id`` and its ``created_at``, in its
``settings`` table), and the first open of a path (or ``dpsql budget init``) records it in an
*identity record* next to it, ``.NAME.identity`` (hidden, so that ``rm ledger.sqlite*`` does
not take it along). From then on, opening the path expects that ledger:

* **missing** (the file deleted, with or without its ``-wal``/``-shm``): refused;
* **empty** (truncated to 0 bytes, or any 0-byte file): refused, record or not -- SQLite would
  read it as a new, empty database;
* **replaced by another ledger** (a different ``ledger_id``, or a file without one, or not a
  ledger at all): refused;
* **replaced by an older copy of itself**: the record keeps a *generation*, the highest charge
  id a process saw when it opened or closed the ledger, and every ``RECORD_EVERY_SECONDS`` (30)
  while it charges (charge ids only grow: ``AUTOINCREMENT``, append-only); a copy whose highest
  charge id is below it is refused. A copy less than that old is not detected across a
  restart.

An open :class:`Watch` checks before each charge and each read of remaining budget: the path
still names the file that was opened (same device and inode, not 0 bytes), and inside the
transaction the file still holds the same ``ledger_id`` with a highest charge id no lower than
the last one seen. It costs one ``stat`` and one indexed query. Not caught while open: a copy
written over the file in place (``cp old ledger.sqlite``, the same inode), since SQLite reads
its WAL's pages over the file's; the next open compares it with the record.

Creating is atomic: the new ledger is built in a temporary file of the same folder and linked
to its path with ``os.link``, which fails if the path exists; two processes creating it at once
end up on the one that won. Only the owner's ``dpsql budget init --start-over`` creates a ledger
where a recorded one is missing (the old record is kept as ``.NAME.identity.lost-TIME``).

The record is kept twice: beside the ledger, and in the user's state folder
(``$DPSQL_STATE_DIR``, else ``$XDG_STATE_HOME/dpsql``, else ``~/.local/state/dpsql``) under a
digest of the ledger's absolute path, so that deleting the ledger's whole folder (the record
beside it with it) is refused too. The two must agree on the ledger; the later generation of
the two counts. A state folder that cannot be written leaves the record beside the ledger only.

What this does not cover: a ledger whose folder is deleted on a machine (or for a user) whose
state folder is gone as well starts over at the next open, as on a new machine; an owner who
wants no ledger ever created implicitly creates it with ``dpsql budget init`` and keeps the
folder in the backups.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dpsql.errors import LedgerUnavailable

_IDENTITY_SQL = ("SELECT (SELECT value FROM settings WHERE key = 'ledger_id'), "
                 "(SELECT value FROM settings WHERE key = 'created_at'), "
                 "(SELECT COALESCE(MAX(id), 0) FROM charges)")


@dataclass(frozen=True)
class Identity:
    """Which ledger a file holds, and how far it got (its highest charge id)."""

    ledger_id: str | None
    created_at: str | None
    generation: int


STATE_ENV = "DPSQL_STATE_DIR"


def record_path(path: Path) -> Path:
    """The identity record of the ledger at ``path``, beside it."""
    return path.with_name(f".{path.name}.identity")


def state_record_path(path: Path) -> Path:
    """The second identity record of the ledger at ``path``, in the user's state folder."""
    base = os.environ.get(STATE_ENV)
    if not base:
        xdg = os.environ.get("XDG_STATE_HOME")
        base = os.path.join(xdg, "dpsql") if xdg else "~/.local/state/dpsql"
    digest = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:32]
    return Path(base).expanduser() / "ledgers" / f"{digest}.identity"


def _read(path: Path, record: Path) -> Identity | None:
    try:
        text = record.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise unavailable(path, f"its identity record {record} is unreadable ({e.strerror})",
                          None) from None
    try:
        data = json.loads(text)
        return Identity(str(data["ledger_id"]), str(data["created_at"]), int(data["generation"]))
    except (ValueError, KeyError, TypeError):
        raise unavailable(path, f"its identity record {record} is unreadable", None) from None


def read_record(path: Path) -> Identity | None:
    """The recorded identity of the ledger at ``path`` (either record; the later generation
    when both exist), None if nothing was recorded."""
    found = [r for r in (_read(path, record_path(path)), _read(path, state_record_path(path)))
             if r is not None]
    if not found:
        return None
    if len({r.ledger_id for r in found}) > 1:
        raise unavailable(path, f"its identity records {record_path(path)} and "
                          f"{state_record_path(path)} name different ledgers (the ledger's "
                          "folder was replaced)", found[1])
    return max(found, key=lambda r: r.generation)


def _write(record: Path, data: dict[str, object]) -> None:
    temporary = record.with_name(f"{record.name}.{uuid.uuid4().hex}.tmp")
    with open(temporary, "w", encoding="utf-8") as out:
        out.write(json.dumps(data, indent=1) + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, record)
    _sync_folder(record.parent)


def write_record(path: Path, identity: Identity) -> None:
    """Record ``identity`` atomically and durably (a temporary file, fsync, rename), beside
    the ledger and in the state folder (best effort: an unwritable state folder is skipped)."""
    data: dict[str, object] = {"ledger_id": identity.ledger_id,
                               "created_at": identity.created_at,
                               "generation": identity.generation, "ledger": str(path)}
    _write(record_path(path), data)
    state = state_record_path(path)
    try:
        state.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write(state, data)
    except OSError:
        pass  # the record beside the ledger still holds; only folder deletion goes unseen


def retire_record(path: Path) -> Path | None:
    """The owner's start-over: keep the old records under new names; where the one beside the
    ledger went (None if there was none)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    retired = None
    for record in (record_path(path), state_record_path(path)):
        if record.exists():
            moved = record.with_name(f"{record.name}.lost-{stamp}")
            os.replace(record, moved)
            retired = retired or moved
    return retired


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def identity_of(conn: sqlite3.Connection) -> Identity:
    """The identity the open ledger holds (raises sqlite3.Error when it is not a ledger)."""
    ledger_id, created_at, generation = conn.execute(_IDENTITY_SQL).fetchone()
    return Identity(ledger_id, created_at, int(generation))


def assign_identity(conn: sqlite3.Connection) -> None:
    """Give a new ledger (or one made before identities existed) its identity, once."""
    for key, value in (("ledger_id", uuid.uuid4().hex),
                       ("created_at", datetime.now(UTC).isoformat(timespec="seconds"))):
        conn.execute("INSERT OR IGNORE INTO settings (key, value) VALUES (?, ?)", (key, value))


def create_file(path: Path, build: Callable[[Path], None]) -> None:
    """Create the ledger at ``path`` unless it exists: ``build`` makes a complete ledger in a
    temporary file, which is then linked to ``path`` (atomic, and refused if ``path`` exists:
    the first of two creating processes wins, the other uses its ledger)."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.creating")
    try:
        build(temporary)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return
        _sync_folder(path.parent)
    finally:
        for leftover in (temporary, *(temporary.with_name(temporary.name + s)
                                      for s in ("-wal", "-shm", "-journal"))):
            leftover.unlink(missing_ok=True)


def unavailable(path: Path, what: str, recorded: Identity | None) -> LedgerUnavailable:
    """The refusal, with the owner's account of what was found and what to do."""
    expected = (f" It should hold ledger {recorded.ledger_id} created {recorded.created_at} "
                f"with at least {recorded.generation} charges (recorded in "
                f"{record_path(path)})." if recorded is not None else "")
    return LedgerUnavailable(owner_detail=(
        f"budget ledger {path}: {what}.{expected} No query is answered until it is restored: "
        "put the ledger back from a backup (with its -wal file if there is one). If it is "
        "lost, start a new one with `dpsql budget init --start-over -m METADATA`: every "
        "analyst's spending starts from zero, and the answers already released stay released."))


def check_against_record(path: Path, found: Identity, recorded: Identity | None) -> None:
    """Refuse ``found`` if ``recorded`` (read *before* ``found``, so that another process's
    later record cannot look ahead of it) expects another ledger or a later one; else record
    it (the first open records the identity; later ones raise the generation)."""
    if recorded is not None:
        if found.ledger_id != recorded.ledger_id:
            raise unavailable(path, f"it holds ledger {found.ledger_id or '(none)'}, not the "
                              "recorded one (replaced by another file)", recorded)
        if found.generation < recorded.generation:
            raise unavailable(path, f"its highest charge is {found.generation}, below the "
                              "recorded one (replaced by an older copy)", recorded)
        if found.generation == recorded.generation:
            return
    write_record(path, found)


class Watch:
    """What an open ledger checks before each charge and read (see the module docstring)."""

    def __init__(self, path: Path, found: Identity) -> None:
        self.path = path
        self.identity = found
        stat = os.stat(path)
        self._file = (stat.st_dev, stat.st_ino)

    def check_file(self) -> None:
        """The path still names the opened, non-empty file."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            raise unavailable(self.path, "it was deleted while open",
                              self.identity) from None
        if (stat.st_dev, stat.st_ino) != self._file:
            raise unavailable(self.path, "it was replaced by another file while open",
                              self.identity)
        if stat.st_size == 0:
            raise unavailable(self.path, "it was emptied (0 bytes) while open", self.identity)

    def check_contents(self, conn: sqlite3.Connection) -> None:
        """Inside a transaction: the same ledger, not behind what was seen; remembers how far
        it got. Callers read ``self.identity`` *before* their snapshot starts, so a charge
        committed in between only raises what they see."""
        expected = self.identity
        try:
            found = identity_of(conn)
        except sqlite3.Error as exc:
            raise unavailable(self.path, f"it is no longer a ledger ({exc}), overwritten while "
                              "open", expected) from None
        if found.ledger_id != expected.ledger_id:
            raise unavailable(self.path, "it was overwritten by another ledger while open",
                              expected)
        if found.generation < expected.generation:
            raise unavailable(self.path, "it was overwritten by an older copy while open",
                              expected)
        if found.generation > self.identity.generation:
            self.identity = found

    def check(self, conn: sqlite3.Connection) -> None:
        self.check_file()
        self.check_contents(conn)
