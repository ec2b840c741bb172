"""The Spark SQL engine: data that lives in a Spark cluster (or Databricks), or Parquet files
read by a local Spark session, answered without copying it.

A database argument names it (``dpsql.engines.url_scheme`` and ``open_engine``)::

    spark:local                      a local session on every core (local[*])
    spark:local[2]                   a local session on 2 cores
    spark://host:7077                a standalone cluster's master
    sc://host:15002                  a Spark Connect server (Spark 3.4+; Databricks Connect)

followed by ``?folder=PATH`` to read every ``*.parquet`` file (or folder of Parquet part
files) in PATH as a table named after it, as DuckDB's folder mode does; without it, the tables
of the session's catalog (``?database=NAME`` picks the catalog database). Spark Connect's own
``/;token=...`` parameters are passed through.

**What the engine does and does not.** It computes the exact per-group measurements of the
rewritten query (:mod:`dpsql.engines.spark.dialect` makes it Spark SQL with the same total
semantics) and nothing else. Spark has no read-only session: dpsql only ever runs the SELECTs
it generates (the checker is the wall; there is no path from the analyst's text to
``spark.sql``). In production the second wall is the cluster's: run a Spark Connect server
whose user may only SELECT the declared tables (Unity Catalog or Ranger grants), and point
dpsql at it with ``sc://``. Every session is created with ANSI mode on and the UTC time zone,
deliberately (see :mod:`dpsql.engines.spark.dialect`).

**Errors.** Analysis errors (before any row is read) quote the query only and are refusals at
plan time (:meth:`SparkEngine.generate` analyses the query before anything is charged); an
error while reading rows may quote a value, so the analyst gets no detail (the owner's log
does).

**The salt** of contribution bounding is the named parameter ``:dpsql_salt``
(``spark.sql(args=...)``, Spark 3.4+): it goes to the engine with the query and nowhere else.

**Time.** :meth:`SparkEngine.cancel_token` tags the calling thread's jobs (a job group on a
classic session, an operation tag on Spark Connect); the owner's deadline cancels them. An
answer that arrives after the deadline fired is dropped: the limit alone decides.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import duckdb
from sqlglot import exp

from dpsql.cache import LRU, REWRITTEN_CACHE_SIZE
from dpsql.engines.physical import public_select
from dpsql.engines.protocol import column_arrays
from dpsql.engines.spark.dialect import SALT_NAME, SparkDialect, spark_tree
from dpsql.engines.spark.footer import spark_types, struct_type
from dpsql.errors import EngineError, UnsupportedQuery

if TYPE_CHECKING:
    import numpy.typing as npt

    from dpsql.engines.protocol import CancelToken

#: Spark's types (``DataType.simpleString()``) as the DuckDB type names that the metadata
#: check and the rewrite's column reader know; anything else keeps its name (and is refused
#: by check_metadata unless declared text and stored as string).
_TYPES = {"tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER", "bigint": "BIGINT",
          "float": "FLOAT", "double": "DOUBLE", "string": "VARCHAR", "boolean": "BOOLEAN",
          "date": "DATE", "timestamp_ntz": "TIMESTAMP",
          # TIMESTAMP is Spark's local-time-zone timestamp: its date depends on the session
          # time zone, refused for dates as DuckDB's TIMESTAMPTZ is.
          "timestamp": "TIMESTAMP WITH TIME ZONE", "binary": "BLOB"}
_lock = threading.Lock()
_root: Any = None  # the process's one local SparkSession (one JVM), shared by engines
_tags = itertools.count()


def spark_type(simple: str) -> str:
    """A Spark type's DuckDB name: ``decimal(10,2)`` -> ``DECIMAL(10,2)``, ``int`` -> ..."""
    if simple.startswith("decimal"):
        return simple.upper()
    return _TYPES.get(simple, simple.upper())


def _parse(url: str) -> tuple[str, dict[str, str]]:
    """The master (or Connect URL) and dpsql's own options (folder, database)."""
    base, _, query = url.partition("?")
    options = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    unknown = set(options) - {"folder", "database"}
    if unknown:
        raise EngineError(f"unknown option(s) {', '.join(sorted(unknown))} in the Spark "
                          "database URL; dpsql reads folder= and database=")
    if base.startswith("spark:") and not base.startswith("spark://"):
        base = base[len("spark:"):]
    if base == "local":
        base = "local[*]"
    return base, options


