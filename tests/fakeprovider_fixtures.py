"""Pytest fixtures and helpers for tests that talk to the fake provider.

Import the fixtures from a conftest (tests/conftest.py does):
`from tests.fakeprovider_fixtures import fake_provider, fake_provider_config  # noqa: F401`
"""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from activities.providers.base import ModelRequest, Provider, ProviderError
from activities.providers.config import ProviderConfig
from perdure.domain.provider_events import ProviderEvent, TextDelta
from perdure.testing.fakeprovider.server import FakeProvider


@pytest.fixture(scope="session")
def fake_provider() -> Iterator[FakeProvider]:
    """One fake provider for the whole session, on a free port."""
    with FakeProvider() as provider:
        yield provider


def config_for(fake: FakeProvider, **changes: Any) -> ProviderConfig:
    """A `ProviderConfig` pointing both SDKs at `fake` (its OpenAI-compatible URL, a fake key),
    with `changes` (e.g. `openai_base_url=fake.vllm_base_url, openai_continuation="vllm"`)."""
    key = SecretStr("fake-key")
    fields: dict[str, Any] = {
        "openai_api_key": key,
        "openai_base_url": fake.openai_base_url,
        "anthropic_api_key": key,
        "anthropic_base_url": fake.anthropic_base_url,
    }
    return ProviderConfig(**(fields | changes))


@pytest.fixture(scope="session")
def fake_provider_config(fake_provider: FakeProvider) -> ProviderConfig:
    """The provider configuration of the fake provider (`config_for` without changes)."""
    return config_for(fake_provider)


def tag() -> str:
    """A unique word: fault budgets are counted per user text, so tests keep their texts apart."""
    return f"run-{uuid.uuid4().hex[:8]}"


async def collect(provider: Provider, request: ModelRequest) -> list[ProviderEvent]:
    return [event async for event in provider.stream(request)]


async def collect_until_error(
    provider: Provider, request: ModelRequest
) -> tuple[list[ProviderEvent], ProviderError]:
    """The events streamed before the ProviderError the stream must end with, and that error."""
    events: list[ProviderEvent] = []
    try:
        async for event in provider.stream(request):
            events.append(event)
    except ProviderError as error:
        return events, error
    raise AssertionError(f"the stream ended without a ProviderError after {events!r}")


def text_of(events: list[ProviderEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


def count_to(n: int) -> str:
    return " ".join(str(i) for i in range(1, n + 1))
