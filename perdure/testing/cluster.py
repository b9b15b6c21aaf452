"""A Perdure cluster of real processes for chaos tests: a Temporal dev server on a SQLite file,
`perdure worker`s and `perdure gateway`s sharing one store, the fake provider."""

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
from httpx_sse import EventSource
from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from perdure.runtime.temporal_dev import DevServerConfig, dev_server
from perdure.testing.chat_client import chat_body, counting, user_message
from perdure.testing.processes import PerdureProcess, Starter, wait_healthy
from perdure.testing.stack import free_port

PARTITIONS = 4
"""Partitions of a task queue (the server's `matching.numTaskqueueReadPartitions`)."""


class ProviderEnv(Protocol):
    """A model provider the workers are pointed at: the in-process `FakeProvider`, or one in
    another process (the load benchmark's)."""

    def env(self, api_key: str = "fake-key") -> dict[str, str]: ...


class Served(Protocol):
    """What the cluster's workers serve: `agents` (PERDURE_AGENTS), importable from `root`."""

    @property
    def agents(self) -> str: ...

    @property
    def root(self) -> Path: ...


RELAY_SECRET = "cluster-relay-secret"


class Cluster:
    def __init__(
        self,
        workdir: Path,
        fake: ProviderEnv,
        database_url: str,
        served: Served,
        starter: Starter | None = None,
    ) -> None:
        self.workdir = workdir
        self.starter = starter
        self.temporal_address = f"127.0.0.1:{free_port()}"
        self.temporal_db = workdir / "temporal.db"
        self.processes: list[PerdureProcess] = []
        self._client: Client | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self.env = {
            **fake.env(),
            "PYTHONPATH": str(served.root),
            "PERDURE_AGENTS": served.agents,
            "PERDURE_MODEL": "openai:gpt-fake",
            "PERDURE_DATABASE_URL": database_url,
            "PERDURE_DATA_DIR": str(workdir),
            "PERDURE_TASK_QUEUE": f"chaos-{uuid.uuid4().hex[:8]}",
            "TEMPORAL_ADDRESS": self.temporal_address,
            "PERDURE_TEST_TOOL_RUNS": str(workdir / "tool-runs.txt"),
            # Teardown stops workers with SIGTERM: do not wait 30 s for a turn a test left
            # running. Tests of deploys set their own grace.
            "PERDURE_WORKER_SHUTDOWN_GRACE": "1",
        }

    @contextlib.asynccontextmanager
    async def temporal(
        self, *, outlived: bool = False, config: DevServerConfig | None = None
    ) -> AsyncIterator[object]:
        """The cluster's Temporal server (as `perdure dev` starts it, unless `config` says
        otherwise). The cluster's processes are stopped before it, unless they are to outlive
        it (a server restart): a worker whose server is gone spends its whole shutdown timeout
        trying to reach it."""
        async with dev_server(
            address=self.temporal_address,
            ui_port=None,
            db_file=self.temporal_db,
            namespace="default",
            config=config,
        ) as server:
            try:
                yield server
            finally:
                if not outlived:
                    await asyncio.to_thread(self.stop)

    def _started(self, command: str, env: dict[str, str]) -> PerdureProcess:
        process = PerdureProcess(command, env, self.workdir, self.starter).start()
        self.processes.append(process)
        return process

    def worker(self, **extra_env: str) -> PerdureProcess:
        return self._started("worker", {**self.env, **extra_env})

    async def relay(self, port: int | None = None) -> dict[str, str]:
        """A `perdure relay` process (on `port`, to restart one where it was); the environment
        that points a worker at it."""
        port = port or free_port()
        env = {**self.env, "PERDURE_RELAY_PORT": str(port), "PERDURE_RELAY_SECRET": RELAY_SECRET}
        process = self._started("relay", env)
        url = f"http://127.0.0.1:{port}"
        await wait_healthy(url, process)
        self.last_relay = process
        return {"PERDURE_RELAY_URL": url, "PERDURE_RELAY_SECRET": RELAY_SECRET}

    async def gateway(self, **extra_env: str) -> str:
        port = free_port()
        process = self._started("gateway", {**self.env, "PERDURE_PORT": str(port), **extra_env})
        url = f"http://127.0.0.1:{port}"
        await wait_healthy(url, process)
        self.last_gateway = process
        return url

    async def node(self, **extra_env: str) -> tuple[str, PerdureProcess]:
        """A `perdure serve` process (a gateway and a worker in one): its URL, once healthy."""
        port = free_port()
        env = {**self.env, "PERDURE_PORT": str(port), **extra_env}
        process = self._started("serve", env)
        url = f"http://127.0.0.1:{port}"
        await wait_healthy(url, process)
        return url, process

    async def client(self) -> Client:
        """A Temporal client of this cluster's server (one per event loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = await Client.connect(self.temporal_address)
            self._client_loop = loop
        return self._client

    async def pollers(self) -> set[str]:
        """Identities (`pid@host`) that polled the task queue for activities *and* workflows
        recently (the server forgets a poller a few minutes after its last poll). A task queue
        has 4 partitions and a worker's long polls land on any of them, so all are asked."""
        client = await self.client()
        queue = self.env["PERDURE_TASK_QUEUE"]
        found: list[set[str]] = []
        for kind in (
            TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        ):
            identities: set[str] = set()
            for name in [queue] + [f"/_sys/{queue}/{n}" for n in range(1, PARTITIONS)]:
                response = await client.workflow_service.describe_task_queue(
                    DescribeTaskQueueRequest(
                        namespace="default",
                        task_queue=TaskQueue(name=name, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
                        task_queue_type=kind,
                    )
                )
                identities |= {poller.identity for poller in response.pollers}
            found.append(identities)
        return found[0] & found[1]

    async def wait_polling(self, worker: PerdureProcess, timeout: float = 60) -> None:
        """Until the worker process polls the task queue (its identity is `pid@host`)."""
        deadline = asyncio.get_running_loop().time() + timeout
        prefix = f"{worker.pid}@"
        while not any(identity.startswith(prefix) for identity in await self.pollers()):
            if not worker.running():
                raise AssertionError(f"perdure worker exited:\n{worker.output()}")
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"worker {worker.pid} not polling after {timeout} s")
            await asyncio.sleep(0.1)

    def tool_runs(self) -> list[str]:
        path = Path(self.env["PERDURE_TEST_TOOL_RUNS"])
        return path.read_text().splitlines() if path.exists() else []

    def logs(self) -> str:
        return "\n".join(f"--- {p.command}\n{p.output()[-4000:]}" for p in self.processes)

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


