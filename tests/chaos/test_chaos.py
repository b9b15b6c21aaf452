"""Chaos with real processes: a turn survives a killed worker, a killed gateway and a
restarted Temporal server — the final text is exactly the full count, nothing is lost or
duplicated in the store, and every stream resumes without a gap."""

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest

from perdure.testing.chat_client import chat_body, counting, read_stream, send, user_message
from perdure.testing.cluster import Cluster, LiveStream, wait_until
from tests.waiting import eventually


async def stored(url: str, session: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:

        async def idle() -> dict[str, Any] | None:
            info: dict[str, Any] = (await http.get(f"/v1/sessions/{session}")).json()
            return info if info["status"] == "idle" else None

        info = await eventually(idle, what=f"session {session} idle")
        return (await http.get(f"/api/chat/{session}/messages")).json(), info


def text_of(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


async def test_a_worker_killed_mid_stream_is_replaced_and_the_answer_continues_exactly(
    cluster: Cluster,
) -> None:
    async with cluster.temporal():
        worker = cluster.worker()
        url = await cluster.gateway()
        session = f"kill-worker-{uuid.uuid4().hex[:6]}"
        stream = LiveStream()
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            body = chat_body(session, user_message(f"@count 300 @delay 10 {session}"))
            async with http.stream("POST", "/api/chat", json=body) as response:
                reader = asyncio.create_task(stream.read(response))
                await wait_until(lambda: stream.deltas() >= 40)
                worker.kill()
                killed_at = stream.deltas()
                cluster.worker()
                await asyncio.wait_for(reader, timeout=60)

        assert stream.done, cluster.logs()
        assert killed_at < 300
        assert stream.text() == counting(300)
        assert [seq for seq, _ in stream.events] == list(range(len(stream.events)))
        # The kill is recovered by continuing the streamed answer, never by answering afresh
        # (a loaded machine may add an early retry, or a second continuation after a missed
        # heartbeat: each is still exact, as the text above shows).
        kinds = stream.recovery_kinds()
        assert ("continue", True) in kinds and ("retry", True) not in kinds, kinds
        messages, info = await stored(url, session)
        assert [m["role"] for m in messages] == ["user", "assistant"]
        assert text_of(messages[1]) == counting(300)
        assert messages[1]["metadata"]["status"] == "completed"
        assert info["status"] == "idle"


async def test_a_killed_gateway_is_replaced_and_the_client_resumes_without_gap_or_duplicate(
    cluster: Cluster,
) -> None:
    async with cluster.temporal():
        cluster.worker()
        first_url = await cluster.gateway()
        first_gateway = cluster.last_gateway
        session = f"kill-gateway-{uuid.uuid4().hex[:6]}"
        before = LiveStream()
        async with httpx.AsyncClient(base_url=first_url, timeout=60) as http:
            body = chat_body(session, user_message(f"@count 200 @delay 10 {session}"))
            async with http.stream("POST", "/api/chat", json=body) as response:
                reader = asyncio.create_task(before.read(response))
                await wait_until(lambda: before.deltas() >= 30)
                first_gateway.kill()
                with pytest.raises(httpx.HTTPError):
                    await asyncio.wait_for(reader, timeout=10)
        last_seen = before.events[-1][0]

        second_url = await cluster.gateway()
        after = LiveStream()
        async with httpx.AsyncClient(base_url=second_url, timeout=60) as http:
            headers = {"Last-Event-ID": str(last_seen)}
            async with http.stream(
                "GET", f"/api/chat/{session}/stream", headers=headers
            ) as response:
                assert response.status_code == 200
                await after.read(response)

        ids = [seq for seq, _ in before.events + after.events]
        assert ids == list(range(len(ids)))
        assert before.text() + after.text() == counting(200)
        assert after.done


@pytest.mark.store_agnostic  # Temporal restarts; the store takes no path of its own
async def test_running_turns_finish_after_the_temporal_server_restarts(
    cluster: Cluster,
) -> None:
    session = f"restart-temporal-{uuid.uuid4().hex[:6]}"
    stream = LiveStream()
    async with cluster.temporal(outlived=True):
        cluster.worker()
        url = await cluster.gateway()
        http = httpx.AsyncClient(base_url=url, timeout=90)
        body = chat_body(session, user_message(f"@count 300 @delay 10 {session}"))
        response = await http.send(http.build_request("POST", "/api/chat", json=body), stream=True)
        reader = asyncio.create_task(stream.read(response))
        await wait_until(lambda: stream.deltas() >= 30)
    # the dev server is down here; it comes back on the same SQLite file and port
    async with cluster.temporal():
        await asyncio.wait_for(reader, timeout=90)
        await response.aclose()
        await http.aclose()
        messages, info = await stored(url, session)

    assert stream.done, cluster.logs()
    assert stream.text() == counting(300)
    assert text_of(messages[1]) == counting(300)
    assert info["status"] == "idle"


async def test_an_interrupted_non_idempotent_tool_is_never_run_twice(cluster: Cluster) -> None:
    async with cluster.temporal():
        worker = cluster.worker(PERDURE_TEST_TOOL_SECONDS="30")
        url = await cluster.gateway()
        session = f"kill-tool-{uuid.uuid4().hex[:6]}"
        stream = LiveStream()
        async with httpx.AsyncClient(base_url=url, timeout=90) as http:
            body = chat_body(
                session, user_message(f'@tool slow_refund {{"order_id": "{session}"}}')
            )
            async with http.stream("POST", "/api/chat", json=body) as response:
                reader = asyncio.create_task(stream.read(response))
                await wait_until(lambda: cluster.tool_runs() == [session])
                worker.kill()
                cluster.worker(PERDURE_TEST_TOOL_SECONDS="30")
                await asyncio.wait_for(reader, timeout=90)

        assert cluster.tool_runs() == [session]
        errors = [c for _, c in stream.events if c["type"] == "tool-output-error"]
        assert [e["errorText"] for e in errors] == [
            "The tool call was interrupted before a result was recorded."
        ]
        # the model was told, and answered from the error instead of re-running the tool
        assert "The tool call was interrupted" in stream.text()
        messages, info = await stored(url, session)
        (tool_part,) = [p for p in messages[1]["parts"] if p["type"] == "tool-slow_refund"]
        assert tool_part["state"] == "output-error"
        assert info["status"] == "idle"
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            events = (await http.get(f"/v1/sessions/{session}/events")).json()
        (repaired,) = [e for e in events if e["type"] == "chat.transcript.repaired"]
        assert repaired["data"]["toolCallIds"] == [tool_part["toolCallId"]]


async def test_a_worker_killed_while_a_turn_waits_for_approval_changes_nothing(
    cluster: Cluster,
) -> None:
    async with cluster.temporal():
        worker = cluster.worker()
        url = await cluster.gateway()
        session = f"kill-parked-{uuid.uuid4().hex[:6]}"
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            parked = await send(
                http, session, f'@tool delete_file {{"path": "{session}"}}', agent="approvals"
            )
            worker.kill()
            cluster.worker()
            (approval,) = (await http.get(f"/v1/sessions/{session}/approvals")).json()
            answered = await http.post(
                f"/v1/sessions/{session}/approvals/{approval['approvalId']}",
                json={"approved": True},
            )
            continued = await read_stream(
                http,
                "GET",
                f"/api/chat/{session}/stream",
                headers={"Last-Event-ID": parked.last_event_id},
            )

        assert answered.status_code == 200
        assert continued.ids[0] == parked.ids[-1] + 1
        assert continued.text() == f"Tool delete_file returned: deleted {session}"
        assert cluster.tool_runs() == [f"delete_file:{session}"]
        messages, info = await stored(url, session)
        assert info["status"] == "idle"
        assert text_of(messages[1]) == continued.text()


async def test_a_worker_killed_while_a_sub_agent_streams_ends_with_the_exact_answer(
    cluster: Cluster,
) -> None:
    async with cluster.temporal():
        worker = cluster.worker()
        url = await cluster.gateway()
        session = f"kill-sub-{uuid.uuid4().hex[:6]}"
        task = f"@count 200 @delay 15 {session}"
        stream = LiveStream()
        async with httpx.AsyncClient(base_url=url, timeout=90) as http:
            body = {
                **chat_body(session, user_message(f"@tool research {json.dumps({'task': task})}")),
                "agent": "manager",
            }
            async with http.stream("POST", "/api/chat", json=body) as response:
                reader = asyncio.create_task(stream.read(response))
                await wait_until(
                    lambda: any(c.get("preliminary") for _, c in stream.events), timeout=30
                )
                worker.kill()
                cluster.worker()
                await asyncio.wait_for(reader, timeout=90)
            (child,) = (await http.get(f"/v1/sessions/{session}/children")).json()

        answer = counting(200)
        final = [
            c
            for _, c in stream.events
            if c["type"] == "tool-output-available" and not c.get("preliminary")
        ]
        assert [c["output"] for c in final] == [answer]
        assert stream.text() == f"Tool research returned: {answer}"
        messages, info = await stored(url, session)
        assert info["status"] == "idle"
        child_messages, child_info = await stored(url, child["id"])
        assert child_info["status"] == "idle"
        assert text_of(child_messages[1]) == answer
