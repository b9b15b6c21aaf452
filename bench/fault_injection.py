"""The faults `bench.faults` injects, and the cluster each one runs on.

Each fault is injected the way the chaos and end-to-end specifications inject it (tests/chaos/,
tests/e2e/test_store_disk_full.py, tests/e2e/test_recovery.py): real processes SIGKILLed, a TCP
proxy (`perdure.testing.tcp_proxy`) that silences or resets a link, a small tmpfs filled, or a
directive that makes the fake provider stall or drop its stream. An injector returns the instant
(`time.monotonic()`) the system was whole again: the heal of an outage, the kill of a process
whose replacement is started at once, or None for a fault of the provider, which strikes inside
the answer by itself.
"""

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from bench._support import SERVED
from bench.recovery import worker_running
from perdure.runtime.temporal_dev import split_address
from perdure.testing.cluster import Cluster, CountingTurn, running_cluster
from perdure.testing.databases import database_url
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.processes import PerdureProcess
from perdure.testing.small_disk import fill, small_disk
from perdure.testing.tcp_proxy import TcpProxy, tcp_proxy

OUTAGE_SECONDS = 10.0
"""How long a link stays silent, or the disk full."""
RESTART_SECONDS = 5.0
"""How long the Temporal server, or the store, is away before it is back."""
Store = Literal["sqlite", "postgres", "tmpfs"]


class TemporalServer:
    """The cluster's Temporal dev server, which a fault may SIGKILL and start again on the same
    SQLite file and port (the cluster's processes outlive it, as in tests/chaos/test_chaos.py)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._stack = contextlib.AsyncExitStack()
        self._process: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        self._stack = contextlib.AsyncExitStack()
        server = await self._stack.enter_async_context(self.cluster.temporal(outlived=True))
        self._process = server if isinstance(server, subprocess.Popen) else None

    async def kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            await asyncio.to_thread(self._process.wait, 10)
        await self._stack.aclose()

    async def stop(self) -> None:
        """The cluster's processes first: a worker whose server is gone waits for it."""
        await asyncio.to_thread(self.cluster.stop)
        await self._stack.aclose()


@dataclass
class Rig:
    """One fault's running cluster: where clients stream from, and what the fault acts on."""

    cluster: Cluster
    temporal: TemporalServer
    gateways: list[str] = field(default_factory=list)
    """Clients stream from the first and resume from the first still listed."""
    gateway_processes: dict[str, PerdureProcess] = field(default_factory=dict)
    workers: list[PerdureProcess] = field(default_factory=list)
    link: TcpProxy | None = None
    """The proxy in front of Temporal or of the store, for a fault that cuts one."""
    disk: Path | None = None


Injector = Callable[[Rig, Sequence[CountingTurn]], Awaitable[float | None]]


@dataclass(frozen=True)
class Fault:
    name: str
    inject: Injector
    store: Store = "sqlite"
    gateways: int = 1
    relay: bool = False
    temporal_link: bool = False
    agent: str | None = None
    """The agent of `perdure.testing.agents.chat` the chats use (None: `default`)."""
    directives: str = ""
    """Fake-provider directives added to every chat's message."""
    outage: bool = False


async def kill_worker(rig: Rig, turns: Sequence[CountingTurn]) -> float:
    """SIGKILL the worker running the first chat's model step; a replacement starts at once."""
    victim = await worker_running(rig.cluster, turns[0])
    killed = time.monotonic()
    victim.kill()
    rig.workers.remove(victim)
    rig.workers.append(rig.cluster.worker())
    return killed


async def kill_gateway(rig: Rig, turns: Sequence[CountingTurn]) -> float:
    """SIGKILL the gateway the clients stream from; they resume from the next one."""
    url = rig.gateways.pop(0)
    killed = time.monotonic()
    rig.gateway_processes.pop(url).kill()
    return killed


async def kill_relay(rig: Rig, turns: Sequence[CountingTurn]) -> float:
    """SIGKILL the relay and every worker; the relay starts again on its port and two workers
    start at once (tests/chaos/test_relay_chaos.py, "the relay killed too")."""
    killed = time.monotonic()
    for worker in rig.workers:
        worker.kill()
    await _relay_killed_and_started(rig)
    rig.workers[:] = [rig.cluster.worker(), rig.cluster.worker()]
    return killed


async def restart_relay(rig: Rig, turns: Sequence[CountingTurn]) -> float:
    """SIGKILL the relay alone, the workers streaming through it; it starts again on its port
    at once."""
    killed = time.monotonic()
    await _relay_killed_and_started(rig)
    return killed


