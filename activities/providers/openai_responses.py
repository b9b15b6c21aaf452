"""`openai-responses:<model>`: the OpenAI Responses API in background mode, resumable.

Every response is created with `background=True, store=True`, so it keeps generating
server-side if we lose the stream. Each event's `sequence_number` is reported as a
`ResponseCursor`; given `request.resume`, we re-attach with
`responses.retrieve(id, stream=True, starting_after=N)` and continue exactly after N
(https://developers.openai.com/api/docs/guides/background, "Streaming a background response").

When the response cannot be re-attached (it expired, or was cancelled) the model step falls back
to `request.prefill`. Like Chat Completions, the Responses API does not continue a trailing
assistant message, so the partial is continued by **instruction** (partial, then
`CONTINUE_INSTRUCTION`, overlap trimmed): best effort.

`cancel(response_id)` stops a background response server-side (`POST
/v1/responses/{id}/cancel`); "Cancelling twice is idempotent - subsequent calls simply return
the final Response object" (same guide).
"""

from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import openai
from openai import AsyncOpenAI, omit
from openai.types.responses import (
    FunctionToolParam,
    ResponseInputItemParam,
)
from openai.types.shared_params import Reasoning

from activities.providers.base import ModelRequest, ProviderError
from activities.providers.clients import openai_client
from activities.providers.common import (
    FinishReason,
    dump_arguments,
    parse_arguments,
    translate_errors,
)
from activities.providers.config import ProviderConfig
from activities.providers.continuation_modes import (
    CONTINUE_INSTRUCTION,
    INSTRUCTION,
    RESUME,
    Continuation,
)
from activities.providers.errors import from_status, to_provider_error
from activities.providers.sse import json_events
from perdure.domain.conversation import AssistantItem, UserItem
from perdure.domain.overlap import OverlapTrimmer
from perdure.domain.provider_events import (
    Finish,
    ProviderEvent,
    ReasoningDelta,
    ReasoningSigned,
    ResponseCursor,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)

_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content-filter",
}


_FINISHED = ("already", "completed", "cancelled", "canceled", "finished", "synchronous")
"""Words of a refused cancel that mean there was nothing left to cancel. OpenAI answers a
repeated cancel with the final response; OpenAI-compatible servers (vLLM, SGLang) refuse a
finished one with 400 `Cannot cancel a synchronous response.`"""


def response_input(request: ModelRequest) -> list[ResponseInputItemParam]:
    """The conversation as input items; a prefill is the partial answer as an assistant message
    followed by the continue instruction (the API does not continue a trailing assistant
    message)."""
    items: list[ResponseInputItemParam] = []
    for item in request.conversation:
        if isinstance(item, UserItem):
            items.append({"type": "message", "role": "user", "content": item.text})
        elif isinstance(item, AssistantItem):
            items.extend(
                {"type": "item_reference", "id": reasoning.item_id}
                for reasoning in item.reasoning
                if reasoning.item_id is not None
            )
            if item.text:
                items.append({"type": "message", "role": "assistant", "content": item.text})
            items.extend(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": dump_arguments(call.arguments),
                }
                for call in item.tool_calls
            )
        else:
            output = f"Error: {item.output}" if item.is_error else item.output
            items.append(
                {"type": "function_call_output", "call_id": item.tool_call_id, "output": output}
            )
    if request.prefill:
        items.append({"type": "message", "role": "assistant", "content": request.prefill})
        items.append({"type": "message", "role": "user", "content": CONTINUE_INSTRUCTION})
    return items


def response_tools(request: ModelRequest) -> list[FunctionToolParam]:
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            "strict": False,
        }
        for tool in request.tools
    ]


