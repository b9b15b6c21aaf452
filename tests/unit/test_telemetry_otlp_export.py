"""Spans reach a collector over each OTLP protocol Perdure builds in: a real gRPC server
speaking the collector's `TraceService`, and an HTTP server taking `POST /v1/traces`, both on
127.0.0.1 and decoding what they receive with the OTLP protobuf definitions."""

import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from perdure.telemetry.tracing import exporting_provider


class Received:
    """The export requests a collector got."""

    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []

    def span_names(self) -> list[str]:
        return [
            span.name
            for request in self.requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def service_names(self) -> set[str]:
        return {
            attribute.value.string_value
            for request in self.requests
            for resource in request.resource_spans
            for attribute in resource.resource.attributes
            if attribute.key == "service.name"
        }


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, received: Received) -> None:
        self._received = received

    def Export(  # noqa: N802 - the generated servicer's method name
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self._received.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()


@contextmanager
def _grpc_collector(received: Received) -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(received), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


@contextmanager
def _http_collector(received: Received) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's method name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if (
                self.path != "/v1/traces"
                or self.headers["Content-Type"] != "application/x-protobuf"
            ):
                self.send_response(404)
            else:
                received.requests.append(
                    trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                )
                self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_spans_reach_a_collector_over_the_chosen_protocol(
    protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    received = Received()
    collector = _grpc_collector if protocol == "grpc" else _http_collector
    with collector(received) as endpoint:
        # The exporters read the standard variables themselves, as in a deployment.
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
        monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
        provider = exporting_provider(
            endpoint=endpoint, service_name="perdure-test", protocol=protocol
        )
        with provider.get_tracer("test").start_as_current_span("chat demo"):
            pass
        assert provider.force_flush(10_000)
        provider.shutdown()

    assert received.span_names() == ["chat demo"]
    assert received.service_names() == {"perdure-test"}
