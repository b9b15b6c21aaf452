"""Scheduled prompts: create, list, read, change, pause, resume, trigger, backfill, delete.

The store says which tenant a schedule belongs to and what it sends; its Temporal Schedule says
when. Schedules declared on an agent (`Agent.schedules`) are listed here too and may be paused,
resumed, triggered and backfilled, but not changed or deleted: the code that declares them
owns them.
"""

import asyncio
import uuid
import weakref
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import Annotated, TypeVar

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel
from temporalio.client import Client, ScheduleActionExecutionStartWorkflow, ScheduleDescription
from temporalio.service import RPCError, RPCStatusCode

from gateway.access import tenant_limits
from gateway.body_limits import body_limit
from gateway.deps import DbDep, SettingsDep, TemporalDep, TenantDep
from gateway.errors import ApiError, InvalidField, invalid_request
from gateway.schemas.schedules import (
    BackfillRequest,
    BackfillResult,
    RecentRun,
    ScheduleChange,
    ScheduleCreate,
    ScheduleDetail,
    SchedulePublic,
    SchedulesPublic,
    schedule_fields,
)
from gateway.temporal import TEMPORAL_TIMEOUT_SECONDS, temporal_call
from perdure.domain.schedules import (
    MAX_PROMPT_CHARS,
    SCHEDULE_ID_PATTERN,
)
from perdure.runtime.settings import Settings
from perdure.turn_control.prompt_schedules import (
    backfill_prompt_schedule,
    delete_prompt_schedule,
    describe_prompt_schedule,
    ensure_prompt_schedule,
    matching_times,
    pause_prompt_schedule,
    trigger_prompt_schedule,
)
from storage.db import Database
from storage.schedule_tables import PromptScheduleRow
from storage.schedules import (
    ScheduleDefinition,
    define_schedule,
    delete_schedule,
    get_schedule,
    insert_schedule,
    list_schedules,
    new_row,
    served_agents,
    set_paused,
)
from storage.tenant_policies import TenantLimits

router = APIRouter(prefix="/v1/schedules", tags=["schedules"])
BODY_LIMIT_BYTES = 4 * MAX_PROMPT_CHARS + 4096
"""The prompt in JSON at worst (4 bytes a character) and the few other fields."""
MAX_BACKFILL_OCCURRENCES = 100
MAX_OFFSET = 2**31 - 1
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

ScheduleIdPath = Annotated[
    str, Path(pattern=SCHEDULE_ID_PATTERN, description="The schedule's id (per tenant).")
]


def _detail(
    row: PromptScheduleRow, task_queue: str, described: ScheduleDescription | None
) -> ScheduleDetail:
    fields = schedule_fields(row, task_queue)
    if described is None:  # deleted from Temporal by hand: shown as it is stored
        return ScheduleDetail.model_validate({**fields, "next_run_times": [], "recent_runs": []})
    runs = [
        RecentRun(
            scheduled_at=result.scheduled_at,
            started_at=result.started_at,
            workflow_id=result.action.workflow_id
            if isinstance(result.action, ScheduleActionExecutionStartWorkflow)
            else None,
        )
        for result in described.info.recent_actions
    ]
    return ScheduleDetail.model_validate(
        {
            **fields,
            "paused": described.schedule.state.paused,
            "next_run_times": []
            if described.schedule.state.paused
            else described.info.next_action_times,
            "recent_runs": runs,
        }
    )


def schedule_not_found(schedule_id: str) -> ApiError:
    return ApiError(404, "schedule_not_found", f"schedule {schedule_id!r} not found")


async def _owned(db: Database, tenant: str, schedule_id: str) -> PromptScheduleRow:
    row = await get_schedule(db, tenant_id=tenant, schedule_id=schedule_id)
    if row is None:
        raise schedule_not_found(schedule_id)
    return row


def _refuse_declared(row: PromptScheduleRow, instead: str) -> None:
    """A declared schedule belongs to the code that declares it (409)."""
    if row.source == "declared":
        raise ApiError(
            409,
            "declared_schedule",
            f"schedule {row.id!r} is declared on agent {row.agent!r}: {instead}",
        )


