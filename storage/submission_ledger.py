"""Reading and keeping the submissions ledger: list, read, delete ended ones (stops are
storage/stops.py's)."""

from sqlalchemy import ColumnElement, delete, func
from sqlmodel import col, select

from storage.db import Database
from storage.tables import (
    ChatSessionRow,
    ChunkLogRow,
    ChunkRow,
    IncidentRow,
    SubmissionRow,
    ToolWaitRow,
)
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
) -> tuple[list[SubmissionRow], int]:
    """The session's submissions in queue order (oldest first), and how many match."""
    where: list[ColumnElement[bool]] = [
        col(SubmissionRow.tenant_id) == tenant_id,
        col(SubmissionRow.session_id) == session_id,
    ]
    if statuses:
        where.append(col(SubmissionRow.status).in_(statuses))
    async with db.read() as session:
        total = (
            await session.exec(select(func.count()).select_from(SubmissionRow).where(*where))
        ).one()
        rows = await session.exec(
            select(SubmissionRow)
            .where(*where)
            .order_by(col(SubmissionRow.queue_seq), col(SubmissionRow.id))
            .offset(offset)
            .limit(limit)
        )
        return list(rows.all()), total


async def owned_submission(
    db: Database, *, tenant_id: str, session_id: str, submission_id: str
) -> SubmissionRow | None:
    async with db.read() as session:
        row = await session.get(SubmissionRow, submission_id)
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
                    select(SubmissionRow.id, SubmissionRow.assistant_message_id)
                    .where(
                        SubmissionRow.tenant_id == tenant_id,
                        SubmissionRow.session_id == session_id,
                        col(SubmissionRow.status).in_(ENDED),
                        col(SubmissionRow.completed_at) < completed_before,
                    )
                    .order_by(col(SubmissionRow.completed_at))
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
        await connection.execute(delete(ChunkLogRow).where(col(ChunkLogRow.message_id).in_(logs)))
        await connection.execute(delete(IncidentRow).where(col(IncidentRow.submission_id).in_(ids)))
        await connection.execute(delete(ToolWaitRow).where(col(ToolWaitRow.submission_id).in_(ids)))
        await connection.execute(delete(SubmissionRow).where(col(SubmissionRow.id).in_(ids)))
        return len(ids)


async def clear_session(db: Database, *, tenant_id: str, session_id: str) -> list[SubmissionRow]:
    """Start the transcript afresh: the active path becomes empty (the messages stay in the
    tree), and every queued submission is marked cancelled so none is admitted any more.
    Returns those submissions: their turns end `skipped`."""
    async with db.write() as session:
        chat = (
            await session.exec(
                select(ChatSessionRow).where(ChatSessionRow.id == session_id).with_for_update()
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
                    select(SubmissionRow).where(
                        SubmissionRow.session_id == session_id, SubmissionRow.status == "pending"
                    )
                )
            ).all()
        )
        for row in queued:
            if row.cancel_requested_at is None:
                row.cancel_requested_at = now()
                session.add(row)
        return queued
