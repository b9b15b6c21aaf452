"""`openai-responses:<model>`: background mode, cursors and re-attaching, against the fake."""

import openai
import pytest
from openai.types.responses import ResponseCreatedEvent

from activities.providers.base import ModelRequest, ProviderError, ResumeToken
from activities.providers.clients import openai_client
from activities.providers.config import ProviderConfig
from activities.providers.continuation_modes import CONTINUE_INSTRUCTION, INSTRUCTION, RESUME
from activities.providers.openai_responses import OpenAIResponsesProvider, response_input
from perdure.domain.conversation import (
    AssistantItem,
    SignedReasoning,
    ToolCall,
    ToolResultItem,
    ToolSpec,
    UserItem,
)
from perdure.domain.model_rules import ThinkingOptions
from perdure.domain.provider_events import (
    Finish,
    ProviderEvent,
    ReasoningSigned,
    ResponseCursor,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from perdure.testing.fakeprovider.anthropic import THOUGHT_TOKENS
from perdure.testing.fakeprovider.server import FakeProvider
from tests.fakeprovider_fixtures import (
    collect,
    collect_until_error,
    count_to,
    tag,
    text_of,
)
from tests.waiting import eventually


@pytest.fixture(scope="module")
def provider(fake_provider_config: ProviderConfig) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider("fake-model", config=fake_provider_config)


LOOKUP = ToolSpec(name="lookup", description="Look it up", parameters={"type": "object"})


def ask(text: str, **fields: object) -> ModelRequest:
    return ModelRequest(model="fake-model", conversation=[UserItem(text=text)], **fields)


def last_cursor(events: list[ProviderEvent]) -> ResumeToken:
    cursor = [e for e in events if isinstance(e, ResponseCursor)][-1]
    return ResumeToken(response_id=cursor.response_id, sequence_number=cursor.sequence_number)


def test_the_provider_supports_resume(provider: OpenAIResponsesProvider) -> None:
    assert provider.supports_resume is True


async def test_text_streams_with_a_cursor_for_every_event(
    provider: OpenAIResponsesProvider,
) -> None:
    events = await collect(provider, ask("hello world"))
    assert text_of(events) == "You said: hello world"
    cursors = [e.sequence_number for e in events if isinstance(e, ResponseCursor)]
    assert cursors == list(range(len(cursors)))
    assert events[-1] == Finish(
        reason="stop", input_tokens=2, cached_input_tokens=0, output_tokens=4, reasoning_tokens=0
    )


async def test_usage_counts_cached_input_and_reasoning_tokens_as_openai_reports_them(
    provider: OpenAIResponsesProvider,
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


async def test_a_cursor_follows_the_text_it_covers(provider: OpenAIResponsesProvider) -> None:
    events = await collect(provider, ask("@count 3"))
    kinds = [e.kind for e in events if e.kind in ("text", "cursor")]
    for index, kind in enumerate(kinds):
        if kind == "text":
            assert kinds[index + 1] == "cursor"


async def test_a_function_call_is_reported_as_start_deltas_end(
    provider: OpenAIResponsesProvider,
) -> None:
    events = await collect(provider, ask('@tool lookup {"q": "tea"}', tools=[LOOKUP]))
    calls = [e for e in events if isinstance(e, ToolCallStart | ToolCallDelta | ToolCallEnd)]
    start, end = calls[0], calls[-1]
    assert isinstance(start, ToolCallStart) and start.name == "lookup"
    assert end == ToolCallEnd(id=start.id, name="lookup", arguments={"q": "tea"})
    assert isinstance(events[-1], Finish) and events[-1].reason == "tool-calls"


async def test_a_function_call_output_leads_to_the_answer(
    provider: OpenAIResponsesProvider,
) -> None:
    call = ToolCall(id="call_9", name="lookup", arguments={"q": "tea"})
    request = ModelRequest(
        model="fake-model",
        tools=[LOOKUP],
        conversation=[
            UserItem(text='@tool lookup {"q": "tea"}'),
            AssistantItem(tool_calls=[call]),
            ToolResultItem(tool_call_id="call_9", tool_name="lookup", output="green"),
        ],
    )
    assert text_of(await collect(provider, request)) == "Tool lookup returned: green"


async def test_prefill_continuation_completes_the_count_exactly(
    provider: OpenAIResponsesProvider,
) -> None:
    prefill = "1 2 3 4 5 6 7 8 9 10 11 1"
    events = await collect(provider, ask("@count 16", prefill=prefill))
    assert prefill + text_of(events) == count_to(16)


async def test_resume_after_a_disconnect_yields_exactly_the_rest(
    provider: OpenAIResponsesProvider,
    fake_provider: FakeProvider,
) -> None:
    text = f"@count 30 @delay 5 @disconnect_after 8 {tag()}"
    before, error = await collect_until_error(provider, ask(text))
    assert error.retryable
    assert text_of(before) == count_to(8)
    after = await collect(provider, ask(text, resume=last_cursor(before)))
    assert text_of(before) + text_of(after) == count_to(30)
    assert isinstance(after[-1], Finish) and after[-1].reason == "stop"
    assert fake_provider.deltas_for(text) == 30


async def test_resume_from_an_early_cursor_replays_nothing_twice(
    provider: OpenAIResponsesProvider,
) -> None:
    text = f"@count 12 @delay 5 @disconnect_after 6 {tag()}"
    before, _ = await collect_until_error(provider, ask(text))
    cursors = [e for e in before if isinstance(e, ResponseCursor)]
    middle = next(i for i, e in enumerate(before) if e is cursors[4])
    kept = before[: middle + 1]
    after = await collect(provider, ask(text, resume=last_cursor(kept)))
    assert text_of(kept) + text_of(after) == count_to(12)


async def test_resume_after_the_response_finished_server_side(
    provider: OpenAIResponsesProvider, fake_provider: FakeProvider
) -> None:
    text = f"@count 10 @delay 10 @disconnect_after 2 {tag()}"
    before, _ = await collect_until_error(provider, ask(text))
    sdk = openai.AsyncOpenAI(api_key="k", base_url=fake_provider.openai_base_url, max_retries=0)
    response_id = last_cursor(before).response_id

    async def finished() -> bool:
        return (await sdk.responses.retrieve(response_id)).status == "completed"

    await eventually(finished, what="the response finished server side")
    after = await collect(provider, ask(text, resume=last_cursor(before)))
    assert text_of(before) + text_of(after) == count_to(10)


async def test_resume_during_a_function_call_still_ends_the_call(
    provider: OpenAIResponsesProvider,
) -> None:
    text = f'@tool lookup {{"query": "a long query string"}} @disconnect_after 2 {tag()}'
    before, _ = await collect_until_error(provider, ask(text, tools=[LOOKUP]))
    start = next(e for e in before if isinstance(e, ToolCallStart))
    after = await collect(provider, ask(text, tools=[LOOKUP], resume=last_cursor(before)))
    deltas = [e.arguments_delta for e in before + after if isinstance(e, ToolCallDelta)]
    assert "".join(deltas) == '{"query":"a long query string"}'
    end = next(e for e in after if isinstance(e, ToolCallEnd))
    assert end.id == start.id and end.arguments == {"query": "a long query string"}


async def test_a_cancelled_response_cannot_be_resumed(provider: OpenAIResponsesProvider) -> None:
    text = f"@count 50 @delay 20 @disconnect_after 1 {tag()}"
    before, _ = await collect_until_error(provider, ask(text))
    token = last_cursor(before)
    await provider.cancel(token.response_id)
    with pytest.raises(ProviderError, match="cancelled") as caught:
        await collect(provider, ask(text, resume=token))
    assert not caught.value.retryable


async def test_rate_limit_honours_retry_after_ms(provider: OpenAIResponsesProvider) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask(f"@fail 429 retry-after-ms=1500 {tag()}"))
    assert caught.value.retryable and caught.value.retry_after == 1.5


async def test_bad_request_is_not_retryable(provider: OpenAIResponsesProvider) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask(f"@fail 422 {tag()}"))
    assert not caught.value.retryable and caught.value.status == 422


