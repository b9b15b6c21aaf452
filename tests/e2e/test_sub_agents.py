"""Sub-agents: another agent answers a tool call in a child turn on a session of its own,
streamed live into the parent's answer; its final answer is the call's result."""

import asyncio
import json
import uuid
from typing import Any

import httpx

from perdure.domain.names import turn_workflow_id
from perdure.testing.chat_client import Streamed, counting, read_stream, send
from perdure.testing.stack import Stack

AGENT = "manager"


def new_session() -> str:
    return f"sub-test-{uuid.uuid4().hex[:12]}"


def research(task: str) -> str:
    return f"@tool research {json.dumps({'task': task})}"


def outputs(streamed: Streamed) -> list[dict[str, Any]]:
    return [c for c in streamed.chunks if c["type"] == "tool-output-available"]


async def child_of(http: httpx.AsyncClient, session: str) -> dict[str, Any]:
    (child,) = (await http.get(f"/v1/sessions/{session}/children")).json()
    return child  # type: ignore[no-any-return]


async def idle(http: httpx.AsyncClient, session: str) -> None:
    async with asyncio.timeout(30):
        while (await http.get(f"/v1/sessions/{session}")).json()["status"] != "idle":
            await asyncio.sleep(0.1)


async def test_a_sub_agent_answers_in_a_child_session_streamed_live_into_the_parent(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    session = new_session()
    streamed = await send(http, session, research("@count 30 @delay 30"), agent=AGENT)

    *preliminary, final = outputs(streamed)
    assert len(preliminary) >= 2
    assert all(chunk["preliminary"] is True for chunk in preliminary)
    texts = [chunk["output"] for chunk in preliminary]
    assert all(counting(30).startswith(text) for text in texts)
    assert texts == sorted(texts, key=len)
    assert final == {
        "type": "tool-output-available",
        "toolCallId": final["toolCallId"],
        "output": counting(30),
    }
    assert streamed.text() == f"Tool research returned: {counting(30)}"
    link = next(c for c in streamed.chunks if c["type"] == "data-sub-agent")
    child = await child_of(http, session)
    assert child["id"] == link["data"]["sessionId"]
    assert child["parent_session_id"] == session
    assert child["parent_tool_call_id"] == final["toolCallId"]
    child_messages = (await http.get(f"/api/chat/{child['id']}/messages")).json()
    assert [m["role"] for m in child_messages] == ["user", "assistant"]
    assert child_messages[0]["parts"][0]["text"] == "@count 30 @delay 30"
    child_workflow = stack.services.client.get_workflow_handle(
        turn_workflow_id(link["data"]["submissionId"])
    )
    parent_execution = (await child_workflow.describe()).raw_description.workflow_execution_info
    assert parent_execution.parent_execution.workflow_id == turn_workflow_id(
        streamed.headers["x-perdure-submission-id"]
    )


async def test_a_failing_sub_agent_is_a_tool_error_the_parent_model_sees(
    http: httpx.AsyncClient,
) -> None:
    # A fault strikes the first request with its text: the text is new on every run.
    streamed = await send(
        http, new_session(), research(f"@fail 400 {uuid.uuid4().hex}"), agent=AGENT
    )

    error = next(c for c in streamed.chunks if c["type"] == "tool-output-error")
    assert error["errorText"].startswith("The sub-agent failed: ")
    assert streamed.text().startswith("Tool research returned: Error: The sub-agent failed: ")
    assert streamed.chunks[-1]["finishReason"] == "stop"


async def test_a_sub_agent_call_without_a_task_is_a_tool_error(http: httpx.AsyncClient) -> None:
    streamed = await send(http, new_session(), research("  "), agent=AGENT)

    error = next(c for c in streamed.chunks if c["type"] == "tool-output-error")
    assert error["errorText"] == "the sub-agent needs a non-empty `task`"
    assert (
        await http.get(f"/v1/sessions/{streamed.headers['x-perdure-submission-id']}")
    ).status_code == 404


async def test_stopping_the_parent_stops_the_child(http: httpx.AsyncClient) -> None:
    session = new_session()
    body = {
        "id": session,
        "messages": [
            {
                "id": uuid.uuid4().hex[:16],
                "role": "user",
                "parts": [{"type": "text", "text": research("@count 300 @delay 30")}],
            }
        ],
        "agent": AGENT,
    }
    partial = await read_stream(http, "POST", "/api/chat", json=body, stop_after=12)
    while not outputs(partial):
        partial = await read_stream(
            http,
            "GET",
            f"/api/chat/{session}/stream",
            headers={"Last-Event-ID": partial.last_event_id},
            stop_after=1,
        )

    stopped = await http.post(f"/api/chat/{session}/stop")
    await idle(http, session)
    child = await child_of(http, session)
    await idle(http, child["id"])

    assert stopped.status_code == 200
    child_messages = (await http.get(f"/api/chat/{child['id']}/messages")).json()
    assert child_messages[-1]["metadata"]["status"] == "aborted"
    parent_messages = (await http.get(f"/api/chat/{session}/messages")).json()
    part = next(p for p in parent_messages[-1]["parts"] if p["type"] == "tool-research")
    assert part["state"] == "output-error"
    assert parent_messages[-1]["metadata"]["status"] == "aborted"


async def test_a_sub_agent_that_waits_for_approval_goes_on_live_once_approved_in_its_session(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    task = '@delay 100 @tool delete_file {"path": "sub.txt"}'
    streaming = asyncio.create_task(
        send(
            http,
            session,
            f"@tool ask_approver {json.dumps({'task': task})}",
            agent=AGENT,
        )
    )
    async with asyncio.timeout(30):
        while True:
            response = await http.get(f"/v1/sessions/{session}/children")
            children = response.json() if response.status_code == 200 else []
            if children and children[0]["status"] == "waiting":
                break
            await asyncio.sleep(0.1)
    child = children[0]["id"]
    (approval,) = (await http.get(f"/v1/sessions/{child}/approvals")).json()

    answered = await http.post(
        f"/v1/sessions/{child}/approvals/{approval['approvalId']}", json={"approved": True}
    )
    streamed = await streaming

    answer = "Tool delete_file returned: deleted sub.txt"
    assert answered.status_code == 200
    assert streamed.text() == f"Tool ask_approver returned: {answer}"
    *preliminary, final = outputs(streamed)
    assert final["output"] == answer
    # relayed live again after the child's wait, not only as its final answer
    assert any(answer.startswith(c["output"]) and c["output"] for c in preliminary)


async def test_deleting_a_session_deletes_its_sub_agent_sessions(http: httpx.AsyncClient) -> None:
    session = new_session()
    await send(http, session, research("@count 3"), agent=AGENT)
    child = await child_of(http, session)

    deleted = await http.delete(f"/v1/sessions/{session}")

    assert deleted.status_code == 204
    assert (await http.get(f"/v1/sessions/{child['id']}")).status_code == 404
    assert (await http.get(f"/api/chat/{child['id']}/messages")).status_code == 404


async def test_a_parked_answer_is_shown_as_waiting_in_the_history(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    await send(http, session, '@tool delete_file {"path": "w.txt"}', agent="approvals")

    history = (await http.get(f"/api/chat/{session}/messages")).json()

    assert history[-1]["metadata"]["status"] == "waiting"
    await http.post(f"/api/chat/{session}/stop")
