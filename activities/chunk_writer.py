"""Write chunks to the log in batches, then wake readers: nothing is published unlogged.

The first chunk is written at once; chunks produced while a write is in flight are
coalesced into the next write. Latency stays at one write, and a fast provider gets
batches as large as the store needs to keep up.
"""

import asyncio
from typing import Any

from domain.ui import Chunk
from storage.bus import ChunkBus
from storage.chunks import LogWriter, ProviderCursor, append_chunks
from storage.db import Database


class ChunkWriter:
    def __init__(
        self,
        db: Database,
        bus: ChunkBus,
        *,
        message_id: str,
        writer: LogWriter,
        submission_id: str,
    ) -> None:
        self._db = db
        self._bus = bus
        self._message_id = message_id
        self._writer = writer
        self._submission_id = submission_id
        self._buffer: list[Chunk] = []
        self._cursor: dict[str, Any] | None = None
        self._drain_task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self.last_seq = -1

    def add(self, chunks: list[Chunk], *, cursor: dict[str, Any] | None = None) -> None:
        """Buffer chunks; `cursor` is where a resumable provider response stands after them,
        and is stored in the same transaction as they are."""
        if self._failure is not None:
            raise self._failure
        if cursor is not None:
            self._cursor = cursor
        if not chunks and cursor is None:
            return
        self._buffer.extend(chunks)
        if self._drain_task is None or self._drain_task.done():
            self._drain_task = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self._buffer or self._cursor is not None:
                batch, self._buffer = self._buffer, []
                cursor, self._cursor = self._cursor, None
                if not batch:
                    continue  # a cursor alone moves nothing that a client could see
                self.last_seq = await append_chunks(
                    self._db,
                    message_id=self._message_id,
                    chunks=batch,
                    writer=self._writer,
                    cursor=ProviderCursor(self._submission_id, cursor) if cursor else None,
                )
                self._bus.publish(self._message_id)
        except BaseException as error:
            self._failure = error
            raise

    async def flush(self) -> None:
        """Wait until everything added so far is in the log."""
        while self._drain_task is not None and not self._drain_task.done():
            await asyncio.shield(self._drain_task)
        if self._failure is not None:
            raise self._failure
        if self._buffer or self._cursor is not None:
            self._drain_task = asyncio.create_task(self._drain())
            await asyncio.shield(self._drain_task)
