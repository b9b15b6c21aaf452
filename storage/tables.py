"""Tables. Alembic migrations (storage/migrations) own the schema; these mirror it."""

from typing import Any

from sqlalchemy import JSON, Column, Index, UniqueConstraint
from sqlmodel import Field, SQLModel


class ChatSessionRow(SQLModel, table=True):
    __tablename__ = "sessions"
    __table_args__ = (UniqueConstraint("tenant_id", "chat_id", name="uq_session_chat"),)

    id: str = Field(primary_key=True, max_length=200)
    """The storage key every child table refers to (storage/session_keys.py); never shown."""
    tenant_id: str = Field(index=True, max_length=200)
    chat_id: str = Field(max_length=200)
    """The id the client uses (the AI SDK chat id, `/v1/sessions/{id}`): unique per tenant."""
    title: str = Field(default="", max_length=200)
    agent: str = Field(max_length=200)
    leaf_message_id: str | None = Field(default=None, max_length=200)
    running_submission_id: str | None = Field(default=None, max_length=64)
    next_queue_seq: int = 1
    """The queue position the session's next submission takes (FIFO by the store, not a clock)."""
    created_at: float
    updated_at: float
    parent_session_id: str | None = Field(default=None, max_length=200, index=True)
    """A sub-agent's session: the session whose turn called it, and the tool call it answers."""
    parent_tool_call_id: str | None = Field(default=None, max_length=200)


class MessageRow(SQLModel, table=True):
    __tablename__ = "messages"

    session_id: str = Field(primary_key=True, max_length=200)
    id: str = Field(primary_key=True, max_length=200)
    parent_id: str | None = Field(default=None, max_length=200)
    role: str = Field(max_length=16)
    parts: list[dict[str, Any]] = Field(
        default_factory=list, sa_column=Column(JSON, nullable=False)
    )
    meta: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    status: str = Field(default="completed", max_length=16)
    submission_id: str | None = Field(default=None, max_length=64)
    created_at: float


class SubmissionRow(SQLModel, table=True):
    __tablename__ = "submissions"
    __table_args__ = (
        UniqueConstraint("session_id", "idempotency_key", name="uq_submission_key"),
        Index("ix_submission_queue", "session_id", "status", "queue_seq"),
    )

    id: str = Field(primary_key=True, max_length=64)
    session_id: str = Field(max_length=200)
    chat_id: str | None = Field(default=None, max_length=200)
    """The session's id as its client knows it (`ChatSession.chat_id`); None only on rows a
    migration found without their session."""
    tenant_id: str = Field(max_length=200)
    idempotency_key: str = Field(max_length=300)
    status: str = Field(max_length=16)
    agent: str = Field(max_length=200)
    user_message: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    user_message_id: str = Field(max_length=200)
    assistant_message_id: str = Field(max_length=64, index=True)
    queue_seq: int = 0
    """Position in the session's FIFO queue, assigned from `ChatSession.next_queue_seq`."""
    error: str | None = Field(default=None)
    created_at: float
    started_at: float | None = None
    completed_at: float | None = None
    stash: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    """Data the turn saved with `perdure.stash()`, handed to recovery hooks."""
    provider_cursor: dict[str, Any] | None = Field(
        default=None, sa_column=Column(JSON, nullable=True)
    )
    """`{step, response_id, sequence_number}` of a resumable provider response, written with
    the chunks it covers."""
    client_tools: list[dict[str, Any]] | None = Field(
        default=None, sa_column=Column(JSON, nullable=True)
    )
    """Client tools the request declared (`{name, description, parameters, timeoutSeconds}`),
    offered to the model in this turn beside the agent's own."""
    meta: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    """The submitter's metadata (the submissions API), returned as given."""
    prior_messages: list[dict[str, Any]] | None = Field(
        default=None, sa_column=Column(JSON, nullable=True)
    )
    """User messages submitted before `user_message`, applied with it, in order, at admission."""
    cancel_requested_at: float | None = None
    """When a stop (or cancel) was recorded: a turn not started by then never runs, and a
    running one whose ending is not decided yet ends `aborted` (storage/stops.py)."""
    boot_history: list[dict[str, Any]] | None = Field(
        default=None, sa_column=Column(JSON, nullable=True)
    )
    """The conversation a recovery boot plan chose instead of the active path: every later
    model step of this turn is given it."""
    ending: str | None = Field(default=None, max_length=16)
    """How the turn ends (an outcome, or `exhausted`), decided once at the start of its
    finish; a stop recorded after this is too late."""
    rolled_back: bool | None = None
    """Stopped by a `rollback` submission: its messages leave the active path when it ends."""
    regenerates: bool | None = None
    """Answers its user message again (a sibling answer, a new branch): the message is stored
    already, and the turn starts by moving the leaf back to it."""
    edit_of: str | None = Field(default=None, max_length=200)
    """An edit of this user message: the new message becomes its sibling (a new branch)."""
    branch_point: str | None = Field(default=None, max_length=200)
    """With `edit_of`: the parent the edited message had (None: it was the first)."""
    fairness_weight: float | None = None
    """The tenant's fairness weight when the submission was recorded: its turn starts with it
    (perdure/domain/turn_priority.py); None: Temporal's default."""
    not_before: float | None = None
    """`debounce`: the turn starts no earlier than this (later submissions push it back by
    taking this one's messages over)."""
    merged_into: str | None = Field(default=None, max_length=64)
    """`merge`/`debounce`: the later submission whose turn answers this one's messages;
    `steer`: the running turn this one's messages joined."""
    steer: bool | None = None
    """Sent with `steer` while a turn ran: it joins the running turn at its next step
    boundary (storage/steering.py), else runs as the next turn."""


