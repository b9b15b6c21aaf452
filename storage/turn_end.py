"""A turn's end in the store, in one transaction: close its log, store its answer, release its
session and admit the next submission (storage/admission.py)."""

from collections.abc import Callable
from dataclasses import dataclass

from sqlmodel import Session

from perdure.domain.payloads import Outcome
from perdure.domain.reducer import Reduction
from perdure.domain.ui import Chunk
from perdure.domain.usage import Usage
from storage.admission import admit_next
from storage.chunks import LogWriter, insert_chunks, locked_log_tail
from storage.db import Database
from storage.submission_locks import ACTIVE, locked_with_session
from storage.tables import ChatSessionRow, MessageRow, SubmissionRow
from storage.timing import now
from storage.tool_waits import cancel_pending
from storage.usage import turn_usage

ClosingPlan = Callable[[list[Chunk], Usage | None], tuple[list[Chunk], Reduction]]
"""The whole log and the turn's usage → the chunks that close it, and the answer to store
(their reduction)."""


@dataclass(frozen=True)
class TurnEnd:
    """How a turn ends, as its finisher has it."""

    submission_id: str
    session_id: str
    outcome: Outcome
    read: list[tuple[int, Chunk]]
    """The log's `(seq, chunk)` rows as the finisher read them."""
    plan: ClosingPlan
    error: str | None
    writer: LogWriter


@dataclass(frozen=True)
class Finished:
    following: SubmissionRow | None
    """The submission admitted next (its workflow needs the admit signal), or the running one."""
    closed: bool
    """This call closed the log (a repeated finish changes nothing)."""


async def end_turn(db: Database, end: TurnEnd) -> Finished:
    """In one transaction: close the log, store the answer, release the session, admit the next.

    `end.read`: what was appended since (a model step still writing: a stop that cancels it
    does not wait for it) is read inside the transaction, the log's row locked, so the closing
    chunks follow the whole log and the stored answer is its reduction; the locked read is only
    that tail. A client that sees the closing chunk can read the stored answer at once.
    Idempotent: run again after a crash it changes nothing and returns the same next
    submission, so the caller can repeat its admit signal.
    """
    return await db.transact(_Closing(end, at=now(), notify=not db.is_sqlite).close)


@dataclass(frozen=True)
class _Closing:
    """`end_turn`'s transaction, step by step."""

    end: TurnEnd
    at: float
    notify: bool

    def close(self, session: Session) -> Finished:
        chat, submission = locked_with_session(session, self.end.submission_id, self.end.session_id)
        if submission is None:
            return Finished(None, closed=False)
        closed = False
        if submission.status in ACTIVE:
            closing, answer = self._closing_plan(session, submission)
            if closing:
                insert_chunks(
                    session,
                    message_id=submission.assistant_message_id,
                    chunks=closing,
                    writer=self.end.writer,
                    notify=self.notify,
                    close=True,
                )
                closed = True
            self._record_ending(session, chat, submission, answer)
        return Finished(self._following(session, chat, submission), closed)

    def _closing_plan(
        self, session: Session, submission: SubmissionRow
    ) -> tuple[list[Chunk], Reduction]:
        read = self.end.read
        last = read[-1][0] if read else -1
        tail = locked_log_tail(session, submission.assistant_message_id, after=last)
        # Read with the log locked: no model step can add its usage any more.
        usage = turn_usage(session, submission.id)
        return self.end.plan([chunk for _, chunk in read + tail], usage)

    def _record_ending(
        self,
        session: Session,
        chat: ChatSessionRow | None,
        submission: SubmissionRow,
        answer: Reduction,
    ) -> None:
        """The submission's status, its stored answer (a turn that ran), the leaf after it."""
        outcome, at = self.end.outcome, self.at
        was_running = submission.status == "running"
        cancel_pending(session, submission_id=submission.id, reason=f"turn {outcome}")
        submission.status = outcome
        submission.completed_at = at
        submission.error = self.end.error
        session.add(submission)
        if was_running and chat is not None and answer.parts:
            session.add(
                MessageRow(
                    session_id=chat.id,
                    id=submission.assistant_message_id,
                    parent_id=submission.user_message_id,
                    role="assistant",
                    parts=answer.parts,
                    meta=answer.metadata,
                    status=outcome,
                    submission_id=submission.id,
                    created_at=at,
                )
            )
            if chat.leaf_message_id == submission.user_message_id:
                chat.leaf_message_id = submission.assistant_message_id
        if submission.rolled_back and chat is not None:
            _roll_back(session, chat, submission)

    def _following(
        self, session: Session, chat: ChatSessionRow | None, submission: SubmissionRow
    ) -> SubmissionRow | None:
        """Release the session and admit the next; a repeated finish finds the one admitted."""
        if chat is None:
            return None
        if chat.running_submission_id == submission.id:
            chat.running_submission_id = None
            chat.updated_at = self.at
            following = admit_next(session, chat, self.at)
            session.add(chat)
            return following
        if chat.running_submission_id is not None:
            return session.get(SubmissionRow, chat.running_submission_id)
        return None


def _roll_back(session: Session, chat: ChatSessionRow, submission: SubmissionRow) -> None:
    """A turn stopped by `rollback`: its messages stay stored but leave the active path (the
    leaf goes back to where its first user message was applied)."""
    first = (submission.prior_messages or [submission.user_message])[0]
    applied = session.get(MessageRow, (chat.id, str(first["id"])))
    if applied is not None and chat.leaf_message_id in (
        submission.user_message_id,
        submission.assistant_message_id,
    ):
        chat.leaf_message_id = applied.parent_id
