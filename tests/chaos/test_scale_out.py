"""The production topology as local processes: two gateways and two workers on one PostgreSQL
store and one Temporal server. Answers stream through gateway A; gateway A and a worker that
runs some of them are SIGKILLed mid-answer; every client resumes through gateway B with the
last event id it saw, the surviving worker takes the killed worker's turns over, and every
answer, streamed and stored, is exactly the full count."""

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

TURNS = 6
COUNT = 300
DELAY_MS = 20
"""6 s of answer each: long enough that the kill lands mid-answer for every turn."""


async def test_two_gateways_and_two_workers_survive_losing_one_of_each_mid_answer(
    postgres_cluster: Cluster,
) -> None:
    cluster = postgres_cluster
    async with cluster.temporal():
        workers = [cluster.worker(), cluster.worker()]
        gateway_a = await cluster.gateway()
        process_a = cluster.last_gateway
        gateway_b = await cluster.gateway()
        for worker in workers:
            await cluster.wait_polling(worker)
        tag = uuid.uuid4().hex[:6]
        turns = [ResumedTurn(f"scale-{tag}-{n}", COUNT, DELAY_MS) for n in range(TURNS)]
        limits = httpx.Limits(max_connections=TURNS + 4)
        async with httpx.AsyncClient(base_url=gateway_a, timeout=90, limits=limits) as http:
            reading = [asyncio.create_task(read_until_cut(http, turn)) for turn in turns]
            await wait_until(lambda: all(t.before.deltas() >= 30 for t in turns), timeout=60)
            running_on = [await worker_running(cluster, workers, turn) for turn in turns]
            victim = next(w for w in workers if w.pid == running_on[0])
            process_a.kill()
            victim.kill()
            await asyncio.wait_for(asyncio.gather(*reading), timeout=30)

        cut_at = [turn.before.deltas() for turn in turns]
        await asyncio.wait_for(
            asyncio.gather(*(resume(gateway_b, turn) for turn in turns)), timeout=120
        )
        async with httpx.AsyncClient(base_url=gateway_b, timeout=30) as http:
            stored = [
                await stored_answer_problems(http, CountingTurn(turn.session, COUNT, DELAY_MS))
                for turn in turns
            ]

    assert all(0 < cut < COUNT for cut in cut_at), cut_at
    assert running_on.count(victim.pid) >= 1
    for turn in turns:
        ids = turn.event_ids()
        assert turn.after.done, (turn.session, cluster.logs())
        assert ids == list(range(len(ids))), turn.session
        assert turn.text() == counting(COUNT), turn.session
    assert stored == [[]] * TURNS, stored
