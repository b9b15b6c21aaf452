"""Intake: a submission recorded once per key (and per id, when the submitter names it) in the
tenant's session, created if new, in one transaction with what the session's concurrency
strategy makes of it (docs/architecture.md, "The submission")."""

import uuid
from dataclasses import dataclass, field

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from perdure.domain.ui import UIMessage
from storage.admission import admit
from storage.busy_session import Effects, absorb_queued, apply_busy, strategy_for
from storage.db import Database
from storage.errors import MessageConflict, SubmissionConflict
from storage.intake_messages import (
    as_ui_message,
    last_answer,
    message_id_taken,
    stored_user_message,
)
from storage.messages import recent_path_of
from storage.session_keys import session_key
from storage.submission_locks import locked_chat
from storage.submission_options import SubmissionOptions
from storage.tables import ChatSessionRow, SubmissionRow
from storage.timing import now

TITLE_LENGTH = 80


@dataclass(frozen=True)
class NewSubmission:
    """What a submitter asks for: a message for the tenant's session `chat_id`, once per
    `idempotency_key`."""

    tenant_id: str
    chat_id: str
    agent: str
    message: UIMessage
    idempotency_key: str
    options: SubmissionOptions = field(default_factory=SubmissionOptions)


@dataclass(frozen=True)
class RecentPath:
    """The session's newest summary and the active path after it, as a model step reads it."""

    summary: str | None
    path: list[UIMessage]


@dataclass(frozen=True)
class SubmitOutcome:
    submission: SubmissionRow
    created: bool
    effects: Effects = field(default_factory=Effects)
    """What the session's concurrency strategy asks of Temporal (stop, skip)."""
    recent: RecentPath | None = None
    """The session's recent path with the admitted submission's messages, when asked for
    (`submit(with_recent_path=True)`): a head start plans the first request from it."""


def new_submission_id() -> str:
    return uuid.uuid4().hex


def new_assistant_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class _Answered:
    """The user message the turn answers, and where an edit branches off (its parent)."""

    message: UIMessage
    branch_point: str | None = None


