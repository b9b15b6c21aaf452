"""A parked turn's waits: approvals, client tool calls and MCP servers' questions, and their
answers."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perdure.domain.input_requests import MAX_QUESTIONS, InputAnswer

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


class InputQuestionPublic(BaseModel):
    key: str = Field(description="The server's key for the question: answers are keyed by it")
    mode: str = Field(description="`form` (answer with `content`) or `url` (visit `url`)")
    message: str
    requestedSchema: dict[str, Any] | None = Field(  # noqa: N815 - wire name
        default=None, description="`form`: the flat JSON schema `content` must match"
    )
    url: str | None = None


class InputRequestPublic(BaseModel):
    """A question an MCP server asks mid-call (its server's request state is never shown)."""

    waitId: str  # noqa: N815 - wire names
    toolCallId: str  # noqa: N815
    toolName: str  # noqa: N815
    submissionId: str  # noqa: N815
    round: int = Field(description="1 for the call's first question, 2 for the next, …")
    questions: list[InputQuestionPublic]
    requestedAt: datetime  # noqa: N815
    expiresAt: datetime  # noqa: N815


class InputAnswerBody(BaseModel):
    """One answer per question of the request, by its key: an MCP elicitation result."""

    model_config = ConfigDict(extra="forbid")

    responses: dict[str, InputAnswer] = Field(min_length=1, max_length=MAX_QUESTIONS)


class WaitAnswerResult(BaseModel):
    id: str = Field(description="The approval id, the client wait's id or the input's")
    toolCallId: str  # noqa: N815 - wire names
    status: str = Field(description="`approved`, `denied` or `answered`")
    submissionId: str  # noqa: N815
    changed: bool = Field(description="False when the same answer was already recorded")
