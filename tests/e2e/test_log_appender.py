"""One log writer per process (docs/architecture.md): the appender commits the pending chunks of every
chat in one transaction per flush, and keeps each log's guarantees (attempt fencing, dense
seqs, the provider cursor moved with its chunks, wake-ups only after the commit)."""

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from storage.bus import ChunkBus
from storage.chunks import (
    LogBatch,
    LogWriter,
    ProviderCursor,
    StaleWriter,
    append_batches,
    append_chunks,
    claim_log,
    insert_chunks,
    read_chunks,
)
from storage.db import Database
from storage.log_appender import LogAppender
from storage.submission_reads import get_submission
from storage.tables import SubmissionRow
from storage.timing import now

Appenders = Callable[..., LogAppender]


@pytest.fixture
async def appenders(store: Database) -> AsyncIterator[Appenders]:
    """Appenders of the store, each as a process has one; closed after the test."""
    made: list[LogAppender] = []

    def make(bus: ChunkBus, interval: float = 0.0) -> LogAppender:
        made.append(LogAppender(store, bus, interval=interval))
        return made[-1]

    yield make
    for appender in made:
        await appender.close()


def delta(n: int) -> dict[str, object]:
    """A delta of a text part of its own: deltas of one part would be joined into one row."""
    return {"type": "text-delta", "id": f"t{n}", "delta": f" {n}"}


def new_log() -> str:
    return f"msg_{uuid.uuid4().hex[:12]}"


async def seqs(store: Database, log: str) -> list[int]:
    return [seq for seq, _ in await read_chunks(store, message_id=log)]


async def deltas(store: Database, log: str) -> list[object]:
    return [chunk.get("delta") for _, chunk in await read_chunks(store, message_id=log)]


async def new_submission(store: Database, log: str) -> str:
    submission_id = f"sub_{uuid.uuid4().hex[:12]}"
    async with store.write() as session:
        session.add(
            SubmissionRow(
                id=submission_id,
                session_id="s",
                tenant_id="t",
                idempotency_key=submission_id,
                status="running",
                agent="a",
                user_message={},
                user_message_id="u",
                assistant_message_id=log,
                created_at=now(),
            )
        )
    return submission_id


async def test_the_batches_of_many_logs_are_committed_in_one_transaction(
    store: Database, appenders: Appenders
) -> None:
    appender = appenders(ChunkBus(reliable=True))
    logs = [new_log() for _ in range(20)]
    writers = [
        appender.writer(message_id=log, writer=LogWriter(f"w{n}", 1), submission_id="-")
        for n, log in enumerate(logs)
    ]

    for n, writer in enumerate(writers):
        writer.add([delta(n), delta(n + 100)])
    await asyncio.gather(*(writer.flush() for writer in writers))

    assert appender.flushes == 1
    assert [writer.last_seq for writer in writers] == [1] * 20
    for n, log in enumerate(logs):
        assert await deltas(store, log) == [f" {n}", f" {n + 100}"]


async def test_chunks_added_while_a_flush_is_in_flight_go_together_in_the_next_one(
    store: Database, appenders: Appenders
) -> None:
    appender = appenders(ChunkBus(reliable=True))
    writers = [
        appender.writer(message_id=new_log(), writer=LogWriter("w", 1), submission_id="-")
        for _ in range(10)
    ]
    writers[0].add([delta(0)])
    await asyncio.sleep(0)  # the first flush starts with the first chunk alone

    for n, writer in enumerate(writers):
        writer.add([delta(n + 1)])
        writer.add([delta(n + 2)])
    await asyncio.gather(*(writer.flush() for writer in writers))

    assert appender.flushes == 2
    assert [writer.last_seq for writer in writers] == [2] + [1] * 9


def part_delta(text: str) -> dict[str, object]:
    return {"type": "text-delta", "id": "t", "delta": text}


async def test_a_turns_deltas_of_one_flush_are_written_as_one_row(
    store: Database, appenders: Appenders
) -> None:
    appender = appenders(ChunkBus(reliable=True))
    log = new_log()
    writer = appender.writer(message_id=log, writer=LogWriter("w", 1), submission_id="-")

    writer.add([part_delta("1"), part_delta(" 2")])
    writer.add([part_delta(" 3"), {"type": "text-end", "id": "t"}])
    await writer.flush()

    assert [chunk for _, chunk in await read_chunks(store, message_id=log)] == [
        part_delta("1 2 3"),
        {"type": "text-end", "id": "t"},
    ]
    assert writer.last_seq == 1


