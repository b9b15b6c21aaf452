"""Resolve a model spec such as `openai:gpt-4.1-mini` to its provider adapter.

The adapters are configured by the `ProviderConfig` they are given (the worker's comes from its
settings). Its `openai_continuation` (`PERDURE_OPENAI_CONTINUATION`) chooses how `openai:`
models continue a partial answer after a recovery: `instruction` (default: the only way the real
OpenAI API allows), `vllm` (vLLM's `continue_final_message`) or `deepseek` (DeepSeek's beta
`prefix: true`; set `OPENAI_BASE_URL=https://api.deepseek.com/beta`). See
`activities/providers/openai_chat.py`.
"""

import contextlib
from collections.abc import Iterable

from activities.providers.base import Provider
from activities.providers.config import ProviderConfig
from activities.providers.demo import DemoProvider

ACCEPTED_FORMS = (
    "openai:<model>",
    "openai-responses:<model>",
    "anthropic:<model>",
    "demo",
)


def provider_for(spec: str, config: ProviderConfig) -> Provider:
    """The adapter for `spec`, configured by `config`; ValueError naming the accepted forms if
    `spec` is not one of them."""
    prefix, separator, model = spec.strip().partition(":")
    if prefix == "demo" and not model:
        return DemoProvider()
    model = model.strip()
    if separator and model:
        # Each adapter (and its SDK) is imported when a model first needs it: the Anthropic SDK
        # alone is about a third of a worker's start, and a worker serving only OpenAI models
        # never needs it (`tests/unit/test_cli_imports.py`).
        if prefix == "openai":
            from activities.providers.openai_chat import OpenAIChatProvider

            return OpenAIChatProvider(model, config=config)
        if prefix == "openai-responses":
            from activities.providers.openai_responses import OpenAIResponsesProvider

            return OpenAIResponsesProvider(model, config=config)
        if prefix == "anthropic":
            from activities.providers.anthropic_messages import AnthropicMessagesProvider

            return AnthropicMessagesProvider(model, config=config)
    raise ValueError(f"Unknown model spec {spec!r}; expected one of: {', '.join(ACCEPTED_FORMS)}.")


def import_adapters(specs: Iterable[str], config: ProviderConfig) -> None:
    """Resolve each spec once, so that its adapter and SDK are imported now, at a worker's
    start: imported by a chat's first step, the Anthropic SDK alone holds the worker's event
    loop (every other chat's stream and heartbeat) for over two seconds of CPU."""
    for spec in specs:
        with contextlib.suppress(ValueError):  # the step tells the turn about a bad spec
            provider_for(spec, config)
