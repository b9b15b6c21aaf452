"""The message tree: the active path runs from the session's leaf up to the root."""

from sqlalchemy import text
from sqlmodel import Session, col, select

from perdure.domain.ui import UIMessage
from storage.db import Database
from storage.tables import ChatSessionRow, MessageRow


def path_cte(*, up_to_depth: bool = False) -> str:
    """The session's active path, from its leaf up: `path(id, parent_id, depth)`, the leaf at
    depth 0. With `up_to_depth`, only the newest `:keep` messages."""
    limit = "WHERE path.depth + 1 < :keep" if up_to_depth else ""
    return f"""
        WITH RECURSIVE path(id, parent_id, depth) AS (
            SELECT m.id, m.parent_id, 0
            FROM sessions s JOIN messages m ON m.session_id = s.id AND m.id = s.leaf_message_id
            WHERE s.id = :sid
            UNION ALL
            SELECT m.id, m.parent_id, path.depth + 1
            FROM messages m JOIN path ON m.id = path.parent_id AND m.session_id = :sid
            {limit}
        )
        """


_PATH_MESSAGES = """
    SELECT messages.session_id, messages.id, messages.parent_id, messages.role,
           messages.parts, messages.meta, messages.status, messages.submission_id,
           messages.created_at
    FROM path JOIN messages ON messages.session_id = :sid AND messages.id = path.id
    ORDER BY path.depth DESC
    """
_ACTIVE_PATH = text(path_cte() + _PATH_MESSAGES).columns(
    *MessageRow.__table__.columns  # type: ignore[attr-defined]
)
"""The session's active path, root first, in one statement."""
_ACTIVE_PATH_TAIL = text(path_cte(up_to_depth=True) + _PATH_MESSAGES).columns(
    *MessageRow.__table__.columns  # type: ignore[attr-defined]
)
"""Its newest `:keep` messages: the recursion stops there, so a page of a long chat costs
what the page holds."""

_IS_CUT = """EXISTS (
    SELECT 1 FROM compactions c WHERE c.session_id = :sid AND c.up_to_message_id = m.id
)"""
_RECENT_PATH_IDS = text(f"""
    WITH RECURSIVE path(id, parent_id, depth, cut) AS (
        SELECT m.id, m.parent_id, 0, {_IS_CUT}
        FROM sessions s JOIN messages m ON m.session_id = s.id AND m.id = s.leaf_message_id
        WHERE s.id = :sid
        UNION ALL
        SELECT m.id, m.parent_id, path.depth + 1, {_IS_CUT}
        FROM messages m JOIN path ON m.id = path.parent_id AND m.session_id = :sid
        WHERE NOT path.cut
    )
    SELECT id, cut FROM path ORDER BY depth DESC
    """)
"""The active path's message ids from the leaf back to the newest message a summary covers
(flagged `cut`), root first; the whole path when no summary covers any. The walk stops there,
so a model step of a long chat reads what follows its newest summary, not the whole path."""
_NEWEST_SUMMARY = text(
    "SELECT summary FROM compactions WHERE session_id = :sid AND up_to_message_id = :cut "
    "ORDER BY created_at DESC LIMIT 1"
)
IN_BATCH = 500


def recent_path_of(session: Session, *, session_id: str) -> tuple[str | None, list[UIMessage]]:
    """The newest summary on the active path and the messages after what it covers, read
    with their parts; the whole path when no summary applies (compactions are branch-local:
    one applies where the message it covers up to is on this path). What a model step needs,
    at a cost that does not grow with the length of the chat."""
    walked = [
        (str(row[0]), bool(row[1]))
        for row in session.execute(_RECENT_PATH_IDS, {"sid": session_id})
    ]
    summary: str | None = None
    if walked and walked[0][1]:
        cut_id = walked.pop(0)[0]
        summary = session.execute(_NEWEST_SUMMARY, {"sid": session_id, "cut": cut_id}).scalar()
    recent = [message_id for message_id, _ in walked]
    rows: dict[str, MessageRow] = {}
    for start in range(0, len(recent), IN_BATCH):
        batch = recent[start : start + IN_BATCH]
        statement = select(MessageRow).where(
            MessageRow.session_id == session_id, col(MessageRow.id).in_(batch)
        )
        rows.update({row.id: row for row in session.exec(statement)})
    return summary, [to_ui_message(rows[message_id]) for message_id in recent]


def to_ui_message(row: MessageRow) -> UIMessage:
    metadata = dict(row.meta)
    if row.role == "assistant":
        metadata.setdefault("status", row.status)
    return UIMessage.model_validate(
        {"id": row.id, "role": row.role, "parts": row.parts, "metadata": metadata or None}
    )


def path_of(session: Session, *, session_id: str, newest: int | None = None) -> list[UIMessage]:
    """The active path, root first; only its `newest` messages when given."""
    statement, params = (
        (_ACTIVE_PATH, {"sid": session_id})
        if newest is None
        else (_ACTIVE_PATH_TAIL, {"sid": session_id, "keep": newest})
    )
    # sqlmodel types `exec` for plain selects only; a `from_statement` returns rows.
    rows = session.exec(  # type: ignore[call-overload]
        select(MessageRow).from_statement(statement), params=params
    )
    return [to_ui_message(row) for row in rows.scalars().all()]


async def active_path(
    db: Database, *, session_id: str, newest: int | None = None
) -> list[UIMessage]:
    return await db.read_sync(
        lambda session: path_of(session, session_id=session_id, newest=newest)
    )


async def stored_message(
    db: Database, *, tenant_id: str, chat_id: str, message_id: str
) -> MessageRow | None:
    """A message of the tenant's session `chat_id`, if stored."""
    statement = (
        select(MessageRow)
        .join(ChatSessionRow, col(ChatSessionRow.id) == MessageRow.session_id)
        .where(
            ChatSessionRow.tenant_id == tenant_id,
            ChatSessionRow.chat_id == chat_id,
            MessageRow.id == message_id,
        )
    )

    def read(session: Session) -> MessageRow | None:
        return session.exec(statement).first()

    return await db.read_sync(read)
