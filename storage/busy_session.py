"""A submission that arrives while its session's turn runs: the concurrency strategies."""

from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, col, select

from perdure.domain.concurrency import DEFAULT_DEBOUNCE_MS, Concurrency, ConcurrencyStrategy
from perdure.domain.turn_chunks import start_chunk
from storage.chunks import LogWriter, insert_chunks
from storage.errors import StoreError
from storage.schedule_tables import ServedAgentRow
from storage.tables import ChatSessionRow, SubmissionRow

GATEWAY_WRITER = LogWriter(key="gateway", attempt=1)
DROPPED_REASON = "dropped: the session was busy"


class SessionBusy(StoreError):
    """`reject`: a turn runs in the session."""

    code = "session_busy"


@dataclass
class Effects:
    """What the gateway does in Temporal once the submission is committed."""

    cancel: list[str] = field(default_factory=list)
    """Running submissions to stop."""
    skip: list[SubmissionRow] = field(default_factory=list)
    """Queued submissions whose turns end `skipped`."""


def strategy_for(
    session: Session,
    chat: ChatSessionRow,
    requested: ConcurrencyStrategy | None,
    debounce_ms: int | None,
    task_queue: str | None,
) -> Concurrency:
    """The request's strategy, else the session agent's as its workers recorded it; a
    request's `debounce` without a period takes the agent's."""
    if requested is not None and (requested != "debounce" or debounce_ms is not None):
        # The request says all: no read on the intake's path.
        return Concurrency(requested, debounce_ms=debounce_ms or DEFAULT_DEBOUNCE_MS)
    served = session.get(ServedAgentRow, (task_queue, chat.agent)) if task_queue else None
    strategy = requested or (served.concurrency if served else "queue")
    period = debounce_ms or (served.debounce_ms if served else None) or DEFAULT_DEBOUNCE_MS
    return Concurrency(strategy, debounce_ms=period)  # type: ignore[arg-type]


def absorb_queued(
    session: Session,
    chat: ChatSessionRow,
    submission: SubmissionRow,
    concurrency: Concurrency,
    *,
    at: float,
) -> Effects:
    """`merge` and `debounce`: the submission takes over the messages of the session's
    queued submissions (those after the last one that is not a plain message: a regenerate
    or an edit keeps its place), which end `skipped`, `merged_into` it. `debounce` also
    holds its turn back for the quiet period."""
    effects = Effects()
    if concurrency.strategy == "debounce":
        submission.not_before = at + concurrency.debounce_ms / 1000
    queued = session.exec(
        select(SubmissionRow)
        .where(
            SubmissionRow.session_id == chat.id,
            SubmissionRow.status == "pending",
            SubmissionRow.id != submission.id,
            col(SubmissionRow.cancel_requested_at).is_(None),
        )
        .order_by(col(SubmissionRow.queue_seq))
    )
    absorbed: list[SubmissionRow] = []
    for row in queued.all():
        if row.regenerates or row.edit_of is not None:
            absorbed = []  # a branch keeps its place: only what follows it can move past it
        else:
            absorbed.append(row)
    messages: list[dict[str, Any]] = []
    for row in absorbed:
        messages += [*(row.prior_messages or []), row.user_message]
        row.cancel_requested_at = at
        row.merged_into = submission.id
        row.error = f"merged into submission {submission.id}"
        session.add(row)
        effects.skip.append(row)
    if messages:
        submission.prior_messages = [*messages, *(submission.prior_messages or [])]
    session.add(submission)
    return effects


def can_steer(submission: SubmissionRow) -> bool:
    """Plain new messages join a running turn; a regenerate, an edit or a continue goes back
    to a stored message, and a request's own client tools are offered in a turn of its own:
    those wait their turn as with `queue`."""
    plain = not submission.regenerates and submission.edit_of is None
    return plain and not submission.client_tools


def apply_busy(
    session: Session,
    chat: ChatSessionRow,
    submission: SubmissionRow,
    concurrency: Concurrency,
    *,
    at: float,
    notify: bool,
) -> Effects:
    """Inside the intake transaction, with the session locked and a turn running."""
    strategy = concurrency.strategy
    if concurrency.absorbs_queued:
        return absorb_queued(session, chat, submission, concurrency, at=at)
    effects = Effects()
    if concurrency.steers and can_steer(submission):
        submission.steer = True  # it joins the running turn at its next step boundary
        return effects
    if strategy == "reject":
        raise SessionBusy(
            f"a turn is running in session {chat.chat_id!r} (submission "
            f"{chat.running_submission_id}); send again when it has ended"
        )
    if strategy == "drop":
        _drop(session, submission, at=at, notify=notify)
        return effects
    if strategy == "latest":
        effects.skip += _replace_queued(session, chat, submission, at=at)
    if strategy in ("interrupt", "rollback") and chat.running_submission_id is not None:
        running = session.get(SubmissionRow, chat.running_submission_id)
        if running is not None:
            running.cancel_requested_at = running.cancel_requested_at or at
            running.rolled_back = running.rolled_back or strategy == "rollback"
            session.add(running)
            effects.cancel.append(running.id)
    return effects


def _drop(session: Session, submission: SubmissionRow, *, at: float, notify: bool) -> None:
    """`drop`: the submission ends `skipped` at once, its log closed with `abort`."""
    submission.status = "skipped"
    submission.completed_at = at
    submission.error = DROPPED_REASON
    insert_chunks(
        session,
        message_id=submission.assistant_message_id,
        chunks=[
            start_chunk(submission.assistant_message_id, submission.id),
            {"type": "abort", "reason": DROPPED_REASON},
        ],
        writer=GATEWAY_WRITER,
        notify=notify,
        close=True,
    )


def _replace_queued(
    session: Session, chat: ChatSessionRow, submission: SubmissionRow, *, at: float
) -> list[SubmissionRow]:
    """`latest`: the session's queued submissions are marked to end `skipped`; returns those
    this intake marked."""
    queued = session.exec(
        select(SubmissionRow).where(
            SubmissionRow.session_id == chat.id,
            SubmissionRow.status == "pending",
            SubmissionRow.id != submission.id,
        )
    )
    replaced: list[SubmissionRow] = []
    for row in queued.all():
        if row.cancel_requested_at is None:
            row.cancel_requested_at = at
            row.error = f"replaced by the later submission {submission.id}"
            session.add(row)
            replaced.append(row)
    return replaced
