"""Whether a dependency answers at all, asked once for many waiting callers.

`SharedProbe` runs one check at a time, and a passed check vouches for `fresh_seconds`: a burst
of slow requests sends one probe, not hundreds, to a server that may be slow only because it is
busy. The gateway probes Temporal with it (gateway/temporal.py) and, through `StoreProbe`, a
PostgreSQL store.

A request stuck on the store may be queued behind a busy pool (load: it will be served) or
waiting on a server cut off without a reset (a partition: TCP keeps it waiting for as long as
the partition lasts). `StoreProbe` tells them apart without disturbing the request: `SELECT 1`
on a connection kept for probing alone (opened again when it was lost), given at most
`PROBE_SECONDS`; a live server, however busy, answers that. A new connection per probe cost a
server process each time.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable

import psycopg
from sqlalchemy.engine import make_url

from storage.abandoned import finished_within

PROBE_SECONDS = 3.0
FRESH_SECONDS = 1.0


class SharedProbe:
    def __init__(self, check: Callable[[], Awaitable[bool]], *, fresh_seconds: float) -> None:
        self._check = check
        self._fresh_seconds = fresh_seconds
        self._running: asyncio.Future[bool] | None = None
        self._passed_at = float("-inf")

    async def answers(self) -> bool:
        if time.monotonic() - self._passed_at < self._fresh_seconds:
            return True
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._checked())
        # Shielded: a caller whose own call ended meanwhile must not cancel the others' probe.
        return await asyncio.shield(self._running)

    async def _checked(self) -> bool:
        passed = await self._check()
        if passed:
            self._passed_at = time.monotonic()
        return passed


class StoreProbe:
    def __init__(self, url: str) -> None:
        parsed = make_url(url).set(drivername="postgresql")
        self._conninfo = parsed.render_as_string(hide_password=False)
        self._connection: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        self._shared = SharedProbe(self._probe, fresh_seconds=FRESH_SECONDS)

    async def answers(self) -> bool:
        return await self._shared.answers()

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    async def _probe(self) -> bool:
        # Not waited for past the bound: psycopg takes up to 10 s to give up a query on a
        # connection that no longer answers (storage/abandoned.py).
        asked = await finished_within(self._select_one(), PROBE_SECONDS)
        if asked is not None and asked.exception() is None:
            return True
        connection, self._connection = self._connection, None
        if connection is not None:  # the next probe opens a new one
            connection.pgconn.finish()
        return False

    async def _select_one(self) -> None:
        if self._connection is None or self._connection.closed:
            self._connection = await psycopg.AsyncConnection.connect(
                self._conninfo, connect_timeout=max(2, int(PROBE_SECONDS)), autocommit=True
            )
        await self._connection.execute("SELECT 1")