def finish_of(response: Mapping[str, Any]) -> Finish:
    """The `Finish` for a response (a `Response` object as JSON) that ended as completed or
    incomplete."""
    reason: FinishReason = "stop"
    if response.get("status") == "incomplete":
        details = response.get("incomplete_details") or {}
        reason = _INCOMPLETE.get(details.get("reason") or "", "other")
    elif any(item.get("type") == "function_call" for item in response.get("output") or []):
        reason = "tool-calls"
    # The Response's `usage`: `input_tokens` counts the cached tokens too
    # (`input_tokens_details.cached_tokens` of them), `output_tokens` the reasoning ones
    # (`output_tokens_details.reasoning_tokens` of them). The Response of `response.completed` in
    # https://developers.openai.com/api/reference/resources/responses/streaming-events
    # and https://developers.openai.com/api/docs/guides/prompt-caching,
    # https://developers.openai.com/api/docs/guides/reasoning.
    usage = response.get("usage") or {}
    input_details = usage.get("input_tokens_details") or {}
    output_details = usage.get("output_tokens_details") or {}
    return Finish(
        reason=reason,
        input_tokens=usage.get("input_tokens"),
        cached_input_tokens=input_details.get("cached_tokens"),
        output_tokens=usage.get("output_tokens"),
        reasoning_tokens=output_details.get("reasoning_tokens"),
    )


@dataclass
class _Call:
    call_id: str
    name: str


_STARTED = frozenset({"response.created", "response.in_progress", "response.queued"})
_ENDED = frozenset({"response.completed", "response.incomplete"})
_REASONING = frozenset({"response.reasoning_summary_text.delta", "response.reasoning_text.delta"})
_ITEM = frozenset({"response.output_item.added", "response.output_item.done"})


@dataclass
class _Reader:
    """Translates one stream of Responses events (each event's JSON, as the API reference's
    "Streaming events" describe them), remembering what a cursor must cover."""

    label: str
    trim: OverlapTrimmer = field(default_factory=lambda: OverlapTrimmer(""))
    response_id: str = ""
    calls: dict[str, _Call] = field(default_factory=dict)
    orphans: dict[str, list[str]] = field(default_factory=dict)
    """Argument deltas of calls that started before we re-attached; held until their item ends."""
    finish: Finish | None = None

    def read(self, event: Mapping[str, Any]) -> list[ProviderEvent]:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            text = self.trim(event["delta"])
            return [TextDelta(text=text)] if text else []
        if kind in _REASONING:
            return [ReasoningDelta(text=event["delta"])]
        if kind == "response.function_call_arguments.delta":
            return self._arguments(event["item_id"], event["delta"])
        if kind in _ITEM:
            return [*self.flush(), *self._item(kind == "response.output_item.done", event["item"])]
        if kind in _STARTED:
            self.response_id = event["response"]["id"]
        elif kind in _ENDED:
            self.response_id = event["response"]["id"]
            self.finish = finish_of(event["response"])
            return self.flush()
        elif kind == "response.failed":
            error = event["response"].get("error") or {}
            message = error.get("message") or "the response failed"
            raise from_status(self.label, 200, message, error_type=error.get("code"))
        elif kind == "error":
            message = event.get("message") or "An error occurred during streaming"
            raise from_status(self.label, 200, message, error_type=event.get("code") or None)
        return []

    def flush(self) -> list[ProviderEvent]:
        """Text the overlap trimmer still holds (an instruction continuation)."""
        text = self.trim.flush()
        return [TextDelta(text=text)] if text else []

    def _arguments(self, item_id: str, delta: str) -> list[ProviderEvent]:
        call = self.calls.get(item_id)
        if call is None:
            self.orphans.setdefault(item_id, []).append(delta)
            return []
        return [ToolCallDelta(id=call.call_id, arguments_delta=delta)]

    def _item(self, done: bool, item: Mapping[str, Any]) -> list[ProviderEvent]:
        kind = item.get("type")
        if kind == "reasoning":
            # Passed back by id in the tool loop's next request (the response is stored).
            return [ReasoningSigned(item_id=item["id"])] if done else []
        if kind != "function_call":
            return []
        call_id, name = item["call_id"], item["name"]
        item_id = item.get("id") or call_id
        if not done:
            self.calls[item_id] = _Call(call_id=call_id, name=name)
            return [ToolCallStart(id=call_id, name=name)]
        events: list[ProviderEvent] = []
        held = self.orphans.pop(item_id, [])
        if held:
            events.append(ToolCallDelta(id=call_id, arguments_delta="".join(held)))
        arguments = parse_arguments(item.get("arguments") or "")
        events.append(ToolCallEnd(id=call_id, name=name, arguments=arguments))
        return events

    def cursor(self, event: Mapping[str, Any]) -> ResponseCursor | None:
        """A cursor only once everything up to this event has been yielded (text the trimmer
        holds has not been)."""
        if not self.response_id or self.orphans or self.trim.holding:
            return None
        return ResponseCursor(
            response_id=self.response_id, sequence_number=event["sequence_number"]
        )


