"""The request id: taken from a sane `X-Request-ID`, else made; echoed on every response."""

import re
import uuid

from perdure.telemetry.log_context import REQUEST_ID, RequestScope, close_request, open_request

REQUEST_ID_HEADER = "x-request-id"
_SANE = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


def choose_request_id(incoming: str | None) -> str:
    """The caller's id when it is short and plain (so it is safe to log and echo); else new."""
    if incoming is not None and _SANE.match(incoming):
        return incoming
    return uuid.uuid4().hex


def current_request_id() -> str:
    """The id of the request being served (set by the request id middleware)."""
    return REQUEST_ID.get() or "unknown"


def bind_request_id(request_id: str) -> RequestScope:
    """Also what logs carry (telemetry/log_context.py), with the ids the request binds later."""
    return open_request(request_id)


def unbind_request_id(scope: RequestScope) -> None:
    close_request(scope)