@contextlib.asynccontextmanager
async def running_cluster(
    workdir: Path,
    fake: ProviderEnv,
    database_url: str,
    served: Served,
    starter: Starter | None = None,
) -> AsyncIterator[Cluster]:
    """The cluster's processes are started by `starter` (by default, the `perdure` executable)."""
    cluster = Cluster(workdir, fake, database_url, served, starter)
    try:
        yield cluster
    finally:
        cluster.stop()


class LiveStream:
    """An SSE reader that records every event and can be told to drop its connection."""

    def __init__(self) -> None:
        self.events: list[tuple[int, dict[str, Any]]] = []
        self.received_at: list[float] = []
        """`time.monotonic()` of each event, for benchmarks."""
        self.done = False

    def text(self) -> str:
        return "".join(c.get("delta", "") for _, c in self.events if c["type"] == "text-delta")

    def deltas(self) -> int:
        return sum(1 for _, c in self.events if c["type"] == "text-delta")

    def recovery_kinds(self) -> list[tuple[str, bool]]:
        """Each recovery notice's kind, and whether text had been streamed before it. A `retry`
        before any text is an ordinary recovery (on an overloaded machine a first attempt can
        miss its heartbeat before the provider answers); a `retry` after text would answer
        afresh what the client already shows."""
        found: list[tuple[str, bool]] = []
        streamed = False
        for _, chunk in self.events:
            if chunk["type"] == "text-delta":
                streamed = True
            elif chunk["type"] == "data-recovery":
                found.append((chunk["data"].get("kind", ""), streamed))
        return found

    async def read(self, response: httpx.Response, stop_after_deltas: int | None = None) -> None:
        async for event in EventSource(response).aiter_sse():
            if not event.data:
                continue  # a keep-alive comment
            if event.data == "[DONE]":
                self.done = True
                return
            seq = int(event.id.rsplit(":", 1)[-1])  # `<submission>:<seq>`
            self.events.append((seq, json.loads(event.data)))
            self.received_at.append(time.monotonic())
            if stop_after_deltas is not None and self.deltas() >= stop_after_deltas:
                return


