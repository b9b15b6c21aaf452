"""The fake provider: its directives and wire formats, seen through the official SDKs and httpx."""

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from openai.types.responses import ResponseCreatedEvent, ResponseStreamEvent

from activities.providers.continuation_modes import CONTINUE_INSTRUCTION
from perdure.testing.fakeprovider.anthropic import THINKING, THOUGHT_TOKENS
from perdure.testing.fakeprovider.directives import Fault, ToolDirective, parse
from perdure.testing.fakeprovider.script import (
    MARKDOWN_SAMPLE,
    continuation,
    make_plan,
    repeating_continuation,
    words,
)
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.fakeprovider.transcript import Transcript
from tests.fakeprovider_fixtures import count_to, tag
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]


def openai_sdk(fake: FakeProvider) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="k", base_url=fake.openai_base_url, max_retries=0)


def anthropic_sdk(fake: FakeProvider) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key="k", base_url=fake.anthropic_base_url, max_retries=0)


async def drained(stream: Any) -> list[Any]:
    """Every event of an SDK stream, the stream closed after, also when it raises: one left at
    its last event keeps its HTTP body generators suspended for the garbage collector, which
    may finalize them in another thread (docs/testing.md, "Known fragilities")."""
    async with stream:
        return [event async for event in stream]


async def chat_deltas(
    fake: FakeProvider, messages: list[Any], base_url: str | None = None, **extra: Any
) -> list[str]:
    client = openai.AsyncOpenAI(
        api_key="k", base_url=base_url or fake.openai_base_url, max_retries=0
    )
    stream = await client.chat.completions.create(
        model="fake", messages=messages, stream=True, extra_body=extra or None
    )
    return [
        c.choices[0].delta.content
        for c in await drained(stream)
        if c.choices and c.choices[0].delta.content
    ]


async def anthropic_text(fake: FakeProvider, messages: list[Any], **fields: Any) -> str:
    stream = await anthropic_sdk(fake).messages.create(
        model="claude-haiku-4-5",
        max_tokens=fields.pop("max_tokens", 100),
        messages=messages,
        stream=True,
        **fields,
    )
    return "".join(
        [
            e.delta.text
            for e in await drained(stream)
            if e.type == "content_block_delta" and e.delta.type == "text_delta"
        ]
    )


def created_id(events: list[ResponseStreamEvent]) -> str:
    """The response id carried by the first event of a Responses stream."""
    first = events[0]
    assert isinstance(first, ResponseCreatedEvent)
    return first.response.id


def error_message(error: anthropic.APIStatusError) -> str:
    """`error.message` of Anthropic's error body."""
    body = error.body
    assert isinstance(body, dict) and body["type"] == "error"
    return str(body["error"]["message"])


def tool_call(call_id: str, name: str = "lookup") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


# -- directives ------------------------------------------------------------------------------


def test_directives_are_parsed_out_of_the_text() -> None:
    directives = parse('hello @count 3 @delay 5 @ttft 7 world\n@tool get_weather {"city": "Paris"}')
    assert directives.text == "hello world"
    assert (directives.count, directives.delay_ms, directives.ttft_ms) == (3, 5, 7)
    assert directives.tools == [ToolDirective("get_weather", {"city": "Paris"})]


def test_fault_directives_keep_their_order_options_and_budgets() -> None:
    directives = parse("@fail 429 retry-after=2 x3 @disconnect_after 4 @stall_after 1 x2")
    assert directives.faults == [
        Fault(kind="fail", status=429, retry_after="2", times=3),
        Fault(kind="disconnect", after=4),
        Fault(kind="stall", after=1, times=2),
    ]


def test_cached_is_parsed_out_of_the_text_and_at_most_the_input_tokens() -> None:
    text = "@cached 50 hello"
    directives = parse(text)

    plan = make_plan(Transcript(user_text=text, input_tokens=3), directives)

    assert (directives.text, directives.cached_tokens) == ("hello", 50)
    assert plan.cached_input_tokens == 3


def test_unknown_at_words_stay_in_the_text() -> None:
    assert parse("ping @alice about it").text == "ping @alice about it"


def test_continuation_cuts_mid_word_at_the_same_boundaries() -> None:
    chunks = words(count_to(15))
    assert continuation(chunks, "1 2 3 4 5 6 7 8 9 10 11 1") == ["2", " 13", " 14", " 15"]
    assert continuation(chunks, "1 2 3") == [" 4", *chunks[4:]]


# -- answers ---------------------------------------------------------------------------------


async def test_echo_answer_streams_one_word_per_delta(fake_provider: FakeProvider) -> None:
    deltas = await chat_deltas(fake_provider, [{"role": "user", "content": "hello  there world"}])
    assert deltas == ["You", " said:", " hello", " there", " world"]


