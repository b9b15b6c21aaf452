"""Resolve a model spec such as `openai:gpt-4.1-mini` to its provider adapter."""

from activities.providers.anthropic_messages import AnthropicMessagesProvider
from activities.providers.base import Provider
from activities.providers.demo import DemoProvider
from activities.providers.openai_chat import OpenAIChatProvider
from activities.providers.openai_responses import OpenAIResponsesProvider

ACCEPTED_FORMS = (
    "openai:<model>",
    "openai-responses:<model>",
    "anthropic:<model>",
    "demo",
)


def provider_for(spec: str) -> Provider:
    """The adapter for `spec`; ValueError naming the accepted forms if it is not one of them."""
    prefix, separator, model = spec.strip().partition(":")
    if prefix == "demo" and not model:
        return DemoProvider()
    model = model.strip()
    if separator and model:
        if prefix == "openai":
            return OpenAIChatProvider(model)
        if prefix == "openai-responses":
            return OpenAIResponsesProvider(model)
        if prefix == "anthropic":
            return AnthropicMessagesProvider(model)
    raise ValueError(f"Unknown model spec {spec!r}; expected one of: {', '.join(ACCEPTED_FORMS)}.")
