"""`openai:<model>`: the Chat Completions adapter, through the real SDK against the fake provider
(or, for what the fake does not send, a recorded stream)."""

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai
import pytest
from pydantic import SecretStr

from activities.providers import openai_chat
from activities.providers.base import ModelRequest, ProviderError
from activities.providers.config import ProviderConfig
from activities.providers.continuation_modes import CONTINUE_INSTRUCTION, Continuation
from activities.providers.openai_chat import OpenAIChatProvider, ToolCallAccumulator, chat_messages
from perdure.domain.conversation import AssistantItem, ToolCall, ToolResultItem, ToolSpec, UserItem
from perdure.domain.model_rules import ThinkingOptions
from perdure.domain.provider_events import (
    Finish,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from perdure.testing.fakeprovider.anthropic import THOUGHT_TOKENS
from perdure.testing.fakeprovider.server import FakeProvider
from tests.fakeprovider_fixtures import (
    collect,
    collect_until_error,
    config_for,
    count_to,
    tag,
    text_of,
)


@pytest.fixture(scope="module")
def provider(fake_provider_config: ProviderConfig) -> OpenAIChatProvider:
    return OpenAIChatProvider("fake-model", config=fake_provider_config)


WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def vllm_config(fake: FakeProvider) -> ProviderConfig:
    """The fake provider's vLLM-like server, with the `vllm` continuation."""
    return config_for(fake, openai_base_url=fake.vllm_base_url, openai_continuation="vllm")


def ask(text: str, **fields: object) -> ModelRequest:
    return ModelRequest(model="fake-model", conversation=[UserItem(text=text)], **fields)


async def test_streams_text_word_by_word_then_finishes_with_usage(
    provider: OpenAIChatProvider,
) -> None:
    events = await collect(provider, ask("hello world"))
    assert [e.text for e in events if isinstance(e, TextDelta)] == [
        "You",
        " said:",
        " hello",
        " world",
    ]
    assert events[-1] == Finish(
        reason="stop", input_tokens=2, cached_input_tokens=0, output_tokens=4, reasoning_tokens=0
    )


async def test_usage_counts_cached_input_and_reasoning_tokens_as_openai_reports_them(
    provider: OpenAIChatProvider,
) -> None:
    request = ask("@cached 3 hello world", thinking=ThinkingOptions(effort="low"))

    events = await collect(provider, request)

    assert events[-1] == Finish(
        reason="stop",
        input_tokens=4,
        cached_input_tokens=3,
        output_tokens=4 + THOUGHT_TOKENS,
        reasoning_tokens=THOUGHT_TOKENS,
    )


def replaying(monkeypatch: pytest.MonkeyPatch, chunks: list[dict[str, Any]]) -> OpenAIChatProvider:
    """A provider whose requests are answered with `chunks`, streamed, then `[DONE]`."""
    body = b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks)

    async def stream() -> AsyncIterator[bytes]:
        yield body + b"data: [DONE]\n\n"

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=stream(), headers={"content-type": "text/event-stream"})

    http = openai.DefaultAsyncHttpxClient(transport=httpx2.MockTransport(handler))
    client = openai.AsyncOpenAI(
        api_key="k", base_url="http://provider.test/v1", max_retries=0, http_client=http
    )
    monkeypatch.setattr(openai_chat, "openai_client", lambda config, relayed=False: client)
    config = ProviderConfig(openai_api_key=SecretStr("k"))
    return OpenAIChatProvider("served-model", config=config)


def chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "choices": choices, "usage": usage}


