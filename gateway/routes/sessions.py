"""The session API: list, read, rename, delete, and observability events."""

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response

from gateway.deps import ServicesDep, TenantDep
from gateway.errors import ApiError
from gateway.schemas import EventPublic, SessionPublic, SessionsPublic, SessionUpdate
from gateway.turns import cancel_turn
from storage.events import list_events
from storage.sessions import (
    active_submission_ids,
    delete_session,
    get_session,
    list_sessions,
    rename_session,
)
from storage.tables import ChatSession

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


def _not_found(session_id: str) -> ApiError:
    return ApiError(404, "session_not_found", f"session {session_id!r} not found")


async def _owned(services: ServicesDep, tenant: str, session_id: str) -> ChatSession:
    session = await get_session(services.db, tenant_id=tenant, session_id=session_id)
    if session is None:
        raise _not_found(session_id)
    return session


@router.get("", summary="List sessions, most recently active first")
async def list_all(
    services: ServicesDep,
    tenant: TenantDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> SessionsPublic:
    rows, total = await list_sessions(services.db, tenant_id=tenant, limit=limit, offset=offset)
    return SessionsPublic(data=[SessionPublic.of(row) for row in rows], count=total)


@router.get("/{session_id}", summary="One session")
async def read(session_id: str, services: ServicesDep, tenant: TenantDep) -> SessionPublic:
    return SessionPublic.of(await _owned(services, tenant, session_id))


@router.patch("/{session_id}", summary="Rename a session")
async def rename(
    session_id: str, update: SessionUpdate, services: ServicesDep, tenant: TenantDep
) -> SessionPublic:
    renamed = await rename_session(
        services.db, tenant_id=tenant, session_id=session_id, title=update.title
    )
    if renamed is None:
        raise _not_found(session_id)
    return SessionPublic.of(renamed)


@router.delete("/{session_id}", status_code=204, summary="Cancel its turns and delete it")
async def delete(session_id: str, services: ServicesDep, tenant: TenantDep) -> Response:
    await _owned(services, tenant, session_id)
    for submission_id in await active_submission_ids(
        services.db, tenant_id=tenant, session_id=session_id
    ):
        await cancel_turn(services.client, submission_id)
    if not await delete_session(services.db, tenant_id=tenant, session_id=session_id):
        raise _not_found(session_id)
    return Response(status_code=204)


@router.get("/{session_id}/events", summary="Observability events of a session")
async def events(
    session_id: str,
    services: ServicesDep,
    tenant: TenantDep,
    after: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> list[EventPublic]:
    await _owned(services, tenant, session_id)
    rows = await list_events(services.db, session_id=session_id, after_id=after, limit=limit)
    return [
        EventPublic(
            id=row.id or 0,
            type=row.type,
            submission_id=row.submission_id,
            data=row.data,
            created_at=datetime.fromtimestamp(row.created_at, UTC),
        )
        for row in rows
    ]