async def test_count_streams_numbers_with_leading_spaces(fake_provider: FakeProvider) -> None:
    deltas = await chat_deltas(fake_provider, [{"role": "user", "content": "@count 4"}])
    assert deltas == ["1", " 2", " 3", " 4"]


async def test_markdown_streams_the_sample_word_by_word_with_its_line_breaks(
    fake_provider: FakeProvider,
) -> None:
    deltas = await chat_deltas(fake_provider, [{"role": "user", "content": "show me @markdown"}])
    assert "".join(deltas) == MARKDOWN_SAMPLE
    assert len(deltas) == len(words(MARKDOWN_SAMPLE))


async def test_anthropic_prefill_continues_exactly_where_it_ends(
    fake_provider: FakeProvider,
) -> None:
    prefill = "1 2 3 4 5 6 7 8 9 10 11 1"
    messages: list[Any] = [
        {"role": "user", "content": "@count 15"},
        {"role": "assistant", "content": prefill},
    ]
    assert prefill + await anthropic_text(fake_provider, messages) == count_to(15)


async def test_chat_answers_a_trailing_assistant_message_afresh(
    fake_provider: FakeProvider,
) -> None:
    messages = [
        {"role": "user", "content": "@count 5"},
        {"role": "assistant", "content": "1 2 3"},
    ]
    assert "".join(await chat_deltas(fake_provider, messages)) == count_to(5)


async def test_a_model_asked_to_continue_repeats_its_last_words_first(
    fake_provider: FakeProvider,
) -> None:
    messages = [
        {"role": "user", "content": "@count 9"},
        {"role": "assistant", "content": "1 2 3 4 5 6 1"},
        {"role": "user", "content": CONTINUE_INSTRUCTION},
    ]
    assert "".join(await chat_deltas(fake_provider, messages)) == count_to(9)
    messages[1]["content"] = "1 2 3 4 5"
    assert "".join(await chat_deltas(fake_provider, messages)) == "4 5 6 7 8 9"


def test_the_repeat_restarts_the_word_the_partial_ends_in() -> None:
    chunks = words(count_to(12))
    assert repeating_continuation(chunks, "1 2 3 4 5 6 7 8 9 10 1") == ["10", " 11", " 12"]
    assert repeating_continuation(chunks, "1") == ["1", *chunks[1:]]
    assert repeating_continuation(chunks, "1 2 9") == chunks  # not a partial of this answer


async def test_tools_are_called_one_step_at_a_time(fake_provider: FakeProvider) -> None:
    text = '@tool first {"a": 1}\n@tool second {}'
    client = openai_sdk(fake_provider)
    first = await client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": text}], stream=True
    )
    calls = [c for c in await drained(first) if c.choices and c.choices[0].delta.tool_calls]
    opening = calls[0].choices[0].delta.tool_calls
    assert opening and opening[0].function
    assert opening[0].function.name == "first"
    call_id = opening[0].id
    assert call_id
    messages: list[Any] = [
        {"role": "user", "content": text},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "first", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "one"},
    ]
    second = await client.chat.completions.create(model="fake", messages=messages, stream=True)
    names = [
        call.function.name
        for c in await drained(second)
        if c.choices
        for call in c.choices[0].delta.tool_calls or []
        if call.function and call.function.name
    ]
    assert names == ["second"]


async def test_parallel_calls_every_pending_tool_at_once(fake_provider: FakeProvider) -> None:
    stream = await anthropic_sdk(fake_provider).messages.create(
        model="claude-haiku-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": "@parallel\n@tool a {}\n@tool b {}"}],
        stream=True,
    )
    names = [
        event.content_block.name
        for event in await drained(stream)
        if event.type == "content_block_start" and event.content_block.type == "tool_use"
    ]
    assert names == ["a", "b"]


async def test_tool_results_are_quoted_in_the_answer(fake_provider: FakeProvider) -> None:
    messages = [
        {"role": "user", "content": "@tool lookup {}"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}],
        },
    ]
    assert await anthropic_text(fake_provider, messages) == "Tool lookup returned: 42"


