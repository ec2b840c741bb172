"""SCRAM-SHA-256 authentication (RFC 5802, RFC 7677) against stored verifiers, with `scramp`.

The server never sees or stores a password. ``dpsql analyst add NAME`` derives, from a password
and a random salt, PostgreSQL's own verifier format (as in ``pg_authid.rolpassword``)::

    SCRAM-SHA-256$<iterations>:<base64 salt>$<base64 StoredKey>:<base64 ServerKey>

and keeps it in a passwords file, one analyst per line (TOML)::

    [analysts]
    alice = "SCRAM-SHA-256$4096:...$...:..."

The file is found at ``[server] passwords = "..."`` in the metadata file (relative to it), or
else ``dpsql-passwords.toml`` next to the metadata file (``~/.dpsql/sample-passwords.toml`` for
the bundled sample data). It is written with mode 0600, atomically.

The SCRAM arithmetic, SASLprep and the parsing of the client's messages are the maintained
`scramp` library's (the one pg8000 authenticates with); this module adds what PostgreSQL does
around it: the user name comes from the startup packet, not from the SCRAM message, and an
unknown user goes through the same exchange with a fake salt derived from a server secret, so a
client cannot tell unknown analysts from wrong passwords.

As in PostgreSQL, an unknown name's fake salt is stable: it is an HMAC of the name under a
server secret kept next to the passwords file (:func:`server_secret`), so it is the same after
a restart, as a real analyst's salt is, and its iteration count is the one the real verifiers
use (:func:`mock_iterations`). Failed logins are counted per source address and per name
(:class:`LoginThrottle`).
"""

from __future__ import annotations

import base64
import collections
import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import time
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpsql.metadata.metadata import Metadata

import tomli_w
from scramp import ScramException, ScramMechanism

MECHANISM = "SCRAM-SHA-256"
DEFAULT_ITERATIONS = 4096  # PostgreSQL's default (scram_iterations); scramp's minimum too
PASSWORDS_FILE = "dpsql-passwords.toml"
_MIN_SALT_BYTES = 12  # scramp refuses shorter salts (PostgreSQL makes 16-byte ones)
_SCRAM = ScramMechanism(MECHANISM)


class AuthenticationFailed(Exception):
    """The exchange failed: wrong password, unknown analyst or a malformed SCRAM message."""


@dataclass(frozen=True)
class Verifier:
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    def encode(self) -> str:
        b64 = _b64
        return (f"{MECHANISM}${self.iterations}:{b64(self.salt)}"
                f"${b64(self.stored_key)}:{b64(self.server_key)}")

    @classmethod
    def decode(cls, text: str) -> Verifier:
        try:
            mechanism, params, keys = text.split("$")
            iterations, salt = params.split(":")
            stored, server = keys.split(":")
            if mechanism != MECHANISM or int(iterations) < 1:
                raise ValueError(mechanism)
            v = cls(int(iterations), base64.b64decode(salt, validate=True),
                    base64.b64decode(stored, validate=True),
                    base64.b64decode(server, validate=True))
        except (ValueError, TypeError) as e:
            raise ValueError(f"not a {MECHANISM} verifier: {e}") from None
        if len(v.stored_key) != 32 or len(v.server_key) != 32 or not v.salt:
            raise ValueError(f"not a {MECHANISM} verifier: wrong key lengths")
        if v.iterations < DEFAULT_ITERATIONS or len(v.salt) < _MIN_SALT_BYTES:
            # Older hand-made verifiers: scramp (rightly) refuses weak parameters.
            raise ValueError(f"a {MECHANISM} verifier with {v.iterations} iterations and a "
                             f"{len(v.salt)}-byte salt is too weak (at least "
                             f"{DEFAULT_ITERATIONS} and {_MIN_SALT_BYTES} are needed); set "
                             "the password again with `dpsql analyst add NAME`")
        return v


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


def make_verifier(password: str, iterations: int = DEFAULT_ITERATIONS,
                  salt: bytes | None = None) -> Verifier:
    """The verifier of ``password`` (SASLprep-ed by scramp, as libpq and pg8000 do).

    A password that SASLprep prohibits (control, private-use or unassigned characters) is
    refused: libpq would then hash its raw bytes and pg8000 would refuse it, so no single
    verifier serves every client."""
    try:
        salt, stored, server, count = _SCRAM.make_auth_info(
            password, iteration_count=iterations,
            salt=salt if salt is not None else secrets.token_bytes(16))
    except ScramException as e:
        raise ValueError(f"this password cannot be used with SCRAM ({e}); choose one without "
                         "control, private-use or unassigned characters") from None
    return Verifier(count, salt, stored, server)


# -- the passwords file ----------------------------------------------------------------------


def read_passwords(path: Path) -> dict[str, Verifier]:
    """Analyst name -> verifier. A missing file means no analyst can log in yet."""
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from None
    section = data.get("analysts", {})
    if not isinstance(section, dict):
        raise ValueError(f"{path}: [analysts] must map each analyst to a verifier")
    out = {}
    for name, text in section.items():
        if not isinstance(text, str):
            raise ValueError(f"{path}: analyst {name!r}: the verifier must be a string")
        try:
            out[name] = Verifier.decode(text)
        except ValueError as e:
            raise ValueError(f"{path}: analyst {name!r}: {e}") from None
    return out


