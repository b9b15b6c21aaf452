"""`anthropic:<model>`: the Messages adapter, through the real SDK against the fake provider
(or, for what the fake does not send, a recorded stream)."""

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import pytest
from pydantic import SecretStr

from activities.providers import anthropic_messages as adapter
from activities.providers.anthropic_messages import (
    AnthropicMessagesProvider,
    WhitespaceDeduper,
    anthropic_messages,
)
from activities.providers.base import ModelRequest, ProviderError
from activities.providers.config import ProviderConfig
from activities.providers.continuation_modes import CONTINUE_INSTRUCTION, INSTRUCTION
from perdure.domain.conversation import AssistantItem, ToolCall, ToolResultItem, ToolSpec, UserItem
from perdure.domain.model_rules import CLAUDE_4_5, ThinkingOptions
from perdure.domain.provider_events import (
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from perdure.testing.fakeprovider.anthropic import THINKING
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
def provider(fake_provider_config: ProviderConfig) -> AnthropicMessagesProvider:
    return AnthropicMessagesProvider("claude-haiku-4-5", config=fake_provider_config)


SEARCH = ToolSpec(name="search", description="Search", parameters={"type": "object"})


def ask(text: str, **fields: object) -> ModelRequest:
    return ModelRequest(model="claude-haiku-4-5", conversation=[UserItem(text=text)], **fields)


async def test_streams_text_word_by_word_then_finishes_with_usage(
    provider: AnthropicMessagesProvider,
) -> None:
    events = await collect(provider, ask("good morning", system="Be kind."))
    assert [e.text for e in events if isinstance(e, TextDelta)] == [
        "You",
        " said:",
        " good",
        " morning",
    ]
    assert events[-1] == Finish(
        reason="stop", input_tokens=4, cached_input_tokens=0, output_tokens=4
    )


async def test_a_prompt_read_from_the_cache_counts_in_the_input_tokens(
    provider: AnthropicMessagesProvider,
) -> None:
    events = await collect(provider, ask("@cached 3 good morning", system="Be kind."))

    assert events[-1] == Finish(
        reason="stop", input_tokens=6, cached_input_tokens=3, output_tokens=4
    )


def replaying(
    monkeypatch: pytest.MonkeyPatch, start: dict[str, Any], delta: dict[str, Any]
) -> AnthropicMessagesProvider:
    """A provider whose requests are answered with a recorded stream: "Hi", with `start` as
    `message_start`'s usage and `delta` as `message_delta`'s."""
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": start}
    text = {"type": "text_delta", "text": "Hi"}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": text},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": delta},
        {"type": "message_stop"},
    ]
    body = b"".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in events
    )

    async def stream() -> AsyncIterator[bytes]:
        yield body

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=stream(), headers={"content-type": "text/event-stream"})

    http = anthropic.DefaultAsyncHttpxClient(transport=httpx2.MockTransport(handler))
    client = anthropic.AsyncAnthropic(
        api_key="k", base_url="http://provider.test", max_retries=0, http_client=http
    )
    monkeypatch.setattr(adapter, "anthropic_client", lambda config, relayed=False: client)
    config = ProviderConfig(anthropic_api_key=SecretStr("k"))
    return AnthropicMessagesProvider("claude-haiku-4-5", config=config)


async def test_anthropic_input_tokens_include_cache_reads_and_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    start = {
        "input_tokens": 9,
        "cache_creation_input_tokens": 287,
        "cache_read_input_tokens": 30433,
        "output_tokens": 1,
    }
    served = replaying(monkeypatch, start, {"output_tokens": 67})

    events = await collect(served, ask("hello"))

    assert events[-1] == Finish(
        reason="stop", input_tokens=9 + 287 + 30433, cached_input_tokens=30433, output_tokens=67
    )


async def test_message_delta_usage_is_cumulative_and_replaces_message_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    start = {
        "input_tokens": 472,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 2,
    }
    delta = {
        "input_tokens": 10682,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 2048,
        "output_tokens": 510,
    }
    served = replaying(monkeypatch, start, delta)

    events = await collect(served, ask("hello"))

    assert events[-1] == Finish(
        reason="stop", input_tokens=10682 + 2048, cached_input_tokens=2048, output_tokens=510
    )