def response_reasoning(request: ModelRequest) -> Reasoning | None:
    """`reasoning`: the effort, and summaries when the agent wants its reasoning shown (the
    API streams none unless asked)."""
    options = request.thinking
    if options.effort is None:
        return None
    reasoning: Reasoning = {"effort": options.effort}
    if options.display == "summarized":
        reasoning["summary"] = "auto"
    return reasoning


class OpenAIResponsesProvider:
    """Background-mode Responses streaming that can re-attach after a lost connection."""

    supports_resume = True
    supports_cancel = True
    relayed = False
    continuation = RESUME

    def __init__(self, model: str, *, config: ProviderConfig) -> None:
        self.model = model
        self.label = f"openai-responses:{model}"
        self.config = config

    def continuation_for(self, request: ModelRequest) -> Continuation:
        return INSTRUCTION if request.prefill and request.resume is None else RESUME

    async def cancel(self, response_id: str) -> None:
        """Cancel the background response `response_id`; nothing happens if it already finished
        or was cancelled. Any other failure (unknown id, transport) is a `ProviderError`."""
        try:
            await openai_client(self.config).responses.cancel(response_id)
        except openai.APIStatusError as exc:
            body = exc.body
            said = str(body.get("message", "")) if isinstance(body, dict) else str(exc)
            if exc.status_code in (400, 409) and any(w in said.lower() for w in _FINISHED):
                return
            raise to_provider_error(self.label, exc) or exc from exc
        except openai.APIError as exc:
            error = to_provider_error(self.label, exc)
            if error is None:
                raise
            raise error from exc

    def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        return translate_errors(self.label, self._events(request))

    async def _events(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        client = openai_client(self.config)
        reader = _Reader(label=self.label)
        if request.resume is None and request.prefill:
            reader.trim = OverlapTrimmer(request.prefill)
        if request.resume is not None:
            reader.response_id = request.resume.response_id
            stream = await client.responses.retrieve(
                request.resume.response_id,
                stream=True,
                starting_after=request.resume.sequence_number,
            )
        else:
            tools = response_tools(request)
            stream = await client.responses.create(
                model=request.model or self.model,
                input=response_input(request),
                instructions=request.system or omit,
                tools=tools or omit,
                max_output_tokens=request.max_output_tokens,
                reasoning=response_reasoning(request) or omit,
                background=True,
                store=True,
                stream=True,
            )
        # The events are read off the response as JSON (`activities/providers/sse.py` says
        # why): the SDK's own stream builds a model per event and, left at the final event,
        # leaves its generators to the garbage collector.
        async with stream, aclosing(json_events(stream.response)) as events:
            async for event in events:
                for translated in reader.read(event):
                    yield translated
                cursor = reader.cursor(event)
                if cursor is not None:
                    yield cursor
                if reader.finish is not None:
                    break
        yield reader.finish or await self._settle(client, reader.response_id)

    async def _settle(self, client: AsyncOpenAI, response_id: str) -> Finish:
        """The stream ended without a final event: ask the server how the response stands."""
        if not response_id:
            raise ProviderError(
                f"{self.label}: the stream ended before the response began", retryable=True
            )
        response = await client.responses.retrieve(response_id)
        if response.status in ("completed", "incomplete"):
            return finish_of(response.to_dict())
        if response.status == "cancelled":
            raise ProviderError(
                f"{self.label}: response {response_id} was cancelled", retryable=False
            )
        if response.status == "failed":
            error = response.error
            message = error.message if error else "the response failed"
            raise from_status(self.label, 200, message, error_type=error.code if error else None)
        raise ProviderError(
            f"{self.label}: the stream of {response_id} ended while it was {response.status}",
            retryable=True,
        )
