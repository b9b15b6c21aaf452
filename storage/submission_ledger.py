"""Reading and keeping the submissions ledger: list, read, delete ended ones (stops are
storage/stops.py's)."""

from sqlalchemy import ColumnElement, delete, func
from sqlmodel import col, select

from storage.db import Database
from storage.tables import ChatSession, ChunkLog, ChunkRow, IncidentRow, Submission, ToolWait
from storage.timing import now

ENDED = ("completed", "aborted", "skipped", "error")


async def list_submissions(
    db: Database,
    *,
    tenant_id: str,
    session_id: str,
    statuses: list[str] | None,
    limit: int,
    offset: int,
) -> tuple[list[Submission], int]:
    """The session's submissions in queue order (oldest first), and how many match."""
    where: list[ColumnElement[bool]] = [
        col(Submission.tenant_id) == tenant_id,
        col(Submission.session_id) == session_id,
    ]
    if statuses:
        where.append(col(Submission.status).in_(statuses))
    async with db.read() as session:
        total = (
            await session.exec(select(func.count()).select_from(Submission).where(*where))
        ).one()
        rows = await session.exec(
            select(Submission)
            .where(*where)
            .order_by(col(Submission.queue_seq), col(Submission.id))
            .offset(offset)
            .limit(limit)
        )
        return list(rows.all()), total


async def owned_submission(
    db: Database, *, tenant_id: str, session_id: str, submission_id: str
) -> Submission | None:
    async with db.read() as session:
        row = await session.get(Submission, submission_id)
    if row is None or (row.tenant_id, row.session_id) != (tenant_id, session_id):
        return None
    return row


async def delete_ended(
    db: Database, *, tenant_id: str, session_id: str, completed_before: float, limit: int
) -> int:
    """Delete up to `limit` ended submissions that ended before `completed_before`, with their
    chunk logs, incidents and waits (the stored messages stay). Returns how many."""
    async with db.write() as session:
        doomed = list(
            (
                await session.exec(
                    select(Submission.id, Submission.assistant_message_id)
                    .where(
                        Submission.tenant_id == tenant_id,
                        Submission.session_id == session_id,
                        col(Submission.status).in_(ENDED),
                        col(Submission.completed_at) < completed_before,
                    )
                    .order_by(col(Submission.completed_at))
                    .limit(limit)
                )
            ).all()
        )
        if not doomed:
            return 0
        ids = [submission_id for submission_id, _ in doomed]
        logs = [message_id for _, message_id in doomed]
        connection = await session.connection()
        await connection.execute(delete(ChunkRow).where(col(ChunkRow.message_id).in_(logs)))
        await connection.execute(delete(ChunkLog).where(col(ChunkLog.message_id).in_(logs)))
        await connection.execute(delete(IncidentRow).where(col(IncidentRow.submission_id).in_(ids)))
        await connection.execute(delete(ToolWait).where(col(ToolWait.submission_id).in_(ids)))
        await connection.execute(delete(Submission).where(col(Submission.id).in_(ids)))
        return len(ids)


async def clear_session(db: Database, *, tenant_id: str, session_id: str) -> list[Submission]:
    """Start the transcript afresh: the active path becomes empty (the messages stay in the
    tree), and every queued submission is marked cancelled so none is admitted any more.
    Returns those submissions: their turns end `skipped`."""
    async with db.write() as session:
        chat = (
            await session.exec(
                select(ChatSession).where(ChatSession.id == session_id).with_for_update()
            )
        ).first()
        if chat is None or chat.tenant_id != tenant_id:
            return []
        chat.leaf_message_id = None
        chat.updated_at = now()
        session.add(chat)
        queued = list(
            (
                await session.exec(
                    select(Submission).where(
                        Submission.session_id == session_id, Submission.status == "pending"
                    )
                )
            ).all()
        )
        for row in queued:
            if row.cancel_requested_at is None:
                row.cancel_requested_at = now()
                session.add(row)
        return queued