async def test_thinking_tokens_are_reported_where_the_api_tells_them_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    delta = {"output_tokens": 510, "output_tokens_details": {"thinking_tokens": 380}}
    served = replaying(monkeypatch, {"input_tokens": 25, "output_tokens": 1}, delta)

    events = await collect(served, ask("hello"))

    assert events[-1] == Finish(
        reason="stop", input_tokens=25, output_tokens=510, reasoning_tokens=380
    )


async def test_a_tool_use_block_is_reported_as_start_deltas_end(
    provider: AnthropicMessagesProvider,
) -> None:
    events = await collect(provider, ask('@tool search {"q": "otters"}', tools=[SEARCH]))
    start, *deltas, end, finish = events
    assert isinstance(start, ToolCallStart) and start.id.startswith("toolu_")
    assert all(isinstance(d, ToolCallDelta) for d in deltas)
    assert end == ToolCallEnd(id=start.id, name="search", arguments={"q": "otters"})
    assert isinstance(finish, Finish) and finish.reason == "tool-calls"
    assert finish.output_tokens == len(deltas)


async def test_parallel_tool_results_lead_to_the_answer(
    provider: AnthropicMessagesProvider,
) -> None:
    text = "@parallel\n@tool search {}\n@tool search {}"
    calls = [ToolCall(id="t1", name="search"), ToolCall(id="t2", name="search")]
    request = ModelRequest(
        model="claude-haiku-4-5",
        tools=[SEARCH],
        conversation=[
            UserItem(text=text),
            AssistantItem(tool_calls=calls),
            ToolResultItem(tool_call_id="t1", tool_name="search", output="a"),
            ToolResultItem(tool_call_id="t2", tool_name="search", output="b"),
        ],
    )
    answer = text_of(await collect(provider, request))
    assert answer == "Tool search returned: a Tool search returned: b"


async def test_prefill_with_trailing_space_completes_the_count_exactly(
    provider: AnthropicMessagesProvider,
) -> None:
    prefill = "1 2 3 4 5 "
    events = await collect(provider, ask("@count 9", prefill=prefill))
    assert prefill + text_of(events) == count_to(9)


async def test_prefill_ending_mid_number_completes_the_count_exactly(
    provider: AnthropicMessagesProvider,
) -> None:
    prefill = "1 2 3 4 5 6 7 8 9 10 1"
    events = await collect(provider, ask("@count 14", prefill=prefill))
    assert prefill + text_of(events) == count_to(14)


def test_a_prefill_is_declared_exact(provider: AnthropicMessagesProvider) -> None:
    assert provider.continuation.mechanism == "prefill" and provider.continuation.exact
    assert provider.continuation_for(ask("x", prefill="y")) == provider.continuation
    assert provider.supports_cancel is False


async def test_thinking_streams_reasoning_before_the_answer(
    provider: AnthropicMessagesProvider, fake_provider: FakeProvider
) -> None:
    text = f"@count 3 {tag()}"
    events = await collect(provider, ask(text, thinking=ThinkingOptions(budget_tokens=2048)))
    reasoning = [e for e in events if isinstance(e, ReasoningDelta)]
    assert "".join(e.text for e in reasoning) == THINKING
    assert events.index(reasoning[-1]) < next(
        i for i, e in enumerate(events) if isinstance(e, TextDelta)
    )
    assert text_of(events) == count_to(3)
    (request,) = fake_provider.requests_for(text)
    assert request.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}


async def test_with_thinking_a_partial_is_continued_by_instruction_never_a_prefill(
    provider: AnthropicMessagesProvider,
    fake_provider: FakeProvider,
) -> None:
    text = f"@count 10 {tag()}"
    request = ask(text, prefill="1 2 3 4 5 6", thinking=ThinkingOptions(budget_tokens=1024))
    assert provider.continuation_for(request) == INSTRUCTION
    events = await collect(provider, request)
    assert "1 2 3 4 5 6" + text_of(events) == count_to(10)
    (sent,) = fake_provider.requests_for(text)
    assert sent.body["thinking"]["type"] == "enabled"
    assert sent.body["messages"][-2:] == [
        {"role": "assistant", "content": [{"type": "text", "text": "1 2 3 4 5 6"}]},
        {"role": "user", "content": [{"type": "text", "text": CONTINUE_INSTRUCTION}]},
    ]


async def test_a_thinking_budget_below_1024_is_refused_by_the_api(
    provider: AnthropicMessagesProvider,
) -> None:
    with pytest.raises(ProviderError, match="greater than or equal to 1024") as caught:
        await collect(provider, ask("hello", thinking=ThinkingOptions(budget_tokens=512)))
    assert not caught.value.retryable and caught.value.status == 400


