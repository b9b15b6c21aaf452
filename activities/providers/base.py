"""The contract every model provider adapter implements."""

from collections.abc import AsyncIterator
from typing import Protocol

from pydantic import BaseModel, Field

from domain.conversation import ConversationItem, ToolSpec
from domain.provider_events import ProviderEvent


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
    max_output_tokens: int = 4096


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
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.prefill_rejected = prefill_rejected


class Provider(Protocol):
    label: str
    """Shown in the Temporal UI and in logs, e.g. `openai:gpt-4.1-mini`."""

    supports_resume: bool

    def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        """Yield events until the step ends with a `Finish`; raise `ProviderError` on failure."""
        ...
