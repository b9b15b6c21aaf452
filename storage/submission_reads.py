"""Reading one submission: by id, by the answer it writes, the one a resuming client's stream
follows, and the active ones the reconciler looks after."""

from sqlmodel import col, select

from storage.db import Database
from storage.submission_locks import ACTIVE
from storage.tables import ChatSessionRow, SubmissionRow
from storage.timing import now


async def get_submission(db: Database, submission_id: str) -> SubmissionRow | None:
    return await db.read_sync(lambda session: session.get(SubmissionRow, submission_id))


async def submission_of_answer(
    db: Database, *, tenant_id: str, chat_id: str, message_id: str
) -> SubmissionRow | None:
    """The turn that writes (or wrote) assistant message `message_id` in the tenant's session
    `chat_id`."""
    statement = (
        select(SubmissionRow)
        .join(ChatSessionRow, col(ChatSessionRow.id) == SubmissionRow.session_id)
        .where(
            ChatSessionRow.tenant_id == tenant_id,
            ChatSessionRow.chat_id == chat_id,
            SubmissionRow.assistant_message_id == message_id,
        )
    )
    return await db.read_sync(lambda session: session.exec(statement).first())


async def stream_target(db: Database, *, session_id: str, latest: bool) -> SubmissionRow | None:
    """The submission whose stream a resuming client wants.

    The running one, else the oldest queued one; with `latest`, also the newest finished one
    (a cursor resume of a turn that ended while the client was away).
    """
    async with db.read() as session:
        chat = await session.get(ChatSessionRow, session_id)
        if chat is None:
            return None
        if chat.running_submission_id is not None:
            running = await session.get(SubmissionRow, chat.running_submission_id)
            if running is not None:
                return running
        pending = await session.exec(
            select(SubmissionRow)
            .where(SubmissionRow.session_id == session_id, SubmissionRow.status == "pending")
            .order_by(col(SubmissionRow.queue_seq))
        )
        first = pending.first()
        if first is not None or not latest:
            return first
        newest = await session.exec(
            select(SubmissionRow)
            .where(SubmissionRow.session_id == session_id)
            .order_by(col(SubmissionRow.queue_seq).desc())
        )
        return newest.first()


async def stale_active(db: Database, *, older_than: float) -> list[SubmissionRow]:
    """Pending or running submissions created more than `older_than` seconds ago."""
    async with db.read() as session:
        rows = await session.exec(
            select(SubmissionRow)
            .where(
                col(SubmissionRow.status).in_(ACTIVE),
                col(SubmissionRow.created_at) <= now() - older_than,
            )
            .order_by(col(SubmissionRow.created_at))
        )
        return list(rows.all())
