"""Bodies of the submissions API (`/v1/sessions/{id}/submissions`)."""

import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.schemas.chat import check_debounce, check_steer
from gateway.schemas.common import AGENT_PATTERN
from perdure.domain.concurrency import MAX_DEBOUNCE_MS, ConcurrencyStrategy
from perdure.domain.ui import UIMessage
from storage.tables import SubmissionRow

SUBMISSION_ID_PATTERN = r"^[A-Za-z0-9_\-]{1,64}$"
"""What an SSE event id can carry (`<submission id>:<seq>`)."""
MAX_METADATA_CHARS = 16_000
MAX_WAIT_SECONDS = 300.0

SubmissionStatus = Literal["pending", "running", "completed", "aborted", "skipped", "error"]


class SubmissionCreate(BaseModel):
    """Think's `submitMessages`: user messages that one turn answers, accepted at once."""

    model_config = ConfigDict(extra="forbid")

    messages: list[UIMessage] = Field(
        default_factory=list,
        max_length=50,
        description="User messages, applied in order when the turn starts; the turn answers "
        "them together",
    )
    continueLastTurn: bool = Field(  # noqa: N815 - wire name
        default=False,
        description="No messages: the agent goes on from the last assistant message",
    )
    idempotencyKey: str | None = Field(  # noqa: N815 - wire names
        default=None, min_length=1, max_length=300
    )
    submissionId: str | None = Field(  # noqa: N815
        default=None, pattern=SUBMISSION_ID_PATTERN, description="Your own id for it"
    )
    metadata: dict[str, Any] | None = Field(default=None, description="Returned as given")
    agent: str | None = Field(
        default=None, pattern=AGENT_PATTERN, description="The agent of a new session"
    )
    concurrency: ConcurrencyStrategy | None = Field(
        default=None, description="If a turn runs (default: the agent's strategy)"
    )
    debounceMs: int | None = Field(  # noqa: N815 - wire name
        default=None,
        ge=1,
        le=MAX_DEBOUNCE_MS,
        description="With `concurrency: debounce`: the quiet period in ms (default: the agent's)",
    )
    wait: bool = Field(default=False, description="Answer when the turn has ended")
    waitSeconds: float = Field(  # noqa: N815
        default=60.0, gt=0, le=MAX_WAIT_SECONDS, description="With `wait`: at most this long"
    )

    @field_validator("metadata")
    @classmethod
    def _small_metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and len(json.dumps(value)) > MAX_METADATA_CHARS:
            raise ValueError(f"metadata is over {MAX_METADATA_CHARS} characters as JSON")
        return value

    @field_validator("messages")
    @classmethod
    def _distinct_ids(cls, messages: list[UIMessage]) -> list[UIMessage]:
        ids = [message.id for message in messages]
        if len(set(ids)) != len(ids):
            raise ValueError("two messages have the same id")
        return messages

    @model_validator(mode="after")
    def _messages_or_continue(self) -> "SubmissionCreate":
        if self.continueLastTurn == bool(self.messages):
            raise ValueError("send `messages` (at least one), or `continueLastTurn` without them")
        check_debounce(self.concurrency, self.debounceMs)
        check_steer(self.concurrency, "`continueLastTurn`" if self.continueLastTurn else None)
        return self


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


class SubmissionPublic(BaseModel):
    submissionId: str  # noqa: N815 - wire names
    sessionId: str  # noqa: N815
    status: SubmissionStatus
    cancelRequested: bool  # noqa: N815
    userMessageIds: list[str]  # noqa: N815
    assistantMessageId: str  # noqa: N815
    metadata: dict[str, Any] | None
    error: str | None
    mergedInto: str | None = Field(  # noqa: N815 - wire name
        description="`merge`/`debounce`: the later submission whose turn answers these "
        "messages; `steer`: the running turn these messages joined"
    )
    notBefore: datetime | None = Field(  # noqa: N815
        description="`debounce`: the turn starts no earlier than this"
    )
    createdAt: datetime  # noqa: N815
    startedAt: datetime | None  # noqa: N815
    completedAt: datetime | None  # noqa: N815
    temporalUrl: str = Field(  # noqa: N815 - wire name
        description="Its turn's workflow in the Temporal UI (`PERDURE_TEMPORAL_UI_URL`); a "
        "submission `drop` skipped at once never had a workflow"
    )

    @classmethod
    def of(cls, row: SubmissionRow, *, chat_id: str, temporal_url: str) -> "SubmissionPublic":
        """`chat_id`: its session's, as the client knows it (the row holds the storage key);
        `temporal_url`: its turn's page in the Temporal UI."""
        return cls(
            submissionId=row.id,
            sessionId=chat_id,
            status=row.status,
            cancelRequested=row.cancel_requested_at is not None,
            userMessageIds=[str(m["id"]) for m in row.prior_messages or []] + [row.user_message_id],
            assistantMessageId=row.assistant_message_id,
            metadata=row.meta,
            error=row.error,
            mergedInto=row.merged_into,
            notBefore=_time(row.not_before),
            createdAt=datetime.fromtimestamp(row.created_at, UTC),
            startedAt=_time(row.started_at),
            completedAt=_time(row.completed_at),
            temporalUrl=temporal_url,
        )


class SubmissionAccepted(SubmissionPublic):
    accepted: bool = Field(description="False when the key (or id) named an earlier submission")


class SubmissionsPublic(BaseModel):
    data: list[SubmissionPublic]
    count: int


class SubmissionsDeleted(BaseModel):
    deleted: int


class ClearResult(BaseModel):
    stoppedSubmissionId: str | None  # noqa: N815 - wire names
    skippedSubmissionIds: list[str]  # noqa: N815
