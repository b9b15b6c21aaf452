"""Stop, error and exhaustion are ordinary endings: every open tool call is settled, the
session takes the next message, and no hook can keep a turn alive or a session claimed."""

import asyncio
import json
import uuid

import httpx
import pytest
from httpx_sse import aconnect_sse
from temporalio.api.enums.v1 import EventType

from perdure.domain.names import turn_workflow_id
from perdure.domain.ui import TERMINAL_CHUNK_TYPES
from perdure.testing.chat_client import chat_body, counting, key_of, send, user_message
from perdure.testing.stack import Stack
from storage.chunks import load_log
from tests.e2e.test_chat_turn import wait_for_text
from tests.waiting import eventually

PROVIDER_AGENTS = ["default", "responses", "anthropic"]


def new_session() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


async def stop_at_first_tool_call(http: httpx.AsyncClient, session: str, agent: str) -> list[dict]:
    """Send a message whose tool runs for a long time; stop the turn as soon as the stream
    shows `tool-input-available`; return every chunk the stream carried."""
    body = chat_body(session, user_message('@tool wait {"seconds": 30}'), agent=agent)
    chunks: list[dict] = []
    async with aconnect_sse(http, "POST", "/api/chat", json=body) as source:
        async for event in source.aiter_sse():
            if not event.data:
                continue  # a keep-alive comment (see chat_client.read_stream)
            if event.data == "[DONE]":
                break
            chunk = json.loads(event.data)
            chunks.append(chunk)
            if chunk["type"] == "tool-input-available":
                stopped = await http.post(f"/api/chat/{session}/stop")
                assert stopped.json()["result"] == "stopped"
    return chunks


ACTIVITY_ENDINGS = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED,
}


