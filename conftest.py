"""Keep every test run away from the user's own privacy budget.

The sample metadata declares a ledger in ``~/.dpsql`` and a demo budget for every analyst, so
tests that query the sample data would otherwise spend the real user's budget and, run after
run, exhaust it. Here the whole run gets a throwaway ledger (``DPSQL_LEDGER``), and each test a
fresh analyst name (``DPSQL_ANALYST``), hence its own full demo budget. Tests of the budget
itself set both explicitly.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator

import pytest

_LEDGERS = tempfile.mkdtemp(prefix="dpsql-test-ledger-")
atexit.register(shutil.rmtree, _LEDGERS, True)
os.environ["DPSQL_LEDGER"] = os.path.join(_LEDGERS, "ledger.sqlite")


@pytest.fixture(autouse=True)
def _fresh_analyst(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DPSQL_ANALYST", f"test-{uuid.uuid4().hex[:12]}")
    yield
