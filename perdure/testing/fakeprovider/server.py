"""`FakeProvider`: the fake model provider's HTTP server, run by uvicorn in a background thread."""

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from perdure.testing.fakeprovider.anthropic import AnthropicRoutes
from perdure.testing.fakeprovider.openai_chat import ChatRoutes
from perdure.testing.fakeprovider.openai_responses import ResponsesRoutes
from perdure.testing.fakeprovider.state import FakeState, RecordedRequest

_ABORT_NOTICE = "ASGI callable returned without completing response."
OBSERVATION_PATH = "/_fake/requests"
"""The test-only observation route (see `FakeProvider.observe`); no real API has it."""


class _HideDeliberateAborts(logging.Filter):
    """`@disconnect_after` drops connections on purpose; uvicorn would log each as an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _ABORT_NOTICE


class FakeProvider:
    """OpenAI Chat Completions, OpenAI Responses and Anthropic Messages, scripted by directives,
    and as strict as the real APIs (`rules.py`).

    Point the official SDKs at `openai_base_url` / `anthropic_base_url` (see `env()`);
    `vllm_base_url` and `deepseek_base_url` serve Chat Completions the way those servers do.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._requested_port = port
        self.port = 0
        self.state = FakeState()
        self._responses = ResponsesRoutes(self.state)
        routes = [
            *ChatRoutes(self.state).routes(),
            *self._responses.routes(),
            *AnthropicRoutes(self.state).routes(),
            Route(OBSERVATION_PATH, self.observe, methods=["GET"]),
        ]
        self.app = Starlette(routes=routes)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> Self:
        # IPPROTO_TCP: asyncio then turns Nagle off on accepted sockets, as any real server
        # that streams does (perdure/commands/cli.py `_listening_socket` says why it matters).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self._requested_port))
        self.port = sock.getsockname()[1]
        uvicorn_log = logging.getLogger("uvicorn.error")
        if not any(isinstance(f, _HideDeliberateAborts) for f in uvicorn_log.filters):
            uvicorn_log.addFilter(_HideDeliberateAborts())
        config = uvicorn.Config(
            self.app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=_serve, args=(server, sock), name="fake-provider", daemon=True
        )
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake provider did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def vllm_base_url(self) -> str:
        """An OpenAI-compatible base URL that behaves like vLLM (`continue_final_message`)."""
        return f"{self.url}/vllm/v1"

    @property
    def deepseek_base_url(self) -> str:
        """Like DeepSeek's beta base URL (`prefix: true` continues the last assistant message)."""
        return f"{self.url}/deepseek/beta"

    @property
    def anthropic_base_url(self) -> str:
        """The Anthropic SDK appends `/v1/messages` itself."""
        return self.url

    def env(self, api_key: str = "fake-key") -> dict[str, str]:
        """The SDK environment variables that point both SDKs here."""
        return {
            "OPENAI_BASE_URL": self.openai_base_url,
            "OPENAI_API_KEY": api_key,
            "ANTHROPIC_BASE_URL": self.anthropic_base_url,
            "ANTHROPIC_API_KEY": api_key,
        }

    # -- observations --------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.state.requests

    @property
    def generated_deltas(self) -> int:
        """Content deltas written to clients, over all requests."""
        return self.state.generated_deltas

    @property
    def generated_deltas_by_text(self) -> dict[str, int]:
        return self.state.deltas_by_text

    def deltas_for(self, user_text: str) -> int:
        """Content deltas written for requests whose last user message is `user_text`."""
        return self.state.deltas_by_text.get(user_text, 0)

    def requests_for(self, user_text: str) -> list[RecordedRequest]:
        return [request for request in self.state.requests if request.user_text == user_text]

    async def observe(self, request: Request) -> JSONResponse:
        """`GET /_fake/requests[?contains=TEXT]`: what this fake recorded, for a test or a
        benchmark in another process (`python -m perdure.testing.fakeprovider`) to read.

        TEST-ONLY OBSERVATION ROUTE: no real provider API has it, and it changes nothing the
        fake answers on the real routes (it only reads the request log). It returns the
        clocks of this process, `time.monotonic()` (CLOCK_MONOTONIC, system-wide on Linux, so
        comparable with another process's on the same machine) and `time.time()`, and every
        recorded request whose last user text contains `contains`: its route, user text,
        status, `started_at` and the `time.monotonic()` of every content delta written to the
        socket (`delta_times`, in order).
        """
        contains = request.query_params.get("contains", "")
        recorded = self.state.observed(contains)
        return JSONResponse(
            {"monotonic": time.monotonic(), "time": time.time(), "requests": recorded}
        )

    def reset(self) -> None:
        """Forget requests, counters, fault budgets and stored responses."""
        self.state.reset()
        self._responses.reset()


def _serve(server: uvicorn.Server, sock: socket.socket) -> None:
    """Serve on a loop of this thread's own. Not `server.run()`: uvicorn before 0.36 sets the
    process's event-loop policy there (uvloop's), and under that policy every other loop of
    the process fails to start a subprocess (`NotImplementedError`: no child watcher). Where
    uvicorn names its loop factory (uvloop's when installed), that loop is used."""
    loop_factory: Callable[[], Callable[[], asyncio.AbstractEventLoop] | None] | None = getattr(
        server.config, "get_loop_factory", None
    )
    with asyncio.Runner(loop_factory=loop_factory() if loop_factory else None) as runner:
        runner.run(server.serve(sockets=[sock]))