async def test_a_thinking_budget_not_below_max_tokens_is_refused_by_the_api(
    provider: AnthropicMessagesProvider,
) -> None:
    request = ask("hello", thinking=ThinkingOptions(budget_tokens=2048), max_output_tokens=2048)
    with pytest.raises(ProviderError, match="must be greater than `thinking.budget_tokens`"):
        await collect(provider, request)


async def test_thinking_is_left_out_of_a_request_that_continues_a_tool_loop(
    provider: AnthropicMessagesProvider,
    fake_provider: FakeProvider,
) -> None:
    text = f"@tool search {{}} {tag()}"
    request = ModelRequest(
        model="claude-haiku-4-5",
        tools=[SEARCH],
        thinking=ThinkingOptions(budget_tokens=2048),
        conversation=[
            UserItem(text=text),
            AssistantItem(tool_calls=[ToolCall(id="t1", name="search")]),
            ToolResultItem(tool_call_id="t1", tool_name="search", output="found"),
        ],
    )
    assert text_of(await collect(provider, request)) == "Tool search returned: found"
    (sent,) = fake_provider.requests_for(text)
    assert "thinking" not in sent.body


async def test_a_midstream_overload_is_retryable(provider: AnthropicMessagesProvider) -> None:
    events, error = await collect_until_error(provider, ask(f"@count 9 @midstream_error 3 {tag()}"))
    assert text_of(events) == "1 2 3"
    assert error.retryable
    assert "overloaded" in str(error)


async def test_overloaded_status_529_is_retryable(provider: AnthropicMessagesProvider) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask(f"@fail 529 {tag()}"))
    assert caught.value.retryable and caught.value.status == 529


async def test_rate_limit_is_retryable_with_retry_after(
    provider: AnthropicMessagesProvider,
) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask(f"@fail 429 retry-after=7 {tag()}"))
    assert caught.value.retryable and caught.value.retry_after == 7.0


async def test_bad_request_is_not_retryable(provider: AnthropicMessagesProvider) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask(f"@fail 400 {tag()}"))
    assert not caught.value.retryable and caught.value.status == 400


async def test_a_rejected_prefill_is_flagged(provider: AnthropicMessagesProvider) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask("@count 6 @reject_prefill", prefill="1 2 3"))
    assert caught.value.prefill_rejected and not caught.value.retryable


async def test_a_dropped_connection_is_retryable(
    provider: AnthropicMessagesProvider, fake_provider: FakeProvider
) -> None:
    text = f"@count 8 @disconnect_after 3 {tag()}"
    events, error = await collect_until_error(provider, ask(text))
    assert error.retryable
    rest = await collect(provider, ask(text, prefill=text_of(events)))
    assert text_of(events) + text_of(rest) == count_to(8)
    assert fake_provider.deltas_for(text) == 8


async def test_a_missing_api_key_names_the_variable(fake_provider: FakeProvider) -> None:
    config = config_for(fake_provider, anthropic_api_key=None)
    keyless = AnthropicMessagesProvider("claude-haiku-4-5", config=config)
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY") as caught:
        await collect(keyless, ask("hello"))
    assert not caught.value.retryable


