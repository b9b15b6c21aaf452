"""The request id of every request, and JSON for every error that escapes the routes."""

import logging

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import response_for
from gateway.request_id import (
    REQUEST_ID_HEADER,
    bind_request_id,
    choose_request_id,
    unbind_request_id,
)

log = logging.getLogger("perdure.gateway")


class RequestIdMiddleware:
    """Bind the request id (a sane incoming `X-Request-ID`, else a new one) and echo it.

    The response's start is held back until its first body message, so an exception raised
    before any byte left (inside a streaming body too) still becomes a JSON error response.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = choose_request_id(Headers(scope=scope).get(REQUEST_ID_HEADER))
        token = bind_request_id(request_id)
        held: Message | None = None
        committed = False

        async def send_with_id(message: Message) -> None:
            nonlocal held, committed
            if message["type"] == "http.response.start":
                headers = MutableHeaders(raw=list(message.get("headers", [])))
                headers[REQUEST_ID_HEADER] = request_id
                held = {**message, "headers": headers.raw}
                return
            if held is not None:
                start, held = held, None
                committed = True
                await send(start)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
            if held is not None:
                committed = True
                await send(held)
        except ClientDisconnect:
            raise
        except Exception as error:
            if committed:
                log.error(
                    "error after the response started (request %s %s %s)",
                    request_id,
                    scope.get("method"),
                    scope.get("path"),
                    exc_info=error,
                )
                raise
            response = response_for(error, f"{scope.get('method')} {scope.get('path')}")
            response.headers[REQUEST_ID_HEADER] = request_id
            await response(scope, receive, send)
        finally:
            unbind_request_id(token)
