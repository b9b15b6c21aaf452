"""Read the gateway's UI message stream (SSE) into events: `id: <submission>:<seq>` + chunk."""

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import EventSource

DONE = "[DONE]"


@dataclass(frozen=True)
class StreamEvent:
    event_id: str | None
    """`<submission id>:<seq>`, as sent: what a resume sends back as `Last-Event-ID`. None
    for the one event the gateway sends without a place in the log (the session was deleted
    while the stream was open)."""
    chunk: dict[str, Any]


@dataclass
class EventReader:
    """Reads one response's events; `done` tells an ended stream from a dropped one."""

    done: bool = False
    """The stream's `data: [DONE]` came: the server has sent everything of this answer."""

    def events(self, response: httpx.Response) -> Iterator[StreamEvent]:
        """Each complete event of the response, decoded by httpx-sse as the SSE specification
        says.

        Comments (keep-alives) are skipped. An event cut off by a dropped connection (no blank
        line after it) is never yielded: a resume sends it again, its cursor being before it.
        """
        for event in EventSource(response).iter_sse():
            if not event.data:
                continue  # a keep-alive after an id is an empty event to the decoder
            if event.data == DONE:
                self.done = True
                return
            yield StreamEvent(event_id=event.id or None, chunk=json.loads(event.data))
