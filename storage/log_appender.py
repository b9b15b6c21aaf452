"""One log writer per process: the pending chunks of every turn, committed together.

Each turn's writer buffers its chunks (`BufferedLog`); the process's `LogAppender` commits
the buffers of all of them in one transaction per flush. The first chunk is written at once;
while a flush is in flight, chunks from any log accumulate for the next one. Latency stays at
about one write, and under load a flush carries more chunks instead of the store taking more
transactions: a hundred streaming chats cost one writer, not a hundred contending for the lock.

When a flush carried the logs of several turns, the next one starts no sooner than `interval`
after it began: each turn's deltas of that interval are joined into one row (and one SSE event
for each client, `perdure.domain.delta_coalescing`), so the cost per streamed token falls as
the load rises. A lone turn's chunks are still written one flush each, at once.

A flush runs whole on a thread of its own with one connection of its own
(`storage.store_thread`): one hop from the event loop and back per transaction. Through the
async driver every statement is one or more hops, each waiting its turn in a loop that is busy
relaying those same chats' streams.
"""

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from perdure.domain.delta_coalescing import coalesce_deltas
from perdure.domain.ui import Chunk
from storage.bus import ChunkBus
from storage.chunks import LogBatch, LogWriter, ProviderCursor, StaleWriter, insert_batches
from storage.db import (
    LOCK_POLL_SECONDS,
    LOCK_WAIT_SECONDS,
    Database,
    sqlite_locked,
    sync_write_engine,
)
from storage.store_thread import StoreThread
from storage.usage import StepUsage

log = logging.getLogger(__name__)

MAX_CHUNKS_PER_FLUSH = 5000
"""A bound on one transaction; the logs left over go in the next flush, in order."""


class LogAppender:
    """Commits the pending appends of every log of this process, one transaction per flush.

    The guarantees of `storage.chunks.insert_batches` hold per batch: fencing (a stale writer's
    batch is refused alone), dense seqs, the provider cursor moved with its chunks. Wake-ups go
    on the bus only after the commit. A failed transaction fails every writer it carried.
    """

    def __init__(
        self,
        db: Database,
        bus: ChunkBus,
        *,
        max_chunks: int = MAX_CHUNKS_PER_FLUSH,
        interval: float = 0.0,
    ) -> None:
        self._db = db
        self._bus = bus
        self._max_chunks = max_chunks
        self._interval = interval
        self._queue: deque[BufferedLog] = deque()
        self._task: asyncio.Task[None] | None = None
        # SQLite: while another connection holds the file's write lock, a flush asks again
        # every millisecond (every chat's next chunk waits for it).
        self._thread = StoreThread(
            "perdure-log-appender", sync_write_engine(db.url), retry_when=sqlite_locked
        )
        self.flushes = 0
        """Transactions committed so far."""
        self.chunks_written = 0

    async def close(self) -> None:
        """Wait for the flushes under way, then close the connection."""
        while self._task is not None and not self._task.done():
            await asyncio.wait([self._task])
        await asyncio.to_thread(self._thread.close)

    def writer(self, *, message_id: str, writer: LogWriter, submission_id: str) -> "BufferedLog":
        """A turn's writer to its answer's log: it buffers; this appender commits the buffers
        of every turn together, one transaction per flush. The first chunk is written at
        once; chunks added while a write is in flight are coalesced into the next one."""
        return BufferedLog(self, message_id=message_id, writer=writer, submission_id=submission_id)

    def announce(self, *message_ids: str) -> None:
        """Wake the streams of logs written outside the appender (in a transaction of its
        own), as a flush wakes them."""
        self._bus.publish(*message_ids)

    def _schedule(self, pending: "BufferedLog") -> None:
        self._queue.append(pending)
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._task = loop.create_task(self._run(), name="perdure-log-appender")

    def _next_flush(self) -> list["BufferedLog"]:
        taken = [self._queue.popleft()]
        size = taken[0].pending
        while self._queue and size + self._queue[0].pending <= self._max_chunks:
            size += self._queue[0].pending
            taken.append(self._queue.popleft())
        return taken

    async def _run(self) -> None:
        while self._queue:
            started = time.monotonic()
            carried: list[BufferedLog] = []
            batches: list[LogBatch] = []
            for pending in self._next_flush():
                batch = pending._take()
                if batch is not None:
                    carried.append(pending)
                    batches.append(batch)
            if batches:
                await self._flush(carried, batches)
            if len(batches) > 1:  # several turns stream: let their deltas gather
                await asyncio.sleep(started + self._interval - time.monotonic())

    async def _flush(self, carried: list["BufferedLog"], batches: list[LogBatch]) -> None:
        notify = not self._db.is_sqlite
        try:
            results = await self._thread.run(
                lambda session: insert_batches(session.connection(), batches, notify=notify),
                patience=LOCK_WAIT_SECONDS,
                poll=LOCK_POLL_SECONDS,
            )
        except BaseException as error:
            for pending in carried:
                pending._settle(error)
            if not isinstance(error, Exception):
                raise
            log.warning("a log append of %d chats failed: %r", len(carried), error)
            return
        self.flushes += 1
        written: dict[str, None] = {}
        for batch, result in zip(batches, results, strict=True):
            if not isinstance(result, StaleWriter):
                written[batch.message_id] = None
                self.chunks_written += len(batch.chunks)
        self._bus.publish(*written)
        for pending, result in zip(carried, results, strict=True):
            pending._settle(result)


