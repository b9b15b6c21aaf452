"""The provider relay: a step's provider stream outlives the worker, exactly, and the relay is
not an open proxy (each refusal tested)."""

from collections.abc import AsyncIterator

import httpx
import pytest

from activities.providers.anthropic_messages import AnthropicMessagesProvider
from activities.providers.base import ModelRequest, ProviderError, ResumeToken
from activities.providers.openai_chat import OpenAIChatProvider
from activities.watched_stream import StreamTarget, stream_into_log
from perdure.domain.conversation import UserItem
from perdure.domain.provider_events import ProviderEvent, ResponseCursor
from perdure.domain.relay_protocol import ATTACH_HEADER, STREAM_HEADER
from perdure.domain.step_chunks import StepChunker
from perdure.relay.app import Relay
from perdure.relay.held import HeldStream, RelayLimits
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.relay import RELAY_SECRET, relay_config_for, running_relay
from perdure.testing.stack import free_port
from tests.fakeprovider_fixtures import config_for, count_to, tag, text_of
from tests.waiting import eventually

BODY = {"model": "claude-haiku-4-5", "max_tokens": 100, "stream": True, "messages": []}


@pytest.fixture
async def relay(fake_provider: FakeProvider) -> AsyncIterator[tuple[str, Relay]]:
    async with running_relay(relay_config_for(fake_provider)) as running:
        yield running


def through(url: str, fake: FakeProvider, provider: str = "anthropic", model: str = "") -> object:
    config = config_for(fake, relay_url=url, relay_secret=RELAY_SECRET)
    if provider == "anthropic":
        return AnthropicMessagesProvider(model or "claude-haiku-4-5", config=config)
    return OpenAIChatProvider(model or "gpt-fake", config=config)


def ask(text: str, stream_id: str, resume: ResumeToken | None = None) -> ModelRequest:
    return ModelRequest(
        model="", conversation=[UserItem(text=text)], stream_id=stream_id, resume=resume
    )


async def read_until(
    provider: AnthropicMessagesProvider | OpenAIChatProvider, request: ModelRequest, texts: int
) -> list[ProviderEvent]:
    """The events of a worker that goes away after `texts` text deltas."""
    events: list[ProviderEvent] = []
    stream = provider.stream(request)
    async for event in stream:
        events.append(event)
        if sum(1 for e in events if e.kind == "text") >= texts:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    return events


def ended(running: Relay, stream_id: str) -> HeldStream | None:
    """The relay's held stream once its upstream answer ended."""
    held = running.streams.get(stream_id)
    return held if held is not None and held.ended else None


@pytest.mark.parametrize(
    ("api", "model"),
    [("anthropic", "claude-haiku-4-5"), ("anthropic", "claude-opus-4-7"), ("openai", "gpt-fake")],
)
async def test_a_retried_step_re_attaches_and_reads_on_exactly_with_one_provider_request(
    relay: tuple[str, Relay], fake_provider: FakeProvider, api: str, model: str
) -> None:
    url, _ = relay
    provider = through(url, fake_provider, api, model)
    assert isinstance(provider, AnthropicMessagesProvider | OpenAIChatProvider)
    text, stream_id = f"@count 60 @delay 5 {tag()}", f"msg_{tag()}:1"

    read = await read_until(provider, ask(text, stream_id), texts=10)
    # What the log holds: what its last cursor covers (the step logs nothing beyond it).
    last = max(i for i, e in enumerate(read) if isinstance(e, ResponseCursor))
    first, cursor = read[: last + 1], read[last]
    assert isinstance(cursor, ResponseCursor)
    resume = ResumeToken(response_id=cursor.response_id, sequence_number=cursor.sequence_number)
    assert provider.continuation_for(ask(text, stream_id, resume)).mechanism == "resume"
    rest = [e async for e in provider.stream(ask(text, stream_id, resume))]

    assert text_of(first) + text_of(rest) == count_to(60)
    assert len(fake_provider.requests_for(text)) == 1


async def test_the_relay_reads_the_provider_to_the_end_after_the_worker_is_gone(
    relay: tuple[str, Relay], fake_provider: FakeProvider
) -> None:
    url, running = relay
    provider = through(url, fake_provider)
    assert isinstance(provider, AnthropicMessagesProvider)
    text, stream_id = f"@count 30 @delay 5 {tag()}", f"msg_{tag()}:1"

    await read_until(provider, ask(text, stream_id), texts=3)
    held = await eventually(lambda: ended(running, stream_id), what="the held stream ended")

    assert held is not None and held.ended and held.truncated is None
    assert b"message_stop" in b"".join(held.chunks)


async def test_a_stream_the_relay_no_longer_holds_is_a_final_error_never_a_new_request(
    relay: tuple[str, Relay], fake_provider: FakeProvider
) -> None:
    url, _ = relay
    provider = through(url, fake_provider)
    assert isinstance(provider, AnthropicMessagesProvider)
    gone = ResumeToken(response_id="relay:msg_gone:1", sequence_number=5)
    text = f"@count 5 {tag()}"

    with pytest.raises(ProviderError) as caught:
        [e async for e in provider.stream(ask(text, "msg_gone:1", gone))]

    assert caught.value.retryable is False
    assert "stream_gone" in str(caught.value) or caught.value.status == 404
    assert fake_provider.requests_for(text) == []


