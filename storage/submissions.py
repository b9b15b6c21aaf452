"""The submissions ledger: idempotent intake and per-session FIFO admission
(docs/architecture.md)."""

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from perdure.domain.concurrency import ConcurrencyStrategy
from perdure.domain.payloads import FinishTurnInput, Outcome
from perdure.domain.reducer import Reduction
from perdure.domain.turn_chunks import closing_chunks
from perdure.domain.ui import Chunk, UIMessage
from perdure.domain.usage import Usage
from storage.chunks import LogWriter, insert_chunks, locked_log_tail
from storage.concurrency import Effects, absorb_queued, apply_busy, strategy_for
from storage.db import Database
from storage.errors import MessageConflict, SubmissionConflict
from storage.session_keys import session_key
from storage.tables import ChatSessionRow, ChunkLogRow, ChunkRow, MessageRow, SubmissionRow
from storage.tenant_policies import TenantLimits
from storage.timing import now
from storage.tool_waits import cancel_pending
from storage.usage import turn_usage

ACTIVE = ("pending", "running")
TITLE_LENGTH = 80


@dataclass(frozen=True)
class ParentCall:
    """The tool call a sub-agent's session answers."""

    session_id: str
    tool_call_id: str


@dataclass(frozen=True)
class SubmissionOptions:
    """What some submissions carry beyond a user message."""

    parent: ParentCall | None = None
    """A sub-agent's turn: a new session is linked to the tool call it answers."""
    client_tools: list[dict[str, Any]] | None = None
    """The request's own client tools, for this turn."""
    prior_messages: list[UIMessage] = field(default_factory=list)
    """User messages applied before the last one, in order, when the turn starts."""
    submission_id: str | None = None
    """The submitter's own id for the submission (else one is made)."""
    metadata: dict[str, Any] | None = None
    concurrency: ConcurrencyStrategy | None = None
    """While a turn runs: the request's strategy (else the agent's, from `task_queue`)."""
    debounce_ms: int | None = None
    """With `debounce`: the request's quiet period (else the agent's)."""
    task_queue: str | None = None
    """Where the agents' recorded strategies are looked up."""
    regenerate: bool = False
    """Answer the stored user message `message` again, as a sibling of its earlier answers."""
    edit_of: str | None = None
    """`message` edits this stored user message: it is applied as its sibling."""
    continue_last: bool = False
    """Go on from the active path's last message, an assistant's (`message` is ignored)."""
    limits: TenantLimits | None = None
    """A gateway request's: the tenant's allowed agents and rate limit, checked before a new
    submission is recorded (a repeat that returns an existing one is not checked again)."""


@dataclass(frozen=True)
class SubmitOutcome:
    submission: SubmissionRow
    created: bool
    effects: Effects = field(default_factory=Effects)
    """What the session's concurrency strategy asks of Temporal (stop, skip)."""


def new_submission_id() -> str:
    return uuid.uuid4().hex


def new_assistant_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def _locked_session(session: Session, session_id: str) -> ChatSessionRow | None:
    result = session.exec(
        select(ChatSessionRow).where(ChatSessionRow.id == session_id).with_for_update()
    )
    return result.first()


def locked_submission(session: Session, submission_id: str) -> SubmissionRow | None:
    result = session.exec(
        select(SubmissionRow).where(SubmissionRow.id == submission_id).with_for_update()
    )
    return result.first()


def _locked_with_session(
    session: Session, submission_id: str, session_id: str | None = None
) -> tuple[ChatSessionRow | None, SubmissionRow | None]:
    """The submission and its session, both locked, the session first: the order intake takes
    them in (it locks the session, then changes the running submission); the other order can
    deadlock with an `interrupt` intake on PostgreSQL. `session_id` when the caller knows it
    (saves a read); else it is looked up."""
    if session_id is None:
        session_id = (
            session.exec(select(SubmissionRow.session_id).where(SubmissionRow.id == submission_id))
        ).first()
        if session_id is None:
            return None, None
    chat = _locked_session(session, session_id)
    return chat, locked_submission(session, submission_id)


def _locked_chat(session: Session, tenant_id: str, chat_id: str) -> ChatSessionRow | None:
    """The tenant's session a client knows by `chat_id`, locked (as `_locked_session`)."""
    result = session.exec(
        select(ChatSessionRow)
        .where(ChatSessionRow.tenant_id == tenant_id, ChatSessionRow.chat_id == chat_id)
        .with_for_update()
    )
    return result.first()


def _admit(session: Session, chat: ChatSessionRow, submission: SubmissionRow, at: float) -> None:
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


