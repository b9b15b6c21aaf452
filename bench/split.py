"""A worker and a gateway as separate processes on one store, with a Temporal dev server of
their own: the deployment the benchmarks measure; or, `node=True`, one `perdure serve`. With
`relay=True`, a `perdure relay` beside them, which they all use (the gateway for its head
starts, the worker for its steps)."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from perdure.runtime.temporal_dev import dev_server
from perdure.testing.agents import PERDURE_AGENTS
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.processes import PerdureProcess, wait_healthy
from perdure.testing.stack import free_port

RELAY_SECRET = "bench-relay-secret"


@dataclass(frozen=True)
class SplitStack:
    url: str
    """The gateway's base URL."""
    temporal_address: str


@contextlib.asynccontextmanager
async def split_stack(
    fake: FakeProvider,
    workdir: Path,
    database_url: str,
    *,
    name: str,
    agents: str | None = PERDURE_AGENTS,
    extra_env: dict[str, str] | None = None,
    node: bool = False,
    relay: bool = False,
) -> AsyncIterator[SplitStack]:
    """`agents`: PERDURE_AGENTS, or None for the built-in default agent."""
    address = f"127.0.0.1:{free_port()}"
    async with dev_server(
        address=address,
        ui_port=None,
        db_file=workdir / f"temporal-{name}.db",
        namespace="default",
    ):
        port = free_port()
        env = {
            **fake.env(),
            "PYTHONPATH": str(Path(__file__).parents[1]),
            **({"PERDURE_AGENTS": agents} if agents is not None else {}),
            "PERDURE_MODEL": "openai:gpt-bench",
            "PERDURE_DATABASE_URL": database_url,
            "PERDURE_DATA_DIR": str(workdir),
            "PERDURE_PORT": str(port),
            "TEMPORAL_ADDRESS": address,
            **(extra_env or {}),
        }
        commands = ["serve"] if node else ["worker", "gateway"]
        processes: list[PerdureProcess] = []
        try:
            if relay:
                relay_port = free_port()
                relay_url = f"http://127.0.0.1:{relay_port}"
                env |= {"PERDURE_RELAY_URL": relay_url, "PERDURE_RELAY_SECRET": RELAY_SECRET}
                relay_env = {**env, "PERDURE_RELAY_PORT": str(relay_port)}
                processes.append(PerdureProcess("relay", relay_env, workdir).start())
                await wait_healthy(relay_url, processes[-1])
            processes += [PerdureProcess(command, env, workdir).start() for command in commands]
            url = f"http://127.0.0.1:{port}"
            await wait_healthy(url, processes[-1])
            await asyncio.sleep(1.0)  # let the worker finish connecting
            yield SplitStack(url=url, temporal_address=address)
        finally:
            for process in reversed(processes):
                process.stop()