async def _checked_agent(
    db: Database, settings: Settings, agent: str, admitted: TenantLimits
) -> None:
    """The gateway never imports agent code: the workers record what they serve. The refusal
    names only agents the tenant may use."""
    served = await served_agents(db, task_queue=settings.task_queue)
    if agent in served or (agent == "default" and served):
        return  # `default` is the first agent when none is named so (as for chats)
    known = ", ".join(admitted.usable(served)) or (
        "none this tenant may use"
        if served
        else "none yet (no worker has started on this task queue)"
    )
    raise ApiError(422, "unknown_agent", f"unknown agent {agent!r}; the workers serve: {known}")


async def _temporal(client: Client, call: Awaitable[T]) -> T:
    """`call`, bounded (gateway/temporal.py); a Temporal Schedule deleted behind Perdure's
    back is a clear 409, not a 500."""
    try:
        return await temporal_call(call, within=TEMPORAL_TIMEOUT_SECONDS, client=client)
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise ApiError(
                409,
                "schedule_missing_in_temporal",
                "the schedule's Temporal Schedule no longer exists (deleted outside Perdure); "
                "any change (PATCH) re-creates it, as deleting and creating the schedule again "
                "does (a declared one is re-created when a worker starts)",
            ) from None
        raise


@router.post(
    "",
    status_code=201,
    summary="Create a scheduled prompt",
)
@body_limit(BODY_LIMIT_BYTES)
async def create(
    body: ScheduleCreate, db: DbDep, client: TemporalDep, settings: SettingsDep, tenant: TenantDep
) -> SchedulePublic:
    """Each occurrence sends `prompt` into the tenant's chat `sessionId` as a user message,
    queued like any chat message and submitted once per occurrence (`schedule:{id}:{time}`).
    A schedule id already taken is a 409; an agent no worker serves a 422."""
    agent = body.agent or settings.default_agent
    admitted = await tenant_limits(db, settings, tenant, agent)  # else 403
    await _checked_agent(db, settings, agent, admitted)
    row = new_row(
        tenant_id=tenant,
        schedule_id=body.id or f"sch-{uuid.uuid4().hex[:16]}",
        agent=agent,
        session_id=body.session_id,
        prompt=body.prompt,
        recurrence=body.recurrence(),
        source="api",
        paused=body.paused,
    )
    if not await insert_schedule(db, row):
        raise ApiError(409, "schedule_exists", f"schedule {row.id!r} already exists")
    try:
        await _temporal(
            client,
            ensure_prompt_schedule(client, row, task_queue=settings.task_queue),
        )
    except Exception as error:
        # Nothing stays half-made: without its Temporal Schedule the row would never fire. (A
        # create that timed out here but reached Temporal leaves a schedule whose occurrences
        # find no row and submit nothing; creating the id again takes it over.)
        await delete_schedule(db, tenant_id=tenant, schedule_id=row.id)
        if isinstance(error, RPCError) and error.status == RPCStatusCode.INVALID_ARGUMENT:
            raise ApiError(422, "invalid_schedule", f"Temporal refused it: {error}") from None
        raise
    return SchedulePublic.of(row, settings.task_queue)