def _admit_next(session: Session, chat: ChatSessionRow, at: float) -> SubmissionRow | None:
    """Admit the session's oldest queued submission, if any (the caller released the session),
    unless it is debounced until later: its own turn admits it then (`admit_when_due`)."""
    following = _queue_head(session, chat)
    if following is None or (following.not_before or 0) > at:
        return None
    _admit(session, chat, following, at)
    return following


async def admit_when_due(db: Database, *, submission_id: str) -> bool:
    """A debounced submission whose quiet period is over: admit it if the session is idle and
    it heads the queue. False: it waits for the turn ahead of it to end (which admits it) or
    was taken over by a later submission."""

    def admit(session: Session) -> bool:
        submission = session.get(SubmissionRow, submission_id)
        if submission is None:
            return False
        chat = _locked_session(session, submission.session_id)
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
        _admit(session, chat, submission, now())
        return True

    return await db.transact(admit)


def _by_key(session: Session, session_id: str, key: str) -> SubmissionRow | None:
    result = session.exec(
        select(SubmissionRow).where(
            SubmissionRow.session_id == session_id, SubmissionRow.idempotency_key == key
        )
    )
    return result.first()


def _message_id_taken(session: Session, session_id: str, message_id: str) -> bool:
    if session.get(MessageRow, (session_id, message_id)) is not None:
        return True
    queued = session.exec(
        select(SubmissionRow.id).where(
            SubmissionRow.session_id == session_id,
            SubmissionRow.user_message_id == message_id,
            col(SubmissionRow.status).in_(ACTIVE),
        )
    )
    return queued.first() is not None


def _stored_user_message(session: Session, chat: ChatSessionRow, message_id: str) -> MessageRow:
    stored = session.get(MessageRow, (chat.id, message_id))
    if stored is None or stored.role != "user":
        raise MessageConflict(f"no stored user message {message_id!r} in session {chat.chat_id!r}")
    return stored


def _as_ui_message(stored: MessageRow) -> UIMessage:
    return UIMessage.model_validate(
        {
            "id": stored.id,
            "role": stored.role,
            "parts": stored.parts,
            "metadata": stored.meta or None,
        }
    )


def _last_answer(session: Session, chat: ChatSessionRow) -> UIMessage:
    """The assistant message a `continue_last` turn goes on from: the active path's last."""
    last = (
        session.get(MessageRow, (chat.id, chat.leaf_message_id)) if chat.leaf_message_id else None
    )
    if last is None or last.role != "assistant":
        raise MessageConflict(
            f"session {chat.chat_id!r} has no answer to continue: its last message is not an "
            "assistant's"
        )
    return _as_ui_message(last)


