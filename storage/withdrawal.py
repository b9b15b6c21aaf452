"""Undoing an intake whose turn could not be started (Temporal unreachable): the submission
goes as if never sent, and the session is released as a finish releases it."""

from dataclasses import dataclass

from sqlmodel import Session, select

from storage.admission import admit_next
from storage.db import Database
from storage.submission_locks import ACTIVE, locked_with_session
from storage.tables import ChatSessionRow, ChunkLogRow, ChunkRow, MessageRow, SubmissionRow
from storage.timing import now


@dataclass(frozen=True)
class Withdrawal:
    withdrawn: bool
    """False when the submission is gone or finished already, or its turn's log has begun."""
    admitted: SubmissionRow | None = None
    """The queued submission admitted in its place: its workflow needs the admit signal."""


async def withdraw_submission(db: Database, *, submission_id: str) -> Withdrawal:
    """Undo an intake, in one transaction.

    Deletes the submission; if it had been admitted, also deletes its user messages, moves the
    session's leaf back to where they were applied, releases the session and admits the oldest
    other queued submission, as a turn's end does (storage/turn_end.py). A session created by
    this very submission and left empty is deleted too. Changes nothing once the turn's log has
    begun: its workflow runs after all.
    """
    at = now()

    def withdraw(session: Session) -> Withdrawal:
        chat, submission = locked_with_session(session, submission_id)
        if submission is None or submission.status not in ACTIVE or _log_begun(session, submission):
            return Withdrawal(withdrawn=False)
        if submission.steer and submission.merged_into is not None:
            return Withdrawal(withdrawn=False)  # it joined a running answer: it is answered
        if chat is not None and submission.status == "running":
            _unapply(session, chat, submission)
        session.delete(submission)
        session.flush()
        if chat is None:
            return Withdrawal(withdrawn=True)
        admitted: SubmissionRow | None = None
        if chat.running_submission_id is None:
            admitted = admit_next(session, chat, at)
        _drop_if_empty(session, chat, created_at=submission.created_at)
        return Withdrawal(withdrawn=True, admitted=admitted)

    return await db.transact(withdraw)


def _log_begun(session: Session, submission: SubmissionRow) -> bool:
    message_id = submission.assistant_message_id
    begun = session.exec(select(ChunkRow.seq).where(ChunkRow.message_id == message_id).limit(1))
    return begun.first() is not None or session.get(ChunkLogRow, message_id) is not None


def _unapply(session: Session, chat: ChatSessionRow, submission: SubmissionRow) -> None:
    """An admitted submission: its user messages go, the leaf back to where they were applied,
    and the session is released."""
    applied = [
        row
        for message in [*(submission.prior_messages or []), submission.user_message]
        if (row := session.get(MessageRow, (chat.id, str(message["id"]))))
        and row.submission_id == submission.id
    ]
    if applied and chat.leaf_message_id == applied[-1].id:
        chat.leaf_message_id = applied[0].parent_id
    for row in applied:
        session.delete(row)
    if chat.running_submission_id == submission.id:
        chat.running_submission_id = None


def _drop_if_empty(session: Session, chat: ChatSessionRow, *, created_at: float) -> None:
    """A session the withdrawn submission created (`created_at`), left with no submission or
    message, is deleted too."""
    created_by_it = chat.created_at == created_at
    others = session.exec(
        select(SubmissionRow.id).where(SubmissionRow.session_id == chat.id).limit(1)
    )
    messages = session.exec(select(MessageRow.id).where(MessageRow.session_id == chat.id).limit(1))
    if created_by_it and others.first() is None and messages.first() is None:
        session.delete(chat)
    else:
        session.add(chat)
