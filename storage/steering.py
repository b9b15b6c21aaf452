"""Steering messages: queued submissions sent with `steer` join the running turn at its next
step boundary, in one transaction with the chunks that show them in its log, so each one is
either in the running answer or still queued (it then runs as the next turn), never both or
neither."""

from dataclasses import dataclass, field

from sqlmodel import Session, col, select

from perdure.domain.steering import DROPPED_REASON, JOINED_REASON, steer_chunks
from perdure.domain.ui import Chunk
from storage.chunks import LogWriter, insert_chunks
from storage.db import Database
from storage.submission_locks import locked_with_session
from storage.tables import ChatSessionRow, SubmissionRow
from storage.timing import now


@dataclass(frozen=True)
class Joined:
    chunks: list[Chunk] = field(default_factory=list)
    """The `data-steer` chunks appended to the running answer's log."""
    submissions: list[SubmissionRow] = field(default_factory=list)
    """The steering submissions that joined: their own turns end without running."""


def leading_steers(session: Session, chat: ChatSessionRow) -> list[SubmissionRow]:
    """The steering submissions at the head of the session's queue, oldest first. One queued
    behind a plain message steers that message's turn instead: answers keep their order."""
    queued = session.exec(
        select(SubmissionRow)
        .where(
            SubmissionRow.session_id == chat.id,
            SubmissionRow.status == "pending",
            col(SubmissionRow.cancel_requested_at).is_(None),
        )
        .order_by(col(SubmissionRow.queue_seq))
    )
    leading: list[SubmissionRow] = []
    for row in queued.all():
        if not row.steer:
            break
        leading.append(row)
    return leading


def steering_waits(session: Session, session_id: str) -> bool:
    """Whether the session's queue starts with a steering message: the one-row read a step
    makes before a boundary takes the join's transaction (most boundaries have none)."""
    head = session.exec(
        select(SubmissionRow.steer)
        .where(
            SubmissionRow.session_id == session_id,
            SubmissionRow.status == "pending",
            col(SubmissionRow.cancel_requested_at).is_(None),
        )
        .order_by(col(SubmissionRow.queue_seq))
        .limit(1)
    )
    return bool(head.first())


async def join_steering(
    db: Database, *, submission_id: str, session_id: str, message_id: str, writer: LogWriter
) -> Joined:
    """At a step boundary of the running `submission_id`: append the steering messages that
    wait for it to its answer's log (`message_id`, as `writer`) and mark them joined, in one
    transaction. Nothing joins a turn that is no longer the session's running one, or whose
    stop is recorded: its steering messages run as the next turn."""

    def join(session: Session) -> Joined:
        chat, running = locked_with_session(session, submission_id, session_id)
        if chat is None or running is None or chat.running_submission_id != running.id:
            return Joined()
        if running.cancel_requested_at is not None or running.ending is not None:
            return Joined()
        rows = leading_steers(session, chat)
        if not rows:
            return Joined()
        at = now()
        chunks: list[Chunk] = []
        for row in rows:
            chunks += steer_chunks(row.id, [*(row.prior_messages or []), row.user_message])
            _end_unrun(row, at=at, into=running.id, reason=JOINED_REASON.format(running=running.id))
            session.add(row)
        insert_chunks(
            session, message_id=message_id, chunks=chunks, writer=writer, notify=not db.is_sqlite
        )
        return Joined(chunks, rows)

    return await db.transact(join)


def drop_leading_steers(
    session: Session, chat: ChatSessionRow, *, at: float
) -> list[SubmissionRow]:
    """A stop that says `dropSteering`: the steering messages waiting for the stopped turn end
    without running, recorded as dropped (their turns end `skipped` with that reason)."""
    dropped = leading_steers(session, chat)
    for row in dropped:
        _end_unrun(row, at=at, into=None, reason=DROPPED_REASON)
        session.add(row)
    return dropped


def _end_unrun(row: SubmissionRow, *, at: float, into: str | None, reason: str) -> None:
    """Never admitted from now on; its turn ends `skipped` with `reason` once told to."""
    row.cancel_requested_at = at
    row.merged_into = into
    row.error = reason