def test_consecutive_tool_results_share_one_user_message() -> None:
    calls = [ToolCall(id="a", name="search"), ToolCall(id="b", name="search")]
    request = ModelRequest(
        model="m",
        prefill="Both say  ",
        conversation=[
            UserItem(text="Search twice"),
            AssistantItem(text="On it.", tool_calls=calls),
            ToolResultItem(tool_call_id="a", tool_name="search", output="one"),
            ToolResultItem(tool_call_id="b", tool_name="search", output="two", is_error=True),
        ],
    )
    assert anthropic_messages(request, CLAUDE_4_5) == [
        {"role": "user", "content": [{"type": "text", "text": "Search twice"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "On it."},
                {"type": "tool_use", "id": "a", "name": "search", "input": {}},
                {"type": "tool_use", "id": "b", "name": "search", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "one", "is_error": False},
                {"type": "tool_result", "tool_use_id": "b", "content": "two", "is_error": True},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Both say"}]},
    ]


def test_a_user_message_after_tool_results_joins_their_user_turn() -> None:
    request = ModelRequest(
        model="m",
        conversation=[
            UserItem(text="go"),
            AssistantItem(tool_calls=[ToolCall(id="a", name="search")]),
            ToolResultItem(tool_call_id="a", tool_name="search", output="done"),
            UserItem(text="and now?"),
        ],
    )
    roles = [message["role"] for message in anthropic_messages(request, CLAUDE_4_5)]
    assert roles == ["user", "assistant", "user"]


def test_the_stripped_whitespace_is_dropped_once_from_the_continuation() -> None:
    dedupe = WhitespaceDeduper("Hello \n")
    assert dedupe(" ") == ""
    assert dedupe("\nworld") == "world"
    assert dedupe(" again") == " again"


# -- today's Claude models ----------------------------------------------------------------------


@pytest.mark.parametrize("model", ["claude-sonnet-4-6", "claude-opus-4-7"])
async def test_a_model_without_prefill_continues_a_partial_by_instruction_exactly(
    fake_provider_config: ProviderConfig, fake_provider: FakeProvider, model: str
) -> None:
    provider = AnthropicMessagesProvider(model, config=fake_provider_config)
    text = f"@count 12 {tag()}"
    request = ModelRequest(model=model, conversation=[UserItem(text=text)], prefill="1 2 3 4")

    assert provider.continuation_for(request) == INSTRUCTION
    events = await collect(provider, request)

    assert "1 2 3 4" + text_of(events) == count_to(12)
    (sent,) = fake_provider.requests_for(text)  # one request: no 400 on the way
    assert sent.body["messages"][-1]["content"] == [{"type": "text", "text": CONTINUE_INSTRUCTION}]


async def test_a_prefill_refused_by_a_model_the_rules_do_not_know_goes_on_by_instruction(
    provider: AnthropicMessagesProvider, fake_provider: FakeProvider
) -> None:
    text = f"@count 8 @reject_prefill {tag()}"
    request = ask(text, prefill="1 2 3", prefill_refused=True)

    events = await collect(provider, request)

    assert "1 2 3" + text_of(events) == count_to(8)


async def test_adaptive_thinking_sends_the_effort_and_the_display(
    fake_provider_config: ProviderConfig, fake_provider: FakeProvider
) -> None:
    provider = AnthropicMessagesProvider("claude-opus-4-7", config=fake_provider_config)
    text = f"@count 3 {tag()}"
    thinking = ThinkingOptions(effort="xhigh", display="summarized")
    request = ModelRequest(
        model="claude-opus-4-7", conversation=[UserItem(text=text)], thinking=thinking
    )

    events = await collect(provider, request)

    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == THINKING
    assert text_of(events) == count_to(3)
    (sent,) = fake_provider.requests_for(text)
    assert sent.body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert sent.body["output_config"] == {"effort": "xhigh"}
    assert "temperature" not in sent.body


async def test_a_tool_loop_goes_on_with_thinking_when_its_signed_thinking_is_passed_back(
    fake_provider_config: ProviderConfig, fake_provider: FakeProvider
) -> None:
    from perdure.domain.conversation import SignedReasoning
    from perdure.testing.fakeprovider.rules import sign_thinking

    provider = AnthropicMessagesProvider("claude-opus-4-7", config=fake_provider_config)
    text = f"@count 2 {tag()}"
    signed = SignedReasoning(text="", signature=sign_thinking(""))
    conversation = [
        UserItem(text=text),
        AssistantItem(reasoning=[signed], tool_calls=[ToolCall(id="t1", name="search")]),
        ToolResultItem(tool_call_id="t1", tool_name="search", output="found"),
    ]
    request = ModelRequest(
        model="claude-opus-4-7",
        conversation=conversation,
        tools=[SEARCH],
        thinking=ThinkingOptions(effort="low"),
    )

    events = await collect(provider, request)

    assert isinstance(events[-1], Finish)
    (sent,) = fake_provider.requests_for(text)
    assert sent.body["thinking"] == {"type": "adaptive"}
    assert sent.body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "",
        "signature": sign_thinking(""),
    }


async def test_a_provider_error_is_raised_as_it_is_not_as_its_own_cause(
    provider: AnthropicMessagesProvider,
) -> None:
    _, error = await collect_until_error(provider, ask(f"@fail 400 {tag()}"))

    assert error.__cause__ is not error  # a cause cycle made Temporal's traceback recurse
