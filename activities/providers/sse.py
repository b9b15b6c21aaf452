"""Server-sent events read straight off a streaming HTTP response.

The SDKs build a pydantic object for every streamed chunk; at thousands of chunks a second that
was the largest item in a busy worker's profile. Every adapter reads its stream here instead
(the WHATWG event-stream format: lines end with CRLF, LF or CR, `data:` lines are joined by
`\\n`, an empty line ends the event, `:` lines are comments) and parses each event's `data`
with `json.loads`.

Nothing here is left suspended for the garbage collector. httpx2's body generators close the
ones beneath them when closed (`aiter_bytes` closes `aiter_raw`, which closes the transport's),
but an abandoned chain that ends up in a reference cycle (the SDKs' own streams are one) is
finalized by whichever thread collects the cycle: a collection in another thread (the log
appender's, a test's fake provider) could close a generator while the event loop was closing
it too ("ValueError: async generator already executing"). So the bytes are read under
`aclosing`, and each caller closes what it reads the same way.
"""

import json
import re
import ssl
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing
from typing import Any

import anyio
import httpx2
import openai

_DROPPED = (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream)
"""What the OpenAI SDK's own stream maps to `APIConnectionError` (`openai._httpx2`)."""

_LINE_END = re.compile(rb"\r\n|\r|\n")


class _Lines:
    """Lines of a byte stream, split on the event-stream's line ends only (not on the other
    breaks `str.splitlines` knows, which JSON text may carry); a CR at the end of a read
    waits for the next read, which may begin with its LF. Line ends are ASCII, so a whole
    line never splits a UTF-8 character."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> Iterator[str]:
        buffer = self._pending + data
        start = 0
        for end in _LINE_END.finditer(buffer):
            if end.group() == b"\r" and end.end() == len(buffer):
                break
            yield buffer[start : end.start()].decode("utf-8", "replace")
            start = end.end()
        self._pending = buffer[start:]

    def finish(self) -> Iterator[str]:
        rest = self._pending.removesuffix(b"\r")
        self._pending = b""
        if rest:
            yield rest.decode("utf-8", "replace")


async def event_data(response: httpx2.Response) -> AsyncGenerator[str, None]:
    """The `data` of each event, in order. Transport failures become the SDKs' own
    `APITimeoutError` / `APIConnectionError`, as their streams raise them."""
    lines = _Lines()
    data: list[str] = []

    def ended(line: str) -> str | None:
        """Take one line; the event's data when the line ends an event."""
        if not line:
            if data:
                event = "\n".join(data)
                data.clear()
                return event
            return None
        if not line.startswith(":"):
            field, _, value = line.partition(":")
            if field == "data":
                data.append(value[1:] if value.startswith(" ") else value)
        return None

    try:
        async with aclosing(response.aiter_bytes()) as chunks:
            async for chunk in chunks:
                for line in lines.feed(chunk):
                    if (event := ended(line)) is not None:
                        yield event
        for line in lines.finish():
            if (event := ended(line)) is not None:
                yield event
        if data:
            yield "\n".join(data)
    except httpx2.TimeoutException as error:
        raise openai.APITimeoutError(request=response.request) from error
    except _DROPPED as error:
        raise openai.APIConnectionError(request=response.request) from error


async def json_events(response: httpx2.Response) -> AsyncGenerator[dict[str, Any], None]:
    """Each event's data as a JSON object, up to `[DONE]` (Chat Completions' last event). An
    `error` object in the stream raises `APIError`, as openai-python's stream does; Anthropic's
    `error` event carries the same object, which its SDK raises as a status error of the 200
    response: both are classified alike (`errors.to_provider_error`)."""
    async with aclosing(event_data(response)) as events:
        async for data in events:
            if data.startswith("[DONE]"):
                return
            event = json.loads(data)
            if isinstance(event, dict) and event.get("error"):
                error = event["error"]
                message = error.get("message") if isinstance(error, dict) else None
                raise openai.APIError(
                    message=message
                    if isinstance(message, str) and message
                    else "An error occurred during streaming",
                    request=response.request,
                    body=error,
                )
            yield event
