"""A worker process SIGKILLed during an MCP tool's call (docs/mcp.md): a non-idempotent call
ran once at the server, the next worker never runs it again and the model is told it was
interrupted; a call the server marks read-only runs again and the model gets its output; a
call whose server asked a person (input required) is answered after the asking worker died,
and another worker sends the answer with the server's state, round after round.

Real processes, as the chaos specs', in the first lane: the kill lands while the server holds
a 30 s call, and every wait is bounded by tens of seconds, so no machine's load can make the
spec miss its moment."""

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest

from perdure.testing.chat_client import Streamed, chat_body, read_stream, send, user_message
from perdure.testing.cluster import Cluster, LiveStream, wait_until
from tests.served import Served

MCP_CLUSTER = Served(agents="perdure.testing.agents.chat,tests.mcp_agents")


@pytest.fixture
def served() -> Served:
    return MCP_CLUSTER


def recorded(records: Path) -> list[str]:
    return records.read_text().splitlines() if records.exists() else []


async def killed_during(cluster: Cluster, records: Path, tool: str) -> tuple[LiveStream, str]:
    """A turn that calls the calc server's `tool` for 30 s; its worker SIGKILLed once the
    server recorded the call, a new one started; the stream, read to its end, and the text the
    call recorded."""
    environment = {"PERDURE_TEST_MCP_RECORD_FILE": str(records)}
    session = f"kill-mcp-{uuid.uuid4().hex[:6]}"
    call = f'@tool calc__{tool} {{"text": "{session}", "seconds": 30}}'
    async with cluster.temporal():
        worker = cluster.worker(**environment)
        url = await cluster.gateway()
        stream = LiveStream()
        async with httpx.AsyncClient(base_url=url, timeout=90) as http:
            body = chat_body(session, user_message(call), agent="mcp-calc")
            async with http.stream("POST", "/api/chat", json=body) as response:
                reader = asyncio.create_task(stream.read(response))
                await wait_until(lambda: recorded(records) == [session], timeout=60)
                worker.kill()
                cluster.worker(**environment)
                await asyncio.wait_for(reader, timeout=90)
    return stream, session


@pytest.mark.long
async def test_a_worker_killed_during_a_non_idempotent_mcp_call_never_runs_it_twice(
    cluster: Cluster, tmp_path: Path
) -> None:
    records = tmp_path / "mcp-records.txt"

    stream, session = await killed_during(cluster, records, "slow_record")

    assert recorded(records) == [session]
    errors = [c for _, c in stream.events if c["type"] == "tool-output-error"]
    assert [e["errorText"] for e in errors] == [
        "The tool call was interrupted before a result was recorded."
    ]


@pytest.mark.long
async def test_a_worker_killed_during_a_call_the_server_marks_read_only_runs_it_again(
    cluster: Cluster, tmp_path: Path
) -> None:
    records = tmp_path / "mcp-records.txt"

    stream, session = await killed_during(cluster, records, "slow_lookup")

    assert recorded(records) == [session, session]  # run again by the next worker
    outputs = [c for _, c in stream.events if c["type"].startswith("tool-output")]
    assert [(c["type"], c.get("output")) for c in outputs] == [
        ("tool-output-available", {"result": f"found {session}"})
    ]


async def answer_and_follow(
    http: httpx.AsyncClient, session: str, parked: Streamed, key: str, content: dict[str, object]
) -> Streamed:
    """Answer the question `parked` ends on (accept, with `content`); the turn read on from
    its park."""
    wait_id = [c for c in parked.chunks if c["type"] == "data-input-request"][-1]["id"]
    body = {"responses": {key: {"action": "accept", "content": content}}}
    sent = await http.post(f"/v1/sessions/{session}/inputs/{wait_id}", json=body)
    assert sent.status_code == 200, sent.text
    headers = {"Last-Event-ID": parked.last_event_id}
    return await read_stream(http, "GET", f"/api/chat/{session}/stream", headers=headers)


@pytest.mark.long
# One store: what is under test is the MCP server's state going from one worker to the next
# (the tasks spec beside it takes PostgreSQL).
@pytest.mark.parametrize("cluster", ["sqlite"], indirect=True)
async def test_a_question_asked_by_a_worker_killed_since_is_answered_through_the_next(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The kill lands as soon as the client saw the park: before or after the workflow
    recorded it (then the next worker parks again, on the question its predecessor logged)."""
    records = tmp_path / "mcp-records.txt"
    environment = {
        "PERDURE_TEST_MCP_RECORD_FILE": str(records),
        "PERDURE_TEST_MCP_STATE_KEY": uuid.uuid4().hex,  # each calc server seals with it
    }
    session, name = f"kill-ask-{uuid.uuid4().hex[:6]}", f"Ada-{uuid.uuid4().hex[:6]}"
    async with cluster.temporal():
        asking = cluster.worker(**environment)
        url = await cluster.gateway()
        async with httpx.AsyncClient(base_url=url, timeout=90) as http:
            parked = await send(
                http, session, '@tool calc__sign_up {"plan": "pro"}', agent="mcp-input"
            )
            assert parked.types()[-2:] == ["data-input-request", "finish"]
            asking.kill()
            cluster.worker(**environment)

            asked_again = await answer_and_follow(http, session, parked, "name", {"name": name})
            assert asked_again.types()[-2:] == ["data-input-request", "finish"]
            done = await answer_and_follow(http, session, asked_again, "confirm", {"confirm": True})

    outputs = [c for c in done.chunks if c["type"].startswith("tool-output")]
    assert [(c["type"], c.get("output")) for c in outputs] == [
        ("tool-output-available", {"result": f"signed up {name} for pro"})
    ]
    assert done.chunks[-1]["finishReason"] == "stop"
    assert recorded(records) == [f"signed up {name}"]
