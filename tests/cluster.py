"""A Perdure cluster of real processes for chaos tests: a Temporal dev server on a SQLite file,
`perdure worker`s and `perdure gateway`s sharing one store, the fake provider."""

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx

from runtime.temporal_dev import dev_server
from tests.fakeprovider.server import FakeProvider
from tests.processes import PerdureProcess, wait_healthy
from tests.stack import free_port

REPO = Path(__file__).parents[1]


class Cluster:
    def __init__(self, workdir: Path, fake: FakeProvider, database_url: str) -> None:
        self.workdir = workdir
        self.temporal_address = f"127.0.0.1:{free_port()}"
        self.temporal_ui_port = free_port()
        self.temporal_db = workdir / "temporal.db"
        self.processes: list[PerdureProcess] = []
        self.env = {
            **fake.env(),
            "PYTHONPATH": str(REPO),
            "PERDURE_AGENTS": "tests.agents",
            "PERDURE_MODEL": "openai:gpt-fake",
            "PERDURE_DATABASE_URL": database_url,
            "PERDURE_DATA_DIR": str(workdir),
            "PERDURE_TASK_QUEUE": f"chaos-{uuid.uuid4().hex[:8]}",
            "TEMPORAL_ADDRESS": self.temporal_address,
            "PERDURE_TEST_TOOL_RUNS": str(workdir / "tool-runs.txt"),
        }

    def temporal(self) -> contextlib.AbstractAsyncContextManager[object]:
        return dev_server(
            address=self.temporal_address,
            ui_port=self.temporal_ui_port,
            db_file=self.temporal_db,
            namespace="default",
        )

    def worker(self, **extra_env: str) -> PerdureProcess:
        process = PerdureProcess("worker", {**self.env, **extra_env}, self.workdir).start()
        self.processes.append(process)
        return process

    async def gateway(self) -> str:
        port = free_port()
        process = PerdureProcess("gateway", {**self.env, "PERDURE_PORT": str(port)}, self.workdir)
        self.processes.append(process.start())
        url = f"http://127.0.0.1:{port}"
        await wait_healthy(url, process)
        self.last_gateway = process
        return url

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
    workdir: Path, fake: FakeProvider, database_url: str
) -> AsyncIterator[Cluster]:
    cluster = Cluster(workdir, fake, database_url)
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

    async def read(self, response: httpx.Response, stop_after_deltas: int | None = None) -> None:
        event_id: int | None = None
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                event_id = int(line[4:])
            elif line == "data: [DONE]":
                self.done = True
                return
            elif line.startswith("data: "):
                assert event_id is not None
                self.events.append((event_id, json.loads(line[6:])))
                self.received_at.append(time.monotonic())
                if stop_after_deltas is not None and self.deltas() >= stop_after_deltas:
                    return


async def wait_until(predicate: Callable[[], bool], timeout: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)
