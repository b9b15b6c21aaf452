"""Turns you can find in the Temporal UI: search attributes that follow the turn, summaries
that say what each step is, and links to the turn's page in every response about it."""

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from perdure.domain.names import turn_workflow_id
from perdure.domain.turn_labels import STATUS, first_words
from perdure.testing.chat_client import read_stream, send
from perdure.testing.stack import Stack
from tests.e2e.test_approvals import AGENT as APPROVALS
from tests.e2e.test_approvals import answer, parked_turn, request_of

# Search attributes and links are Temporal's and the gateway's: the store takes no part.
pytestmark = pytest.mark.store_agnostic

VISIBILITY_SECONDS = 15.0
"""Visibility is eventually consistent: a query sees a change within this long."""


def new_chat(prefix: str = "ui") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def listed(client: Client, query: str) -> set[str]:
    return {execution.id async for execution in client.list_workflows(query)}


async def found_by(client: Client, query: str, workflow_id: str) -> None:
    async with asyncio.timeout(VISIBILITY_SECONDS):
        while workflow_id not in await listed(client, query):
            await asyncio.sleep(0.2)


async def status_becomes(client: Client, workflow_id: str, status: str) -> None:
    handle = client.get_workflow_handle(workflow_id)
    async with asyncio.timeout(VISIBILITY_SECONDS):
        while (await handle.describe()).typed_search_attributes.get(STATUS) != status:
            await asyncio.sleep(0.1)


async def status_updates(client: Client, workflow_id: str) -> list[str]:
    """Every `PerdureStatus` the workflow upserted, in order (from its history: exact)."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    upserts = [
        event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    ]
    # The SDK upserts `TemporalChangeVersion` of its own where a patch is first met.
    return [json.loads(fields[STATUS.name].data) for fields in upserts if STATUS.name in fields]


async def summaries(client: Client, workflow_id: str) -> list[str]:
    """The summaries of the workflow's activities and local activities, in order."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    converter = client.data_converter.payload_converter
    return [
        converter.from_payload(event.user_metadata.summary, str)
        for event in history.events
        if event.HasField("user_metadata")
        and event.user_metadata.HasField("summary")
        and event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    ]


async def test_a_turn_is_found_by_each_search_attribute_and_says_what_each_step_is(
    tenants: tuple[httpx.AsyncClient, httpx.AsyncClient], stack: Stack
) -> None:
    alpha, _ = tenants
    chat = new_chat()
    text = '@tool calculate {"expression": "6*7"}   and then please explain the result slowly'
    # Each tool call as its own activity (an agent whose steps run no tool rounds themselves).
    streamed = await send(alpha, chat, text, agent="tool-activities")
    submission_id = streamed.headers["x-perdure-submission-id"]
    workflow_id = turn_workflow_id(submission_id)
    client = stack.services.client

    assert streamed.done
    assert streamed.headers["x-perdure-temporal-url"] == (
        f"http://127.0.0.1:8233/namespaces/default/workflows/{workflow_id}"
    )
    for query in (
        f'PerdureSessionId = "{chat}"',
        'PerdureTenant = "alpha"',
        'PerdureAgent = "tool-activities"',
        'PerdureStatus = "completed"',
    ):
        await found_by(client, query, workflow_id)
    description = await client.get_workflow_handle(workflow_id).describe()
    summary = await description.static_summary()
    assert (
        summary == first_words(text) == ('@tool calculate {"expression": "6*7"} and then please…')
    )
    assert await summaries(client, workflow_id) == [
        "model step 0 · agent tool-activities",
        "tool calculate",
        "model step 1 · agent tool-activities · openai:gpt-fake",
        "finish turn: completed",
    ]