def _session(master: str) -> Any:
    """A new SparkSession (its own temporary views and settings) on a shared context, or on
    a Spark Connect server for ``sc://``."""
    global _root
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise EngineError("the Spark engine needs PySpark (and a JDK for spark:// and "
                          "spark:local): pip install 'dpsql[spark]'") from None
    if master.startswith("sc://"):
        return _connect_session(SparkSession, master)
    with _lock:
        if _root is None:
            builder = SparkSession.builder.master(master).appName("dpsql").config(
                "spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            if master.startswith("local"):  # small local data: few shuffle partitions
                builder = builder.config("spark.sql.shuffle.partitions", "4")
            try:
                _root = builder.getOrCreate()
            except Exception as e:
                raise EngineError(f"cannot start Spark ({master}): {e}; the Spark engine "
                                  "needs a JDK (17+ for Spark 4) on PATH or JAVA_HOME") from None
            _root.sparkContext.setLogLevel("ERROR")
        running = _root.sparkContext.master
        if running != master:  # one SparkContext per process (one JVM)
            raise EngineError(f"this process already runs Spark on {running}; it cannot also "
                              f"open {master} (use sc:// for a second cluster)")
        return _root.newSession()


def _connect_session(builder: Any, url: str) -> Any:
    """A new session on a Spark Connect server. PySpark's Connect client needs packages of its
    own (pyspark's ``connect`` extra); a missing one raises PySpark's ImportError here."""
    # PySpark's remote builder sets SPARK_CONNECT_MODE_ENABLED for the whole process, which
    # makes a classic session's functions dispatch to Connect's classes and fail
    # ([NOT_EXPECTED_TYPE] ... got Column): dpsql may hold both, so the flag is restored.
    was_set = "SPARK_CONNECT_MODE_ENABLED" in os.environ
    try:
        return builder.builder.remote(url).create()
    except ImportError as e:
        raise EngineError(f"Spark Connect (sc://) needs PySpark's Connect client packages "
                          f"({str(e).splitlines()[0]}): pip install 'dpsql[spark-connect]'"
                          ) from None
    except Exception as e:
        raise EngineError(f"cannot open a Spark Connect session on {url.split(';')[0]}: "
                          f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    finally:
        if not was_set:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


#: A cancel that found nothing running yet is repeated this often until the query has ended
#: (for at most CANCEL_FOR seconds): see :class:`_TagCancel`.
CANCEL_EVERY, CANCEL_FOR = 0.1, 600.0


class _TagCancel:
    """Cancels the jobs the calling thread runs under its tag: a job group on a classic
    session (``setJobGroup`` / ``cancelJobGroup``, which interrupt running tasks; its
    ``interruptTag`` does not reach SQL jobs), an operation tag on Spark Connect
    (``addTag`` / ``interruptTag``).

    Both cancel only what runs at that moment: a deadline that fires while Spark still plans
    the query (seconds on a busy driver) would find no job, and the job submitted next would
    run to its end. So after the first cancel the token repeats it every
    :data:`CANCEL_EVERY` seconds, on a thread of its own, until :meth:`stop` (the execution
    has ended; the next execution has a tag of its own, which no repeat can reach)."""

    def __init__(self, session: Any, tag: str) -> None:
        self.session, self.tag, self.fired, self.started = session, tag, False, False
        self.finished = threading.Event()
        # Classic sessions have a SparkContext; Spark Connect sessions do not.
        self.context = None if _is_connect(session) else session.sparkContext

    def start(self) -> None:
        self.started = True
        if self.context is not None:
            self.context.setJobGroup(self.tag, "dpsql query", interruptOnCancel=True)
        else:
            self.session.addTag(self.tag)

    def stop(self) -> None:
        self.finished.set()
        if self.context is None and self.started:
            self.session.removeTag(self.tag)

    def cancel(self) -> None:
        self.fired = True
        self._send()
        threading.Thread(target=self._repeat, daemon=True, name="dpsql-spark-cancel").start()

    def _send(self) -> None:
        if self.context is not None:
            self.context.cancelJobGroup(self.tag)
        else:
            self.session.interruptTag(self.tag)

    def _repeat(self) -> None:
        for _ in range(int(CANCEL_FOR / CANCEL_EVERY)):
            if self.finished.wait(CANCEL_EVERY):
                return
            try:
                self._send()
            except Exception:  # the session was closed meanwhile: nothing runs on it
                return


def _is_connect(session: Any) -> bool:
    return type(session).__module__.startswith("pyspark.sql.connect")


class SparkEngine:
    """A Spark session seen as an :class:`~dpsql.engines.Engine` (see the module docstring)."""

    name = "spark"
    dialect = SparkDialect
    raises_on_float_overflow = False  # a double overflows to Infinity, even in ANSI mode

    def __init__(self, url: str) -> None:
        master, options = _parse(url)
        folder = options.get("folder")
        # The engine's identity (the scope of stored answers): no Connect token in it.
        self.location = str(Path(folder).resolve()) if folder else url.split(";")[0]
        self._session = _session(master)
        try:
            for key, value in (("spark.sql.ansi.enabled", "true"),
                               ("spark.sql.session.timeZone", "UTC")):
                self._session.conf.set(key, value)
            if folder:
                self._register(Path(folder))
            elif "database" in options:
                self._session.catalog.setCurrentDatabase(options["database"])
            self.schema = self._schema()
        except EngineError:
            self.close()
            raise
        except Exception as e:
            self.close()
            raise EngineError(f"cannot open the Spark database {self.location}: {e}") from None
        self.rewritten: LRU[int, tuple[object, str, bool]] = LRU(REWRITTEN_CACHE_SIZE)
        self._local = threading.local()

    @property
    def over_connect(self) -> bool:
        """Whether the session is a Spark Connect client (its files and jobs the server's)."""
        return _is_connect(self._session)

    def _register(self, folder: Path) -> None:
        if not folder.is_dir():
            raise EngineError(f"folder {folder} does not exist; pass a folder of Parquet files")
        found = False
        for item in sorted(folder.iterdir()):
            name = item.name[: -len(".parquet")] if item.name.endswith(".parquet") else \
                item.name
            if item.suffix == ".parquet" or (item.is_dir() and any(item.glob("*.parquet"))):
                self._read(item.resolve()).createOrReplaceTempView(name)
                found = True
        if not found:
            raise EngineError(f"folder {folder} holds no .parquet files or folders")

    def _read(self, path: Path) -> Any:
        """The DataFrame of a Parquet file or folder. A classic session's file is given its
        schema from its footer (:mod:`dpsql.engines.spark.footer`: the schema Spark would
        infer, without inferring's job, seconds on cold executors); through Connect the path
        is the server's, and Spark infers."""
        reader = self._session.read
        if path.is_file() and not self.over_connect:
            try:
                columns = spark_types(path)
            except duckdb.Error:  # not a Parquet file DuckDB reads: Spark says what is wrong
                columns = None
            schema = None if columns is None else struct_type(self._session, columns)
            if schema is not None:
                reader = reader.schema(schema)
        return reader.parquet(str(path))

    def tables(self) -> dict[str, list[tuple[str, str]]]:
        """Table -> [(column, type as DuckDB names it)], from the DataFrame schemas."""
        out: dict[str, list[tuple[str, str]]] = {}
        for table in self._session.catalog.listTables():
            fields = self._session.table(f"`{table.name}`").schema.fields
            out[table.name] = [(f.name, spark_type(f.dataType.simpleString())) for f in fields]
        return out

    def _schema(self) -> dict[str, dict[str, str]]:
        return {table.lower(): {c.lower(): t for c, t in columns}
                for table, columns in self.tables().items()}

    def compile(self, tree: exp.Expression, salted: bool,
                empty_tables: Sequence[tuple[str, exp.Select]]) -> str:
        """The engine's SQL for the rewritten tree (:meth:`generate`: Spark analyses it
        without data, so ``empty_tables`` goes unread)."""
        assert isinstance(tree, exp.Select)  # the rewrite builds one SELECT
        return self.generate(tree)

    def generate(self, tree: exp.Select) -> str:
        """The rewritten query in Spark SQL, analysed by Spark (no data read): a query Spark
        cannot analyse is refused (:class:`~dpsql.errors.UnsupportedQuery`) before anything
        is charged. Analysed twice: once to find which SUMs add integers (their output type),
        then the final text, summing those exactly."""
        first = spark_tree(tree).sql(dialect=SparkDialect)
        integral = {f.name for f in self._analyse(first).fields
                    if f.dataType.simpleString() in ("tinyint", "smallint", "int", "bigint")}
        sql = spark_tree(tree, integral).sql(dialect=SparkDialect)
        self._analyse(sql)
        return sql

    def _analyse(self, sql: str) -> Any:
        try:
            return self._session.sql(sql, args={SALT_NAME: 0}).schema
        except Exception as e:
            raise UnsupportedQuery(f"the engine cannot run this query: "
                                   f"{str(e).splitlines()[0]}; check the types of the "
                                   "expressions it computes") from None

    def cancel_token(self) -> CancelToken:
        token = _TagCancel(self._session, f"dpsql-{next(_tags)}")
        self._local.token = token
        return token

    def read_public(self, table: str, columns: Mapping[str, str]
                    ) -> list[tuple[object, ...]]:
        """Every row of a public table, as the declared types (:meth:`dpsql.engines.Engine.
        read_public`), in Spark's SQL: the same total casts as the private queries'."""
        select = public_select(table, columns, self.schema.get(table.lower(), {}))
        return self.execute(spark_tree(select).sql(dialect=SparkDialect))[1]

    def execute(self, sql: str, parameters: Sequence[object] = ()
                ) -> tuple[list[str], list[tuple[object, ...]]]:
        """Run one rewritten query (its parameter is the salt) and return its rows, with
        DECIMAL(38, 0) sums as Python ints."""
        token: _TagCancel | None = getattr(self._local, "token", None)
        if token is not None and token.fired:
            token.stop()
            self._local.token = None
            raise EngineError("the query was interrupted", interrupted=True)
        args = {SALT_NAME: parameters[0]} if parameters else None
        if token is not None:
            token.start()
        try:
            frame = self._session.sql(sql, args=args)
            names = list(frame.columns)
            rows = [tuple(_value(v) for v in row) for row in frame.collect()]
        except Exception as e:
            interrupted = token is not None and token.fired
            # The message of an error raised while reading rows may quote a private value
            # (ANSI errors do): the analyst gets no detail, the owner's log does.
            raise EngineError("the engine failed on the rewritten query (a dpsql bug: the "
                              "data owner's log has the details)" if not interrupted else
                              "the query was interrupted", owner_detail=str(e),
                              interrupted=interrupted) from None
        finally:
            if token is not None:
                token.stop()
                self._local.token = None  # a token serves one execution
        if token is not None and token.fired:  # the deadline passed as the last job ended
            raise EngineError("the query was interrupted", interrupted=True)
        return names, rows

    def execute_arrays(self, sql: str, parameters: Sequence[object] = ()
                       ) -> dict[str, npt.NDArray[Any]]:
        """:meth:`execute`, one array per column (:meth:`dpsql.engines.Engine.execute_arrays`)."""
        return column_arrays(*self.execute(sql, parameters))

    def fixed(self, table: str) -> bool:
        """Never: other sessions may change the data at any time (:meth:`dpsql.engines.
        Engine.fixed`)."""
        return False

    def close(self) -> None:
        """Drops this engine's views; the shared local context lives on for the process (a
        JVM starts in seconds; later engines reuse it). A Spark Connect session is released
        on the server and its client closed (an open client's exit handler calls the server,
        and retries for minutes when it is gone)."""
        try:
            if self.over_connect:
                self._session.stop()
                return
            for table in self._session.catalog.listTables():
                if table.isTemporary:
                    self._session.catalog.dropTempView(table.name)
        except Exception:
            pass


def _value(value: object) -> object:
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    return value

