"""Sessions: a chat's summary, its rename and its events."""

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from storage.tables import ChatSessionRow


class SessionPublic(BaseModel):
    id: str = Field(description="The chat id (per tenant)")
    title: str
    agent: str
    status: Literal["idle", "running", "waiting"] = Field(
        description="`waiting`: the running turn is parked on approvals or client tool calls "
        "(see `/approvals` and `/tool-calls`)"
    )
    created_at: datetime
    updated_at: datetime
    parent_session_id: str | None = Field(
        default=None, description="A sub-agent's session: the chat id of the one that called it"
    )
    parent_tool_call_id: str | None = Field(
        default=None, description="A sub-agent's session: the tool call it answers"
    )

    @classmethod
    def of(
        cls, chat: ChatSessionRow, *, parent_chat_id: str | None, waiting: bool = False
    ) -> "SessionPublic":
        """`parent_chat_id`: the chat id of the parent session (stored by its key)."""
        status: Literal["idle", "running", "waiting"] = "idle"
        if chat.running_submission_id:
            status = "waiting" if waiting else "running"
        return cls(
            id=chat.chat_id,
            title=chat.title,
            agent=chat.agent,
            status=status,
            created_at=datetime.fromtimestamp(chat.created_at, UTC),
            updated_at=datetime.fromtimestamp(chat.updated_at, UTC),
            parent_session_id=parent_chat_id,
            parent_tool_call_id=chat.parent_tool_call_id,
        )


class SessionsPublic(BaseModel):
    data: list[SessionPublic]
    count: int


class SessionUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00]+$")


class EventPublic(BaseModel):
    id: int
    type: str
    submission_id: str | None
    data: dict[str, object]
    created_at: datetime
