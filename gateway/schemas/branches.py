"""Branches: a message's alternatives, the active leaf, forks."""

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from gateway.schemas.common import SESSION_ID_PATTERN


class SiblingPublic(BaseModel):
    id: str
    role: str
    status: str
    active: bool = Field(description="On the session's active branch")
    created_at: datetime


class LeafChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messageId: str = Field(min_length=1, max_length=200)  # noqa: N815 - wire names


class LeafChanged(BaseModel):
    leafMessageId: str  # noqa: N815 - wire name


class ForkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messageId: str = Field(min_length=1, max_length=200)  # noqa: N815 - wire names
    sessionId: str | None = Field(default=None, pattern=SESSION_ID_PATTERN)  # noqa: N815
