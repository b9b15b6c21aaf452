"""One reader per process for every chunk log its streams follow.

Streams do not read the log while they wait: each registers a `Follow` (a log and the last seq
it has), and the process's `LogWatcher` reads the new rows of all followed logs in one query
and hands each stream its own. The cost of relaying grows with chunks, not with open streams
× poll rate:

- with a reliable bus (the worker in this process, or PostgreSQL LISTEN/NOTIFY), a pass runs
  when a followed log is announced and reads only the announced logs; every
  `SAFETY_INTERVAL` it reads all of them, so a lost hint costs at most that;
- without one (SQLite across processes) a pass reads all followed logs every poll interval,
  and the logs this process's own worker announces at once (a node, `perdure serve`);
- with nothing followed it sleeps.

Rows are read only after they are committed, so a client never sees a chunk that is not in
the log.
"""

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, cast

from sqlalchemy import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from perdure.domain.ui import Chunk
from storage.bus import ChunkBus
from storage.db import Database, driver_cursor, json_column

SAFETY_INTERVAL = 1.0
"""With a reliable bus, read every followed log this often anyway (a hint lost in a
reconnect, a NOTIFY dropped)."""
LOGS_PER_QUERY = 256
"""On SQLite two parameters a log: below even the 999 of SQLite before 3.32."""
NO_LOG = ("", 0)
"""Pads a query to its size class: no log has an empty id."""
MAX_BACKOFF = 1.0

log = logging.getLogger(__name__)

Row = tuple[int, Chunk]


class Follow:
    """One stream's interest in one log: the rows after `cursor`, as the watcher reads them."""

    def __init__(self, message_id: str, after: int) -> None:
        self.message_id = message_id
        self.cursor = after
        """The last seq handed over (read by the watcher, perhaps not yet taken)."""
        self._rows: list[Row] = []
        self._committed: dict[int, float] = {}
        self._ready = asyncio.Event()

    async def next(self) -> list[Row]:
        """The rows handed over since the last call, waiting for some when there are none.

        Cancelling the wait loses nothing: rows handed over meanwhile wait for the next call.
        """
        while not self._rows:
            self._ready.clear()
            await self._ready.wait()
        rows, self._rows = self._rows, []
        return rows

    def committed_at(self, seq: int) -> float | None:
        """When the row of `seq`, handed over by the watcher, was written (wall clock); once."""
        return self._committed.pop(seq, None)

    def hand(self, rows: list[Row], committed: Mapping[int, float] | None = None) -> None:
        """Take rows read after a cursor at or before this one's (the watcher calls it), with
        their rows' `created_at` by seq (for the relay latency metric)."""
        fresh = [row for row in rows if row[0] > self.cursor]
        if fresh:
            self._rows.extend(fresh)
            if committed:
                for seq, _ in fresh:
                    if seq in committed:
                        self._committed[seq] = committed[seq]
            self.cursor = fresh[-1][0]
            self._ready.set()


def _size_class(logs: int) -> int:
    """SQLite queries come in a few sizes (1, 2, 4 … `LOGS_PER_QUERY`): each prepared once."""
    return 1 << max(0, logs - 1).bit_length()


@functools.cache
def _sqlite_query(logs: int) -> str:
    """The new rows of `logs` logs: the list of logs is the outer loop (CROSS JOIN keeps the
    order), each walks the (message_id, seq) primary key from its cursor."""
    values = ", ".join("(?, ?)" for _ in range(logs))
    return (
        f"WITH followed(message_id, after_seq) AS (VALUES {values}) "
        "SELECT c.message_id, c.seq, c.body, c.created_at FROM followed CROSS JOIN chunks AS c "
        "WHERE c.message_id = followed.message_id AND c.seq > followed.after_seq "
        "ORDER BY c.message_id, c.seq"
    )


