"""A throw-away standalone Spark cluster and Spark Connect server for tests and benchmarks, on
loopback, from pyspark's own launch scripts (the pip wheel ships ``sbin/spark-daemon.sh`` and
``sbin/start-connect-server.sh``, and the Connect server's jar in ``jars/``):

* a master and one worker of two cores (``spark-daemon.sh start ...Master`` / ``...Worker``,
  as Spark's own ``start-master.sh`` / ``start-worker.sh`` do; the wheel leaves those two out);
* the classic application (this process's driver) runs two executors of one core and 512 MB on
  that worker, each in its own JVM: the shuffle of every query crosses processes, as on a real
  cluster;
* a Spark Connect server (``start-connect-server.sh``), a process of its own that runs its
  tasks in its own JVM (``local[2]``): a second set of executors would cost a third of the
  tests' JVM time and prove nothing the classic application does not.

    >>> with standalone_cluster(tmp_path) as cluster:
    ...     dpsql.Database(cluster.url(folder), metadata)          # spark://127.0.0.1:<port>
    ...     dpsql.Database(cluster.connect_url(folder), metadata)  # sc://127.0.0.1:<port>

Ports are free ones (several runs may share a machine); the applications' settings are the
cluster's ``spark-defaults.conf`` (``SPARK_CONF_DIR``), which this process's own driver reads
too, as a user's would. A missing JDK or PySpark raises (the tests fail, they do not skip).
Every process started here is stopped on exit, by the pid files of ``spark-daemon.sh``; the
executors, children of the workers, are stopped by their pids too.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
CONNECT = "org.apache.spark.sql.connect.service.SparkConnectServer"
WORKERS = 1
#: Each worker's memory for its executors, and the Connect server's JVM (its driver runs its
#: tasks): the tests' small data; a benchmark at scale raises them (bench_spark.py).
WORKER_MEMORY, CONNECT_MEMORY = "1g", "600m"
#: Every JVM starts in seconds on an idle machine; a loaded 2-core machine has taken minutes.
STARTUP_SECONDS = 420.0


def spark_home() -> Path:
    """pyspark's install folder: its ``bin/``, ``sbin/`` and ``jars/`` are a Spark home."""
    import pyspark

    return Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class SparkCluster:
    folder: Path
    master_port: int
    connect_port: int
    connect_ui_port: int

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def url(self, folder: Path | str) -> str:
        """The database argument of the Parquet files in ``folder`` on the cluster (a
        classic session in this process, its executors on the workers)."""
        return f"{self.master}?folder={folder}"

    def connect_url(self, folder: Path | str) -> str:
        """The same through the Spark Connect server (the files read by its own tasks)."""
        return f"sc://127.0.0.1:{self.connect_port}/?folder={folder}"

    def connect_running_jobs(self) -> list[int]:
        """The ids of the Connect server's running jobs (its REST API)."""
        base = f"http://127.0.0.1:{self.connect_ui_port}/api/v1/applications"
        with urllib.request.urlopen(base, timeout=120) as reply:
            app = json.load(reply)[0]["id"]
        with urllib.request.urlopen(f"{base}/{app}/jobs?status=running", timeout=120) as reply:
            return [job["jobId"] for job in json.load(reply)]


#: The applications' settings (the classic driver of this process and the Connect server):
#: two executors of one core each, small memory, few shuffle partitions for small data.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:+UnlockDiagnosticVMOptions "
               "-XX:-BytecodeVerificationRemote")
DEFAULTS = {
    "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
    "spark.driver.memory": "512m", "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
    "spark.master.rest.enabled": "false", "spark.driver.host": "127.0.0.1",
    "spark.sql.catalogImplementation": "in-memory",  # no Hive metastore to create
    # JVMs on a busy 2-core machine: the quick JIT only, one GC thread (startup costs a third
    # less CPU, and the tests' few hundred small queries never repay C2: the -m spark subset
    # took more JVM CPU with it, issue 18; long queries are slower: benchmarks drop these).
    # Spark's own jars (pyspark's wheel) loaded unverified: the driver's open and the
    # Connect server's queries took 8% less JVM CPU (98 against 107 core-seconds, measured).
    "spark.driver.extraJavaOptions": JVM_OPTIONS,
    "spark.executor.extraJavaOptions": JVM_OPTIONS,
}


def _environment(folder: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_CONF_DIR": str(folder / "conf"),
            "SPARK_LOG_DIR": str(folder / "logs"), "SPARK_PID_DIR": str(folder / "pids"),
            "SPARK_IDENT_STRING": "dpsql", "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_DAEMON_JAVA_OPTS": JVM_OPTIONS}