async def test_a_stop_cancels_the_provider_request_at_the_relay(
    relay: tuple[str, Relay], fake_provider: FakeProvider
) -> None:
    url, running = relay
    provider = through(url, fake_provider)
    assert isinstance(provider, AnthropicMessagesProvider)
    text, stream_id = f"@count 200 @delay 20 {tag()}", f"msg_{tag()}:1"
    await read_until(provider, ask(text, stream_id), texts=2)

    await provider.cancel(f"relay:{stream_id}")

    assert running.streams.get(stream_id) is None


# -- not an open proxy --------------------------------------------------------------------------


async def post(
    url: str, path: str, *, secret: str | None = RELAY_SECRET.get_secret_value(), **kwargs: object
) -> httpx.Response:
    headers = {STREAM_HEADER: f"msg_{tag()}:1", **kwargs.pop("headers", {})}  # type: ignore[dict-item]
    if secret is not None:
        headers["x-api-key"] = secret
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        return await http.post(path, headers=headers, **kwargs)  # type: ignore[arg-type]


async def test_a_caller_without_the_secret_is_refused(relay: tuple[str, Relay]) -> None:
    url, _ = relay

    missing = await post(url, "/anthropic/v1/messages", secret=None, json=BODY)
    wrong = await post(url, "/anthropic/v1/messages", secret="guess", json=BODY)

    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert wrong.json()["error"]["type"] == "authentication_error"


@pytest.mark.parametrize(
    "path",
    ["/anthropic/v1/models", "/openai/files", "/evil.example/v1/messages", "/anthropic/../admin"],
)
async def test_only_the_providers_streaming_endpoints_are_forwarded(
    relay: tuple[str, Relay], path: str
) -> None:
    url, _ = relay

    response = await post(url, path, json=BODY)

    assert response.status_code == 404


async def test_another_host_named_by_the_caller_is_never_reached(
    relay: tuple[str, Relay], fake_provider: FakeProvider
) -> None:
    url, _ = relay
    text = f"@count 2 {tag()}"
    body = {**BODY, "messages": [{"role": "user", "content": text}]}

    response = await post(
        url, "/anthropic/v1/messages", json=body, headers={"host": "evil.example"}
    )

    assert response.status_code == 200  # sent to the configured provider, not to the host
    assert len(fake_provider.requests_for(text)) == 1


async def test_an_oversized_request_is_refused(relay: tuple[str, Relay]) -> None:
    url, _ = relay

    response = await post(url, "/anthropic/v1/messages", content=b"x" * 1_000_001)

    assert response.status_code == 413


async def test_a_request_without_a_stream_identity_is_refused(relay: tuple[str, Relay]) -> None:
    url, _ = relay

    response = await post(url, "/anthropic/v1/messages", json=BODY, headers={STREAM_HEADER: ""})

    assert response.status_code == 400


async def test_a_full_relay_refuses_new_streams_and_finishes_the_ones_it_holds(
    fake_provider: FakeProvider,
) -> None:
    limits = RelayLimits(max_streams=1)
    async with running_relay(relay_config_for(fake_provider, limits)) as (url, running):
        provider = through(url, fake_provider)
        assert isinstance(provider, AnthropicMessagesProvider)
        text, stream_id = f"@count 20 @delay 10 {tag()}", f"msg_{tag()}:1"
        await read_until(provider, ask(text, stream_id), texts=2)

        refused = await post(url, "/anthropic/v1/messages", json=BODY)
        held = await eventually(lambda: ended(running, stream_id), what="the held stream ended")

    assert refused.status_code == 503
    assert refused.json()["error"]["type"] == "relay_full"
    assert held is not None and held.truncated is None


async def test_attaching_to_a_stream_never_held_is_a_404(relay: tuple[str, Relay]) -> None:
    url, _ = relay

    response = await post(url, "/anthropic/v1/messages", json=BODY, headers={ATTACH_HEADER: "1"})

    assert response.status_code == 404
    assert response.json()["error"]["type"] == "stream_gone"


class RecordedLog:
    """What a step's log writer was handed, call by call."""

    def __init__(self) -> None:
        self.adds: list[list[dict[str, object]]] = []

    def add(self, chunks: list[dict[str, object]], **_: object) -> None:
        self.adds.append(chunks)


@pytest.mark.parametrize("api", ["anthropic", "openai"])
async def test_a_stream_sent_direct_because_the_relay_is_down_is_logged_as_it_comes(
    fake_provider: FakeProvider, api: str
) -> None:
    provider = through(f"http://127.0.0.1:{free_port()}", fake_provider, api)
    assert isinstance(provider, AnthropicMessagesProvider | OpenAIChatProvider)
    target = StreamTarget(writer=RecordedLog(), chunker=StepChunker(0), log_step=0)  # type: ignore[arg-type]

    await stream_into_log(
        provider, ask(f"@count 5 {tag()}", f"msg_{tag()}:0"), target, stall_timeout=30
    )

    deltas_per_add = [
        sum(1 for chunk in chunks if chunk["type"] == "text-delta") for chunks in target.writer.adds
    ]
    # Each delta as it comes: no cursor will follow a direct stream's events, so none is held.
    assert sorted(deltas_per_add)[-1] == 1 and sum(deltas_per_add) == 5
    assert target.last_cursor is None
