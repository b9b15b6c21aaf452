"""Engines and transactions for SQLite (embedded default) and PostgreSQL (scale-out)."""

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session as OrmSession
from sqlmodel import Session
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.store_thread import StoreThread
from storage.urls import async_url, is_sqlite, sync_url

T = TypeVar("T")


POSTGRES_CONNECT_ARGS: dict[str, Any] = {
    "connect_timeout": 5,
    # A server cut off without a reset (packets dropped) never answers: TCP would retransmit for
    # about 15 minutes. The kernel closes a connection whose sent data is unacknowledged for 3 s
    # (a live server's host acknowledges at once, however busy PostgreSQL is), so a request
    # fails within about 8 s (3 s, then a new connection's 5 s) instead of waiting out the
    # partition: a 503 at the gateway, a retried activity in the worker (docs/recovery.md).
    "tcp_user_timeout": 3000,
    # An idle pooled connection to a host that vanished is found and dropped before it is used.
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}
"""libpq's connection parameters for PostgreSQL."""

LOCK_WAIT_SECONDS = 30.0
"""How long a writer that polls for SQLite's write lock waits at most (as `busy_timeout`)."""
LOCK_POLL_SECONDS = 0.001
"""How often it asks. SQLite's own busy handler backs off to 100 ms between tries, so a
writer could wait that long after the lock was free; the hot writers ask every millisecond."""


@contextmanager
def driver_cursor(connection: Connection) -> Iterator[Any]:
    """The database driver's own cursor on `connection`, inside whatever transaction it is in:
    for the statements run so often that SQLAlchemy's per-execution work would cost as much
    CPU as the database's (the log appender's flushes, the log watcher's passes). Placeholders
    are the driver's: `?` for sqlite3, `%s` for psycopg."""
    cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        yield cursor
    finally:
        cursor.close()


def json_column(value: Any) -> Any:
    """A JSON column's value as a driver's cursor returns it: text from sqlite3, decoded by
    psycopg."""
    return json.loads(value) if isinstance(value, str) else value


def sqlite_locked(error: BaseException) -> bool:
    """SQLite's write lock is held by another connection (`BEGIN IMMEDIATE` failed before
    anything was written, so the transaction can simply be tried again)."""
    return isinstance(error, OperationalError) and "database is locked" in str(error.orig)


def _sqlite_engine(url: str, *, begin: str | None) -> AsyncEngine:
    engine = create_async_engine(async_url(url), connect_args={"timeout": 30})
    _configure_sqlite(engine.sync_engine, begin=begin)
    return engine


def _configure_sqlite(engine: Engine, *, begin: str | None, poll_lock: bool = False) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Manage transactions ourselves: pysqlite's implicit BEGIN is deferred, and a deferred
        # transaction that later writes can fail with "database is locked" under concurrency.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        # A polling writer fails at once on a held lock and asks again itself (after the
        # pragmas above, which may have to wait for the lock at connect).
        cursor.execute(f"PRAGMA busy_timeout={0 if poll_lock else 30000}")
        cursor.close()

    if begin is not None:

        @event.listens_for(engine, "begin")
        def _on_begin(connection: Any) -> None:
            connection.exec_driver_sql(begin)


def sync_write_engine(url: str) -> Engine:
    """A blocking engine of one write connection, for a writer that runs whole transactions on
    a thread of its own (the log appender, the store thread): one hop to that thread per
    transaction, instead of one or more per statement through a busy event loop. Same
    settings as `write()`'s.

    On SQLite a held lock fails at once instead of waiting in SQLite's busy handler: the
    caller retries every `LOCK_POLL_SECONDS`."""
    if is_sqlite(url):
        engine = create_engine(
            sync_url(url),
            # The thread that uses the connection is not always the one that closes it.
            connect_args={"timeout": 30, "check_same_thread": False},
            pool_size=1,
            max_overflow=0,
        )
        _configure_sqlite(engine, begin="BEGIN IMMEDIATE", poll_lock=True)
        return engine
    return create_engine(
        sync_url(url),
        pool_size=1,
        max_overflow=0,
        pool_pre_ping=True,
        pool_timeout=5,
        connect_args=POSTGRES_CONNECT_ARGS,
    )


