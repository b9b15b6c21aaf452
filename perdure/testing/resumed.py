"""A chat read through one gateway until that gateway dies, then resumed through another from
the last event id it saw: the client side of the scale-out and node chaos tests."""

import asyncio
from dataclasses import dataclass, field

import httpx

from perdure.domain.names import turn_workflow_id
from perdure.testing.chat_client import chat_body, user_message
from perdure.testing.cluster import Cluster, LiveStream
from perdure.testing.processes import PerdureProcess


@dataclass
class ResumedTurn:
    """A turn read through one gateway until it dies, then through another from the last id."""

    session: str
    count: int
    delay_ms: int
    before: LiveStream = field(default_factory=LiveStream)
    after: LiveStream = field(default_factory=LiveStream)
    submission_id: str = ""

    @property
    def body(self) -> dict[str, object]:
        return chat_body(
            self.session, user_message(f"@count {self.count} @delay {self.delay_ms} {self.session}")
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
