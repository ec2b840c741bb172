"""SCRAM-SHA-256 authentication (RFC 5802, RFC 7677) against stored verifiers.

The server never sees or stores a password. ``dpsql analyst add NAME`` derives, from a password
and a random salt, PostgreSQL's own verifier format (as in ``pg_authid.rolpassword``)::

    SCRAM-SHA-256$<iterations>:<base64 salt>$<base64 StoredKey>:<base64 ServerKey>

and keeps it in a passwords file, one analyst per line (TOML)::

    [analysts]
    alice = "SCRAM-SHA-256$4096:...$...:..."

The file is found at ``[server] passwords = "..."`` in the metadata file (relative to it), or
else ``dpsql-passwords.toml`` next to the metadata file (``~/.dpsql/sample-passwords.toml`` for
the bundled sample data). It is written with mode 0600, atomically.

An unknown user goes through the same exchange with a fake salt derived from a server secret
(as PostgreSQL does), so a client cannot tell unknown analysts from wrong passwords.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import stringprep
import tomllib
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpsql.metadata import Metadata

MECHANISM = "SCRAM-SHA-256"
DEFAULT_ITERATIONS = 4096  # PostgreSQL's default (scram_iterations)
PASSWORDS_FILE = "dpsql-passwords.toml"
_NONCE_BYTES = 18


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
        return v


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


def saslprep(password: str) -> bytes:
    """SASLprep (RFC 4013) as libpq applies it; like PostgreSQL, a password that SASLprep
    rejects is used as its raw UTF-8 bytes."""
    raw = password.encode("utf-8")
    if password.isascii():
        return raw
    mapped = "".join(" " if stringprep.in_table_c12(c) else c for c in password
                     if not stringprep.in_table_b1(c))
    text = unicodedata.normalize("NFKC", mapped)
    if not text:
        return raw
    prohibited = (stringprep.in_table_c12, stringprep.in_table_c21_c22, stringprep.in_table_c3,
                  stringprep.in_table_c4, stringprep.in_table_c5, stringprep.in_table_c6,
                  stringprep.in_table_c7, stringprep.in_table_c8, stringprep.in_table_c9,
                  stringprep.in_table_a1)
    if any(check(c) for c in text for check in prohibited):
        return raw
    rand_al = [stringprep.in_table_d1(c) for c in text]
    if any(rand_al) and (any(stringprep.in_table_d2(c) for c in text)
                         or not (rand_al[0] and rand_al[-1])):
        return raw
    return text.encode("utf-8")


def make_verifier(password: str, iterations: int = DEFAULT_ITERATIONS,
                  salt: bytes | None = None) -> Verifier:
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", saslprep(password), salt, iterations)
    client_key = _hmac(salted, b"Client Key")
    return Verifier(iterations, salt, hashlib.sha256(client_key).digest(),
                    _hmac(salted, b"Server Key"))


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


def write_password(path: Path, name: str, verifier: Verifier) -> None:
    """Add or replace one analyst's verifier, atomically, keeping the file private (0600)."""
    if not name.strip() or any(c in name for c in "\0\r\n") or name == "*":
        raise ValueError("an analyst name must be a non-empty single line, and not \"*\"")
    entries = {n: v.encode() for n, v in read_passwords(path).items()}
    entries[name] = verifier.encode()
    lines = ["# dpsql analyst passwords: SCRAM-SHA-256 verifiers only, never passwords.",
             "# Managed by `dpsql analyst add NAME`; keep this file private (mode 0600).",
             "", "[analysts]"]
    lines += [f"{_toml_string(n)} = {_toml_string(v)}" for n, v in sorted(entries.items())]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _toml_string(text: str) -> str:
    out = ['"']
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


SAMPLE_PASSWORDS = Path("~/.dpsql/sample-passwords.toml")


def passwords_for(metadata: Metadata) -> Path:
    """The passwords file of a :class:`~dpsql.metadata.Metadata`: its ``[server] passwords``,
    else ``dpsql-passwords.toml`` next to it; for the bundled sample data (whose folder may be
    read-only) ``~/.dpsql/sample-passwords.toml``."""
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


# -- the exchange ----------------------------------------------------------------------------


class ScramExchange:
    """The server side of one SCRAM-SHA-256 exchange.

    ``verifier`` is None for an unknown user: the exchange then runs on a fake verifier and
    always fails at the end, in the same way and time as a wrong password.
    """

    def __init__(self, user: str, verifier: Verifier | None, mock_secret: bytes) -> None:
        self.user = user
        self.real = verifier is not None
        if verifier is None:
            fake_salt = _hmac(mock_secret, b"salt:" + user.encode("utf-8"))[:16]
            fake_key = _hmac(mock_secret, b"key:" + user.encode("utf-8"))
            verifier = Verifier(DEFAULT_ITERATIONS, fake_salt, fake_key, fake_key)
        self.verifier = verifier
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2_header = ""

    def first(self, client_first: bytes) -> bytes:
        """client-first-message -> server-first-message."""
        try:
            text = client_first.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("malformed SCRAM message") from None
        if text.startswith("p="):
            raise AuthenticationFailed("channel binding is not supported by this server")
        if not (text.startswith("n,") or text.startswith("y,")):
            raise AuthenticationFailed("malformed SCRAM message (GS2 header)")
        parts = text.split(",", 2)
        if len(parts) != 3 or (parts[1] and not parts[1].startswith("a=")):
            raise AuthenticationFailed("malformed SCRAM message")
        self._gs2_header = parts[0] + "," + parts[1] + ","
        self._client_first_bare = parts[2]
        attributes = _attributes(self._client_first_bare)
        if "m" in attributes:
            raise AuthenticationFailed("SCRAM extensions are not supported")
        client_nonce = attributes.get("r", "")
        if not client_nonce or not all(0x21 <= ord(c) <= 0x7E and c != "," for c in
                                       client_nonce):
            raise AuthenticationFailed("malformed SCRAM nonce")
        self._nonce = client_nonce + base64.b64encode(
            secrets.token_bytes(_NONCE_BYTES)).decode("ascii")
        self._server_first = (f"r={self._nonce},s={_b64(self.verifier.salt)},"
                              f"i={self.verifier.iterations}")
        return self._server_first.encode("ascii")

    def final(self, client_final: bytes) -> bytes:
        """client-final-message -> server-final-message, or AuthenticationFailed."""
        try:
            text = client_final.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("malformed SCRAM message") from None
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise AuthenticationFailed("malformed SCRAM message (no proof)")
        attributes = _attributes(without_proof)
        expected_binding = _b64(self._gs2_header.encode("utf-8"))
        if attributes.get("c") != expected_binding:
            raise AuthenticationFailed("SCRAM channel binding check failed")
        if not hmac.compare_digest(attributes.get("r", "").encode(), self._nonce.encode()):
            raise AuthenticationFailed("SCRAM nonce mismatch")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise AuthenticationFailed("malformed SCRAM proof") from None
        auth_message = ",".join([self._client_first_bare, self._server_first,
                                 without_proof]).encode("utf-8")
        signature = _hmac(self.verifier.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationFailed("malformed SCRAM proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        ok = hmac.compare_digest(hashlib.sha256(client_key).digest(), self.verifier.stored_key)
        if not ok or not self.real:
            raise AuthenticationFailed("wrong password")
        server_signature = _hmac(self.verifier.server_key, auth_message)
        return f"v={_b64(server_signature)}".encode("ascii")


def _attributes(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise AuthenticationFailed("malformed SCRAM attribute")
        out.setdefault(part[0], part[2:])
    return out