async def _relay_killed_and_started(rig: Rig) -> None:
    rig.cluster.last_relay.kill()
    port = int(rig.cluster.env["PERDURE_RELAY_URL"].rsplit(":", 1)[1])
    await rig.cluster.relay(port=port)


async def restart_temporal(rig: Rig, turns: Sequence[CountingTurn]) -> float:
    """SIGKILL the Temporal dev server; start it again on the same file and port 5 s later."""
    await rig.temporal.kill()
    await asyncio.sleep(RESTART_SECONDS)
    await rig.temporal.start()
    return time.monotonic()


async def silence_link(rig: Rig, turns: Sequence[CountingTurn]) -> float:
    """A partition: the link's connections held open and silent for 10 s."""
    assert rig.link is not None
    rig.link.silence()
    await asyncio.sleep(OUTAGE_SECONDS)
    rig.link.restore()
    return time.monotonic()


async def refuse_link(rig: Rig, turns: Sequence[CountingTurn]) -> float:
    """A restarting server: every connection reset, new ones refused, for 5 s."""
    assert rig.link is not None
    rig.link.refuse()
    await asyncio.sleep(RESTART_SECONDS)
    rig.link.restore()
    return time.monotonic()


async def fill_disk(rig: Rig, turns: Sequence[CountingTurn]) -> float:
    """Every free byte of the store's disk taken for 10 s, then given back."""
    assert rig.disk is not None
    filler = fill(rig.disk)
    await asyncio.sleep(OUTAGE_SECONDS)
    filler.unlink()
    return time.monotonic()


async def in_band(rig: Rig, turns: Sequence[CountingTurn]) -> None:
    """The fake provider's directive strikes inside the answer: nothing to do."""
    return None


FAULTS = [
    Fault("worker-kill", kill_worker),
    Fault("gateway-kill", kill_gateway, gateways=2),
    Fault("relay-kill", kill_relay, relay=True),
    Fault("relay-restart", restart_relay, relay=True),
    Fault("temporal-restart", restart_temporal, outage=True),
    Fault("temporal-cut", silence_link, temporal_link=True, outage=True),
    Fault("store-restart", refuse_link, store="postgres", outage=True),
    Fault("store-cut", silence_link, store="postgres", outage=True),
    Fault("disk-full", fill_disk, store="tmpfs", outage=True),
    Fault("provider-stall", in_band, agent="stalling", directives="@stall_after 40"),
    Fault("provider-fail", in_band, directives="@disconnect_after 40 @fail 503"),
]


async def ready(rig: Rig, fault: Fault) -> None:
    """Before a run: the fault's gateways listening and every worker polling."""
    while len(rig.gateways) < fault.gateways:
        url = await rig.cluster.gateway()
        rig.gateways.append(url)
        rig.gateway_processes[url] = rig.cluster.last_gateway
    for worker in rig.workers:
        await rig.cluster.wait_polling(worker)


@contextlib.asynccontextmanager
async def rig_for(fault: Fault, workdir: Path, fake: FakeProvider) -> AsyncIterator[Rig]:
    """Temporal, two workers and the fault's gateways on the fault's store, with the relay or
    the proxy it needs; everything stopped (workers first) and unmounted at the end."""
    async with contextlib.AsyncExitStack() as stack:
        disk = stack.enter_context(small_disk(workdir)) if fault.store == "tmpfs" else None
        backend = "postgres" if fault.store == "postgres" else "sqlite"
        store_url = stack.enter_context(database_url(backend, disk or workdir))
        cluster = await stack.enter_async_context(running_cluster(workdir, fake, store_url, SERVED))
        rig = Rig(cluster, TemporalServer(cluster), disk=disk)
        await rig.temporal.start()
        stack.push_async_callback(rig.temporal.stop)
        if fault.temporal_link:
            rig.link = await stack.enter_async_context(
                tcp_proxy(*split_address(cluster.temporal_address))
            )
            cluster.env["TEMPORAL_ADDRESS"] = rig.link.address
        if fault.store == "postgres":
            store = urlsplit(store_url)
            assert store.hostname is not None and store.port is not None
            rig.link = await stack.enter_async_context(tcp_proxy(store.hostname, store.port))
            netloc = f"{store.username}@{rig.link.address}"
            cluster.env["PERDURE_DATABASE_URL"] = urlunsplit(store._replace(netloc=netloc))
        if fault.relay:
            cluster.env.update(await cluster.relay())
        stack.push_async_callback(asyncio.to_thread, cluster.stop)  # before the links close
        rig.workers = [cluster.worker(), cluster.worker()]
        await ready(rig, fault)
        yield rig
