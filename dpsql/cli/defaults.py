"""Where the command line finds the database and the metadata when ``-d``/``-m`` are not passed.

Each of the two is looked up on its own, first found wins:

1. the flag (``--database``/``-d``, ``--metadata``/``-m``);
2. the environment: ``DPSQL_DATABASE``, ``DPSQL_METADATA``;
3. a config file: ``$DPSQL_CONFIG`` if set (empty: none), else ``./dpsql.toml``, else
   ``$XDG_CONFIG_HOME/dpsql/config.toml`` (``~/.config/dpsql/config.toml``), holding
   ``database = "..."`` and ``metadata = "..."`` (relative paths are relative to the file);
4. neither: the bundled sample data.

A database and a metadata file go together: when one of them is found and not the other, the
command refuses (naming where the one came from) rather than pair it with the sample's.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import click

#: The config file's keys: the only ones it may hold.
KEYS = ("database", "metadata")


def config_file() -> Path | None:
    """The config file in use, if any (see the module docstring)."""
    explicit = os.environ.get("DPSQL_CONFIG")
    if explicit is not None:
        return Path(explicit).expanduser() if explicit else None
    home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    for path in (Path("dpsql.toml"), home / "dpsql" / "config.toml"):
        if path.is_file():
            return path
    return None


def read_config(path: Path) -> dict[str, str]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise click.UsageError(f"cannot read the config file {path}: {e}") from None
    unknown = sorted(set(data) - set(KEYS))
    if unknown or not all(isinstance(v, str) for v in data.values()):
        extra = f"; not {', '.join(unknown)}" if unknown else ""
        raise click.UsageError(f"the config file {path} may hold only database = \"...\" and "
                               f"metadata = \"...\" (strings){extra}")
    return {k: _relative_to(path, k, v) for k, v in data.items()}


def _relative_to(config: Path, key: str, value: str) -> str:
    """A relative path in the config file is relative to the file; a URL stays as written."""
    if key == "database" and ("://" in value or value.startswith("spark:")):
        return value  # postgresql://..., sc://..., spark:local?folder=...
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else config.resolve().parent / path)


def sources(database: str | None, metadata: Path | None) -> tuple[str | None, Path | None]:
    """The database and the metadata to open: both, or neither for the sample data."""
    found: dict[str, tuple[str, str]] = {}  # key -> (value, where it came from)
    given = {"database": database, "metadata": None if metadata is None else str(metadata)}
    path = config_file()
    config = read_config(path) if path is not None else {}
    for key in KEYS:
        flag, env = given[key], os.environ.get(f"DPSQL_{key.upper()}")
        if flag is not None:
            found[key] = (flag, f"--{key}")
        elif env:
            found[key] = (env, f"DPSQL_{key.upper()}")
        elif key in config:
            found[key] = (config[key], str(path))
    if len(found) == 1:
        (key, (_, where)), = found.items()
        other = "metadata" if key == "database" else "database"
        raise click.UsageError(f"the {key} comes from {where} but no {other} was given: pass "
                               "both --database and --metadata (or set DPSQL_DATABASE and "
                               "DPSQL_METADATA, or both in a config file), or neither for the "
                               "bundled sample data")
    if not found:
        return None, None
    return found["database"][0], Path(found["metadata"][0])


def metadata_source(metadata: Path | None) -> Path | None:
    """The metadata alone (budget, analyst): flag, environment, config file, else None."""
    if metadata is not None:
        return metadata
    env = os.environ.get("DPSQL_METADATA")
    if env:
        return Path(env)
    path = config_file()
    value = read_config(path).get("metadata") if path is not None else None
    return Path(value) if value is not None else None
