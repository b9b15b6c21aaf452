"""Request and response bodies of the HTTP API."""

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from domain.ui import UIMessage
from storage.tables import ChatSession

SESSION_ID_PATTERN = r"^[A-Za-z0-9_\-.:]{1,200}$"
AGENT_PATTERN = r"^[A-Za-z0-9_\-.]{1,200}$"


class ChatRequest(BaseModel):
    """What the AI SDK's DefaultChatTransport sends, or the persistence docs' `{id, message}`."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(pattern=SESSION_ID_PATTERN, description="The chat (session) id.")
    messages: list[UIMessage] | None = Field(default=None, max_length=100_000)
    message: UIMessage | None = None
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    messageId: str | None = Field(default=None, max_length=200)  # noqa: N815 - wire name
    agent: str | None = Field(default=None, pattern=AGENT_PATTERN)

    @model_validator(mode="after")
    def _one_new_message(self) -> "ChatRequest":
        if self.message is None and not self.messages:
            raise ValueError("send `messages` (non-empty) or `message`")
        return self

    def new_message(self) -> UIMessage:
        if self.message is not None:
            return self.message
        assert self.messages
        return self.messages[-1]


class SessionPublic(BaseModel):
    id: str
    title: str
    agent: str
    status: Literal["idle", "running"]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, chat: ChatSession) -> "SessionPublic":
        return cls(
            id=chat.id,
            title=chat.title,
            agent=chat.agent,
            status="running" if chat.running_submission_id else "idle",
            created_at=datetime.fromtimestamp(chat.created_at, UTC),
            updated_at=datetime.fromtimestamp(chat.updated_at, UTC),
        )


class SessionsPublic(BaseModel):
    data: list[SessionPublic]
    count: int


class SessionUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=200)


class EventPublic(BaseModel):
    id: int
    type: str
    submission_id: str | None
    data: dict[str, object]
    created_at: datetime


class StopResult(BaseModel):
    success: bool
    submissionId: str | None  # noqa: N815 - wire name
