"""Sessions (chats), always scoped to their tenant."""

from sqlalchemy import delete, func
from sqlmodel import col, select

from storage.db import Database
from storage.tables import ChatSession, ChunkRow, Event, Message, Submission
from storage.timing import now


async def get_session(db: Database, *, tenant_id: str, session_id: str) -> ChatSession | None:
    async with db.read() as session:
        chat = await session.get(ChatSession, session_id)
    return chat if chat is not None and chat.tenant_id == tenant_id else None


async def list_sessions(
    db: Database, *, tenant_id: str, limit: int, offset: int
) -> tuple[list[ChatSession], int]:
    async with db.read() as session:
        total = (
            await session.exec(
                select(func.count())
                .select_from(ChatSession)
                .where(ChatSession.tenant_id == tenant_id)
            )
        ).one()
        rows = await session.exec(
            select(ChatSession)
            .where(ChatSession.tenant_id == tenant_id)
            .order_by(col(ChatSession.updated_at).desc(), col(ChatSession.id))
            .offset(offset)
            .limit(limit)
        )
        return list(rows.all()), total


async def rename_session(
    db: Database, *, tenant_id: str, session_id: str, title: str
) -> ChatSession | None:
    async with db.write() as session:
        chat = await session.get(ChatSession, session_id)
        if chat is None or chat.tenant_id != tenant_id:
            return None
        chat.title = title
        chat.updated_at = now()
        session.add(chat)
    return chat


async def active_submission_ids(db: Database, *, tenant_id: str, session_id: str) -> list[str]:
    async with db.read() as session:
        rows = await session.exec(
            select(Submission.id).where(
                Submission.session_id == session_id,
                Submission.tenant_id == tenant_id,
                col(Submission.status).in_(["pending", "running"]),
            )
        )
        return list(rows.all())


async def delete_session(db: Database, *, tenant_id: str, session_id: str) -> bool:
    """Delete the session with its messages, submissions, logs and events."""
    async with db.write() as session:
        chat = await session.get(ChatSession, session_id)
        if chat is None or chat.tenant_id != tenant_id:
            return False
        assistant_ids = select(Submission.assistant_message_id).where(
            Submission.session_id == session_id
        )
        connection = await session.connection()
        await connection.execute(
            delete(ChunkRow).where(col(ChunkRow.message_id).in_(assistant_ids))
        )
        for table in (Message, Submission, Event):
            await connection.execute(delete(table).where(col(table.session_id) == session_id))
        await session.delete(chat)
    return True
