"""Play a scheduled list of SSE frames over HTTP, honouring stream faults.

Each frame has a due time (`time.monotonic()`); frames already due are sent at once, so a
client that re-attaches late gets the backlog immediately and then the live pace.
"""

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from perdure.testing.fakeprovider.state import FakeState, RecordedRequest

Outcome = Literal["done", "abort", "stall", "gone"]


@dataclass(frozen=True)
class Frame:
    data: bytes
    delta: bool = False
    """A content delta: text, or a fragment of tool-call arguments."""
    seq: int | None = None
    at: float = 0.0


@dataclass(frozen=True)
class StreamFault:
    after: int
    """Content deltas sent on this connection before the fault strikes."""
    action: Literal["abort", "stall", "error"]
    error_frame: bytes = b""


def sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def schedule(frames: Sequence[Frame], start: float, delay_s: float, ttft_s: float) -> list[Frame]:
    """Give every frame its due time: `ttft` before the first delta, `delay` before each."""
    due, first, timed = start, True, []
    for frame in frames:
        if frame.delta:
            due += delay_s + (ttft_s if first else 0.0)
            first = False
        timed.append(replace(frame, at=due))
    return timed


async def _sleep_until(due: float, *events: asyncio.Event) -> None:
    """Sleep until `due` (never waking early) or until one of `events` is set."""
    while (delay := due - time.monotonic()) > 0 and not any(event.is_set() for event in events):
        waiters = [asyncio.ensure_future(event.wait()) for event in events]
        try:
            await asyncio.wait(waiters, timeout=delay)
        finally:
            for waiter in waiters:
                waiter.cancel()


class FrameStream(Response):
    """An SSE response that plays frames on schedule; `stop` ends it cleanly (cancellation)."""

    def __init__(
        self,
        frames: Sequence[Frame],
        *,
        state: FakeState,
        record: RecordedRequest,
        fault: StreamFault | None = None,
        stop: asyncio.Event | None = None,
    ) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
        ]
        self._frames = list(frames)
        self._state = state
        self._record = record
        self._fault = fault
        self._stop = stop or asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        gone = asyncio.Event()
        watcher = asyncio.ensure_future(self._watch(receive, gone))
        try:
            outcome = await self._play(send, gone)
            if outcome == "stall":
                await gone.wait()
        finally:
            watcher.cancel()
        if outcome == "done":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        # "abort": returning without the final chunk makes the server drop the connection.

    @staticmethod
    async def _watch(receive: Receive, gone: asyncio.Event) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
                return

    async def _body(self, send: Send, data: bytes) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})

    async def _play(self, send: Send, gone: asyncio.Event) -> Outcome:
        total = sum(frame.delta for frame in self._frames)
        sent = 0
        fault = self._fault
        for frame in self._frames:
            if fault is not None and sent >= fault.after and (frame.delta or sent == total):
                if fault.action == "error":
                    await self._body(send, fault.error_frame)
                    return "done"
                return fault.action
            await _sleep_until(frame.at, gone, self._stop)
            if gone.is_set():
                return "gone"
            if self._stop.is_set() and frame.at > time.monotonic():
                return "done"
            await self._body(send, frame.data)
            if frame.delta:
                sent += 1
                self._state.count_delta(self._record)
        return "done"
