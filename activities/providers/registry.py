"""Resolve a model spec such as `openai:gpt-4.1-mini` to its provider adapter.

`PERDURE_OPENAI_CONTINUATION` chooses how `openai:` models continue a partial answer after a
recovery: `instruction` (default: the only way the real OpenAI API allows), `vllm` (vLLM's
`continue_final_message`) or `deepseek` (DeepSeek's beta `prefix: true`; set
`OPENAI_BASE_URL=https://api.deepseek.com/beta`). See `activities/providers/openai_chat.py`.
"""

import os

from activities.providers.anthropic_messages import AnthropicMessagesProvider
from activities.providers.base import Provider
from activities.providers.demo import DemoProvider
from activities.providers.openai_chat import (
    CHAT_CONTINUATIONS,
    ChatContinuation,
    OpenAIChatProvider,
)
from activities.providers.openai_responses import OpenAIResponsesProvider

ACCEPTED_FORMS = (
    "openai:<model>",
    "openai-responses:<model>",
    "anthropic:<model>",
    "demo",
)
CONTINUATION_VARIABLE = "PERDURE_OPENAI_CONTINUATION"


def openai_continuation() -> ChatContinuation:
    """`PERDURE_OPENAI_CONTINUATION` (default `instruction`); ValueError naming the accepted
    values if it is anything else."""
    value = os.environ.get(CONTINUATION_VARIABLE, "").strip().lower() or "instruction"
    for accepted in CHAT_CONTINUATIONS:
        if value == accepted:
            return accepted
    raise ValueError(
        f"{CONTINUATION_VARIABLE}={value!r} is not a continuation Perdure knows; "
        f"expected one of: {', '.join(CHAT_CONTINUATIONS)} (default: instruction)."
    )


def provider_for(spec: str) -> Provider:
    """The adapter for `spec`; ValueError naming the accepted forms if it is not one of them,
    or, for `openai:` specs, if `PERDURE_OPENAI_CONTINUATION` is not a known value."""
    prefix, separator, model = spec.strip().partition(":")
    if prefix == "demo" and not model:
        return DemoProvider()
    model = model.strip()
    if separator and model:
        if prefix == "openai":
            return OpenAIChatProvider(model, continuation=openai_continuation())
        if prefix == "openai-responses":
            return OpenAIResponsesProvider(model)
        if prefix == "anthropic":
            return AnthropicMessagesProvider(model)
    raise ValueError(f"Unknown model spec {spec!r}; expected one of: {', '.join(ACCEPTED_FORMS)}.")
