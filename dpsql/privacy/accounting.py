"""Privacy accounting: what a query costs, what an analyst may spend, and the rule that admits
a charge. The ledger (:mod:`dpsql.ledger.budget`) stores the charges; this module decides.

Accounting. The ledger file remembers the mode it was created with and refuses another one,
because re-reading old charges under the other rule could undercount them.

``basic`` (default) -- sequential composition: spent epsilon and spent delta are the sums of the
charges' epsilon and delta since the latest reset, and a charge is admitted while both sums stay
within the total. This is sound even though analysts choose each cost adaptively, after seeing
earlier answers: basic composition is a valid privacy filter (Rogers, Roth, Ullman, Vadhan 2016,
"Privacy odometers and filters"). ``Cost.rho`` is recorded but not used; a cost must have
epsilon > 0 (a Gaussian query states its (epsilon, delta) guarantee here).

``zcdp`` (optional) -- approximate zero-concentrated DP (Bun and Steinke 2016). Each charge is read
as a delta-approximate rho-zCDP mechanism with

* rho = ``cost.rho`` when it is > 0 (Gaussian noise: ``rho = sensitivity^2 / (2 sigma^2)``),
  otherwise ``epsilon^2 / 2`` (pure epsilon-DP implies epsilon^2/2-zCDP);
* delta = ``cost.delta``: only the delta that rho does not cover, e.g. the failure probability
  of releasing thresholded group keys. It must be 0 for a plain Gaussian query, whose
  (epsilon, delta) equivalent is *not* to be put in the cost (it would be charged twice).

Approximate zCDP composes additively (sum of rho, sum of delta); with costs chosen adaptively,
a fixed-threshold filter on these sums is what OpenDP's fully adaptive composition admits for
(approximate) zCDP (for rho alone: Feldman and Zrnic 2021, Renyi filters). The total
(eps_T, delta_T), which must have delta_T > 0, is split once, up front: half of delta_T converts
rho into epsilon, half is for the queries' own deltas. The rho budget is the largest rho_T with
``rho_T + 2 sqrt(rho_T ln(2 / delta_T)) <= eps_T`` (Bun and Steinke, Prop. 1.3), so anything
admitted is (eps_T, delta_T)-DP. A charge is admitted while ``sum rho <= rho_T`` and
``sum delta <= delta_T / 2``. The thresholds are fixed, never a function of what was spent: a
min() of two accountants picked after the fact is not known to be a valid filter, so the ledger
never switches rule mid-way. zcdp pays off for many small (Gaussian) queries; a few
pure-epsilon queries cost more than under ``basic``.

Floating-point sums are compared with a relative tolerance of 1e-9, so that ten charges of 0.1
fit in a total of 1.0; the overspend this allows is at most a billionth of the total.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from dpsql.errors import BudgetExhausted, InvalidPrivacyParameter
from dpsql.metadata.owner_settings import Allowance as Allowance  # declared by the owner
from dpsql.privacy.mechanism_names import Mechanism

if TYPE_CHECKING:  # numpy and sqlglot stay unimported for `dpsql budget` (the metadata reads
    from dpsql.privacy.plan import Plan  # this module)

Accounting = Literal["basic", "zcdp"]

RELATIVE_TOLERANCE = 1e-9


class UnknownAnalyst(BudgetExhausted):
    """An analyst to whom the data owner has granted no budget. Nothing was charged."""

    sqlstate = "28000"


@dataclass(frozen=True)
class Cost:
    """The privacy cost of one query (see the module docstring for how ``rho`` is used)."""

    epsilon: float
    delta: float
    rho: float = 0.0


@dataclass(frozen=True)
class BudgetStatus:
    """What an analyst has spent since the latest reset, and what is left.

    Under ``basic`` accounting ``spent`` holds the sums of epsilon and delta, ``remaining`` is
    ``total - spent`` (never below 0) and both ``rho`` fields are 0.

    Under ``zcdp`` accounting ``spent`` is an (epsilon, delta)-DP guarantee of everything
    charged: epsilon is the conversion of the spent rho with delta_T / 2, delta is the queries'
    deltas plus that delta_T / 2 (once anything is spent); ``spent.rho`` is the spent rho.
    ``remaining.rho`` and ``remaining.delta`` are what further queries may still use (the
    checked limits); ``remaining.epsilon`` is ``total.epsilon - spent.epsilon``.
    """

    analyst: str
    total: Allowance
    spent: Cost
    remaining: Cost


@dataclass(frozen=True)
class Spent:
    """Raw sums over an analyst's charges since the latest reset."""

    epsilon: float
    delta: float
    rho: float


