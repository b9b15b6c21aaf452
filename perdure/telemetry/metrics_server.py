"""The worker's `/metrics` (`PERDURE_METRICS_PORT`): a small HTTP server on its own thread.

On its own thread, not the worker's event loop: a worker whose loop runs late (the moment
its metrics matter most) still answers scrapes. It serves the same registry as the gateway's
`/metrics` (telemetry/metrics.py), with the same optional bearer token.
"""

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


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (one line every few seconds, for every scraper)."""


def _guarded(app: WsgiApp, token: str | None) -> WsgiApp:
    def serve(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "/") not in ("/metrics", "/"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: the metrics are at /metrics\n"]
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


def serve_metrics(host: str, port: int, *, token: str | None = None) -> MetricsServer:
    """Serve `/metrics` on `host:port` (0: a free port) until `close()`; logs where."""
    app = _guarded(make_wsgi_app(), token)

    class Server(ThreadingWSGIServer):
        # IPv6 hosts (`::`) as well as IPv4 ones.
        address_family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]

    server = make_server(host, port, app, Server, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, name="perdure-metrics", daemon=True)
    thread.start()
    bound = int(server.server_port)
    log.info("worker metrics on http://%s:%d/metrics", host, bound)
    return MetricsServer(host=host, port=bound, _server=server, _thread=thread)