_POSTGRES_QUERY = (
    "SELECT followed.message_id, c.seq, c.body, c.created_at "
    "FROM unnest(CAST(%s AS VARCHAR[]), CAST(%s AS INTEGER[])) "
    "AS followed(message_id, after_seq) "
    "CROSS JOIN LATERAL (SELECT seq, body, created_at FROM chunks "
    "WHERE chunks.message_id = followed.message_id AND chunks.seq > followed.after_seq "
    "ORDER BY seq) AS c"
)
"""The new rows of any number of logs in one statement with two parameters. LATERAL keeps
one index range scan a log whatever the planner's statistics say (a plain join on a table
never analyzed is planned as a scan of the whole table)."""


def _query(postgres: bool, batch: list[tuple[str, int]]) -> tuple[str, tuple[Any, ...]]:
    if postgres:
        return _POSTGRES_QUERY, ([m for m, _ in batch], [a for _, a in batch])
    size = _size_class(len(batch))
    padded = batch + [NO_LOG] * (size - len(batch))
    return _sqlite_query(size), tuple(value for pair in padded for value in pair)


def _fetch(cursor: Any, sql: str, params: tuple[Any, ...]) -> list[Any]:
    """One statement of a pass, on the driver's cursor (SQLAlchemy's per-execution and
    per-row work cost two to four times what the database spent on a pass)."""
    cursor.execute(sql, params)
    return cast(list[Any], cursor.fetchall())


class NewRows(dict[str, list[Row]]):
    """The rows after each followed log's cursor, by log (logs without any are absent), and
    `committed`: each row's `created_at` by log and seq (for the relay latency metric)."""

    def __init__(self) -> None:
        super().__init__()
        self.committed: dict[str, dict[int, float]] = {}


def read_new_rows(connection: Connection, after: dict[str, int]) -> NewRows:
    """The rows after `after[message_id]` of each log, in order; logs without any are absent.

    One statement per `LOGS_PER_QUERY` logs, outside any transaction (the connection is in
    autocommit: every pass sees the latest commits).
    """
    postgres = connection.dialect.name == "postgresql"
    found = NewRows()
    targets = list(after.items())
    with driver_cursor(connection) as cursor:
        for start in range(0, len(targets), LOGS_PER_QUERY):
            sql, params = _query(postgres, targets[start : start + LOGS_PER_QUERY])
            for message_id, seq, body, created_at in _fetch(cursor, sql, params):
                found.setdefault(message_id, []).append((seq, json_column(body)))
                found.committed.setdefault(message_id, {})[seq] = created_at
    return found


class _Reader(Protocol):
    async def read(self, after: dict[str, int]) -> NewRows: ...

    async def close(self) -> None: ...


