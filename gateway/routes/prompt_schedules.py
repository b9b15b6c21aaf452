"""Prompt schedules over HTTP: create, list, read, change, pause, resume, trigger, backfill,
delete. What each does to the store and to its Temporal Schedule is the lifecycle's
(turn_control/prompt_schedule_lifecycle.py); this module parses requests and presents answers.
"""

import uuid
from collections.abc import Awaitable
from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, Path, Query, Response
from temporalio.client import ScheduleActionExecutionStartWorkflow, ScheduleDescription

from gateway.access import tenant_limits
from gateway.body_limits import body_limit
from gateway.deps import DbDep, SettingsDep, TemporalDep, TenantDep
from gateway.errors import ApiError, InvalidField, invalid_request
from gateway.schemas.prompt_schedules import (
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
from gateway.temporal import GatewayDeadline
from perdure.domain.prompt_schedules import (
    MAX_PROMPT_CHARS,
    SCHEDULE_ID_PATTERN,
)
from perdure.runtime.settings import Settings
from perdure.turn_control.prompt_schedule_lifecycle import (
    DeclaredPromptSchedule,
    InvalidPeriod,
    NewPromptSchedule,
    PromptScheduleExists,
    PromptScheduleLifecycle,
    PromptScheduleNotFound,
    TemporalRefusedSchedule,
    TemporalScheduleMissing,
    TooManyOccurrences,
)
from storage.db import Database
from storage.prompt_schedules import PromptScheduleDefinition, list_schedules, served_agents
from storage.schedule_tables import PromptScheduleRow
from storage.tenant_policies import TenantLimits

# The path, tag and schema names stay `schedules`/`Schedule…`: they are the public REST API.
router = APIRouter(prefix="/v1/schedules", tags=["schedules"])
BODY_LIMIT_BYTES = 4 * MAX_PROMPT_CHARS + 4096
"""The prompt in JSON at worst (4 bytes a character) and the few other fields."""
MAX_BACKFILL_OCCURRENCES = 100
MAX_OFFSET = 2**31 - 1
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


async def _lifecycle(
    db: DbDep, client: TemporalDep, settings: SettingsDep
) -> PromptScheduleLifecycle:
    async def admit(tenant: str, agent: str) -> None:
        admitted = await tenant_limits(db, settings, tenant, agent)  # else 403
        await _checked_agent(db, settings, agent, admitted)

    return PromptScheduleLifecycle(
        db,
        client,
        task_queue=settings.task_queue,
        deadline=GatewayDeadline(client),
        admit_agent=admit,
    )


LifecycleDep = Annotated[PromptScheduleLifecycle, Depends(_lifecycle)]

MISSING_IN_TEMPORAL = (
    "the schedule's Temporal Schedule no longer exists (deleted outside Perdure); any change "
    "(PATCH) re-creates it, as deleting and creating the schedule again does (a declared one "
    "is re-created when a worker starts)"
)


async def _answer(call: Awaitable[T], *, declared_instead: str = "") -> T:
    """`call`'s answer; the lifecycle's refusals as the API's errors."""
    try:
        return await call
    except PromptScheduleNotFound as error:
        raise ApiError(404, "schedule_not_found", str(error)) from None
    except PromptScheduleExists as error:
        raise ApiError(409, "schedule_exists", str(error)) from None
    except DeclaredPromptSchedule as error:
        raise ApiError(409, "declared_schedule", f"{error}: {declared_instead}") from None
    except TemporalScheduleMissing:
        raise ApiError(409, "schedule_missing_in_temporal", MISSING_IN_TEMPORAL) from None
    except TemporalRefusedSchedule as error:
        raise ApiError(422, "invalid_schedule", f"Temporal refused it: {error}") from None
    except InvalidPeriod as error:
        raise ApiError(422, "invalid_period", str(error)) from None
    except TooManyOccurrences as error:
        raise ApiError(422, "too_many_occurrences", f"{error}; backfill a shorter one") from None


@router.post(
    "",
    status_code=201,
    summary="Create a scheduled prompt",
)
@body_limit(BODY_LIMIT_BYTES)
async def create(
    body: ScheduleCreate, lifecycle: LifecycleDep, settings: SettingsDep, tenant: TenantDep
) -> SchedulePublic:
    """Each occurrence sends `prompt` into the tenant's chat `sessionId` as a user message,
    queued like any chat message and submitted once per occurrence (`schedule:{id}:{time}`).
    A schedule id already taken is a 409; an agent no worker serves a 422."""
    new = NewPromptSchedule(
        tenant_id=tenant,
        schedule_id=body.id or f"sch-{uuid.uuid4().hex[:16]}",
        agent=body.agent or settings.default_agent,
        session_id=body.session_id,
        prompt=body.prompt,
        recurrence=body.recurrence(),
        paused=body.paused,
    )
    row = await _answer(lifecycle.create(new))
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
    lifecycle: LifecycleDep,
    settings: SettingsDep,
    tenant: TenantDep,
) -> ScheduleDetail:
    row, described = await _answer(lifecycle.describe(tenant, schedule_id))
    return _detail(row, settings.task_queue, described)


