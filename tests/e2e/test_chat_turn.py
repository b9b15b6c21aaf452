"""A chat turn end to end: gateway → Temporal → model → streamed back, over real HTTP."""

import asyncio
import uuid
from collections.abc import Awaitable
from typing import TypeVar

import httpx
import pytest

from perdure.testing.chat_client import counting, read_stream, send
from tests.waiting import eventually

T = TypeVar("T")


def new_session() -> str:
    return f"chat-{uuid.uuid4().hex[:12]}"


async def test_a_turn_streams_an_ai_sdk_ui_message_stream(http: httpx.AsyncClient) -> None:
    streamed = await send(http, new_session(), "@count 20")

    assert streamed.status == 200
    assert streamed.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.done
    assert streamed.ids == list(range(len(streamed.events)))
    submission = streamed.headers["x-perdure-submission-id"]
    assert streamed.event_ids == [f"{submission}:{seq}" for seq in streamed.ids]
    assert streamed.chunks[0]["type"] == "start"
    assert streamed.chunks[0]["messageId"].startswith("msg_")
    assert streamed.types()[-1] == "finish"
    assert streamed.chunks[-1]["finishReason"] == "stop"
    assert streamed.text() == counting(20)


async def test_the_stored_answer_is_the_reduction_of_the_stream(http: httpx.AsyncClient) -> None:
    session = new_session()
    streamed = await send(http, session, "@count 12", message_id="user-msg-1")

    history = (await http.get(f"/api/chat/{session}/messages")).json()

    assert [m["role"] for m in history] == ["user", "assistant"]
    assert history[0]["id"] == "user-msg-1"
    assert history[1]["id"] == streamed.chunks[0]["messageId"]
    texts = [p["text"] for p in history[1]["parts"] if p["type"] == "text"]
    assert "".join(texts) == counting(12)
    assert history[1]["metadata"]["status"] == "completed"


async def test_a_tool_calling_turn_streams_tool_input_and_output(http: httpx.AsyncClient) -> None:
    streamed = await send(http, new_session(), '@tool calculate {"expression": "6*7"}')

    types = streamed.types()
    assert types.index("tool-input-start") < types.index("tool-input-available")
    assert types.index("tool-input-available") < types.index("tool-output-available")
    available = next(c for c in streamed.chunks if c["type"] == "tool-input-available")
    output = next(c for c in streamed.chunks if c["type"] == "tool-output-available")
    assert available["toolName"] == "calculate"
    assert available["input"] == {"expression": "6*7"}
    assert output["toolCallId"] == available["toolCallId"]
    assert output["output"] == 42
    assert types.count("start-step") == 2
    assert streamed.text() == "Tool calculate returned: 42"


@pytest.mark.parametrize("agent", ["responses", "anthropic"])
async def test_every_provider_api_streams_through_the_gateway(
    http: httpx.AsyncClient, agent: str
) -> None:
    streamed = await send(http, new_session(), "@count 15", agent=agent)

    assert streamed.text() == counting(15)
    assert streamed.types()[-1] == "finish"


