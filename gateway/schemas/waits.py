"""A parked turn's waits: approvals and client tool calls, and their answers."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_REASON_CHARS = 2000


class ApprovalAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    approved: bool
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)


class ClientToolOutput(BaseModel):
    """Exactly one of `output` (any JSON) and `errorText`."""

    model_config = ConfigDict(extra="forbid")

    output: Any = None
    errorText: str | None = Field(  # noqa: N815 - wire name
        default=None, min_length=1, max_length=MAX_REASON_CHARS
    )

    @model_validator(mode="after")
    def _one_answer(self) -> "ClientToolOutput":
        given = {"output", "errorText"} & self.model_fields_set
        if len(given) != 1:
            raise ValueError("send exactly one of `output` and `errorText`")
        return self


class _WaitPublic(BaseModel):
    toolCallId: str  # noqa: N815 - wire names
    toolName: str  # noqa: N815
    input: Any
    submissionId: str  # noqa: N815
    requestedAt: datetime  # noqa: N815
    expiresAt: datetime  # noqa: N815


class ApprovalPublic(_WaitPublic):
    approvalId: str  # noqa: N815 - wire name


class ClientToolCallPublic(_WaitPublic):
    pass


class WaitAnswerResult(BaseModel):
    id: str = Field(description="The approval id, or the client wait's id")
    toolCallId: str  # noqa: N815 - wire names
    status: str = Field(description="`approved`, `denied` or `answered`")
    submissionId: str  # noqa: N815
    changed: bool = Field(description="False when the same answer was already recorded")
