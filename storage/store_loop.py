"""A thread with an event loop of its own, for SQLite write transactions.

SQLite has one writer at a time. A transaction run on a process's main event loop holds that
lock across every loop cycle between its statements: with hundreds of streams on the loop, a
four-statement transaction held the whole database for tens to hundreds of milliseconds, and
every other writer (the log appender, the other process) waited behind it. On this loop, which
runs nothing but store transactions, the lock is held for the statements themselves.
"""

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


class StoreLoop:
    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()` on this loop; the caller's loop waits without blocking. Cancelling the
        caller cancels `work` there too (a transaction then rolls back, as on the caller's
        loop)."""

        async def wrapped() -> T:
            return await work()

        future: Future[T] = asyncio.run_coroutine_threadsafe(wrapped(), self._loop)
        return await asyncio.wrap_future(future)

    async def close(self, last: Callable[[], Awaitable[None]]) -> None:
        """Run `last()` (e.g. dispose of the engine) on this loop, then stop it."""
        await self.run(last)
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join, 5)
        self._loop.close()
