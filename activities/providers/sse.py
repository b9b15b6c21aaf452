"""Server-sent events read straight off a streaming HTTP response.

The SDKs build a pydantic object for every streamed chunk; at thousands of chunks a second that
was the largest item in a busy worker's profile. Adapters that read the stream themselves take
each event's `data` from here (the WHATWG event-stream format: `data:` lines joined by `\\n`, an
empty line ends the event, `:` lines are comments) and parse it with `json.loads`.
"""

import ssl
from collections.abc import AsyncIterator

import anyio
import httpx2
import openai

_DROPPED = (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream)
"""What the OpenAI SDK's own stream maps to `APIConnectionError` (`openai._httpx2`)."""


async def event_data(response: httpx2.Response) -> AsyncIterator[str]:
    """The `data` of each event, in order. Transport failures become the SDKs' own
    `APITimeoutError` / `APIConnectionError`, as their streams raise them."""
    data: list[str] = []
    try:
        async for line in response.aiter_lines():
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            if field == "data":
                data.append(value[1:] if value.startswith(" ") else value)
        if data:
            yield "\n".join(data)
    except httpx2.TimeoutException as error:
        raise openai.APITimeoutError(request=response.request) from error
    except _DROPPED as error:
        raise openai.APIConnectionError(request=response.request) from error
