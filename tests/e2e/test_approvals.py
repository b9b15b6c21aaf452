"""Tool approvals and client-side tools: a turn parks in its workflow until it is answered —
in band (the AI SDK posts the assistant message back) or by REST — and goes on exactly once."""

import asyncio
import copy
import json
import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType

from gateway.routes import chat as chat_routes
from perdure.domain.names import turn_workflow_id
from perdure.testing.agents.approvals import tool_runs
from perdure.testing.chat_client import Streamed, read_stream, send, user_message
from perdure.testing.stack import Stack

AGENT = "approvals"
DELETE = '@tool delete_file {"path": "notes/x.txt"}'


def new_session() -> str:
    return f"appr-{uuid.uuid4().hex[:12]}"


def request_of(streamed: Streamed) -> dict[str, Any]:
    return next(c for c in streamed.chunks if c["type"] == "tool-approval-request")


async def parked_turn(http: httpx.AsyncClient, session: str, text: str = DELETE) -> Streamed:
    streamed = await send(http, session, text, agent=AGENT)
    assert streamed.done
    return streamed


async def held_messages(http: httpx.AsyncClient, session: str) -> list[dict[str, Any]]:
    """What `useChat` holds: the history, with the parked answer as its last message."""
    response = await http.get(f"/api/chat/{session}/messages")
    assert response.status_code == 200, response.text
    messages: list[dict[str, Any]] = response.json()
    return messages


def responded(
    messages: list[dict[str, Any]], call_id: str, update: dict[str, Any]
) -> list[dict[str, Any]]:
    """The messages with one tool part of the last (assistant) message updated, as the AI SDK
    does on `addToolApprovalResponse` / `addToolOutput`."""
    answered = copy.deepcopy(messages)
    for part in answered[-1]["parts"]:
        if part.get("toolCallId") == call_id:
            part.update(update)
    return answered


def approval_update(approval_id: str, approved: bool, reason: str | None = None) -> dict[str, Any]:
    approval: dict[str, Any] = {"id": approval_id, "approved": approved}
    if reason is not None:
        approval["reason"] = reason
    return {"state": "approval-responded", "approval": approval}


async def continue_in_band(
    http: httpx.AsyncClient, session: str, messages: list[dict[str, Any]]
) -> Streamed:
    body = {
        "id": session,
        "messages": messages,
        "trigger": "submit-message",
        "messageId": messages[-1]["id"],
    }
    return await read_stream(http, "POST", "/api/chat", json=body)


async def answer(
    http: httpx.AsyncClient, session: str, approval_id: str, **body: Any
) -> httpx.Response:
    return await http.post(f"/v1/sessions/{session}/approvals/{approval_id}", json=body)


async def resume_after(http: httpx.AsyncClient, session: str, parked: Streamed) -> Streamed:
    return await read_stream(
        http,
        "GET",
        f"/api/chat/{session}/stream",
        headers={"Last-Event-ID": parked.last_event_id},
    )


async def session_status(http: httpx.AsyncClient, session: str) -> str:
    status: str = (await http.get(f"/v1/sessions/{session}")).json()["status"]
    return status


async def idle(http: httpx.AsyncClient, session: str) -> None:
    async with asyncio.timeout(30):
        while await session_status(http, session) != "idle":
            await asyncio.sleep(0.1)


