"""Relay PostgreSQL NOTIFY from any worker process onto this process's bus.

A notification's payload is the id of a log that grew, or several ids separated by spaces
(a writer that commits appends to many logs at once may announce them in one NOTIFY; a
payload holds at most 8000 bytes).
"""

import asyncio
import logging

import psycopg

from storage.bus import ChunkBus
from storage.urls import sync_url

CHANNEL = "perdure_chunks"
log = logging.getLogger(__name__)


def _conninfo(url: str) -> str:
    return sync_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def listen_forever(url: str, bus: ChunkBus, ready: asyncio.Event | None = None) -> None:
    """Run until cancelled; reconnects after failures (readers poll meanwhile)."""
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(
                _conninfo(url), autocommit=True
            ) as connection:
                await connection.execute(f"LISTEN {CHANNEL}")
                bus.reliable = True
                if ready is not None:
                    ready.set()
                async for notification in connection.notifies():
                    for message_id in notification.payload.split():
                        bus.heard(message_id)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - any connection failure means: poll, retry
            bus.reliable = False
            log.warning("chunk listener lost its connection (%s); retrying in 1 s", error)
            await asyncio.sleep(1.0)
