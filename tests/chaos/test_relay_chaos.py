"""Through the provider relay (`perdure relay`, its own process), a worker SIGKILLed mid-answer
loses nothing and repeats nothing: the client's text and the stored answer are exactly the
model's single generation, from one provider request, on every API that has no server-side
resume of its own. With the relay killed too, the answer continues the way the provider allows
(prefill or instruction), never answered afresh."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from perdure.testing.chat_client import chat_body, counting, user_message
from perdure.testing.cluster import Cluster, LiveStream, running_cluster, wait_until
from perdure.testing.databases import MigratedTemplates
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.process_spawner import ProcessSpawner
from perdure.testing.processes import PerdureProcess
from tests.databases import migrated_database_url
from tests.served import CLUSTER
from tests.waiting import eventually

OLDER_PROMPT = "You are the previous deploy's assistant."
"""The head-starting gateway's prompt of agent `deployed-prompt`: not the workers'."""
AGENTS = {
    "default": "Chat Completions",
    "anthropic": "claude-haiku-4-5, prefill era",
    "claude-4-7": "claude-opus-4-7, today's",
}


@dataclass
class Relayed:
    """One cluster for the module (Temporal, a relay, two gateways: one that sends head starts
    through the relay, one that does not): a test starts its worker."""

    cluster: Cluster
    relay_env: dict[str, str]
    url: str
    head_starting_url: str
    """A gateway with the relay's address and secret (and no say in the agents' prompt)."""

    async def head_starts(self) -> dict[str, int]:
        async with httpx.AsyncClient(base_url=self.relay_env["PERDURE_RELAY_URL"]) as http:
            stats: dict[str, int] = (await http.get("/stats")).json()["head_starts"]
        return stats

    def workers(self) -> list[PerdureProcess]:
        return [p for p in self.cluster.processes if p.command == "worker" and p.running()]


@pytest.fixture(scope="module")
async def relayed(
    tmp_path_factory: pytest.TempPathFactory,
    fake_provider: FakeProvider,
    store_templates: MigratedTemplates,
    spawner: ProcessSpawner,
) -> AsyncIterator[Relayed]:
    workdir = tmp_path_factory.mktemp("relay-chaos")
    with migrated_database_url(store_templates, "sqlite", workdir) as store:
        async with (
            running_cluster(workdir, fake_provider, store, CLUSTER, spawner) as cluster,
            cluster.temporal(),
        ):
            relay_env = await cluster.relay()
            yield Relayed(
                cluster,
                relay_env,
                await cluster.gateway(),
                await cluster.gateway(**relay_env, PERDURE_TEST_SYSTEM_PROMPT=OLDER_PROMPT),
            )


async def answer(url: str, session: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:

        async def idle() -> bool:
            return bool((await http.get(f"/v1/sessions/{session}")).json()["status"] == "idle")

        await eventually(idle, what=f"session {session} idle")
        messages = (await http.get(f"/api/chat/{session}/messages")).json()
    assert [m["role"] for m in messages] == ["user", "assistant"]
    answer: dict[str, Any] = messages[1]
    return answer


async def killed_mid_answer(
    relayed: Relayed, agent: str, *, kill_relay: bool = False, url: str | None = None
) -> tuple[LiveStream, str]:
    """Send a 300-number answer (through the gateway at `url`), SIGKILL the worker (and the
    relay) after 40 numbers, start a new worker (and relay); the stream and the session."""
    cluster, relay_env = relayed.cluster, relayed.relay_env
    url = url or relayed.url
    if not relayed.workers():
        await cluster.wait_polling(cluster.worker(**relay_env))
    session = f"relay-{agent}-{uuid.uuid4().hex[:6]}"
    text = f"@count 300 @delay 10 {session}"
    stream = LiveStream()
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        body = chat_body(session, user_message(text), agent=agent)
        async with http.stream("POST", "/api/chat", json=body) as response:
            reader = asyncio.create_task(stream.read(response))
            await wait_until(lambda: stream.deltas() >= 40)
            for worker in relayed.workers():
                worker.kill()
            if kill_relay:
                cluster.last_relay.kill()
                await cluster.relay(port=int(relay_env["PERDURE_RELAY_URL"].rsplit(":", 1)[1]))
            cluster.worker(**relay_env)
            await asyncio.wait_for(reader, timeout=90)
    return stream, session


@pytest.mark.parametrize("agent", list(AGENTS))
async def test_a_killed_worker_s_answer_is_the_single_generation_of_one_provider_request(
    relayed: Relayed, fake_provider: FakeProvider, agent: str
) -> None:
    stream, session = await killed_mid_answer(relayed, agent)
    stored = await answer(relayed.url, session)

    assert stream.done, relayed.cluster.logs()
    assert stream.text() == counting(300)
    assert [seq for seq, _ in stream.events] == list(range(len(stream.events)))
    (request,) = fake_provider.requests_for(f"@count 300 @delay 10 {session}")
    assert request.status == 200
    texts = [p["text"] for p in stored["parts"] if p["type"] == "text"]
    assert texts == [counting(300)]


@pytest.mark.parametrize("agent", ["anthropic", "claude-4-7"])
async def test_with_the_relay_killed_too_the_answer_continues_by_the_provider_s_own_way(
    relayed: Relayed, fake_provider: FakeProvider, agent: str
) -> None:
    stream, session = await killed_mid_answer(relayed, agent, kill_relay=True)
    stored = await answer(relayed.url, session)

    assert stream.done, relayed.cluster.logs()
    assert stream.text() == counting(300)
    kinds = stream.recovery_kinds()
    assert ("continue", True) in kinds and ("retry", True) not in kinds, kinds
    requests = fake_provider.requests_for(f"@count 300 @delay 10 {session}")
    assert len(requests) >= 2  # the relay's copy was lost: continued by a second request
    last = requests[-1].body["messages"][-1]
    assert last["role"] == ("assistant" if agent == "anthropic" else "user")  # prefill, instruction
    assert [p["text"] for p in stored["parts"] if p["type"] == "text"] == [counting(300)]


async def answered(relayed: Relayed, agent: str, text: str) -> tuple[LiveStream, str]:
    """The whole answer to `text` in a new session, through the head-starting gateway; the
    stream and the user text sent."""
    if not relayed.workers():
        await relayed.cluster.wait_polling(relayed.cluster.worker(**relayed.relay_env))
    session = f"head-{agent}-{uuid.uuid4().hex[:6]}"
    stream = LiveStream()
    async with httpx.AsyncClient(base_url=relayed.head_starting_url, timeout=60) as http:
        sent = f"{text} {session}"
        body = chat_body(session, user_message(sent), agent=agent)
        async with http.stream("POST", "/api/chat", json=body) as response:
            await asyncio.wait_for(stream.read(response), timeout=60)
    return stream, sent


@pytest.mark.parametrize("agent", ["slow-start", "slow-start-claude-4-7"])
async def test_a_head_started_answer_is_adopted_by_its_step_exactly_with_one_provider_request(
    relayed: Relayed, fake_provider: FakeProvider, agent: str
) -> None:
    before = await relayed.head_starts()

    stream, sent = await answered(relayed, agent, "@count 30 @delay 5")

    assert stream.done, relayed.cluster.logs()
    assert stream.text() == counting(30)
    (request,) = fake_provider.requests_for(sent)
    assert request.deltas == 30
    after = await relayed.head_starts()
    assert after.get("adopted", 0) == before.get("adopted", 0) + 1
    assert after.get("superseded", 0) == before.get("superseded", 0)


async def test_a_head_start_unlike_the_step_s_request_is_cancelled_at_the_relay(
    relayed: Relayed, fake_provider: FakeProvider
) -> None:
    before = await relayed.head_starts()

    stream, sent = await answered(relayed, "deployed-prompt", "@count 200 @delay 10")

    assert stream.done, relayed.cluster.logs()
    assert stream.text() == counting(200)
    early, own = fake_provider.requests_for(sent)
    assert early.body["messages"][0]["content"] == OLDER_PROMPT
    assert own.body["messages"][0]["content"] != OLDER_PROMPT
    assert early.deltas < 200 and own.deltas == 200  # the early stream was cut off
    after = await relayed.head_starts()
    assert after.get("superseded", 0) == before.get("superseded", 0) + 1


async def test_a_worker_killed_while_its_head_started_stream_runs_continues_exactly(
    relayed: Relayed, fake_provider: FakeProvider
) -> None:
    before = await relayed.head_starts()

    stream, session = await killed_mid_answer(relayed, "default", url=relayed.head_starting_url)
    stored = await answer(relayed.head_starting_url, session)

    assert stream.done, relayed.cluster.logs()
    assert stream.text() == counting(300)
    assert [seq for seq, _ in stream.events] == list(range(len(stream.events)))
    (request,) = fake_provider.requests_for(f"@count 300 @delay 10 {session}")
    assert request.deltas == 300
    assert [p["text"] for p in stored["parts"] if p["type"] == "text"] == [counting(300)]
    after = await relayed.head_starts()
    assert after.get("adopted", 0) == before.get("adopted", 0) + 1


async def test_a_stop_before_the_first_step_cancels_the_head_start_at_the_relay(
    relayed: Relayed, fake_provider: FakeProvider
) -> None:
    if not relayed.workers():
        await relayed.cluster.wait_polling(relayed.cluster.worker(**relayed.relay_env))
    session = f"head-stop-{uuid.uuid4().hex[:6]}"
    text = f"@count 500 @delay 20 {session}"
    before = await relayed.head_starts()
    async with httpx.AsyncClient(base_url=relayed.head_starting_url, timeout=30) as http:
        body = chat_body(session, user_message(text), agent="slow-start")
        async with http.stream("POST", "/api/chat", json=body) as response:
            assert response.status_code == 200
            await eventually(lambda: bool(fake_provider.requests_for(text)), what="head start")
            stopped = await http.post(f"/api/chat/{session}/stop")
            assert stopped.json()["result"] == "stopped", stopped.text
            await response.aread()

    async def cancelled() -> bool:
        after = await relayed.head_starts()
        return after.get("cancelled", 0) == before.get("cancelled", 0) + 1

    await eventually(cancelled, what="the head start cancelled at the relay")
    # The first request is the head start's; the step, stopped after its hook, sends none.
    (early,) = fake_provider.requests_for(text)
    assert early.deltas < 500
    # An ordinary ending: the session takes the next message (whether the stop came before the
    # step opened the answer or after, which the machine's load decides).
    following = LiveStream()
    async with httpx.AsyncClient(base_url=relayed.head_starting_url, timeout=30) as http:
        body = chat_body(session, user_message(f"@count 3 next-{session}"), agent="slow-start")
        async with http.stream("POST", "/api/chat", json=body) as response:
            await asyncio.wait_for(following.read(response), timeout=30)
    assert following.done and following.text() == counting(3)