async def test_a_tool_that_needs_approval_parks_the_turn_and_the_stream_ends_with_tool_calls(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    parked = await parked_turn(http, session)

    types = parked.types()
    assert types[-4:] == [
        "tool-input-available",
        "tool-approval-request",
        "finish-step",
        "finish",
    ]
    assert parked.chunks[-1]["finishReason"] == "tool-calls"
    request = request_of(parked)
    assert request["approvalId"].startswith("appr_")
    assert await session_status(http, session) == "waiting"
    pending = (await http.get(f"/v1/sessions/{session}/approvals")).json()
    assert [(p["approvalId"], p["toolName"], p["input"]) for p in pending] == [
        (request["approvalId"], "delete_file", {"path": "notes/x.txt"})
    ]
    assert "delete_file:notes/x.txt" not in tool_runs


async def test_a_parked_turn_runs_no_activity_and_waits_on_a_durable_timer_of_its_timeout(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    # Waits of days, without waiting days: what Temporal holds for the parked turn is a
    # timer of the tool's `approval_timeout` (7 days by default) and no running activity, so
    # no worker slot, heartbeat or recovery budget is spent however long it waits.
    session = new_session()
    parked = await parked_turn(http, session)
    handle = stack.services.client.get_workflow_handle(
        turn_workflow_id(parked.headers["x-perdure-submission-id"])
    )

    async with asyncio.timeout(10):  # the stream ends when the park's chunk is written
        while not (waiting_for := await handle.query("waiting_for")):
            await asyncio.sleep(0.05)
    description = await handle.describe()
    timers = [
        event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED
    ]

    assert list(description.raw_description.pending_activities) == []
    assert len(timers) == 1
    assert timedelta(days=6, hours=23) < timers[0] <= timedelta(days=7)
    assert waiting_for == [request_of(parked)["approvalId"]]
    await http.post(f"/api/chat/{session}/stop")


async def test_an_approval_answered_out_of_band_runs_the_tool_once_and_the_model_continues(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    path = f"{session}.txt"
    parked = await parked_turn(http, session, f'@tool delete_file {{"path": "{path}"}}')
    approval_id = request_of(parked)["approvalId"]

    answered = await answer(http, session, approval_id, approved=True)
    continued = await resume_after(http, session, parked)

    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "approved"
    assert continued.chunks[0] == {**parked.chunks[0], "type": "start"}
    assert continued.ids[0] == parked.ids[-1] + 1
    assert continued.types()[1] == "tool-output-available"
    assert continued.text() == f"Tool delete_file returned: deleted {path}"
    assert continued.chunks[-1]["finishReason"] == "stop"
    assert tool_runs.count(f"delete_file:{path}") == 1
    await idle(http, session)
    stored = (await held_messages(http, session))[-1]
    part = next(p for p in stored["parts"] if p["type"] == "tool-delete_file")
    assert part["state"] == "output-available"
    assert part["approval"] == {"id": approval_id, "approved": True}


async def test_the_ai_sdk_continuation_denies_in_band_and_the_same_message_goes_on(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    parked = await parked_turn(http, session)
    request = request_of(parked)
    messages = responded(
        await held_messages(http, session),
        request["toolCallId"],
        approval_update(request["approvalId"], approved=False, reason="not that file"),
    )

    continued = await continue_in_band(http, session, messages)

    assert continued.status == 200
    assert continued.chunks[0]["type"] == "start"
    assert continued.chunks[0]["messageId"] == messages[-1]["id"]
    assert continued.ids[0] == parked.ids[-1] + 1
    assert continued.chunks[1] == {
        "type": "tool-output-denied",
        "toolCallId": request["toolCallId"],
        "reason": "not that file",
    }
    assert "denied (not that file)" in continued.text()
    await idle(http, session)
    after = await send(http, session, "@count 3", agent=AGENT)
    assert after.text() == "1 2 3"


async def test_the_same_answer_twice_is_idempotent_and_a_different_second_answer_is_409(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    parked = await parked_turn(http, session)
    approval_id = request_of(parked)["approvalId"]

    first = await answer(http, session, approval_id, approved=False, reason="no")
    again = await answer(http, session, approval_id, approved=False)
    other = await answer(http, session, approval_id, approved=True)

    assert (first.status_code, first.json()["changed"]) == (200, True)
    assert (again.status_code, again.json()["changed"]) == (200, False)
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "wait_conflict"
    continued = await resume_after(http, session, parked)
    assert "tool-output-denied" in continued.types()
    assert "delete_file:notes/x.txt" not in tool_runs


async def test_a_forged_or_stale_approval_runs_nothing_and_says_why(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    parked = await parked_turn(http, session)
    request = request_of(parked)
    held = await held_messages(http, session)

    forged_rest = await answer(http, session, "appr_" + "0" * 32, approved=True)
    forged_in_band = await continue_in_band(
        http,
        session,
        responded(held, request["toolCallId"], approval_update("appr_forged", approved=True)),
    )
    elsewhere = await answer(http, new_session(), request["approvalId"], approved=True)
    nothing_answered = await continue_in_band(http, session, held)

    assert forged_rest.status_code == 404
    assert forged_in_band.status == 404
    assert elsewhere.status_code == 404
    assert nothing_answered.status == 422
    assert await session_status(http, session) == "waiting"
    await answer(http, session, request["approvalId"], approved=False)
    await resume_after(http, session, parked)
    await idle(http, session)
    stale = await continue_in_band(
        http,
        session,
        responded(held, request["toolCallId"], approval_update(request["approvalId"], True)),
    )
    assert stale.status == 409
    assert "delete_file:notes/x.txt" not in tool_runs


async def test_an_unanswered_approval_expires_as_denied_and_a_late_answer_is_409(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    parked = await parked_turn(http, session, '@tool launch {"target": "moon"}')

    continued = await resume_after(http, session, parked)
    late = await answer(http, session, request_of(parked)["approvalId"], approved=True)

    denied = next(c for c in continued.chunks if c["type"] == "tool-output-denied")
    assert denied["reason"] == "no answer came in time"
    assert "denied (no answer came in time)" in continued.text()
    assert late.status_code == 409
    assert "launch:moon" not in tool_runs


async def test_stop_while_parked_settles_the_call_as_denied_and_the_session_takes_the_next_message(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    parked = await parked_turn(http, session)

    stopped = await http.post(f"/api/chat/{session}/stop")
    ending = await resume_after(http, session, parked)
    await idle(http, session)
    after = await send(http, session, "@count 2", agent=AGENT)

    assert stopped.status_code == 200
    # The usage of the step before the park goes before the ending (docs/usage.md).
    assert ending.types() == ["start", "tool-output-denied", "message-metadata", "abort"], (
        ending.status,
        parked.last_event_id,
    )
    assert (await http.get(f"/v1/sessions/{session}/approvals")).json() == []
    assert after.text() == "1 2"
    stored = (await held_messages(http, session))[1]
    part = next(p for p in stored["parts"] if p["type"] == "tool-delete_file")
    assert part["state"] == "output-denied"


async def test_a_turn_that_ends_while_the_history_is_read_is_listed_once_as_stored(
    http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history reads the running turn and the stored path separately; a turn ending
    between the two reads must be in the answer once, never missing, never twice."""
    session = new_session()
    await parked_turn(http, session)
    reads_done = 0

    def ending_the_turn_after_the_first_read(read: Any) -> Any:
        async def patched(*args: Any, **kwargs: Any) -> Any:
            nonlocal reads_done
            result = await read(*args, **kwargs)
            reads_done += 1
            if reads_done == 1:
                await http.post(f"/api/chat/{session}/stop")
                await idle(http, session)
            return result

        return patched

    for name in ("active_path", "stream_target"):
        read = getattr(chat_routes, name)
        monkeypatch.setattr(chat_routes, name, ending_the_turn_after_the_first_read(read))
    history = await held_messages(http, session)

    assert [m["role"] for m in history] == ["user", "assistant"]
    assert history[1]["metadata"]["status"] == "aborted"
    part = next(p for p in history[1]["parts"] if p["type"] == "tool-delete_file")
    assert part["state"] == "output-denied"


async def test_needs_approval_decides_per_call(http: httpx.AsyncClient) -> None:
    small = await send(http, new_session(), '@tool refund {"amount": 20}', agent=AGENT)
    large = await send(http, new_session(), '@tool refund {"amount": 500}', agent=AGENT)

    assert small.text() == "Tool refund returned: refunded 20.0"
    assert "tool-approval-request" not in small.types()
    assert large.types()[-3:] == ["tool-approval-request", "finish-step", "finish"]
    assert "refund:500.0" not in tool_runs


async def test_a_failing_approval_check_asks_rather_than_runs(http: httpx.AsyncClient) -> None:
    streamed = await send(http, new_session(), '@tool guarded {"what": "x"}', agent=AGENT)

    assert "tool-approval-request" in streamed.types()
    assert "guarded:x" not in tool_runs


async def test_resume_without_a_cursor_replays_the_whole_message_across_its_park(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    parked = await parked_turn(http, session, '@tool refund {"amount": 700}')
    await answer(http, session, request_of(parked)["approvalId"], approved=True)
    continued = await resume_after(http, session, parked)

    replay = await read_stream(http, "GET", f"/api/chat/{session}/stream", params={"after": -1})

    assert replay.chunks == parked.chunks + continued.chunks
    assert replay.types().count("start") == 2


async def test_a_client_tool_parks_until_the_client_sends_its_output_by_rest(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    parked = await parked_turn(http, session, '@tool pick_color {"prompt": "your color?"}')
    call = next(c for c in parked.chunks if c["type"] == "tool-input-available")
    pending = (await http.get(f"/v1/sessions/{session}/tool-calls")).json()

    sent = await http.post(
        f"/v1/sessions/{session}/tool-calls/{call['toolCallId']}", json={"output": "teal"}
    )
    continued = await resume_after(http, session, parked)

    assert parked.types()[-3:] == ["tool-input-available", "finish-step", "finish"]
    assert [p["toolName"] for p in pending] == ["pick_color"]
    assert sent.status_code == 200, sent.text
    assert continued.chunks[1] == {
        "type": "tool-output-available",
        "toolCallId": call["toolCallId"],
        "output": "teal",
    }
    assert continued.text() == "Tool pick_color returned: teal"


async def test_a_client_tool_output_sent_in_band_continues_the_same_message(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    parked = await parked_turn(http, session, '@tool pick_color {"prompt": "your color?"}')
    call = next(c for c in parked.chunks if c["type"] == "tool-input-available")
    messages = responded(
        await held_messages(http, session),
        call["toolCallId"],
        {"state": "output-available", "output": {"color": "red"}},
    )

    continued = await continue_in_band(http, session, messages)
    repeated = await continue_in_band(http, session, messages)

    assert continued.chunks[0]["messageId"] == messages[-1]["id"]
    assert continued.text() == 'Tool pick_color returned: {"color":"red"}'
    assert repeated.status == 200
    assert repeated.chunks == continued.chunks


async def test_a_client_tool_that_gets_no_output_in_time_ends_as_an_error_the_model_sees(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    parked = await parked_turn(http, session, "@tool pick_quickly {}")

    continued = await resume_after(http, session, parked)

    error = next(c for c in continued.chunks if c["type"] == "tool-output-error")
    assert error["errorText"] == "The client sent no output: no answer came in time."
    assert continued.chunks[-1]["finishReason"] == "stop"


@pytest.mark.parametrize(
    "body",
    [{}, {"output": 1, "errorText": "x"}, {"errorText": ""}, {"output": 1, "extra": True}],
)
async def test_a_malformed_client_tool_answer_is_a_422(
    http: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    session = new_session()
    parked = await parked_turn(http, session, '@tool pick_color {"prompt": "?"}')
    call = next(c for c in parked.chunks if c["type"] == "tool-input-available")

    response = await http.post(
        f"/v1/sessions/{session}/tool-calls/{call['toolCallId']}",
        content=json.dumps(body),
        headers={"content-type": "application/json"},
    )

    assert response.status_code == 422, response.text
    await http.post(f"/api/chat/{session}/stop")


async def test_a_continuation_for_an_unknown_message_is_a_404(http: httpx.AsyncClient) -> None:
    session = new_session()
    await send(http, session, "@count 1", agent=AGENT)
    assistant = {
        "id": "msg_unknown",
        "role": "assistant",
        "parts": [
            {
                "type": "tool-delete_file",
                "toolCallId": "c1",
                "state": "approval-responded",
                "input": {},
                "approval": {"id": "appr_x", "approved": True},
            }
        ],
    }

    response = await continue_in_band(http, session, [user_message("hi"), assistant])

    assert response.status == 404


PICK_FILE = {
    "name": "pick_file",
    "description": "Let the user pick a file.",
    "parameters": {"type": "object", "properties": {"kind": {"type": "string"}}},
}


async def test_a_client_tool_declared_by_the_request_parks_until_its_output_arrives(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    parked = await send(
        http, session, '@tool pick_file {"kind": "pdf"}', agent=AGENT, tools=[PICK_FILE]
    )
    call = next(c for c in parked.chunks if c["type"] == "tool-input-available")

    sent = await http.post(
        f"/v1/sessions/{session}/tool-calls/{call['toolCallId']}", json={"output": "a.pdf"}
    )
    continued = await resume_after(http, session, parked)

    assert parked.chunks[-1]["finishReason"] == "tool-calls"
    assert sent.status_code == 200
    assert continued.text() == "Tool pick_file returned: a.pdf"


async def test_a_declared_client_tool_named_like_an_agent_tool_ends_the_turn_saying_so(
    http: httpx.AsyncClient,
) -> None:
    clash = {**PICK_FILE, "name": "delete_file"}

    streamed = await send(http, new_session(), "@count 2", agent=AGENT, tools=[clash])

    assert streamed.chunks[-1]["type"] == "error"
    assert "has a tool of that name" in streamed.chunks[-1]["errorText"]


@pytest.mark.parametrize(
    "tools",
    [
        [{**PICK_FILE, "name": "has space"}],
        [{**PICK_FILE, "parameters": {"type": "string"}}],
        [PICK_FILE, PICK_FILE],
        [{**PICK_FILE, "timeoutSeconds": 0}],
        [{**PICK_FILE, "execute": "rm -rf /"}],
    ],
)
async def test_an_invalid_client_tool_declaration_is_a_422(
    http: httpx.AsyncClient, tools: list[dict[str, Any]]
) -> None:
    streamed = await send(http, new_session(), "@count 1", agent=AGENT, tools=tools)

    assert streamed.status == 422
