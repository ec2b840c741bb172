"""Session settings: what ``SET``, ``SHOW``, ``RESET`` and ParameterStatus see.

dpsql's own settings are ``dpsql.epsilon``, ``dpsql.delta`` and ``dpsql.mechanism`` (the privacy
parameters of each following query of the session; checked with the library's own limits),
``dpsql.max_rows`` and ``dpsql.max_groups`` (its contribution bounds k and g, a whole number or
DEFAULT: the metadata's; the owner's caps are checked when a query runs,
:mod:`dpsql.metadata.contribution`), ``dpsql.retention`` (OFF, or an epsilon at which each
following query also estimates, charged, the share of a unit's rows its bounds keep, sent as a
NOTICE: :mod:`dpsql.execution.retention`), ``dpsql.caveats`` (ON, the default, or OFF: whether an
answer sends the NOTICEs that say when it is not worth reading, :mod:`dpsql.execution.caveats`),
and the read-only ``dpsql.analyst``. Other names are
stored and shown back, so that clients that set ``extra_float_digits``, ``application_name``,
``search_path``... work; only the ones that change what is sent are interpreted
(``client_encoding`` must be UTF8, ``DateStyle`` must start with ISO, ``statement_timeout``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dpsql.errors import InvalidPrivacyParameter
from dpsql.metadata.contribution import ContributionBounds
from dpsql.privacy.mechanisms import WELL_FORMED, validate_privacy_parameters

SERVER_VERSION = "16.4"
SERVER_VERSION_NUM = "160004"

# Sent in ParameterStatus at startup and whenever they change (PostgreSQL's GUC_REPORT set).
REPORTED = ("application_name", "client_encoding", "DateStyle", "default_transaction_read_only",
            "in_hot_standby", "integer_datetimes", "IntervalStyle", "is_superuser",
            "scram_iterations", "server_encoding", "server_version", "session_authorization",
            "standard_conforming_strings", "TimeZone")
CANONICAL = {name.lower(): name for name in REPORTED}
READ_ONLY = {"server_version", "server_version_num", "server_encoding", "integer_datetimes",
             "is_superuser", "session_authorization", "in_hot_standby", "max_identifier_length",
             "block_size", "lc_collate", "lc_ctype", "dpsql.analyst", "dpsql.version",
             "scram_iterations", "max_index_keys", "standard_conforming_strings"}
DPSQL = ("dpsql.epsilon", "dpsql.delta", "dpsql.mechanism", "dpsql.analyst", "dpsql.version",
         "dpsql.budget", "dpsql.max_rows", "dpsql.max_groups", "dpsql.retention",
         "dpsql.caveats")
#: dpsql.max_rows and dpsql.max_groups when the session has not set them: the metadata's.
DEFAULT_BOUND = "default"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?")


class SettingError(Exception):
    def __init__(self, message: str, sqlstate: str = "22023") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def defaults(user: str, epsilon: float, delta: float, mechanism: str,
             statement_timeout_ms: int, version: str) -> dict[str, str]:
    return {
        "server_version": SERVER_VERSION, "server_version_num": SERVER_VERSION_NUM,
        "server_encoding": "UTF8", "client_encoding": "UTF8", "datestyle": "ISO, MDY",
        "intervalstyle": "postgres", "integer_datetimes": "on",
        "standard_conforming_strings": "on", "timezone": "UTC", "application_name": "",
        "is_superuser": "off", "session_authorization": user,
        "default_transaction_read_only": "on", "transaction_read_only": "on",
        "in_hot_standby": "off", "transaction_isolation": "read committed",
        "default_transaction_isolation": "read committed", "search_path": '"$user", public',
        "extra_float_digits": "1", "statement_timeout": str(statement_timeout_ms),
        "max_identifier_length": "63", "lc_collate": "C", "lc_ctype": "C",
        "lc_messages": "C", "lc_monetary": "C", "lc_numeric": "C", "lc_time": "C",
        "block_size": "8192", "max_index_keys": "32", "scram_iterations": "4096",
        "bytea_output": "hex", "client_min_messages": "notice", "datestyle_order": "MDY",
        "dpsql.epsilon": _number(epsilon), "dpsql.delta": _number(delta),
        "dpsql.mechanism": mechanism, "dpsql.analyst": user, "dpsql.version": version,
        "dpsql.max_rows": DEFAULT_BOUND, "dpsql.max_groups": DEFAULT_BOUND,
        "dpsql.retention": "off", "dpsql.caveats": "on",
    }


def retention(settings: dict[str, str]) -> float | None:
    """The session's retention epsilon (SET dpsql.retention); None: off."""
    value = settings.get("dpsql.retention", "off")
    return None if value == "off" else float(value)


