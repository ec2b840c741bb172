"""What many test modules share, in one place: the repository's paths, the sample data's
tables (read from its metadata, never listed by hand), message checks, the pgjdbc runner and
an asyncpg session.

Fixtures live in ``tests/conftest.py`` (``kit``, ``make_db``, ``md``, ``served``,
``no_dpsql_env``); the server sandbox in :mod:`tests.support.sandbox`; the throw-away
PostgreSQL cluster in :mod:`tests.support.pgcluster`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from dpsql.database import sample_paths

#: The repository's root (the tests run this checkout's dpsql, see the root conftest.py).
REPO = Path(__file__).resolve().parents[2]
SAMPLE, SAMPLE_METADATA = sample_paths()
#: The sample data's tables, in the order its metadata declares them.
SAMPLE_TABLES: tuple[str, ...] = tuple(tomllib.loads(SAMPLE_METADATA.read_text())["tables"])
#: pgjdbc, from Debian's libpostgresql-jdbc-java (scripts/test installs it).
PGJDBC = Path("/usr/share/java/postgresql.jar")


def sample_tables_toml() -> str:
    """The sample metadata's table declarations, without its [budget] and [analysts]."""
    out, skip = [], False
    for line in SAMPLE_METADATA.read_text().splitlines():
        if line.strip().startswith("["):
            skip = line.strip().startswith(("[budget]", "[analysts"))
        if not skip:
            out.append(line)
    return "\n".join(out) + "\n"


def assert_names(message: str, *parts: str) -> None:
    """A refusal's message names every one of ``parts`` (the file, table, column, remedy)."""
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"


def compile_java(name: str, source: str) -> Path:
    """The folder holding ``name``.class, compiled from ``source`` against pgjdbc. Kept in
    the user's cache folder under the hash of the source, the JDK and pgjdbc, so javac runs
    once per machine, not once per run (a second process finding it there reuses it)."""
    javac = shutil.which("javac")
    assert javac and PGJDBC.exists(), "the JDK and pgjdbc are installed by scripts/test"
    key = hashlib.sha256("\0".join([source, os.path.realpath(javac), str(
        PGJDBC.resolve()), str(PGJDBC.stat().st_size)]).encode()).hexdigest()[:24]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dpsql-tests"
    folder = cache / "java" / f"{name}-{key}"
    if (folder / f"{name}.class").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=folder.parent))
    (work / f"{name}.java").write_text(source, encoding="utf-8")
    subprocess.run([javac, "-cp", str(PGJDBC), f"{name}.java"], cwd=work, check=True,
                   capture_output=True, timeout=120)
    try:
        work.rename(folder)  # atomic: a concurrent compilation's folder stays whole
    except OSError:  # another process got there first
        shutil.rmtree(work, ignore_errors=True)
    return folder


def run_java(main_class: str, source: str, port: int, password: str, utc: bool = False
             ) -> str:
    """Run ``source`` (the class ``main_class``, compiled once: :func:`compile_java`) with a
    JDBC URL to ``dpsql serve`` on ``port``, user alice and ``password`` as its arguments; its
    standard output. ``utc`` runs the JVM in UTC."""
    java = shutil.which("java")
    assert java, "the JDK is installed by scripts/test"
    classes = compile_java(main_class, source)
    out = subprocess.run(
        [java, *(["-Duser.timezone=UTC"] if utc else []), "-cp", f"{PGJDBC}:{classes}",
         main_class, f"jdbc:postgresql://127.0.0.1:{port}/dpsql", "alice", password],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def run_asyncpg(port: int, password: str, work: Any, timeout: float = 20) -> Any:
    """``await work(connection)`` on a fresh asyncpg connection to the dpsql server on
    ``port`` as alice, all of it under ``timeout`` seconds."""
    import asyncio

    import asyncpg

    async def session() -> Any:
        connection = await asyncpg.connect(host="127.0.0.1", port=port, user="alice",
                                           password=password, database="dpsql")
        try:
            return await work(connection)
        finally:
            await connection.close()

    return asyncio.run(asyncio.wait_for(session(), timeout))
