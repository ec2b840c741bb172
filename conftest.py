"""Keep every test run away from the user's own privacy budget.

The sample metadata declares a ledger in ``~/.dpsql`` and a demo budget for every analyst, so
tests that query the sample data would otherwise spend the real user's budget and, run after
run, exhaust it. Here the whole run gets a throwaway ledger (``DPSQL_LEDGER``), and each test a
fresh analyst name (``DPSQL_ANALYST``), hence its own full demo budget. Tests of the budget
itself set both explicitly.

It also makes the statistical tests deterministic. A module (or test) that asks for
``seeded_randomness`` runs on a seeded :class:`~dpsql.privacy.randomness.Randomness` instead of the
operating system's: every noise draw and the salt of contribution bounding of every Database
built without its own (the process default, ``dpsql.privacy.randomness.DEFAULT``), seeded by the
test's id; the ``randomness`` fixture is that same object, for the tests that pass it explicitly.
Its bands still catch a wrong distribution, but the verdict is the same on every run, so CI never
fails by chance. The truly random runs are marked ``slow`` (skipped unless ``DPSQL_SLOW=1``)
and ``dpsql audit``.

The neighbour harness's generated queries (tests/test_neighbours*.py) are the exception: they
check exact measurements, without noise, so a new seed cannot make an honest run fail, only
reach queries no earlier run reached. Each run draws its base seed (``neighbour_seed``), the
same in every pytest-xdist worker, and a failure names it: ``DPSQL_NEIGHBOUR_SEED=<seed>``
runs those queries again. The same seed rotates the default subsets of long lists (corpus
cases on slow engines, audit scenarios on PostgreSQL: tests/support/subset.py), so the same
variable selects the same cases again.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import secrets
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from dpsql.privacy.randomness import Randomness


def _own_sample_data() -> None:
    """Tests read this checkout's sample data, even when the editable install of dpsql points
    ``dpsql.sample_data`` at another checkout (a git worktree shares the installed package)."""
    init = Path(__file__).parent / "sample_data" / "__init__.py"
    spec = importlib.util.spec_from_file_location("dpsql.sample_data", init)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["dpsql.sample_data"] = module


_own_sample_data()
_LEDGERS = tempfile.mkdtemp(prefix="dpsql-test-ledger-")
atexit.register(shutil.rmtree, _LEDGERS, True)
os.environ["DPSQL_LEDGER"] = os.path.join(_LEDGERS, "ledger.sqlite")
# Ledgers' second identity records (dpsql.ledger.identity) go here, not to ~/.local/state.
os.environ["DPSQL_STATE_DIR"] = os.path.join(_LEDGERS, "state")
# The command line's defaults (dpsql.cli.defaults) never come from the user's environment or
# config files: "" is "no config file".
for _name in ("DPSQL_DATABASE", "DPSQL_METADATA"):
    os.environ.pop(_name, None)
os.environ["DPSQL_CONFIG"] = ""


@pytest.fixture(autouse=True)
def _fresh_analyst(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DPSQL_ANALYST", f"test-{uuid.uuid4().hex[:12]}")
    yield


#: Test modules about answer times (side channels, the owner's settings), where a metered
#: database keeps the default time grid (dpsql.metadata.owner_settings.DEFAULT_TIME_GRID: every
#: fresh answer held to the next 50 ms). Everywhere else a metered database answers at once unless
#: its metadata declares a grid: the padding is a sleep, several hundred of them per run.
KEEP_TIME_GRID = {"test_attacks.py", "test_server_concurrency.py", "test_metadata.py",
                  "test_server_robustness.py", "test_time.py", "test_timestamps_server.py"}


@pytest.fixture(autouse=True)
def _default_time_grid(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.path.name not in KEEP_TIME_GRID:
        monkeypatch.setattr("dpsql.metadata.owner_settings.DEFAULT_TIME_GRID", 0.0)


def _test_seed(request: pytest.FixtureRequest) -> int:
    digest = hashlib.sha256(_plain_nodeid(request.node).encode()).digest()
    return int.from_bytes(digest[:8], "little")




def _plain_nodeid(item: pytest.Item) -> str:
    """The test's id without the ``@group`` that pytest-xdist's loadgroup appends: the same
    stream with and without xdist."""
    groups = {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
              for m in item.iter_markers("xdist_group")}
    return item.nodeid.removesuffix("@" + "_".join(sorted(groups))) if groups else item.nodeid


@pytest.fixture
def randomness(request: pytest.FixtureRequest) -> Randomness:
    """A Randomness seeded by this test's id (the operating system's for a ``slow`` test:
    true randomness is its point)."""
    # Imported here: dpsql is imported after _own_sample_data has run.
    from dpsql.privacy.randomness import Randomness

    if request.node.get_closest_marker("slow") is not None:
        return Randomness()
    return Randomness.seeded(_test_seed(request))


@pytest.fixture
def seeded_randomness(randomness: Randomness, monkeypatch: pytest.MonkeyPatch) -> Randomness:
    """``randomness`` as the process default: every Database built without its own, through
    any front door, draws from it (see the module docstring)."""
    monkeypatch.setattr("dpsql.privacy.randomness.DEFAULT", randomness)
    return randomness


NEIGHBOUR_SEED = "DPSQL_NEIGHBOUR_SEED"


def pytest_configure(config: pytest.Config) -> None:
    """One base seed per run for the generated neighbour queries, drawn before pytest-xdist
    starts its workers so that they inherit it (the environment of the run)."""
    os.environ.setdefault(NEIGHBOUR_SEED, str(secrets.randbelow(10**9)))


def pytest_report_header(config: pytest.Config) -> str:
    return (f"{NEIGHBOUR_SEED}={os.environ[NEIGHBOUR_SEED]} (generated neighbour queries, and "
            "the default subsets of tests/support/subset.py)")


@pytest.fixture(scope="session")
def neighbour_seed() -> int:
    """This run's base seed for generated neighbour queries (see the module docstring)."""
    return int(os.environ[NEIGHBOUR_SEED])


#: Test modules whose module-scoped fixtures cost seconds (a Superset run, neighbourhoods of
#: synthetic worlds, engine copies of the sample data): each runs on one pytest-xdist worker,
#: so those fixtures are built once, not once per worker (not with DPSQL_SLOW=1, where the
#: neighbour harness's chunks of generated queries are long enough to spread).
ONE_WORKER = {"test_superset.py", "test_neighbours.py", "test_neighbours_postgres.py",
              "test_engines_differential.py", "test_engines_attacks.py"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``slow`` tests (full-size runs on the operating system's randomness) only with
    DPSQL_SLOW=1. Under pytest-xdist (``-n 2 --dist loadgroup``, as scripts/test runs), every
    ``spark`` test goes to one worker: one JVM, one local Spark session, not one per worker;
    and each module of :data:`ONE_WORKER` to one worker."""
    slow = os.environ.get("DPSQL_SLOW") == "1"  # long modules: spread them over the workers
    for item in items:
        if "spark" in item.keywords:
            item.add_marker(pytest.mark.xdist_group("spark"))
        elif item.path.name in ONE_WORKER and not slow:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
    if slow:
        return
    skip = pytest.mark.skip(reason="slow: set DPSQL_SLOW=1 to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def pg_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A throw-away PostgreSQL cluster for the whole run (tests.support.pgcluster), empty:
    each test module loads its tables with ``load_duckdb_file`` and connects as the read-only
    role it grants. No server installed is a failure, not a skip (CI installs one)."""
    from tests.support.pgcluster import throwaway_cluster

    with throwaway_cluster(tmp_path_factory.mktemp("postgres")) as cluster:
        yield cluster
