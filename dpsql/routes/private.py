"""The route of one private release: a :class:`~dpsql.privacy.plan.Plan` through the passes
(:mod:`dpsql.routes.pipeline`), charged its cost (:func:`dpsql.privacy.accounting.query_cost`)
before the engine reads anything."""

from __future__ import annotations

from dataclasses import dataclass

from dpsql.engines import Engine
from dpsql.execution.caveats import attach_caveats
from dpsql.execution.postprocess import Result, made_up_answer
from dpsql.execution.retention import Retention
from dpsql.explanation.explanation import Explanation
from dpsql.ledger.budget import Ledger
from dpsql.privacy.accounting import Cost, query_cost
from dpsql.privacy.plan import Plan
from dpsql.routes.pipeline import answer, engine_sql, explain
from dpsql.routes.route import Answering, Measured, Route


@dataclass(frozen=True)
class PrivatePlan(Route):
    plan: Plan

    @property
    def prepared(self) -> Plan:
        return self.plan

    @property
    def epsilon(self) -> float:  # type: ignore[override]
        return self.plan.epsilon

    @property
    def delta(self) -> float:  # type: ignore[override]
        return self.plan.delta

    @property
    def mechanism(self) -> str:  # type: ignore[override]
        return self.plan.mechanism

    @property
    def cost_epsilon(self) -> float:
        return self.plan.cost_epsilon

    @property
    def cost_delta(self) -> float:
        return self.plan.cost_delta

    @property
    def output_names(self) -> list[str]:
        return self.plan.query.output_names

    @property
    def reports(self) -> bool:
        return True

    @property
    def measured(self) -> tuple[Measured, ...]:
        return (Measured(self.plan),)

    def cost(self, accounting: str) -> Cost:
        return query_cost(self.plan, accounting)

    def check(self, engine: Engine, ledger: Ledger | None, analyst: str | None) -> None:
        engine_sql(self.plan, engine)  # bound by the engine before any charge (cached)

    def retained(self) -> Plan:
        return self.plan

    def answer(self, context: Answering) -> Result:
        return answer(self.plan, context.engine, context.rng)

    def explain(self, engine: Engine | None) -> Explanation:
        return explain(self.plan, engine)

    def columns(self) -> list[tuple[str, str]]:
        return [(c.name, c.type) for c in made_up_answer(self.plan).columns]

    def caveats(self, result: Result, retention: Retention | None) -> None:
        attach_caveats(self.plan, result, retention)
