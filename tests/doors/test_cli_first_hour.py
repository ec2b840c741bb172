"""The first hour of a new user at the command line (issue 20, item 6): the messages and
conveniences met before any privacy question, through click's CliRunner."""

from __future__ import annotations

import socket
from pathlib import Path

from click.testing import CliRunner, Result

from dpsql.cli import main


def cli(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=stdin, catch_exceptions=False)


def test_serve_on_a_busy_port_says_so_and_warns_without_passwords(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli("serve", "--port", str(port), "--passwords", str(tmp_path / "none.toml"))
    assert result.exit_code == 2
    assert f"dpsql: OperationalError: cannot listen on 127.0.0.1:{port}: the port is in use" \
        in result.stderr
    assert "--port 0" in result.stderr and "bug" not in result.stderr
    assert "no analyst can log in yet" in result.stderr and "dpsql analyst add" in result.stderr