class BufferedLog:
    """One writer's appends to one log through the process's appender.

    `add` buffers (and raises the failure of an earlier write); `flush` waits until everything
    added so far is in the log. `last_seq` is the seq of the last chunk written.
    """

    def __init__(
        self, appender: LogAppender, *, message_id: str, writer: LogWriter, submission_id: str
    ) -> None:
        self._appender = appender
        self.message_id = message_id
        self._writer = writer
        self._submission_id = submission_id
        self._buffer: list[Chunk] = []
        self._cursor: dict[str, Any] | None = None
        self._usage: list[StepUsage] = []
        self._queued = False
        self._in_flight = False
        self._progress = asyncio.Event()
        self._failure: BaseException | None = None
        self._observer: Callable[[list[Chunk]], None] | None = None
        self.last_seq = -1

    @property
    def log_writer(self) -> LogWriter:
        """Who writes: a transaction that appends for the same step writes as this too."""
        return self._writer

    def observe(self, observer: Callable[[list[Chunk]], None]) -> None:
        """Hand `observer` every list of chunks added from now on, as it is added."""
        self._observer = observer

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def add(
        self,
        chunks: list[Chunk],
        *,
        cursor: dict[str, Any] | None = None,
        usage: StepUsage | None = None,
    ) -> None:
        """Buffer chunks; `cursor` is where a resumable provider response stands after them,
        `usage` what the model call they end consumed: each is stored in the same transaction
        as they are."""
        if self._failure is not None:
            raise self._failure
        if cursor is not None:
            self._cursor = cursor
        if usage is not None:
            if not chunks:
                raise ValueError("usage goes in with the chunks that end its model call")
            self._usage.append(usage)
        self._buffer.extend(chunks)
        if self._observer is not None and chunks:
            self._observer(chunks)
        if not self._buffer:
            self._cursor = None  # a cursor alone moves nothing that a client could see
            return
        if not self._queued:
            self._queued = True
            self._appender._schedule(self)

    async def flush(self) -> None:
        """Wait until everything added so far is in the log; raise if a write failed."""
        while True:
            if self._failure is not None:
                raise self._failure
            if not self._queued and not self._in_flight:
                return
            progress = self._progress
            await progress.wait()

    def _take(self) -> LogBatch | None:
        """The buffer, for the flush about to start (None once a write has failed)."""
        self._queued = False
        if self._failure is not None or not self._buffer:
            self._buffer, self._cursor, self._usage = [], None, []
            self._wake()
            return None
        cursor = ProviderCursor(self._submission_id, self._cursor) if self._cursor else None
        chunks = coalesce_deltas(self._buffer)
        batch = LogBatch(self.message_id, self._writer, chunks, cursor, tuple(self._usage))
        self._buffer, self._cursor, self._usage = [], None, []
        self._in_flight = True
        return batch

    def _settle(self, result: int | BaseException) -> None:
        self._in_flight = False
        if isinstance(result, BaseException):
            self._failure = result
            # Nothing after a failed write is written.
            self._buffer, self._cursor, self._usage = [], None, []
        else:
            self.last_seq = result
        self._wake()

    def _wake(self) -> None:
        self._progress.set()
        self._progress = asyncio.Event()
