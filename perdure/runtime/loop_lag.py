"""Event-loop lag of a worker: how late its timers fire.

Everything a worker does for its activities and workflow tasks — heartbeats included — runs on
one event loop. When the machine or the loop is saturated, heartbeats go out late; past the
heartbeat timeout Temporal takes the step for dead and retries it. This says so in the log,
before the retries do: a warning when a timer fires more than `WARN_AFTER` late, at most one
per `WARN_EVERY`, with the worst lag since the last one.
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from workflows._policies import HEARTBEAT_TIMEOUT

log = logging.getLogger("perdure.worker")

TICK = 0.25
WARN_AFTER = 1.0
WARN_EVERY = 10.0


class LoopLag:
    def __init__(self) -> None:
        self.worst = 0.0
        """The worst lag (s) since the last warning."""
        self.warnings = 0

    async def watch(self) -> None:
        loop = asyncio.get_running_loop()
        warned_at = float("-inf")
        while True:
            before = loop.time()
            await asyncio.sleep(TICK)
            lag = loop.time() - before - TICK
            self.worst = max(self.worst, lag)
            if self.worst > WARN_AFTER and loop.time() - warned_at >= WARN_EVERY:
                log.warning(
                    "the worker's event loop ran %.1f s late: it is overloaded, and "
                    "heartbeats that late make Temporal retry model steps (heartbeat timeout "
                    "%g s); add workers or lower the load",
                    self.worst,
                    HEARTBEAT_TIMEOUT.total_seconds(),
                )
                self.warnings += 1
                self.worst = 0.0
                warned_at = loop.time()


@contextlib.asynccontextmanager
async def watching_loop_lag() -> AsyncIterator[LoopLag]:
    lag = LoopLag()
    task = asyncio.create_task(lag.watch())
    try:
        yield lag
    finally:
        task.cancel()
