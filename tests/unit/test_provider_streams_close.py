"""A provider stream leaves nothing suspended for the garbage collector, however it ends.

An HTTP body generator left suspended in a reference cycle is finalized by whichever thread
collects the cycle; a collection in another thread (the log appender's, the fake provider's)
then closes it while the event loop closes it too, and Python reports "async generator already
executing" (`activities/providers/sse.py`). With the collector off, whatever a stream left
suspended stays visible, so each ending is checked exactly.
"""

import asyncio
import gc
import os
from collections.abc import AsyncGenerator, Callable, Iterator
from types import AsyncGeneratorType
from typing import Any

import httpx2
import pytest

import activities.providers
from activities.providers.anthropic_messages import AnthropicMessagesProvider
from activities.providers.base import ModelRequest, Provider, ProviderError
from activities.providers.config import ProviderConfig
from activities.providers.openai_chat import OpenAIChatProvider
from activities.providers.openai_responses import OpenAIResponsesProvider
from perdure.domain.conversation import UserItem
from perdure.domain.provider_events import ProviderEvent
from tests.fakeprovider_fixtures import tag
from tests.waiting import eventually

_WATCHED = (
    os.path.dirname(httpx2.__file__),
    os.path.dirname(activities.providers.__file__),
)
"""Where the generators of a provider stream live: the HTTP body's and the adapters' own."""

PROVIDERS: dict[str, Callable[[ProviderConfig], Provider]] = {
    "chat": lambda config: OpenAIChatProvider("fake-model", config=config),
    "responses": lambda config: OpenAIResponsesProvider("fake-model", config=config),
    "anthropic": lambda config: AnthropicMessagesProvider("claude-haiku-4-5", config=config),
}


@pytest.fixture(params=sorted(PROVIDERS))
def provider(request: pytest.FixtureRequest, fake_provider_config: ProviderConfig) -> Provider:
    return PROVIDERS[request.param](fake_provider_config)


@pytest.fixture(scope="module")
def collector_off() -> Iterator[None]:
    """Off for the whole module (one full collection costs a third of a second here); no test
    leaves anything, so none sees another's."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def ask(provider: Provider, text: str) -> ModelRequest:
    model = provider.label.split(":", 1)[1]
    return ModelRequest(model=model, conversation=[UserItem(text=f"{text} {tag()}")])


def suspended() -> list[AsyncGeneratorType[Any, Any]]:
    return [
        thing
        for thing in gc.get_objects()
        if isinstance(thing, AsyncGeneratorType)
        and thing.ag_frame is not None
        and thing.ag_code.co_filename.startswith(_WATCHED)
    ]


@pytest.fixture
def before() -> set[int]:
    """The stream generators already suspended when the test began: another live stream of
    the process (in a whole run, the test stack's MCP connections) is not the test's."""
    return {id(thing) for thing in suspended()}


async def left_suspended(before: set[int]) -> list[str]:
    """The stream generators the test left unfinished, once the loop has run what it scheduled
    (a generator dropped while suspended is closed by a task the loop runs next)."""
    for _ in range(5):
        await asyncio.sleep(0)
    return sorted(
        f"{thing.ag_code.co_filename}:{thing.ag_code.co_name}"
        for thing in suspended()
        if id(thing) not in before
    )


async def read_all(stream: AsyncGenerator[ProviderEvent, None]) -> None:
    async for _ in stream:
        pass


@pytest.mark.usefixtures("collector_off")
async def test_a_stream_read_to_its_end_leaves_nothing_suspended(
    provider: Provider, before: set[int]
) -> None:
    await read_all(provider.stream(ask(provider, "@count 5")))
    assert await left_suspended(before) == []


@pytest.mark.usefixtures("collector_off")
async def test_a_stream_closed_after_its_first_event_leaves_nothing_suspended(
    provider: Provider, before: set[int]
) -> None:
    stream = provider.stream(ask(provider, "@count 20"))
    await anext(stream)
    await stream.aclose()
    assert await left_suspended(before) == []


@pytest.mark.usefixtures("collector_off")
async def test_a_stream_that_fails_mid_answer_leaves_nothing_suspended(
    provider: Provider, before: set[int]
) -> None:
    with pytest.raises(ProviderError):
        await read_all(provider.stream(ask(provider, "@count 20 @midstream_error 3")))
    assert await left_suspended(before) == []


@pytest.mark.usefixtures("collector_off")
async def test_a_stream_cancelled_mid_read_leaves_nothing_suspended(
    provider: Provider, before: set[int]
) -> None:
    stream = provider.stream(ask(provider, "@count 20 @delay 50"))
    await anext(stream)
    read = 0

    async def reading() -> None:
        nonlocal read
        async for _ in stream:
            read += 1

    reader = asyncio.create_task(reading())
    await eventually(lambda: read > 0, what="the reader read on")  # and waits for the next
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert await left_suspended(before) == []