def caveats(settings: dict[str, str]) -> bool:
    """Whether the session's answers carry their caveats (SET dpsql.caveats)."""
    return settings.get("dpsql.caveats", "on") != "off"


def _number(value: float) -> str:
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def display_name(name: str) -> str:
    return CANONICAL.get(name, name)


@dataclass
class SetCommand:
    name: str | None  # None: a SET that changes nothing here (SET TRANSACTION ...)
    value: str | None  # None: back to the default (SET x TO DEFAULT, RESET x)
    local: bool = False


_SET = re.compile(r"SET\s+(?:(SESSION|LOCAL)\s+)?(?P<rest>.*)", re.I | re.S)
_ASSIGN = re.compile(r"(?P<name>[A-Za-z_][\w$.]*)\s*(?:=|\s+TO\s+|\s+TO$)\s*(?P<value>.*)",
                     re.I | re.S)


def parse_set(text: str, user: str | None = None) -> SetCommand:
    """``SET [SESSION|LOCAL] name {TO|=} value[, ...]`` and its special forms. ``SET ROLE``
    naming the session's own analyst ``user`` changes nothing (dbt-postgres sends it for a
    profile's ``role``); any other role is refused."""
    m = _SET.fullmatch(text.strip().rstrip(";").strip())
    if not m:
        raise SettingError("syntax error in SET", "42601")
    local = (m.group(1) or "").upper() == "LOCAL"
    rest = m.group("rest").strip()
    upper = rest.upper()
    if upper.startswith(("TRANSACTION", "SESSION CHARACTERISTICS", "CHARACTERISTICS")):
        return SetCommand(None, None)
    if upper.startswith("TIME ZONE"):
        value = rest[len("TIME ZONE"):].strip()
        return SetCommand("timezone", None if value.upper() in ("DEFAULT", "LOCAL")
                          else _value(value), local)
    if upper.startswith("NAMES"):
        return SetCommand("client_encoding", _value(rest[5:].strip()), local)
    if upper.startswith("ROLE") and user is not None and _value(rest[4:].strip()) == user:
        return SetCommand(None, None)
    if upper.startswith(("ROLE", "SESSION AUTHORIZATION", "AUTHORIZATION")):
        raise SettingError("permission denied: the session's analyst cannot be changed; "
                           "connect as another analyst instead", "42501")
    a = _ASSIGN.fullmatch(rest)
    if not a:
        raise SettingError(f"syntax error in SET: {text.strip()[:80]}", "42601")
    name = a.group("name").lower()
    value = a.group("value").strip()
    if value.upper() == "DEFAULT":
        return SetCommand(name, None, local)
    return SetCommand(name, _value(value), local)


def _value(text: str) -> str:
    """A SET value list: quoted strings, identifiers and numbers, joined with ', '."""
    items, i, n = [], 0, len(text)
    current = []
    while i < n:
        c = text[i]
        if c == "'":
            j = i + 1
            buf = []
            while j < n:
                if text[j] == "'" and j + 1 < n and text[j + 1] == "'":
                    buf.append("'")
                    j += 2
                elif text[j] == "'":
                    break
                else:
                    buf.append(text[j])
                    j += 1
            else:
                raise SettingError("unterminated quoted string in SET", "42601")
            current.append("".join(buf))
            i = j + 1
        elif c == '"':
            j = text.find('"', i + 1)
            if j < 0:
                raise SettingError("unterminated quoted identifier in SET", "42601")
            current.append(text[i + 1:j])
            i = j + 1
        elif c == ",":
            items.append("".join(current).strip())
            current = []
            i += 1
        else:
            current.append(c)
            i += 1
    items.append("".join(current).strip())
    return ", ".join(items)


def check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise SettingError(f"invalid configuration parameter name \"{name}\"", "42602")


