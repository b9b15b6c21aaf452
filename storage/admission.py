"""A session's FIFO queue and its admission: the one place a submission's turn is let in
(at intake when the session is idle, when the turn ahead of it ends or is withdrawn, when its
debounce is over), and the recovery plans that reorder or skip what waits."""

from sqlmodel import Session, col, select

from perdure.domain.payloads import FinishTurnInput, TurnRef
from perdure.domain.turn_chunks import closing_chunks
from storage.chunks import LogWriter, insert_chunks
from storage.db import Database
from storage.submission_locks import locked_session
from storage.tables import ChatSessionRow, MessageRow, SubmissionRow
from storage.timing import now


def admit(session: Session, chat: ChatSessionRow, submission: SubmissionRow, at: float) -> None:
    """Apply the submission's user messages at the leaf, in order, and mark it running: a
    queued submission's messages join the transcript only when its turn starts."""
    if submission.regenerates:
        chat.leaf_message_id = submission.user_message_id  # the branch point
    elif submission.edit_of is not None:
        chat.leaf_message_id = submission.branch_point
    for message in (
        []
        if submission.regenerates
        else [
            *(submission.prior_messages or []),
            submission.user_message,
        ]
    ):
        session.add(
            MessageRow(
                session_id=chat.id,
                id=str(message["id"]),
                parent_id=chat.leaf_message_id,
                role="user",
                parts=message.get("parts", []),
                meta=message.get("metadata") or {},
                status="completed",
                submission_id=submission.id,
                created_at=at,
            )
        )
        chat.leaf_message_id = str(message["id"])
    chat.running_submission_id = submission.id
    chat.updated_at = at
    submission.status = "running"
    submission.started_at = at
    session.add(chat)
    session.add(submission)


def _queue_head(session: Session, chat: ChatSessionRow) -> SubmissionRow | None:
    queued = session.exec(
        select(SubmissionRow)
        .where(
            SubmissionRow.session_id == chat.id,
            SubmissionRow.status == "pending",
            col(SubmissionRow.cancel_requested_at).is_(None),  # its turn ends without running
        )
        .order_by(col(SubmissionRow.queue_seq))
    )
    return queued.first()


def admit_next(session: Session, chat: ChatSessionRow, at: float) -> SubmissionRow | None:
    """Admit the session's oldest queued submission, if any (the caller released the session),
    unless it is debounced until later: its own turn admits it then (`admit_when_due`)."""
    following = _queue_head(session, chat)
    if following is None or (following.not_before or 0) > at:
        return None
    admit(session, chat, following, at)
    return following


async def admit_when_due(db: Database, *, submission_id: str) -> bool:
    """A debounced submission whose quiet period is over: admit it if the session is idle and
    it heads the queue. False: it waits for the turn ahead of it to end (which admits it) or
    was taken over by a later submission."""

    def admit_due(session: Session) -> bool:
        submission = session.get(SubmissionRow, submission_id)
        if submission is None:
            return False
        chat = locked_session(session, submission.session_id)
        if chat is None:
            return False
        session.refresh(submission)  # read again under the session's lock
        if submission.status == "running":
            return True
        if chat.running_submission_id is not None:
            return False
        head = _queue_head(session, chat)
        if head is None or head.id != submission.id:
            return False
        admit(session, chat, submission, now())
        return True

    return await db.transact(admit_due)


async def queued_after(db: Database, *, session_id: str) -> list[SubmissionRow]:
    """Submissions waiting behind the running one, oldest first."""
    async with db.read() as session:
        rows = await session.exec(
            select(SubmissionRow)
            .where(SubmissionRow.session_id == session_id, SubmissionRow.status == "pending")
            .order_by(col(SubmissionRow.queue_seq))
        )
        return list(rows.all())


async def apply_recovery_plan(
    db: Database, *, session_id: str, keep: list[str], skip: list[str], writer: LogWriter
) -> None:
    """A recovery-boot plan, in one transaction: queued submissions in `keep` run in that
    order (they swap queue positions), those in `skip` end `skipped` with their logs closed."""
    at = now()

    def apply(session: Session) -> None:
        rows = session.exec(
            select(SubmissionRow).where(
                SubmissionRow.session_id == session_id, SubmissionRow.status == "pending"
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
            if skipped is not None:
                _skip(session, skipped, writer=writer, notify=not db.is_sqlite, at=at)

    await db.transact(apply)


def _skip(
    session: Session, skipped: SubmissionRow, *, writer: LogWriter, notify: bool, at: float
) -> None:
    """A queued submission ends `skipped`, its log closed, without running."""
    closing = closing_chunks(
        [],
        FinishTurnInput(
            turn=TurnRef(
                submission_id=skipped.id,
                session_id=skipped.session_id,
                assistant_message_id=skipped.assistant_message_id,
                agent=skipped.agent,
            ),
            outcome="skipped",
        ),
        terminal_message="",
    )
    insert_chunks(
        session,
        message_id=skipped.assistant_message_id,
        chunks=closing,
        writer=writer,
        notify=notify,
        close=True,
    )
    skipped.status = "skipped"
    skipped.completed_at = at
    session.add(skipped)
