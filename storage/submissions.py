"""The submissions ledger: idempotent intake and per-session FIFO admission (DESIGN §3)."""

import uuid
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from domain.payloads import FinishTurnInput, Outcome
from domain.reducer import Reduction
from domain.turn_chunks import closing_chunks
from domain.ui import Chunk, UIMessage
from storage.chunks import LogWriter, insert_chunks
from storage.db import Database
from storage.errors import MessageConflict, SessionNotFound
from storage.tables import ChatSession, ChunkLog, ChunkRow, Message, Submission
from storage.timing import now

ACTIVE = ("pending", "running")
TITLE_LENGTH = 80


@dataclass(frozen=True)
class SubmitOutcome:
    submission: Submission
    created: bool


def new_submission_id() -> str:
    return uuid.uuid4().hex


def new_assistant_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


async def _locked_session(session: AsyncSession, session_id: str) -> ChatSession | None:
    result = await session.exec(
        select(ChatSession).where(ChatSession.id == session_id).with_for_update()
    )
    return result.first()


def _admit(session: AsyncSession, chat: ChatSession, submission: Submission, at: float) -> None:
    """Apply the user message at the leaf and mark the submission running (FIFO visibility)."""
    session.add(
        Message(
            session_id=chat.id,
            id=submission.user_message_id,
            parent_id=chat.leaf_message_id,
            role="user",
            parts=submission.user_message.get("parts", []),
            meta=submission.user_message.get("metadata") or {},
            status="completed",
            submission_id=submission.id,
            created_at=at,
        )
    )
    chat.leaf_message_id = submission.user_message_id
    chat.running_submission_id = submission.id
    chat.updated_at = at
    submission.status = "running"
    submission.started_at = at
    session.add(chat)
    session.add(submission)


async def _admit_next(session: AsyncSession, chat: ChatSession, at: float) -> Submission | None:
    """Admit the session's oldest queued submission, if any (the caller released the session)."""
    queued = await session.exec(
        select(Submission)
        .where(Submission.session_id == chat.id, Submission.status == "pending")
        .order_by(col(Submission.queue_seq))
    )
    following = queued.first()
    if following is not None:
        _admit(session, chat, following, at)
    return following


async def _by_key(session: AsyncSession, session_id: str, key: str) -> Submission | None:
    result = await session.exec(
        select(Submission).where(
            Submission.session_id == session_id, Submission.idempotency_key == key
        )
    )
    return result.first()


async def _message_id_taken(session: AsyncSession, session_id: str, message_id: str) -> bool:
    if await session.get(Message, (session_id, message_id)) is not None:
        return True
    queued = await session.exec(
        select(Submission.id).where(
            Submission.session_id == session_id,
            Submission.user_message_id == message_id,
            col(Submission.status).in_(ACTIVE),
        )
    )
    return queued.first() is not None


async def _submit_once(
    db: Database,
    *,
    tenant_id: str,
    session_id: str,
    agent: str,
    message: UIMessage,
    idempotency_key: str,
) -> SubmitOutcome:
    at = now()

    async def record(session: AsyncSession) -> SubmitOutcome:
        chat = await _locked_session(session, session_id)
        if chat is None:
            # A new session has no submissions or messages to look up, and is inserted once,
            # at commit, with its final values: three statements fewer on a first message. A
            # concurrent request creating it too fails the commit; `submit` then looks again.
            chat = ChatSession(
                id=session_id,
                tenant_id=tenant_id,
                title=message.text().strip()[:TITLE_LENGTH],
                agent=agent,
                created_at=at,
                updated_at=at,
            )
        elif chat.tenant_id != tenant_id:
            raise SessionNotFound(f"session {session_id!r} not found")
        else:
            existing = await _by_key(session, session_id, idempotency_key)
            if existing is not None:
                return SubmitOutcome(existing, created=False)
            if await _message_id_taken(session, session_id, message.id):
                raise MessageConflict(
                    f"message {message.id!r} already exists in session {session_id!r}; "
                    "send a new message id, or repeat the original request to attach to its turn"
                )
        submission = Submission(
            id=new_submission_id(),
            session_id=session_id,
            tenant_id=tenant_id,
            idempotency_key=idempotency_key,
            status="pending",
            agent=chat.agent,
            user_message=message.model_dump(mode="json"),
            user_message_id=message.id,
            assistant_message_id=new_assistant_message_id(),
            queue_seq=chat.next_queue_seq,
            created_at=at,
        )
        chat.next_queue_seq += 1
        session.add(submission)
        if chat.running_submission_id is None:
            _admit(session, chat, submission, at)
        else:
            chat.updated_at = at
        session.add(chat)
        return SubmitOutcome(submission, created=True)

    return await db.transact(record)


