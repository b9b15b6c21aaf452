"""`perdure relay`: the HTTP face of the held provider streams (docs/relay.md).

Not an open proxy: it forwards only `POST` to the provider APIs' streaming endpoints
(`RELAYED_PATHS`), only to the base URLs it is configured with, only for callers that present
the shared secret (where each SDK puts its API key), and requests of at most
`max_request_bytes`. It holds the provider keys itself: a worker that uses it sends none.
"""

import contextlib
import hmac
import re
from collections.abc import AsyncIterator
from typing import cast

import httpx
from pydantic import BaseModel, Field, SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from perdure.domain.relay_protocol import (
    ATTACH_HEADER,
    EARLY_HEADER,
    RELAYED_PATHS,
    STREAM_HEADER,
    STREAM_ID_PATTERN,
    RelayedProvider,
)
from perdure.relay.held import (
    HeldStream,
    HeldStreams,
    RelayFull,
    RelayLimits,
    UpstreamUnreachable,
    digest_of,
)
from perdure.telemetry import metrics

_STREAM_ID = re.compile(STREAM_ID_PATTERN)
_FORWARDED_HEADERS = ("content-type", "accept", "anthropic-version", "anthropic-beta")
UPSTREAM_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=30.0, pool=10.0)
"""`read`: the longest a provider may stay silent inside an answer before the relay gives up."""


class RelayConfig(BaseModel, frozen=True):
    secret: SecretStr
    upstreams: dict[RelayedProvider, str]
    """Base URL per provider, as its SDK takes it (`https://api.openai.com/v1`,
    `https://api.anthropic.com`)."""
    keys: dict[RelayedProvider, SecretStr] = Field(default_factory=dict)
    limits: RelayLimits = RelayLimits()
    max_request_bytes: int = Field(default=32 * 2**20, ge=1)


def _error(status: int, code: str, message: str) -> JSONResponse:
    # The providers' error shape, so their SDKs raise their usual status errors.
    return JSONResponse(
        {"type": "error", "error": {"type": code, "code": code, "message": message}},
        status_code=status,
    )


def _presented_secret(request: Request) -> str:
    """Where the SDKs put their key: `Authorization: Bearer` (OpenAI's, and Anthropic's since
    2.x), or Anthropic's `x-api-key`."""
    bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    return bearer or request.headers.get("x-api-key", "")


def _matches(presented: str, secret: SecretStr) -> bool:
    return hmac.compare_digest(presented.encode(), secret.get_secret_value().encode())


async def _body(request: Request, limit: int) -> bytes | None:
    """The request body, or None once it grows past `limit` (declared or streamed)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            return None
    return bytes(body)


class Relay:
    def __init__(self, config: RelayConfig) -> None:
        self.config = config
        self.streams = HeldStreams(config.limits, on_head_start=metrics.head_start)
        self._http = httpx.AsyncClient(timeout=UPSTREAM_TIMEOUT)

    async def forward(self, request: Request) -> Response:
        provider_name = request.path_params["provider"]
        path = request.path_params["path"]
        if provider_name not in RELAYED_PATHS or path not in RELAYED_PATHS[provider_name]:
            return _error(404, "not_relayed", f"the relay forwards no {request.url.path}")
        provider = cast(RelayedProvider, provider_name)
        if not _matches(_presented_secret(request), self.config.secret):
            return _error(401, "authentication_error", "the relay's shared secret is required")
        stream_id = request.headers.get(STREAM_HEADER, "")
        if not _STREAM_ID.match(stream_id):
            return _error(400, "invalid_request_error", f"{STREAM_HEADER} is missing or invalid")
        body = await _body(request, self.config.max_request_bytes)
        if body is None:
            return _error(413, "request_too_large", f"over {self.config.max_request_bytes} bytes")
        key = self.config.keys.get(provider)
        if provider not in self.config.upstreams or key is None:
            return _error(503, "not_configured", f"the relay has no {provider} key or URL")
        if request.headers.get(ATTACH_HEADER) == "1":
            held = self.streams.get(stream_id)
            if held is None or held.truncated is not None:
                return _error(404, "stream_gone", f"the relay no longer holds {stream_id}")
            return _replayed(held)
        try:
            held = await self.streams.request(
                stream_id,
                digest_of(body),
                lambda: self._send(provider, path, request, body, key),
                early=request.headers.get(EARLY_HEADER) == "1",
            )
        except RelayFull as error:
            return _error(503, "relay_full", f"{error}; retry, or call the provider")
        except UpstreamUnreachable as error:
            return _error(502, "upstream_unreachable", str(error))
        if held is None:
            return _error(
                409, "stream_taken", f"{stream_id} is held for its step's own request already"
            )
        return _replayed(held)

    async def _send(
        self, provider: RelayedProvider, path: str, request: Request, body: bytes, key: SecretStr
    ) -> httpx.Response:
        headers = {
            name: value for name, value in request.headers.items() if name in _FORWARDED_HEADERS
        }
        if provider == "anthropic":
            headers["x-api-key"] = key.get_secret_value()
        else:
            headers["authorization"] = f"Bearer {key.get_secret_value()}"
        url = f"{self.config.upstreams[provider].rstrip('/')}/{path}"
        upstream = self._http.build_request("POST", url, content=body, headers=headers)
        return await self._http.send(upstream, stream=True)

    async def cancel(self, request: Request) -> Response:
        if not _matches(_presented_secret(request), self.config.secret):
            return _error(401, "authentication_error", "the relay's shared secret is required")
        found = await self.streams.cancel(request.path_params["stream_id"])
        return Response(status_code=204 if found else 404)

    async def stats(self, request: Request) -> Response:
        return JSONResponse(
            {
                "streams": len(self.streams),
                "bytes": self.streams.total_bytes,
                "head_starts": dict(self.streams.head_starts),
                "limits": self.config.limits.model_dump(),
            }
        )

    async def close(self) -> None:
        await self.streams.close()
        await self._http.aclose()


def _replayed(held: HeldStream) -> StreamingResponse:
    return StreamingResponse(held.replay(), status_code=held.status, headers=dict(held.headers))


def relay_app(relay: Relay) -> Starlette:
    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await relay.close()

    async def not_relayed(request: Request, error: Exception) -> Response:
        return _error(404, "not_relayed", f"the relay forwards no {request.url.path}")

    app = Starlette(
        exception_handlers={404: not_relayed, 405: not_relayed},
        routes=[
            Route("/healthz", health, methods=["GET"]),
            Route("/stats", relay.stats, methods=["GET"]),
            Route("/streams/{stream_id}", relay.cancel, methods=["DELETE"]),
            Route("/{provider}/{path:path}", relay.forward, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False  # an unknown path is refused, not redirected
    return app
