"""Start, cancel and await fiber workflows: used by the gateway and by the worker's activities.

A start records the fiber in the store first (the idempotency key dedups there), then starts
`FiberWorkflow(fiber-{id})`; a start that fails removes the fiber it recorded, so a refused
request leaves nothing behind, and a repeated request with the same key starts the workflow
of a fiber still `pending` again (an idempotent start: same workflow id).
"""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.common import Priority, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from perdure.domain.fiber_payloads import FiberInput, FiberKind
from perdure.domain.names import FIBER_WORKFLOW, fiber_workflow_id
from perdure.domain.turn_priority import BACKGROUND_PRIORITY
from perdure.turn_control.fairness_keys import fairness_key
from storage.db import Database
from storage.fibers import RecordOutcome, forget_unstarted, record_fiber

FINISH_MARGIN = timedelta(hours=1)
"""Beyond the fiber's own limits, for its finishing step (hooks) before the workflow's
execution timeout ends it regardless."""

Guard = Callable[[Awaitable[None]], Awaitable[None]]
"""Wraps the Temporal call (the gateway bounds it in time and maps an outage to a 503)."""


def execution_timeout(kind: FiberKind) -> timedelta:
    """The Temporal backstop of a whole fiber: recoveries happen until its maximum age, and
    the last may run its full time limit."""
    return timedelta(seconds=kind.max_age_seconds + kind.max_run_seconds) + FINISH_MARGIN


async def start_fiber_workflow(
    client: Client,
    *,
    fiber_id: str,
    tenant_id: str,
    kind: FiberKind,
    task_queue: str,
    eager: bool,
) -> None:
    """Idempotent: attaches to a running workflow and never restarts a finished one. A fiber
    is background work: behind interactive turns, in its tenant's share of the queue."""
    with contextlib.suppress(WorkflowAlreadyStartedError):
        await client.start_workflow(
            FIBER_WORKFLOW,
            FiberInput(fiber_id=fiber_id, kind=kind),
            id=fiber_workflow_id(fiber_id),
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            execution_timeout=execution_timeout(kind),
            static_summary=f"fiber {kind.agent}.{kind.name}",
            request_eager_start=eager,
            priority=Priority(
                priority_key=BACKGROUND_PRIORITY, fairness_key=fairness_key(tenant_id)
            ),
        )


async def _unguarded(call: Awaitable[None]) -> None:
    await call


async def start_fiber(
    db: Database,
    client: Client,
    *,
    task_queue: str,
    tenant_id: str,
    kind: FiberKind,
    kinds: list[FiberKind],
    payload: Any,
    idempotency_key: str | None,
    metadata: dict[str, Any],
    eager: bool = False,
    guard: Guard = _unguarded,
) -> RecordOutcome:
    """Record the fiber (or find the tenant's fiber with this key) and start its workflow."""
    outcome = await record_fiber(
        db,
        tenant_id=tenant_id,
        kind=kind,
        payload=payload,
        idempotency_key=idempotency_key,
        metadata=metadata,
    )
    fiber = outcome.fiber
    if fiber.status != "pending":
        return outcome
    # The key may name a fiber of another kind than asked: start it with its own limits.
    own = next((k for k in kinds if (k.agent, k.name) == (fiber.agent, fiber.name)), None)
    if own is None:
        return outcome
    try:
        await guard(
            start_fiber_workflow(
                client,
                fiber_id=fiber.id,
                tenant_id=fiber.tenant_id,
                kind=own,
                task_queue=task_queue,
                eager=eager,
            )
        )
    except BaseException:
        if outcome.created:  # a repeated request leaves the original's fiber alone
            await asyncio.shield(forget_unstarted(db, fiber_id=fiber.id))
        raise
    return outcome


async def cancel_fiber_workflow(client: Client, fiber_id: str) -> bool:
    """Ask the fiber's workflow to cancel (durable: Temporal delivers it to the running
    attempt through its heartbeats); False when there is no such workflow."""
    try:
        await client.get_workflow_handle(fiber_workflow_id(fiber_id)).cancel()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def wait_fiber_ended(client: Client, fiber_id: str, *, max_wait: float) -> None:
    """Return when the fiber's workflow has closed, however it ended, or after `max_wait`
    seconds (the caller reads the fiber's state from the store either way)."""
    handle = client.get_workflow_handle(fiber_workflow_id(fiber_id))
    with contextlib.suppress(Exception):
        async with asyncio.timeout(max_wait):
            await handle.result()
