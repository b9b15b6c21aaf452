"""Whether a PostgreSQL store answers at all, asked on a connection of its own within a bound.

A request stuck on the store may be queued behind a busy pool (load: it will be served) or
waiting on a server cut off without a reset (a partition: TCP keeps it waiting for as long as
the partition lasts). The probe tells them apart without disturbing the request: a new
connection and `SELECT 1`, given at most `PROBE_SECONDS`; a live server, however busy, answers
that. One probe at a time per store, and a passed one vouches for it for `FRESH_SECONDS`, so a
burst of slow requests sends one probe, not hundreds.
"""

import asyncio
import time

import psycopg
from sqlalchemy.engine import make_url

PROBE_SECONDS = 3.0
FRESH_SECONDS = 1.0


class StoreProbe:
    def __init__(self, url: str) -> None:
        parsed = make_url(url).set(drivername="postgresql")
        self._conninfo = parsed.render_as_string(hide_password=False)
        self._running: asyncio.Future[bool] | None = None
        self._passed_at = float("-inf")

    async def answers(self) -> bool:
        if time.monotonic() - self._passed_at < FRESH_SECONDS:
            return True
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._probe())
        # Shielded: a request that ends meanwhile must not cancel the others' probe.
        return await asyncio.shield(self._running)

    async def _probe(self) -> bool:
        try:
            async with asyncio.timeout(PROBE_SECONDS):
                connection = await psycopg.AsyncConnection.connect(
                    self._conninfo, connect_timeout=max(2, int(PROBE_SECONDS))
                )
                try:
                    await connection.execute("SELECT 1")
                finally:
                    await connection.close()
        except (TimeoutError, psycopg.Error, OSError):
            return False
        self._passed_at = time.monotonic()
        return True
