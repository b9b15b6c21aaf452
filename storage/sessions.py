"""Sessions (chats), always scoped to their tenant: looked up by the `chat_id` the client
knows, then handled by their storage key (`session_id`, storage/session_keys.py)."""

import uuid

from sqlalchemy import delete, func, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession
from sqlmodel.sql.expression import SelectOfScalar

from storage.db import Database
from storage.tables import (
    ChatSessionRow,
    ChunkLogRow,
    ChunkRow,
    CompactionRow,
    EventRow,
    IncidentRow,
    MessageRow,
    SubmissionRow,
    ToolWaitRow,
)
from storage.timing import now
from storage.usage_tables import ModelUsageRow
from storage.workspaces import delete_workspaces


def _by_chat_id(tenant_id: str, chat_id: str) -> SelectOfScalar[ChatSessionRow]:
    return select(ChatSessionRow).where(
        ChatSessionRow.tenant_id == tenant_id, ChatSessionRow.chat_id == chat_id
    )


async def get_session(db: Database, *, tenant_id: str, chat_id: str) -> ChatSessionRow | None:
    """The tenant's session a client knows by `chat_id`."""
    async with db.read() as session:
        return (await session.exec(_by_chat_id(tenant_id, chat_id))).first()


async def chat_ids(db: Database, *, keys: set[str]) -> dict[str, str]:
    """The chat ids of the sessions stored under `keys` (a sub-agent's parent is stored by
    key, and shown to the client by chat id)."""
    if not keys:
        return {}
    async with db.read() as session:
        rows = await session.exec(
            select(ChatSessionRow.id, ChatSessionRow.chat_id).where(
                col(ChatSessionRow.id).in_(keys)
            )
        )
        return dict(rows.all())


async def list_sessions(
    db: Database, *, tenant_id: str, limit: int, offset: int
) -> tuple[list[ChatSessionRow], int]:
    async with db.read() as session:
        total = (
            await session.exec(
                select(func.count())
                .select_from(ChatSessionRow)
                .where(ChatSessionRow.tenant_id == tenant_id)
            )
        ).one()
        rows = await session.exec(
            select(ChatSessionRow)
            .where(ChatSessionRow.tenant_id == tenant_id)
            .order_by(col(ChatSessionRow.updated_at).desc(), col(ChatSessionRow.id))
            .offset(offset)
            .limit(limit)
        )
        return list(rows.all()), total


async def rename_session(
    db: Database, *, tenant_id: str, chat_id: str, title: str
) -> ChatSessionRow | None:
    async with db.write() as session:
        chat = (await session.exec(_by_chat_id(tenant_id, chat_id))).first()
        if chat is None:
            return None
        chat.title = title
        chat.updated_at = now()
        session.add(chat)
    return chat


async def active_submission_ids(db: Database, *, tenant_id: str, session_id: str) -> list[str]:
    async with db.read() as session:
        rows = await session.exec(
            select(SubmissionRow.id).where(
                SubmissionRow.session_id == session_id,
                SubmissionRow.tenant_id == tenant_id,
                col(SubmissionRow.status).in_(["pending", "running"]),
            )
        )
        return list(rows.all())


async def delete_session(db: Database, *, tenant_id: str, session_id: str) -> bool:
    """Delete the session with every row that belongs to it (messages, submissions, their
    chunk logs, incidents, tool waits, events, compactions, workspace) and the sessions of the
    sub-agents its turns called, theirs too. Schedules that post to it are the tenant's, not
    the session's: they stay (tests/e2e/test_storage_hygiene.py checks every table). Its
    model usage stays the tenant's too, with nothing that names the session any more: each
    submission's rows get an opaque id of their own, so the tenant's totals do not shrink."""
    async with db.write() as session:
        chat = await session.get(ChatSessionRow, session_id)
        if chat is None or chat.tenant_id != tenant_id:
            return False
        doomed = [session_id]
        for parent in doomed:  # grows as children are found
            children = await session.exec(
                select(ChatSessionRow.id).where(ChatSessionRow.parent_session_id == parent)
            )
            doomed += list(children.all())
        assistant_ids = select(SubmissionRow.assistant_message_id).where(
            col(SubmissionRow.session_id).in_(doomed)
        )
        connection = await session.connection()
        await connection.execute(
            delete(ChunkRow).where(col(ChunkRow.message_id).in_(assistant_ids))
        )
        await connection.execute(
            delete(ChunkLogRow).where(col(ChunkLogRow.message_id).in_(assistant_ids))
        )
        spent = await session.exec(
            select(ModelUsageRow.submission_id)
            .where(col(ModelUsageRow.session_id).in_(doomed))
            .distinct()
        )
        for submission_id in spent.all():
            await connection.execute(
                update(ModelUsageRow)
                .where(col(ModelUsageRow.submission_id) == submission_id)
                .values(submission_id=f"deleted-{uuid.uuid4().hex}", session_id="", chat_id=None)
            )
        await delete_workspaces(session, doomed)
        for table in (MessageRow, SubmissionRow, EventRow, ToolWaitRow, IncidentRow, CompactionRow):
            await connection.execute(delete(table).where(col(table.session_id).in_(doomed)))
        await connection.execute(delete(ChatSessionRow).where(col(ChatSessionRow.id).in_(doomed)))
    return True


MAX_LINEAGE = 100
"""Parents followed at most (sub-agents nest 4 deep; a broken link cannot loop forever)."""


async def lineage(session: AsyncSession, session_id: str) -> list[str]:
    """The session's id, then its parent's, and so on up to the chat a person started."""
    ids = [session_id]
    chat = await session.get(ChatSessionRow, session_id)
    while chat is not None and chat.parent_session_id is not None and len(ids) <= MAX_LINEAGE:
        ids.append(chat.parent_session_id)
        chat = await session.get(ChatSessionRow, chat.parent_session_id)
    return ids


async def session_depth(db: Database, *, session_id: str) -> int:
    """How many parents the session has (0 for a chat a person started)."""
    async with db.read() as session:
        return len(await lineage(session, session_id)) - 1


async def root_session_id(db: Database, *, session_id: str) -> str:
    """The chat a person started that the session descends from (itself, unless it is a
    sub-agent's): its workspace is every sub-agent's below it."""
    async with db.read() as session:
        return (await lineage(session, session_id))[-1]


async def child_sessions(db: Database, *, tenant_id: str, session_id: str) -> list[ChatSessionRow]:
    """The sub-agent sessions the session's turns started, oldest first."""
    async with db.read() as session:
        rows = await session.exec(
            select(ChatSessionRow)
            .where(
                ChatSessionRow.tenant_id == tenant_id,
                ChatSessionRow.parent_session_id == session_id,
            )
            .order_by(col(ChatSessionRow.created_at), col(ChatSessionRow.id))
        )
        return list(rows.all())
