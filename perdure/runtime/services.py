"""The long-lived things a process holds: store, wake-up bus, log watcher, Temporal client."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from perdure.runtime.settings import Settings
from perdure.runtime.temporal_connection import TemporalUnreachable, connection_options
from perdure.runtime.temporal_setup import require_search_attributes
from perdure.telemetry.tracing import temporal_interceptors
from perdure.turn_control.lifecycle import HeadStarter
from storage.bus import ChunkBus
from storage.db import Database
from storage.log_appender import LogAppender
from storage.log_watch import LogWatcher
from storage.migrate import migrate
from storage.pg_listener import listen_forever
from storage.socket_bus import SocketBus


@dataclass
class Services:
    settings: Settings
    db: Database
    bus: ChunkBus
    watcher: LogWatcher
    """The one reader of the logs this process's streams follow."""
    client: Client
    appender: LogAppender
    """The process's one log writer: every model step's chunks go through it."""
    eager_start: bool = False
    """True when a worker runs in this process on the same client (eager workflow start)."""
    head_start: HeadStarter | None = None
    """Sends an admitted turn's first provider request at intake (perdure/runtime/head_start.py)."""
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Run as the services close, before the store does (a worker's MCP connections)."""


async def connect_temporal(settings: Settings) -> Client:
    """Connect, and refuse a namespace without Perdure's search attributes (every start of a
    turn would fail there): `TemporalSetupNeeded` says to run `perdure temporal-setup`."""
    options = connection_options()
    try:
        client = await Client.connect(
            settings.temporal_address,
            namespace=settings.temporal_namespace,
            data_converter=pydantic_data_converter,
            # Traced (when tracing is on): this client's calls, and the worker built on it.
            interceptors=temporal_interceptors(),
            **options,
        )
    except RuntimeError as error:  # the Rust bridge's "Failed client connect: …"
        raise TemporalUnreachable(settings.temporal_address, error) from None
    await require_search_attributes(client, settings.temporal_namespace)
    return client


@contextlib.asynccontextmanager
async def open_services(
    settings: Settings, *, client: Client | None = None, listen: bool = True
) -> AsyncIterator[Services]:
    """Migrate the store, connect, watch followed logs, and hear the other processes' log
    appends (PostgreSQL's NOTIFY; SQLite's socket bus, storage/socket_bus.py)."""
    url = settings.resolved_database_url()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    await asyncio.to_thread(migrate, url)
    db = Database(url)
    bus = ChunkBus(reliable=False)
    sockets = SocketBus.open(url) if db.is_sqlite else None
    if sockets is not None:
        bus.forward_to(sockets.send)
        if listen:
            sockets.listen(bus)
    watcher = LogWatcher(db, bus, poll_interval=settings.poll_interval)
    watching = asyncio.create_task(watcher.run())
    listener: asyncio.Task[None] | None = None
    try:
        if listen and not db.is_sqlite:
            ready = asyncio.Event()
            listener = asyncio.create_task(listen_forever(url, bus, ready))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ready.wait(), timeout=5)
        client = client or await connect_temporal(settings)
        appender = LogAppender(db, bus, interval=settings.log_flush_interval)
        services = Services(
            settings=settings, db=db, bus=bus, watcher=watcher, client=client, appender=appender
        )
        try:
            yield services
        finally:
            for close in reversed(services.closers):
                await close()
            await appender.close()  # its last flush before the store closes
    finally:
        for task in (listener, watching):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if sockets is not None:
            sockets.close()
        await db.close()