_HEADER = ("# dpsql analyst passwords: SCRAM-SHA-256 verifiers only, never passwords.\n"
           "# Managed by `dpsql analyst add/remove NAME`; keep this file private (mode 0600).\n\n")


def write_password(path: Path, name: str, verifier: Verifier) -> None:
    """Add or replace one analyst's verifier, atomically, keeping the file private (0600)."""
    if not name.strip() or any(c in name for c in "\0\r\n") or name == "*":
        raise ValueError("an analyst name must be a non-empty single line, and not \"*\"")
    entries = {n: v.encode() for n, v in read_passwords(path).items()}
    entries[name] = verifier.encode()
    _write_entries(path, entries)


def remove_password(path: Path, name: str) -> bool:
    """Remove ``name``'s verifier (they can no longer log in); False if there was none."""
    entries = {n: v.encode() for n, v in read_passwords(path).items()}
    if entries.pop(name, None) is None:
        return False
    _write_entries(path, entries)
    return True


def _write_entries(path: Path, entries: dict[str, str]) -> None:
    """Replace the file atomically (a reader sees the old or the new one), mode 0600."""
    text = _HEADER + tomli_w.dumps({"analysts": dict(sorted(entries.items()))})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


SAMPLE_PASSWORDS = Path("~/.dpsql/sample-passwords.toml")


def passwords_for(metadata: Metadata) -> Path:
    """The passwords file of a :class:`~dpsql.metadata.metadata.Metadata`: its ``[server]
    passwords``, else ``dpsql-passwords.toml`` next to it; for the bundled sample data (whose folder
    may be read-only) ``~/.dpsql/sample-passwords.toml``."""
    from dpsql.database import sample_paths

    declared = metadata.server.passwords
    if declared is not None:
        return declared
    if metadata.path is not None and \
            Path(metadata.path).resolve() == sample_paths()[1].resolve():
        return SAMPLE_PASSWORDS.expanduser()
    return passwords_path(metadata.path)


def set_password(path: Path, name: str, password: str,
                 iterations: int = DEFAULT_ITERATIONS) -> None:
    """Store the SCRAM-SHA-256 verifier of ``password`` for analyst ``name``."""
    if not password:
        raise ValueError("the password must not be empty")
    if iterations < 4096:
        raise ValueError("use at least 4096 iterations")
    write_password(path, name, make_verifier(password, iterations))


def passwords_path(metadata_path: Path | None) -> Path:
    """The default passwords file of a metadata file: ``dpsql-passwords.toml`` next to it."""
    base = metadata_path.parent if metadata_path is not None else Path.cwd()
    return base / PASSWORDS_FILE


# -- what unknown names get ------------------------------------------------------------------

_SECRET_BYTES = 32
log = logging.getLogger("dpsql.server")


def secret_path(passwords: Path) -> Path:
    """Where the server secret of a passwords file is kept: ``<passwords file>.secret``."""
    return passwords.with_name(passwords.name + ".secret")


def server_secret(passwords: Path) -> bytes:
    """The secret that fake verifiers are derived from: 32 random bytes kept in
    :func:`secret_path` (mode 0600), created on first use and read on every later start, so
    an unknown name's salt does not change across restarts (a changing one told it apart).

    Where it cannot be kept (a read-only folder), it is derived from the passwords file's
    bytes, stable until that file changes; with no passwords file either, it is a per-process
    secret (logged: an unknown name's salt then changes on restart)."""
    path = secret_path(passwords)
    with contextlib.suppress(FileNotFoundError):
        return _read_secret(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another server created it meanwhile
        return _read_secret(path)
    except OSError as e:
        try:
            return _hmac(passwords.read_bytes(), b"dpsql server secret")
        except OSError:
            log.warning("cannot keep the server secret in %s (%s): unknown names' SCRAM salts "
                        "will change when the server restarts", path, e.strerror)
            return secrets.token_bytes(_SECRET_BYTES)
    secret = secrets.token_bytes(_SECRET_BYTES)
    with os.fdopen(fd, "wb") as f:
        f.write(secret.hex().encode("ascii") + b"\n")
        f.flush()
        os.fsync(f.fileno())
    return secret


def _read_secret(path: Path) -> bytes:
    text = path.read_text(encoding="ascii", errors="replace").strip()
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) < 16:
        raise ValueError(f"{path}: not a dpsql server secret (64 hexadecimal digits); delete "
                         "it and restart the server to make a new one")
    return secret


def mock_iterations(verifiers: Mapping[str, Verifier]) -> int:
    """The iteration count fake verifiers use: the one most real verifiers use (the larger on
    a tie), so that the count does not tell unknown names from analysts."""
    counts = collections.Counter(v.iterations for v in verifiers.values())
    if not counts:
        return DEFAULT_ITERATIONS
    return max(counts, key=lambda n: (counts[n], n))