async def _submit_once(
    db: Database,
    *,
    tenant_id: str,
    chat_id: str,
    agent: str,
    message: UIMessage,
    idempotency_key: str,
    options: SubmissionOptions,
) -> SubmitOutcome:
    at = now()
    parent = options.parent
    messages = [*options.prior_messages, message]

    def record(session: Session) -> SubmitOutcome:
        if options.submission_id is not None:
            named = session.get(SubmissionRow, options.submission_id)
            if named is not None:
                owner = session.get(ChatSessionRow, named.session_id)
                if (owner.chat_id if owner else None, named.tenant_id, named.idempotency_key) != (
                    chat_id,
                    tenant_id,
                    idempotency_key,
                ):
                    raise SubmissionConflict(
                        f"submission {options.submission_id!r} exists with another "
                        "session or idempotency key"
                    )
                return SubmitOutcome(named, created=False)
        answered = message
        branch_point: str | None = None
        chat = _locked_chat(session, tenant_id, chat_id)
        if chat is None and (options.regenerate or options.edit_of or options.continue_last):
            raise MessageConflict(f"session {chat_id!r} has no message to answer again")
        if chat is None:
            # A new session has no submissions or messages to look up, and is inserted once,
            # at commit, with its final values: three statements fewer on a first message. A
            # concurrent request creating it too fails the commit (the key is deterministic);
            # `submit` then looks again.
            chat = ChatSessionRow(
                id=session_key(tenant_id, chat_id),
                tenant_id=tenant_id,
                chat_id=chat_id,
                title=message.text().strip()[:TITLE_LENGTH],
                agent=agent,
                created_at=at,
                updated_at=at,
                parent_session_id=parent.session_id if parent else None,
                parent_tool_call_id=parent.tool_call_id if parent else None,
            )
        else:
            existing = _by_key(session, chat.id, idempotency_key)
            if existing is not None:
                if options.submission_id not in (None, existing.id):
                    raise SubmissionConflict(
                        f"idempotency key {idempotency_key!r} names submission {existing.id!r}, "
                        f"not {options.submission_id!r}"
                    )
                return SubmitOutcome(existing, created=False)
            if options.regenerate:
                answered = _as_ui_message(_stored_user_message(session, chat, message.id))
            if options.continue_last:
                answered = _last_answer(session, chat)
            if options.edit_of is not None:
                edited = _stored_user_message(session, chat, options.edit_of)
                branch_point = edited.parent_id
            for each in [] if options.regenerate or options.continue_last else messages:
                if _message_id_taken(session, chat.id, each.id):
                    raise MessageConflict(
                        f"message {each.id!r} already exists in session {chat_id!r}; send "
                        "a new message id, or repeat the original request to attach to its turn"
                    )
        if options.limits is not None:
            options.limits.check(session, agent=chat.agent, at=at)
        submission = SubmissionRow(
            id=options.submission_id or new_submission_id(),
            session_id=chat.id,
            chat_id=chat.chat_id,
            tenant_id=tenant_id,
            idempotency_key=idempotency_key,
            status="pending",
            agent=chat.agent,
            user_message=answered.model_dump(mode="json"),
            user_message_id=answered.id,
            assistant_message_id=new_assistant_message_id(),
            queue_seq=chat.next_queue_seq,
            created_at=at,
            client_tools=options.client_tools,
            meta=options.metadata,
            prior_messages=[m.model_dump(mode="json") for m in options.prior_messages] or None,
            regenerates=options.regenerate or options.continue_last or None,
            edit_of=options.edit_of,
            branch_point=branch_point,
            fairness_weight=options.limits.fairness_weight if options.limits else None,
        )
        chat.next_queue_seq += 1
        session.add(submission)
        concurrency = strategy_for(
            session, chat, options.concurrency, options.debounce_ms, options.task_queue
        )
        effects = Effects()
        if chat.running_submission_id is not None:
            effects = apply_busy(
                session, chat, submission, concurrency, at=at, notify=not db.is_sqlite
            )
            chat.updated_at = at
        elif concurrency.strategy == "debounce":
            effects = absorb_queued(session, chat, submission, concurrency, at=at)
            chat.updated_at = at
        else:
            _admit(session, chat, submission, at)
        session.add(chat)
        return SubmitOutcome(submission, created=True, effects=effects)

    return await db.transact(record)


async def submit(
    db: Database,
    *,
    tenant_id: str,
    chat_id: str,
    agent: str,
    message: UIMessage,
    idempotency_key: str,
    options: SubmissionOptions | None = None,
) -> SubmitOutcome:
    """Record a submission once per key (and per id, when the submitter names it) in the
    tenant's session `chat_id`, created if new; admit it at once when the session is idle."""
    for _ in range(3):
        try:
            return await _submit_once(
                db,
                tenant_id=tenant_id,
                chat_id=chat_id,
                agent=agent,
                message=message,
                idempotency_key=idempotency_key,
                options=options or SubmissionOptions(),
            )
        except IntegrityError:
            # A concurrent request created the session or the same key first: look again.
            continue
    raise MessageConflict("the session changed concurrently; retry the request")


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


ClosingPlan = Callable[[list[Chunk], Usage | None], tuple[list[Chunk], Reduction]]
"""The whole log and the turn's usage → the chunks that close it, and the answer to store
(their reduction)."""


@dataclass(frozen=True)
class Finished:
    following: SubmissionRow | None
    """The submission admitted next (its workflow needs the admit signal), or the running one."""
    closed: bool
    """This call closed the log (a repeated finish changes nothing)."""


