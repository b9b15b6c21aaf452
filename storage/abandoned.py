"""Tasks given up on: cancelled, and left to unwind without anyone waiting for them.

A query cancelled on a PostgreSQL connection that no longer answers takes psycopg up to 10 s to
unwind (it asks the server to cancel it, then waits: psycopg's `_INTERRUPTED` handling). An
answer that must come within its bound (a health check, a 503) cannot wait for that; the task is
kept here until it has unwound, so that it is neither collected mid-way nor reported as an
exception nobody retrieved.
"""

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_unwinding: set[asyncio.Task[Any]] = set()


def abandon(task: asyncio.Task[Any]) -> None:
    task.cancel()
    _unwinding.add(task)
    task.add_done_callback(_unwound)


def _unwound(task: asyncio.Task[Any]) -> None:
    _unwinding.discard(task)
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()


async def finished_within(work: Coroutine[Any, Any, T], seconds: float) -> "asyncio.Task[T] | None":
    """`work`'s task once it has ended, or None when it has not ended within `seconds`: it is
    then abandoned, and the caller answers at once instead of waiting for it to unwind."""
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        abandon(task)
        return None
    return task
