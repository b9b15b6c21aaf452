"""`POST /api/chat` (the AI SDK transport's body) and its stop."""

import json
from typing import Annotated, Any, Literal

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.schemas.common import AGENT_PATTERN, SESSION_ID_PATTERN
from perdure.domain.concurrency import MAX_DEBOUNCE_MS, ConcurrencyStrategy
from perdure.domain.ui import UIMessage
from storage.stops import StopVerdict

TOOL_NAME_PATTERN = r"^[A-Za-z0-9_\-]{1,64}$"


WEEK_SECONDS = 7 * 24 * 3600.0


class ClientToolDeclaration(BaseModel):
    """A tool the client runs, declared with the request: offered to the model in this turn."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=TOOL_NAME_PATTERN)
    description: str = Field(min_length=1, max_length=4000)
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="The JSON schema of the arguments (an object schema)",
    )
    timeoutSeconds: float = Field(  # noqa: N815 - wire name
        default=WEEK_SECONDS, gt=0, le=365 * 24 * 3600.0
    )

    @model_validator(mode="after")
    def _object_schema(self) -> "ClientToolDeclaration":
        if self.parameters.get("type") != "object":
            raise ValueError(f"tool {self.name}: parameters must be an object schema")
        if len(json.dumps(self.parameters)) > 16_000:
            raise ValueError(f"tool {self.name}: parameters are over 16,000 characters")
        return self


def check_debounce(concurrency: ConcurrencyStrategy | None, debounce_ms: int | None) -> None:
    if debounce_ms is not None and concurrency != "debounce":
        raise ValueError('`debounceMs` goes with `"concurrency": "debounce"` only')


def check_steer(concurrency: ConcurrencyStrategy | None, refused: str | None) -> None:
    """A steering message joins a running turn as it is: what goes back to a stored message
    or brings tools of its own cannot."""
    if concurrency == "steer" and refused is not None:
        raise ValueError(
            f'`"concurrency": "steer"` takes new messages only, not {refused}: send it with '
            '`"queue"` to run it after the running turn'
        )


class ChatRequest(BaseModel):
    """What the AI SDK's DefaultChatTransport sends, or the persistence docs' `{id, message}`.
    Only the last message is read; the body may be up to 16 times `PERDURE_MAX_MESSAGE_BYTES`."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "anyOf": [
                {
                    "required": ["messages"],
                    "properties": {"messages": {"type": "array", "minItems": 1}},
                },
                {"required": ["message"], "properties": {"message": {"type": "object"}}},
            ]
        },
    )

    id: str = Field(pattern=SESSION_ID_PATTERN, description="The chat (session) id.")
    messages: list[UIMessage] | None = Field(default=None, max_length=100_000)
    message: UIMessage | None = None
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    messageId: str | None = Field(default=None, max_length=200)  # noqa: N815 - wire name
    agent: str | None = Field(default=None, pattern=AGENT_PATTERN)
    concurrency: ConcurrencyStrategy | None = Field(
        default=None,
        description="What this message does if a turn runs (default: the agent's strategy)",
    )
    debounceMs: int | None = Field(  # noqa: N815 - wire name
        default=None,
        ge=1,
        le=MAX_DEBOUNCE_MS,
        description="With `concurrency: debounce`: the quiet period in ms (default: the agent's)",
    )
    tools: list[ClientToolDeclaration] | None = Field(
        default=None,
        max_length=64,
        description="Client tools for this turn, beside the agent's: a call parks the turn "
        "until the client sends the output.",
    )

    @field_validator("tools")
    @classmethod
    def _distinct_names(
        cls, tools: list[ClientToolDeclaration] | None
    ) -> list[ClientToolDeclaration] | None:
        names = [tool.name for tool in tools or []]
        if len(set(names)) != len(names):
            raise ValueError("two tools have the same name")
        return tools

    @model_validator(mode="after")
    def _one_new_message(self) -> "ChatRequest":
        if self.message is None and not self.messages:
            raise ValueError("send `messages` (non-empty) or `message`")
        check_debounce(self.concurrency, self.debounceMs)
        check_steer(self.concurrency, self._not_steerable())
        return self

    def _not_steerable(self) -> str | None:
        if self.trigger == "regenerate-message":
            return "a regenerate"
        if self.messageId is not None and self.messageId == self.new_message().id:
            return "an edit (`messageId`)"
        if self.tools:
            return "client `tools`"
        return None

    def new_message(self) -> UIMessage:
        if self.message is not None:
            return self.message
        assert self.messages
        return self.messages[-1]


DropSteeringQuery = Annotated[
    bool,
    Query(
        alias="dropSteering",
        description="Also drop the steering messages waiting for the stopped running turn "
        "(they end `skipped`, recorded as dropped); by default they run as the next turn",
    ),
]


class StopResult(BaseModel):
    result: StopVerdict = Field(
        description="`stopped`: this submission is stopped (its stream ends with `abort`, its "
        "partial answer is kept); `already_finished`: it ended, or its ending was decided, "
        "before the stop arrived; `nothing_running`: no turn runs or waits in the session"
    )
    submissionId: str | None  # noqa: N815 - wire name
    status: str | None = Field(
        default=None,
        description="With `stopped`: `running` or `pending` as the stop found it; with "
        "`already_finished`: how it ended (`completed`, `error`, `aborted`, `skipped`)",
    )
