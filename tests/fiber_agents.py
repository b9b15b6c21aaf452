"""Fibers the fiber specifications run, and `FiberAgent`, the agent that serves them."""

import asyncio
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from perdure import FiberContext, fiber, run_fiber, start_fiber, stash, tool
from perdure.testing.agents.chat import ChatCompletionsAgent

completed_fibers: list[tuple[FiberContext, Any]] = []
"""Every `on_fiber_complete` call of this process: (ctx, result)."""


class CountTo(BaseModel):
    to: int = Field(ge=1, le=100_000)
    stash_every: int = Field(default=100, ge=1)
    delay_ms: float = Field(default=0, ge=0)
    record: str | None = None
    """A file each counted number is appended to, as `<attempt> <n>` (to see lost work)."""


def _hooks_file() -> Path | None:
    path = os.environ.get("PERDURE_TEST_FIBER_HOOKS")
    return Path(path) if path else None


async def _count(ctx: FiberContext, payload: CountTo) -> dict[str, int]:
    """Count to `payload.to`, going on from the last stash."""
    start = ctx.snapshot or {"n": 0, "total": 0}
    n, total = start["n"], start["total"]
    record = Path(payload.record).open("a") if payload.record else None
    try:
        while n < payload.to:
            ctx.check_cancelled()
            n += 1
            total += n
            if record is not None:
                record.write(f"{ctx.attempt} {n}\n")
                record.flush()
            if n % payload.stash_every == 0:
                await ctx.stash({"n": n, "total": total})
            if payload.delay_ms:
                await asyncio.sleep(payload.delay_ms / 1000)
    finally:
        if record is not None:
            record.close()
    return {"n": n, "total": total}


class FiberTools:
    """A fibers mixin (not an agent itself, so PERDURE_AGENTS does not serve it)."""

    @fiber
    async def count(self, ctx: FiberContext, payload: CountTo) -> dict[str, int]:
        """Count from 1 to `to`, stashing every `stash_every`."""
        return await _count(ctx, payload)

    @fiber(name="count-briefly", max_age=timedelta(seconds=1))
    async def count_briefly(self, ctx: FiberContext, payload: CountTo) -> dict[str, int]:
        """`count`, but too old to recover one second after it was created."""
        return await _count(ctx, payload)

    @fiber
    async def wait_for_cancel(self, ctx: FiberContext) -> str:
        """Stash that it waits, wait (at most a minute) for a cancel, stash that it saw it."""
        await ctx.stash({"waiting": True})
        await asyncio.wait_for(ctx.cancellation.wait(), timeout=60)
        await ctx.stash({"waiting": False, "noticed": True})
        return "stopped"

    @fiber(name="overrun", max_run_time=timedelta(seconds=1), max_attempts=2)
    async def overrun(self, ctx: FiberContext) -> str:
        """Outlive every attempt's time limit (each attempt is cut off and recovered)."""
        await ctx.stash({"attempt": ctx.attempt})
        await asyncio.sleep(30)
        return "never"

    @fiber(name="stash-own-id")
    async def stash_own_id(self, ctx: FiberContext, payload: dict[str, Any]) -> list[Any]:
        """Stash this fiber's id through `perdure.stash()` `rounds` times, yielding between
        stashes; return every snapshot it saw (each must be its own)."""
        seen = []
        for n in range(int(payload.get("rounds", 20))):
            await stash({"fiber": ctx.fiber_id, "n": n})
            await asyncio.sleep(0.001)
            seen.append(ctx.snapshot)
        return seen

    @fiber
    async def fail(self, ctx: FiberContext, payload: dict[str, Any]) -> None:
        """Raise with the payload's `message`."""
        raise RuntimeError(str(payload.get("message", "the fiber broke")))

    @fiber
    async def count_in_a_child(self, ctx: FiberContext, payload: CountTo) -> dict[str, Any]:
        """Run `count` as a fiber of its own (once, by key) and return what it returned."""
        child = await run_fiber(
            "count", payload.model_dump(), idempotency_key=f"child-of-{ctx.fiber_id}"
        )
        return {"child": child.fiber_id, "status": child.status, "result": child.result}

    @tool
    async def start_counting(self, to: int) -> str:
        """Start counting to `to` in the background; the fiber's id."""
        started = await start_fiber("count", {"to": to}, metadata={"from": "tool"})
        return started.fiber_id

    async def on_fiber_complete(self, ctx: FiberContext, result: Any) -> None:
        completed_fibers.append((ctx, result))

    async def on_fiber_recovered(self, ctx: FiberContext) -> None:
        path = _hooks_file()
        if path is not None:
            entry = {"fiber": ctx.fiber_id, "attempt": ctx.attempt, "snapshot": ctx.snapshot}
            with path.open("a") as hooks:
                hooks.write(json.dumps(entry) + "\n")


class FiberAgent(FiberTools, ChatCompletionsAgent):
    """Serves the fibers above (and a tool that starts one)."""

    name = "fibers"