@pytest.mark.parametrize(
    "details",
    [{}, {"prompt_tokens_details": None, "completion_tokens_details": None}],
    ids=["absent", "null"],
)
async def test_usage_without_details_leaves_cached_and_reasoning_unknown(
    monkeypatch: pytest.MonkeyPatch, details: dict[str, Any]
) -> None:
    usage = {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10, **details}
    served = replaying(
        monkeypatch,
        [
            chunk([{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]),
            chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
            chunk([], usage),
        ],
    )

    events = await collect(served, ask("hello"))

    assert events[-1] == Finish(
        reason="stop",
        input_tokens=9,
        cached_input_tokens=None,
        output_tokens=1,
        reasoning_tokens=None,
    )


async def test_a_tool_call_is_reported_as_start_deltas_end(provider: OpenAIChatProvider) -> None:
    events = await collect(provider, ask('@tool get_weather {"city": "Paris"}', tools=[WEATHER]))
    start, *deltas, end, finish = events
    assert isinstance(start, ToolCallStart) and start.name == "get_weather"
    assert all(isinstance(d, ToolCallDelta) and d.id == start.id for d in deltas)
    assert (
        "".join(d.arguments_delta for d in deltas if isinstance(d, ToolCallDelta))
        == '{"city":"Paris"}'
    )
    assert end == ToolCallEnd(id=start.id, name="get_weather", arguments={"city": "Paris"})
    assert isinstance(finish, Finish) and finish.reason == "tool-calls"


async def test_a_tool_result_leads_to_the_answer(provider: OpenAIChatProvider) -> None:
    text = '@tool get_weather {"city": "Paris"}'
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})
    request = ModelRequest(
        model="fake-model",
        tools=[WEATHER],
        conversation=[
            UserItem(text=text),
            AssistantItem(tool_calls=[call]),
            ToolResultItem(tool_call_id="call_1", tool_name="get_weather", output="sunny"),
        ],
    )
    assert text_of(await collect(provider, request)) == "Tool get_weather returned: sunny"


async def test_prefill_continuation_completes_the_count_exactly(
    provider: OpenAIChatProvider,
) -> None:
    prefill = "1 2 3 4 5 6 7 8 9 10 1"
    events = await collect(provider, ask("@count 20", prefill=prefill))
    assert prefill + text_of(events) == count_to(20)


async def test_a_partial_is_continued_by_instruction_with_the_repeat_trimmed(
    provider: OpenAIChatProvider,
    fake_provider: FakeProvider,
) -> None:
    text = f"@count 9 {tag()}"
    events = await collect(provider, ask(text, prefill="1 2 3 4"))
    assert text_of(events) == " 5 6 7 8 9"
    (request,) = fake_provider.requests_for(text)
    assert request.body["messages"][-2:] == [
        {"role": "assistant", "content": "1 2 3 4"},
        {"role": "user", "content": CONTINUE_INSTRUCTION},
    ]
    assert "continue_final_message" not in request.body


def test_the_instruction_continuation_is_declared_best_effort(provider: OpenAIChatProvider) -> None:
    assert provider.continuation_for(ask("x", prefill="y")) == Continuation(
        mechanism="instruction",
        exact=False,
        via="partial + continue instruction, overlap trimmed",
    )
    assert provider.supports_cancel is False


async def test_vllm_continues_the_final_message_exactly(fake_provider: FakeProvider) -> None:
    vllm = OpenAIChatProvider("fake-model", config=vllm_config(fake_provider))
    text = f"@count 12 {tag()}"
    events = await collect(vllm, ask(text, prefill="1 2 3 4 5 6 7 8 9 1"))
    assert "1 2 3 4 5 6 7 8 9 1" + text_of(events) == count_to(12)
    assert fake_provider.deltas_for(text) == 3
    (request,) = fake_provider.requests_for(text)
    assert request.body["continue_final_message"] is True
    assert request.body["add_generation_prompt"] is False
    assert request.body["messages"][-1] == {"role": "assistant", "content": "1 2 3 4 5 6 7 8 9 1"}
    assert vllm.continuation.exact


async def test_deepseek_continues_a_prefix_message_exactly(fake_provider: FakeProvider) -> None:
    config = config_for(
        fake_provider,
        openai_base_url=fake_provider.deepseek_base_url,
        openai_continuation="deepseek",
    )
    deepseek = OpenAIChatProvider("fake-model", config=config)
    text = f"@count 8 {tag()}"
    events = await collect(deepseek, ask(text, prefill="1 2 3"))
    assert "1 2 3" + text_of(events) == count_to(8)
    (request,) = fake_provider.requests_for(text)
    assert request.body["messages"][-1] == {"role": "assistant", "content": "1 2 3", "prefix": True}


async def test_the_real_openai_api_refuses_vllms_parameter(fake_provider: FakeProvider) -> None:
    config = config_for(fake_provider, openai_continuation="vllm")
    vllm_on_openai = OpenAIChatProvider("fake-model", config=config)
    unrecognized = "Unrecognized request arguments supplied: continue_final_message"
    with pytest.raises(ProviderError, match=unrecognized) as caught:
        await collect(vllm_on_openai, ask("@count 3", prefill="1"))
    assert not caught.value.retryable and not caught.value.prefill_rejected


