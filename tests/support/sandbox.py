"""A throw-away setup for the server's tests and benchmark: the sample data's tables, a fresh
budget ledger and analysts with known passwords, all in one folder.

    >>> setup = sandbox(tmp_path, {"alice": ("secret", 1000.0, 1e-3)})
    >>> db = dpsql.Database(setup.database, setup.metadata)
    >>> with serve_in_thread(db, ServerConfig(port=0, passwords=setup.passwords)) as running:
    ...     ...

It also holds a minimal protocol client (:class:`RawClient`) for tests that must send exactly
the bytes they choose: truncated and malformed messages, cancel requests.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import re
import secrets
import socket
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import tomli_w

from dpsql.database import Database, sample_paths
from dpsql.ledger.opening import LEDGER_ENV
from dpsql.server.auth import set_password
from dpsql.server.config import ServerConfig
from dpsql.server.server import serve_in_thread


@dataclass
class Sandbox:
    folder: Path
    database: Path  # the sample data's Parquet folder
    metadata: Path
    passwords: Path
    ledger: Path


def sandbox(folder: Path, analysts: Mapping[str, tuple[str, float, float] | tuple[str, None,
                                                                                   None]],
            reuse_answers: bool = True, metered: bool = True,
            query_epsilon: Mapping[str, float] | None = None) -> Sandbox:
    """Metadata with the sample tables, a ledger in ``folder``, and for each analyst
    ``name: (password, epsilon, delta)`` (epsilon None: a password but no budget), with the
    ``query_epsilon`` given for some of them.
    ``metered=False`` declares no budget at all (nothing is charged)."""
    database, sample_metadata = sample_paths()
    text = sample_metadata.read_text()
    start = re.search(r"^\[tables\.", text, re.M)
    assert start is not None, "the sample metadata declares no tables"
    ledger = folder / "ledger.sqlite"
    budget: dict[str, object] = {}
    if metered:
        budget["budget"] = {"ledger": str(ledger), "reuse_answers": reuse_answers}
        budget["analysts"] = {name: {"epsilon": epsilon, "delta": delta}
                              for name, (_, epsilon, delta) in analysts.items()
                              if epsilon is not None}
        for name, default in (query_epsilon or {}).items():
            budget["analysts"][name]["query_epsilon"] = default  # type: ignore[index]
    metadata = folder / "metadata.toml"
    metadata.write_text(tomli_w.dumps(budget) + "\n" + text[start.start():], encoding="utf-8")
    passwords = folder / "passwords.toml"
    for name, (password, _, _) in analysts.items():
        set_password(passwords, name, password)
    return Sandbox(folder, database, metadata, passwords, ledger)


# -- a minimal client ------------------------------------------------------------------------


class ServerClosed(Exception):
    pass


class RawClient:
    """Speaks just enough of the protocol to log in and send arbitrary messages."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buffer = b""
        self.pid = self.secret = 0
        self.parameters: dict[str, str] = {}

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ServerClosed(f"connection closed (after {self.buffer!r})")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def read_byte(self) -> bytes:
        return self._read(1)

    def message(self) -> tuple[bytes, bytes]:
        kind = self._read(1)
        length = struct.unpack("!i", self._read(4))[0]
        return kind, self._read(length - 4)

    def until(self, kind: bytes) -> list[tuple[bytes, bytes]]:
        """Messages up to and including the first of ``kind``."""
        out = []
        while True:
            m = self.message()
            out.append(m)
            if m[0] == kind:
                return out

    @staticmethod
    def startup_packet(user: str, database: str = "dpsql", version: int = 196608,
                       extra: Mapping[str, str] | None = None) -> bytes:
        params = {"user": user, "database": database, **(extra or {})}
        body = struct.pack("!i", version) + b"".join(
            k.encode() + b"\0" + v.encode() + b"\0" for k, v in params.items()) + b"\0"
        return struct.pack("!i", len(body) + 4) + body

    def login(self, user: str, password: str, extra: Mapping[str, str] | None = None,
              version: int = 196608) -> list[tuple[bytes, bytes]]:
        """Startup and SCRAM-SHA-256; returns the messages up to ReadyForQuery (raises on an
        ErrorResponse)."""
        self.send(self.startup_packet(user, extra=extra, version=version))
        seen = []
        kind, body = self.message()
        while kind == b"v":
            seen.append((kind, body))
            kind, body = self.message()
        if kind == b"E":
            raise ServerClosed(error_fields(body).get("M", ""))
        assert kind == b"R" and struct.unpack("!i", body[:4])[0] == 10, (kind, body)
        nonce = base64.b64encode(secrets.token_bytes(18)).decode()
        first_bare = f"n=,r={nonce}"
        first = ("n,," + first_bare).encode()
        self.send(_msg(b"p", b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first))
        kind, body = self.message()
        if kind == b"E":
            raise ServerClosed(error_fields(body).get("M", ""))
        server_first = body[4:].decode()
        attrs = dict(part.split("=", 1) for part in server_first.split(","))
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]),
                                     int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
        stored = hashlib.sha256(client_key).digest()
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(stored, auth_message, hashlib.sha256).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self.send(_msg(b"p", f"{without_proof},p={base64.b64encode(proof).decode()}".encode()))
        while True:
            kind, body = self.message()
            seen.append((kind, body))
            if kind == b"Z":
                break
            if kind == b"E":
                raise ServerClosed(error_fields(body).get("M", ""))
            if kind == b"K":
                self.pid, self.secret = struct.unpack("!ii", body)
            if kind == b"S":
                name, value = body[:-1].split(b"\0", 1)
                self.parameters[name.decode()] = value.decode()
        return seen

    def query(self, sql: str) -> list[tuple[bytes, bytes]]:
        self.send(_msg(b"Q", sql.encode() + b"\0"))
        return self.until(b"Z")


@contextlib.contextmanager
def served_sandbox(folder: Path, password: str, user: str = "alice",
                   epsilon: float = 100000.0, delta: float = 0.5,
                   database: str | None = None) -> Iterator[SimpleNamespace]:
    """A :func:`sandbox` database, with its own ledger (whatever ``DPSQL_LEDGER`` says), served
    on a free port: ``port``, ``db``, ``setup`` and ``server``. The tests of every client start
    their server this way. ``database`` (a copy of the sample tables in another engine, by
    URL) replaces the sample's Parquet folder."""
    setup = sandbox(folder, {user: (password, epsilon, delta)})
    saved = os.environ.pop(LEDGER_ENV, None)  # the sandbox's own ledger
    try:
        db = Database(database or setup.database, setup.metadata)
    finally:
        if saved is not None:
            os.environ[LEDGER_ENV] = saved
    try:
        with serve_in_thread(db, ServerConfig(port=0, passwords=setup.passwords)) as running:
            yield SimpleNamespace(port=running.port, db=db, setup=setup, server=running.server)
    finally:
        db.close()


def _msg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def message(kind: bytes, body: bytes) -> bytes:
    """One frontend message."""
    return _msg(kind, body)


def error_fields(body: bytes) -> dict[str, str]:
    out = {}
    for part in body.split(b"\0"):
        if part:
            out[part[:1].decode()] = part[1:].decode(errors="replace")
    return out


def cancel_request(port: int, pid: int, secret: int, host: str = "127.0.0.1") -> None:
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(struct.pack("!iiii", 16, 80877102, pid, secret))
        s.settimeout(5)
        with contextlib.suppress(TimeoutError, OSError):
            s.recv(1)
