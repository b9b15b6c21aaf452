"""Pytest fixtures and helpers for tests that talk to the fake provider.

Import the fixtures from a conftest:
`from tests.fakeprovider_fixtures import fake_provider, fake_provider_env  # noqa: F401`
"""

import uuid
from collections.abc import Iterator

import pytest

from activities.providers.base import ModelRequest, Provider, ProviderError
from perdure.domain.provider_events import ProviderEvent, TextDelta
from perdure.testing.fakeprovider.server import FakeProvider


@pytest.fixture(scope="session")
def fake_provider() -> Iterator[FakeProvider]:
    """One fake provider for the whole session, on a free port."""
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def fake_provider_env(fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> FakeProvider:
    """The fake provider, with OPENAI_* and ANTHROPIC_* pointing the SDKs at it for this test."""
    for name, value in fake_provider.env().items():
        monkeypatch.setenv(name, value)
    return fake_provider


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
