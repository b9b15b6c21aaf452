"""Attempt fencing in the store (docs/architecture.md, "Attempt fencing"): once attempt n+1 of a writer has claimed an
answer's log, attempt n adds nothing; nothing is appended after the terminal chunk."""

import asyncio
import uuid

import pytest

from storage.chunks import (
    LogWriter,
    StaleWriter,
    append_chunks,
    claim_log,
    insert_chunks,
    read_chunks,
)
from storage.db import Database


def delta(n: int) -> dict[str, object]:
    return {"type": "text-delta", "id": "t", "delta": f" {n}"}


async def test_an_older_attempt_writing_after_a_newer_one_claimed_the_log_adds_nothing(
    store: Database,
) -> None:
    log = f"msg_{uuid.uuid4().hex[:12]}"
    first, second = LogWriter("activity:1", 1), LogWriter("activity:1", 2)
    await append_chunks(store, message_id=log, chunks=[delta(1)], writer=first)

    await claim_log(store, message_id=log, writer=second)
    with pytest.raises(StaleWriter, match="superseded by attempt 2"):
        await append_chunks(store, message_id=log, chunks=[delta(2)], writer=first)

    assert [seq for seq, _ in await read_chunks(store, message_id=log)] == [0]


async def test_the_newer_attempt_continues_the_seq_without_a_gap(store: Database) -> None:
    log = f"msg_{uuid.uuid4().hex[:12]}"
    await append_chunks(
        store, message_id=log, chunks=[delta(1), delta(2)], writer=LogWriter("a", 1)
    )
    await claim_log(store, message_id=log, writer=LogWriter("a", 2))

    last = await append_chunks(store, message_id=log, chunks=[delta(3)], writer=LogWriter("a", 2))

    assert last == 2
    assert [seq for seq, _ in await read_chunks(store, message_id=log)] == [0, 1, 2]


async def test_writers_of_different_activities_do_not_fence_each_other(store: Database) -> None:
    log = f"msg_{uuid.uuid4().hex[:12]}"
    await claim_log(store, message_id=log, writer=LogWriter("activity:1", 3))

    await append_chunks(store, message_id=log, chunks=[delta(1)], writer=LogWriter("activity:2", 1))

    assert len(await read_chunks(store, message_id=log)) == 1


async def test_nothing_is_appended_after_the_log_is_closed(store: Database) -> None:
    log = f"msg_{uuid.uuid4().hex[:12]}"
    await store.transact(
        lambda session: insert_chunks(
            session,
            message_id=log,
            chunks=[{"type": "finish"}],
            writer=LogWriter("finish", 1),
            notify=False,
            close=True,
        )
    )

    with pytest.raises(StaleWriter, match="closed"):
        await append_chunks(store, message_id=log, chunks=[delta(1)], writer=LogWriter("tool", 1))
    with pytest.raises(StaleWriter, match="closed"):
        await claim_log(store, message_id=log, writer=LogWriter("model", 2))
    assert len(await read_chunks(store, message_id=log)) == 1


async def test_concurrent_appenders_get_dense_unique_seqs(store: Database) -> None:
    log = f"msg_{uuid.uuid4().hex[:12]}"

    async def writer(n: int) -> None:
        for i in range(5):
            await append_chunks(
                store, message_id=log, chunks=[delta(n * 10 + i)], writer=LogWriter(f"w{n}", 1)
            )

    await asyncio.gather(*(writer(n) for n in range(8)))

    assert [seq for seq, _ in await read_chunks(store, message_id=log)] == list(range(40))


async def test_a_paused_attempt_waking_after_its_successor_started_cannot_interleave(
    store: Database,
) -> None:
    """The corruption seen under load: attempt 1's buffered write lands after attempt 2 began."""
    log = f"msg_{uuid.uuid4().hex[:12]}"
    old, new = LogWriter("activity:1", 1), LogWriter("activity:1", 2)
    await append_chunks(store, message_id=log, chunks=[{"type": "start"}], writer=old)

    await claim_log(store, message_id=log, writer=new)  # attempt 2 starts and reads the log
    results = await asyncio.gather(
        append_chunks(store, message_id=log, chunks=[delta(1)], writer=old),
        append_chunks(store, message_id=log, chunks=[delta(1)], writer=new),
        return_exceptions=True,
    )

    assert isinstance(results[0], StaleWriter)
    rows = await read_chunks(store, message_id=log)
    assert [chunk["type"] for _, chunk in rows] == ["start", "text-delta"]
