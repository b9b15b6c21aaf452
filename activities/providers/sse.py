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
import ssl
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import anyio
import httpx2
import openai

_DROPPED = (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream)
"""What the OpenAI SDK's own stream maps to `APIConnectionError` (`openai._httpx2`)."""


def _data_line(line: bytes) -> bytes | None:
    """The value of a `data` field line; None for any other line (comments, other fields)."""
    if line.startswith(b"data:"):
        value = line[5:]
    else:
        field, _, value = line.partition(b":")
        if field != b"data":
            return None
    return value[1:] if value.startswith(b" ") else value


async def event_data(response: httpx2.Response) -> AsyncGenerator[str, None]:
    """The `data` of each event, in order. Transport failures become the SDKs' own
    `APITimeoutError` / `APIConnectionError`, as their streams raise them.

    Lines end with LF, CRLF or CR only (not the other breaks `str.splitlines` knows, which JSON
    text may carry); a CR that ends a read waits for the next, which may begin with its LF.
    Line ends are ASCII, so splitting the bytes never splits a UTF-8 character."""
    pending = b""
    data: list[bytes] = []
    try:
        async with aclosing(response.aiter_bytes()) as chunks:
            async for chunk in chunks:
                buffer = pending + chunk if pending else chunk
                held = b""
                if b"\r" in buffer:
                    if buffer.endswith(b"\r"):
                        buffer, held = buffer[:-1], b"\r"
                    buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                lines = buffer.split(b"\n")
                pending = lines.pop() + held
                for line in lines:
                    if line:
                        value = _data_line(line)
                        if value is not None:
                            data.append(value)
                    elif data:
                        yield b"\n".join(data).decode("utf-8", "replace")
                        data.clear()
        last = pending.removesuffix(b"\r")
        value = _data_line(last) if last else None
        if value is not None:
            data.append(value)
        if data:
            yield b"\n".join(data).decode("utf-8", "replace")
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