async def submit(
    db: Database,
    *,
    tenant_id: str,
    session_id: str,
    agent: str,
    message: UIMessage,
    idempotency_key: str,
) -> SubmitOutcome:
    """Record a submission once per key; admit it at once when the session is idle."""
    for _ in range(3):
        try:
            return await _submit_once(
                db,
                tenant_id=tenant_id,
                session_id=session_id,
                agent=agent,
                message=message,
                idempotency_key=idempotency_key,
            )
        except IntegrityError:
            # A concurrent request created the session or the same key first: look again.
            continue
    raise MessageConflict("the session changed concurrently; retry the request")


async def get_submission(db: Database, submission_id: str) -> Submission | None:
    return await db.read_sync(lambda session: session.get(Submission, submission_id))


async def stream_target(db: Database, *, session_id: str, latest: bool) -> Submission | None:
    """The submission whose stream a resuming client wants.

    The running one, else the oldest queued one; with `latest`, also the newest finished one
    (a cursor resume of a turn that ended while the client was away).
    """
    async with db.read() as session:
        chat = await session.get(ChatSession, session_id)
        if chat is None:
            return None
        if chat.running_submission_id is not None:
            running = await session.get(Submission, chat.running_submission_id)
            if running is not None:
                return running
        pending = await session.exec(
            select(Submission)
            .where(Submission.session_id == session_id, Submission.status == "pending")
            .order_by(col(Submission.queue_seq))
        )
        first = pending.first()
        if first is not None or not latest:
            return first
        newest = await session.exec(
            select(Submission)
            .where(Submission.session_id == session_id)
            .order_by(col(Submission.queue_seq).desc())
        )
        return newest.first()


async def finish(
    db: Database,
    *,
    submission_id: str,
    outcome: Outcome,
    closing: list[Chunk],
    assistant: Reduction,
    error: str | None,
    writer: LogWriter,
) -> Submission | None:
    """In one transaction: close the log, store the answer, release the session, admit the next.

    A client that sees the closing chunk can read the stored answer at once. Idempotent: run
    again after a crash it changes nothing and returns the same next submission, so the
    caller can repeat its admit signal.
    """
    at = now()

    async def close(session: AsyncSession) -> Submission | None:
        submission = (
            await session.exec(
                select(Submission).where(Submission.id == submission_id).with_for_update()
            )
        ).first()
        if submission is None:
            return None
        chat = await _locked_session(session, submission.session_id)
        if closing and submission.status in ACTIVE:
            await insert_chunks(
                session,
                message_id=submission.assistant_message_id,
                chunks=closing,
                writer=writer,
                notify=not db.is_sqlite,
                close=True,
            )
        if submission.status in ACTIVE:
            was_running = submission.status == "running"
            submission.status = outcome
            submission.completed_at = at
            submission.error = error
            session.add(submission)
            if was_running and chat is not None and assistant.parts:
                session.add(
                    Message(
                        session_id=chat.id,
                        id=submission.assistant_message_id,
                        parent_id=submission.user_message_id,
                        role="assistant",
                        parts=assistant.parts,
                        meta=assistant.metadata,
                        status=outcome,
                        submission_id=submission.id,
                        created_at=at,
                    )
                )
                if chat.leaf_message_id == submission.user_message_id:
                    chat.leaf_message_id = submission.assistant_message_id
        if chat is None:
            return None
        if chat.running_submission_id == submission.id:
            chat.running_submission_id = None
            chat.updated_at = at
            following = await _admit_next(session, chat, at)
            session.add(chat)
            return following
        if chat.running_submission_id is not None:
            return await session.get(Submission, chat.running_submission_id)
        return None

    return await db.transact(close)


async def save_stash(db: Database, *, submission_id: str, data: object) -> None:
    async with db.write() as session:
        submission = await session.get(Submission, submission_id)
        if submission is None:
            raise LookupError(f"submission {submission_id} not found")
        submission.stash = data
        session.add(submission)


async def queued_after(db: Database, *, session_id: str) -> list[Submission]:
    """Submissions waiting behind the running one, oldest first."""
    async with db.read() as session:
        rows = await session.exec(
            select(Submission)
            .where(Submission.session_id == session_id, Submission.status == "pending")
            .order_by(col(Submission.queue_seq))
        )
        return list(rows.all())