async def activities_ended(http: httpx.AsyncClient, stack: Stack, session: str) -> None:
    """Until the turn's history records an end for every activity it scheduled (the tool's:
    cancelled, or refused as it started after the stop): the worker reported that their code
    had returned, so none of them can write any more."""
    (submission,) = (await http.get(f"/v1/sessions/{session}/submissions")).json()["data"]
    handle = stack.services.client.get_workflow_handle(turn_workflow_id(submission["submissionId"]))

    async def ended() -> bool:
        events = [event.event_type async for event in handle.fetch_history_events()]
        scheduled = events.count(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
        return scheduled == sum(event in ACTIVITY_ENDINGS for event in events)

    await eventually(ended, what="an end recorded for every activity of the turn")


@pytest.mark.parametrize("agent", PROVIDER_AGENTS)
async def test_a_stop_right_after_a_tool_call_settles_it_and_the_next_message_is_answered(
    http: httpx.AsyncClient, agent: str
) -> None:
    session = new_session()

    chunks = await stop_at_first_tool_call(http, session, agent)

    assert chunks[-1]["type"] == "abort"
    settled = [c for c in chunks if c["type"] == "tool-output-error"]
    assert [c["errorText"] for c in settled] == [
        "The turn was stopped before the tool call returned a result."
    ]
    answer = (await http.get(f"/api/chat/{session}/messages")).json()[-1]
    (tool_part,) = [p for p in answer["parts"] if p["type"] == "tool-wait"]
    assert tool_part["state"] == "output-error"

    following = await send(http, session, "and now?", agent=agent)

    assert following.types()[-1] == "finish"
    assert following.text() == "You said: and now?"


async def test_no_chunk_is_written_after_the_terminal_chunk_of_a_stopped_turn(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    session = new_session()
    chunks = await stop_at_first_tool_call(http, session, "default")
    await activities_ended(http, stack, session)  # the tool's too: it can write no more

    logged = await load_log(stack.services.db, message_id=chunks[0]["messageId"])

    assert logged == chunks
    assert [c["type"] for c in logged if c["type"] in TERMINAL_CHUNK_TYPES] == ["abort"]


@pytest.mark.store_agnostic
async def test_hooks_slower_than_the_heartbeat_timeout_do_not_cause_a_retry(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()

    streamed = await send(http, session, "slow hooks", agent="slow-hooks")

    assert streamed.text() == "You said: slow hooks"
    assert not [c for c in streamed.chunks if c["type"] == "data-recovery"]
    events = (await http.get(f"/v1/sessions/{session}/events")).json()
    assert [e["type"] for e in events if e["type"].startswith("chat.recovery")] == []


async def test_hooks_receive_the_tenant_and_session_of_the_turn(http: httpx.AsyncClient) -> None:
    from perdure.testing.agents.chat import turn_contexts

    session = new_session()
    await send(http, session, "who am I", agent="context-recording")

    # hooks get the storage key: unique across tenants, so data scoped by it never mixes
    assert any(c.session_id == key_of(session) and c.tenant_id == "default" for c in turn_contexts)


async def test_an_instructions_hook_past_its_time_limit_ends_the_turn_with_a_clear_error(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()

    streamed = await send(http, session, "hello", agent="hung-instructions")

    assert streamed.types()[-1] == "error"
    assert streamed.chunks[-1]["errorText"] == (
        "instructions: agent hook instructions took longer than its time limit of 1 s"
    )
    following = await send(http, session, "still there?", agent="hung-instructions")
    assert following.types()[-1] == "error"  # the session took the next message


async def test_a_hanging_on_turn_end_hook_never_leaves_the_session_claimed(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()

    first = await send(http, session, "one", agent="hung-turn-end")
    second = await send(http, session, "two", agent="hung-turn-end")

    assert first.text() == "You said: one"
    assert second.text() == "You said: two"


async def test_a_provider_that_dies_after_one_token_every_time_ends_within_the_total_budget(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    text = f"@count 200 @disconnect_after 1 x100 {uuid.uuid4().hex[:8]}"

    streamed = await send(http, session, text, agent="one-token-at-a-time")

    terminal = "Gave up after too many recoveries."
    assert streamed.types()[-1] == "error"
    assert streamed.chunks[-1]["errorText"] == terminal
    partial = streamed.text().removesuffix(terminal)
    assert counting(200).startswith(partial)
    assert len(partial.split()) >= 3  # every attempt made progress, so only the total ended it
    notices = [c for c in streamed.chunks if c["type"] == "data-recovery"]
    assert len(notices) == 4
    events = (await http.get(f"/v1/sessions/{session}/events")).json()
    (exhausted,) = [e for e in events if e["type"] == "chat.recovery.exhausted"]
    assert "total_attempts_exceeded" in exhausted["data"]["reason"]


async def test_stopping_a_responses_turn_cancels_its_background_response(
    http: httpx.AsyncClient, fake_provider
) -> None:
    session = new_session()
    text = f"@count 400 @delay 10 {uuid.uuid4().hex[:8]}"
    streaming = asyncio.create_task(send(http, session, text, agent="responses"))
    await wait_for_text(http, session)

    await http.post(f"/api/chat/{session}/stop")
    streamed = await streaming

    assert streamed.types()[-1] == "abort"
    cancels = [r for r in fake_provider.requests_for(text) if r.route == "responses.cancel"]
    assert len(cancels) == 1
    assert cancels[0].status == 200


async def test_a_stop_that_lands_while_the_turn_finishes_never_leaves_the_session_claimed(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    text = f"@count 30 @stall_after 2 @stall_after 0 x100 {uuid.uuid4().hex[:8]}"
    streaming = asyncio.create_task(send(http, session, text, agent="hung-exhausted"))

    async def exhausted() -> bool:
        events = (await http.get(f"/v1/sessions/{session}/events")).json()
        return isinstance(events, list) and any(
            e["type"] == "chat.recovery.exhausted" for e in events
        )

    # The finish activity is then inside the (hanging) on_exhausted hook.
    await eventually(exhausted, what="the recovery exhausted")

    stopped = await http.post(f"/api/chat/{session}/stop")
    streamed = await streaming

    assert stopped.json()["result"] == "already_finished"  # its ending was decided first
    assert stopped.json()["status"] == "error"
    assert streamed.chunks[-1] == {"type": "error", "errorText": "Could not finish."}
    following = await send(http, session, "next one", agent="default")
    assert following.text() == "You said: next one"