async def test_max_tokens_truncates_and_finishes_with_length(fake_provider: FakeProvider) -> None:
    stream = await openai_sdk(fake_provider).chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "@count 10"}], max_tokens=3, stream=True
    )
    chunks = await drained(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "1 2 3"
    assert chunks[-1].choices[0].finish_reason == "length"


# -- timing and observation ------------------------------------------------------------------


async def test_ttft_and_first_delta_time_are_recorded(fake_provider: FakeProvider) -> None:
    text = f"@count 2 @ttft 150 {tag()}"
    await chat_deltas(fake_provider, [{"role": "user", "content": text}])
    (request,) = fake_provider.requests_for(text)
    assert request.first_delta_at is not None
    assert request["first_delta_at"] - request.started_at >= 0.15


async def test_delay_paces_every_delta(fake_provider: FakeProvider) -> None:
    started = time.monotonic()
    await chat_deltas(fake_provider, [{"role": "user", "content": f"@count 5 @delay 30 {tag()}"}])
    assert time.monotonic() - started >= 0.15


async def test_generated_deltas_are_counted_per_user_text(fake_provider: FakeProvider) -> None:
    text = f"@count 6 {tag()}"
    before = fake_provider.generated_deltas
    await chat_deltas(fake_provider, [{"role": "user", "content": text}])
    await chat_deltas(fake_provider, [{"role": "user", "content": text}])
    assert fake_provider.deltas_for(text) == 12
    assert fake_provider.generated_deltas - before >= 12


# -- faults ----------------------------------------------------------------------------------


async def test_fail_returns_the_provider_error_body_and_retry_after(
    fake_provider: FakeProvider,
) -> None:
    body = {"model": "m", "max_tokens": 10, "stream": True}
    body["messages"] = [{"role": "user", "content": f"@fail 429 retry-after=3 {tag()}"}]
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{fake_provider.anthropic_base_url}/v1/messages", json=body)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert response.json()["error"]["type"] == "rate_limit_error"


async def test_a_fault_hits_only_its_first_k_requests(fake_provider: FakeProvider) -> None:
    text = f"@count 2 @fail 503 x2 {tag()}"
    client = openai_sdk(fake_provider)
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(
                model="fake", messages=[{"role": "user", "content": text}], stream=True
            )
    assert await chat_deltas(fake_provider, [{"role": "user", "content": text}]) == ["1", " 2"]


async def test_faults_are_spent_in_order(fake_provider: FakeProvider) -> None:
    text = f"@count 5 @fail 500 @disconnect_after 2 {tag()}"
    messages = [{"role": "user", "content": text}]
    with pytest.raises(openai.InternalServerError):
        await chat_deltas(fake_provider, messages)
    with pytest.raises(openai.APIConnectionError):
        await chat_deltas(fake_provider, messages)
    assert "".join(await chat_deltas(fake_provider, messages)) == count_to(5)


async def test_disconnect_drops_the_connection_without_a_terminator(
    fake_provider: FakeProvider,
) -> None:
    body = {
        "model": "m",
        "stream": True,
        "messages": [{"role": "user", "content": f"@count 9 @disconnect_after 3 {tag()}"}],
    }
    received: list[str] = []
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            async with http.stream(
                "POST", f"{fake_provider.openai_base_url}/chat/completions", json=body
            ) as response:
                async for line in response.aiter_lines():
                    received.append(line)
    contents = [
        json.loads(line[6:])["choices"][0]["delta"].get("content")
        for line in received
        if line.startswith("data: {")
    ]
    assert [c for c in contents if c] == ["1", " 2", " 3"]
    assert "data: [DONE]" not in received


async def test_stall_keeps_the_connection_open_and_silent(fake_provider: FakeProvider) -> None:
    body = {
        "model": "m",
        "stream": True,
        "messages": [{"role": "user", "content": f"@count 9 @stall_after 2 {tag()}"}],
    }
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.3)) as http:
        with pytest.raises(httpx.ReadTimeout):
            async with http.stream(
                "POST", f"{fake_provider.openai_base_url}/chat/completions", json=body
            ) as response:
                async for _ in response.aiter_lines():
                    pass


async def test_anthropic_midstream_error_is_an_error_event(fake_provider: FakeProvider) -> None:
    stream = await anthropic_sdk(fake_provider).messages.create(
        model="claude-haiku-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": f"@count 5 @midstream_error 2 {tag()}"}],
        stream=True,
    )
    with pytest.raises(anthropic.APIStatusError) as caught:
        for _ in await drained(stream):
            pass
    assert caught.value.type == "overloaded_error"


async def test_reject_prefill_refuses_requests_with_a_prefill(fake_provider: FakeProvider) -> None:
    text = "@count 3 @reject_prefill"
    assert await anthropic_text(fake_provider, [{"role": "user", "content": text}]) == "1 2 3"
    with pytest.raises(
        anthropic.BadRequestError, match="does not support assistant message prefill"
    ):
        await anthropic_text(
            fake_provider,
            [{"role": "user", "content": text}, {"role": "assistant", "content": "1"}],
        )


async def test_anthropic_refuses_a_prefill_ending_in_whitespace(
    fake_provider: FakeProvider,
) -> None:
    with pytest.raises(anthropic.BadRequestError, match="trailing whitespace"):
        await anthropic_sdk(fake_provider).messages.create(
            model="claude-haiku-4-5",
            max_tokens=100,
            messages=[
                {"role": "user", "content": "@count 3"},
                {"role": "assistant", "content": "1 "},
            ],
            stream=True,
        )


