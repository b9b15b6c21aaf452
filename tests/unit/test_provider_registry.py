"""`provider_for`: model specs resolve to their adapters."""

import pytest

from activities.providers import provider_for
from activities.providers.anthropic_messages import AnthropicMessagesProvider
from activities.providers.config import ProviderConfig
from activities.providers.demo import DemoProvider
from activities.providers.openai_chat import OpenAIChatProvider
from activities.providers.openai_responses import OpenAIResponsesProvider
from perdure.runtime.settings import Settings

NO_KEYS = ProviderConfig()
"""Resolving a spec needs no key: a missing one fails the first request, naming it."""


def from_the_environment() -> ProviderConfig:
    """The provider configuration the worker uses: its settings', read from the environment."""
    return Settings().provider_config()


@pytest.mark.parametrize(
    ("spec", "kind", "label"),
    [
        ("openai:gpt-4.1-mini", OpenAIChatProvider, "openai:gpt-4.1-mini"),
        ("openai-responses:gpt-4.1", OpenAIResponsesProvider, "openai-responses:gpt-4.1"),
        ("anthropic:claude-sonnet-4-5", AnthropicMessagesProvider, "anthropic:claude-sonnet-4-5"),
        ("demo", DemoProvider, "demo"),
    ],
)
def test_specs_resolve_to_their_adapter(spec: str, kind: type, label: str) -> None:
    provider = provider_for(spec, NO_KEYS)
    assert isinstance(provider, kind)
    assert provider.label == label


def test_only_responses_can_resume() -> None:
    assert [
        provider_for(s, NO_KEYS).supports_resume for s in ("openai:m", "openai-responses:m", "demo")
    ] == [
        False,
        True,
        False,
    ]


@pytest.mark.parametrize("spec", ["gpt-4", "mistral:large", "openai:", "", "demo:x"])
def test_unknown_specs_are_refused_with_the_accepted_forms(spec: str) -> None:
    with pytest.raises(ValueError, match="openai-responses:<model>"):
        provider_for(spec, NO_KEYS)


@pytest.mark.parametrize(
    ("value", "mechanism", "exact"),
    [
        (None, "instruction", False),
        ("instruction", "instruction", False),
        ("vllm", "prefill", True),
        ("DeepSeek", "prefill", True),
    ],
)
def test_openai_continuation_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str | None, mechanism: str, exact: bool
) -> None:
    if value is None:
        monkeypatch.delenv("PERDURE_OPENAI_CONTINUATION", raising=False)
    else:
        monkeypatch.setenv("PERDURE_OPENAI_CONTINUATION", value)
    continuation = provider_for("openai:m", from_the_environment()).continuation
    assert (continuation.mechanism, continuation.exact) == (mechanism, exact)


def test_an_unknown_openai_continuation_is_refused_at_start_with_the_accepted_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Refused when the settings are read (a process does not start), not at the first
    `openai:` turn."""
    monkeypatch.setenv("PERDURE_OPENAI_CONTINUATION", "prefill")
    with pytest.raises(ValueError, match="PERDURE_OPENAI_CONTINUATION='prefill'.*vllm, deepseek"):
        provider_for("openai:m", from_the_environment())


@pytest.mark.parametrize(
    ("spec", "mechanism", "cancels"),
    [
        ("openai:m", "instruction", False),
        ("openai-responses:m", "resume", True),
        ("anthropic:m", "prefill", False),
        ("demo", "prefill", False),
    ],
)
def test_every_adapter_declares_how_it_continues_and_cancels(
    monkeypatch: pytest.MonkeyPatch, spec: str, mechanism: str, cancels: bool
) -> None:
    monkeypatch.delenv("PERDURE_OPENAI_CONTINUATION", raising=False)
    provider = provider_for(spec, from_the_environment())
    assert provider.continuation.mechanism == mechanism
    assert provider.supports_cancel is cancels