async def test_a_prefill_is_continued_by_instruction_not_as_a_prefill(
    provider: OpenAIResponsesProvider,
    fake_provider: FakeProvider,
) -> None:
    text = f"@count 6 @reject_prefill {tag()}"
    events = await collect(provider, ask(text, prefill="1 2 3"))
    assert "1 2 3" + text_of(events) == count_to(6)
    (request,) = fake_provider.requests_for(text)
    assert request.body["input"][-1] == {
        "type": "message",
        "role": "user",
        "content": CONTINUE_INSTRUCTION,
    }


def test_resume_is_exact_and_the_prefill_fallback_best_effort(
    provider: OpenAIResponsesProvider,
) -> None:
    assert provider.continuation == RESUME and RESUME.exact
    token = ResumeToken(response_id="resp_1", sequence_number=3)
    assert provider.continuation_for(ask("x", resume=token)) == RESUME
    assert provider.continuation_for(ask("x", prefill="y")) == INSTRUCTION
    assert not INSTRUCTION.exact


async def test_cancel_stops_a_background_response_and_is_idempotent(
    provider: OpenAIResponsesProvider,
    fake_provider_config: ProviderConfig,
    fake_provider: FakeProvider,
) -> None:
    text = f"@count 50 @delay 20 @disconnect_after 1 {tag()}"
    before, _ = await collect_until_error(provider, ask(text))
    response_id = last_cursor(before).response_id
    await provider.cancel(response_id)
    await provider.cancel(response_id)
    assert (
        await openai_client(fake_provider_config).responses.retrieve(response_id)
    ).status == "cancelled"
    cancels = [r.status for r in fake_provider.requests_for(text) if r.route == "responses.cancel"]
    assert cancels == [200, 200]


