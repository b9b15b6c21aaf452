"""Decide, before streaming, whether a request is refused or carries a stream fault."""

from dataclasses import dataclass, field
from typing import Literal

from perdure.testing.fakeprovider.directives import Directives, Fault
from perdure.testing.fakeprovider.state import FakeState
from perdure.testing.fakeprovider.transcript import Transcript

PREFILL_REJECTED = (
    "This model does not support assistant message prefill. The conversation must end with a "
    "user message."
)
"""Anthropic's 400 for a final assistant message on Claude 4.6 and later (strands-agents/
sdk-python#1694, crewAIInc/crewAI#5810, QwenLM/qwen-code#8039); `@reject_prefill` gives it on
any model, as a model the adapter does not know would."""


@dataclass(frozen=True)
class Rejection:
    """An HTTP error; each wire format renders it as its own JSON error body."""

    status: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    param: str | None = None
    """OpenAI's `error.param` (e.g. `messages.[3].role`)."""
    code: str | None = None
    """OpenAI's `error.code` (e.g. `unknown_parameter`); None renders the status default."""


Wire = Literal["chat", "responses", "anthropic"]


def context_overflow(wire: Wire, limit: int, tokens: int) -> Rejection:
    """A request over the model's context window, as each API answers it:
    - OpenAI Chat Completions: HTTP 400 `invalid_request_error`, code `context_length_exceeded`,
      param `messages`, "This model's maximum context length is N tokens. However, your
      messages resulted in M tokens…";
    - OpenAI Responses: code `context_length_exceeded`, param `input`, "Your input exceeds the
      context window of this model…", told inside a 200 stream when streaming
      (openai_responses.overflow_events says where that is documented);
    - Anthropic Messages: HTTP 400 `invalid_request_error`, "prompt is too long: M tokens > N
      maximum"."""
    if wire == "anthropic":
        return Rejection(400, f"prompt is too long: {tokens} tokens > {limit} maximum")
    if wire == "responses":
        return Rejection(
            400,
            "Your input exceeds the context window of this model. Please adjust your input "
            "and try again.",
            param="input",
            code="context_length_exceeded",
        )
    return Rejection(
        400,
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages.",
        param="messages",
        code="context_length_exceeded",
    )


def screen(
    state: FakeState, transcript: Transcript, directives: Directives, wire: Wire
) -> Rejection | Fault | None:
    """A refusal, or the stream fault to apply (spending its budget), or None for a clean run."""
    if directives.reject_prefill and transcript.prefill is not None:
        return Rejection(400, PREFILL_REJECTED)
    limit = directives.context_limit
    if limit is not None and transcript.input_tokens > limit:
        return context_overflow(wire, limit, transcript.input_tokens)
    fault = state.take_fault(transcript.user_text, directives.faults)
    if fault is None or fault.kind != "fail":
        return fault
    headers: dict[str, str] = {}
    if fault.retry_after is not None:
        headers["retry-after"] = fault.retry_after
    if fault.retry_after_ms is not None:
        headers["retry-after-ms"] = fault.retry_after_ms
    return Rejection(fault.status, f"Simulated failure with HTTP {fault.status}.", headers)