# --- validation -------------------------------------------------------------------------------


def check_parameter(value: object, name: str, owner: str) -> None:
    # bool is an int to Python, but epsilon=True is a bug, not a budget.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidPrivacyParameter(f"{owner}: {name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise InvalidPrivacyParameter(
            f"{owner}: {name} must be a finite number >= 0, got {value!r}"
        )
    if name == "delta" and number >= 1:
        raise InvalidPrivacyParameter(f"{owner}: delta must be < 1, got {value!r}")


def validate_allowance(analyst: str, allowance: Allowance, accounting: Accounting) -> None:
    owner = f"the budget of analyst {analyst!r}"
    check_parameter(allowance.epsilon, "epsilon", owner)
    check_parameter(allowance.delta, "delta", owner)
    if accounting == "zcdp" and allowance.delta == 0:
        # rho-zCDP implies no pure epsilon-DP bound: the conversion needs some delta.
        raise InvalidPrivacyParameter(
            f"{owner}: zcdp accounting needs a delta > 0; give a delta or use basic accounting"
        )


def validate_cost(cost: Cost, accounting: Accounting) -> None:
    owner = "the query's privacy cost"
    for name in ("epsilon", "delta", "rho"):
        check_parameter(getattr(cost, name), name, owner)
    if accounting == "basic" and cost.epsilon == 0:
        raise InvalidPrivacyParameter(
            f"{owner}: epsilon must be > 0 (basic accounting charges epsilon and delta, "
            "not rho alone)"
        )
    if accounting == "zcdp" and cost.epsilon == 0 and cost.rho == 0:
        raise InvalidPrivacyParameter(f"{owner}: epsilon or rho must be > 0")


# --- accounting -------------------------------------------------------------------------------


def within(used: float, limit: float) -> bool:
    return used <= limit * (1.0 + RELATIVE_TOLERANCE)


