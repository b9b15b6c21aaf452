"""SQLite's processes hear each other's log appends over Unix datagrams (storage/socket_bus.py),
as PostgreSQL's hear NOTIFY: a gateway beside a separate worker reads a log when it grows,
not on a poll."""

import asyncio
import contextlib
import os
import shutil
import socket
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from temporalio.client import Client

from perdure.domain.ui import UIMessage
from perdure.turn_control.lifecycle import SubmissionLifecycle
from storage import log_watch
from storage.bus import ChunkBus
from storage.chunks import LogWriter
from storage.db import Database
from storage.intake import NewSubmission
from storage.log_appender import LogAppender
from storage.socket_bus import SocketBus, bus_directory
from storage.submission_options import SubmissionOptions
from tests.e2e.test_log_watch import first_read, reads_of, watching

HEARD_WITHIN = 5.0


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'perdure.db'}"
    yield url
    directory = bus_directory(url)
    assert directory is not None
    shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def opened(url: str) -> Iterator[SocketBus]:
    sockets = SocketBus.open(url)
    assert sockets is not None
    try:
        yield sockets
    finally:
        sockets.close()


class Heard:
    """What a process's bus is told, in order."""

    def __init__(self, bus: ChunkBus) -> None:
        self.ids: list[str | None] = []
        self._changed = asyncio.Event()
        bus.listen(self._hear)

    def _hear(self, message_id: str | None) -> None:
        self.ids.append(message_id)
        self._changed.set()

    async def until(self, wanted: set[str]) -> None:
        async with asyncio.timeout(HEARD_WITHIN):
            while not wanted <= set(self.ids):
                self._changed.clear()
                await self._changed.wait()


def listening(sockets: SocketBus) -> tuple[ChunkBus, Heard]:
    bus = ChunkBus(reliable=False)
    heard = Heard(bus)
    sockets.listen(bus)
    return bus, heard


async def test_an_append_published_in_one_process_reaches_the_listeners_of_another(
    url: str,
) -> None:
    with opened(url) as worker, opened(url) as gateway:
        published = ChunkBus(reliable=False)
        published.forward_to(worker.send)
        bus, heard = listening(gateway)

        published.publish("msg_a", "msg_b")
        await heard.until({"msg_a", "msg_b"})

    assert bus.reliable
    assert worker.sent == 1  # one datagram for both logs


async def test_a_hint_heard_from_another_process_is_not_sent_on(url: str) -> None:
    with opened(url) as worker, opened(url) as gateway:
        published = ChunkBus(reliable=False)
        published.forward_to(worker.send)
        bus, heard = listening(gateway)
        sent_on: list[object] = []
        bus.forward_to(sent_on.append)

        published.publish("msg_a")
        await heard.until({"msg_a"})

    assert sent_on == []


async def test_a_process_does_not_send_to_itself(url: str) -> None:
    with opened(url) as node:
        bus, heard = listening(node)
        bus.forward_to(node.send)

        bus.publish("msg_a")  # heard here at once; a datagram would count in `sent` at once

    assert node.sent == 0  # none left, so none can come back
    assert heard.ids == [None, "msg_a"]  # becoming reliable (read everything), then its own


async def test_the_socket_of_a_process_that_died_is_removed_by_the_next_sender(url: str) -> None:
    with opened(url) as worker, opened(url) as gateway:
        directory = bus_directory(url)
        assert directory is not None
        dead = directory / f"{uuid.uuid4().hex}.sock"
        killed = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        killed.bind(str(dead))
        killed.close()  # as a SIGKILL leaves it: the file, and nobody reading
        _, heard = listening(gateway)

        worker.send(["msg_a"])
        await heard.until({"msg_a"})

    assert not dead.exists()