@router.get("", summary="List the tenant's scheduled prompts")
async def list_all(
    db: DbDep,
    settings: SettingsDep,
    tenant: TenantDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> SchedulesPublic:
    rows, total = await list_schedules(db, tenant_id=tenant, limit=limit, offset=offset)
    task_queue = settings.task_queue
    return SchedulesPublic(data=[SchedulePublic.of(row, task_queue) for row in rows], count=total)


@router.get("/{schedule_id}", summary="One scheduled prompt, with its next and recent runs")
async def read(
    schedule_id: ScheduleIdPath,
    db: DbDep,
    client: TemporalDep,
    settings: SettingsDep,
    tenant: TenantDep,
) -> ScheduleDetail:
    row = await _owned(db, tenant, schedule_id)
    task_queue = settings.task_queue
    described = await _temporal(
        client,
        describe_prompt_schedule(
            client, task_queue=task_queue, tenant_id=tenant, schedule_id=row.id
        ),
    )
    return _detail(row, task_queue, described)


PUSH_ROUNDS = 3
"""Times a change re-sends the stored definition when another change was written meanwhile:
the last writer's definition is the one Temporal keeps."""


_PUSHES: "weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock]" = (
    weakref.WeakValueDictionary()
)
"""One push at a time per schedule in this process: concurrent pushes of different rows can
reach Temporal in any order, and the one that lands last must be the newest."""


async def _pushed(db: Database, client: Client, settings: Settings, row: PromptScheduleRow) -> None:
    """Bring the row's Temporal Schedule up to the stored definition (re-created if it was
    deleted outside Perdure), and again while concurrent changes overtake it. Each push sends
    the newest stored row, one at a time per schedule here (another gateway's changes are
    caught by the re-read)."""
    task_queue = settings.task_queue
    key = (row.tenant_id, row.id)
    lock = _PUSHES.get(key) or _PUSHES.setdefault(key, asyncio.Lock())
    async with lock:
        current = await get_schedule(db, tenant_id=row.tenant_id, schedule_id=row.id)
        for _ in range(PUSH_ROUNDS):
            if current is None:
                return
            await _temporal(client, ensure_prompt_schedule(client, current, task_queue=task_queue))
            latest = await get_schedule(db, tenant_id=row.tenant_id, schedule_id=row.id)
            if latest is None or latest.updated_at == current.updated_at:
                return
            current = latest


@router.patch(
    "/{schedule_id}",
    summary="Change what a scheduled prompt sends, where, or when",
)
@body_limit(BODY_LIMIT_BYTES)
async def change(
    body: ScheduleChange,
    schedule_id: ScheduleIdPath,
    db: DbDep,
    client: TemporalDep,
    settings: SettingsDep,
    tenant: TenantDep,
) -> SchedulePublic:
    """Occurrences from now on send the new prompt, to the new session, with the new agent, at
    the new times; turns already submitted go on as they were. Its paused state, its last
    occurrence and its id stay. A schedule declared on an agent is refused (409): change its
    declaration."""
    row = await _owned(db, tenant, schedule_id)
    _refuse_declared(
        row, "change it in the agent's `schedules` (the workers apply it when they next start)"
    )
    before = ScheduleDefinition.of(row)
    try:
        after = body.applied_to(before)
    except InvalidField as error:
        raise invalid_request(error) from None
    if after.agent != before.agent:
        admitted = await tenant_limits(db, settings, tenant, after.agent)  # else 403
        await _checked_agent(db, settings, after.agent, admitted)
    changed = await define_schedule(db, tenant_id=tenant, schedule_id=row.id, definition=after)
    if changed is None:
        raise schedule_not_found(schedule_id)
    try:
        await _pushed(db, client, settings, changed)
    except Exception as error:
        # Nothing half-changed: the store goes back to what Temporal still fires, unless
        # another change has been written since.
        await define_schedule(
            db,
            tenant_id=tenant,
            schedule_id=row.id,
            definition=before,
            unless_updated_since=changed.updated_at,
        )
        if isinstance(error, RPCError) and error.status == RPCStatusCode.INVALID_ARGUMENT:
            raise ApiError(422, "invalid_schedule", f"Temporal refused it: {error}") from None
        raise
    return SchedulePublic.of(changed, settings.task_queue)


async def _set_paused(
    db: Database,
    client: Client,
    settings: Settings,
    tenant: str,
    schedule_id: str,
    *,
    paused: bool,
) -> SchedulePublic:
    row = await _owned(db, tenant, schedule_id)
    task_queue = settings.task_queue
    await _temporal(
        client,
        pause_prompt_schedule(
            client,
            task_queue=task_queue,
            tenant_id=tenant,
            schedule_id=row.id,
            paused=paused,
        ),
    )
    updated = await set_paused(db, tenant_id=tenant, schedule_id=row.id, paused=paused)
    if updated is None:
        raise schedule_not_found(schedule_id)
    return SchedulePublic.of(updated, task_queue)


@router.post("/{schedule_id}/pause", summary="Pause: no occurrence fires until it is resumed")
async def pause(
    schedule_id: ScheduleIdPath,
    db: DbDep,
    client: TemporalDep,
    settings: SettingsDep,
    tenant: TenantDep,
) -> SchedulePublic:
    return await _set_paused(db, client, settings, tenant, schedule_id, paused=True)


@router.post(
    "/{schedule_id}/resume",
    summary="Resume: the next occurrence fires; those missed while paused do not",
)
async def resume(
    schedule_id: ScheduleIdPath,
    db: DbDep,
    client: TemporalDep,
    settings: SettingsDep,
    tenant: TenantDep,
) -> SchedulePublic:
    return await _set_paused(db, client, settings, tenant, schedule_id, paused=False)


@router.post(
    "/{schedule_id}/trigger",
    status_code=202,
    summary="Fire one occurrence now (paused or not), keyed by the time it fires",
)
async def trigger(
    schedule_id: ScheduleIdPath,
    db: DbDep,
    client: TemporalDep,
    settings: SettingsDep,
    tenant: TenantDep,
) -> SchedulePublic:
    """Answers the schedule as it stands; the occurrence's submission shows in its
    `lastSubmissionId` once Temporal has fired it."""
    row = await _owned(db, tenant, schedule_id)
    await _temporal(
        client,
        trigger_prompt_schedule(
            client,
            task_queue=settings.task_queue,
            tenant_id=tenant,
            schedule_id=row.id,
        ),
    )
    return SchedulePublic.of(row, settings.task_queue)


@router.post(
    "/{schedule_id}/backfill",
    status_code=202,
    summary="Run the occurrences of a past period that did not fire",
)
async def backfill(
    body: BackfillRequest,
    schedule_id: ScheduleIdPath,
    db: DbDep,
    client: TemporalDep,
    settings: SettingsDep,
    tenant: TenantDep,
) -> BackfillResult:
    """Missed occurrences are never made up by themselves; this runs those of the period now
    (at most 100), paused or not. Each is keyed by its own time, so an occurrence that already
    ran is not submitted again."""
    row = await _owned(db, tenant, schedule_id)
    start, end = body.start.astimezone(UTC), body.end.astimezone(UTC)
    if start >= end:
        raise ApiError(422, "invalid_period", "`start` must be before `end`")
    if end > datetime.now(UTC) + timedelta(seconds=1):
        raise ApiError(422, "invalid_period", "`end` may not be in the future")
    where = {
        "task_queue": settings.task_queue,
        "tenant_id": tenant,
        "schedule_id": row.id,
    }
    occurrences = await _temporal(client, matching_times(client, start=start, end=end, **where))
    if len(occurrences) > MAX_BACKFILL_OCCURRENCES:
        raise ApiError(
            422,
            "too_many_occurrences",
            f"the period has more than {MAX_BACKFILL_OCCURRENCES} occurrences; "
            "backfill a shorter one",
        )
    if occurrences:
        await _temporal(client, backfill_prompt_schedule(client, start=start, end=end, **where))
    return BackfillResult(occurrences=occurrences)


@router.delete("/{schedule_id}", status_code=204, summary="Delete a scheduled prompt")
async def delete(
    schedule_id: ScheduleIdPath,
    db: DbDep,
    client: TemporalDep,
    settings: SettingsDep,
    tenant: TenantDep,
) -> Response:
    """Turns it already submitted go on. A schedule declared on an agent is refused (409):
    remove it from the agent's `schedules` and the workers delete it when they next start."""
    row = await _owned(db, tenant, schedule_id)
    _refuse_declared(row, "remove it from the agent's `schedules` (pause it to stop it meanwhile)")
    await _temporal(
        client,
        delete_prompt_schedule(
            client,
            task_queue=settings.task_queue,
            tenant_id=tenant,
            schedule_id=row.id,
        ),
    )
    await delete_schedule(db, tenant_id=tenant, schedule_id=row.id)
    return Response(status_code=204)
