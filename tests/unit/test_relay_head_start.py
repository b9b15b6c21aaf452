"""A head start at the relay: the step's same request adopts it (one provider request), another
request supersedes it (the early stream cancelled), and one no step asks for is cancelled once
its claim window passes. A head start never replaces a stream its step already holds."""

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client import REGISTRY

from activities.head_start import unsent_outcome
from activities.providers.anthropic_messages import AnthropicMessagesProvider
from activities.providers.base import ModelRequest, ProviderError
from activities.providers.openai_chat import OpenAIChatProvider
from perdure.domain.conversation import UserItem
from perdure.relay.app import Relay
from perdure.relay.held import HeldStreams, RelayLimits
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.relay import RELAY_SECRET, relay_config_for, running_relay
from tests.fakeprovider_fixtures import config_for, count_to, tag, text_of
from tests.waiting import eventually

CLAIM_SECONDS = 0.5


@pytest.fixture
async def relay(fake_provider: FakeProvider) -> AsyncIterator[tuple[str, Relay]]:
    limits = RelayLimits(claim_seconds=CLAIM_SECONDS)
    async with running_relay(relay_config_for(fake_provider, limits)) as running:
        yield running


def through(
    url: str, fake: FakeProvider, api: str
) -> AnthropicMessagesProvider | OpenAIChatProvider:
    config = config_for(fake, relay_url=url, relay_secret=RELAY_SECRET)
    if api == "anthropic":
        return AnthropicMessagesProvider("claude-opus-4-7", config=config)
    return OpenAIChatProvider("gpt-fake", config=config)


def ask(text: str, stream_id: str, *, early: bool = False) -> ModelRequest:
    return ModelRequest(
        model="", conversation=[UserItem(text=text)], stream_id=stream_id, early=early
    )


async def head_start(
    provider: AnthropicMessagesProvider | OpenAIChatProvider, request: ModelRequest
) -> None:
    """As the gateway sends one: the first event, then the stream is left to the relay."""
    stream = provider.stream(request)
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]


def counted(outcome: str) -> float:
    return REGISTRY.get_sample_value("perdure_head_starts_total", {"outcome": outcome}) or 0.0


@pytest.mark.parametrize("api", ["anthropic", "openai"])
async def test_the_step_s_same_request_adopts_the_head_start_with_one_provider_request(
    relay: tuple[str, Relay], fake_provider: FakeProvider, api: str
) -> None:
    url, _ = relay
    provider = through(url, fake_provider, api)
    text, stream_id = f"@count 20 @delay 5 {tag()}", f"msg_{tag()}:0"
    adopted = counted("adopted")

    await head_start(provider, ask(text, stream_id, early=True))
    events = [e async for e in provider.stream(ask(text, stream_id))]

    assert text_of(events) == count_to(20)
    assert len(fake_provider.requests_for(text)) == 1
    assert counted("adopted") == adopted + 1


async def test_another_request_of_the_step_supersedes_the_head_start_which_is_cancelled(
    relay: tuple[str, Relay], fake_provider: FakeProvider
) -> None:
    url, running = relay
    provider = through(url, fake_provider, "anthropic")
    early_text, step_text = f"@count 200 @delay 20 {tag()}", f"@count 5 {tag()}"
    stream_id = f"msg_{tag()}:0"
    superseded = counted("superseded")
    await head_start(provider, ask(early_text, stream_id, early=True))
    early = running.streams.get(stream_id)

    events = [e async for e in provider.stream(ask(step_text, stream_id))]

    assert text_of(events) == count_to(5)
    assert early is not None and early.truncated == "cancelled"
    assert early.reader is not None and early.reader.done()
    assert counted("superseded") == superseded + 1


async def test_a_head_start_no_step_asks_for_is_cancelled_after_its_claim_window(
    relay: tuple[str, Relay], fake_provider: FakeProvider
) -> None:
    url, running = relay
    provider = through(url, fake_provider, "anthropic")
    text, stream_id = f"@count 500 @delay 20 {tag()}", f"msg_{tag()}:0"
    unclaimed = counted("unclaimed")
    await head_start(provider, ask(text, stream_id, early=True))
    early = running.streams.get(stream_id)
    assert early is not None

    await eventually(lambda: early.ended, what="the head start's end")

    assert running.streams.get(stream_id) is None
    assert early.truncated == "cancelled"
    assert counted("unclaimed") == unclaimed + 1


async def test_a_head_start_never_replaces_the_stream_its_step_holds(
    relay: tuple[str, Relay], fake_provider: FakeProvider
) -> None:
    url, running = relay
    provider = through(url, fake_provider, "anthropic")
    step_text, early_text = f"@count 30 @delay 10 {tag()}", f"@count 5 {tag()}"
    stream_id = f"msg_{tag()}:0"
    step = provider.stream(ask(step_text, stream_id))
    first = await anext(step)

    with pytest.raises(ProviderError, match="stream_taken") as refused:
        await head_start(provider, ask(early_text, stream_id, early=True))
    rest = [e async for e in step]

    assert unsent_outcome(refused.value) == "late"  # counted so by the gateway, not a failure

    assert text_of([first, *rest]) == count_to(30)
    assert fake_provider.requests_for(early_text) == []
    held = running.streams.get(stream_id)
    assert held is not None and held.truncated is None


async def test_a_stop_before_the_step_cancels_the_head_start_at_the_relay(
    relay: tuple[str, Relay], fake_provider: FakeProvider
) -> None:
    url, running = relay
    provider = through(url, fake_provider, "anthropic")
    text, stream_id = f"@count 500 @delay 20 {tag()}", f"msg_{tag()}:0"
    cancelled = counted("cancelled")
    await head_start(provider, ask(text, stream_id, early=True))

    await provider.cancel(f"relay:{stream_id}")

    assert running.streams.get(stream_id) is None
    assert counted("cancelled") == cancelled + 1


async def test_a_request_sent_while_its_twin_awaits_the_provider_waits_for_that_answer() -> None:
    answer = asyncio.Event()
    sent: list[str] = []

    async def body() -> AsyncIterator[bytes]:
        yield b"data: {}\n\n"

    async def opener() -> httpx.Response:
        sent.append("request")
        await answer.wait()
        return httpx.Response(200, content=body())

    streams = HeldStreams(RelayLimits())
    early = asyncio.create_task(streams.request("msg_1:0", "digest", opener, early=True))
    await asyncio.sleep(0)
    step = asyncio.create_task(streams.request("msg_1:0", "digest", opener))
    await asyncio.sleep(0.01)
    answer.set()

    assert await early is await step
    assert sent == ["request"]
    await streams.close()
