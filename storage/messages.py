"""The message tree: the active path runs from the session's leaf up to the root."""

from sqlalchemy import text
from sqlmodel import Session, select

from domain.ui import UIMessage
from storage.db import Database
from storage.tables import Message

_ACTIVE_PATH = (
    text(
        """
        WITH RECURSIVE path(id, parent_id, depth) AS (
            SELECT m.id, m.parent_id, 0
            FROM sessions s JOIN messages m ON m.session_id = s.id AND m.id = s.leaf_message_id
            WHERE s.id = :sid
            UNION ALL
            SELECT m.id, m.parent_id, path.depth + 1
            FROM messages m JOIN path ON m.id = path.parent_id AND m.session_id = :sid
        )
        SELECT messages.session_id, messages.id, messages.parent_id, messages.role,
               messages.parts, messages.meta, messages.status, messages.submission_id,
               messages.created_at
        FROM path JOIN messages ON messages.session_id = :sid AND messages.id = path.id
        ORDER BY path.depth DESC
        """
    ).columns(*Message.__table__.columns)  # type: ignore[attr-defined]
)
"""The session's active path, root first, in one statement: a model step reads it before
every provider call, so each round trip saved is time to first token."""


def to_ui_message(row: Message) -> UIMessage:
    metadata = dict(row.meta)
    if row.role == "assistant":
        metadata.setdefault("status", row.status)
    return UIMessage.model_validate(
        {"id": row.id, "role": row.role, "parts": row.parts, "metadata": metadata or None}
    )


def path_of(session: Session, *, session_id: str) -> list[UIMessage]:
    # sqlmodel types `exec` for plain selects only; a `from_statement` returns rows.
    rows = session.exec(  # type: ignore[call-overload]
        select(Message).from_statement(_ACTIVE_PATH), params={"sid": session_id}
    )
    return [to_ui_message(row) for row in rows.scalars().all()]


async def active_path(db: Database, *, session_id: str) -> list[UIMessage]:
    return await db.read_sync(lambda session: path_of(session, session_id=session_id))
