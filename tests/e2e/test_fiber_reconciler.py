"""The reconciler repairs fibers no workflow serves, so no fiber stays `pending` or `running`
forever: one whose starter died before starting its workflow is started, and one whose
workflow ended without settling it, or whose kind nobody serves any more, ends in `error`."""

import uuid
from typing import Any

import httpx
import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from activities import fiber_sweep
from perdure.domain.fiber_payloads import FiberInput, FiberKind
from perdure.domain.names import FIBER_WORKFLOW, fiber_workflow_id
from perdure.testing.stack import Stack
from storage.fibers import fiber_kinds, record_fiber
from tests.e2e.test_fibers import AGENT, ended, event_types
from tests.e2e.test_reconciler import reconcile_now


async def served_kind(stack: Stack, name: str) -> FiberKind:
    kinds = await fiber_kinds(stack.services.db, task_queue=stack.settings.task_queue)
    return next(kind for kind in kinds if (kind.agent, kind.name) == (AGENT, name))


async def orphan(stack: Stack, kind: FiberKind, payload: object = None) -> str:
    """What a gateway leaves behind when it dies between recording a fiber and starting it."""
    recorded = await record_fiber(
        stack.services.db,
        tenant_id="default",
        kind=kind,
        payload=payload,
        idempotency_key=None,
        metadata={},
    )
    return recorded.fiber.id


async def test_a_fiber_whose_starter_died_before_starting_it_is_started(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    fiber_id = await orphan(stack, await served_kind(stack, "count"), {"to": 20})

    report = await reconcile_now(stack)

    assert fiber_id in report.fibers_started
    fiber = await ended(http, fiber_id)
    assert fiber["status"] == "completed"
    assert fiber["result"] == {"n": 20, "total": 20 * 21 // 2}


async def test_a_fiber_whose_workflow_ended_without_settling_it_ends_in_error(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    kind = await served_kind(stack, "count")
    fiber_id = await orphan(stack, kind, {"to": 20})
    # Its workflow, on a queue no worker polls, terminated before it ran (as by an operator).
    handle = await stack.services.client.start_workflow(
        FIBER_WORKFLOW,
        FiberInput(fiber_id=fiber_id, kind=kind),
        id=fiber_workflow_id(fiber_id),
        task_queue=f"nobody-{uuid.uuid4().hex[:8]}",
    )
    await handle.terminate(reason="operator")

    report = await reconcile_now(stack)

    assert fiber_id in report.fibers_settled
    fiber = (await http.get(f"/v1/fibers/{fiber_id}")).json()
    assert fiber["status"] == "error"
    assert fiber["error"] == "the fiber's workflow ended (TERMINATED) before settling it"
    assert await event_types(http, fiber_id) == ["fiber.failed"]


async def test_a_pending_fiber_of_a_kind_nobody_serves_ends_in_error_naming_it(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    retired = (await served_kind(stack, "count")).model_copy(update={"name": "retired"})
    fiber_id = await orphan(stack, retired)

    report = await reconcile_now(stack)

    assert fiber_id in report.fibers_settled
    fiber = (await http.get(f"/v1/fibers/{fiber_id}")).json()
    assert fiber["status"] == "error"
    assert "no worker serves fiber fibers.retired" in fiber["error"]


async def test_a_fiber_its_workflow_is_running_is_left_alone(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    started = await http.post(
        "/v1/fibers", json={"agent": AGENT, "name": "wait_for_cancel", "payload": None}
    )
    fiber_id = started.json()["fiberId"]

    report = await reconcile_now(stack)

    assert fiber_id not in report.fibers_started + report.fibers_settled
    assert (await http.post(f"/v1/fibers/{fiber_id}/cancel")).status_code == 202
    assert (await ended(http, fiber_id))["status"] == "cancelled"


async def test_a_fiber_that_cannot_be_repaired_now_does_not_hold_up_the_others(
    stack: Stack, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind = await served_kind(stack, "count")
    stuck = await orphan(stack, kind, {"to": 3})  # the older: looked at first
    other = await orphan(stack, kind, {"to": 4})
    real_start = fiber_sweep.start_fiber_workflow

    async def failing_for_stuck(client: Client, *, fiber_id: str, **options: Any) -> None:
        if fiber_id == stuck:
            raise RPCError("the frontend is overloaded", RPCStatusCode.RESOURCE_EXHAUSTED, b"")
        await real_start(client, fiber_id=fiber_id, **options)

    monkeypatch.setattr(fiber_sweep, "start_fiber_workflow", failing_for_stuck)
    first = await reconcile_now(stack)
    monkeypatch.undo()
    second = await reconcile_now(stack)

    assert other in first.fibers_started and stuck not in first.fibers_started
    assert stuck in second.fibers_started
    assert (await ended(http, other))["result"] == {"n": 4, "total": 10}
    assert (await ended(http, stuck))["result"] == {"n": 3, "total": 6}