async def test_a_dropped_stream_resumes_after_last_event_id_without_gap_or_duplicate(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    first = await send(http, session, "@count 150 @delay 5", stop_at_count=40)
    last_seen = first.ids[-1]

    rest = await read_stream(
        http, "GET", f"/api/chat/{session}/stream", headers={"Last-Event-ID": first.last_event_id}
    )

    assert rest.status == 200
    assert rest.ids[0] == last_seen + 1
    assert first.ids + rest.ids == list(range(len(first.ids) + len(rest.ids)))
    assert first.text() + rest.text() == counting(150)
    assert rest.done


async def test_resume_without_a_cursor_replays_the_whole_message(http: httpx.AsyncClient) -> None:
    session = new_session()
    # 3 s of answer: the replay must reach the turn while it runs (a turn that has ended
    # answers a resume without a cursor with 204).
    first = await send(http, session, "@count 100 @delay 30", stop_after=20)

    replay = await read_stream(http, "GET", f"/api/chat/{session}/stream")

    assert replay.ids[: len(first.ids)] == first.ids
    assert replay.chunks[0] == first.chunks[0]
    assert replay.text() == counting(100)


async def test_resume_with_after_query_matches_last_event_id(http: httpx.AsyncClient) -> None:
    session = new_session()
    first = await send(http, session, "@count 60 @delay 5", stop_after=10)

    rest = await read_stream(http, "GET", f"/api/chat/{session}/stream?after={first.ids[-1]}")

    assert first.text() + rest.text() == counting(60)


async def test_resume_answers_204_when_nothing_is_active(http: httpx.AsyncClient) -> None:
    session = new_session()
    await send(http, session, "@count 3")

    response = await http.get(f"/api/chat/{session}/stream")

    assert response.status_code == 204


async def test_a_cursor_resume_of_a_turn_that_ended_meanwhile_gets_the_rest(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    first = await send(http, session, "@count 30 @delay 5", stop_after=5)
    await wait_idle(http, session)

    # a bare seq (the id format before ids named their turn) still resumes the latest turn
    rest = await read_stream(
        http, "GET", f"/api/chat/{session}/stream", headers={"Last-Event-ID": str(first.ids[-1])}
    )

    assert first.text() + rest.text() == counting(30)
    assert rest.done


async def test_stop_mid_stream_keeps_the_partial_answer_as_aborted(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    stream_task = asyncio.create_task(send(http, session, "@count 400 @delay 10"))
    await wait_for_text(http, session)

    stopped = await http.post(f"/api/chat/{session}/stop")
    streamed = await stream_task

    assert stopped.status_code == 200
    assert stopped.json()["result"] == "stopped"
    assert streamed.types()[-1] == "abort"
    assert streamed.done
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    answer = history[-1]
    assert answer["metadata"]["status"] == "aborted"
    text = "".join(p["text"] for p in answer["parts"] if p["type"] == "text")
    assert text == streamed.text()
    assert 0 < len(text) < len(counting(400))
    assert counting(400).startswith(text)


async def test_two_messages_sent_at_once_run_one_after_the_other_in_order(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    first, second = await asyncio.gather(
        send(http, session, "@count 30 @delay 5", message_id="first"),
        once_recorded(http, session, send(http, session, "@count 5", message_id="second")),
    )

    assert first.text() == counting(30)
    assert second.text() == counting(5)
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    assert [m["id"] for m in history] == [
        "first",
        first.chunks[0]["messageId"],
        "second",
        second.chunks[0]["messageId"],
    ]


async def test_a_repeated_post_attaches_to_the_existing_turn(
    http: httpx.AsyncClient, fake_provider
) -> None:
    session = new_session()
    text = f"@count 40 @delay 5 {uuid.uuid4().hex}"
    first, repeat = await asyncio.gather(
        send(http, session, text, message_id="same-id"),
        send(http, session, text, message_id="same-id"),
    )

    assert first.headers["x-perdure-submission-id"] == repeat.headers["x-perdure-submission-id"]
    assert first.events == repeat.events
    assert len(fake_provider.requests_for(text)) == 1
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    assert len(history) == 2


async def test_an_idempotency_key_header_deduplicates_submissions(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    key = {"Idempotency-Key": uuid.uuid4().hex}
    first = await send(http, session, "@count 4", message_id="a", headers=key)
    again = await send(http, session, "@count 4", message_id="b", headers=key)

    assert first.headers["x-perdure-submission-id"] == again.headers["x-perdure-submission-id"]
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    assert [m["id"] for m in history][0] == "a"
    assert len(history) == 2


async def once_recorded(http: httpx.AsyncClient, session: str, call: Awaitable[T]) -> T:
    """`call`, once the session's first submission is recorded (so it comes second)."""

    async def recorded() -> bool:
        response = await http.get(f"/v1/sessions/{session}/submissions")
        return response.status_code == 200 and response.json()["count"] >= 1

    await eventually(recorded, what=f"a submission recorded in {session}")
    return await call


async def wait_for_text(http: httpx.AsyncClient, session: str) -> None:
    async def streamed_text() -> bool:
        response = await http.get(f"/api/chat/{session}/messages")
        if response.status_code != 200:
            return False
        history = response.json()
        return (
            bool(history)
            and history[-1]["role"] == "assistant"
            and any(p["type"] == "text" and p["text"] for p in history[-1]["parts"])
        )

    await eventually(streamed_text, what=f"text streamed in {session}")


async def wait_idle(http: httpx.AsyncClient, session: str) -> None:
    async def idle() -> bool:
        return bool((await http.get(f"/v1/sessions/{session}")).json()["status"] == "idle")

    await eventually(idle, what=f"session {session} idle")


async def test_a_rate_limited_provider_is_retried_and_the_answer_completes(
    http: httpx.AsyncClient, fake_provider
) -> None:
    text = f"@count 8 @fail 429 retry-after=0.1 x2 {uuid.uuid4().hex[:6]}"

    streamed = await send(http, new_session(), text)

    assert streamed.text() == counting(8)
    assert streamed.types()[-1] == "finish"
    assert [r.status for r in fake_provider.requests_for(text)] == [429, 429, 200]


async def test_a_provider_rejection_ends_the_stream_with_an_error_that_says_why(
    http: httpx.AsyncClient, fake_provider
) -> None:
    session = new_session()
    text = f"@count 8 @fail 400 {uuid.uuid4().hex[:6]}"

    streamed = await send(http, session, text)

    assert streamed.types()[-1] == "error"
    assert "HTTP 400" in streamed.chunks[-1]["errorText"]
    assert "not retryable" in streamed.chunks[-1]["errorText"]
    assert len(fake_provider.requests_for(text)) == 1
    assert (await http.get(f"/v1/sessions/{session}")).json()["status"] == "idle"


async def test_an_unknown_agent_ends_the_turn_with_an_error_naming_the_served_ones(
    http: httpx.AsyncClient,
) -> None:
    streamed = await send(http, new_session(), "@count 3", agent="nobody")

    assert streamed.types()[-1] == "error"
    assert "unknown agent 'nobody'" in streamed.chunks[-1]["errorText"]
    assert "default" in streamed.chunks[-1]["errorText"]
