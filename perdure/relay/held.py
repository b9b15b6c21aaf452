"""The provider streams the relay holds: read to their end whoever listens, within bounds.

Each stream's upstream response is read by a task of its own, so a worker that disappears
changes nothing: the relay reads on until the provider ends the answer, the stream's time limit
passes, or its byte cap is reached. Every byte received is kept, in order, so whoever attaches
(the first attempt, or a retry on another worker) is sent the whole stream from its start and
then what follows, live.

Bounds: a stream holds at most `max_stream_bytes`; the relay holds at most `max_total_bytes`
and `max_streams`. At a bound a new stream is refused (`RelayFull`), a held one is never
dropped; an ended stream is forgotten `keep_seconds` after its end, which frees room.

A head start (docs/relay.md, "Head start") is a step's first request sent by the gateway at
intake, before the step runs. The step's own request adopts it when it is the same request
(its body's digest); another request supersedes it, and one that never comes leaves it to be
cancelled after `claim_seconds`: a head start costs at most that much of an unused answer.
"""

import asyncio
import collections
import contextlib
import hashlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, cast

import httpx
from pydantic import BaseModel, Field

from perdure.domain.relay_protocol import CLAIM_SECONDS


class RelayLimits(BaseModel, frozen=True):
    max_streams: int = Field(default=1000, ge=1)
    max_total_bytes: int = Field(default=256 * 2**20, ge=1)
    max_stream_bytes: int = Field(default=8 * 2**20, ge=1)
    stream_seconds: float = Field(default=900.0, gt=0)
    """How long one provider answer may be read, from its request."""
    keep_seconds: float = Field(default=600.0, gt=0)
    """How long an ended stream stays for a retry to re-attach."""
    claim_seconds: float = Field(default=CLAIM_SECONDS, gt=0)
    """How long a head start waits for its step's request before it is cancelled."""


class RelayFull(Exception):
    """No room for another stream: refused, clearly, rather than dropping one held."""


class UpstreamUnreachable(Exception):
    """The provider could not be reached (or the stream was cancelled before it answered)."""


HeadStartOutcome = Literal["adopted", "superseded", "unclaimed", "cancelled"]
"""What became of a head start (`EARLY_HEADER`): its step's request was the same request
(adopted), another one (superseded), never came (unclaimed), or the turn was stopped first."""


@dataclass
class HeldStream:
    """One provider response, as received."""

    stream_id: str
    request_digest: str
    early: bool = False
    """Sent ahead of its step (a head start) and not yet claimed by the step's own request."""
    status: int = 0
    headers: list[tuple[str, str]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    ended_at: float | None = None
    truncated: str | None = None
    """Why the relay stopped reading before the provider's end (time limit, byte cap)."""
    failure: str | None = None
    """Why no response came: the provider could not be reached, or the stream was cancelled
    before it answered."""
    reader: asyncio.Task[None] | None = None
    _answered: asyncio.Event = field(default_factory=asyncio.Event)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def answer(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.status, self.headers = status, headers
        self._answered.set()

    async def answered(self) -> None:
        """Once the provider's status and headers are known; `UpstreamUnreachable` if none
        came."""
        await self._answered.wait()
        if self.failure is not None:
            raise UpstreamUnreachable(self.failure)

    def add(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)
        self._wake()

    def end(self, truncated: str | None = None) -> None:
        if self.ended_at is None:
            self.ended_at = time.monotonic()
            self.truncated = truncated
            self._wake()
        if not self._answered.is_set():  # ended before the provider answered
            self.failure = self.failure or truncated or "the stream ended before an answer"
            self._answered.set()

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
    def __init__(
        self,
        limits: RelayLimits,
        on_head_start: Callable[[HeadStartOutcome], None] = lambda outcome: None,
    ) -> None:
        self.limits = limits
        self._streams: dict[str, HeldStream] = {}
        self._on_head_start = on_head_start
        self.head_starts: collections.Counter[HeadStartOutcome] = collections.Counter()
        """What became of the head starts, by outcome (`GET /stats`)."""

    def get(self, stream_id: str) -> HeldStream | None:
        """The held stream of that id."""
        self._forget_expired()
        return self._streams.get(stream_id)

    @property
    def total_bytes(self) -> int:
        return sum(held.size for held in self._streams.values())

    def __len__(self) -> int:
        return len(self._streams)

    async def request(
        self, stream_id: str, request_digest: str, opener: Opener, *, early: bool = False
    ) -> HeldStream | None:
        """The stream that answers a step's request: the one held for the same request (a
        head start adopted, or a retry that sent it again), else a new one, which supersedes
        a held one of another request. `early` (a head start) never supersedes: None when its
        step's stream is held already for another request.

        The entry is held from the moment the request is sent, so a request that arrives
        before the provider answered its twin waits for that answer instead of sending again.
        `RelayFull` at a bound, before sending; `UpstreamUnreachable` when no answer came. A
        provider error (not 200) is passed on and not held: a retry asks again."""
        self._forget_expired()
        held = self._streams.get(stream_id)
        if held is not None and held.truncated is None and held.failure is None:
            if held.request_digest == request_digest:
                if not early:
                    self._claimed(held, "adopted")
                await held.answered()
                return held
            if early:
                return None
        if held is not None:  # the step sent another request: that one is superseded
            del self._streams[stream_id]
            self._claimed(held, "superseded")
            await self._stop(held)
        if len(self._streams) >= self.limits.max_streams:
            raise RelayFull(f"the relay holds {len(self._streams)} streams, its limit")
        if self.total_bytes + self.limits.max_stream_bytes > self.limits.max_total_bytes:
            raise RelayFull(
                f"the relay holds {self.total_bytes} bytes of {self.limits.max_total_bytes}"
            )
        held = HeldStream(stream_id, request_digest, early=early)
        self._streams[stream_id] = held
        held.reader = asyncio.create_task(self._read(held, opener))
        if early:
            asyncio.get_running_loop().call_later(self.limits.claim_seconds, self._unclaimed, held)
        await held.answered()
        return held

    def _claimed(self, held: HeldStream, outcome: HeadStartOutcome) -> None:
        if held.early:
            held.early = False
            self.head_starts[outcome] += 1
            self._on_head_start(outcome)

    def _unclaimed(self, held: HeldStream) -> None:
        """No step asked for the head start within `claim_seconds`: stop paying for it."""
        if held.early and self._streams.get(held.stream_id) is held:
            del self._streams[held.stream_id]
            self._claimed(held, "unclaimed")
            asyncio.get_running_loop().create_task(self._stop(held))

    async def _read(self, held: HeldStream, opener: Opener) -> None:
        try:
            response = await opener()
        except httpx.HTTPError as error:
            held.failure = f"{type(error).__name__}: {error}"
            self._forget(held)
            held.end()
            return
        except asyncio.CancelledError:
            held.end("cancelled")
            raise
        headers = [
            (name, value)
            for name, value in response.headers.items()
            if name.lower() in ("content-type", "request-id", "x-request-id", "retry-after")
        ]
        if response.status_code != 200:
            self._forget(held)
            held.answer(response.status_code, headers)
            try:
                held.add(await response.aread())
            finally:
                await response.aclose()
                held.end()
            return
        held.answer(response.status_code, headers)
        await self._read_on(held, response)

    def _forget(self, held: HeldStream) -> None:
        if self._streams.get(held.stream_id) is held:
            del self._streams[held.stream_id]

    async def _read_on(self, held: HeldStream, response: httpx.Response) -> None:
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
        except asyncio.CancelledError:
            truncated = "cancelled"
            raise
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
        self._claimed(held, "cancelled")
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
