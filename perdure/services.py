"""The long-lived things a process holds: store, bus, Temporal client, and the worker."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.providers import provider_for
from activities.turn import TurnActivities
from perdure.agents_registry import AgentRegistry
from perdure.settings import Settings
from storage.bus import ChunkBus
from storage.db import Database
from storage.migrate import migrate
from storage.pg_listener import listen_forever
from workflows import ReconcilerWorkflow, TurnWorkflow


@dataclass
class Services:
    settings: Settings
    db: Database
    bus: ChunkBus
    client: Client
    eager_start: bool = False
    """True when a worker runs in this process on the same client (eager workflow start)."""


async def connect_temporal(settings: Settings) -> Client:
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=pydantic_data_converter,
    )


@contextlib.asynccontextmanager
async def open_services(
    settings: Settings, *, client: Client | None = None, listen: bool = True
) -> AsyncIterator[Services]:
    """Migrate the store, connect, and (on PostgreSQL) listen for log appends."""
    url = settings.resolved_database_url()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    await asyncio.to_thread(migrate, url)
    db = Database(url)
    bus = ChunkBus(reliable=False)
    listener: asyncio.Task[None] | None = None
    try:
        if listen and not db.is_sqlite:
            ready = asyncio.Event()
            listener = asyncio.create_task(listen_forever(url, bus, ready))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ready.wait(), timeout=5)
        client = client or await connect_temporal(settings)
        yield Services(settings=settings, db=db, bus=bus, client=client)
    finally:
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
        await db.close()


def build_worker(services: Services, agents: AgentRegistry) -> Worker:
    activities = TurnActivities(
        db=services.db,
        bus=services.bus,
        agents=agents,
        default_model=services.settings.model,
        client=services.client,
        task_queue=services.settings.task_queue,
        provider_for=provider_for,
    )
    return Worker(
        services.client,
        task_queue=services.settings.task_queue,
        workflows=[TurnWorkflow, ReconcilerWorkflow],
        activities=[
            activities.model_step,
            activities.run_tool,
            activities.finish_turn,
            activities.reconcile,
        ],
        # Cancellation reaches an activity with a heartbeat response: a short throttle keeps
        # "stop" prompt. Liveness is bounded separately by the heartbeat timeout.
        max_heartbeat_throttle_interval=timedelta(milliseconds=500),
        default_heartbeat_throttle_interval=timedelta(milliseconds=500),
        max_concurrent_activities=200,
        # A workflow task waits this long on a dead worker's sticky queue before any worker
        # may take it. Turn histories are O(steps) and replay in milliseconds, so a short wait
        # costs nothing and a turn recovered from a killed worker is not held up 10 s.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        workflow_runner=SandboxedWorkflowRunner(
            # domain is pure pydantic models and functions; sharing it avoids re-importing
            # pydantic in every workflow sandbox.
            restrictions=SandboxRestrictions.default.with_passthrough_modules(
                "domain", "pydantic", "pydantic_core"
            )
        ),
    )
