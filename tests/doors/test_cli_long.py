"""A long query on the command line, run as a subprocess: on a pseudo-terminal (the pty
module) it shows a status line after about a second and Ctrl-C stops it with one line and exit
status 130; on a pipe there is no status line, and SIGINT says the same.

The query is made long without burning CPU: the owner's answer-time grid (``[server]
time_grid``) holds a fresh answer until the grid's next point, and the status line, the
charge and the cancel behave there as during a long engine query (dpsql.execution.watch).
A query still being prepared (before its charge) is made long by a wrapper around the command
line that holds the charge back until the test lets it go (``CHARGE_WAITS``).
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
import tomli_w

import dpsql

GRID = 60.0  # seconds: far longer than any test waits
SQL = "SELECT v, COUNT(*) AS n FROM events GROUP BY v"
ERASE = "\r\x1b[K"


@pytest.fixture
def slow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, dict[str, str]]:
    monkeypatch.delenv("DPSQL_LEDGER", raising=False)  # this metadata's own ledger, here too
    path = tmp_path / "events.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE events AS SELECT i % 50 AS pid, i % 7 AS v "
                    "FROM range(500) t(i)")
    metadata = tmp_path / "metadata.toml"
    metadata.write_text(tomli_w.dumps({
        "budget": {"ledger": str(tmp_path / "ledger.sqlite")},
        "server": {"time_grid": GRID},
        "analysts": {"alice": {"epsilon": 10.0}},
        "tables": {"events": {"privacy_unit": "pid", "max_rows_per_unit": 5, "columns": {
            "pid": {"type": "int"},
            "v": {"type": "int", "lower": 0, "upper": 6, "public_range": True}}}}}))
    env = {k: v for k, v in os.environ.items() if k not in ("DPSQL_LEDGER", "DPSQL_ANALYST")}
    return path, metadata, env


def args(path: Path, metadata: Path) -> list[str]:
    return [sys.executable, "-m", "dpsql", "query", SQL, "-d", str(path), "-m", str(metadata),
            "-a", "alice"]


#: ``python -c`` this, then the file whose existence releases the charge, then dpsql's
#: arguments: the command line whose queries wait before their charge (as a long planning
#: would) until that file exists.
CHARGE_WAITS = """
import sys, time
from contextlib import contextmanager
from pathlib import Path
from dpsql.execution.watch import Watch
charging, release = Watch.charging, Path(sys.argv.pop(1))

@contextmanager
def waiting(self, epsilon, delta):
    deadline = time.monotonic() + 60
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    with charging(self, epsilon, delta):
        yield

Watch.charging = waiting
from dpsql.cli import main
main(prog_name="dpsql")
"""


def spent(path: Path, metadata: Path) -> float:
    with dpsql.Database(path, metadata, analyst="alice") as db:
        status = db.budget()
        assert status is not None
        return status.spent.epsilon


def on_terminal(argv: list[str], env: dict[str, str], interrupt_when: str,
                limit: float = 60.0, then: Callable[[], None] | None = None
                ) -> tuple[int, str]:
    """Run ``argv`` on a pseudo-terminal; type Ctrl-C once ``interrupt_when`` has shown, then
    call ``then``."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal is its stdin, stdout and stderr
        os.execve(argv[0], argv, env)
    out, sent, start = b"", False, time.monotonic()
    try:
        while time.monotonic() - start < limit:
            if not sent and interrupt_when.encode() in out:
                os.write(fd, b"\x03")  # the terminal turns it into SIGINT
                sent = True
                if then is not None:
                    then()
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    data = os.read(fd, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                out += data
    finally:
        os.close(fd)
    if time.monotonic() - start >= limit:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def test_ctrl_c_on_a_terminal(slow) -> None:
    path, metadata, env = slow
    typed: list[float] = []  # when Ctrl-C was typed: the start-up's time is the machine's
    code, out = on_terminal(args(path, metadata), env, "charged epsilon 1",
                            then=lambda: typed.append(time.monotonic()))
    assert code == 130, out
    assert time.monotonic() - typed[0] < GRID / 2  # Ctrl-C did not wait for the grid
    # the status line: after about a second (more on a loaded machine), the charge, rewritten
    # in place and erased
    assert re.search(rf"{re.escape(ERASE)}dpsql: running \d+ s; charged epsilon 1 ", out)
    assert "running 0 s" not in out  # not before a second
    last = out.rsplit(ERASE, 1)[1]
    assert last.startswith("dpsql: interrupted after ")
    assert last.rstrip().endswith("; the charge of epsilon 1 stands: the answer was not shown")
    assert "Traceback" not in out and "InternalError" not in out
    assert spent(path, metadata) == 1.0
    # The answer was not stored with its charge: asking again is a new charge (no grid now).
    without_grid = metadata.with_name("no-grid.toml")
    without_grid.write_text(metadata.read_text().replace(f"time_grid = {GRID}", "time_grid = 0"))
    with dpsql.Database(path, without_grid, analyst="alice") as db:
        answer = db.run(SQL)
        assert not answer.reused and answer.cost is not None


def test_ctrl_c_before_the_charge_charges_nothing(slow, tmp_path: Path) -> None:
    """Ctrl-C while the query is still before its charge: nothing charged, nothing run, one
    line saying so, exit 130 -- even though the query reaches its charge after the Ctrl-C
    (the cancel holds it back: dpsql.execution.watch)."""
    path, metadata, env = slow
    release = tmp_path / "release"
    argv = [sys.executable, "-c", CHARGE_WAITS, str(release), *args(path, metadata)[3:]]
    code, out = on_terminal(argv, env, "nothing charged yet", then=release.touch)
    assert code == 130, out
    assert re.search(rf"{re.escape(ERASE)}dpsql: running \d+ s; nothing charged yet ", out)
    last = out.rsplit(ERASE, 1)[1]
    assert last.startswith("dpsql: interrupted after ")
    assert last.rstrip().endswith("; nothing was charged")
    assert "Traceback" not in out
    assert release.exists() and spent(path, metadata) == 0.0


def test_no_status_line_on_a_pipe_and_sigint_says_the_same(slow) -> None:
    path, metadata, env = slow
    proc = subprocess.Popen(args(path, metadata), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while spent(path, metadata) == 0.0:  # charged: now waiting for the grid
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    time.sleep(1.5)  # past the second after which a terminal would show the status line
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert out == ""
    assert "running" not in err and "\x1b" not in err  # never a status line on a pipe
    assert err.strip().endswith("the charge of epsilon 1 stands: the answer was not shown")
    assert len(err.strip().splitlines()) == 1


def test_a_quick_answer_shows_no_status_line(slow) -> None:
    _, metadata, env = slow
    code, out = on_terminal([sys.executable, "-m", "dpsql", "budget", "-m", str(metadata)],
                            env, "never")
    assert code == 0 and ERASE not in out and "alice" in out
