"""Every request body is capped as it is read, before any of it is parsed: its route's limit
(`body_limit`), else `SMALL_BODY_BYTES`. A `Content-Length` over the limit is refused at the
first read; a chunked body as soon as it grows past it. Either way the answer is a JSON 413
`body_too_large` (FastAPI's own `max_body_size` answers an oversized `Content-Length` in plain
text, whatever the route answers)."""

from collections.abc import Callable
from typing import Any, TypeVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from perdure.runtime.settings import Settings

SMALL_BODY_BYTES = 16_384
"""Every route's limit unless it declares its own: a rename, an answer, a period."""
HISTORY_FACTOR = 16
"""A chat body carries the client's whole history; only its new message is capped tightly."""

Limit = int | Callable[[Settings], int]
E = TypeVar("E", bound=Callable[..., Any])
_declared: dict[Callable[..., Any], Limit] = {}


def history_bytes(settings: Settings) -> int:
    """The limit of the routes that take a conversation (`POST /api/chat`, submissions)."""
    return HISTORY_FACTOR * settings.max_message_bytes


def message_bytes(settings: Settings) -> int:
    return settings.max_message_bytes


def body_limit(limit: Limit) -> Callable[[E], E]:
    """Declare a route's body limit, in bytes or from the settings; under `@router.post`."""

    def declare(endpoint: E) -> E:
        _declared[endpoint] = limit
        return endpoint

    return declare


class BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is over {limit} bytes")
        self.limit = limit


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, settings: Settings) -> None:
        self.app = app
        self._settings = settings

    def _limit(self, scope: Scope) -> int:
        """The limit of the route the request reached: routing is done by the first read."""
        declared = _declared.get(getattr(scope.get("route"), "endpoint", None))  # type: ignore[arg-type]
        if declared is None:
            return SMALL_BODY_BYTES
        return declared if isinstance(declared, int) else declared(self._settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit: int | None = None
        read = 0

        async def limited() -> Message:
            nonlocal limit, read
            if limit is None:
                limit = self._limit(scope)
                length = dict(scope["headers"]).get(b"content-length", b"")
                if length.isdigit() and int(length) > limit:
                    raise BodyTooLarge(limit)
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, limited, send)
