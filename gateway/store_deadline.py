"""A request cannot wait on an unreachable PostgreSQL store for longer than a few seconds.

Until its response starts, a request that has been running for `PROBE_AFTER_SECONDS` has the
store probed (storage/reachability.py), and again every `PROBE_AFTER_SECONDS` while it runs;
when the store does not answer the probe, the request is cancelled (its transaction, never
committed, is rolled back) and answered `503 store_unavailable` with `Retry-After`. A request
slow for any other reason (a busy pool, a busy Temporal) goes on as the probe passes. Once the
response has started (a chat's stream), the stream's own reads are bounded by the connection's
settings (storage/db.py) and a client resumes it from the log. The embedded SQLite store has no
network to lose and is not probed. `GET /healthz` bounds its own checks.
"""

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import store_unavailable_response
from storage.abandoned import abandon
from storage.reachability import PROBE_SECONDS, StoreProbe

PROBE_AFTER_SECONDS = 1.0
BOUND_SECONDS = PROBE_AFTER_SECONDS + PROBE_SECONDS
"""At most this long (and a probe's round trip) before a request stuck on an unreachable store
is answered 503 (docs/api.md)."""
UNBOUNDED_PATHS = ("/healthz",)


class StoreDeadlineMiddleware:
    def __init__(self, app: ASGIApp, *, probe: StoreProbe | None) -> None:
        self.app = app
        self.probe = probe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.probe is None or scope["type"] != "http" or scope["path"] in UNBOUNDED_PATHS:
            await self.app(scope, receive, send)
            return
        started = asyncio.Event()
        given_up = False

        async def sending(message: Message) -> None:
            if given_up:  # the request was answered 503: what it says as it unwinds goes nowhere
                return
            if message["type"] == "http.response.start":
                started.set()
            await send(message)

        # A task of its own, so that the 503 need not wait for it to unwind (a query cancelled
        # on a connection that no longer answers takes psycopg up to 10 s).
        async def responding() -> None:
            await self.app(scope, receive, sending)

        request = asyncio.create_task(responding())
        try:
            given_up = await self._store_lost(request, started)
        except BaseException:  # the client went away, the server is stopping
            abandon(request)
            raise
        if given_up:
            abandon(request)  # its transaction, never committed, is rolled back
            await store_unavailable_response()(scope, receive, send)
            return
        await request

    async def _store_lost(self, request: "asyncio.Task[None]", started: asyncio.Event) -> bool:
        """True when the store stopped answering before the response started; False once the
        request has ended or its response has started."""
        assert self.probe is not None
        while True:
            done, _ = await asyncio.wait({request}, timeout=PROBE_AFTER_SECONDS)
            if done or started.is_set():
                return False
            if not await self.probe.answers() and not started.is_set():
                return True