def _daemon(env: dict[str, str], action: str, klass: str, instance: int, *args: str
            ) -> subprocess.Popen[bytes]:
    script = spark_home() / "sbin" / "spark-daemon.sh"
    return subprocess.Popen(["bash", str(script), action, klass, str(instance), *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _log(folder: Path, klass: str, instance: int) -> str:
    found = list((folder / "logs").glob(f"spark-dpsql-{klass}-{instance}-*.out"))
    return found[0].read_text(errors="replace") if found else ""


def _wait(folder: Path, started: float) -> None:
    """Until the master has registered its workers and the Connect server listens."""
    while time.monotonic() - started < STARTUP_SECONDS:
        master, connect = _log(folder, MASTER, 1), _log(folder, CONNECT, 1)
        if "Exception in thread \"main\"" in connect:  # the server gave up
            break
        if master.count("Registering worker") >= WORKERS and \
                "Spark Connect server started" in connect:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the Spark cluster in {folder} did not start within "
                       f"{STARTUP_SECONDS:.0f} s; its logs are in {folder / 'logs'}:\n"
                       + _log(folder, MASTER, 1)[-2000:] + _log(folder, CONNECT, 1)[-2000:])


@contextlib.contextmanager
def standalone_cluster(folder: Path) -> Iterator[SparkCluster]:
    """A running master, a worker and a Connect server under ``folder``, stopped on exit.
    Sets ``SPARK_CONF_DIR`` and ``SPARK_LOCAL_IP`` for this process's own driver meanwhile."""
    for sub in ("conf", "logs", "pids", "work", "warehouse"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    settings = {**DEFAULTS, "spark.sql.warehouse.dir": str(folder / "warehouse")}
    (folder / "conf" / "spark-defaults.conf").write_text(
        "".join(f"{k} {v}\n" for k, v in settings.items()), encoding="utf-8")
    cluster = SparkCluster(folder, _free_port(), _free_port(), _free_port())
    env = _environment(folder)
    started = time.monotonic()
    launches = [_daemon(env, "start", MASTER, 1, "--host", "127.0.0.1", "--port",
                        str(cluster.master_port), "--webui-port", "0")]
    launches += [_daemon(env, "start", WORKER, i, "--host", "127.0.0.1", "--port", "0",
                         "--webui-port", "0", "--cores", "2", "--memory", WORKER_MEMORY,
                         "--work-dir", str(folder / "work"), cluster.master)
                 for i in range(1, WORKERS + 1)]
    connect = spark_home() / "sbin" / "start-connect-server.sh"
    launches.append(subprocess.Popen(
        ["bash", str(connect), "--master", "local[2]",
         "--conf", f"spark.connect.grpc.binding.port={cluster.connect_port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         # Its UI's REST API lists its running jobs (SparkCluster.connect_running_jobs).
         "--conf", "spark.ui.enabled=true", "--conf", f"spark.ui.port={cluster.connect_ui_port}"],
        env={**env, "SPARK_DAEMON_MEMORY": CONNECT_MEMORY},  # a driver needs 450 MB at least
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    saved = {k: os.environ.get(k) for k in ("SPARK_CONF_DIR", "SPARK_LOCAL_IP")}
    try:
        for launch in launches:
            launch.wait()
        _wait(folder, started)
        os.environ.update(SPARK_CONF_DIR=env["SPARK_CONF_DIR"], SPARK_LOCAL_IP="127.0.0.1")
        yield cluster
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _stop(folder, env)


def _pids(folder: Path) -> list[int]:
    return [int(p.read_text().split()[0]) for p in (folder / "pids").glob("*.pid")
            if p.read_text().strip()]


def _descendants(pid: int) -> list[int]:
    done = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                          text=True, check=False)
    children = [int(p) for p in done.stdout.split()]
    return children + [d for c in children for d in _descendants(c)]


def _stop(folder: Path, env: dict[str, str]) -> None:
    """Stops every daemon by its pid file (SIGTERM, then SIGKILL), and their executors."""
    daemons = _pids(folder)
    children = [c for pid in daemons for c in _descendants(pid)]
    stops = [_daemon(env, "stop", klass, i) for klass, i in
             [(CONNECT, 1), *((WORKER, i) for i in range(1, WORKERS + 1)), (MASTER, 1)]]
    for stop in stops:
        stop.wait()
    deadline = time.monotonic() + 15
    for pid in daemons + children:
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (not yet reaped by its parent) is gone for our purposes.
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return False
    return True
