"""What model calls consumed, in tokens (pure): one step's usage as its provider reported it,
a turn's totals, and how they read in a message's metadata (`usage`)."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

BUDGET = "budget"
"""The reason a turn ends when it used its agent's `max_steps` or `max_turn_tokens`. The AI SDK
accepts only its own finish reasons on a `finish` chunk (a `useChat` client refuses any other),
so the chunk says `other`, and the message metadata's `finishReason` says `budget`."""


class Usage(BaseModel):
    """Tokens, with one meaning across providers (`perdure.domain.provider_events.Finish`):
    `input` counts every input token, `cached_input` of them read from the provider's prompt
    cache; `output` every token written, `reasoning` of them spent thinking (0 where the
    provider does not tell them apart)."""

    model_config = ConfigDict(frozen=True)

    input: int = Field(default=0, ge=0)
    cached_input: int = Field(default=0, ge=0)
    output: int = Field(default=0, ge=0)
    reasoning: int = Field(default=0, ge=0)

    @property
    def total(self) -> int:
        """What budgets count: every token read and written."""
        return self.input + self.output

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            input=self.input + other.input,
            cached_input=self.cached_input + other.cached_input,
            output=self.output + other.output,
            reasoning=self.reasoning + other.reasoning,
        )

    def metadata(self) -> dict[str, Any]:
        """As a message's metadata carries it (the AI SDK's camelCase)."""
        return {
            "inputTokens": self.input,
            "cachedInputTokens": self.cached_input,
            "outputTokens": self.output,
            "reasoningTokens": self.reasoning,
            "totalTokens": self.total,
        }


def reported_usage(
    input_tokens: int | None,
    cached_input_tokens: int | None,
    output_tokens: int | None,
    reasoning_tokens: int | None,
) -> Usage | None:
    """A provider's report as `Usage`; None when it reported no token at all."""
    if input_tokens is None and output_tokens is None:
        return None
    return Usage(
        input=input_tokens or 0,
        cached_input=cached_input_tokens or 0,
        output=output_tokens or 0,
        reasoning=reasoning_tokens or 0,
    )
