"""Relay a message's chunk log as an AI SDK UI message stream (SSE with `id: <seq>`)."""

import asyncio
import json
import time
from collections.abc import AsyncIterator

from fastapi.responses import StreamingResponse

from domain.ui import TERMINAL_CHUNK_TYPES
from storage.bus import ChunkBus
from storage.chunks import read_chunks
from storage.db import Database
from storage.submissions import get_submission

KEEP_ALIVE_SECONDS = 15.0
RELIABLE_BUS_SAFETY_POLL = 1.0
"""Even with a wake-up bus, re-read now and then: a hint lost in a reconnect costs ≤ 1 s."""

STREAM_HEADERS = {
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}


def _event(seq: int, chunk: dict[str, object]) -> str:
    return f"id: {seq}\ndata: {json.dumps(chunk, separators=(',', ':'))}\n\n"


GONE = 'data: {"type":"error","errorText":"The session was deleted."}\n\ndata: [DONE]\n\n'


async def relay(
    db: Database,
    bus: ChunkBus,
    *,
    message_id: str,
    submission_id: str,
    after: int,
    poll_interval: float,
) -> AsyncIterator[str]:
    """Every logged chunk after `after`, once, in order, until the log's terminal chunk."""
    cursor = after
    quiet_since = time.monotonic()
    while True:
        waiter = bus.waiter(message_id)
        rows = await read_chunks(db, message_id=message_id, after=cursor)
        for seq, chunk in rows:
            yield _event(seq, chunk)
            cursor = seq
            if chunk.get("type") in TERMINAL_CHUNK_TYPES:
                yield "data: [DONE]\n\n"
                return
        if rows:
            quiet_since = time.monotonic()
            continue
        timeout = RELIABLE_BUS_SAFETY_POLL if bus.reliable else poll_interval
        try:
            async with asyncio.timeout(timeout):
                await waiter.wait()
        except TimeoutError:
            if time.monotonic() - quiet_since >= KEEP_ALIVE_SECONDS:
                if await get_submission(db, submission_id) is None:
                    yield GONE  # deleted with its session: its log will never close
                    return
                yield ": keep-alive\n\n"
                quiet_since = time.monotonic()


def stream_response(
    db: Database,
    bus: ChunkBus,
    *,
    message_id: str,
    after: int,
    poll_interval: float,
    submission_id: str,
) -> StreamingResponse:
    return StreamingResponse(
        relay(
            db,
            bus,
            message_id=message_id,
            submission_id=submission_id,
            after=after,
            poll_interval=poll_interval,
        ),
        media_type="text/event-stream",
        headers={**STREAM_HEADERS, "x-perdure-submission-id": submission_id},
    )
