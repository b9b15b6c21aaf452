"""Relay a message's chunk log as an AI SDK UI message stream (SSE).

Every event's id is `<submission id>:<seq>`: it names the turn as well as the position, so a
client that reconnects with the id of an earlier turn is given the newer turn from its start.
"""

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi.sse import EventSourceResponse, format_sse_event

from gateway.errors import ApiError
from perdure.domain.ui import TERMINAL_CHUNK_TYPES, Chunk
from perdure.telemetry.metrics import RelayMeter
from storage.chunks import log_closed, read_chunks, read_log
from storage.db import Database
from storage.log_watch import LogWatcher
from storage.submission_reads import get_submission

KEEP_ALIVE_SECONDS = 15.0
MAX_SEQ = 2**31 - 1
"""The largest seq a cursor may name (the log's seq column is a 32-bit integer)."""

STREAM_HEADERS = {
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
DONE = format_sse_event(data_str="[DONE]")
"""The AI SDK's end of a UI message stream."""
OPENED = format_sse_event(comment="waiting for the turn")
"""Sent at once when the log is still empty, so the client has the headers without waiting."""
KEEP_ALIVE = format_sse_event(comment="keep-alive")
GONE = format_sse_event(data_str='{"type":"error","errorText":"The session was deleted."}') + DONE

_EVENT_ID = re.compile(r"^(?:(?P<submission>[A-Za-z0-9_\-]{1,64}):)?(?P<seq>-1|\d{1,10})$")


@dataclass(frozen=True)
class Cursor:
    """Where a resuming client is: after `seq` of `submission_id`'s log (any turn when None)."""

    seq: int
    submission_id: str | None = None

    @classmethod
    def parse(cls, event_id: str) -> "Cursor | None":
        """`<submission id>:<seq>` or a bare seq; None when it is neither."""
        match = _EVENT_ID.match(event_id.strip())
        if match is None or int(match["seq"]) > MAX_SEQ:
            return None
        return cls(seq=int(match["seq"]), submission_id=match["submission"])

    def after_in(self, submission_id: str) -> int:
        """The seq to resume `submission_id`'s log after: another turn's cursor means none."""
        if self.submission_id is None or self.submission_id == submission_id:
            return self.seq
        return -1


def cursor_from(last_event_id: str | None, after: int | None) -> Cursor | None:
    if after is not None:
        return Cursor(seq=after)
    if last_event_id is None:
        return None
    cursor = Cursor.parse(last_event_id)
    if cursor is None:
        raise ApiError(
            400,
            "bad_cursor",
            f"Last-Event-ID must be an event id (`<submission id>:<seq>`) or a seq "
            f"from -1 to {MAX_SEQ}",
        )
    return cursor


def event_id(submission_id: str, seq: int) -> str:
    return f"{submission_id}:{seq}"


def _event(submission_id: str, seq: int, chunk: Chunk) -> bytes:
    data = json.dumps(chunk, separators=(",", ":"))
    return format_sse_event(data_str=data, id=event_id(submission_id, seq))


def is_park(chunk: Chunk) -> bool:
    """The `finish` a turn writes when it parks for approvals or client tool outputs (a
    finished turn's `finish` with this reason is its log's last chunk: the log is closed)."""
    return chunk.get("type") == "finish" and chunk.get("finishReason") == "tool-calls"


def ends_stream(chunk: Chunk, *, continued: bool) -> bool:
    """A terminal chunk ends the stream, unless it is a park whose continuation is already
    in the log: a replay goes on through it, as the AI SDK rebuilds the message from the
    whole log. A park at the end of what is logged ends the stream: the client answers."""
    if chunk.get("type") not in TERMINAL_CHUNK_TYPES:
        return False
    return not (continued and is_park(chunk))


@dataclass(frozen=True)
class _Batch:
    """Rows read together, sent as one write: a write per event costs a pass through every
    middleware and a system call apiece."""

    data: bytes
    rows: list[tuple[int, Chunk]]
    """The rows sent: up to the terminal chunk that ends the stream, when there is one."""
    ended: bool
    """A terminal chunk ended the stream (`[DONE]` follows it in `data`)."""


def _batch(submission_id: str, rows: list[tuple[int, Chunk]]) -> _Batch:
    events: list[bytes] = []
    for index, (seq, chunk) in enumerate(rows):
        events.append(_event(submission_id, seq, chunk))
        if ends_stream(chunk, continued=index + 1 < len(rows)):
            events.append(DONE)
            return _Batch(b"".join(events), rows[: index + 1], ended=True)
    return _Batch(b"".join(events), rows, ended=False)


async def relay(
    db: Database,
    watcher: LogWatcher,
    *,
    message_id: str,
    submission_id: str,
    after: int,
    first: list[tuple[int, Chunk]] | None = None,
    meter: RelayMeter | None = None,
) -> AsyncIterator[bytes]:
    """Every logged chunk after `after`, once, in order, until the log's terminal chunk.

    `first` is the log's first read, when the caller has done it already. The stream reads
    nothing itself after that: the process's `watcher` hands it the rows that follow.
    `meter` measures each chunk once it is written to the client (the next item is asked
    for only then). The rows of one read are written together.
    """
    meter = meter or RelayMeter()
    rows = await read_chunks(db, message_id=message_id, after=after) if first is None else first
    batch = _batch(submission_id, rows)
    if batch.rows:
        yield batch.data
        for _, chunk in batch.rows:
            meter.relayed(chunk)
    if batch.ended:
        return
    cursor = rows[-1][0] if rows else after
    quiet_since = time.monotonic()
    with watcher.follow(message_id, after=cursor) as follow:
        while True:
            rows = []
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(quiet_since + KEEP_ALIVE_SECONDS - time.monotonic()):
                    rows = await follow.next()
            batch = _batch(submission_id, rows)
            if batch.rows:
                yield batch.data
                for seq, chunk in batch.rows:
                    meter.relayed(chunk, follow.committed_at(seq))
            if batch.ended:
                return
            if rows:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= KEEP_ALIVE_SECONDS:
                if await get_submission(db, submission_id) is None:
                    yield GONE  # deleted with its session: its log will never close
                    return
                yield KEEP_ALIVE
                quiet_since = time.monotonic()


async def _opened(events: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield OPENED
    async for event in events:
        yield event


async def _metered(events: AsyncIterator[bytes], meter: RelayMeter) -> AsyncIterator[bytes]:
    """`events`, counted among the active streams from their first event to their end."""
    meter.opened()
    try:
        async for event in events:
            yield event
    finally:
        meter.closed()


async def _done() -> AsyncIterator[bytes]:
    yield DONE


async def stream_response(
    db: Database,
    watcher: LogWatcher,
    *,
    message_id: str,
    submission_id: str,
    cursor: Cursor | None,
    accepted_at: float | None = None,
) -> EventSourceResponse:
    """The stream of `submission_id`'s answer after `cursor` (from its start without one).

    `accepted_at` (`time.monotonic()`): when the new message this answers was accepted, for
    the time-to-first-token metric.

    The log's first read happens here, before the response, so a failing store is a JSON
    error rather than a stream that breaks before its first event. A bare seq past the end
    of the log comes from an earlier turn's answer: this one is sent from its start; an event
    id of this turn past its end is refused; one at its closing chunk gets just `[DONE]`.
    A log pruned after the retention period is a `410`, unless the cursor is at its end.
    """
    after = -1 if cursor is None else cursor.after_in(submission_id)
    read = await read_log(db, message_id=message_id, after=after)
    if read.pruned:
        if cursor is not None and after == read.last_seq:
            return _response(_done(), submission_id)  # the client has seen all of it
        raise _pruned(submission_id)
    rows = read.rows
    if cursor is not None and not rows and after >= 0:
        resumed = await _resumed_past_the_read(
            db, message_id=message_id, submission_id=submission_id, cursor=cursor, after=after
        )
        if resumed is None:
            return _response(_done(), submission_id)
        after, rows = resumed
    meter = RelayMeter(accepted_at)
    events = relay(
        db,
        watcher,
        message_id=message_id,
        submission_id=submission_id,
        after=after,
        first=rows,
        meter=meter,
    )
    return _response(_metered(events if rows else _opened(events), meter), submission_id)


def _pruned(submission_id: str) -> ApiError:
    return ApiError(
        410,
        "answer_pruned",
        "This answer's stream is no longer kept (closed chunk logs are deleted after "
        "PERDURE_CHUNK_RETENTION_HOURS); the answer itself is in the session's messages.",
        submissionId=submission_id,
    )


async def _resumed_past_the_read(
    db: Database, *, message_id: str, submission_id: str, cursor: Cursor, after: int
) -> tuple[int, list[tuple[int, Chunk]]] | None:
    """Where a cursor that found no chunk after it resumes: the seq to follow from and the
    chunks already there; None when the client has seen the whole answer (just `[DONE]`)."""
    at_cursor = await read_chunks(db, message_id=message_id, after=after - 1)
    if not at_cursor:  # seqs run 0, 1, 2…: no row at `after` means it is past the end
        if cursor.submission_id == submission_id:
            raise ApiError(
                400, "bad_cursor", f"Last-Event-ID is past the end of the answer ({after})"
            )
        return -1, await read_chunks(db, message_id=message_id, after=-1)
    if at_cursor[0][1].get("type") not in TERMINAL_CHUNK_TYPES:
        return after, []
    if not is_park(at_cursor[0][1]):
        return None
    # After a park the client waits for the continuation, which this stream follows. A log
    # closed by now was closed with its ending (a stop while parked), possibly after the
    # first read: read again, or the client would miss that ending.
    if not await log_closed(db, message_id=message_id):
        return after, []
    rows = await read_chunks(db, message_id=message_id, after=after)
    return (after, rows) if rows else None


def _response(events: AsyncIterator[bytes], submission_id: str) -> EventSourceResponse:
    # Returned, not a generator route: the answer is decided (a 204, a JSON error, a 410) by
    # the log's first read, before the stream's first byte.
    return EventSourceResponse(
        events, headers={**STREAM_HEADERS, "x-perdure-submission-id": submission_id}
    )
