"""Spans for model calls and tool calls, with OpenTelemetry's GenAI semantic conventions.

- A model step's provider call: span `chat {model}` (kind CLIENT) with `gen_ai.operation.name`
  `chat`, `gen_ai.provider.name` (and the older `gen_ai.system`), `gen_ai.request.model`,
  `gen_ai.request.max_tokens`, `gen_ai.conversation.id` (the session's storage key),
  `gen_ai.response.finish_reasons`, `gen_ai.usage.input_tokens` / `output_tokens` when the
  provider reports them, and `error.type` when it fails.
- A tool call: span `execute_tool {tool}` (kind INTERNAL) with `gen_ai.operation.name`
  `execute_tool`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type` `function`,
  and `error.type` when the tool raised.

Never recorded: prompts, messages, tool arguments or results (the conventions make them
opt-in; Perdure does not offer it). While tracing is off these cost one test and a no-op.
"""

import contextlib
import logging
from collections.abc import Iterator

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from perdure.telemetry.metrics import error_class
from perdure.telemetry.tracing import active_provider, tracer

log = logging.getLogger("perdure.telemetry")

PROVIDER_NAMES = {
    "openai": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "demo": "perdure.demo",
}
"""`gen_ai.provider.name` of each provider API (well-known values where there is one)."""
FINISH_REASONS = {"tool-calls": "tool_calls", "content-filter": "content_filter"}
"""Perdure's provider-neutral finish reasons as the OpenAI-style values the conventions use."""

_warned = False


def _attempted(what: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        log.exception("recording a span (%s) failed; later failures are not logged", what)


def _error_type(error: BaseException) -> str:
    if all(hasattr(error, name) for name in ("status", "retryable", "context_overflow")):
        return error_class(error)  # type: ignore[arg-type]
    return type(error).__name__


class _Recorder:
    def __init__(self, span: Span | None) -> None:
        self._span = span

    def _set(self, name: str, value: str | int | list[str]) -> None:
        if self._span is None:
            return
        try:
            self._span.set_attribute(name, value)
        except Exception:  # noqa: BLE001 - a span is never worth a turn
            _attempted(name)

    def failed(self, error: BaseException) -> None:
        if self._span is None:
            return
        try:
            self._span.set_attribute("error.type", _error_type(error))
            self._span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        except Exception:  # noqa: BLE001
            _attempted("error.type")


class ModelCall(_Recorder):
    def finished(
        self, reason: str | None, input_tokens: int | None, output_tokens: int | None
    ) -> None:
        """The provider ended the step: why, and the tokens it reported (if any)."""
        if reason is not None:
            self._set("gen_ai.response.finish_reasons", [FINISH_REASONS.get(reason, reason)])
        if input_tokens is not None:
            self._set("gen_ai.usage.input_tokens", input_tokens)
        if output_tokens is not None:
            self._set("gen_ai.usage.output_tokens", output_tokens)


class ToolCall(_Recorder):
    pass


@contextlib.contextmanager
def _span(name: str, kind: SpanKind, attributes: dict[str, str | int]) -> Iterator[Span | None]:
    if active_provider() is None:
        yield None
        return
    try:
        manager = tracer().start_as_current_span(
            name,
            kind=kind,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        span = manager.__enter__()
    except Exception:  # noqa: BLE001
        _attempted(name)
        yield None
        return
    try:
        yield span
    finally:
        try:
            manager.__exit__(None, None, None)
        except Exception:  # noqa: BLE001
            _attempted(name)


@contextlib.contextmanager
def model_call(
    model: str,
    *,
    session_id: str | None = None,
    max_output_tokens: int | None = None,
    step: int | None = None,
    attempt: int | None = None,
) -> Iterator[ModelCall]:
    """A span around one model step's provider call(s); `model` is Perdure's model string
    (`openai:gpt-4.1-mini`, `demo`). A failure of the body is recorded and raised on."""
    api, _, name = model.partition(":")
    request_model = name or model
    provider = PROVIDER_NAMES.get(api, api)
    attributes: dict[str, str | int] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,
        "gen_ai.request.model": request_model,
    }
    if max_output_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = max_output_tokens
    if session_id is not None:
        attributes["gen_ai.conversation.id"] = session_id
    if step is not None:
        attributes["perdure.step"] = step
    if attempt is not None:
        attributes["perdure.attempt"] = attempt
    with _span(f"chat {request_model}", SpanKind.CLIENT, attributes) as span:
        call = ModelCall(span)
        try:
            yield call
        except Exception as error:
            call.failed(error)
            raise


@contextlib.contextmanager
def tool_call(tool_name: str, tool_call_id: str) -> Iterator[ToolCall]:
    """A span around one tool's execution. A failure of the body is recorded and raised on;
    a tool whose failure is told to the model is marked with `failed(error)`."""
    attributes: dict[str, str | int] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool_name,
        "gen_ai.tool.call.id": tool_call_id,
        "gen_ai.tool.type": "function",
    }
    with _span(f"execute_tool {tool_name}", SpanKind.INTERNAL, attributes) as span:
        call = ToolCall(span)
        try:
            yield call
        except Exception as error:
            call.failed(error)
            raise
