"""Nodes (`perdure serve`: a gateway and a worker in one process) behind a load balancer, on
one PostgreSQL store and one Temporal server. A node runs the turns it takes in (eager start);
when it is SIGKILLed mid-answer, the other node's worker takes those turns over, every client
resumes through the other node with the last event id it saw, and every answer, streamed and
stored, is exactly the full count."""

import asyncio
import uuid

import httpx

from perdure.testing.chat_client import counting
from perdure.testing.cluster import (
    Cluster,
    CountingTurn,
    stored_answer_problems,
    wait_until,
)
from perdure.testing.resumed import ResumedTurn, read_until_cut, resume, worker_running

TURNS = 4
COUNT = 300
DELAY_MS = 20


async def test_a_node_killed_mid_answer_loses_nothing_its_turns_finish_on_the_other(
    postgres_cluster: Cluster,
) -> None:
    cluster = postgres_cluster
    async with cluster.temporal():
        url_a, node_a = await cluster.node()
        url_b, node_b = await cluster.node()
        for node in (node_a, node_b):
            await cluster.wait_polling(node)
        tag = uuid.uuid4().hex[:6]
        turns = [ResumedTurn(f"node-{tag}-{n}", COUNT, DELAY_MS) for n in range(TURNS)]
        limits = httpx.Limits(max_connections=TURNS + 4)
        async with httpx.AsyncClient(base_url=url_a, timeout=90, limits=limits) as http:
            reading = [asyncio.create_task(read_until_cut(http, turn)) for turn in turns]
            await wait_until(lambda: all(t.before.deltas() >= 30 for t in turns), timeout=60)
            running_on = [await worker_running(cluster, [node_a, node_b], turn) for turn in turns]
            node_a.kill()
            await asyncio.wait_for(asyncio.gather(*reading), timeout=30)

        cut_at = [turn.before.deltas() for turn in turns]
        await asyncio.wait_for(asyncio.gather(*(resume(url_b, turn) for turn in turns)), 120)
        async with httpx.AsyncClient(base_url=url_b, timeout=30) as http:
            stored = [
                await stored_answer_problems(http, CountingTurn(turn.session, COUNT, DELAY_MS))
                for turn in turns
            ]

    assert running_on == [node_a.pid] * TURNS  # eager start: the node runs what it takes in
    assert all(0 < cut < COUNT for cut in cut_at), cut_at
    for turn in turns:
        ids = turn.event_ids()
        assert turn.after.done, (turn.session, cluster.logs())
        assert ids == list(range(len(ids))), turn.session
        assert turn.text() == counting(COUNT), turn.session
    assert stored == [[]] * TURNS, stored
