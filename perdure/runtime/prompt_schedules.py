"""Declared prompt schedules (`Agent.schedules`), kept in step by every worker on start."""

import logging

from temporalio.service import RPCError, RPCStatusCode

from perdure.agents_registry import AgentRegistry, served_concurrency
from perdure.runtime.services import Services
from perdure.schedules import PromptSchedule
from perdure.turn_control.prompt_schedules import delete_prompt_schedule, ensure_prompt_schedule
from storage.prompt_schedules import (
    declared_by,
    delete_schedule,
    new_row,
    record_served_agents,
    upsert_declared,
)
from storage.schedule_tables import PromptScheduleRow

log = logging.getLogger("perdure.schedules")


def declared_rows(agents: AgentRegistry) -> list[PromptScheduleRow]:
    """Every agent's declared schedules as store rows; two declarations of one id for one
    tenant are refused, as two agents of one name are."""
    rows: dict[tuple[str, str], PromptScheduleRow] = {}
    for name in agents.names():
        for schedule in agents.resolve(name).schedules:
            if not isinstance(schedule, PromptSchedule):
                raise TypeError(
                    f"agent {name!r}: `schedules` holds {type(schedule).__name__}, "
                    "not PromptSchedule"
                )
            key = (schedule.tenant_id, schedule.id)
            if key in rows:
                raise ValueError(
                    f"agents {rows[key].agent!r} and {name!r} both declare schedule "
                    f"{schedule.id!r} for tenant {schedule.tenant_id!r}"
                )
            rows[key] = new_row(
                tenant_id=schedule.tenant_id,
                schedule_id=schedule.id,
                agent=name,
                session_id=schedule.session_id,
                prompt=schedule.prompt,
                recurrence=schedule.recurrence(),
                source="declared",
                paused=schedule.paused,
            )
    return list(rows.values())


async def sync_declared_schedules(services: Services, agents: AgentRegistry) -> None:
    """Record the agents served on this task queue (the gateway checks them), create or
    update each declared schedule, and delete those these agents no longer declare.

    Idempotent, and safe with several workers starting at once: each step converges on the
    same rows and Temporal Schedules whichever worker gets there first.
    """
    client, db, task_queue = services.client, services.db, services.settings.task_queue
    names = agents.names()
    declared = declared_rows(agents)
    await record_served_agents(
        db,
        task_queue=task_queue,
        concurrency={name: served_concurrency(agents.resolve(name)) for name in names},
    )
    for row in declared:
        stored = await upsert_declared(db, row)
        try:
            await ensure_prompt_schedule(client, stored, task_queue=task_queue)
        except RPCError as error:
            if error.status != RPCStatusCode.INVALID_ARGUMENT:
                raise
            raise ValueError(
                f"agent {row.agent!r}: Temporal refused schedule {row.id!r}: {error}"
            ) from error
    current = {(row.tenant_id, row.id) for row in declared}
    for stale in await declared_by(db, agents=names):
        if (stale.tenant_id, stale.id) in current:
            continue
        await delete_prompt_schedule(
            client, task_queue=task_queue, tenant_id=stale.tenant_id, schedule_id=stale.id
        )
        await delete_schedule(db, tenant_id=stale.tenant_id, schedule_id=stale.id)
        log.info(
            "deleted schedule %s (tenant %s): agent %s no longer declares it",
            stale.id,
            stale.tenant_id,
            stale.agent,
        )