async def test_a_receiver_that_fell_behind_is_owed_every_hint_it_missed(url: str) -> None:
    with opened(url) as worker:
        directory = bus_directory(url)
        assert directory is not None
        behind = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        behind.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)  # the kernel's minimum
        behind.setblocking(False)
        behind.bind(str(directory / f"{uuid.uuid4().hex}.sock"))
        try:
            published = [f"msg_{n:04d}" for n in range(400)]
            for message_id in published:  # one datagram each, none read meanwhile
                worker.send([message_id])
            received = _drain(behind)
            assert len(received) < len(published), "the receiver's buffer never filled"
            worker.send(["msg_last"])
            received |= _drain(behind)
        finally:
            behind.close()

    assert received == {*published, "msg_last"}


def _drain(receiver: socket.socket) -> set[str]:
    ids: set[str] = set()
    with contextlib.suppress(BlockingIOError):
        while True:
            ids.update(receiver.recv(65_536).decode().split())
    return ids


def test_a_bus_directory_other_users_can_enter_is_not_used(url: str) -> None:
    directory = bus_directory(url)
    assert directory is not None
    directory.mkdir(mode=0o700)
    os.chmod(directory, 0o777)

    assert SocketBus.open(url) is None
    assert stat.S_IMODE(directory.stat().st_mode) == 0o777  # left as found


def test_an_in_memory_database_has_no_bus() -> None:
    assert bus_directory("sqlite://") is None
    assert bus_directory("sqlite:///:memory:") is None


async def test_a_gateway_reads_a_separate_workers_appends_when_they_are_announced(
    sqlite_store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Polling and the safety read are an hour apart here: only the worker's hint can wake
    the gateway's watcher."""
    monkeypatch.setattr(log_watch, "SAFETY_INTERVAL", 3600.0)
    url = sqlite_store.url
    message_id = f"msg_{uuid.uuid4().hex[:12]}"
    try:
        with opened(url) as worker_sockets, opened(url) as gateway_sockets:
            worker_bus = ChunkBus(reliable=False)
            worker_bus.forward_to(worker_sockets.send)
            appender = LogAppender(sqlite_store, worker_bus)
            gateway_bus = ChunkBus(reliable=False)
            gateway_sockets.listen(gateway_bus)
            async with watching(
                sqlite_store, reliable=False, poll_interval=3600.0, bus=gateway_bus
            ) as watcher:
                with reads_of(message_id) as reads, watcher.follow(message_id, after=-1) as follow:
                    await first_read(reads)  # the append below is not in it
                    writer = appender.writer(
                        message_id=message_id, writer=LogWriter("worker", 1), submission_id="-"
                    )
                    writer.add([{"type": "text-delta", "id": "t", "delta": "hi"}])
                    await writer.flush()
                    async with asyncio.timeout(HEARD_WITHIN):
                        rows = await follow.next()
            await appender.close()
    finally:
        directory = bus_directory(url)
        assert directory is not None
        shutil.rmtree(directory, ignore_errors=True)

    assert [seq for seq, _ in rows] == [0]


async def test_a_submission_dropped_at_intake_announces_its_closed_log(
    sqlite_store: Database,
) -> None:
    """The store closes a dropped submission's log at intake; other processes' streams of it
    must hear so, as they hear a worker's appends."""
    bus = ChunkBus(reliable=True)
    heard = Heard(bus)
    lifecycle = SubmissionLifecycle(sqlite_store, cast(Client, None), task_queue="-", bus=bus)

    def new(text: str, **options: Any) -> NewSubmission:
        message = UIMessage.model_validate(
            {"id": uuid.uuid4().hex, "role": "user", "parts": [{"type": "text", "text": text}]}
        )
        return NewSubmission(
            tenant_id="t",
            chat_id="chat",
            agent="echo",
            message=message,
            idempotency_key=uuid.uuid4().hex,
            options=SubmissionOptions(**options),
        )

    await lifecycle.record(new("running"))  # recorded and admitted; its turn is not started
    dropped = await lifecycle.submit(new("dropped", concurrency="drop"))

    assert dropped.submission.status == "skipped"
    await heard.until({dropped.submission.assistant_message_id})
