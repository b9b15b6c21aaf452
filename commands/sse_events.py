"""Read the gateway's UI message stream (SSE) into events: `id: <submission>:<seq>` + chunk."""

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

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

    def events(self, lines: Iterable[str]) -> Iterator[StreamEvent]:
        """Each complete event of `lines` (a response's lines, without their line breaks).

        Comments (keep-alives) are skipped. An event cut off by a dropped connection (no blank
        line after it) is never yielded: a resume sends it again, its cursor being before it.
        """
        event_id: str | None = None
        data: list[str] = []
        for line in lines:
            if line == "":
                if data == [DONE]:
                    self.done = True
                    return
                if data:
                    yield StreamEvent(event_id=event_id, chunk=json.loads("\n".join(data)))
                event_id, data = None, []
            elif not line.startswith(":"):
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "id":
                    event_id = value
                elif field == "data":
                    data.append(value)
