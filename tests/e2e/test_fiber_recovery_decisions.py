"""`on_fiber_recovered` decides a recovered fiber's fate, as the Forever design has it.

Each test records a fiber and claims it once, as its first attempt did before its worker died;
the run activity's next attempt (the recovery Temporal would schedule) then meets the hook."""

import dataclasses
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.fiber import FiberActivities
from perdure import Agent, FiberContext, FiberRecovery, fiber
from perdure.agents_registry import AgentRegistry
from perdure.domain.fiber_payloads import FiberKind, RunFiberInput
from storage.db import Database
from storage.fibers import claim_fiber, fiber_events, load_fiber, record_fiber, stash_fiber

method_runs: list[str] = []


class Decides(Agent):
    """Its fiber's payload says what `on_fiber_recovered` decides."""

    name = "decides"

    @fiber
    async def work(self, ctx: FiberContext, payload: dict[str, Any]) -> str:
        method_runs.append(ctx.fiber_id)
        return "ran again"

    async def on_fiber_recovered(self, ctx: FiberContext) -> FiberRecovery | None:
        decision = (ctx.metadata or {}).get("decision")
        if decision == "complete":
            return FiberRecovery(status="completed", result={"from": ctx.snapshot})
        if decision == "fail":
            return FiberRecovery(status="error", error="the export vanished upstream")
        if decision == "cancel":
            return FiberRecovery(status="cancelled", snapshot={"abandoned_at": ctx.snapshot})
        if decision == "raise":
            raise RuntimeError("this hook is broken")
        return None


KIND = FiberKind(
    agent="decides",
    name="work",
    max_age_seconds=3600,
    max_run_seconds=60,
    max_attempts=10,
    hook_timeout_seconds=10,
)


async def recovered(store: Database, decision: str) -> str:
    recorded = await record_fiber(
        store,
        tenant_id="default",
        kind=KIND,
        payload={},
        idempotency_key=None,
        metadata={"decision": decision},
    )
    fiber_id = recorded.fiber.id
    first = await claim_fiber(store, fiber_id=fiber_id, max_age_seconds=3600)
    assert first is not None and first.outcome == "run"
    await stash_fiber(store, fiber_id=fiber_id, attempt=first.attempt, snapshot={"page": 7})
    activities = FiberActivities(db=store, agents=AgentRegistry([Decides()]))
    retry = ActivityEnvironment()
    retry.info = dataclasses.replace(retry.info, attempt=2)
    await retry.run(
        activities.run_fiber, RunFiberInput(fiber_id=fiber_id, agent="decides", name="work")
    )
    return fiber_id


async def test_the_hook_may_complete_a_recovered_fiber_with_a_result(store: Database) -> None:
    fiber_id = await recovered(store, "complete")

    row = await load_fiber(store, fiber_id)
    assert row is not None
    assert (row.status, row.result, row.attempts) == ("completed", {"from": {"page": 7}}, 2)
    assert fiber_id not in method_runs
    events = [e.type for e in await fiber_events(store, fiber_id=fiber_id, after_id=0, limit=10)]
    assert events == ["fiber.started", "fiber.recovered", "fiber.completed"]


async def test_the_hook_may_end_a_recovered_fiber_in_error_saying_why(store: Database) -> None:
    fiber_id = await recovered(store, "fail")

    row = await load_fiber(store, fiber_id)
    assert row is not None
    assert (row.status, row.error) == ("error", "the export vanished upstream")
    assert fiber_id not in method_runs


async def test_the_hook_may_cancel_a_recovered_fiber_and_replace_its_snapshot(
    store: Database,
) -> None:
    fiber_id = await recovered(store, "cancel")

    row = await load_fiber(store, fiber_id)
    assert row is not None
    assert (row.status, row.snapshot) == ("cancelled", {"abandoned_at": {"page": 7}})
    assert fiber_id not in method_runs


async def test_without_a_decision_the_recovered_fiber_runs_again(store: Database) -> None:
    fiber_id = await recovered(store, "none")

    row = await load_fiber(store, fiber_id)
    assert row is not None
    assert (row.status, row.result) == ("completed", "ran again")
    assert fiber_id in method_runs


async def test_a_hook_that_raises_lets_the_recovered_fiber_run_again(store: Database) -> None:
    fiber_id = await recovered(store, "raise")

    row = await load_fiber(store, fiber_id)
    assert row is not None
    assert (row.status, row.result) == ("completed", "ran again")
