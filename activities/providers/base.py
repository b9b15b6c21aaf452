"""The contract every model provider adapter implements."""

from collections.abc import AsyncGenerator
from typing import Protocol

from pydantic import BaseModel, Field

from activities.providers.continuation_modes import Continuation
from perdure.domain.conversation import ConversationItem, ToolSpec
from perdure.domain.model_rules import ThinkingOptions
from perdure.domain.provider_events import ProviderEvent


class ResumeToken(BaseModel):
    """Where a server-side response can be re-attached (OpenAI Responses background mode)."""

    response_id: str
    sequence_number: int


class ModelRequest(BaseModel):
    model: str
    """The provider's own model name, e.g. `gpt-4.1-mini` (no `openai:` prefix)."""
    system: str = ""
    conversation: list[ConversationItem] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
    prefill: str | None = None
    """Partial assistant text of the current step that the model must continue, not repeat."""
    resume: ResumeToken | None = None
    """Re-attach to this response instead of starting a new one (providers that support it)."""
    stream_id: str | None = None
    """The step's identity at the provider relay, when one is configured (docs/relay.md)."""
    early: bool = False
    """A head start: the step's first request, sent at intake before the step runs; the relay
    holds it for the step to adopt and never lets it replace a stream it holds already."""
    max_output_tokens: int = 4096
    thinking: ThinkingOptions = ThinkingOptions()
    """The agent's thinking, checked against the model's rules when the worker started
    (`perdure/domain/model_rules.py`)."""
    prefill_refused: bool = False
    """The model answered a prefill with a 400: continue `prefill` by instruction instead."""


class ProviderError(Exception):
    """A provider failure, already classified for Temporal's retry policy."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        status: int | None = None,
        prefill_rejected: bool = False,
        context_overflow: bool = False,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.prefill_rejected = prefill_rejected
        self.context_overflow = context_overflow
        """The request is longer than the model's context window: compact and try again."""


class Provider(Protocol):
    label: str
    """Shown in the Temporal UI and in logs, e.g. `openai:gpt-4.1-mini`."""

    supports_resume: bool
    """`ModelRequest.resume` can re-attach to a response (OpenAI Responses background mode)."""

    continuation: Continuation
    """How this adapter usually continues a partial answer (`ModelRequest.prefill`)."""

    supports_cancel: bool
    """`cancel(response_id)` stops a server-side response; a no-op where there is none."""

    relayed: bool
    """Its requests go through the provider relay (docs/relay.md), which can hold a head start
    for a step to adopt."""

    def continuation_for(self, request: ModelRequest) -> Continuation:
        """How `request` will continue its partial answer (resume, prefill or instruction)."""
        ...

    def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        """Yield events until the step ends with a `Finish`; raise `ProviderError` on failure.

        Given a `prefill`, only the continuation is yielded, never the prefill again. A caller
        that stops reading early closes the stream (`aclose`, `contextlib.aclosing`), so its
        connection is released on the event loop, not by the garbage collector."""
        ...

    async def cancel(self, response_id: str) -> None:
        """Stop server-side generation of `response_id` (from a `ResponseCursor`).

        Idempotent: a response that already finished or was cancelled is not an error. Raises
        `ProviderError` otherwise. Adapters without server-side responses do nothing."""
        ...
