"""Tables. Alembic migrations (storage/migrations) own the schema; these mirror it."""

from typing import Any

from sqlalchemy import JSON, Column, Index, UniqueConstraint
from sqlmodel import Field, SQLModel


class ChatSession(SQLModel, table=True):
    __tablename__ = "sessions"

    id: str = Field(primary_key=True, max_length=200)
    tenant_id: str = Field(index=True, max_length=200)
    title: str = Field(default="", max_length=200)
    agent: str = Field(max_length=200)
    leaf_message_id: str | None = Field(default=None, max_length=200)
    running_submission_id: str | None = Field(default=None, max_length=64)
    next_queue_seq: int = 1
    """The queue position the session's next submission takes (FIFO by the store, not a clock)."""
    created_at: float
    updated_at: float


class Message(SQLModel, table=True):
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


class Submission(SQLModel, table=True):
    __tablename__ = "submissions"
    __table_args__ = (
        UniqueConstraint("session_id", "idempotency_key", name="uq_submission_key"),
        Index("ix_submission_queue", "session_id", "status", "queue_seq"),
    )

    id: str = Field(primary_key=True, max_length=64)
    session_id: str = Field(max_length=200)
    tenant_id: str = Field(max_length=200)
    idempotency_key: str = Field(max_length=300)
    status: str = Field(max_length=16)
    agent: str = Field(max_length=200)
    user_message: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    user_message_id: str = Field(max_length=200)
    assistant_message_id: str = Field(max_length=64)
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


class ChunkRow(SQLModel, table=True):
    __tablename__ = "chunks"

    message_id: str = Field(primary_key=True, max_length=64)
    seq: int = Field(primary_key=True)
    attempt: int = 1
    body: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    created_at: float


class ChunkLog(SQLModel, table=True):
    """One per assistant message; every append locks it (see storage/chunks.py)."""

    __tablename__ = "chunk_logs"

    message_id: str = Field(primary_key=True, max_length=64)
    next_seq: int = 0
    closed: bool = False
    """The terminal chunk is written: nothing more is ever appended."""
    fences: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    """The newest attempt of each writer (an activity id) that has claimed the log."""


class Event(SQLModel, table=True):
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
    session_id: str = Field(max_length=200)
    state: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    updated_at: float