async def test_while_several_turns_stream_their_deltas_gather_for_the_interval(
    store: Database, appenders: Appenders
) -> None:
    appender = appenders(ChunkBus(reliable=True), interval=0.5)
    logs = [new_log(), new_log()]
    writers = [
        appender.writer(message_id=log, writer=LogWriter("w", 1), submission_id="-") for log in logs
    ]
    for writer in writers:
        writer.add([part_delta("a")])
    await asyncio.gather(*(writer.flush() for writer in writers))

    for text in ("b", "c", "d"):  # each after the previous flush, inside the interval
        for writer in writers:
            writer.add([part_delta(text)])
        await asyncio.sleep(0.02)  # the scenario: deltas arriving over the interval
    await asyncio.gather(*(writer.flush() for writer in writers))

    assert appender.flushes == 2
    for log in logs:
        assert await deltas(store, log) == ["a", "bcd"]


async def test_a_lone_turns_chunks_are_written_at_once_whatever_the_interval(
    store: Database, appenders: Appenders
) -> None:
    appender = appenders(ChunkBus(reliable=True), interval=60.0)
    writer = appender.writer(message_id=new_log(), writer=LogWriter("w", 1), submission_id="-")

    async with asyncio.timeout(10):  # far below the interval
        for n in range(3):
            writer.add([delta(n)])
            await writer.flush()

    assert appender.flushes == 3


async def test_a_stale_writers_batch_is_refused_without_failing_the_others(
    store: Database, appenders: Appenders
) -> None:
    appender = appenders(ChunkBus(reliable=True))
    superseded, closed, live = new_log(), new_log(), new_log()
    old = LogWriter("activity:1", 1)
    await append_chunks(store, message_id=superseded, chunks=[delta(0)], writer=old)
    await claim_log(store, message_id=superseded, writer=LogWriter("activity:1", 2))
    await store.transact(
        lambda session: insert_chunks(
            session,
            message_id=closed,
            chunks=[{"type": "finish"}],
            writer=LogWriter("finish", 1),
            notify=False,
            close=True,
        )
    )
    fenced = appender.writer(message_id=superseded, writer=old, submission_id="-")
    late = appender.writer(message_id=closed, writer=LogWriter("tool", 1), submission_id="-")
    healthy = appender.writer(message_id=live, writer=LogWriter("activity:2", 1), submission_id="-")

    for writer in (fenced, late, healthy):
        writer.add([delta(1)])
    results = await asyncio.gather(
        fenced.flush(), late.flush(), healthy.flush(), return_exceptions=True
    )

    assert appender.flushes == 1
    assert isinstance(results[0], StaleWriter) and "superseded by attempt 2" in str(results[0])
    assert isinstance(results[1], StaleWriter) and "closed" in str(results[1])
    assert results[2] is None and healthy.last_seq == 0
    assert await seqs(store, superseded) == [0]
    assert await seqs(store, closed) == [0]
    with pytest.raises(StaleWriter):
        fenced.add([delta(2)])  # the failure is raised again by the next add


