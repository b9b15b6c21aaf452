"""A thread of its own for write transactions run whole with a blocking session: SQLite's hot
writers (`Database.transact`) and each process's log appender.

SQLite has one writer at a time. A transaction run on a process's busy event loop holds that
lock across every loop cycle between its statements; run here, it holds it for the statements
alone. Blocking statements on one thread cost about half of the same transaction through the
asyncio driver (one hop to this thread per transaction, not several per statement: intake
5.5 → 3.1 ms of CPU, docs/benchmarks.md).

A caller cancelled while its transaction runs gets it rolled back: the thread checks, before
committing, whether anyone still waits for the result.
"""

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from sqlalchemy import Engine
from sqlmodel import Session

from storage.errors import StoreError

T = TypeVar("T")


class CallerGone(StoreError):
    """The transaction's caller was cancelled before it committed: rolled back."""


class StoreThread:
    def __init__(self, name: str, engine: Engine, *, retry_when: Callable[[Exception], bool]):
        self._engine = engine
        self._retry_when = retry_when
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    async def run(self, work: Callable[[Session], T], *, patience: float, poll: float) -> T:
        """`work(session)` as one transaction on this thread. While `retry_when` says the store
        is busy (before anything was written), `work` runs again every `poll` seconds, for at
        most `patience` seconds: it must do nothing but store work."""
        gone = threading.Event()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, self._transact, work, gone, patience, poll)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            gone.set()
            # Nobody awaits it now: its outcome (a rollback) is taken here, not warned about.
            future.add_done_callback(lambda done: done.cancelled() or done.exception())
            raise

    def _transact(
        self, work: Callable[[Session], T], gone: threading.Event, patience: float, poll: float
    ) -> T:
        deadline = time.monotonic() + patience
        while True:
            try:
                with Session(self._engine, expire_on_commit=False) as session:
                    with session.begin():
                        result = work(session)
                        if gone.is_set():
                            raise CallerGone("the caller was cancelled; rolled back")
                    return result
            except Exception as error:
                if not self._retry_when(error) or time.monotonic() > deadline:
                    raise
            time.sleep(poll)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self._engine.dispose()