async def test_the_status_follows_a_queued_turn_from_pending_to_completed_and_links_it(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    chat = new_chat()
    client = stack.services.client

    async def submit(text: str) -> dict[str, Any]:
        body = {"messages": [{"id": uuid.uuid4().hex, "role": "user", "parts": [
            {"type": "text", "text": text}]}]}  # fmt: skip
        response = await http.post(f"/v1/sessions/{chat}/submissions", json=body)
        assert response.status_code == 202, response.text
        return response.json()  # type: ignore[no-any-return]

    first = await submit("@count 40 @delay 50")
    queued = await submit("and then this one")
    running_id, queued_id = (turn_workflow_id(s["submissionId"]) for s in (first, queued))

    await found_by(client, f'PerdureSessionId = "{chat}" AND PerdureStatus = "running"', running_id)
    await found_by(client, f'PerdureSessionId = "{chat}" AND PerdureStatus = "pending"', queued_id)
    await status_becomes(client, queued_id, "completed")
    await found_by(
        client, f'PerdureSessionId = "{chat}" AND PerdureStatus = "completed"', running_id
    )
    assert await status_updates(client, running_id) == ["completed"]  # running from its start
    assert await status_updates(client, queued_id) == ["running", "completed"]

    link = f"http://127.0.0.1:8233/namespaces/default/workflows/{queued_id}"
    assert queued["temporalUrl"] == link
    listed_rows = (await http.get(f"/v1/sessions/{chat}/submissions")).json()["data"]
    assert [row["temporalUrl"] for row in listed_rows] == [
        f"http://127.0.0.1:8233/namespaces/default/workflows/{running_id}",
        link,
    ]
    one = await http.get(f"/v1/sessions/{chat}/submissions/{queued['submissionId']}")
    assert one.json()["temporalUrl"] == link


async def test_a_parked_turn_is_waiting_until_it_is_answered(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    chat = new_chat("ui-appr")
    client = stack.services.client
    # A file of its own: the approvals specifications check nothing deleted notes/x.txt.
    parked = await parked_turn(http, chat, '@tool delete_file {"path": "ui-approved.txt"}')
    workflow_id = turn_workflow_id(parked.headers["x-perdure-submission-id"])

    await found_by(
        client, f'PerdureSessionId = "{chat}" AND PerdureStatus = "waiting"', workflow_id
    )
    await found_by(client, f'PerdureAgent = "{APPROVALS}"', workflow_id)
    approved = await answer(http, chat, request_of(parked)["approvalId"], approved=True)
    assert approved.status_code == 200, approved.text

    await status_becomes(client, workflow_id, "completed")
    assert await status_updates(client, workflow_id) == ["waiting", "running", "completed"]
    assert "park: waiting on delete_file" in await summaries(client, workflow_id)


async def test_a_stopped_turn_ends_aborted(http: httpx.AsyncClient, stack: Stack) -> None:
    chat = new_chat()
    client = stack.services.client
    started = await send(http, chat, "@count 300 @delay 20", stop_after=2)
    workflow_id = turn_workflow_id(started.headers["x-perdure-submission-id"])

    assert (await http.post(f"/api/chat/{chat}/stop")).status_code == 200

    await status_becomes(client, workflow_id, "aborted")
    assert await status_updates(client, workflow_id) == ["aborted"]


async def test_a_sub_agent_turn_is_found_by_its_own_session(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    chat = new_chat("ui-sub")
    streamed = await send(
        http, chat, '@tool research {"task": "@count 3 count to three"}', agent="manager"
    )
    link = next(c for c in streamed.chunks if c["type"] == "data-sub-agent")["data"]
    child_id = turn_workflow_id(link["submissionId"])
    client = stack.services.client

    await found_by(client, f'PerdureSessionId = "{link["sessionId"]}"', child_id)
    await status_becomes(client, child_id, "completed")
    description = await client.get_workflow_handle(child_id).describe()
    assert await description.static_summary() == "sub-agent default: @count 3 count to three"
    assert description.typed_search_attributes.get(STATUS) == "completed"


async def test_a_resumed_stream_carries_the_link_too(http: httpx.AsyncClient, stack: Stack) -> None:
    chat = new_chat()
    sent = await send(http, chat, "@count 3")
    resumed = await read_stream(
        http, "GET", f"/api/chat/{chat}/stream", headers={"Last-Event-ID": sent.event_ids[0]}
    )

    assert resumed.headers["x-perdure-temporal-url"] == sent.headers["x-perdure-temporal-url"]


async def test_a_turn_that_fails_is_an_error_whose_result_says_why(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    chat = new_chat()
    streamed = await send(http, chat, f"@fail 401 refused {uuid.uuid4().hex[:6]}")
    handle = stack.services.client.get_workflow_handle(
        turn_workflow_id(streamed.headers["x-perdure-submission-id"])
    )

    result = await handle.result()

    assert result["outcome"] == "error"
    assert result["error"].startswith("openai:gpt-fake (HTTP 401), not retryable")
    await status_becomes(stack.services.client, handle.id, "error")
