"""Go's pgx (v4, Debian's golang-github-jackc-pgx-v4-dev) against a real ``dpsql serve``.

The client, tests/clients/pgx/main.go, is built here from Debian's Go sources (GOPATH mode:
``/usr/share/gocode``, no module proxy, no network). pgx sends every query through the extended
protocol and encodes each argument in the type ParameterDescription announces, so int, float,
bool and date arguments work only if the server infers them from the compared columns; a Go
``time.Time`` compared with a date column is sent as a date. A refused query must come back as an
error (pgx waits after Parse/Describe/Sync) and leave the connection usable.

Go and pgx are installed by .ci/run; without them this test fails (it does not skip).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

PASSWORD = "go pw"
SOURCE = Path(__file__).parent.parent / "clients" / "pgx"
GOPATH = Path("/usr/share/gocode")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    assert go is not None, "Go is not installed (apt-get install golang-go; see .ci/run)"
    assert (GOPATH / "src/github.com/jackc/pgx/v4").is_dir(), \
        "pgx is not installed (apt-get install golang-github-jackc-pgx-v4-dev; see .ci/run)"
    build = tmp_path_factory.mktemp("go")
    binary = build / "pgxclient"
    # Go's build cache outlives the run (the user's cache folder; Go keys it by its sources
    # and is safe for concurrent builds): pgx compiles once per machine, not once per run.
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dpsql-tests"
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": f"{build}:{GOPATH}",
           "GOCACHE": str(cache / "go-build"), "GOPROXY": "off", "GOFLAGS": "",
           "CGO_ENABLED": "0"}
    result = subprocess.run([go, "build", "-o", str(binary), "."], cwd=SOURCE, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return binary


def test_pgx_typed_parameters_catalog_and_refusal(client: Path, served: SimpleNamespace) -> None:
    url = f"postgres://alice:{PASSWORD.replace(' ', '%20')}@127.0.0.1:{served.port}/dpsql" \
          "?sslmode=disable"
    result = subprocess.run([str(client), url], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = {d["name"]: d for d in map(json.loads, result.stdout.splitlines())}
    assert lines["connect"]["value"] == "ok"
    for name in ("int", "int32", "float", "bool", "date", "timestamp", "after_refusal"):
        assert "error" not in lines[name], (name, lines[name])
        assert isinstance(lines[name]["value"], int | float), (name, lines[name])
    assert lines["refused"]["sqlstate"] == "42803", lines["refused"]
    assert lines["tables"]["value"] >= 2  # the declared tables, from the catalog
    assert lines["catalog_timestamp"]["value"] == "2025-06-01T12:30:00Z"