async def test_seqs_stay_dense_and_each_writers_order_kept_under_concurrent_writers(
    store: Database, appenders: Appenders
) -> None:
    """Two processes' appenders, and the single-log append, on one log at once."""
    bus = ChunkBus(reliable=True)
    processes = [appenders(bus), appenders(bus)]
    log = new_log()
    writers = [
        processes[n % 2].writer(message_id=log, writer=LogWriter(f"w{n}", 1), submission_id="-")
        for n in range(6)
    ]

    async def stream(n: int) -> None:
        for i in range(10):
            writers[n].add([delta(n * 100 + i)])
            await asyncio.sleep(0)
        await writers[n].flush()

    async def direct() -> None:
        for i in range(10):
            await append_chunks(
                store, message_id=log, chunks=[delta(900 + i)], writer=LogWriter("tool", 1)
            )

    await asyncio.gather(*(stream(n) for n in range(6)), direct())

    rows = await read_chunks(store, message_id=log)
    assert [seq for seq, _ in rows] == list(range(70))
    written = [int(str(chunk["delta"])) for _, chunk in rows]
    for n in [*range(6), 9]:
        assert [value for value in written if value // 100 == n] == [n * 100 + i for i in range(10)]


async def test_the_provider_cursor_moves_with_its_chunks_and_not_with_a_refused_batch(
    store: Database, appenders: Appenders
) -> None:
    appender = appenders(ChunkBus(reliable=True))
    moving, fenced = new_log(), new_log()
    moving_id, fenced_id = await new_submission(store, moving), await new_submission(store, fenced)
    await claim_log(store, message_id=fenced, writer=LogWriter("model", 2))
    writer = appender.writer(
        message_id=moving, writer=LogWriter("model", 1), submission_id=moving_id
    )
    stale = appender.writer(
        message_id=fenced, writer=LogWriter("model", 1), submission_id=fenced_id
    )

    writer.add([delta(1)], cursor={"step": 0, "response_id": "r", "sequence_number": 7})
    stale.add([delta(1)], cursor={"step": 0, "response_id": "r", "sequence_number": 7})
    await writer.flush()
    with pytest.raises(StaleWriter):
        await stale.flush()

    moved = await get_submission(store, moving_id)
    assert moved is not None and moved.provider_cursor == {
        "step": 0,
        "response_id": "r",
        "sequence_number": 7,
    }
    assert await seqs(store, moving) == [0]
    kept = await get_submission(store, fenced_id)
    assert kept is not None and kept.provider_cursor is None


async def test_a_failed_transaction_fails_every_writer_it_carried(
    store: Database, appenders: Appenders
) -> None:
    appender = appenders(ChunkBus(reliable=True))
    good, poisoned = new_log(), new_log()
    sound = appender.writer(message_id=good, writer=LogWriter("a", 1), submission_id="-")
    broken = appender.writer(message_id=poisoned, writer=LogWriter("b", 1), submission_id="-")

    sound.add([delta(1)])
    broken.add([{"type": "data-x", "data": object()}])  # cannot be stored
    results = await asyncio.gather(sound.flush(), broken.flush(), return_exceptions=True)

    failure = results[0]
    assert isinstance(failure, Exception) and results[1] is failure
    assert await seqs(store, good) == [] and await seqs(store, poisoned) == []
    with pytest.raises(type(failure)):
        sound.add([delta(2)])


async def test_readers_are_woken_only_after_the_chunks_are_committed(
    store: Database, appenders: Appenders
) -> None:
    bus = ChunkBus(reliable=True)
    appender = appenders(bus)
    logs = [new_log() for _ in range(5)]
    woken: asyncio.Queue[str | None] = asyncio.Queue()
    stop = bus.listen(woken.put_nowait)

    for log in logs:
        appender.writer(message_id=log, writer=LogWriter("w", 1), submission_id="-").add(
            [delta(1), delta(2)]
        )
    seen: dict[str | None, list[int]] = {}
    for _ in logs:
        woke = await asyncio.wait_for(woken.get(), timeout=10)
        seen[woke] = await seqs(store, str(woke))  # another connection: committed rows only
    stop()

    assert seen == {log: [0, 1] for log in logs}
    assert appender.flushes == 1


async def test_batches_of_one_log_in_one_transaction_apply_in_order(store: Database) -> None:
    log = new_log()
    await claim_log(store, message_id=log, writer=LogWriter("a", 2))

    results = await append_batches(
        store,
        [
            LogBatch(log, LogWriter("b", 1), [delta(1), delta(2)]),
            LogBatch(log, LogWriter("a", 1), [delta(3)]),  # fenced by attempt 2
            LogBatch(log, LogWriter("a", 2), [delta(4)]),
            LogBatch(log, LogWriter("b", 2), [delta(5)], ProviderCursor("none", {})),
            LogBatch(log, LogWriter("b", 1), [delta(6)]),  # fenced by the batch before it
        ],
    )

    assert [r if isinstance(r, int) else "stale" for r in results] == [1, "stale", 2, 3, "stale"]
    assert await deltas(store, log) == [" 1", " 2", " 4", " 5"]