class Database:
    """Two roles: `write()` is one serialized transaction, `read()` sees the latest commits."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = is_sqlite(url)
        if self.is_sqlite:
            self._write_engine = _sqlite_engine(url, begin="BEGIN IMMEDIATE")
            self._read_engine = _sqlite_engine(url, begin=None)
        else:
            # Bounded: a store that stops answering fails a request in seconds (a 503 at the
            # gateway, a retried activity in the worker) instead of hanging it.
            self._write_engine = create_async_engine(
                async_url(url),
                pool_size=10,
                max_overflow=20,
                pool_pre_ping=True,
                # Waiting for a pooled connection is load, not an outage: hundreds of requests at
                # once may queue for a while. A dead server is still found fast by the connect
                # (refused at once, or bounded to 5 s) and the pre-ping.
                pool_timeout=30,
                connect_args=POSTGRES_CONNECT_ARGS,
            )
            self._read_engine = self._write_engine
        self._sqlite_writes = asyncio.Lock() if self.is_sqlite else None
        self._store_thread: StoreThread | None = None
        self._blocking_reads: Engine | None = None
        self._writes = async_sessionmaker(
            self._write_engine, class_=AsyncSession, expire_on_commit=False
        )
        self._reads = async_sessionmaker(
            self._read_engine, class_=AsyncSession, expire_on_commit=False
        )

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        if self._sqlite_writes is None:
            async with self._writes() as session, session.begin():
                yield session
            return
        # SQLite has one writer at a time. Queue this process's writers here, in order, rather
        # than at the file lock, where each waiter sleeps in SQLite's busy handler (up to
        # 100 ms a try) and a burst of writers pays those sleeps over and over.
        async with self._sqlite_writes, self._writes() as session, session.begin():
            yield session

    async def transact(self, work: Callable[[Session], T]) -> T:
        """`work(session)` as one write transaction with a blocking session, for the hot
        writers (intake, a turn's finish, stops, tool waits, log claims).

        On SQLite it runs whole on a store thread (storage/store_thread.py), so the database's
        single write lock is held for its statements, not for the loop cycles of a busy process
        in between; while another connection holds that lock, `work` is run again every
        millisecond, so it must do nothing but store work. On PostgreSQL (row locks) it runs
        on the caller's loop through `AsyncSession.run_sync` (a pool of blocking connections on
        threads measured no cheaper there: intake 4.8 ms of CPU either way). Either way a
        caller cancelled before the commit gets the transaction rolled back.
        """
        if not self.is_sqlite:
            async with self.write() as session:
                # sqlmodel's AsyncSession runs `work` with its own (sqlmodel) Session class.
                return await session.run_sync(cast(Callable[[OrmSession], T], work))
        if self._store_thread is None:
            self._store_thread = StoreThread(
                "perdure-store", sync_write_engine(self.url), retry_when=sqlite_locked
            )
        return await self._store_thread.run(
            work, patience=LOCK_WAIT_SECONDS, poll=LOCK_POLL_SECONDS
        )

    def blocking_reads(self) -> Engine:
        """SQLite's blocking read engine: `read_sync`'s, and the log watcher's connection."""
        if self._blocking_reads is None:
            self._blocking_reads = create_engine(
                sync_url(self.url),
                # Pooled connections serve whichever thread runs the next read.
                connect_args={"timeout": 30, "check_same_thread": False},
            )
            _configure_sqlite(self._blocking_reads, begin=None)
        return self._blocking_reads

    async def read_sync(self, read: Callable[[Session], T]) -> T:
        """`read(session)` with a blocking session, for the reads on a turn's hot path.

        On SQLite it runs on a thread with a plain `sqlite3` connection: one hop for the whole
        read, where the asyncio driver makes several per statement (execute, fetch, close, and
        the session's own) through the event loop. On PostgreSQL it runs on the caller's loop
        through `AsyncSession.run_sync`, statement by statement as any other read.
        """
        if not self.is_sqlite:
            async with self.read() as session:
                # sqlmodel's AsyncSession runs `read` with its own (sqlmodel) Session class.
                return await session.run_sync(cast(Callable[[OrmSession], T], read))

        def in_session(engine: Engine) -> T:
            with Session(engine, expire_on_commit=False) as session:
                return read(session)

        return await self._sqlite_read(in_session)

    async def read_connection(self, read: Callable[[Connection], T]) -> T:
        """`read(connection)` with a blocking connection (SQLAlchemy Core, no ORM session), as
        `read_sync` runs it, for the reads of every request: an ORM session and the objects it
        builds cost several times the statement (0.35-0.45 ms of CPU for two small reads on
        SQLite, against 0.08-0.1 ms through Core)."""
        if not self.is_sqlite:
            async with self._read_engine.connect() as connection:
                return await connection.run_sync(read)

        def on_connection(engine: Engine) -> T:
            with engine.connect() as connection:
                return read(connection)

        return await self._sqlite_read(on_connection)

    async def _sqlite_read(self, read: Callable[[Engine], T]) -> T:
        """`read` on a thread with SQLite's blocking read engine: one hop for the whole read,
        where the asyncio driver makes several per statement through the event loop."""
        engine = self.blocking_reads()
        return await asyncio.to_thread(read, engine)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with self._reads() as session:
            yield session

    async def ping(self) -> None:
        async with self.read() as session:
            await session.exec(text("SELECT 1"))  # type: ignore[call-overload]

    async def close(self) -> None:
        if self._store_thread is not None:
            await asyncio.to_thread(self._store_thread.close)
            self._store_thread = None
        if self._blocking_reads is not None:
            self._blocking_reads.dispose()
            self._blocking_reads = None
        await self._write_engine.dispose()
        if self._read_engine is not self._write_engine:
            await self._read_engine.dispose()
