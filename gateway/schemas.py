"""Request and response bodies of the HTTP API."""

import copy
from datetime import UTC, datetime
from typing import Any, Literal

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


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its `$defs` references replaced by the definitions (no recursion here)."""
    definitions = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str) and reference.startswith("#/$defs/"):
                return resolve(copy.deepcopy(definitions[reference.removeprefix("#/$defs/")]))
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


PART_TYPE_PATTERN = (
    r"^(text|reasoning|file|step-start|source-url|source-document|dynamic-tool"
    r"|(tool|data)-[A-Za-z0-9_.:\-]{1,128})$"
)
"""`domain.ui.is_known_part_type` as a pattern, for the OpenAPI document."""


def _chat_request_schema() -> dict[str, Any]:
    """`ChatRequest` for the OpenAPI document, with what the route checks beyond the model
    (a new message, known part types, text parts' `text`), so that clients and fuzzers see
    the real contract."""
    schema = _inlined(ChatRequest.model_json_schema())
    for message in (
        schema["properties"]["message"]["anyOf"][0],
        schema["properties"]["messages"]["anyOf"][0]["items"],
    ):
        part = message["properties"]["parts"]["items"]
        part["properties"]["type"]["pattern"] = PART_TYPE_PATTERN
        part["properties"]["text"] = {"type": "string", "description": "the text of a text part"}
    schema["anyOf"] = [
        {"required": ["messages"], "properties": {"messages": {"type": "array", "minItems": 1}}},
        {"required": ["message"], "properties": {"message": {"type": "object"}}},
    ]
    return schema


CHAT_REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "description": "What the AI SDK's `DefaultChatTransport` sends. Only the last message is "
    "read; the body may be up to 16 times `PERDURE_MAX_MESSAGE_BYTES`.",
    "content": {"application/json": {"schema": _chat_request_schema()}},
}
"""The route reads its body itself (to cap its size), so the document is described here."""


class Problem(BaseModel):
    field: str
    message: str


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")

    code: str = Field(description="What went wrong, for programs: e.g. `invalid_request`.")
    message: str = Field(description="What went wrong, for people.")
    requestId: str = Field(  # noqa: N815 - wire name
        description="The request's id (also the `X-Request-ID` header): quote it in reports."
    )
    problems: list[Problem] | None = Field(
        default=None, description="Each invalid field (validation errors only)."
    )


class ErrorResponse(BaseModel):
    error: ErrorDetail


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorResponse, "description": "The request was refused; nothing changed"},
    "5XX": {
        "model": ErrorResponse,
        "description": "503 with `Retry-After`: Temporal or the store is unreachable, retry "
        "later; 500: an unexpected error, reported under its request id",
    },
}


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

    title: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00]+$")


class EventPublic(BaseModel):
    id: int
    type: str
    submission_id: str | None
    data: dict[str, object]
    created_at: datetime


class StopResult(BaseModel):
    success: bool
    submissionId: str | None  # noqa: N815 - wire name
