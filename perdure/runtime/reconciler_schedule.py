"""The reconciler schedule (docs/architecture.md, "The reconciler"), created once per task
queue by the workers."""

from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
)

from perdure.domain.names import RECONCILER_WORKFLOW, reconciler_schedule_id
from perdure.domain.payloads import ReconcileInput

RECONCILE_EVERY = timedelta(minutes=2)
"""Each run is a workflow in the UI's list: often enough that a blocked session is released
within ~3 minutes, rare enough not to bury the turns (720 runs a day)."""


def _schedule(schedule_id: str, task_queue: str) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            RECONCILER_WORKFLOW,
            ReconcileInput(),
            id=f"{schedule_id}-run",
            task_queue=task_queue,
            execution_timeout=timedelta(minutes=5),
            static_summary="repair submissions no workflow is serving",
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=RECONCILE_EVERY)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def ensure_reconciler_schedule(client: Client, *, task_queue: str) -> None:
    """Every worker calls it on start: the first creates the schedule, later ones bring an
    existing one up to this version's definition."""
    schedule_id = reconciler_schedule_id(task_queue)
    schedule = _schedule(schedule_id, task_queue)
    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:
        await client.get_schedule_handle(schedule_id).update(
            lambda _: ScheduleUpdate(schedule=schedule)
        )
