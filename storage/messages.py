"""The message tree: the active path runs from the session's leaf up to the root."""

from sqlalchemy import text
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from domain.ui import UIMessage
from storage.db import Database
from storage.tables import ChatSession, Message

_PATH_IDS = text(
    """
    WITH RECURSIVE path(id, parent_id, depth) AS (
        SELECT id, parent_id, 0 FROM messages WHERE session_id = :sid AND id = :leaf
        UNION ALL
        SELECT m.id, m.parent_id, path.depth + 1
        FROM messages m JOIN path ON m.id = path.parent_id AND m.session_id = :sid
    )
    SELECT id FROM path ORDER BY depth DESC
    """
)


def to_ui_message(row: Message) -> UIMessage:
    metadata = dict(row.meta)
    if row.role == "assistant":
        metadata.setdefault("status", row.status)
    return UIMessage.model_validate(
        {"id": row.id, "role": row.role, "parts": row.parts, "metadata": metadata or None}
    )


async def path_rows(
    session: AsyncSession, *, session_id: str, leaf_id: str | None
) -> list[Message]:
    if leaf_id is None:
        return []
    ids = [
        row[0]
        for row in (
            await session.exec(_PATH_IDS, params={"sid": session_id, "leaf": leaf_id})  # type: ignore[call-overload]
        ).all()
    ]
    if not ids:
        return []
    rows = await session.exec(
        select(Message).where(Message.session_id == session_id, col(Message.id).in_(ids))
    )
    by_id = {row.id: row for row in rows.all()}
    return [by_id[i] for i in ids if i in by_id]


async def active_path(db: Database, *, session_id: str) -> list[UIMessage]:
    async with db.read() as session:
        chat = await session.get(ChatSession, session_id)
        if chat is None:
            return []
        rows = await path_rows(session, session_id=session_id, leaf_id=chat.leaf_message_id)
        return [to_ui_message(row) for row in rows]