# -- Responses background mode ---------------------------------------------------------------


async def test_responses_resume_streams_only_events_after_the_cursor(
    fake_provider: FakeProvider,
) -> None:
    client = openai_sdk(fake_provider)
    stream = await client.responses.create(
        model="fake", input=f"@count 8 @delay 10 {tag()}", stream=True, background=True, store=True
    )
    seen = []
    async with stream:
        async for event in stream:
            seen.append(event)
            if event.type == "response.output_text.delta":
                break
    resumed = await client.responses.retrieve(
        created_id(seen), stream=True, starting_after=seen[-1].sequence_number
    )
    rest = await drained(resumed)
    numbers = [event.sequence_number for event in seen + rest]
    assert numbers == list(range(len(numbers)))
    deltas = [e.delta for e in seen + rest if e.type == "response.output_text.delta"]
    assert "".join(deltas) == count_to(8)
    assert rest[-1].type == "response.completed"


async def test_responses_keep_generating_while_nobody_listens(fake_provider: FakeProvider) -> None:
    client = openai_sdk(fake_provider)
    # A first token 3 s away: the retrieve right after the create comes before it, even on a
    # loaded machine (0.5 s did not, beside a CI run).
    response = await client.responses.create(
        model="fake", input=f"@count 5 @ttft 3000 {tag()}", background=True, store=True
    )
    assert (await client.responses.retrieve(response.id)).status in ("queued", "in_progress")
    async with asyncio.timeout(15):
        while (finished := await client.responses.retrieve(response.id)).status != "completed":
            await asyncio.sleep(0.1)
    assert finished.output_text == count_to(5)


async def test_responses_cancel_stops_a_background_response(fake_provider: FakeProvider) -> None:
    client = openai_sdk(fake_provider)
    response = await client.responses.create(
        model="fake", input=f"@count 50 @delay 50 {tag()}", background=True, store=True
    )
    cancelled = await client.responses.cancel(response.id)
    assert cancelled.status == "cancelled"
    again = await client.responses.cancel(response.id)
    assert again.status == "cancelled"
    assert (await client.responses.retrieve(response.id)).status == "cancelled"


async def test_responses_cancel_answers_the_final_response_once_finished(
    fake_provider: FakeProvider,
) -> None:
    client = openai_sdk(fake_provider)
    response = await client.responses.create(
        model="fake", input=f"@count 2 {tag()}", background=True, store=True
    )

    async def finished() -> bool:
        return (await client.responses.retrieve(response.id)).status == "completed"

    await eventually(finished, what="the background response finished")
    assert (await client.responses.cancel(response.id)).status == "completed"


