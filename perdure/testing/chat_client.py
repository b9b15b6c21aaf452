"""A small Python client of the gateway for tests: send, resume, read SSE events."""

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from storage.session_keys import session_key


@dataclass
class Streamed:
    status: int
    headers: httpx.Headers
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    """(seq, chunk) of every event."""
    event_ids: list[str] = field(default_factory=list)
    """The SSE ids as sent: `<submission id>:<seq>`."""
    done: bool = False

    @property
    def chunks(self) -> list[dict[str, Any]]:
        return [chunk for _, chunk in self.events]

    @property
    def ids(self) -> list[int]:
        """The seq of every event."""
        return [seq for seq, _ in self.events]

    @property
    def last_event_id(self) -> str:
        return self.event_ids[-1]

    def text(self) -> str:
        return "".join(c.get("delta", "") for c in self.chunks if c["type"] == "text-delta")

    def types(self) -> list[str]:
        return [c["type"] for c in self.chunks]

    def counted(self) -> int:
        """How far a counting answer (`counting`) has got: the numbers its text holds."""
        return len(self.text().split())


def user_message(text: str, message_id: str | None = None) -> dict[str, Any]:
    return {
        "id": message_id or uuid.uuid4().hex[:16],
        "role": "user",
        "parts": [{"type": "text", "text": text}],
    }


def chat_body(session_id: str, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": session_id, "messages": [message], "trigger": "submit-message", **extra}


def key_of(chat_id: str, tenant: str = "default") -> str:
    """The storage key the store's tables know a session by, for a session these tests
    created (never one stored before migration 0008, whose key is its chat id)."""
    return session_key(tenant, chat_id)


async def read_stream(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    stop_after: int | None = None,
    stop_at_count: int | None = None,
    stop_when: Callable[[dict[str, Any]], bool] | None = None,
    **kwargs: Any,
) -> Streamed:
    """Read SSE events; with `stop_after`, drop the connection after that many events; with
    `stop_at_count`, once a counting answer has got that far; with `stop_when`, after the
    first chunk it holds for. An event count says little of
    where the answer is: under load, deltas written in one flush are joined into one event
    (`perdure/domain/delta_coalescing.py`), so a few events may hold the whole answer."""
    async with aconnect_sse(http, method, url, **kwargs) as source:
        streamed = Streamed(status=source.response.status_code, headers=source.response.headers)
        if source.response.status_code != 200:
            await source.response.aread()
            return streamed
        async for event in source.aiter_sse():
            if not event.data:
                continue  # a keep-alive comment, which httpx-sse reports as an empty event
            if event.data == "[DONE]":
                streamed.done = True
                break
            submission_id, _, seq = event.id.rpartition(":")
            assert submission_id == streamed.headers["x-perdure-submission-id"], event.id
            streamed.events.append((int(seq), json.loads(event.data)))
            streamed.event_ids.append(event.id)
            if stop_after is not None and len(streamed.events) >= stop_after:
                break
            if stop_at_count is not None and streamed.counted() >= stop_at_count:
                break
            if stop_when is not None and stop_when(streamed.chunks[-1]):
                break
    return streamed


async def send(
    http: httpx.AsyncClient,
    session_id: str,
    text: str,
    *,
    message_id: str | None = None,
    stop_after: int | None = None,
    stop_at_count: int | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Streamed:
    body = chat_body(session_id, user_message(text, message_id), **extra)
    return await read_stream(
        http,
        "POST",
        "/api/chat",
        json=body,
        headers=headers or {},
        stop_after=stop_after,
        stop_at_count=stop_at_count,
    )


def counting(n: int) -> str:
    return " ".join(str(i) for i in range(1, n + 1))