async def finish(
    db: Database,
    *,
    submission_id: str,
    session_id: str,
    outcome: Outcome,
    read: list[tuple[int, Chunk]],
    plan: ClosingPlan,
    error: str | None,
    writer: LogWriter,
) -> Finished:
    """In one transaction: close the log, store the answer, release the session, admit the next.

    `read`: the log's `(seq, chunk)` rows as the caller read them. What was appended since
    (a model step still writing: a stop that cancels it does not wait for it) is read inside
    the transaction, the log's row locked, so the closing chunks follow the whole log and the
    stored answer is its reduction; the locked read is only that tail. A client that sees the
    closing chunk can read the stored answer at once. Idempotent: run again after a crash it
    changes nothing and returns the same next submission, so the caller can repeat its admit
    signal.
    """
    at = now()

    def close(session: Session) -> Finished:
        chat, submission = _locked_with_session(session, submission_id, session_id)
        if submission is None:
            return Finished(None, closed=False)
        closing: list[Chunk] = []
        assistant = Reduction()
        if submission.status in ACTIVE:
            last = read[-1][0] if read else -1
            tail = locked_log_tail(session, submission.assistant_message_id, after=last)
            # Read with the log locked: no model step can add its usage any more.
            usage = turn_usage(session, submission.id)
            closing, assistant = plan([chunk for _, chunk in read + tail], usage)
        if closing:
            insert_chunks(
                session,
                message_id=submission.assistant_message_id,
                chunks=closing,
                writer=writer,
                notify=not db.is_sqlite,
                close=True,
            )
        if submission.status in ACTIVE:
            was_running = submission.status == "running"
            cancel_pending(session, submission_id=submission.id, reason=f"turn {outcome}")
            submission.status = outcome
            submission.completed_at = at
            submission.error = error
            session.add(submission)
            if was_running and chat is not None and assistant.parts:
                session.add(
                    MessageRow(
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
            if submission.rolled_back and chat is not None:
                _roll_back(session, chat, submission)
        closed = bool(closing)
        if chat is None:
            return Finished(None, closed)
        if chat.running_submission_id == submission.id:
            chat.running_submission_id = None
            chat.updated_at = at
            following = _admit_next(session, chat, at)
            session.add(chat)
            return Finished(following, closed)
        if chat.running_submission_id is not None:
            return Finished(session.get(SubmissionRow, chat.running_submission_id), closed)
        return Finished(None, closed)

    return await db.transact(close)


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


async def save_stash(db: Database, *, submission_id: str, data: object) -> None:
    async with db.write() as session:
        submission = await session.get(SubmissionRow, submission_id)
        if submission is None:
            raise LookupError(f"submission {submission_id} not found")
        submission.stash = data
        session.add(submission)


MAX_BOOT_HISTORY_BYTES = 1_000_000


async def save_boot_history(
    db: Database, *, submission_id: str, messages: list[dict[str, Any]]
) -> bool:
    """Keep a recovery boot plan's history for the turn's later steps; False (nothing kept)
    when it is over `MAX_BOOT_HISTORY_BYTES` of JSON."""
    if len(json.dumps(messages, separators=(",", ":"))) > MAX_BOOT_HISTORY_BYTES:
        return False
    async with db.write() as session:
        submission = await session.get(SubmissionRow, submission_id)
        if submission is None:
            return False
        submission.boot_history = messages
        session.add(submission)
    return True


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
            insert_chunks(
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

    await db.transact(apply)


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


@dataclass(frozen=True)
class Withdrawal:
    withdrawn: bool
    """False when the submission is gone or finished already, or its turn's log has begun."""
    admitted: SubmissionRow | None = None
    """The queued submission admitted in its place: its workflow needs the admit signal."""


async def withdraw_submission(db: Database, *, submission_id: str) -> Withdrawal:
    """Undo an intake whose turn could not be started (Temporal unreachable), in one transaction.

    Deletes the submission; if it had been admitted, also deletes its user messages, moves the
    session's leaf back to where they were applied, releases the session and admits the oldest
    other queued submission, as `finish` does. A session created by this very submission and
    left empty is deleted too. Changes nothing once the turn's log has begun: its workflow
    runs after all.
    """
    at = now()

    def withdraw(session: Session) -> Withdrawal:
        chat, submission = _locked_with_session(session, submission_id)
        if submission is None or submission.status not in ACTIVE:
            return Withdrawal(withdrawn=False)
        message_id = submission.assistant_message_id
        begun = session.exec(select(ChunkRow.seq).where(ChunkRow.message_id == message_id).limit(1))
        if begun.first() is not None or session.get(ChunkLogRow, message_id) is not None:
            return Withdrawal(withdrawn=False)
        if chat is not None and submission.status == "running":
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
        session.delete(submission)
        session.flush()
        if chat is None:
            return Withdrawal(withdrawn=True)
        admitted: SubmissionRow | None = None
        if chat.running_submission_id is None:
            admitted = _admit_next(session, chat, at)
        created_by_it = chat.created_at == submission.created_at
        others = session.exec(
            select(SubmissionRow.id).where(SubmissionRow.session_id == chat.id).limit(1)
        )
        messages = session.exec(
            select(MessageRow.id).where(MessageRow.session_id == chat.id).limit(1)
        )
        if created_by_it and others.first() is None and messages.first() is None:
            session.delete(chat)
        else:
            session.add(chat)
        return Withdrawal(withdrawn=True, admitted=admitted)

    return await db.transact(withdraw)
