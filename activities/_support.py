"""Small helpers shared by the turn activities."""

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from temporalio import activity

log = logging.getLogger("perdure.activities")

HEARTBEAT_EVERY = 1.0
"""Seconds between liveness heartbeats while a provider or a tool is quiet."""


@asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Keep heartbeating while the body waits, so a live worker is never taken for dead and
    cancellation (delivered with heartbeat responses) reaches the activity promptly."""

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(HEARTBEAT_EVERY)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


async def run_hook(name: str, hook: Callable[[], Awaitable[None]]) -> None:
    try:
        await hook()
    except Exception:
        log.exception("agent hook %s failed; the turn goes on", name)
