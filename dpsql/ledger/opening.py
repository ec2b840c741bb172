"""Which ledger, and who is charged: the ledger file the metadata declares (or
``DPSQL_LEDGER``), opened or created, and the analyst asking (or ``DPSQL_ANALYST``).

Apart from :mod:`dpsql.database` so that ``dpsql budget`` opens the ledger without importing
the query pipeline (sqlglot, DuckDB, numpy).
"""

from __future__ import annotations

import getpass
import os
from pathlib import Path

from dpsql.errors import InterfaceError, LedgerError, MetadataError
from dpsql.ledger.budget import Ledger, UnknownAnalyst
from dpsql.ledger.identity import read_record, retire_record, unavailable
from dpsql.metadata.metadata import Metadata
from dpsql.metadata.owner_settings import EVERY_OTHER_ANALYST

ANALYST_ENV = "DPSQL_ANALYST"
LEDGER_ENV = "DPSQL_LEDGER"


def resolve_analyst(*candidates: str | None) -> str:
    """The first given name, else ``DPSQL_ANALYST``, else the operating-system user."""
    name = next((c for c in candidates if c is not None), None)
    if name is None:
        name = os.environ.get(ANALYST_ENV) or None
    if name is None:
        try:
            name = getpass.getuser()
        except (OSError, KeyError, ImportError):
            raise InterfaceError(f"cannot tell who is asking: pass analyst= or set "
                                 f"{ANALYST_ENV}") from None
    if not isinstance(name, str) or not name.strip():
        raise InterfaceError(f"an analyst must be a non-empty name, got {name!r}")
    if name == EVERY_OTHER_ANALYST:
        raise UnknownAnalyst(f"{EVERY_OTHER_ANALYST!r} is not an analyst name; it stands for "
                             "every analyst not listed in the metadata")
    return name


def ledger_path(metadata: Metadata) -> Path | None:
    """The ledger file: ``DPSQL_LEDGER`` if set, else the metadata's; None when unmetered."""
    if metadata.budget is None:
        return None
    override = os.environ.get(LEDGER_ENV)
    return Path(override).expanduser().absolute() if override else metadata.budget.ledger


def open_ledger(metadata: Metadata) -> Ledger | None:
    """Open the ledger the metadata declares; None when unmetered. It is created only where
    none was ever recorded (see :mod:`dpsql.ledger.identity`): a missing, emptied or replaced
    ledger is :class:`~dpsql.errors.LedgerUnavailable`."""
    path = ledger_path(metadata)
    if path is None or metadata.budget is None:
        return None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise LedgerError(owner_detail=f"cannot create the folder of the budget ledger {path}: "
                          f"{e.strerror or e}") from None
    budget = metadata.budget
    return Ledger(path, budget.analysts, accounting=budget.accounting,  # type: ignore[arg-type]
                  default=budget.default)


def init_ledger(metadata: Metadata, start_over: bool = False) -> tuple[Ledger, Path | None]:
    """``dpsql budget init``: create the metadata's ledger explicitly (refused if one exists).

    Where a recorded ledger is missing, a new one is created only with ``start_over``, the
    owner's decision that it is lost (see :mod:`dpsql.ledger.identity`); its record is kept,
    renamed, and returned. The ledger is returned open.
    """
    path = ledger_path(metadata)
    if path is None or metadata.budget is None:
        raise MetadataError(f"{metadata.source} declares no analyst, so there is no budget "
                            "ledger to create; add an [analysts.NAME] section first")
    if path.exists():
        raise MetadataError(f"the budget ledger {path} already exists; `dpsql budget -m "
                            f"{metadata.source}` shows it")
    retired = None
    if read_record(path) is not None:
        if not start_over:
            raise unavailable(path, "it is missing (deleted or moved)", read_record(path))
        retired = retire_record(path)
    ledger = open_ledger(metadata)
    assert ledger is not None
    return ledger, retired
