"""Durable fibers: start (and optionally wait), list, read (by id or key), cancel, delete.

The gateway never loads agent code: a start is checked against the fibers the workers of its
task queue recorded when they started (`fiber_kinds`), and the payload's shape is checked by
the worker (a payload the fiber's method does not accept ends the fiber `error`, saying why).
"""

from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Path, Query, Response
from pydantic import AwareDatetime, BaseModel
from pydantic_core import to_json

from gateway.access import tenant_limits
from gateway.body_limits import body_limit
from gateway.deps import DbDep, EagerStartDep, SettingsDep, TemporalDep, TenantDep
from gateway.errors import ApiError
from gateway.schemas.fibers import (
    FIBER_ID_PATTERN,
    KEY_PATTERN,
    FiberCreate,
    FiberEventPublic,
    FiberPublic,
    FibersDeleted,
    FibersPublic,
    FiberStarted,
    at_time,
)
from gateway.temporal import TEMPORAL_TIMEOUT_SECONDS, temporal_call
from perdure.domain.fiber_payloads import (
    FIBER_NAME_PATTERN,
    MAX_FIBER_METADATA_BYTES,
    MAX_FIBER_PAYLOAD_BYTES,
    TERMINAL_FIBER_STATUSES,
    FiberStatus,
    UnknownFiber,
    resolve_fiber_kind,
)
from perdure.turn_control.fibers import cancel_fiber_workflow, start_fiber, wait_fiber_ended
from storage.db import Database
from storage.fiber_tables import FiberRow
from storage.fibers import (
    delete_ended_fibers,
    delete_fiber,
    fiber_events,
    fiber_kinds,
    get_fiber,
    get_fiber_by_key,
    list_fibers,
    settle_fiber,
)

router = APIRouter(prefix="/v1/fibers", tags=["fibers"])

BODY_LIMIT_BYTES = MAX_FIBER_PAYLOAD_BYTES + MAX_FIBER_METADATA_BYTES + 8192
MAX_OFFSET = 2**31 - 1
MAX_EVENT_ID = 2**31 - 1
M = TypeVar("M", bound=BaseModel)

FiberIdPath = Annotated[str, Path(pattern=FIBER_ID_PATTERN, description="The fiber's id.")]


def _json_size(value: Any) -> int:
    return len(to_json(value))


def fiber_not_found(what: str) -> ApiError:
    return ApiError(404, "fiber_not_found", f"fiber {what} not found")


async def _owned(db: Database, tenant: str, fiber_id: str) -> FiberRow:
    fiber = await get_fiber(db, tenant_id=tenant, fiber_id=fiber_id)
    if fiber is None:
        raise fiber_not_found(repr(fiber_id))
    return fiber


def _status_of(fiber: FiberRow, response: Response) -> None:
    response.status_code = 200 if fiber.status in TERMINAL_FIBER_STATUSES else 202


@router.post(
    "",
    status_code=202,
    summary="Start a fiber (and, with `wait`, wait for its end)",
    responses={200: {"model": FiberStarted, "description": "The fiber has ended"}},
)
@body_limit(BODY_LIMIT_BYTES)
async def start(
    body: FiberCreate,
    response: Response,
    db: DbDep,
    client: TemporalDep,
    settings: SettingsDep,
    eager_start: EagerStartDep,
    tenant: TenantDep,
) -> FiberStarted:
    """202 while the fiber runs, 200 once it has ended (its `result` or `error` included). A
    fiber no worker serves is a 422 naming the known ones."""
    if _json_size(body.payload) > MAX_FIBER_PAYLOAD_BYTES:
        raise ApiError(413, "payload_too_large", f"at most {MAX_FIBER_PAYLOAD_BYTES} bytes")
    if _json_size(body.metadata) > MAX_FIBER_METADATA_BYTES:
        raise ApiError(413, "metadata_too_large", f"at most {MAX_FIBER_METADATA_BYTES} bytes")
    kinds = await fiber_kinds(db, task_queue=settings.task_queue)
    try:
        kind = resolve_fiber_kind(kinds, name=body.name, agent=body.agent)
    except UnknownFiber as error:
        raise ApiError(422, "unknown_fiber", str(error)) from None
    await tenant_limits(db, settings, tenant, kind.agent)  # its agent runs for the tenant (403)

    async def guarded(call: Any) -> None:
        await temporal_call(call, within=TEMPORAL_TIMEOUT_SECONDS, client=client)

    outcome = await start_fiber(
        db,
        client,
        task_queue=settings.task_queue,
        tenant_id=tenant,
        kind=kind,
        kinds=kinds,
        payload=body.payload,
        idempotency_key=body.idempotency_key,
        metadata=body.metadata,
        eager=eager_start,
        guard=guarded,
    )
    fiber = outcome.fiber
    if body.wait and fiber.status not in TERMINAL_FIBER_STATUSES:
        await wait_fiber_ended(client, fiber.id, max_wait=body.wait_seconds)
        fiber = await get_fiber(db, tenant_id=tenant, fiber_id=fiber.id) or fiber
    _status_of(fiber, response)
    return FiberStarted(
        fiber_id=fiber.id,
        status=fiber.status,
        accepted=outcome.created,
        result=fiber.result,
        error=fiber.error,
    )


