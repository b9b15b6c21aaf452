"""An in-process Perdure (worker + gateway on a free port), as `perdure dev` runs it."""

import asyncio
import contextlib
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import uvicorn
from sqlalchemy import delete
from starlette.types import ASGIApp
from temporalio.client import Client

from gateway.app import create_app
from perdure.agents_registry import load_agents
from perdure.runtime.prompt_schedules import sync_declared_schedules
from perdure.runtime.reconciler_schedule import ensure_reconciler_schedule
from perdure.runtime.services import Services, open_services
from perdure.runtime.settings import Settings
from perdure.runtime.worker import build_worker
from storage.access_tables import ApiKeyRow


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Stack:
    url: str
    services: Services
    settings: Settings


@contextlib.asynccontextmanager
async def serving(
    app: ASGIApp, *, port: int | None = None, lifespan: Literal["auto", "on"] = "auto"
) -> AsyncIterator[str]:
    """`app` served by uvicorn in this event loop on `port` (a free one when None), until the
    block ends: its URL, once it accepts connections (an error at start is raised here)."""
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan)
    )
    running = asyncio.create_task(server.serve())
    while not server.started:
        if running.done():
            running.result()
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await running


BLOB_MIN_BYTES = 65_536
"""Workspace contents this large go to the stack's blob directory (storage/workspace_blobs.py)."""


@contextlib.asynccontextmanager
async def running_stack(
    *,
    client: Client,
    database_url: str,
    data_dir: Path,
    model: str = "openai:gpt-fake",
    agents: str,
) -> AsyncIterator[Stack]:
    port = free_port()
    settings = Settings.model_validate(
        {
            "PERDURE_DATABASE_URL": database_url,
            "PERDURE_DATA_DIR": str(data_dir),
            "PERDURE_MODEL": model,
            "PERDURE_AGENTS": agents,
            "PERDURE_TASK_QUEUE": f"perdure-test-{uuid.uuid4().hex[:8]}",
            "PERDURE_HOST": "127.0.0.1",
            "PERDURE_PORT": port,
            "PERDURE_WORKER_SHUTDOWN_GRACE": 1,
            "PERDURE_WORKSPACE_BLOB_DIR": str(data_dir / "blobs"),
            "PERDURE_WORKSPACE_BLOB_MIN_BYTES": BLOB_MIN_BYTES,
        }
    )
    async with open_services(settings, client=client) as services:
        services.eager_start = True
        services.bus.reliable = True
        served = load_agents(settings.agents)
        worker = build_worker(services, served)
        await ensure_reconciler_schedule(services.client, task_queue=settings.task_queue)
        await sync_declared_schedules(services, served)
        async with worker, serving(create_app(services=services), port=port, lifespan="on") as url:
            yield Stack(url=url, services=services, settings=settings)


async def delete_stored_keys(stack: Stack) -> None:
    """Every API key in the stack's store: any stored key, even a revoked one, closes the
    stack's open gateway to the tests that follow."""
    async with stack.services.db.write() as session:
        await session.exec(delete(ApiKeyRow))