class _BlockingReader:
    """SQLite: a blocking connection on a thread of its own, one hop per pass (the asyncio
    driver makes several per statement through the event loop)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._connection: Connection | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="perdure-log-watch")

    async def read(self, after: dict[str, int]) -> NewRows:
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._read, after)

    def _read(self, after: dict[str, int]) -> NewRows:
        if self._connection is None:
            self._connection = self._engine.connect()
        return read_new_rows(self._connection, after)

    async def close(self) -> None:
        def close() -> None:
            if self._connection is not None:
                self._connection.close()

        # After a read still under way (a cancelled pass leaves it running on the thread).
        await asyncio.get_running_loop().run_in_executor(self._thread, close)
        self._thread.shutdown(wait=False)


class _AsyncReader:
    """PostgreSQL: an AUTOCOMMIT connection of the async engine, kept (see `_own_reader`)."""

    def __init__(self, connection: AsyncConnection) -> None:
        self._connection = connection

    async def read(self, after: dict[str, int]) -> NewRows:
        return await self._connection.run_sync(lambda connection: read_new_rows(connection, after))

    async def close(self) -> None:
        await self._connection.close()


async def _own_reader(db: Database) -> _Reader:
    """A read connection the watcher checks out once and keeps, so a burst of requests waiting
    for pooled connections never holds the relay up. Every read must see the latest commits
    and no transaction may stay open between passes: autocommit. (SQLite's connections are in
    autocommit from the start, see storage/db.py.)"""
    if db.is_sqlite:
        return _BlockingReader(db.blocking_reads())
    async with db.read() as session:
        engine = session.bind
    if not isinstance(engine, AsyncEngine):
        raise TypeError(f"reads are bound to {engine!r}, not an engine")
    connection = await engine.connect()
    return _AsyncReader(await connection.execution_options(isolation_level="AUTOCOMMIT"))


class LogWatcher:
    """The one reader of followed logs in a process (see the module's docstring)."""

    def __init__(self, db: Database, bus: ChunkBus, *, poll_interval: float) -> None:
        self.db = db
        self.bus = bus
        self.poll_interval = poll_interval
        self.passes = 0
        """Read passes so far (each one query per `LOGS_PER_QUERY` logs), for tests and stats."""
        self._follows: dict[str, set[Follow]] = {}
        self._announced: set[str] = set()
        self._everything = True
        self._last_full = 0.0
        self._wake = asyncio.Event()
        self._reader: _Reader | None = None
        self._stop_listening = bus.listen(self._heard)

    @contextlib.contextmanager
    def follow(self, message_id: str, *, after: int) -> Iterator[Follow]:
        """Follow `message_id`'s log after `after` until the block ends."""
        follow = Follow(message_id, after)
        self._follows.setdefault(message_id, set()).add(follow)
        # The stream read the log before following it: an append announced in between
        # reached nobody, so read this log once now.
        self._announce(message_id)
        try:
            yield follow
        finally:
            followers = self._follows.get(message_id)
            if followers is not None:
                followers.discard(follow)
                if not followers:
                    del self._follows[message_id]
                    self._announced.discard(message_id)

    @property
    def following(self) -> int:
        """How many logs are followed."""
        return len(self._follows)

    async def run(self) -> None:
        """Read until cancelled. A failing read is retried (streams wait meanwhile)."""
        backoff = 0.0
        try:
            while True:
                await self._until_due()
                try:
                    await self._pass()
                except Exception as error:  # noqa: BLE001 - the store may come back
                    self._everything = True
                    backoff = min(MAX_BACKOFF, max(2 * backoff, self.poll_interval))
                    log.warning("reading followed chunk logs failed (%s); retrying", error)
                    await asyncio.sleep(backoff)
                else:
                    backoff = 0.0
        finally:
            self._stop_listening()
            await self._disconnect()

    async def _disconnect(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            with contextlib.suppress(Exception):  # a broken connection is dropped anyway
                await reader.close()

    def _heard(self, message_id: str | None) -> None:
        if message_id is None:
            self._everything = True
            self._wake.set()
        elif message_id in self._follows:
            self._announce(message_id)

    def _announce(self, message_id: str) -> None:
        self._announced.add(message_id)
        self._wake.set()

    async def _until_due(self) -> None:
        """Until a pass is due: a log announced on the bus (read at once, reliable or not: an
        append of this very process), or the full read every `SAFETY_INTERVAL` (reliable
        bus) or poll interval (none)."""
        while True:
            if not self._follows:
                self._wake.clear()
                await self._wake.wait()
                continue
            if self._everything or self._announced:
                return
            interval = SAFETY_INTERVAL if self.bus.reliable else self.poll_interval
            remaining = self._last_full + interval - time.monotonic()
            if remaining <= 0:
                self._everything = True
                return
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._wake.wait()

    async def _pass(self) -> None:
        if self._everything:
            self._everything = False
            self._last_full = time.monotonic()
            wanted = list(self._follows)
        else:
            wanted = [m for m in self._announced if m in self._follows]
        self._announced.clear()
        after = {m: min(f.cursor for f in self._follows[m]) for m in wanted}
        if not after:
            return
        self.passes += 1
        try:
            if self._reader is None:
                self._reader = await _own_reader(self.db)
            found = await self._reader.read(after)
        except BaseException:
            self._announced.update(after)  # not read: read them next time
            await self._disconnect()
            raise
        for message_id, rows in found.items():
            for follow in list(self._follows.get(message_id, ())):
                if follow.cursor < after[message_id]:
                    self._announced.add(message_id)  # joined behind the read: read again
                else:
                    follow.hand(rows, found.committed.get(message_id))