async def wait_until(predicate: Callable[[], bool], timeout: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def rolling_restart(
    cluster: Cluster, workers: list[PerdureProcess], **extra_env: str
) -> list[PerdureProcess]:
    """A deploy: each worker in turn gets SIGTERM, its replacement is started and polls before
    the next one is stopped. Returns the replacements; the old workers may still be draining."""
    replacements: list[PerdureProcess] = []
    for old in workers:
        old.terminate()
        new = cluster.worker(**extra_env)
        await cluster.wait_polling(new)
        replacements.append(new)
    return replacements


@dataclass
class CountingTurn:
    """One streamed turn whose answer must be exactly `1 2 … count`: the fake provider counts,
    so a gap, a duplicate or a restarted answer shows in the text."""

    session: str
    count: int
    delay_ms: int
    agent: str | None = None
    stream: LiveStream = field(default_factory=LiveStream)
    posted_at: float = 0.0
    failure: str | None = None
    """Why no complete stream was read (HTTP status, transport error, timeout)."""

    @property
    def user_text(self) -> str:
        return f"@count {self.count} @delay {self.delay_ms} {self.session}"

    async def run(self, http: httpx.AsyncClient, timeout: float = 120) -> None:
        extra = {"agent": self.agent} if self.agent else {}
        body = chat_body(self.session, user_message(self.user_text), **extra)
        self.posted_at = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                async with http.stream("POST", "/api/chat", json=body) as response:
                    if response.status_code != 200:
                        await response.aread()
                        self.failure = f"HTTP {response.status_code}: {response.text[:200]}"
                        return
                    await self.stream.read(response)
        except (httpx.HTTPError, TimeoutError) as error:
            self.failure = f"{type(error).__name__}: {error}"

    def first_token_seconds(self) -> float | None:
        for (_, chunk), at in zip(self.stream.events, self.stream.received_at, strict=True):
            if chunk["type"] == "text-delta":
                return at - self.posted_at
        return None

    def errors(self) -> list[str]:
        """No complete answer: the request failed, the stream broke, or the turn ended in error."""
        found = [self.failure] if self.failure else []
        if not self.failure and not self.stream.done:
            found.append("the stream ended without [DONE]")
        found += [
            f"{chunk['type']} chunk: {chunk.get('errorText') or chunk.get('reason') or ''}"
            for _, chunk in self.stream.events
            if chunk["type"] in ("error", "abort")
        ]
        return found

    def corruption(self) -> list[str]:
        """What the client saw that differs from the exact answer."""
        events = self.stream.events
        found: list[str] = []
        ids = [seq for seq, _ in events]
        if ids != list(range(len(ids))):
            found.append(f"event ids not 0…{len(ids) - 1} without gap or duplicate")
        starts = sum(1 for _, chunk in events if chunk["type"] == "start")
        if starts != 1:
            found.append(f"{starts} start chunks")
        if self.stream.done and self.stream.text() != counting(self.count):
            found.append(f"text is not 1…{self.count}: {_excerpt(self.stream.text(), self.count)}")
        return found

    def recoveries(self) -> list[dict[str, Any]]:
        return [chunk for _, chunk in self.stream.events if chunk["type"] == "data-recovery"]


def _excerpt(text: str, count: int) -> str:
    """Where the text first departs from the count, for a failure message."""
    expected = counting(count)
    at = next(
        (i for i, (a, b) in enumerate(zip(text, expected, strict=False)) if a != b),
        min(len(text), len(expected)),
    )
    return f"{len(text)} chars (expected {len(expected)}), differs at {at}: …{text[max(0, at - 20) : at + 20]!r}"


async def stored_answer_problems(http: httpx.AsyncClient, turn: CountingTurn) -> list[str]:
    """What the store holds for a finished turn that differs from the exact answer: the session
    idle, one user and one assistant message, the assistant text the full count, completed."""
    for _ in range(300):
        info = (await http.get(f"/v1/sessions/{turn.session}")).json()
        if info.get("status") == "idle":
            break
        await asyncio.sleep(0.05)
    else:
        return [f"session still {info.get('status')!r}"]
    messages = (await http.get(f"/api/chat/{turn.session}/messages")).json()
    roles = [message["role"] for message in messages]
    if roles != ["user", "assistant"]:
        return [f"stored messages {roles}"]
    answer = messages[1]
    text = "".join(part["text"] for part in answer["parts"] if part["type"] == "text")
    found = []
    if text != counting(turn.count):
        found.append(f"stored text is not 1…{turn.count}: {_excerpt(text, turn.count)}")
    status = (answer.get("metadata") or {}).get("status")
    if status != "completed":
        found.append(f"stored answer status {status!r}")
    return found
