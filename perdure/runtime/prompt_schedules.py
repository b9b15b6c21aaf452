"""Declared prompt schedules (`Agent.schedules`), kept in step by every worker on start."""

from perdure.agents_registry import AgentRegistry, served_concurrency
from perdure.runtime.services import Services
from perdure.schedules import PromptSchedule
from perdure.turn_control.prompt_schedule_lifecycle import sync_declared
from storage.prompt_schedules import new_row, record_served_agents
from storage.schedule_tables import PromptScheduleRow


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
    """Record the agents served on this task queue (the gateway checks them), then bring the
    schedules they declare in step (`turn_control.prompt_schedule_lifecycle.sync_declared`)."""
    names = agents.names()
    declared = declared_rows(agents)
    task_queue = services.settings.task_queue
    await record_served_agents(
        services.db,
        task_queue=task_queue,
        concurrency={name: served_concurrency(agents.resolve(name)) for name in names},
    )
    await sync_declared(
        services.db, services.client, task_queue=task_queue, declared=declared, agents=names
    )