async def test_responses_cancel_refuses_a_response_not_in_background(
    fake_provider: FakeProvider,
) -> None:
    client = openai_sdk(fake_provider)
    stream = await client.responses.create(model="fake", input="@count 2", stream=True)
    events = await drained(stream)
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.cancel(created_id(events))
    assert caught.value.body == {
        "message": "Cannot cancel a synchronous response.",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


async def test_responses_a_cancelled_response_stream_ends(fake_provider: FakeProvider) -> None:
    client = openai_sdk(fake_provider)
    stream = await client.responses.create(
        model="fake", input=f"@count 40 @delay 20 {tag()}", stream=True, background=True
    )
    seen: list[ResponseStreamEvent] = []
    async with stream:
        async for event in stream:
            seen.append(event)
            if event.type == "response.output_text.delta" and event.delta == "1":
                await client.responses.cancel(created_id(seen))
    assert seen[-1].type == "response.output_text.delta"
    resumed = await client.responses.retrieve(created_id(seen), stream=True, starting_after=0)
    assert "response.completed" not in [event.type for event in await drained(resumed)]


async def test_responses_background_without_store_is_refused(fake_provider: FakeProvider) -> None:
    with pytest.raises(openai.BadRequestError, match="Background mode requires store=true"):
        await openai_sdk(fake_provider).responses.create(
            model="fake", input="@count 2", background=True, store=False
        )


async def test_responses_refuse_an_unknown_parameter(fake_provider: FakeProvider) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await openai_sdk(fake_provider).responses.create(
            model="fake", input="hi", stream=True, extra_body={"prefix": True}
        )
    assert caught.value.body == {
        "message": "Unknown parameter: 'prefix'.",
        "type": "invalid_request_error",
        "param": "prefix",
        "code": "unknown_parameter",
    }


async def test_responses_refuse_a_function_call_without_output(
    fake_provider: FakeProvider,
) -> None:
    items: list[Any] = [
        {"type": "message", "role": "user", "content": "@tool lookup {}"},
        {"type": "function_call", "call_id": "call_7", "name": "lookup", "arguments": "{}"},
    ]
    with pytest.raises(openai.BadRequestError, match="No tool output found for function call"):
        await openai_sdk(fake_provider).responses.create(model="fake", input=items, stream=True)


async def test_responses_answer_a_trailing_assistant_message_afresh(
    fake_provider: FakeProvider,
) -> None:
    items: list[Any] = [
        {"type": "message", "role": "user", "content": "@count 4"},
        {"type": "message", "role": "assistant", "content": "1 2"},
    ]
    stream = await openai_sdk(fake_provider).responses.create(
        model="fake", input=items, stream=True
    )
    deltas = [e.delta for e in await drained(stream) if e.type == "response.output_text.delta"]
    assert "".join(deltas) == count_to(4)


# -- Chat Completions: only what the real API accepts -----------------------------------------


async def test_chat_refuses_tool_calls_without_tool_messages(fake_provider: FakeProvider) -> None:
    messages = [
        {"role": "user", "content": "@tool lookup {}"},
        {"role": "assistant", "tool_calls": [tool_call("call_a"), tool_call("call_b")]},
        {"role": "tool", "tool_call_id": "call_a", "content": "one"},
        {"role": "user", "content": "and?"},
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        await chat_deltas(fake_provider, messages)
    assert caught.value.body == {
        "message": (
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            "response messages: call_b"
        ),
        "type": "invalid_request_error",
        "param": "messages.[3].role",
        "code": None,
    }


async def test_chat_refuses_a_tool_message_that_answers_no_call(
    fake_provider: FakeProvider,
) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_x", "content": "one"},
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        await chat_deltas(fake_provider, messages)
    assert caught.value.body == {
        "message": (
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
            "message with 'tool_calls'."
        ),
        "type": "invalid_request_error",
        "param": "messages.[1].role",
        "code": None,
    }


async def test_chat_refuses_a_tool_message_for_another_call(fake_provider: FakeProvider) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [tool_call("call_a")]},
        {"role": "tool", "tool_call_id": "call_z", "content": "one"},
    ]
    with pytest.raises(openai.BadRequestError, match="'tool_call_id' of 'call_z' not found"):
        await chat_deltas(fake_provider, messages)


async def test_chat_refuses_an_unrecognized_argument(fake_provider: FakeProvider) -> None:
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError) as caught:
        await chat_deltas(fake_provider, messages, continue_final_message=True)
    assert caught.value.body == {
        "message": "Unrecognized request argument supplied: continue_final_message",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


async def test_vllm_continues_the_final_message_when_asked(fake_provider: FakeProvider) -> None:
    messages = [
        {"role": "user", "content": "@count 6"},
        {"role": "assistant", "content": "1 2 3"},
    ]
    url = fake_provider.vllm_base_url
    vllm = {"continue_final_message": True, "add_generation_prompt": False}
    assert "".join(await chat_deltas(fake_provider, messages, url, **vllm)) == " 4 5 6"
    assert "".join(await chat_deltas(fake_provider, messages, url)) == count_to(6)


async def test_vllm_refuses_continue_final_message_with_a_generation_prompt(
    fake_provider: FakeProvider,
) -> None:
    messages = [{"role": "user", "content": "@count 6"}, {"role": "assistant", "content": "1"}]
    with pytest.raises(openai.BadRequestError, match="Cannot set both `continue_final_message`"):
        await chat_deltas(
            fake_provider, messages, fake_provider.vllm_base_url, continue_final_message=True
        )


async def test_deepseek_continues_a_prefix_message(fake_provider: FakeProvider) -> None:
    messages: list[Any] = [
        {"role": "user", "content": "@count 6"},
        {"role": "assistant", "content": "1 2 3", "prefix": True},
    ]
    url = fake_provider.deepseek_base_url
    assert "".join(await chat_deltas(fake_provider, messages, url)) == " 4 5 6"
    del messages[1]["prefix"]
    assert "".join(await chat_deltas(fake_provider, messages, url)) == count_to(6)


# -- Anthropic Messages: only what the real API accepts ---------------------------------------


async def test_anthropic_refuses_tool_use_without_a_result_next(
    fake_provider: FakeProvider,
) -> None:
    messages: list[Any] = [
        {"role": "user", "content": "@tool lookup {}"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}],
        },
        {"role": "user", "content": "well?"},
    ]
    with pytest.raises(anthropic.BadRequestError) as caught:
        await anthropic_text(fake_provider, messages)
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"] == {
        "type": "invalid_request_error",
        "message": (
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately "
            "after: t1. Each `tool_use` block must have a corresponding `tool_result` block in "
            "the next message."
        ),
    }


