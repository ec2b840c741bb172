"""The statistical audit of one released row under local DP (dpsql/audit/local_audit.py): every
column kind and their composition pass, and mutants with an understated epsilon are caught."""

from __future__ import annotations

import dataclasses
import os

import pytest

from dpsql.audit.local_audit import audit, scenarios
from dpsql.privacy.local import RowMechanism
from dpsql.privacy.randomness import Randomness

#: Draws per row: small by default, the full audit under DPSQL_SLOW=1.
N = 50_000 if os.environ.get("DPSQL_SLOW") else 4_000
SCENARIOS = {s.name: s for s in scenarios()}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_one_released_row_is_within_its_epsilon(name: str) -> None:
    verdicts = audit(SCENARIOS[name], N, Randomness.seeded(7))
    assert verdicts
    for v in verdicts:
        assert v.passed, v
    # The exact ratio is attained (the bound is tight, not loose by accident): worst-case
    # neighbours sit at the ends of every domain.
    assert max(v.exact for v in verdicts) == pytest.approx(
        max(v.epsilon for v in verdicts), rel=1e-6)


def _inflated(mechanism: RowMechanism, factor: float) -> RowMechanism:
    columns = {n: None if m is None else dataclasses.replace(m, epsilon=m.epsilon * factor)
               for n, m in mechanism.columns.items()}
    return dataclasses.replace(mechanism, columns=columns)


@pytest.mark.parametrize("name", ["rr-binary", "rr-4", "laplace", "buckets", "row"])
def test_a_mechanism_spending_more_than_declared_is_caught(name: str) -> None:
    scenario = SCENARIOS[name]
    mutant = _inflated(scenario.mechanism(), 3.0)
    verdicts = audit(scenario, N, Randomness.seeded(8), mechanism=mutant)
    assert not all(v.passed for v in verdicts)
    assert any(v.measured > v.epsilon for v in verdicts), verdicts  # seen in the samples too
