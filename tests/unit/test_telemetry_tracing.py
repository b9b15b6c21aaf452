"""GenAI spans and the exporter guard, against an in-memory exporter."""

import logging
from collections.abc import Iterator, Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from activities.providers.base import ProviderError
from perdure.telemetry import genai_spans, tracing
from perdure.telemetry.tracing import OnceLoggingExporter


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracing.activate(provider)
    try:
        yield memory
    finally:
        tracing.deactivate()


def only_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = exporter.get_finished_spans()
    return span


def test_with_tracing_off_spans_cost_nothing_and_record_nothing() -> None:
    assert tracing.active_provider() is None
    assert tracing.temporal_interceptors() == []

    with genai_spans.model_call("openai:gpt-4.1-mini") as call:
        call.finished("stop", 10, 5)


def test_a_model_call_span_follows_the_genai_conventions(exporter: InMemorySpanExporter) -> None:
    with genai_spans.model_call(
        "openai:gpt-4.1-mini", session_id="s-1", max_output_tokens=4096, step=0, attempt=1
    ) as call:
        call.finished("tool-calls", 120, 17)

    span = only_span(exporter)
    assert span.name == "chat gpt-4.1-mini"
    assert span.kind == SpanKind.CLIENT
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4.1-mini",
        "gen_ai.request.max_tokens": 4096,
        "gen_ai.conversation.id": "s-1",
        "perdure.step": 0,
        "perdure.attempt": 1,
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 17,
    }


def test_a_failed_model_call_records_the_error_class_and_raises_on(
    exporter: InMemorySpanExporter,
) -> None:
    with pytest.raises(ProviderError), genai_spans.model_call("anthropic:claude-sonnet-4-5"):
        raise ProviderError("anthropic: HTTP 429", retryable=True, status=429)

    span = only_span(exporter)
    assert span.attributes is not None
    assert span.attributes["gen_ai.provider.name"] == "anthropic"
    assert span.attributes["error.type"] == "rate_limited"
    assert span.status.status_code == StatusCode.ERROR


def test_a_tool_call_span_names_the_tool_and_the_call(exporter: InMemorySpanExporter) -> None:
    with genai_spans.tool_call("calculate", "call_1") as call:
        call.failed(ZeroDivisionError("division by zero"))

    span = only_span(exporter)
    assert span.name == "execute_tool calculate"
    assert span.kind == SpanKind.INTERNAL
    assert span.attributes is not None
    assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert span.attributes["gen_ai.tool.name"] == "calculate"
    assert span.attributes["gen_ai.tool.call.id"] == "call_1"
    assert span.attributes["error.type"] == "ZeroDivisionError"


def test_spans_nest_under_the_current_span(exporter: InMemorySpanExporter) -> None:
    with (
        tracing.tracer().start_as_current_span("RunActivity:perdure.model_step"),
        genai_spans.model_call("demo"),
    ):
        pass

    child, parent = exporter.get_finished_spans()
    assert child.name == "chat demo"
    assert child.attributes is not None
    assert child.attributes["gen_ai.provider.name"] == "perdure.demo"
    assert child.parent is not None
    assert child.parent.span_id == parent.context.span_id


class BrokenExporter(SpanExporter):
    def __init__(self) -> None:
        self.broken = True

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.broken:
            raise ConnectionRefusedError("collector down")
        return SpanExportResult.SUCCESS


def test_an_exporter_failure_is_logged_once_per_outage_and_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inner = BrokenExporter()
    guarded = OnceLoggingExporter(inner, "http://collector:4318")

    with caplog.at_level(logging.WARNING, logger="perdure.telemetry"):
        first = guarded.export([])
        guarded.export([])
        inner.broken = False
        recovered = guarded.export([])

    assert first is SpanExportResult.FAILURE
    assert recovered is SpanExportResult.SUCCESS
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "exporting traces to http://collector:4318 failed" in messages[0]
    assert "works again" in messages[1]