@router.get("", summary="List the tenant's fibers, newest first")
async def list_all(
    db: DbDep,
    tenant: TenantDep,
    status: Annotated[FiberStatus | None, Query()] = None,
    name: Annotated[str | None, Query(pattern=FIBER_NAME_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> FibersPublic:
    rows, total = await list_fibers(
        db, tenant_id=tenant, status=status, name=name, limit=limit, offset=offset
    )
    return FibersPublic(data=[FiberPublic.of(row) for row in rows], count=total)


@router.delete("", summary="Delete the tenant's fibers that ended before a time")
async def delete_ended(
    db: DbDep,
    tenant: TenantDep,
    completed_before: Annotated[
        AwareDatetime, Query(alias="completedBefore", description="With its time zone.")
    ],
    status: Annotated[Literal["completed", "cancelled", "error"] | None, Query()] = None,
) -> FibersDeleted:
    """Only ended fibers (`completed`, `cancelled`, `error`), with their events."""
    deleted = await delete_ended_fibers(
        db,
        tenant_id=tenant,
        completed_before=completed_before.timestamp(),
        status=status,
    )
    return FibersDeleted(deleted=deleted)


@router.get("/by-key/{key:path}", summary="The tenant's fiber with an idempotency key")
async def read_by_key(
    key: Annotated[str, Path(pattern=KEY_PATTERN, description="The idempotency key.")],
    db: DbDep,
    tenant: TenantDep,
) -> FiberPublic:
    fiber = await get_fiber_by_key(db, tenant_id=tenant, key=key)
    if fiber is None:
        raise fiber_not_found(f"with key {key!r}")
    return FiberPublic.of(fiber)


@router.get("/{fiber_id}", summary="One fiber: status, snapshot, result")
async def read(fiber_id: FiberIdPath, db: DbDep, tenant: TenantDep) -> FiberPublic:
    return FiberPublic.of(await _owned(db, tenant, fiber_id))


@router.get("/{fiber_id}/events", summary="A fiber's events (started, recovered, ended)")
async def events(
    fiber_id: FiberIdPath,
    db: DbDep,
    tenant: TenantDep,
    after: Annotated[int, Query(ge=0, le=MAX_EVENT_ID)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> list[FiberEventPublic]:
    fiber = await _owned(db, tenant, fiber_id)
    rows = await fiber_events(db, fiber_id=fiber.id, after_id=after, limit=limit)
    return [
        FiberEventPublic(
            id=row.id or 0, type=row.type, data=row.data, created_at=at_time(row.created_at)
        )
        for row in rows
    ]


@router.post(
    "/{fiber_id}/cancel",
    status_code=202,
    summary="Cancel a fiber (cooperatively: `ctx.cancelled` is set)",
    responses={200: {"model": FiberPublic, "description": "The fiber is cancelled already"}},
)
async def cancel(
    fiber_id: FiberIdPath,
    response: Response,
    db: DbDep,
    client: TemporalDep,
    tenant: TenantDep,
) -> FiberPublic:
    """202 while the running fiber winds down (it ends `cancelled`, its snapshot kept); 200
    when it already is `cancelled`; 409 when it has completed or failed."""
    fiber = await _owned(db, tenant, fiber_id)
    if fiber.status in ("completed", "error"):
        raise ApiError(409, "fiber_ended", f"fiber {fiber_id!r} has ended: {fiber.status}")
    if fiber.status == "pending" or fiber.status == "running":
        found = await temporal_call(
            cancel_fiber_workflow(client, fiber.id),
            within=TEMPORAL_TIMEOUT_SECONDS,
            client=client,
        )
        if not found:  # its start never reached Temporal: nothing runs it
            fiber = (
                await settle_fiber(
                    db, fiber_id=fiber.id, status="cancelled", event={"stage": "pending"}
                )
                or fiber
            )
        else:
            fiber = await _owned(db, tenant, fiber_id)
    _status_of(fiber, response)
    return FiberPublic.of(fiber)


@router.delete(
    "/{fiber_id}", status_code=204, summary="Delete an ended fiber", response_class=Response
)
async def delete(fiber_id: FiberIdPath, db: DbDep, tenant: TenantDep) -> Response:
    """409 for a fiber still pending or running: cancel it first."""
    outcome = await delete_fiber(db, tenant_id=tenant, fiber_id=fiber_id)
    if outcome == "not_found":
        raise fiber_not_found(repr(fiber_id))
    if outcome == "active":
        raise ApiError(409, "fiber_running", f"fiber {fiber_id!r} has not ended: cancel it first")
    return Response(status_code=204)