@router.patch(
    "/{schedule_id}",
    summary="Change what a scheduled prompt sends, where, or when",
)
@body_limit(BODY_LIMIT_BYTES)
async def change(
    body: ScheduleChange,
    schedule_id: ScheduleIdPath,
    lifecycle: LifecycleDep,
    settings: SettingsDep,
    tenant: TenantDep,
) -> SchedulePublic:
    """Occurrences from now on send the new prompt, to the new session, with the new agent, at
    the new times; turns already submitted go on as they were. Its paused state, its last
    occurrence and its id stay. A schedule declared on an agent is refused (409): change its
    declaration."""

    def edit(before: PromptScheduleDefinition) -> PromptScheduleDefinition:
        try:
            return body.applied_to(before)
        except InvalidField as error:
            raise invalid_request(error) from None

    changed = await _answer(
        lifecycle.change(tenant, schedule_id, edit),
        declared_instead="change it in the agent's `schedules` (the workers apply it when they "
        "next start)",
    )
    return SchedulePublic.of(changed, settings.task_queue)


@router.post("/{schedule_id}/pause", summary="Pause: no occurrence fires until it is resumed")
async def pause(
    schedule_id: ScheduleIdPath,
    lifecycle: LifecycleDep,
    settings: SettingsDep,
    tenant: TenantDep,
) -> SchedulePublic:
    row = await _answer(lifecycle.set_paused(tenant, schedule_id, paused=True))
    return SchedulePublic.of(row, settings.task_queue)


@router.post(
    "/{schedule_id}/resume",
    summary="Resume: the next occurrence fires; those missed while paused do not",
)
async def resume(
    schedule_id: ScheduleIdPath,
    lifecycle: LifecycleDep,
    settings: SettingsDep,
    tenant: TenantDep,
) -> SchedulePublic:
    row = await _answer(lifecycle.set_paused(tenant, schedule_id, paused=False))
    return SchedulePublic.of(row, settings.task_queue)


@router.post(
    "/{schedule_id}/trigger",
    status_code=202,
    summary="Fire one occurrence now (paused or not), keyed by the time it fires",
)
async def trigger(
    schedule_id: ScheduleIdPath,
    lifecycle: LifecycleDep,
    settings: SettingsDep,
    tenant: TenantDep,
) -> SchedulePublic:
    """Answers the schedule as it stands; the occurrence's submission shows in its
    `lastSubmissionId` once Temporal has fired it."""
    row = await _answer(lifecycle.trigger(tenant, schedule_id))
    return SchedulePublic.of(row, settings.task_queue)


@router.post(
    "/{schedule_id}/backfill",
    status_code=202,
    summary="Run the occurrences of a past period that did not fire",
)
async def backfill(
    body: BackfillRequest,
    schedule_id: ScheduleIdPath,
    lifecycle: LifecycleDep,
    tenant: TenantDep,
) -> BackfillResult:
    """Missed occurrences are never made up by themselves; this runs those of the period now
    (at most 100), paused or not. Each is keyed by its own time, so an occurrence that already
    ran is not submitted again."""
    occurrences = await _answer(
        lifecycle.backfill(
            tenant,
            schedule_id,
            start=body.start,
            end=body.end,
            at_most=MAX_BACKFILL_OCCURRENCES,
        )
    )
    return BackfillResult(occurrences=occurrences)


@router.delete("/{schedule_id}", status_code=204, summary="Delete a scheduled prompt")
async def delete(
    schedule_id: ScheduleIdPath,
    lifecycle: LifecycleDep,
    tenant: TenantDep,
) -> Response:
    """Turns it already submitted go on. A schedule declared on an agent is refused (409):
    remove it from the agent's `schedules` and the workers delete it when they next start."""
    await _answer(
        lifecycle.delete(tenant, schedule_id),
        declared_instead="remove it from the agent's `schedules` (pause it to stop it meanwhile)",
    )
    return Response(status_code=204)