async def test_cancelling_a_finished_response_changes_nothing(
    provider: OpenAIResponsesProvider, fake_provider_config: ProviderConfig
) -> None:
    events = await collect(provider, ask(f"@count 3 {tag()}"))
    response_id = last_cursor(events).response_id
    await provider.cancel(response_id)
    assert (
        await openai_client(fake_provider_config).responses.retrieve(response_id)
    ).status == "completed"


async def test_a_cancel_refused_because_nothing_runs_is_not_an_error(
    provider: OpenAIResponsesProvider, fake_provider_config: ProviderConfig
) -> None:
    client = openai_client(fake_provider_config)
    stream = await client.responses.create(model="m", input=f"@count 2 {tag()}", stream=True)
    created = [event async for event in stream][0]
    assert isinstance(created, ResponseCreatedEvent)
    await provider.cancel(created.response.id)  # 400 "Cannot cancel a synchronous response."


async def test_cancelling_an_unknown_response_is_an_error(
    provider: OpenAIResponsesProvider,
) -> None:
    with pytest.raises(ProviderError) as caught:
        await provider.cancel("resp_does_not_exist")
    assert caught.value.status == 404 and not caught.value.retryable


def test_conversation_becomes_input_items() -> None:
    call = ToolCall(id="call_1", name="lookup", arguments={"q": "x"})
    request = ModelRequest(
        model="m",
        prefill="So",
        conversation=[
            UserItem(text="Find x"),
            AssistantItem(text="Looking.", tool_calls=[call]),
            ToolResultItem(tool_call_id="call_1", tool_name="lookup", output="found"),
        ],
    )
    assert response_input(request) == [
        {"type": "message", "role": "user", "content": "Find x"},
        {"type": "message", "role": "assistant", "content": "Looking."},
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": '{"q":"x"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "found"},
        {"type": "message", "role": "assistant", "content": "So"},
        {"type": "message", "role": "user", "content": CONTINUE_INSTRUCTION},
    ]


async def test_an_effort_and_a_summarized_display_are_sent_as_reasoning(
    provider: OpenAIResponsesProvider, fake_provider: FakeProvider
) -> None:
    text = f"@count 3 {tag()}"
    thinking = ThinkingOptions(effort="xhigh", display="summarized")

    events = await collect(provider, ask(text, thinking=thinking))

    assert text_of(events) == count_to(3)
    (sent,) = fake_provider.requests_for(text)
    assert sent.body["reasoning"] == {"effort": "xhigh", "summary": "auto"}


async def test_a_reasoning_item_is_reported_and_passed_back_by_reference_in_the_tool_loop(
    provider: OpenAIResponsesProvider, fake_provider: FakeProvider
) -> None:
    text = f'@tool lookup {{"q": "x"}} {tag()}'
    thinking = ThinkingOptions(effort="low")
    first = await collect(provider, ask(text, tools=[LOOKUP], thinking=thinking))
    (signed,) = [e for e in first if isinstance(e, ReasoningSigned)]
    (end,) = [e for e in first if isinstance(e, ToolCallEnd)]
    conversation = [
        UserItem(text=text),
        AssistantItem(
            reasoning=[SignedReasoning(item_id=signed.item_id)],
            tool_calls=[ToolCall(id=end.id, name=end.name, arguments=end.arguments)],
        ),
        ToolResultItem(tool_call_id=end.id, tool_name=end.name, output="found"),
    ]

    second = await collect(
        provider,
        ModelRequest(model="gpt-5.2", conversation=conversation, tools=[LOOKUP], thinking=thinking),
    )

    assert signed.item_id is not None and signed.item_id.startswith("rs_")
    assert text_of(second) == "Tool lookup returned: found"
    sent = fake_provider.requests_for(text)[-1].body["input"]
    assert sent[1] == {"type": "item_reference", "id": signed.item_id}
