"""The request id: taken from a sane `X-Request-ID`, else made; echoed on every response."""

import re
import uuid
from contextvars import ContextVar, Token

REQUEST_ID_HEADER = "x-request-id"
_SANE = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
_current: ContextVar[str | None] = ContextVar("perdure_request_id", default=None)


def choose_request_id(incoming: str | None) -> str:
    """The caller's id when it is short and plain (so it is safe to log and echo); else new."""
    if incoming is not None and _SANE.match(incoming):
        return incoming
    return uuid.uuid4().hex


def current_request_id() -> str:
    """The id of the request being served (set by the request id middleware)."""
    return _current.get() or "unknown"


def bind_request_id(request_id: str) -> Token[str | None]:
    return _current.set(request_id)


def unbind_request_id(token: Token[str | None]) -> None:
    _current.reset(token)
