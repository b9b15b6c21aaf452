"""OpenTelemetry traces: one trace from `POST /api/chat` through the turn's workflow and
activities to its model calls and tool calls, exported over OTLP (HTTP/protobuf or gRPC).

Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set: then
no tracer provider is installed, no interceptor or middleware is added, and a span helper
costs one test of `active_provider()`.

When on, the pieces are:

- FastAPI's instrumentation on the gateway app (the HTTP server span; `/metrics` and
  `/healthz` are left out, as are the per-chunk `send` spans of a stream);
- Temporal's `TracingInterceptor` on the Temporal client (runtime/services.py), which the
  worker takes over from the client it is built on: client calls (start, signal) carry the
  trace to the workflow and activity spans;
- Perdure's GenAI spans for model steps and tool calls (telemetry/genai_spans.py).
"""

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from temporalio.client import Interceptor as ClientInterceptor

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger("perdure.telemetry")

TRACER_NAME = "perdure"
EXCLUDED_URLS = "/metrics,/healthz"
SHUTDOWN_FLUSH_MILLIS = 5_000
"""At exit, queued spans get this long to be exported."""

_provider: TracerProvider | None = None


def active_provider() -> TracerProvider | None:
    """The tracer provider Perdure's spans go to; None when tracing is off."""
    return _provider


def activate(provider: TracerProvider) -> None:
    """Send Perdure's spans to `provider` (tests give one with an in-memory exporter).
    Interceptors and apps made from now on are traced."""
    global _provider
    _provider = provider


def deactivate() -> None:
    global _provider
    _provider = None


def tracer() -> trace.Tracer:
    """Perdure's tracer: a no-op one while tracing is off."""
    provider = _provider
    if provider is None:
        return trace.NoOpTracer()
    return provider.get_tracer(TRACER_NAME)


class OnceLoggingExporter(SpanExporter):
    """Wraps an exporter so that its failures never reach a turn and are logged once per
    outage (the first failure, then the recovery), not once per batch."""

    def __init__(self, inner: SpanExporter, where: str) -> None:
        self._inner = inner
        self._where = where
        self._failing = False
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._inner.export(spans)
            problem = None if result is SpanExportResult.SUCCESS else "the collector refused them"
        except Exception as error:  # noqa: BLE001 - telemetry never fails a turn
            result, problem = SpanExportResult.FAILURE, repr(error)
        with self._lock:
            if problem is not None and not self._failing:
                self._failing = True
                log.warning(
                    "exporting traces to %s failed (%s); spans are dropped until it works "
                    "again (not logged again until then)",
                    self._where,
                    problem,
                )
            elif problem is None and self._failing:
                self._failing = False
                log.warning("exporting traces to %s works again", self._where)
        return result

    def shutdown(self) -> None:
        try:
            self._inner.shutdown()
        except Exception:  # noqa: BLE001
            log.debug("the span exporter failed to shut down", exc_info=True)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        try:
            return self._inner.force_flush(timeout_millis)
        except Exception:  # noqa: BLE001
            return False


def start_tracing(*, endpoint: str, service_name: str, protocol: str) -> TracerProvider:
    """Install `exporting_provider(...)` as Perdure's tracer provider and as the process-wide
    one, so libraries that trace find it."""
    provider = exporting_provider(endpoint=endpoint, service_name=service_name, protocol=protocol)
    trace.set_tracer_provider(provider)
    activate(provider)
    log.info(
        "traces are exported over OTLP/%s to %s as service %s",
        "gRPC" if protocol == "grpc" else "HTTP",
        endpoint,
        provider.resource.attributes.get(SERVICE_NAME),
    )
    return provider


def exporting_provider(*, endpoint: str, service_name: str, protocol: str) -> TracerProvider:
    """A tracer provider exporting over OTLP, `protocol` `http/protobuf` or `grpc` (the
    exporter reads the standard `OTEL_EXPORTER_OTLP_*` variables: endpoint, headers,
    timeout…). `OTEL_SERVICE_NAME` (or `service.name` in `OTEL_RESOURCE_ATTRIBUTES`)
    overrides `service_name`."""
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service_name}))
    provider = TracerProvider(resource=resource)
    # The exporter's own retries log a warning per failed batch: ours logs once per outage.
    logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
    provider.add_span_processor(
        BatchSpanProcessor(OnceLoggingExporter(_otlp_exporter(protocol), endpoint))
    )
    return provider


def _otlp_exporter(protocol: str) -> SpanExporter:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpanExporter,
        )

        return GrpcSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def stop_tracing() -> None:
    """Export what is queued (bounded by `SHUTDOWN_FLUSH_MILLIS` and the exporter's timeout)
    and stop. Commands end without interpreter teardown, so nothing else would."""
    provider = _provider
    if provider is None:
        return
    deactivate()
    try:
        provider.force_flush(SHUTDOWN_FLUSH_MILLIS)
        provider.shutdown()
    except Exception:  # noqa: BLE001 - the process is ending either way
        log.warning("flushing traces at exit failed", exc_info=True)


def temporal_interceptors() -> list[ClientInterceptor]:
    """Temporal's tracing interceptor while tracing is on (for `Client.connect`: the client's
    calls and, through the client, the worker's workflows and activities); else none."""
    provider = _provider
    if provider is None:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor(provider.get_tracer("temporalio"))]


def instrument_app(app: "FastAPI") -> None:
    """The HTTP server span of every request but `/metrics` and `/healthz`, while tracing is
    on. Not the `send`/`receive` spans: a stream would have one per chunk."""
    provider = _provider
    if provider is None:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=provider,
        excluded_urls=EXCLUDED_URLS,
        exclude_spans=["send", "receive"],
    )
