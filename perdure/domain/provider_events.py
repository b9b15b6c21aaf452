"""What a model provider adapter yields while it streams, independent of the provider."""

from typing import Any, Literal

from pydantic import BaseModel, Field


class TextDelta(BaseModel):
    kind: Literal["text"] = "text"
    text: str


class ReasoningDelta(BaseModel):
    kind: Literal["reasoning"] = "reasoning"
    text: str


class ReasoningSigned(BaseModel):
    """The reasoning block ends, signed by the provider (Anthropic's thinking `signature`), or
    arrives whole and encrypted (`redacted_data`, a `redacted_thinking` block), or as a stored
    item (`item_id`, an OpenAI Responses reasoning item): the API wants it back, unmodified,
    when a tool loop goes on."""

    kind: Literal["reasoning_signed"] = "reasoning_signed"
    signature: str | None = None
    redacted_data: str | None = None
    item_id: str | None = None


class ToolCallStart(BaseModel):
    kind: Literal["tool_call_start"] = "tool_call_start"
    id: str
    name: str


class ToolCallDelta(BaseModel):
    kind: Literal["tool_call_delta"] = "tool_call_delta"
    id: str
    arguments_delta: str


class ToolCallEnd(BaseModel):
    kind: Literal["tool_call_end"] = "tool_call_end"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ResponseCursor(BaseModel):
    """A resumable server-side response (OpenAI Responses background mode) and how far we read."""

    kind: Literal["cursor"] = "cursor"
    response_id: str
    sequence_number: int


class Unresumable(BaseModel):
    """This stream of a resumable provider went straight to the provider (its relay could not
    be reached): no cursor will follow its events, so nothing waits for one."""

    kind: Literal["unresumable"] = "unresumable"


class Finish(BaseModel):
    """The end of a model call, with the usage its provider reported (None: not reported).

    One meaning across providers: `input_tokens` counts every input token the model read,
    cached ones included (`cached_input_tokens` of them read from the provider's prompt
    cache); `output_tokens` every token it wrote, reasoning included (`reasoning_tokens` of
    them, where the provider tells them apart)."""

    kind: Literal["finish"] = "finish"
    reason: Literal["stop", "length", "content-filter", "tool-calls", "error", "other"]
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None


ProviderEvent = (
    TextDelta
    | ReasoningDelta
    | ReasoningSigned
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | ResponseCursor
    | Unresumable
    | Finish
)
