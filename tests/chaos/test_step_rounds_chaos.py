"""A worker killed while a model step runs a tool round itself (activities/step_rounds.py): the
step's next attempt goes on from the log, the interrupted call runs again (its tool is
idempotent) and the answer is exact, each call settled once."""

import asyncio
import uuid

import httpx
import pytest

from perdure.testing.chat_client import chat_body, user_message
from perdure.testing.cluster import Cluster, LiveStream, wait_until


def calls_started(stream: LiveStream) -> int:
    return sum(1 for _, chunk in stream.events if chunk["type"] == "tool-input-available")


@pytest.mark.store_agnostic  # the step's recovery reads the log alike on both stores
async def test_a_worker_killed_during_a_round_in_the_step_loses_and_repeats_nothing(
    cluster: Cluster,
) -> None:
    async with cluster.temporal():
        worker = cluster.worker()
        url = await cluster.gateway()
        session = f"round-kill-{uuid.uuid4().hex[:6]}"
        script = '@tool wait {"seconds": 0}\n@tool wait {"seconds": 4}'
        stream = LiveStream()
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            body = chat_body(session, user_message(f"{script} {session}"))
            async with http.stream("POST", "/api/chat", json=body) as response:
                reader = asyncio.create_task(stream.read(response))
                await wait_until(lambda: calls_started(stream) == 2)  # the long call runs
                worker.kill()
                cluster.worker()
                await asyncio.wait_for(reader, timeout=60)

    assert stream.done, cluster.logs()
    assert stream.text() == "Tool wait returned: waited 0.0 s Tool wait returned: waited 4.0 s"
    outputs = [c for _, c in stream.events if c["type"] == "tool-output-available"]
    assert [c["output"] for c in outputs] == ["waited 0.0 s", "waited 4.0 s"]
    assert len({c["toolCallId"] for c in outputs}) == 2
    assert [seq for seq, _ in stream.events] == list(range(len(stream.events)))
