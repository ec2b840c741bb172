"""A throw-away PostgreSQL cluster for tests and benchmarks: Debian's ``postgresql`` binaries
(``initdb``, ``pg_ctl``), a data folder under a temporary folder, a free TCP port on
127.0.0.1, and the sample data loaded through DuckDB and ``COPY``.

    >>> with throwaway_cluster(tmp_path) as cluster:
    ...     cluster.load_parquet_folder(sample_folder)
    ...     cluster.grant_reader(["people", "visits"])
    ...     dpsql.Database(cluster.url(READER), metadata)

PostgreSQL refuses to run as root: when the tests run as root (CI does), the cluster runs as
the ``postgres`` user that Debian's package creates, through ``runuser``. A missing server
binary raises (the tests fail, they do not skip).
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb

READER = "dpsql_reader"  # the role dpsql connects as: SELECT on the declared tables only
OWNER = "dpsql_owner"  # owns the tables (a superuser of the throw-away cluster)


def pg_bin(name: str) -> str:
    """The path of a PostgreSQL server binary (Debian keeps them out of PATH)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"PostgreSQL's {name} is not installed: apt-get install postgresql")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Cluster:
    folder: Path
    port: int
    dbname: str = "dpsql"

    def url(self, user: str = OWNER) -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{self.dbname}"

    def database(self, name: str) -> Cluster:
        """The same cluster seen through a new, empty database ``name`` (one per test data
        set, so that modules loading tables of the same names do not clash)."""
        with _connect(self.url()) as con:
            con.execute(f'CREATE DATABASE "{name}"')
        return dataclasses.replace(self, dbname=name)

    def execute(self, *statements: str) -> None:
        import psycopg  # a test dependency; the engine itself imports it lazily too

        with psycopg.connect(self.url(), autocommit=True) as con:
            for statement in statements:
                con.execute(statement)

    def load_parquet_folder(self, folder: Path) -> list[str]:
        """Each ``*.parquet`` of ``folder`` as a table of the same name; returns the names."""
        names = []
        for file in sorted(folder.glob("*.parquet")):
            self.load_parquet(file, file.stem)
            names.append(file.stem)
        return names

    def load_parquet(self, file: Path, table: str) -> None:
        self.load_duckdb_query(f"SELECT * FROM read_parquet('{file}')", table)

    def load_duckdb_query(self, query: str, table: str,
                          con: duckdb.DuckDBPyConnection | None = None) -> None:
        """The result of a DuckDB query as a PostgreSQL table (types mapped, COPY'd as CSV)."""
        import psycopg

        own = con is None
        con = con or duckdb.connect()
        try:
            described = con.execute(f"DESCRIBE {query}").fetchall()
            columns = ", ".join(f'"{name}" {_pg_type(dtype)}' for name, dtype, *_ in described)
            with psycopg.connect(self.url(), autocommit=True) as pg:
                pg.execute(f'DROP TABLE IF EXISTS "{table}"')
                pg.execute(f'CREATE TABLE "{table}" ({columns})')
                csv = self.folder / f"{table}.csv"
                con.execute(f"COPY ({query}) TO '{csv}' (HEADER false)")
                with pg.cursor().copy(f'COPY "{table}" FROM STDIN (FORMAT csv)'
                                      ) as copy, csv.open("rb") as f:
                    while chunk := f.read(1 << 20):
                        copy.write(chunk)
                csv.unlink()
                pg.execute(f'ANALYZE "{table}"')
        finally:
            if own:
                con.close()

    def load_duckdb_file(self, path: Path, tables: Iterable[str] | None = None,
                         reader: str = READER) -> str:
        """Copy tables of a DuckDB file or Parquet folder (all by default) into the cluster,
        grant ``reader`` SELECT on them, and return the URL dpsql connects with."""
        if path.is_dir():
            names = self.load_parquet_folder(path)
        else:
            with duckdb.connect(str(path), read_only=True) as con:
                names = list(tables) if tables is not None else [
                    r[0] for r in con.execute("SHOW TABLES").fetchall()]
                for name in names:
                    self.load_duckdb_query(f'SELECT * FROM "{name}"', name, con)
        self.grant_reader(names, reader)
        return self.url(reader)

    def grant_reader(self, tables: Iterable[str], role: str = READER) -> None:
        """The read-only role of docs/engines.md: it can log in and SELECT these tables only."""
        # Roles are per cluster: a second database of the same cluster reuses the role.
        statements = [f"DO $$BEGIN CREATE ROLE {role} LOGIN; EXCEPTION WHEN duplicate_object "
                      "THEN NULL; END$$",
                      f"ALTER ROLE {role} SET default_transaction_read_only = on",
                      "REVOKE ALL ON SCHEMA public FROM PUBLIC",
                      f"GRANT USAGE ON SCHEMA public TO {role}"]
        statements += [f'GRANT SELECT ON "{t}" TO {role}' for t in tables]
        self.execute(*statements)


_TYPES = {"BIGINT": "bigint", "INTEGER": "integer", "SMALLINT": "smallint",
          "TINYINT": "smallint", "DOUBLE": "double precision", "FLOAT": "real",
          "VARCHAR": "text", "BOOLEAN": "boolean", "DATE": "date", "TIMESTAMP": "timestamp"}


def _pg_type(duck: str) -> str:
    if duck.startswith("DECIMAL"):
        return duck.replace("DECIMAL", "numeric")
    return _TYPES[duck]


@contextlib.contextmanager
def throwaway_cluster(folder: Path) -> Iterator[Cluster]:
    """A running cluster with its data under ``folder``, stopped on exit. As root, the
    cluster lives in a folder of its own under the system's temporary folder instead (owned by
    ``postgres``, which cannot enter pytest's root-only folders), removed on exit."""
    as_user: list[str] = []
    own: str | None = None
    if os.geteuid() == 0:  # PostgreSQL will not run as root
        own = tempfile.mkdtemp(prefix="dpsql-pg-")
        folder = Path(own)
        entry = pwd.getpwnam("postgres")
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        os.chmod(folder, 0o755)
        as_user = [shutil.which("runuser") or "/sbin/runuser", "-u", "postgres", "--"]
    data = folder / "pgdata"
    port = _free_port()
    log = folder / "server.log"
    _run([*as_user, pg_bin("initdb"), "-D", str(data), "-U", OWNER, "--auth=trust", "-E",
          "UTF8", "--locale=C"])
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    _run([*as_user, pg_bin("pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w",
          "start"])
    try:
        cluster = Cluster(folder, port)
        with _connect(cluster.url().rsplit("/", 1)[0] + "/postgres") as con:
            con.execute("CREATE DATABASE dpsql")
        yield cluster
    finally:
        subprocess.run([*as_user, pg_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       check=False, capture_output=True)
        if own is not None:
            shutil.rmtree(own, ignore_errors=True)


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip() or done.stdout}")


def _connect(url: str):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(url, autocommit=True)
