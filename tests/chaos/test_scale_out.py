"""The production topology as local processes: two gateways and two workers on one PostgreSQL
store and one Temporal server. Answers stream through gateway A; gateway A and a worker that
runs some of them are SIGKILLed mid-answer; every client resumes through gateway B with the
last event id it saw, the surviving worker takes the killed worker's turns over, and every
answer, streamed and stored, is exactly the full count."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from perdure.domain.names import turn_workflow_id
from perdure.testing.chat_client import chat_body, counting, user_message
from perdure.testing.cluster import (
    Cluster,
    CountingTurn,
    LiveStream,
    running_cluster,
    stored_answer_problems,
    wait_until,
)
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.processes import PerdureProcess
from tests.databases import database_url
from tests.served import CLUSTER

TURNS = 6
COUNT = 300
DELAY_MS = 20
"""6 s of answer each: long enough that the kill lands mid-answer for every turn."""


@pytest.fixture
async def cluster(tmp_path: Path, fake_provider: FakeProvider) -> AsyncIterator[Cluster]:
    with database_url("postgres", tmp_path) as url:  # the scale-out store
        async with running_cluster(tmp_path, fake_provider, url, CLUSTER) as running:
            yield running


@dataclass
class ResumedTurn:
    """A turn read through one gateway until it dies, then through another from the last id."""

    session: str
    before: LiveStream = field(default_factory=LiveStream)
    after: LiveStream = field(default_factory=LiveStream)
    submission_id: str = ""

    @property
    def body(self) -> dict[str, object]:
        return chat_body(
            self.session, user_message(f"@count {COUNT} @delay {DELAY_MS} {self.session}")
        )

    def event_ids(self) -> list[int]:
        return [seq for seq, _ in self.before.events + self.after.events]

    def text(self) -> str:
        return self.before.text() + self.after.text()


async def read_until_cut(http: httpx.AsyncClient, turn: ResumedTurn) -> None:
    """Reads the turn's stream until its gateway dies under it."""
    async with http.stream("POST", "/api/chat", json=turn.body) as response:
        assert response.status_code == 200, await response.aread()
        turn.submission_id = response.headers["x-perdure-submission-id"]
        try:
            await turn.before.read(response)
        except httpx.HTTPError:
            return  # the gateway was killed: what was read is kept


async def resume(url: str, turn: ResumedTurn) -> None:
    last_seen = turn.before.events[-1][0]
    async with httpx.AsyncClient(base_url=url, timeout=90) as http:
        async with http.stream(
            "GET",
            f"/api/chat/{turn.session}/stream",
            headers={"Last-Event-ID": f"{turn.submission_id}:{last_seen}"},
        ) as response:
            assert response.status_code == 200, await response.aread()
            await turn.after.read(response)


async def worker_running(cluster: Cluster, workers: list[PerdureProcess], turn: ResumedTurn) -> int:
    """The pid of the worker whose model-step activity streams the turn's answer."""
    client = await cluster.client()
    handle = client.get_workflow_handle(turn_workflow_id(turn.submission_id))
    pids = {worker.pid for worker in workers}
    for _ in range(100):
        description = await handle.describe()
        for activity in description.raw_description.pending_activities:
            pid = activity.last_worker_identity.split("@", 1)[0]
            if pid.isdigit() and int(pid) in pids:
                return int(pid)
        await asyncio.sleep(0.05)
    raise AssertionError(f"no worker runs turn {turn.session}")


async def test_two_gateways_and_two_workers_survive_losing_one_of_each_mid_answer(
    cluster: Cluster,
) -> None:
    async with cluster.temporal():
        workers = [cluster.worker(), cluster.worker()]
        gateway_a = await cluster.gateway()
        process_a = cluster.last_gateway
        gateway_b = await cluster.gateway()
        for worker in workers:
            await cluster.wait_polling(worker)
        tag = uuid.uuid4().hex[:6]
        turns = [ResumedTurn(f"scale-{tag}-{n}") for n in range(TURNS)]
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