def rho_of(cost: Cost) -> float:
    """The zCDP rho charged for a cost (mirrored in _SPENT_SQL)."""
    return cost.rho if cost.rho > 0 else cost.epsilon * cost.epsilon / 2.0


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The epsilon of (epsilon, delta)-DP implied by rho-zCDP (Bun and Steinke, Prop. 1.3)."""
    if rho == 0:
        return 0.0
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def zcdp_limits(total: Allowance) -> tuple[float, float]:
    """(rho budget, delta budget for the queries' own deltas) of a total under zcdp accounting.

    Solves rho + 2 sqrt(rho L) = eps with L = ln(2 / delta): sqrt(rho) = sqrt(eps + L) - sqrt(L),
    written as eps / (sqrt(eps + L) + sqrt(L)) to avoid cancellation for small eps.
    """
    half_delta = total.delta / 2.0
    log_term = math.log(1.0 / half_delta)
    root = total.epsilon / (math.sqrt(total.epsilon + log_term) + math.sqrt(log_term))
    return root * root, half_delta


def exceeded_limits(total: Allowance, spent: Spent, cost: Cost,
                    accounting: Accounting) -> list[str]:
    """The budget dimensions that this cost would overrun (empty: the charge fits)."""
    if accounting == "basic":
        checks = {
            "epsilon": (spent.epsilon + cost.epsilon, total.epsilon),
            "delta": (spent.delta + cost.delta, total.delta),
        }
    else:
        rho_limit, delta_limit = zcdp_limits(total)
        checks = {
            "rho": (spent.rho + rho_of(cost), rho_limit),
            "delta": (spent.delta + cost.delta, delta_limit),
        }
    return [name for name, (used, limit) in checks.items() if not within(used, limit)]


def budget_status(analyst: str, total: Allowance, spent: Spent,
                  accounting: Accounting) -> BudgetStatus:
    if accounting == "basic":
        used = Cost(spent.epsilon, spent.delta)
        left = Cost(max(0.0, total.epsilon - spent.epsilon), max(0.0, total.delta - spent.delta))
        return BudgetStatus(analyst, total, used, left)
    rho_limit, delta_limit = zcdp_limits(total)
    conversion_delta = delta_limit if spent.rho > 0 else 0.0
    used = Cost(
        zcdp_epsilon(spent.rho, delta_limit), spent.delta + conversion_delta, spent.rho
    )
    left = Cost(
        max(0.0, total.epsilon - used.epsilon),
        max(0.0, delta_limit - spent.delta),
        max(0.0, rho_limit - spent.rho),
    )
    return BudgetStatus(analyst, total, used, left)


def refusal_message(status: BudgetStatus, cost: Cost, exceeded: list[str], zcdp: bool) -> str:
    left, total = status.remaining, status.total
    if zcdp:
        costs = f"rho={rho_of(cost):.6g}, delta={cost.delta:.6g} (zCDP accounting)"
        remains = f"rho={left.rho:.6g}, delta={left.delta:.6g}"
    else:
        costs = f"epsilon={cost.epsilon:.6g}, delta={cost.delta:.6g}"
        remains = f"epsilon={left.epsilon:.6g}, delta={left.delta:.6g}"
    knobs = " and ".join("delta" if name == "delta" else "epsilon" for name in exceeded)
    return (
        f"privacy budget exhausted for analyst {status.analyst!r}: this query costs {costs}; "
        f"remaining {remains} of a total epsilon={total.epsilon:.6g}, "
        f"delta={total.delta:.6g}. Nothing was charged; ask the data owner for more budget "
        f"or use a smaller {knobs}."
    )


# --- what a release costs ----------------------------------------------------------------------


def query_cost(plan: Plan, accounting: str = "basic") -> Cost:
    """The ledger cost of a plan.

    ``basic``: the plan's (epsilon, delta) by sequential composition, with the Gaussian
    measurements' zCDP ``rho`` recorded alongside. ``zcdp`` (module docstring): rho is the
    Gaussian measurements' rho plus ``epsilon_i^2 / 2`` for every other (pure epsilon_i-DP)
    measurement -- they compose additively -- and delta is only the part that rho does not
    cover, the failure probability of thresholding group keys.
    """
    if accounting == "basic":
        return Cost(plan.cost_epsilon, plan.cost_delta, plan.rho)
    rho = plan.rho + sum(m.epsilon ** 2 / 2.0 for m in plan.measurements
                         if m.mechanism != Mechanism.GAUSSIAN)
    if plan.auto is not None:  # the choice of k from the data: pure epsilon_auto-DP
        rho += plan.auto.epsilon ** 2 / 2.0
    rho += sum(v.epsilon ** 2 / 2.0 for v in plan.values)  # each value bound chosen: the same
    delta = plan.threshold.delta if plan.threshold is not None else 0.0
    return Cost(plan.cost_epsilon, delta, rho)


def pure_cost(epsilon: float, accounting: str) -> Cost:
    """The ledger cost of a pure ``epsilon``-DP release (local rows, a retention estimate): no
    delta; under zCDP its rho, ``epsilon^2 / 2`` (pure epsilon-DP is epsilon^2/2-zCDP)."""
    return Cost(epsilon, 0.0, epsilon ** 2 / 2.0 if accounting == "zcdp" else 0.0)


def total_cost(costs: Iterable[Cost]) -> Cost:
    """The cost of releases answered one after the other on the same data: by sequential
    composition the epsilons and deltas add (and under zCDP the rhos)."""
    listed = list(costs)
    return Cost(sum(c.epsilon for c in listed), sum(c.delta for c in listed),
                sum(c.rho for c in listed))


# --- the ledger -------------------------------------------------------------------------------
