"""The reconciler repairs fibers no workflow serves, so no fiber stays `pending` or `running`
forever: one whose starter died before starting its workflow is started, and one whose
workflow ended without settling it, or whose kind nobody serves any more, ends in `error`."""

import uuid

import httpx

from domain.fiber_payloads import FiberInput, FiberKind
from domain.names import FIBER_WORKFLOW, fiber_workflow_id
from storage.fibers import fiber_kinds, record_fiber
from tests.e2e.test_fibers import AGENT, ended, event_types
from tests.e2e.test_reconciler import reconcile_now
from tests.stack import Stack


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
