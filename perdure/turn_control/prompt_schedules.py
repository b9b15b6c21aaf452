"""The Temporal Schedules of prompt schedules: used by their lifecycle through the API
(prompt_schedule_lifecycle.py) and by the workers (declared schedules). One Temporal Schedule
per stored schedule, id `domain.names.prompt_schedule_id`; each action starts a
`ScheduledPromptWorkflow`."""

import asyncio
from datetime import UTC, datetime, timedelta

from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.workflowservice.v1 import ListScheduleMatchingTimesRequest
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleBackfill,
    ScheduleDescription,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from perdure.domain.names import SCHEDULED_PROMPT_WORKFLOW, prompt_schedule_id
from perdure.domain.prompt_schedules import FireScheduleInput
from perdure.turn_control.rpc import TRANSIENT_RPC_STATUSES
from storage.prompt_schedules import recurrence_of
from storage.schedule_tables import PromptScheduleRow

MATCHING_TIMES_RETRY_PAUSES = (0.2, 0.5, 1.0)
"""Seconds before each further attempt of a read Temporal cancelled or timed out."""
CATCHUP_WINDOW = timedelta(minutes=1)
"""Missed occurrences are not made up: one Temporal could not start on time (the server was
down, say) still runs if it is at most this late; older ones are dropped. Temporal's default
would make up a whole year. `backfill` runs past occurrences on request."""
OCCURRENCE_TIMEOUT = timedelta(minutes=10)
"""Bounds one occurrence's workflow (it only submits; its retries end within ~4 minutes)."""
OVERLAP = ScheduleOverlapPolicy.BUFFER_ALL
"""One occurrence's workflow at a time, the others wait their turn: occurrences are submitted
in time order (a backfill starts several at once), so their turns queue in the session in that
order. It skips none, and costs nothing: the workflow ends once its turn is submitted."""
NOTE = "Perdure scheduled prompt"


def _spec(row: PromptScheduleRow) -> ScheduleSpec:
    recurrence = recurrence_of(row)
    if recurrence.cron is not None:
        return ScheduleSpec(
            cron_expressions=[recurrence.cron], time_zone_name=recurrence.timezone or "UTC"
        )
    assert recurrence.every_seconds is not None
    return ScheduleSpec(
        intervals=[ScheduleIntervalSpec(every=timedelta(seconds=recurrence.every_seconds))]
    )


def temporal_schedule(row: PromptScheduleRow, *, task_queue: str) -> Schedule:
    schedule_id = prompt_schedule_id(task_queue, row.tenant_id, row.id)
    return Schedule(
        action=ScheduleActionStartWorkflow(
            SCHEDULED_PROMPT_WORKFLOW,
            FireScheduleInput(tenant_id=row.tenant_id, schedule_id=row.id),
            # Temporal appends each occurrence's time to make the workflow's id.
            id=schedule_id,
            task_queue=task_queue,
            execution_timeout=OCCURRENCE_TIMEOUT,
            static_summary=f"scheduled prompt {row.id!r} into session {row.session_id!r}",
        ),
        spec=_spec(row),
        policy=SchedulePolicy(overlap=OVERLAP, catchup_window=CATCHUP_WINDOW),
        state=ScheduleState(paused=row.paused, note=f"{NOTE} ({row.source})"),
    )


async def ensure_prompt_schedule(
    client: Client, row: PromptScheduleRow, *, task_queue: str
) -> None:
    """Create the row's Temporal Schedule, or bring an existing one up to the row. An
    existing one keeps its paused state: pausing is Temporal's state, not the definition."""
    schedule = temporal_schedule(row, task_queue=task_queue)
    schedule_id = prompt_schedule_id(task_queue, row.tenant_id, row.id)
    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:

        def keep_state(current: ScheduleUpdateInput) -> ScheduleUpdate:
            schedule.state = current.description.schedule.state
            return ScheduleUpdate(schedule=schedule)

        await client.get_schedule_handle(schedule_id).update(keep_state)


def _not_found(error: RPCError) -> bool:
    return error.status == RPCStatusCode.NOT_FOUND


async def delete_prompt_schedule(
    client: Client, *, task_queue: str, tenant_id: str, schedule_id: str
) -> None:
    """Idempotent: a schedule already gone is fine."""
    handle = client.get_schedule_handle(prompt_schedule_id(task_queue, tenant_id, schedule_id))
    try:
        await handle.delete()
    except RPCError as error:
        if not _not_found(error):
            raise


async def pause_prompt_schedule(
    client: Client, *, task_queue: str, tenant_id: str, schedule_id: str, paused: bool
) -> None:
    handle = client.get_schedule_handle(prompt_schedule_id(task_queue, tenant_id, schedule_id))
    if paused:
        await handle.pause(note=f"{NOTE}: paused through Perdure")
    else:
        await handle.unpause(note=f"{NOTE}: resumed through Perdure")


async def describe_prompt_schedule(
    client: Client, *, task_queue: str, tenant_id: str, schedule_id: str
) -> ScheduleDescription | None:
    handle = client.get_schedule_handle(prompt_schedule_id(task_queue, tenant_id, schedule_id))
    try:
        return await handle.describe()
    except RPCError as error:
        if _not_found(error):
            return None
        raise


async def trigger_prompt_schedule(
    client: Client, *, task_queue: str, tenant_id: str, schedule_id: str
) -> None:
    """One occurrence now, paused or not; its time is the moment Temporal takes the action."""
    handle = client.get_schedule_handle(prompt_schedule_id(task_queue, tenant_id, schedule_id))
    await handle.trigger(overlap=OVERLAP)


def _timestamp(moment: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(moment)
    return stamp


async def matching_times(
    client: Client,
    *,
    task_queue: str,
    tenant_id: str,
    schedule_id: str,
    start: datetime,
    end: datetime,
) -> list[datetime]:
    """The occurrences of the schedule after `start` up to `end`, as Temporal computes them.

    Temporal answers this from the schedule's own workflow; a busy server may cancel the call
    or let it time out. It only reads, so it is asked again, a bounded number of times."""
    request = ListScheduleMatchingTimesRequest(
        namespace=client.namespace,
        schedule_id=prompt_schedule_id(task_queue, tenant_id, schedule_id),
        start_time=_timestamp(start),
        end_time=_timestamp(end),
    )
    for pause in (*MATCHING_TIMES_RETRY_PAUSES, None):
        try:
            response = await client.workflow_service.list_schedule_matching_times(request)
        except RPCError as error:
            if pause is None or error.status not in TRANSIENT_RPC_STATUSES:
                raise
            await asyncio.sleep(pause)
        else:
            return [moment.ToDatetime(tzinfo=UTC) for moment in response.start_time]
    raise AssertionError("unreachable: the last attempt returns or raises")


async def backfill_prompt_schedule(
    client: Client,
    *,
    task_queue: str,
    tenant_id: str,
    schedule_id: str,
    start: datetime,
    end: datetime,
) -> None:
    """Run the occurrences after `start` up to `end` now, paused or not. Each is keyed by its
    own time, so one that already ran runs nothing again."""
    handle = client.get_schedule_handle(prompt_schedule_id(task_queue, tenant_id, schedule_id))
    await handle.backfill(ScheduleBackfill(start_at=start, end_at=end, overlap=OVERLAP))