class ChunkRow(SQLModel, table=True):
    __tablename__ = "chunks"

    message_id: str = Field(primary_key=True, max_length=64)
    seq: int = Field(primary_key=True)
    attempt: int = 1
    body: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    created_at: float


class ChunkLogRow(SQLModel, table=True):
    """One per assistant message; every append locks it (see storage/chunks.py)."""

    __tablename__ = "chunk_logs"
    __table_args__ = (Index("ix_chunk_logs_prunable", "pruned_at", "closed_at"),)

    message_id: str = Field(primary_key=True, max_length=64)
    next_seq: int = 0
    closed: bool = False
    """The terminal chunk is written: nothing more is ever appended."""
    fences: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    """The newest attempt of each writer (an activity id) that has claimed the log."""
    closed_at: float | None = None
    """When the terminal chunk was written (the retention period counts from it)."""
    pruned_at: float | None = None
    """When the chunks were deleted after the retention period (the stored message stays)."""


class EventRow(SQLModel, table=True):
    __tablename__ = "events"

    id: int | None = Field(default=None, primary_key=True)
    session_id: str = Field(index=True, max_length=200)
    submission_id: str | None = Field(default=None, max_length=64)
    type: str = Field(max_length=64)
    data: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: float


class IncidentRow(SQLModel, table=True):
    __tablename__ = "incidents"

    submission_id: str = Field(primary_key=True, max_length=64)
    session_id: str = Field(max_length=200, index=True)
    state: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    updated_at: float


class ToolWaitRow(SQLModel, table=True):
    """A tool call a parked turn waits on: an approval, a client-side tool's output, or a
    person's answer to its MCP server's question (`input`, one row per round the server asks).

    Status `pending` until answered: `approved` / `denied` (approvals), `answered` (client
    outputs, inputs), `expired` (no answer in time) or `cancelled` (the turn ended first)."""

    __tablename__ = "tool_waits"
    __table_args__ = (
        UniqueConstraint(
            "submission_id", "tool_call_id", "kind", "round", name="uq_tool_wait_call_round"
        ),
        Index("ix_tool_waits_session", "session_id", "status"),
    )

    id: str = Field(primary_key=True, max_length=64)
    """The `approvalId` the client sees (approvals); server-made and unguessable."""
    kind: str = Field(max_length=16)
    """`approval`, `client` or `input`."""
    tenant_id: str = Field(max_length=200)
    session_id: str = Field(max_length=200)
    submission_id: str = Field(max_length=64)
    tool_call_id: str = Field(max_length=200)
    tool_name: str = Field(max_length=200)
    round: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    """`input`: the how-manieth question of the call (1, 2, …); 0 for the other kinds."""
    input: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    """The call's arguments; `input`: the questions and the server's request state."""
    status: str = Field(max_length=16)
    approved: bool | None = None
    reason: str | None = None
    output: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    error_text: str | None = None
    requested_at: float
    expires_at: float
    answered_at: float | None = None


class CompactionRow(SQLModel, table=True):
    """A summary that stands in for a session's messages up to one of them, for the model only:
    the stored history stays whole. It applies on every branch through `up_to_message_id`."""

    __tablename__ = "compactions"
    __table_args__ = (Index("ix_compactions_cut", "session_id", "up_to_message_id", "created_at"),)

    id: str = Field(primary_key=True, max_length=64)
    session_id: str = Field(index=True, max_length=200)
    up_to_message_id: str = Field(max_length=200)
    summary: str
    tokens_before: int
    tokens_after: int
    created_at: float