class LoginThrottle:
    """Failed logins in the last ``window`` seconds, per source address and per name.

    A source with ``per_source`` failures, or a name with ``per_name`` (0: no limit), is
    refused at once, before any exchange, until its oldest failure leaves the window: password
    guessing gets that many tries a window. Unknown names are counted as analysts are, so a
    refusal tells nothing about whether a name exists. The per-name limit lets anyone who knows
    a name hold its analyst out while they keep failing: the owner trades that against
    guessing spread over many addresses (set it to 0 to count sources only)."""

    MAX_KEYS = 10_000  # names and addresses remembered, so random names cannot fill memory

    def __init__(self, per_source: int, per_name: int, window: float = 60.0) -> None:
        self.limits = {"source": per_source, "name": per_name}
        self.window = window
        self._failures: dict[tuple[str, str], collections.deque[float]] = {}

    def wait(self, source: str, name: str, now: float | None = None) -> float:
        """Seconds until a login from ``source`` as ``name`` is allowed again (0: now)."""
        now = time.monotonic() if now is None else now
        wait = 0.0
        for key in (("source", source), ("name", name)):
            limit = self.limits[key[0]]
            times = self._failures.get(key)
            if limit > 0 and times is not None and len(times) >= limit:
                wait = max(wait, times[-limit] + self.window - now)
        return max(wait, 0.0)

    def failed(self, source: str, name: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for key in (("source", source), ("name", name)):
            limit = self.limits[key[0]]
            if limit > 0:
                times = self._failures.setdefault(key, collections.deque(maxlen=limit))
                times.append(now)
        if len(self._failures) > self.MAX_KEYS:
            self._forget(now)

    def _forget(self, now: float) -> None:
        stale = [k for k, t in self._failures.items() if not t or t[-1] + self.window < now]
        for key in stale:
            del self._failures[key]
        while len(self._failures) > self.MAX_KEYS:  # all recent: the oldest keys go
            del self._failures[next(iter(self._failures))]


# -- the exchange ----------------------------------------------------------------------------


class ScramExchange:
    """The server side of one SCRAM-SHA-256 exchange (scramp's ``ScramServer``).

    ``verifier`` is None for an unknown user: the exchange then runs on a fake verifier and
    always fails at the end, in the same way and time as a wrong password.
    """

    def __init__(self, user: str, verifier: Verifier | None, mock_secret: bytes,
                 iterations: int = DEFAULT_ITERATIONS) -> None:
        self.user = user
        self.real = verifier is not None
        if verifier is None:
            fake_salt = _hmac(mock_secret, b"salt:" + user.encode("utf-8"))[:16]
            fake_key = _hmac(mock_secret, b"key:" + user.encode("utf-8"))
            verifier = Verifier(iterations, fake_salt, fake_key, fake_key)
        self.verifier = verifier
        v = verifier
        # The startup packet named the user (as in PostgreSQL): whatever name the SCRAM
        # message carries is ignored.
        self._server = _SCRAM.make_server(
            lambda _name: (v.salt, v.stored_key, v.server_key, v.iterations))

    def first(self, client_first: bytes) -> bytes:
        """client-first-message -> server-first-message."""
        text = _text(client_first)
        gs2_end = _gs2_header_end(text)
        bare = text[gs2_end:]
        # libpq sends an empty SCRAM user name ("n=,r=..."), which scramp, strict to RFC 5802,
        # refuses; scramp parses a copy naming "*" (what pgjdbc sends), and then signs the
        # AuthMessage over the bare message this client really sent.
        name, comma, rest = bare.partition(",")
        parsed = f"n=*{comma}{rest}" if name.startswith("n=") else bare
        with _failures():
            self._server.set_client_first(text[:gs2_end] + parsed)
            if getattr(self._server, "client_first_bare", None) != parsed:
                raise RuntimeError("scramp no longer keeps client_first_bare: the server "
                                   "cannot accept libpq's empty SCRAM user name")
            self._server.client_first_bare = bare
            first: str = self._server.get_server_first()
            return first.encode("ascii")

    def final(self, client_final: bytes) -> bytes:
        """client-final-message -> server-final-message, or AuthenticationFailed."""
        text = _text(client_final)
        with _failures():
            self._server.set_client_final(text)
            answer: str = self._server.get_server_final()
        if not self.real:
            raise AuthenticationFailed("wrong password")
        return answer.encode("ascii")


def _text(message: bytes) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed("malformed SCRAM message") from None


def _gs2_header_end(text: str) -> int:
    """Where the client-first-message-bare starts (after "n,," "y,," or "p=...,,")."""
    first = text.find(",")
    second = text.find(",", first + 1) if first >= 0 else -1
    if second < 0:
        raise AuthenticationFailed("malformed SCRAM message (GS2 header)")
    return second + 1


@contextlib.contextmanager
def _failures() -> Iterator[None]:
    """Every error scramp raises on the client's bytes is a failed login, never a crash: the
    messages are the adversary's."""
    try:
        yield
    except (ScramException, ValueError, LookupError) as e:
        raise AuthenticationFailed(str(e)) from None