async def apply_recovery_plan(
    db: Database, *, session_id: str, keep: list[str], skip: list[str], writer: LogWriter
) -> None:
    """A recovery-boot plan, in one transaction: queued submissions in `keep` run in that
    order (they swap queue positions), those in `skip` end `skipped` with their logs closed."""
    at = now()
    async with db.write() as session:
        rows = (
            await session.exec(
                select(Submission).where(
                    Submission.session_id == session_id, Submission.status == "pending"
                )
            )
        ).all()
        by_id = {row.id: row for row in rows}
        kept = [i for i in keep if i in by_id]
        slots = sorted(by_id[i].queue_seq for i in kept)
        for slot, submission_id in zip(slots, kept, strict=True):
            by_id[submission_id].queue_seq = slot
            session.add(by_id[submission_id])
        for submission_id in skip:
            skipped = by_id.get(submission_id)
            if skipped is None:
                continue
            closing = closing_chunks(
                [],
                FinishTurnInput(
                    submission_id=skipped.id,
                    session_id=session_id,
                    assistant_message_id=skipped.assistant_message_id,
                    agent=skipped.agent,
                    outcome="skipped",
                ),
                terminal_message="",
            )
            await insert_chunks(
                session,
                message_id=skipped.assistant_message_id,
                chunks=closing,
                writer=writer,
                notify=not db.is_sqlite,
                close=True,
            )
            skipped.status = "skipped"
            skipped.completed_at = at
            session.add(skipped)


async def stale_active(db: Database, *, older_than: float) -> list[Submission]:
    """Pending or running submissions created more than `older_than` seconds ago."""
    async with db.read() as session:
        rows = await session.exec(
            select(Submission)
            .where(
                col(Submission.status).in_(ACTIVE),
                col(Submission.created_at) <= now() - older_than,
            )
            .order_by(col(Submission.created_at))
        )
        return list(rows.all())


@dataclass(frozen=True)
class Withdrawal:
    withdrawn: bool
    """False when the submission is gone or finished already, or its turn's log has begun."""
    admitted: Submission | None = None
    """The queued submission admitted in its place: its workflow needs the admit signal."""


async def withdraw_submission(db: Database, *, submission_id: str) -> Withdrawal:
    """Undo an intake whose turn could not be started (Temporal unreachable), in one transaction.

    Deletes the submission; if it had been admitted, also deletes its user message, moves the
    session's leaf back to that message's parent, releases the session and admits the oldest
    other queued submission, as `finish` does. A session created by this very submission and
    left empty is deleted too. Changes nothing once the turn's log has begun: its workflow
    runs after all.
    """
    at = now()
    async with db.write() as session:
        submission = (
            await session.exec(
                select(Submission).where(Submission.id == submission_id).with_for_update()
            )
        ).first()
        if submission is None or submission.status not in ACTIVE:
            return Withdrawal(withdrawn=False)
        message_id = submission.assistant_message_id
        begun = await session.exec(
            select(ChunkRow.seq).where(ChunkRow.message_id == message_id).limit(1)
        )
        if begun.first() is not None or await session.get(ChunkLog, message_id) is not None:
            return Withdrawal(withdrawn=False)
        chat = await _locked_session(session, submission.session_id)
        if chat is not None and submission.status == "running":
            user_message = await session.get(Message, (chat.id, submission.user_message_id))
            if user_message is not None and user_message.submission_id == submission.id:
                if chat.leaf_message_id == user_message.id:
                    chat.leaf_message_id = user_message.parent_id
                await session.delete(user_message)
            if chat.running_submission_id == submission.id:
                chat.running_submission_id = None
        await session.delete(submission)
        await session.flush()
        if chat is None:
            return Withdrawal(withdrawn=True)
        admitted: Submission | None = None
        if chat.running_submission_id is None:
            admitted = await _admit_next(session, chat, at)
        created_by_it = chat.created_at == submission.created_at
        others = await session.exec(
            select(Submission.id).where(Submission.session_id == chat.id).limit(1)
        )
        messages = await session.exec(
            select(Message.id).where(Message.session_id == chat.id).limit(1)
        )
        if created_by_it and others.first() is None and messages.first() is None:
            await session.delete(chat)
        else:
            session.add(chat)
    return Withdrawal(withdrawn=True, admitted=admitted)
