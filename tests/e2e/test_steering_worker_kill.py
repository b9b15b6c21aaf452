"""A worker SIGKILLed between a steering message and the step boundary it waits for: the
message is in the store before its `202`, so the worker that recovers the turn joins it at
that boundary, once (docs/api.md, "Concurrency").

Real processes, in the first lane: the kill lands while the turn's tool waits 5 s, and every
wait is bounded by tens of seconds."""

import asyncio
import uuid

import httpx
import pytest

from perdure.testing.chat_client import chat_body, counting, user_message
from perdure.testing.cluster import Cluster, LiveStream, wait_until


@pytest.mark.long
async def test_a_steering_message_sent_before_a_worker_kill_joins_the_recovered_turn_once(
    cluster: Cluster,
) -> None:
    session = f"steer-kill-{uuid.uuid4().hex[:6]}"
    async with cluster.temporal():
        worker = cluster.worker()
        url = await cluster.gateway()
        stream = LiveStream()
        async with httpx.AsyncClient(base_url=url, timeout=90) as http:
            body = chat_body(session, user_message('@tool wait {"seconds": 5}'))
            async with http.stream("POST", "/api/chat", json=body) as response:
                reader = asyncio.create_task(stream.read(response))
                await wait_until(
                    lambda: any(c["type"] == "tool-input-available" for _, c in stream.events),
                    timeout=60,
                )
                steering = await http.post(
                    f"/v1/sessions/{session}/submissions",
                    json={
                        "messages": [user_message("@count 3 steered")],
                        "concurrency": "steer",
                    },
                )
                assert steering.status_code == 202, steering.text
                worker.kill()
                cluster.worker()
                await asyncio.wait_for(reader, timeout=90)
            steered = await http.get(
                f"/v1/sessions/{session}/submissions/{steering.json()['submissionId']}"
            )

    joined = [c for _, c in stream.events if c["type"] == "data-steer"]
    assert [c["data"]["message"]["parts"][0]["text"] for c in joined] == ["@count 3 steered"]
    assert stream.text().endswith(counting(3))
    assert (steered.json()["status"], steered.json()["mergedInto"]) == (
        "skipped",
        response.headers["x-perdure-submission-id"],
    )
