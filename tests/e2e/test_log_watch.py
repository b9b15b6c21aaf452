"""One reader per process (docs/architecture.md): the `LogWatcher` reads every followed log in one query
and hands each stream its own rows; streams never read the log while they wait."""

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, text

from storage import log_watch
from storage.bus import ChunkBus
from storage.chunks import LogWriter, append_chunks
from storage.db import Database
from storage.log_watch import Follow, LogWatcher
from storage.pg_listener import CHANNEL, listen_forever
from tests.waiting import eventually

WRITER = LogWriter("test", 1)


def delta(n: int) -> dict[str, object]:
    return {"type": "text-delta", "id": "t", "delta": f" {n}"}


def new_log() -> str:
    return f"msg_{uuid.uuid4().hex[:12]}"


@contextlib.asynccontextmanager
async def watching(
    db: Database, *, reliable: bool, poll_interval: float = 0.02, bus: ChunkBus | None = None
) -> AsyncIterator[LogWatcher]:
    """A watcher running until the block ends, on `bus` (else a new one, `reliable` or not)."""
    watcher = LogWatcher(db, bus or ChunkBus(reliable=reliable), poll_interval=poll_interval)
    task = asyncio.create_task(watcher.run())
    try:
        yield watcher
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.contextmanager
def counted_reads(db: Database) -> Iterator[list[int]]:
    """Record the number of logs of each read of new rows."""
    reads: list[int] = []
    real = log_watch.read_new_rows

    def counting(connection: Connection, after: dict[str, int]) -> Any:
        reads.append(len(after))
        return real(connection, after)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(log_watch, "read_new_rows", counting)
        yield reads


@contextlib.contextmanager
def reads_of(message_id: str) -> Iterator[list[int]]:
    """The rows each finished read of new rows found in `message_id`'s log (only the reads
    that asked for it: a watcher of the test's own stack reads other logs meanwhile)."""
    found: list[int] = []
    real = log_watch.read_new_rows

    def counting(connection: Connection, after: dict[str, int]) -> Any:
        rows = real(connection, after)
        if message_id in after:
            found.append(len(rows.get(message_id, ())))
        return rows

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(log_watch, "read_new_rows", counting)
        yield found


async def first_read(reads: list[int]) -> None:
    """Until a follow's first read (of an empty log) is done."""
    await eventually(lambda: reads, what="the follow's first read")


