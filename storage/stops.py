"""Stops: recorded in the store before they are acknowledged, so every path honours them.

A stop is a mark on one submission (`cancel_requested_at`). Whoever reaches a boundary of the
turn reads it there: the model step and the tool step refuse to start, a queued submission is
never admitted, and the finish ends the turn `aborted` unless its ending was decided before
the stop was recorded (`decide_ending`). Both writes lock the submission row (and only it), so
a stop is either recorded before the decision (and wins) or answered `already_finished`.
"""

from dataclasses import dataclass, field
from typing import Literal

from sqlmodel import Session, col, select

from storage.db import Database
from storage.steering import drop_leading_steers
from storage.submission_locks import ACTIVE, locked_submission
from storage.tables import ChatSessionRow, SubmissionRow
from storage.timing import now

StopVerdict = Literal["stopped", "already_finished", "nothing_running"]
Ending = Literal["completed", "aborted", "error", "skipped", "exhausted"]
NOT_OVERRIDDEN: tuple[Ending, ...] = ("aborted", "skipped")
"""Endings a stop does not change: both already end the stream with `abort`."""


@dataclass(frozen=True)
class StopRecord:
    verdict: StopVerdict
    submission: SubmissionRow | None
    """The submission the stop was for (None: `nothing_running`)."""
    dropped_steering: list[SubmissionRow] = field(default_factory=list)
    """With `drop_steering`: the steering messages that waited for the stopped turn, now
    ended unrun (their turns need the skip signal)."""


def _oldest_queued(session: Session, session_id: str) -> SubmissionRow | None:
    """Cancelled ones included: stopping twice stops the same queued turn, not the next."""
    result = session.exec(
        select(SubmissionRow)
        .where(SubmissionRow.session_id == session_id, SubmissionRow.status == "pending")
        .order_by(col(SubmissionRow.queue_seq))
        .with_for_update()
    )
    return result.first()


async def record_stop(
    db: Database, *, session_id: str, submission_id: str | None, drop_steering: bool = False
) -> StopRecord:
    """Stop `submission_id` of the session, or (None) its running turn, else its oldest queued
    one. Repeating a stop is harmless: the first mark stays. Steering messages waiting for a
    stopped running turn stay queued (they run next), unless `drop_steering`."""

    def record(session: Session) -> StopRecord:
        # Only the submission is locked: `finish` locks it before the session, and taking
        # the session first here deadlocked the two on PostgreSQL. A running turn that ends
        # between the read of the session and the lock is seen ended under the lock.
        chat = session.get(ChatSessionRow, session_id)
        if chat is None:
            return StopRecord("nothing_running", None)
        target_id = submission_id or chat.running_submission_id
        target = (
            locked_submission(session, target_id)
            if target_id
            else _oldest_queued(session, session_id)
        )
        if target is None or target.session_id != session_id:
            return StopRecord("nothing_running", None)
        if target.status not in ACTIVE or target.ending is not None:
            return StopRecord("already_finished", target)
        at = now()
        if target.cancel_requested_at is None:
            target.cancel_requested_at = at
            session.add(target)
        dropped = []
        if drop_steering and target.status == "running":
            dropped = drop_leading_steers(session, chat, at=at)
        return StopRecord("stopped", target, dropped)

    return await db.transact(record)


@dataclass(frozen=True)
class Decided:
    ending: Ending
    submission: SubmissionRow | None
    """The row as the decision found it (None: deleted with its session)."""


async def decide_ending(db: Database, *, submission_id: str, proposed: Ending) -> Decided:
    """The turn's ending, decided once: `proposed` (what the workflow saw), or `aborted` when a
    stop was recorded first. A repeated finish (after a crash) gets the first decision."""

    def decide(session: Session) -> Decided:
        row = locked_submission(session, submission_id)
        if row is None:
            return Decided(proposed, None)
        if row.ending is not None:
            return Decided(row.ending, row)  # type: ignore[arg-type]
        if row.status not in ACTIVE:
            return Decided(proposed, row)  # ended by another path: the finish changes nothing
        ending: Ending = proposed
        if row.cancel_requested_at is not None and proposed not in NOT_OVERRIDDEN:
            ending = "aborted"
        row.ending = ending
        session.add(row)
        return Decided(ending, row)

    return await db.transact(decide)
