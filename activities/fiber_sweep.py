"""The reconciler's repair of fibers no workflow serves: a fiber is recorded before its
workflow starts, so a gateway or worker that dies in between leaves it `pending` with no
workflow; and a workflow that ends without settling its fiber (terminated by an operator, or
out of its execution time) leaves it `pending` or `running`. Either would show a fiber that
never ends."""

import logging
from dataclasses import dataclass, field

from temporalio.client import Client

from perdure.domain.fiber_payloads import FiberKind
from perdure.domain.names import fiber_workflow_id
from perdure.turn_control.client import workflow_state
from perdure.turn_control.fibers import start_fiber_workflow
from storage.db import Database
from storage.fiber_tables import FiberRow
from storage.fibers import fiber_kinds, settle_fiber, stale_unsettled_fibers

SWEEP_BATCH = 200
"""Fibers looked at per run at most, oldest first: the rest wait for the next run."""

log = logging.getLogger(__name__)


@dataclass
class FiberSweep:
    started: list[str] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)


async def sweep_fibers(
    db: Database, client: Client, *, task_queue: str, older_than: float
) -> FiberSweep:
    sweep = FiberSweep()
    fibers = await stale_unsettled_fibers(db, older_than=older_than, limit=SWEEP_BATCH)
    if not fibers:
        return sweep
    kinds = {(kind.agent, kind.name): kind for kind in await fiber_kinds(db, task_queue=task_queue)}
    for fiber in fibers:
        try:
            await _repair(db, client, fiber, kinds, task_queue=task_queue, sweep=sweep)
        except Exception:
            # One fiber that cannot be repaired now must not keep the others (and the rest of
            # the reconcile run) from theirs: the next run tries it again.
            log.exception("fiber %s could not be reconciled; the next run tries again", fiber.id)
    return sweep


async def _repair(
    db: Database,
    client: Client,
    fiber: FiberRow,
    kinds: dict[tuple[str, str], FiberKind],
    *,
    task_queue: str,
    sweep: FiberSweep,
) -> None:
    state = await workflow_state(client, fiber_workflow_id(fiber.id))
    if state == "RUNNING":
        return
    kind = kinds.get((fiber.agent, fiber.name))
    if state == "missing" and fiber.status == "pending" and kind is not None:
        await start_fiber_workflow(
            client,
            fiber_id=fiber.id,
            tenant_id=fiber.tenant_id,
            kind=kind,
            task_queue=task_queue,
            eager=False,
        )
        sweep.started.append(fiber.id)
        return
    settled = await settle_fiber(
        db,
        fiber_id=fiber.id,
        status="error",
        error=_why_unserved(fiber, state, served=kind is not None),
        event={"reason": "reconciled", "workflowState": state},
    )
    if settled is not None and settled.status == "error":
        sweep.settled.append(fiber.id)


def _why_unserved(fiber: FiberRow, state: str, *, served: bool) -> str:
    if state != "missing":
        return f"the fiber's workflow ended ({state}) before settling it"
    if fiber.status == "pending" and not served:
        return (
            f"its workflow never started, and no worker serves fiber "
            f"{fiber.agent}.{fiber.name} any more"
        )
    return "the fiber's workflow is gone (past Temporal's retention) and never settled it"