def normalise(name: str, value: str, current: dict[str, str]) -> str:
    """The stored form of ``name = value``, or a SettingError."""
    check_name(name)
    if name in READ_ONLY:
        raise SettingError(f"parameter \"{display_name(name)}\" cannot be changed", "55P02")
    if name.startswith("dpsql.") and name not in DPSQL:
        raise SettingError(f"unrecognized configuration parameter \"{name}\"; dpsql's are "
                           "dpsql.epsilon, dpsql.delta, dpsql.mechanism, dpsql.max_rows, "
                           "dpsql.max_groups, dpsql.retention and dpsql.caveats", "42704")
    if name == "dpsql.budget":
        raise SettingError("dpsql.ledger.budget is read-only: SHOW dpsql.budget", "55P02")
    if name == "client_encoding":
        # As PostgreSQL's clean_encoding_name: every non-alphanumeric character is ignored,
        # so asyncpg's quoted startup value 'utf-8' names UTF8 as it does for PostgreSQL.
        if re.sub(r"[^A-Za-z0-9]", "", value).upper() in ("UTF8", "UNICODE"):
            return "UTF8"
        raise SettingError(f"client encoding \"{value}\" is not supported: dpsql speaks UTF8 "
                           "only (set client_encoding to UTF8)", "22023")
    if name == "datestyle":
        parts = [p.strip().upper() for p in value.split(",") if p.strip()]
        if "ISO" not in parts:
            raise SettingError("DateStyle must be ISO (dpsql sends ISO dates)", "22023")
        order = next((p for p in parts if p in ("MDY", "DMY", "YMD", "US", "EUROPEAN")),
                     current.get("datestyle_order", "MDY"))
        order = {"US": "MDY", "EUROPEAN": "DMY"}.get(order, order)
        return f"ISO, {order}"
    if name == "statement_timeout":
        return str(parse_duration_ms(value))
    if name == "extra_float_digits":
        try:
            digits = int(value)
        except ValueError:
            raise SettingError("extra_float_digits must be an integer", "22023") from None
        if not -15 <= digits <= 3:
            raise SettingError("extra_float_digits must be between -15 and 3", "22023")
        return str(digits)
    if name == "dpsql.caveats":
        flag = value.strip().lower()
        if flag not in ("on", "off", "true", "false", "1", "0"):
            raise SettingError(f"dpsql.caveats must be ON or OFF, not {value!r}", "22023")
        return "on" if flag in ("on", "true", "1") else "off"
    if name == "dpsql.retention" and value.strip().lower() in ("off", "false", "0", ""):
        return "off"
    if name in ("dpsql.epsilon", "dpsql.delta", "dpsql.retention"):
        try:
            number = float(value)
        except ValueError:
            raise SettingError(f"{name} must be a number, not {value!r}", "22023") from None
        try:
            if name != "dpsql.delta":
                validate_privacy_parameters(number, 0.0, "laplace", WELL_FORMED)
            else:
                validate_privacy_parameters(1.0, number, "laplace", WELL_FORMED)
        except InvalidPrivacyParameter as e:
            raise SettingError(str(e), e.sqlstate) from None
        return _number(number)
    if name in ("dpsql.max_rows", "dpsql.max_groups"):
        text = value.strip().lower()
        if text in (DEFAULT_BOUND, ""):
            return DEFAULT_BOUND
        if not (text.isascii() and text.isdigit()) or int(text) < 1:
            raise SettingError(f"{name} (the rows or groups one privacy unit may contribute to "
                               f"a query) must be a whole number >= 1 or DEFAULT, not {value!r}",
                               "22023")
        return str(int(text))
    if name == "dpsql.mechanism":
        mechanism = value.strip().lower()
        try:
            validate_privacy_parameters(1.0, 1e-6, mechanism)
        except InvalidPrivacyParameter as e:
            raise SettingError(str(e), e.sqlstate) from None
        return mechanism
    return value


_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(value: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", value.lower())
    if not m or (m.group(2) and m.group(2) not in _UNITS):
        raise SettingError(f"invalid value for a duration: \"{value}\" (use e.g. 5000, '5s', "
                           "'100ms')", "22023")
    return int(float(m.group(1)) * _UNITS[m.group(2) or "ms"])


def session_bounds(settings: dict[str, str]) -> ContributionBounds | None:
    """The session's contribution bounds (SET dpsql.max_rows / dpsql.max_groups)."""
    rows, groups = (settings.get(f"dpsql.{n}", DEFAULT_BOUND) for n in ("max_rows", "max_groups"))
    if rows == DEFAULT_BOUND and groups == DEFAULT_BOUND:
        return None
    return ContributionBounds(None if rows == DEFAULT_BOUND else int(rows),
                              None if groups == DEFAULT_BOUND else int(groups))
