"""Branches of the message tree: siblings, the active leaf, and forks into new sessions."""

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.busy_session import SessionBusy
from storage.db import Database
from storage.errors import StoreError
from storage.session_keys import session_key
from storage.sessions import lineage
from storage.tables import ChatSessionRow, MessageRow
from storage.timing import now
from storage.workspaces import copy_workspace

MAX_DEPTH = 100_000
"""A bound on walking the tree (a session has at most this many turns in a path)."""


class MessageNotFound(StoreError):
    code = "message_not_found"


class SessionExists(StoreError):
    code = "session_exists"


async def _message(session: AsyncSession, chat: ChatSessionRow, message_id: str) -> MessageRow:
    row = await session.get(MessageRow, (chat.id, message_id))
    if row is None:
        raise MessageNotFound(f"no message {message_id!r} in session {chat.chat_id!r}")
    return row


async def siblings(db: Database, *, chat: ChatSessionRow, message_id: str) -> list[MessageRow]:
    """The message and the others with its parent (its alternatives), oldest first."""
    async with db.read() as session:
        row = await _message(session, chat, message_id)
        parent = (
            col(MessageRow.parent_id).is_(None)
            if row.parent_id is None
            else col(MessageRow.parent_id) == row.parent_id
        )
        rows = await session.exec(
            select(MessageRow)
            .where(MessageRow.session_id == chat.id, parent)
            .order_by(col(MessageRow.created_at), col(MessageRow.id))
        )
        return list(rows.all())


async def _newest_leaf_under(session: AsyncSession, session_id: str, message_id: str) -> str:
    current = message_id
    for _ in range(MAX_DEPTH):
        child = (
            await session.exec(
                select(MessageRow.id)
                .where(MessageRow.session_id == session_id, MessageRow.parent_id == current)
                .order_by(col(MessageRow.created_at).desc(), col(MessageRow.id).desc())
                .limit(1)
            )
        ).first()
        if child is None:
            return current
        current = child
    return current


async def switch_leaf(db: Database, *, chat: ChatSessionRow, message_id: str) -> str:
    """Make the branch through `message_id` active (down to its newest leaf); returns the
    new leaf. Refused while a turn runs: its answer is attached to the path it started on."""
    async with db.write() as session:
        locked = (
            await session.exec(
                select(ChatSessionRow).where(ChatSessionRow.id == chat.id).with_for_update()
            )
        ).one()
        if locked.running_submission_id is not None:
            raise SessionBusy(f"a turn is running in session {chat.chat_id!r}; switch when it ends")
        await _message(session, chat, message_id)
        locked.leaf_message_id = await _newest_leaf_under(session, chat.id, message_id)
        locked.updated_at = now()
        session.add(locked)
        return locked.leaf_message_id


async def fork(
    db: Database, *, chat: ChatSessionRow, message_id: str, new_chat_id: str
) -> ChatSessionRow:
    """A new session of the tenant, `new_chat_id`, whose transcript is the path from the root
    to `message_id` (copied), and whose workspace starts as a copy of the session's."""
    at = now()
    async with db.write() as session:
        taken = await session.exec(
            select(ChatSessionRow.id).where(
                ChatSessionRow.tenant_id == chat.tenant_id, ChatSessionRow.chat_id == new_chat_id
            )
        )
        if taken.first() is not None:
            raise SessionExists(f"session {new_chat_id!r} exists already; pick another id")
        path: list[MessageRow] = []
        current: str | None = message_id
        while current is not None and len(path) < MAX_DEPTH:
            row = await _message(session, chat, current)
            path.append(row)
            current = row.parent_id
        forked = ChatSessionRow(
            id=session_key(chat.tenant_id, new_chat_id),
            tenant_id=chat.tenant_id,
            chat_id=new_chat_id,
            title=chat.title,
            agent=chat.agent,
            leaf_message_id=message_id,
            created_at=at,
            updated_at=at,
        )
        session.add(forked)
        for row in reversed(path):
            session.add(
                MessageRow(
                    session_id=forked.id,
                    id=row.id,
                    parent_id=row.parent_id,
                    role=row.role,
                    parts=row.parts,
                    meta={**row.meta, "forkedFrom": chat.chat_id},
                    status=row.status,
                    submission_id=None,
                    created_at=row.created_at,
                )
            )
        # A sub-agent's session works in its root's workspace: that is the one to copy.
        home = (await lineage(session, chat.id))[-1]
        await copy_workspace(session, from_session=home, to_session=forked.id)
        return forked