@dataclass(frozen=True)
class _Intake:
    """One attempt at recording a submission, inside the intake transaction; each step a
    method, in the order `record` takes them."""

    new: NewSubmission
    at: float
    notify: bool
    """Wake other processes' streams of logs the intake closes (a `drop`): not on SQLite."""
    with_recent_path: bool = False

    def record(self, session: Session) -> SubmitOutcome:
        named = self._existing_by_id(session)
        if named is not None:
            return SubmitOutcome(named, created=False)
        chat = locked_chat(session, self.new.tenant_id, self.new.chat_id)
        if chat is None:
            chat, answered = self._new_session(), _Answered(self.new.message)
        else:
            existing = self._existing_by_key(session, chat)
            if existing is not None:
                return SubmitOutcome(existing, created=False)
            answered = self._answered(session, chat)
            self._check_message_ids(session, chat)
        if self.new.options.limits is not None:
            self.new.options.limits.check(session, agent=chat.agent, at=self.at)
        submission = self._row(chat, answered)
        chat.next_queue_seq += 1
        session.add(submission)
        effects = self._apply_strategy(session, chat, submission)
        session.add(chat)
        recent = None
        if self.with_recent_path and submission.status == "running":
            session.flush()  # the admitted messages, for the read below
            recent = RecentPath(*recent_path_of(session, session_id=submission.session_id))
        return SubmitOutcome(submission, created=True, effects=effects, recent=recent)

    def _existing_by_id(self, session: Session) -> SubmissionRow | None:
        """The submission the submitter named, recorded already, for the same session and key."""
        if self.new.options.submission_id is None:
            return None
        named = session.get(SubmissionRow, self.new.options.submission_id)
        if named is None:
            return None
        owner = session.get(ChatSessionRow, named.session_id)
        if (owner.chat_id if owner else None, named.tenant_id, named.idempotency_key) != (
            self.new.chat_id,
            self.new.tenant_id,
            self.new.idempotency_key,
        ):
            raise SubmissionConflict(
                f"submission {self.new.options.submission_id!r} exists with another "
                "session or idempotency key"
            )
        return named

    def _existing_by_key(self, session: Session, chat: ChatSessionRow) -> SubmissionRow | None:
        existing = session.exec(
            select(SubmissionRow).where(
                SubmissionRow.session_id == chat.id,
                SubmissionRow.idempotency_key == self.new.idempotency_key,
            )
        ).first()
        if existing is not None and self.new.options.submission_id not in (None, existing.id):
            raise SubmissionConflict(
                f"idempotency key {self.new.idempotency_key!r} names submission {existing.id!r}, "
                f"not {self.new.options.submission_id!r}"
            )
        return existing

    def _new_session(self) -> ChatSessionRow:
        """A new session has no submissions or messages to look up, and is inserted once, at
        commit, with its final values: three statements fewer on a first message. A concurrent
        request creating it too fails the commit (the key is deterministic); `submit` then
        looks again."""
        if self.new.options.answers_again:
            raise MessageConflict(f"session {self.new.chat_id!r} has no message to answer again")
        parent = self.new.options.parent
        return ChatSessionRow(
            id=session_key(self.new.tenant_id, self.new.chat_id),
            tenant_id=self.new.tenant_id,
            chat_id=self.new.chat_id,
            title=self.new.message.text().strip()[:TITLE_LENGTH],
            agent=self.new.agent,
            created_at=self.at,
            updated_at=self.at,
            parent_session_id=parent.session_id if parent else None,
            parent_tool_call_id=parent.tool_call_id if parent else None,
        )

    def _answered(self, session: Session, chat: ChatSessionRow) -> _Answered:
        """What a regenerate, a continue or an edit goes back to in the stored transcript."""
        message = self.new.message
        branch_point: str | None = None
        if self.new.options.regenerate:
            message = as_ui_message(stored_user_message(session, chat, self.new.message.id))
        if self.new.options.continue_last:
            message = last_answer(session, chat)
        if self.new.options.edit_of is not None:
            branch_point = stored_user_message(session, chat, self.new.options.edit_of).parent_id
        return _Answered(message, branch_point)

    def _check_message_ids(self, session: Session, chat: ChatSessionRow) -> None:
        """New messages bring new ids (a regenerate or a continue brings none)."""
        if self.new.options.regenerate or self.new.options.continue_last:
            return
        for each in [*self.new.options.prior_messages, self.new.message]:
            if message_id_taken(session, chat.id, each.id):
                raise MessageConflict(
                    f"message {each.id!r} already exists in session {self.new.chat_id!r}; send "
                    "a new message id, or repeat the original request to attach to its turn"
                )

    def _row(self, chat: ChatSessionRow, answered: _Answered) -> SubmissionRow:
        options = self.new.options
        return SubmissionRow(
            id=options.submission_id or new_submission_id(),
            session_id=chat.id,
            chat_id=chat.chat_id,
            tenant_id=self.new.tenant_id,
            idempotency_key=self.new.idempotency_key,
            status="pending",
            agent=chat.agent,
            user_message=answered.message.model_dump(mode="json"),
            user_message_id=answered.message.id,
            assistant_message_id=new_assistant_message_id(),
            queue_seq=chat.next_queue_seq,
            created_at=self.at,
            client_tools=options.client_tools,
            meta=options.metadata,
            prior_messages=[m.model_dump(mode="json") for m in options.prior_messages] or None,
            regenerates=options.regenerate or options.continue_last or None,
            edit_of=options.edit_of,
            branch_point=answered.branch_point,
            fairness_weight=options.limits.fairness_weight if options.limits else None,
        )

    def _apply_strategy(
        self, session: Session, chat: ChatSessionRow, submission: SubmissionRow
    ) -> Effects:
        """Admitted at once when the session is idle (unless debounced), else what the
        session's concurrency strategy decides (storage/busy_session.py)."""
        options = self.new.options
        concurrency = strategy_for(
            session, chat, options.concurrency, options.debounce_ms, options.task_queue
        )
        if chat.running_submission_id is not None:
            effects = apply_busy(
                session, chat, submission, concurrency, at=self.at, notify=self.notify
            )
            chat.updated_at = self.at
            return effects
        if concurrency.strategy == "debounce":
            effects = absorb_queued(session, chat, submission, concurrency, at=self.at)
            chat.updated_at = self.at
            return effects
        admit(session, chat, submission, self.at)
        return Effects()


async def submit(
    db: Database, new: NewSubmission, *, with_recent_path: bool = False
) -> SubmitOutcome:
    """Record a submission once per key (and per id, when the submitter names it) in the
    tenant's session `new.chat_id`, created if new; admit it at once when the session is idle.
    `with_recent_path`: read an admitted submission's recent path in the same transaction (one
    read fewer than a head start would make after it)."""
    for _ in range(3):
        intake = _Intake(
            new=new, at=now(), notify=not db.is_sqlite, with_recent_path=with_recent_path
        )
        try:
            return await db.transact(intake.record)
        except IntegrityError:
            # A concurrent request created the session or the same key first: look again.
            continue
    raise MessageConflict("the session changed concurrently; retry the request")
