"""Waiting in a test: on a condition, bounded, never for a fixed time (docs/testing.md, "Waits
in the suite")."""

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

WAIT_SECONDS = 30.0
"""Long enough for a loaded 2-core machine running both lanes; a condition met at all is met
well within it."""
POLL_SECONDS = 0.02


async def eventually(
    check: Callable[[], T | Awaitable[T]],
    *,
    what: str,
    timeout: float = WAIT_SECONDS,
    poll: float = POLL_SECONDS,
) -> T:
    """`check()`'s first truthy result (a plain or an async function), tried every `poll`
    seconds; an `AssertionError` naming `what` after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = check()
        value: T = await result if inspect.isawaitable(result) else result  # type: ignore[assignment]
        if value:
            return value
        if loop.time() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s (last seen: {value!r})")
        await asyncio.sleep(poll)
