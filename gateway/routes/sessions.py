"""The session API: list, read, rename, delete, and observability events."""

import asyncio
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response

from gateway.deps import (
    DbDep,
    LifecycleDep,
    OwnedSessionDep,
    SessionIdPath,
    TemporalDep,
    TenantDep,
    session_not_found,
)
from gateway.schemas.sessions import EventPublic, SessionPublic, SessionsPublic, SessionUpdate
from perdure.turn_control.client import wait_turn_ended
from storage.db import Database
from storage.events import list_events
from storage.sessions import (
    active_submission_ids,
    chat_ids,
    child_sessions,
    delete_session,
    list_sessions,
    rename_session,
)
from storage.tables import ChatSessionRow
from storage.tool_waits import sessions_waiting

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])
CANCEL_GRACE_SECONDS = 10.0
MAX_OFFSET = 2**31 - 1
MAX_EVENT_ID = 2**31 - 1
"""Event ids are 32-bit integers in PostgreSQL."""


async def _public(db: Database, rows: list[ChatSessionRow]) -> list[SessionPublic]:
    """As the client knows them: by chat id (a sub-agent's parent too), with their status."""
    waiting = await sessions_waiting(
        db, session_ids=[row.id for row in rows if row.running_submission_id]
    )
    parents = await chat_ids(
        db, keys={row.parent_session_id for row in rows if row.parent_session_id}
    )
    return [
        SessionPublic.of(
            row,
            parent_chat_id=parents.get(row.parent_session_id or ""),
            waiting=row.id in waiting,
        )
        for row in rows
    ]


@router.get("", summary="List sessions, most recently active first")
async def list_all(
    db: DbDep,
    tenant: TenantDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> SessionsPublic:
    rows, total = await list_sessions(db, tenant_id=tenant, limit=limit, offset=offset)
    return SessionsPublic(data=await _public(db, rows), count=total)


@router.get("/{session_id}", summary="One session")
async def read(session: OwnedSessionDep, db: DbDep) -> SessionPublic:
    return (await _public(db, [session]))[0]


@router.get("/{session_id}/children", summary="The sub-agent sessions its turns started")
async def children(session: OwnedSessionDep, db: DbDep, tenant: TenantDep) -> list[SessionPublic]:
    rows = await child_sessions(db, tenant_id=tenant, session_id=session.id)
    return await _public(db, rows)


@router.patch("/{session_id}", summary="Rename a session")
async def rename(
    session_id: SessionIdPath, update: SessionUpdate, db: DbDep, tenant: TenantDep
) -> SessionPublic:
    renamed = await rename_session(db, tenant_id=tenant, chat_id=session_id, title=update.title)
    if renamed is None:
        raise session_not_found(session_id)
    return (await _public(db, [renamed]))[0]


@router.delete("/{session_id}", status_code=204, summary="Cancel its turns and delete it")
async def delete(
    session: OwnedSessionDep,
    db: DbDep,
    client: TemporalDep,
    lifecycle: LifecycleDep,
    tenant: TenantDep,
) -> Response:
    active = await active_submission_ids(db, tenant_id=tenant, session_id=session.id)
    for submission_id in active:
        await lifecycle.cancel(submission_id)
    # Let the cancelled turns close their logs (with `abort`) so their streams end cleanly.
    await asyncio.gather(
        *(wait_turn_ended(client, i, grace_seconds=CANCEL_GRACE_SECONDS) for i in active)
    )
    if not await delete_session(db, tenant_id=tenant, session_id=session.id):
        raise session_not_found(session.chat_id)
    return Response(status_code=204)


@router.get("/{session_id}/events", summary="Observability events of a session")
async def events(
    session: OwnedSessionDep,
    db: DbDep,
    after: Annotated[int, Query(ge=0, le=MAX_EVENT_ID)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> list[EventPublic]:
    rows = await list_events(db, session_id=session.id, after_id=after, limit=limit)
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