async def test_max_output_tokens_finishes_with_length(provider: OpenAIChatProvider) -> None:
    events = await collect(provider, ask("@count 10", max_output_tokens=4))
    assert text_of(events) == "1 2 3 4"
    assert isinstance(events[-1], Finish) and events[-1].reason == "length"


async def test_rate_limit_is_retryable_with_retry_after(provider: OpenAIChatProvider) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask(f"@fail 429 retry-after=2 {tag()}"))
    assert caught.value.retryable
    assert caught.value.retry_after == 2.0
    assert caught.value.status == 429


async def test_server_error_is_retryable(provider: OpenAIChatProvider) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask(f"@fail 503 {tag()}"))
    assert caught.value.retryable and caught.value.status == 503


async def test_bad_request_is_not_retryable(provider: OpenAIChatProvider) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask(f"@fail 400 {tag()}"))
    assert not caught.value.retryable
    assert not caught.value.prefill_rejected


async def test_a_rejected_prefill_is_flagged(fake_provider: FakeProvider) -> None:
    vllm = OpenAIChatProvider("fake-model", config=vllm_config(fake_provider))
    with pytest.raises(ProviderError) as caught:
        await collect(vllm, ask("@count 5 @reject_prefill", prefill="1 2"))
    assert caught.value.prefill_rejected and not caught.value.retryable


async def test_the_instruction_continuation_sends_no_prefill(provider: OpenAIChatProvider) -> None:
    events = await collect(provider, ask("@count 5 @reject_prefill", prefill="1 2"))
    assert "1 2" + text_of(events) == count_to(5)


async def test_a_dropped_connection_is_retryable_after_the_partial_text(
    provider: OpenAIChatProvider,
) -> None:
    events, error = await collect_until_error(
        provider, ask(f"@count 9 @disconnect_after 4 {tag()}")
    )
    assert text_of(events) == "1 2 3 4"
    assert error.retryable


async def test_a_missing_api_key_names_the_variable(fake_provider: FakeProvider) -> None:
    keyless = OpenAIChatProvider(
        "fake-model", config=config_for(fake_provider, openai_api_key=None)
    )
    with pytest.raises(ProviderError, match="OPENAI_API_KEY") as caught:
        await collect(keyless, ask("hello"))
    assert not caught.value.retryable


async def test_a_retry_after_a_drop_completes_exactly_regenerating_only_the_repeat(
    provider: OpenAIChatProvider,
    fake_provider: FakeProvider,
) -> None:
    text = f"@count 12 @disconnect_after 5 {tag()}"
    partial, _ = await collect_until_error(provider, ask(text))
    rest = await collect(provider, ask(text, prefill=text_of(partial)))
    assert text_of(partial) + text_of(rest) == count_to(12)
    # The model repeated "4 5" before going on: generated twice, trimmed, never shown twice.
    assert fake_provider.deltas_for(text) == 12 + 2


def test_conversation_becomes_chat_messages_with_tool_calls_and_prefill() -> None:
    call = ToolCall(id="c1", name="get_weather", arguments={"city": "Oslo"})
    request = ModelRequest(
        model="m",
        system="Be brief.",
        prefill="It is",
        conversation=[
            UserItem(text="Weather?"),
            AssistantItem(text="Checking.", tool_calls=[call]),
            ToolResultItem(tool_call_id="c1", tool_name="get_weather", output="rain"),
        ],
    )
    assert chat_messages(request) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
        {"role": "assistant", "content": "It is"},
        {"role": "user", "content": CONTINUE_INSTRUCTION},
    ]


def test_invalid_tool_arguments_become_an_empty_object() -> None:
    calls = ToolCallAccumulator()
    calls.feed({"index": 0, "id": "c", "function": {"name": "f", "arguments": "{not json"}})
    assert calls.finish()[-1] == ToolCallEnd(id="c", name="f", arguments={})


async def test_an_effort_is_sent_as_reasoning_effort(
    provider: OpenAIChatProvider, fake_provider: FakeProvider
) -> None:
    text = f"@count 3 {tag()}"

    events = await collect(provider, ask(text, thinking=ThinkingOptions(effort="high")))

    assert text_of(events) == count_to(3)
    (sent,) = fake_provider.requests_for(text)
    assert sent.body["reasoning_effort"] == "high"
