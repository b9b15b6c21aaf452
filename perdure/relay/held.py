"""The provider streams the relay holds: read to their end whoever listens, within bounds.

Each stream's upstream response is read by a task of its own, so a worker that disappears
changes nothing: the relay reads on until the provider ends the answer, the stream's time limit
passes, or its byte cap is reached. Every byte received is kept, in order, so whoever attaches
(the first attempt, or a retry on another worker) is sent the whole stream from its start and
then what follows, live.

Bounds: a stream holds at most `max_stream_bytes`; the relay holds at most `max_total_bytes`
and `max_streams`. At a bound a new stream is refused (`RelayFull`), a held one is never
dropped; an ended stream is forgotten `keep_seconds` after its end, which frees room.
"""

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import cast

import httpx
from pydantic import BaseModel, Field


class RelayLimits(BaseModel, frozen=True):
    max_streams: int = Field(default=1000, ge=1)
    max_total_bytes: int = Field(default=256 * 2**20, ge=1)
    max_stream_bytes: int = Field(default=8 * 2**20, ge=1)
    stream_seconds: float = Field(default=900.0, gt=0)
    """How long one provider answer may be read, from its request."""
    keep_seconds: float = Field(default=600.0, gt=0)
    """How long an ended stream stays for a retry to re-attach."""


class RelayFull(Exception):
    """No room for another stream: refused, clearly, rather than dropping one held."""


@dataclass
class HeldStream:
    """One provider response, as received."""

    stream_id: str
    request_digest: str
    status: int
    headers: list[tuple[str, str]]
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    ended_at: float | None = None
    truncated: str | None = None
    """Why the relay stopped reading before the provider's end (time limit, byte cap)."""
    reader: asyncio.Task[None] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def add(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)
        self._wake()

    def end(self, truncated: str | None = None) -> None:
        if self.ended_at is None:
            self.ended_at = time.monotonic()
            self.truncated = truncated
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def replay(self) -> AsyncIterator[bytes]:
        """Every chunk from the first, then the new ones as they come, until the end."""
        index = 0
        while True:
            while index < len(self.chunks):
                yield self.chunks[index]
                index += 1
            if self.ended:
                return
            await self._changed.wait()


_ERROR_EVENTS = (b"event: error", b'data: {"error"')
"""How each API reports an error inside a stream (Anthropic's `error` event, an OpenAI-style
`error` chunk): a stream that ended so is not replayed to a retry, which asks afresh."""


def _ends_in_error(chunks: list[bytes]) -> bool:
    tail = b"".join(chunks[-4:])[-4096:]
    return any(marker in tail for marker in _ERROR_EVENTS)


def digest_of(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


Opener = Callable[[], Awaitable[httpx.Response]]
"""Sends the provider request; returns the response with its body not yet read."""


class HeldStreams:
    def __init__(self, limits: RelayLimits) -> None:
        self.limits = limits
        self._streams: dict[str, HeldStream] = {}

    def get(self, stream_id: str, request_digest: str | None = None) -> HeldStream | None:
        """The held stream of that id (of that request, when a digest is given)."""
        self._forget_expired()
        held = self._streams.get(stream_id)
        if held is None or (request_digest is not None and held.request_digest != request_digest):
            return None
        return held

    @property
    def total_bytes(self) -> int:
        return sum(held.size for held in self._streams.values())

    def __len__(self) -> int:
        return len(self._streams)

    async def open(self, stream_id: str, request_digest: str, opener: Opener) -> HeldStream:
        """Send the request and hold its response: `RelayFull` at a bound, before sending.

        A provider error (not 200) is passed on and not held: a retry asks again."""
        self._forget_expired()
        old = self._streams.pop(stream_id, None)
        if old is not None:  # the same step sent another request: that one is superseded
            await self._stop(old)
        if len(self._streams) >= self.limits.max_streams:
            raise RelayFull(f"the relay holds {len(self._streams)} streams, its limit")
        if self.total_bytes + self.limits.max_stream_bytes > self.limits.max_total_bytes:
            raise RelayFull(
                f"the relay holds {self.total_bytes} bytes of {self.limits.max_total_bytes}"
            )
        response = await opener()
        headers = [
            (name, value)
            for name, value in response.headers.items()
            if name.lower() in ("content-type", "request-id", "x-request-id", "retry-after")
        ]
        held = HeldStream(stream_id, request_digest, response.status_code, headers)
        if response.status_code != 200:
            held.add(await response.aread())
            await response.aclose()
            held.end()
            return held
        self._streams[stream_id] = held
        held.reader = asyncio.create_task(self._read(held, response))
        return held

    async def _read(self, held: HeldStream, response: httpx.Response) -> None:
        truncated: str | None = None
        try:
            # Closed here, not left to the garbage collector, when an oversize stream stops
            # the read early (activities/providers/sse.py says why); httpx types the async
            # generator it returns as an iterator.
            raw = cast(AsyncGenerator[bytes, None], response.aiter_raw())
            async with (
                asyncio.timeout(self.limits.stream_seconds),
                contextlib.aclosing(raw) as chunks,
            ):
                async for chunk in chunks:
                    if held.size + len(chunk) > self.limits.max_stream_bytes:
                        truncated = f"over {self.limits.max_stream_bytes} bytes"
                        break
                    held.add(chunk)
        except TimeoutError:
            truncated = f"over {self.limits.stream_seconds:g} s"
        except httpx.HTTPError as error:
            truncated = f"the provider's stream broke: {type(error).__name__}"
        else:
            if truncated is None and _ends_in_error(held.chunks):
                truncated = "the provider ended the stream with an error event"
        finally:
            with contextlib.suppress(Exception):
                await response.aclose()
            held.end(truncated)

    async def cancel(self, stream_id: str) -> bool:
        """Stop reading the provider (a stop, an exhausted turn) and forget the stream."""
        held = self._streams.pop(stream_id, None)
        if held is None:
            return False
        await self._stop(held)
        return True

    async def _stop(self, held: HeldStream) -> None:
        if held.reader is not None and not held.reader.done():
            held.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await held.reader
        held.end("cancelled")

    def _forget_expired(self) -> None:
        now = time.monotonic()
        for stream_id, held in list(self._streams.items()):
            if held.ended_at is not None and now - held.ended_at > self.limits.keep_seconds:
                del self._streams[stream_id]

    async def close(self) -> None:
        for held in list(self._streams.values()):
            await self._stop(held)
        self._streams.clear()
