"""A folder of CSV/Parquet files as a DuckDB database: a private catalog of views over its
files, opened read-only and locked (:func:`dpsql.engines.locked.read_only`), shared by every
engine of this process on the same files.

Writing the catalog (a new database file, one view per file, a checkpoint on close) and
reading its schema back cost about 0.1 to 0.2 s on a 2-core machine: more than a whole
query on the sample data. A folder that a process opens again (the CLI's REPL, a DB-API
application that connects per request, the server, a test suite) reuses the catalog it
wrote: each engine gets a connection of its own (:meth:`duckdb.DuckDBPyConnection.cursor`:
its own interrupt, its own transaction) on the one locked instance.

A catalog is keyed by the folder and, for each file, its name, inode, size, and modification
and change times: a file added, removed, rewritten or replaced (its schema may have changed)
makes a new catalog. The change time is the kernel's, which no copy tool preserves (``cp -p``
and ``rsync -a`` keep the modification time and often the size). The
last :data:`IDLE_KEPT` catalogs no engine uses stay open; older ones are closed and their
files deleted, and every one at exit.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from dpsql.engines import locked
from dpsql.errors import EngineError

READERS = {".parquet": "read_parquet", ".csv": "read_csv_auto", ".tsv": "read_csv_auto",
           ".csv.gz": "read_csv_auto"}
#: Catalogs kept open while no engine uses them (each a small DuckDB instance of views).
IDLE_KEPT = 4

Key = tuple[str, tuple[tuple[str, str, int, int, int, int], ...]]


@dataclass
class Catalog:
    """One folder's locked, read-only catalog of views, the engines using it, and its
    schema (table -> column -> physical type, read once)."""

    key: Key
    connection: duckdb.DuckDBPyConnection
    folder: str  # the temporary folder holding the catalog's database file
    schema: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    users: int = 0

    def close(self) -> None:
        self.connection.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_lock = threading.Lock()
_catalogs: dict[Key, Catalog] = {}
_idle: OrderedDict[Key, None] = OrderedDict()  # least recently released first


def table_files(folder: Path) -> dict[str, Path]:
    """Table name -> file, for every CSV/Parquet file in ``folder`` (the name without its
    suffix)."""
    files = {}
    for file in sorted(folder.iterdir()):
        if file.is_file() and _suffix(file) in READERS:
            files[file.name[: -len(_suffix(file))]] = file
    return files


def acquire(folder: Path, **settings: object) -> Catalog:
    """The catalog of ``folder``'s files (new, or the one this process already wrote for
    the same files), counted as used until :func:`release`. ``settings`` go to the
    connection's config; every caller passes the same ones."""
    files = table_files(folder)
    if not files:
        raise EngineError(f"folder {folder} holds no .csv or .parquet files")
    key = _key(folder, files)
    with _lock:
        catalog = _catalogs.get(key)
        if catalog is None:
            catalog = _catalogs[key] = _write(folder, files, key, settings)
        _idle.pop(key, None)
        catalog.users += 1
        return catalog


def release(catalog: Catalog) -> None:
    """One engine stopped using ``catalog``; the oldest idle catalogs beyond
    :data:`IDLE_KEPT` are closed."""
    with _lock:
        catalog.users -= 1
        if catalog.users > 0:
            return
        _idle[catalog.key] = None
        while len(_idle) > IDLE_KEPT:
            oldest, _ = _idle.popitem(last=False)
            _catalogs.pop(oldest).close()


def _key(folder: Path, files: Mapping[str, Path]) -> Key:
    stats = []
    for name, file in files.items():
        stat = file.stat()
        stats.append((name, str(file.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns,
                      stat.st_ctime_ns))
    return str(folder.resolve()), tuple(stats)


def _write(folder: Path, files: Mapping[str, Path], key: Key, settings: Mapping[str, object]
           ) -> Catalog:
    private = tempfile.mkdtemp(prefix="dpsql-")
    try:
        path = Path(private) / "catalog.duckdb"
        with duckdb.connect(str(path)) as writer:
            writer.execute("BEGIN")  # one commit for every view
            for name, file in files.items():
                writer.execute(f'CREATE VIEW "{name}" AS SELECT * FROM '
                               f"{READERS[_suffix(file)]}('{_quote(str(file.resolve()))}')")
            writer.execute("COMMIT")
        connection = locked.read_only(path, folder.resolve(), **settings)
    except BaseException:
        shutil.rmtree(private, ignore_errors=True)
        raise
    return Catalog(key, connection, private)


@atexit.register
def _close_all() -> None:
    with _lock:
        for catalog in _catalogs.values():
            catalog.close()
        _catalogs.clear()
        _idle.clear()


def _suffix(file: Path) -> str:
    return "".join(file.suffixes[-2:]) if file.name.endswith(".csv.gz") else file.suffix.lower()


def _quote(text: str) -> str:
    return text.replace("'", "''")
