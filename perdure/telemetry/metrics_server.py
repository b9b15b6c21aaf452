"""The worker's `/metrics` and `/healthz` (`PERDURE_METRICS_PORT`): a small HTTP server on its
own thread.

On its own thread, not the worker's event loop: a worker whose loop runs late (the moment
its metrics matter most) still answers scrapes, and its health can say the loop is late.
`/metrics` serves the same registry as the gateway's (telemetry/metrics.py), with the same
optional bearer token; `/healthz`, like the gateway's, needs none.
"""

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from perdure.telemetry.metrics import authorized

log = logging.getLogger("perdure.telemetry")

SHUTDOWN_TIMEOUT = 5.0
StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
Health = Callable[[], tuple[bool, dict[str, str]]]
"""Whether the process is healthy, and what each check found."""


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (one line every few seconds, for every scraper)."""


def _health_answer(health: Health, start_response: StartResponse) -> Iterable[bytes]:
    ok, checks = health()
    start_response(
        "200 OK" if ok else "503 Service Unavailable",
        [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
    )
    body = {"status": "ok" if ok else "unavailable", "checks": checks}
    return [json.dumps(body).encode()]


def _guarded(app: WsgiApp, token: str | None, health: Health) -> WsgiApp:
    def serve(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/healthz":
            return _health_answer(health, start_response)
        if path not in ("/metrics", "/"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: the metrics are at /metrics, the health at /healthz\n"]
        if not authorized(environ.get("HTTP_AUTHORIZATION"), token):
            start_response(
                "401 Unauthorized",
                [("Content-Type", "text/plain"), ("WWW-Authenticate", "Bearer")],
            )
            return [b"metrics need Authorization: Bearer <PERDURE_METRICS_TOKEN>\n"]
        return app(environ, start_response)

    return serve


@dataclass
class MetricsServer:
    host: str
    port: int
    """The port it listens on (the one the system chose when asked for 0)."""
    _server: ThreadingWSGIServer
    _thread: threading.Thread

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=SHUTDOWN_TIMEOUT)


def serve_metrics(
    host: str, port: int, *, health: Health, token: str | None = None
) -> MetricsServer:
    """Serve `/metrics` and `/healthz` on `host:port` (0: a free port) until `close()`; logs
    where. Each request has a thread of its own, so a slow health check holds up no scrape."""
    app = _guarded(make_wsgi_app(), token, health)

    class Server(ThreadingWSGIServer):
        # IPv6 hosts (`::`) as well as IPv4 ones.
        address_family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]

    server = make_server(host, port, app, Server, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, name="perdure-metrics", daemon=True)
    thread.start()
    bound = int(server.server_port)
    log.info("worker metrics on http://%s:%d/metrics", host, bound)
    return MetricsServer(host=host, port=bound, _server=server, _thread=thread)
