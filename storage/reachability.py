"""Whether a PostgreSQL store answers at all, asked on a connection of its own within a bound.

A request stuck on the store may be queued behind a busy pool (load: it will be served) or
waiting on a server cut off without a reset (a partition: TCP keeps it waiting for as long as
the partition lasts). The probe tells them apart without disturbing the request: `SELECT 1` on
a connection kept for probing alone (opened again when it was lost), given at most
`PROBE_SECONDS`; a live server, however busy, answers that. One probe at a time per store, and
a passed one vouches for it for `FRESH_SECONDS`, so a burst of slow requests sends one probe,
not hundreds. A new connection per probe cost a server process each time: 17 % more CPU over
the specs that wait on turns.
"""

import asyncio
import time

import psycopg
from sqlalchemy.engine import make_url

from storage.abandoned import abandon

PROBE_SECONDS = 3.0
FRESH_SECONDS = 1.0


class StoreProbe:
    def __init__(self, url: str) -> None:
        parsed = make_url(url).set(drivername="postgresql")
        self._conninfo = parsed.render_as_string(hide_password=False)
        self._connection: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        self._running: asyncio.Future[bool] | None = None
        self._passed_at = float("-inf")

    async def answers(self) -> bool:
        if time.monotonic() - self._passed_at < FRESH_SECONDS:
            return True
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._probe())
        # Shielded: a request that ends meanwhile must not cancel the others' probe.
        return await asyncio.shield(self._running)

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    async def _probe(self) -> bool:
        asking = asyncio.ensure_future(self._select_one())
        done, _ = await asyncio.wait({asking}, timeout=PROBE_SECONDS)
        if not done or asking.exception() is not None:
            # Not waited for as it unwinds: psycopg takes up to 10 s to give up a query on a
            # connection that no longer answers. The next probe opens a new connection.
            if not done:
                abandon(asking)
            connection, self._connection = self._connection, None
            if connection is not None:
                connection.pgconn.finish()
            return False
        self._passed_at = time.monotonic()
        return True

    async def _select_one(self) -> None:
        if self._connection is None or self._connection.closed:
            self._connection = await psycopg.AsyncConnection.connect(
                self._conninfo, connect_timeout=max(2, int(PROBE_SECONDS)), autocommit=True
            )
        await self._connection.execute("SELECT 1")
