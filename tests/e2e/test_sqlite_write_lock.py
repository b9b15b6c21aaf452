"""On SQLite, the hot writers poll for the file's write lock every millisecond: when another
process releases it they go on at once, not after SQLite's busy handler's back-off (up to
100 ms a try)."""

import asyncio
import sqlite3
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlmodel import Session

from storage.bus import ChunkBus
from storage.chunks import LogWriter, load_log
from storage.db import Database
from storage.log_appender import BufferedLog, LogAppender
from storage.tables import ChatSessionRow

HELD_SECONDS = 0.6
"""Long enough that SQLite's own busy handler is in its 100 ms sleeps by then."""
CYCLES = 3


@contextmanager
def lock_held_by_another_process(store: Database) -> Iterator[sqlite3.Connection]:
    """The file's write lock, held through a connection of its own as another process would."""
    path = store.url.removeprefix("sqlite:///")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield other
    finally:
        other.close()


async def _release_after(other: sqlite3.Connection, seconds: float) -> float:
    await asyncio.sleep(seconds)
    other.execute("COMMIT")
    return time.monotonic()


async def test_a_transaction_goes_on_within_milliseconds_of_the_lock_being_released(
    sqlite_store: Database,
) -> None:
    def write(session: Session) -> None:
        session_id = f"s-{uuid.uuid4().hex[:8]}"
        session.add(
            ChatSessionRow(
                id=session_id,
                tenant_id="t",
                chat_id=session_id,
                agent="a",
                created_at=1.0,
                updated_at=1.0,
            )
        )

    async def committed() -> float:
        await sqlite_store.transact(write)
        return time.monotonic()

    await sqlite_store.transact(write)  # the store thread and its connection are up
    delays = []
    for _ in range(CYCLES):
        with lock_held_by_another_process(sqlite_store) as other:
            released, written = await asyncio.gather(
                _release_after(other, HELD_SECONDS), committed()
            )
        delays.append(written - released)

    assert all(delay >= 0 for delay in delays)
    assert statistics.median(delays) < 0.025, delays


async def test_a_log_flush_goes_on_within_milliseconds_of_the_lock_being_released(
    sqlite_store: Database,
) -> None:
    appender = LogAppender(sqlite_store, ChunkBus(reliable=True))
    message_id = uuid.uuid4().hex
    writer = BufferedLog(
        appender,
        message_id=message_id,
        writer=LogWriter(key="activity:1", attempt=1),
        submission_id="sub",
    )
    writer.add([{"type": "start"}])
    await writer.flush()  # the appender's thread and connection are up
    delays = []
    try:
        for _ in range(CYCLES):
            with lock_held_by_another_process(sqlite_store) as other:
                writer.add([{"type": "text-delta"}])
                release = asyncio.ensure_future(_release_after(other, HELD_SECONDS))
                await writer.flush()
                flushed = time.monotonic()
                delays.append(flushed - await release)

        assert all(delay >= 0 for delay in delays)
        assert statistics.median(delays) < 0.025, delays
        logged = await load_log(sqlite_store, message_id=message_id)
        assert [chunk["type"] for chunk in logged] == ["start"] + ["text-delta"] * CYCLES
    finally:
        await appender.close()