async def test_anthropic_refuses_a_tool_result_without_its_tool_use(
    fake_provider: FakeProvider,
) -> None:
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}]},
    ]
    with pytest.raises(anthropic.BadRequestError, match="unexpected `tool_use_id` found"):
        await anthropic_text(fake_provider, messages)


async def test_anthropic_streams_a_signed_thinking_block_first(fake_provider: FakeProvider) -> None:
    stream = await anthropic_sdk(fake_provider).messages.create(
        model="claude-haiku-4-5",
        max_tokens=4096,
        thinking={"type": "enabled", "budget_tokens": 2048},
        messages=[{"role": "user", "content": "@count 2"}],
        stream=True,
    )
    events = await drained(stream)
    starts = [e.content_block.type for e in events if e.type == "content_block_start"]
    assert starts == ["thinking", "text"]
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    thinking = [d.thinking for d in deltas if d.type == "thinking_delta"]
    assert "".join(thinking) == THINKING
    signature = next(
        i
        for i, e in enumerate(events)
        if e.type == "content_block_delta" and e.delta.type == "signature_delta"
    )
    assert [d.type for d in deltas].index("signature_delta") == len(thinking)
    assert events[signature + 1].type == "content_block_stop"


async def test_anthropic_refuses_a_prefill_with_thinking(fake_provider: FakeProvider) -> None:
    messages: list[Any] = [
        {"role": "user", "content": "@count 5"},
        {"role": "assistant", "content": "1 2"},
    ]
    with pytest.raises(anthropic.BadRequestError) as caught:
        await anthropic_text(
            fake_provider,
            messages,
            max_tokens=4096,
            thinking={"type": "enabled", "budget_tokens": 1024},
        )
    assert error_message(caught.value).startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`."
    )


async def test_anthropic_with_thinking_needs_the_tool_loops_thinking_block(
    fake_provider: FakeProvider,
) -> None:
    messages: list[Any] = [
        {"role": "user", "content": "@tool lookup {}"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
    ]
    thinking = {"type": "enabled", "budget_tokens": 1024}
    with pytest.raises(anthropic.BadRequestError, match="but found `tool_use`"):
        await anthropic_text(fake_provider, messages, max_tokens=4096, thinking=thinking)
    assert await anthropic_text(fake_provider, messages) == "Tool lookup returned: x"


@pytest.mark.parametrize(
    ("budget", "max_tokens", "message"),
    [
        (
            1000,
            4096,
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        ),
        (4096, 4096, "`max_tokens` must be greater than `thinking.budget_tokens`."),
    ],
)
async def test_anthropic_refuses_a_thinking_budget_the_api_refuses(
    fake_provider: FakeProvider, budget: int, max_tokens: int, message: str
) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        await anthropic_text(
            fake_provider,
            [{"role": "user", "content": "hi"}],
            max_tokens=max_tokens,
            thinking={"type": "enabled", "budget_tokens": budget},
        )
    assert error_message(caught.value).startswith(message)


# -- standalone ------------------------------------------------------------------------------


def test_the_module_runs_standalone_and_prints_its_url_first() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "perdure.testing.fakeprovider", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("FAKE_PROVIDER_URL=http://127.0.0.1:")
        url = line.split("=", 1)[1]
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "@count 2"}]}
        response = httpx.post(f"{url}/v1/chat/completions", json=body)
        assert response.status_code == 200
        assert response.text.endswith("data: [DONE]\n\n")
    finally:
        process.terminate()
        process.wait(timeout=10)


# -- Claude generations, by model id ------------------------------------------------------------


async def anthropic_error(fake: FakeProvider, model: str, **fields: Any) -> str:
    """The message of the 400 the fake answers `fields` with, on `model`."""
    messages = fields.pop("messages", [{"role": "user", "content": "@count 2"}])
    with pytest.raises(anthropic.BadRequestError) as caught:
        await anthropic_sdk(fake).messages.create(
            model=model, max_tokens=4096, messages=messages, stream=True, **fields
        )
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["error"]["type"] == "invalid_request_error"
    return str(body["error"]["message"])


@pytest.mark.parametrize("model", ["claude-sonnet-4-6", "claude-opus-4-7", "claude-sonnet-5"])
async def test_claude_4_6_and_later_refuse_a_prefill(
    fake_provider: FakeProvider, model: str
) -> None:
    messages = [{"role": "user", "content": "@count 5"}, {"role": "assistant", "content": "1 2"}]

    message = await anthropic_error(fake_provider, model, messages=messages)

    assert message == (
        "This model does not support assistant message prefill. The conversation must end "
        "with a user message."
    )


@pytest.mark.parametrize("model", ["claude-opus-4-7", "claude-opus-5"])
async def test_claude_4_7_and_later_refuse_thinking_with_a_budget(
    fake_provider: FakeProvider, model: str
) -> None:
    thinking: Any = {"type": "enabled", "budget_tokens": 2048}

    message = await anthropic_error(fake_provider, model, thinking=thinking)

    assert message.startswith('"thinking.type.enabled" is not supported for this model.')


async def test_claude_before_4_6_refuses_adaptive_thinking(fake_provider: FakeProvider) -> None:
    message = await anthropic_error(
        fake_provider, "claude-haiku-4-5", thinking={"type": "adaptive"}
    )

    assert "adaptive" in message


async def test_claude_4_6_refuses_the_xhigh_effort(fake_provider: FakeProvider) -> None:
    message = await anthropic_error(
        fake_provider,
        "claude-sonnet-4-6",
        thinking={"type": "adaptive"},
        output_config={"effort": "xhigh"},
    )

    assert "xhigh" in message


async def test_claude_4_7_refuses_sampling_parameters(fake_provider: FakeProvider) -> None:
    message = await anthropic_error(
        fake_provider, "claude-opus-4-7", extra_body={"temperature": 0.2}
    )

    assert message == "`temperature` is deprecated for this model."


async def test_with_thinking_on_temperature_may_only_be_1(fake_provider: FakeProvider) -> None:
    message = await anthropic_error(
        fake_provider,
        "claude-haiku-4-5",
        thinking={"type": "enabled", "budget_tokens": 2048},
        extra_body={"temperature": 0.5},
    )

    assert message.startswith("`temperature` may only be set to 1 when thinking is enabled.")


async def thinking_of(fake: FakeProvider, model: str, thinking: Any) -> tuple[str, list[str]]:
    """The streamed thinking text and the signatures of a `@count 2` answer."""
    stream = await anthropic_sdk(fake).messages.create(
        model=model,
        max_tokens=4096,
        thinking=thinking,
        messages=[{"role": "user", "content": "@count 2"}],
        stream=True,
    )
    deltas = [e.delta for e in await drained(stream) if e.type == "content_block_delta"]
    text = "".join(d.thinking for d in deltas if d.type == "thinking_delta")
    return text, [d.signature for d in deltas if d.type == "signature_delta"]


async def test_claude_4_7_omits_the_thinking_text_by_default_but_signs_the_block(
    fake_provider: FakeProvider,
) -> None:
    text, signatures = await thinking_of(fake_provider, "claude-opus-4-7", {"type": "adaptive"})

    assert text == ""
    assert len(signatures) == 1


async def test_a_summarized_display_shows_claude_4_7s_thinking(
    fake_provider: FakeProvider,
) -> None:
    shown: Any = {"type": "adaptive", "display": "summarized"}

    text, _ = await thinking_of(fake_provider, "claude-opus-4-7", shown)

    assert text == THINKING


async def test_claude_4_6_shows_its_adaptive_thinking_by_default(
    fake_provider: FakeProvider,
) -> None:
    text, _ = await thinking_of(fake_provider, "claude-sonnet-4-6", {"type": "adaptive"})

    assert text == THINKING


async def test_a_thinking_block_passed_back_must_be_exactly_as_signed(
    fake_provider: FakeProvider,
) -> None:
    from perdure.testing.fakeprovider.rules import sign_thinking

    def history(thinking: str, signature: str) -> Any:
        return [
            {"role": "user", "content": "@count 2"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": thinking, "signature": signature},
                    {"type": "text", "text": "1 2"},
                ],
            },
            {"role": "user", "content": "@count 3"},
        ]

    signed = sign_thinking(THINKING)
    accepted = await anthropic_text(fake_provider, history(THINKING, signed))
    edited = await anthropic_error(
        fake_provider, "claude-haiku-4-5", messages=history(THINKING + " ", signed)
    )

    assert accepted == "1 2 3"
    assert edited == "messages.1.content.0: Invalid `signature` in `thinking` block"


# -- OpenAI reasoning, by model id --------------------------------------------------------------


async def test_an_openai_model_without_reasoning_refuses_an_effort(
    fake_provider: FakeProvider,
) -> None:
    client = openai.AsyncOpenAI(api_key="k", base_url=fake_provider.openai_base_url, max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(
            model="gpt-4.1-mini", input="@count 2", reasoning={"effort": "low"}, stream=True
        )

    assert caught.value.code == "unsupported_parameter"
    assert caught.value.param == "reasoning.effort"
    assert "'reasoning.effort' is not supported with this model" in caught.value.message


async def test_an_openai_reasoning_model_refuses_an_effort_it_does_not_take(
    fake_provider: FakeProvider,
) -> None:
    client = openai.AsyncOpenAI(api_key="k", base_url=fake_provider.openai_base_url, max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(
            model="gpt-5.1",
            messages=[{"role": "user", "content": "@count 2"}],
            reasoning_effort="xhigh",
            stream=True,
        )

    assert caught.value.code == "unsupported_value"
    assert "Supported values are: 'none', 'low', 'medium', and 'high'." in caught.value.message


async def test_a_reasoning_request_streams_a_reasoning_item_with_its_summary_when_asked(
    fake_provider: FakeProvider,
) -> None:
    client = openai.AsyncOpenAI(api_key="k", base_url=fake_provider.openai_base_url, max_retries=0)
    stream = await client.responses.create(
        model="gpt-5.2",
        input="@count 2",
        reasoning={"effort": "low", "summary": "auto"},
        stream=True,
    )
    events = await drained(stream)

    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [item.type for item in done] == ["reasoning", "message"]
    assert done[0].id.startswith("rs_")
    summary = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
    assert summary == THINKING


async def test_a_reference_to_an_item_never_stored_is_a_404(fake_provider: FakeProvider) -> None:
    client = openai.AsyncOpenAI(api_key="k", base_url=fake_provider.openai_base_url, max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        await client.responses.create(
            model="gpt-5.2",
            input=[
                {"type": "message", "role": "user", "content": "@count 2"},
                {"type": "item_reference", "id": "rs_never"},
            ],
            stream=True,
        )

    assert "Item with id 'rs_never' not found." in caught.value.message


# -- usage, as each API reports it --------------------------------------------------------------


async def final_chat_usage(fake: FakeProvider, **fields: Any) -> dict[str, Any]:
    """The usage of the chunk a streamed chat completion ends with (`choices: []`), as sent."""
    stream = await openai_sdk(fake).chat.completions.create(
        stream=True, stream_options={"include_usage": True}, **fields
    )
    chunks = await drained(stream)
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert all(chunk.usage is None for chunk in chunks[:-1])
    usage: dict[str, Any] = chunks[-1].usage.model_dump(exclude_unset=True)
    return usage


async def test_chat_usage_counts_cached_prompt_tokens_in_the_prompt_and_details_them(
    fake_provider: FakeProvider,
) -> None:
    messages = [{"role": "user", "content": "@cached 3 @count 2"}]

    usage = await final_chat_usage(fake_provider, model="gpt-4.1-mini", messages=messages)

    assert usage == {
        "prompt_tokens": 4,
        "completion_tokens": 2,
        "total_tokens": 6,
        "prompt_tokens_details": {"cached_tokens": 3, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


async def test_a_chat_reasoning_request_counts_its_hidden_reasoning_in_completion_tokens(
    fake_provider: FakeProvider,
) -> None:
    messages = [{"role": "user", "content": "@count 2"}]

    usage = await final_chat_usage(
        fake_provider, model="gpt-5.2", messages=messages, reasoning_effort="low"
    )

    assert usage["completion_tokens"] == 2 + THOUGHT_TOKENS
    assert usage["completion_tokens_details"]["reasoning_tokens"] == THOUGHT_TOKENS
    assert usage["total_tokens"] == 2 + 2 + THOUGHT_TOKENS


async def test_responses_usage_details_cached_input_and_reasoning_tokens(
    fake_provider: FakeProvider,
) -> None:
    stream = await openai_sdk(fake_provider).responses.create(
        model="gpt-5.2", input="@cached 3 @count 2", reasoning={"effort": "low"}, stream=True
    )
    events = await drained(stream)

    assert events[-1].type == "response.completed"
    assert events[-1].response.usage is not None
    assert events[-1].response.usage.model_dump(exclude_unset=True) == {
        "input_tokens": 4,
        "input_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 0},
        "output_tokens": 2 + THOUGHT_TOKENS,
        "output_tokens_details": {"reasoning_tokens": THOUGHT_TOKENS},
        "total_tokens": 4 + 2 + THOUGHT_TOKENS,
    }


async def test_anthropic_input_tokens_leave_out_cache_reads_at_start_and_in_the_cumulative_end(
    fake_provider: FakeProvider,
) -> None:
    stream = await anthropic_sdk(fake_provider).messages.create(
        model="claude-haiku-4-5",
        max_tokens=4096,
        thinking={"type": "enabled", "budget_tokens": 2048},
        messages=[{"role": "user", "content": "@cached 3 @count 2"}],
        stream=True,
    )
    events = await drained(stream)

    start = next(e for e in events if e.type == "message_start")
    end = next(e for e in events if e.type == "message_delta")
    input_counts = {
        "input_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 3,
    }
    assert start.message.usage.model_dump(exclude_unset=True) == {
        **input_counts,
        "output_tokens": 1,
    }
    assert end.usage.model_dump(exclude_unset=True) == {
        **input_counts,
        "output_tokens": 2 + THOUGHT_TOKENS,
    }