@contextlib.contextmanager
def counted_statements(db: Database) -> Iterator[list[str]]:
    """Record every statement the watcher's passes run."""
    statements: list[str] = []
    real = log_watch._fetch

    def record(cursor: Any, sql: str, params: tuple[Any, ...]) -> list[Any]:
        statements.append(sql)
        return real(cursor, sql, params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(log_watch, "_fetch", record)
        yield statements


async def next_rows(follow: Follow, timeout: float = 5.0) -> list[int]:
    async with asyncio.timeout(timeout):
        return [seq for seq, _ in await follow.next()]


async def rows_until(follow: Follow, last: int) -> list[int]:
    """Every seq handed to `follow` up to `last`."""
    seqs: list[int] = []
    while not seqs or seqs[-1] < last:
        seqs += await next_rows(follow)
    return seqs


async def test_a_pass_reads_every_followed_log_in_one_query(store: Database) -> None:
    logs = [new_log() for _ in range(60)]
    for n, message_id in enumerate(logs):
        await append_chunks(store, message_id=message_id, chunks=[delta(n)], writer=WRITER)

    with contextlib.ExitStack() as stack, counted_statements(store) as statements:
        async with watching(store, reliable=False, poll_interval=1.0) as watcher:
            follows = [stack.enter_context(watcher.follow(m, after=-1)) for m in logs]
            rows = [await next_rows(follow) for follow in follows]

    assert rows == [[0]] * len(logs)
    assert len(statements) == 1, statements


async def test_more_logs_than_one_query_holds_take_one_query_each_share(
    store: Database,
) -> None:
    logs = [new_log() for _ in range(log_watch.LOGS_PER_QUERY + 44)]
    for n, message_id in enumerate(logs):
        await append_chunks(store, message_id=message_id, chunks=[delta(n)], writer=WRITER)

    with contextlib.ExitStack() as stack, counted_statements(store) as statements:
        async with watching(store, reliable=False, poll_interval=1.0) as watcher:
            follows = [stack.enter_context(watcher.follow(m, after=-1)) for m in logs]
            rows = [await next_rows(follow) for follow in follows]

    assert rows == [[0]] * len(logs)
    assert len(statements) == 2, statements


async def test_polling_costs_one_query_a_tick_however_many_streams_wait(store: Database) -> None:
    with contextlib.ExitStack() as stack, counted_statements(store) as statements:
        async with watching(store, reliable=False, poll_interval=0.05) as watcher:
            for _ in range(100):
                stack.enter_context(watcher.follow(new_log(), after=-1))
            await asyncio.sleep(0.5)  # the span the queries are counted over: a rate

    assert 3 <= len(statements) <= 12, f"{len(statements)} queries in 0.5 s for 100 streams"


async def test_nothing_is_read_while_nothing_is_followed(store: Database) -> None:
    with counted_reads(store) as reads:
        async with watching(store, reliable=False, poll_interval=0.01):
            await asyncio.sleep(0.2)  # nothing may happen: 20 poll intervals of it

    assert reads == []


async def test_a_stream_is_handed_rows_only_when_its_own_log_advanced(store: Database) -> None:
    quiet, busy = new_log(), new_log()
    async with watching(store, reliable=False) as watcher:
        with watcher.follow(quiet, after=-1) as idle, watcher.follow(busy, after=-1) as active:
            await append_chunks(store, message_id=busy, chunks=[delta(1), delta(2)], writer=WRITER)

            assert await next_rows(active) == [0, 1]
            with pytest.raises(TimeoutError):
                await next_rows(idle, timeout=0.3)


async def test_with_a_reliable_bus_a_pass_reads_only_the_announced_logs(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_watch, "SAFETY_INTERVAL", 60.0)  # no safety read meanwhile
    announced = new_log()
    with contextlib.ExitStack() as stack, counted_reads(store) as reads:
        async with watching(store, reliable=True) as watcher:
            for _ in range(20):
                stack.enter_context(watcher.follow(new_log(), after=-1))
            follow = stack.enter_context(watcher.follow(announced, after=-1))
            async with asyncio.timeout(5):  # the first reads of the new follows, however slow
                while sum(reads) < 21:
                    await asyncio.sleep(0.01)
            reads.clear()

            await append_chunks(store, message_id=announced, chunks=[delta(1)], writer=WRITER)
            watcher.bus.publish(announced)

            assert await next_rows(follow) == [0]

    assert reads == [1]


async def test_without_a_reliable_bus_an_announced_log_is_read_before_the_next_poll(
    store: Database,
) -> None:
    message_id = new_log()
    async with watching(store, reliable=False, poll_interval=60.0) as watcher:
        with reads_of(message_id) as reads, watcher.follow(message_id, after=-1) as follow:
            await first_read(reads)
            await append_chunks(store, message_id=message_id, chunks=[delta(1)], writer=WRITER)
            watcher.bus.publish(message_id)  # this process's own worker appended

            assert await next_rows(follow, timeout=5.0) == [0]


async def test_a_lost_wake_up_costs_at_most_the_safety_read(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_watch, "SAFETY_INTERVAL", 0.3)
    message_id = new_log()
    async with watching(store, reliable=True) as watcher:
        with reads_of(message_id) as reads, watcher.follow(message_id, after=-1) as follow:
            await first_read(reads)
            await append_chunks(store, message_id=message_id, chunks=[delta(1)], writer=WRITER)
            # no publish: the hint was lost

            assert await next_rows(follow, timeout=2.0) == [0]


async def test_an_append_between_the_first_read_and_following_is_not_missed(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_watch, "SAFETY_INTERVAL", 60.0)
    message_id = new_log()
    async with watching(store, reliable=True) as watcher:
        # The stream read the log (empty), then the append was announced to nobody.
        await append_chunks(store, message_id=message_id, chunks=[delta(1)], writer=WRITER)
        watcher.bus.publish(message_id)

        with watcher.follow(message_id, after=-1) as follow:
            assert await next_rows(follow, timeout=2.0) == [0]


async def test_streams_of_one_log_at_different_positions_each_get_their_rest(
    store: Database,
) -> None:
    message_id = new_log()
    await append_chunks(
        store, message_id=message_id, chunks=[delta(n) for n in range(3)], writer=WRITER
    )
    async with watching(store, reliable=False) as watcher:
        with watcher.follow(message_id, after=2) as ahead:
            with watcher.follow(message_id, after=0) as behind:
                await append_chunks(store, message_id=message_id, chunks=[delta(3)], writer=WRITER)

                assert await rows_until(behind, 3) == [1, 2, 3]
                assert await rows_until(ahead, 3) == [3]


async def test_rows_come_in_order_without_gap_or_duplicate_while_the_log_grows(
    store: Database,
) -> None:
    message_id = new_log()
    async with watching(store, reliable=False, poll_interval=0.005) as watcher:
        with watcher.follow(message_id, after=-1) as follow:

            async def write() -> None:
                for n in range(40):
                    await append_chunks(
                        store, message_id=message_id, chunks=[delta(n)], writer=WRITER
                    )

            writing = asyncio.create_task(write())
            seen = await rows_until(follow, 39)
            await writing

    assert seen == list(range(40))


async def test_a_failing_read_is_retried_and_the_stream_gets_its_rows(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = log_watch.read_new_rows
    failures = 0

    def flaky(connection: Connection, after: dict[str, int]) -> Any:
        nonlocal failures
        if failures < 2:
            failures += 1
            raise ConnectionError("the store went away")
        return real(connection, after)

    monkeypatch.setattr(log_watch, "read_new_rows", flaky)
    message_id = new_log()
    await append_chunks(store, message_id=message_id, chunks=[delta(1)], writer=WRITER)
    async with watching(store, reliable=False) as watcher:
        with watcher.follow(message_id, after=-1) as follow:
            assert await next_rows(follow) == [0]

    assert failures == 2


async def test_a_stream_that_stops_following_is_no_longer_read(store: Database) -> None:
    async with watching(store, reliable=False) as watcher:
        with watcher.follow(new_log(), after=-1):
            assert watcher.following == 1
        await asyncio.sleep(0.05)  # a pass begun before the follow ended has ended
        passes = watcher.passes
        await asyncio.sleep(0.1)  # nothing may happen: 5 poll intervals of it

        assert watcher.following == 0
        assert watcher.passes == passes


async def test_a_bus_that_stops_being_reliable_falls_back_to_polling_at_once(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_watch, "SAFETY_INTERVAL", 60.0)
    message_id = new_log()
    async with watching(store, reliable=True) as watcher:
        with reads_of(message_id) as reads, watcher.follow(message_id, after=-1) as follow:
            await first_read(reads)
            await append_chunks(store, message_id=message_id, chunks=[delta(1)], writer=WRITER)

            watcher.bus.reliable = False  # the LISTEN connection broke

            assert await next_rows(follow, timeout=2.0) == [0]


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
async def test_one_notify_may_announce_several_logs(store: Database) -> None:
    bus = ChunkBus(reliable=False)
    heard: list[str | None] = []
    bus.listen(heard.append)
    ready = asyncio.Event()
    listening = asyncio.create_task(listen_forever(store.url, bus, ready))
    try:
        await asyncio.wait_for(ready.wait(), timeout=10)
        async with store.write() as session:
            await session.exec(
                text("SELECT pg_notify(:channel, 'msg_a msg_b')").bindparams(channel=CHANNEL)
            )  # type: ignore[call-overload]
        async with asyncio.timeout(5):
            while len(heard) < 3:
                await asyncio.sleep(0.01)
    finally:
        listening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listening

    assert heard == [None, "msg_a", "msg_b"]  # None: it became reliable, read everything
