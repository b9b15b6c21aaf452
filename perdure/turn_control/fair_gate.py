"""Admission in turns: at most `width` holders at once, the waiters let in round-robin across
their keys (tenants), each key's in arrival order.

A process's intake is first come, first served wherever it queues: its store writer, its
gRPC calls to Temporal, the server's own handling of starts. One tenant's burst of 300 chats
there holds every other tenant's next message behind all 300 (measured: 3.9 s of a 6 s wait,
docs/benchmarks.md#fairness). Through this gate a second tenant's message waits for at most
`width` submissions in flight and one of each other waiting tenant's.
"""

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator

DEFAULT_INTAKE_CONCURRENCY = 4
"""Submissions a process records and starts at once (`PERDURE_INTAKE_CONCURRENCY`): enough
to keep the store and Temporal busy, few enough that a queue forms here, where tenants take
turns, and not in the store's writer or Temporal's, where they do not. Measured on a 2-core
machine (docs/benchmarks.md#fairness): 4 kept a single tenant's burst as fast as no limit;
8 doubled the second tenant's wait, 2 slowed the burst."""


INTAKE_PATIENCE_SECONDS = 60.0
"""How long a submission waits for its turn at most: then it is refused as busy (a 503 with
`Retry-After`), never held for as long as a backlog lasts. A burst of 300 on a 2-core machine
waited 20 s at most."""


class IntakeBusy(Exception):
    """A submission waited `patience` seconds for its turn at the gate: nothing was written."""


class FairGate:
    def __init__(self, width: int) -> None:
        if width < 1:
            raise ValueError("a gate lets in at least one holder")
        self._width = width
        self._holders = 0
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}
        """By key, in the order the keys take their turns (a key goes to the back when one of
        its waiters is let in)."""

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    @contextlib.asynccontextmanager
    async def turn(self, key: str, *, patience: float | None = None) -> AsyncIterator[None]:
        """Hold a place for the block; `IntakeBusy` after waiting `patience` seconds."""
        if self._holders < self._width and not self._waiting:
            self._holders += 1
        else:
            admitted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(key, deque()).append(admitted)
            try:
                async with asyncio.timeout(patience):
                    await asyncio.shield(admitted)
            except (asyncio.CancelledError, TimeoutError) as error:
                if admitted.done() and not admitted.cancelled():
                    self._release()  # let in, and gone before it could go in
                else:
                    admitted.cancel()
                    self._forget(key, admitted)
                if isinstance(error, TimeoutError):
                    raise IntakeBusy(
                        f"waited {patience:g} s for a turn among {self.waiting} submissions"
                    ) from None
                raise
        try:
            yield
        finally:
            self._release()

    def _forget(self, key: str, admitted: asyncio.Future[None]) -> None:
        queue = self._waiting.get(key)
        if queue is not None:
            with contextlib.suppress(ValueError):
                queue.remove(admitted)
            if not queue:
                del self._waiting[key]

    def _release(self) -> None:
        self._holders -= 1
        while self._holders < self._width and self._waiting:
            key, queue = next(iter(self._waiting.items()))
            admitted = queue.popleft()
            del self._waiting[key]
            if queue:
                self._waiting[key] = queue  # to the back: the other keys go first
            if not admitted.done():
                admitted.set_result(None)
                self._holders += 1
