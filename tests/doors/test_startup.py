"""The command line starts at once: ``import dpsql``, ``dpsql --help`` and ``dpsql budget``
import neither sqlglot, DuckDB nor numpy (benchmarks/bench_startup.py measures the time), and
the lazy package (PEP 562) still offers the whole DB-API surface."""

from __future__ import annotations

import subprocess
import sys

import pytest

import dpsql
import dpsql.dbapi
import dpsql.errors

HEAVY = ("sqlglot", "duckdb", "numpy")


@pytest.mark.parametrize("code", [
    "import dpsql",
    "import sys; sys.argv = ['dpsql', '--help']\nfrom dpsql.cli import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass",
    "import sys; sys.argv = ['dpsql', 'budget']\nfrom dpsql.cli import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass",
], ids=["import", "help", "budget"])
def test_no_heavy_import(code: str) -> None:
    check = code + f"\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_the_lazy_names_are_the_dbapi_surface() -> None:
    assert set(dpsql._DBAPI) == set(dpsql.dbapi.__all__)
    assert set(dpsql.__all__) == {"Database", "__version__", *dpsql.dbapi.__all__,
                                  *dpsql.errors.__all__}
    for name in dpsql.__all__:
        assert getattr(dpsql, name) is not None
    assert dpsql.connect is dpsql.dbapi.connect and dpsql.apilevel == "2.0"
    assert dpsql.QueryRefused is dpsql.errors.QueryRefused
    with pytest.raises(AttributeError):
        dpsql.no_such_name  # noqa: B018
