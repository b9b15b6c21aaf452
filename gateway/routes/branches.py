"""Branches: a message's alternatives, the active branch, and forks into new sessions.

Regenerating an answer (the AI SDK's `regenerate-message`) makes a sibling of the earlier
answer; nothing is deleted, and the history endpoints follow the active branch."""

import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Path

from gateway.deps import DbDep, OwnedSessionDep
from gateway.schemas.branches import ForkRequest, LeafChange, LeafChanged, SiblingPublic
from gateway.schemas.sessions import SessionPublic
from storage.branches import fork, siblings, switch_leaf
from storage.messages import active_path

router = APIRouter(prefix="/v1/sessions", tags=["branches"])

MessageIdPath = Annotated[str, Path(min_length=1, max_length=200)]


@router.get(
    "/{session_id}/messages/{message_id}/siblings",
    summary="A message and its alternatives (the same parent), oldest first",
)
async def list_siblings(
    session: OwnedSessionDep, message_id: MessageIdPath, db: DbDep
) -> list[SiblingPublic]:
    rows = await siblings(db, chat=session, message_id=message_id)
    on_path = {m.id for m in await active_path(db, session_id=session.id)}
    return [
        SiblingPublic(
            id=row.id,
            role=row.role,
            status=row.status,
            active=row.id in on_path,
            created_at=datetime.fromtimestamp(row.created_at, UTC),
        )
        for row in rows
    ]


@router.post(
    "/{session_id}/leaf",
    summary="Make the branch through a message active",
)
async def change_leaf(body: LeafChange, session: OwnedSessionDep, db: DbDep) -> LeafChanged:
    """The active branch goes through `messageId` down to its newest message; the history
    endpoints follow it. Refused (409) while a turn runs."""
    leaf = await switch_leaf(db, chat=session, message_id=body.messageId)
    return LeafChanged(leafMessageId=leaf)


@router.post(
    "/{session_id}/fork",
    status_code=201,
    summary="A new session whose history is this one's up to a message",
)
async def fork_session(body: ForkRequest, session: OwnedSessionDep, db: DbDep) -> SessionPublic:
    forked = await fork(
        db,
        chat=session,
        message_id=body.messageId,
        new_chat_id=body.sessionId or f"fork-{uuid.uuid4().hex[:16]}",
    )
    return SessionPublic.of(forked, parent_chat_id=None)
