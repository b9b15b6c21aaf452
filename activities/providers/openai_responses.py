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

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

import openai
from openai import AsyncOpenAI, omit
from openai.types.responses import (
    FunctionToolParam,
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseInputItemParam,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseQueuedEvent,
    ResponseReasoningItem,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
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


def finish_of(response: Response) -> Finish:
    """The `Finish` for a response that ended as completed or incomplete."""
    reason: FinishReason = "stop"
    if response.status == "incomplete":
        details = response.incomplete_details
        reason = _INCOMPLETE.get(details.reason or "", "other") if details else "other"
    elif any(isinstance(item, ResponseFunctionToolCall) for item in response.output):
        reason = "tool-calls"
    usage = response.usage
    return Finish(
        reason=reason,
        input_tokens=usage.input_tokens if usage else None,
        output_tokens=usage.output_tokens if usage else None,
    )


@dataclass
class _Call:
    call_id: str
    name: str


@dataclass
class _Reader:
    """Translates one stream of Responses events, remembering what a cursor must cover."""

    label: str
    trim: OverlapTrimmer = field(default_factory=lambda: OverlapTrimmer(""))
    response_id: str = ""
    calls: dict[str, _Call] = field(default_factory=dict)
    orphans: dict[str, list[str]] = field(default_factory=dict)
    """Argument deltas of calls that started before we re-attached; held until their item ends."""
    finish: Finish | None = None

    def read(self, event: ResponseStreamEvent) -> list[ProviderEvent]:
        if isinstance(event, ResponseTextDeltaEvent):
            text = self.trim(event.delta)
            return [TextDelta(text=text)] if text else []
        if isinstance(
            event, ResponseReasoningSummaryTextDeltaEvent | ResponseReasoningTextDeltaEvent
        ):
            return [ReasoningDelta(text=event.delta)]
        if isinstance(event, ResponseFunctionCallArgumentsDeltaEvent):
            return self._arguments(event.item_id, event.delta)
        if isinstance(event, ResponseOutputItemAddedEvent | ResponseOutputItemDoneEvent):
            return [*self.flush(), *self._item(event)]
        if isinstance(event, ResponseCreatedEvent | ResponseInProgressEvent | ResponseQueuedEvent):
            self.response_id = event.response.id
        elif isinstance(event, ResponseCompletedEvent | ResponseIncompleteEvent):
            self.response_id = event.response.id
            self.finish = finish_of(event.response)
            return self.flush()
        elif isinstance(event, ResponseFailedEvent):
            error = event.response.error
            message = error.message if error else "the response failed"
            raise from_status(self.label, 200, message, error_type=error.code if error else None)
        elif isinstance(event, ResponseErrorEvent):
            raise from_status(self.label, 200, event.message, error_type=event.code or None)
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

    def _item(
        self, event: ResponseOutputItemAddedEvent | ResponseOutputItemDoneEvent
    ) -> list[ProviderEvent]:
        item = event.item
        if isinstance(item, ResponseReasoningItem):
            # Passed back by id in the tool loop's next request (the response is stored).
            done = isinstance(event, ResponseOutputItemDoneEvent)
            return [ReasoningSigned(item_id=item.id)] if done else []
        if not isinstance(item, ResponseFunctionToolCall):
            return []
        item_id = item.id or item.call_id
        if isinstance(event, ResponseOutputItemAddedEvent):
            self.calls[item_id] = _Call(call_id=item.call_id, name=item.name)
            return [ToolCallStart(id=item.call_id, name=item.name)]
        events: list[ProviderEvent] = []
        held = self.orphans.pop(item_id, [])
        if held:
            events.append(ToolCallDelta(id=item.call_id, arguments_delta="".join(held)))
        arguments = parse_arguments(item.arguments)
        events.append(ToolCallEnd(id=item.call_id, name=item.name, arguments=arguments))
        return events

    def cursor(self, event: ResponseStreamEvent) -> ResponseCursor | None:
        """A cursor only once everything up to this event has been yielded (text the trimmer
        holds has not been)."""
        if not self.response_id or self.orphans or self.trim.holding:
            return None
        return ResponseCursor(response_id=self.response_id, sequence_number=event.sequence_number)


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

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        async for event in translate_errors(self.label, self._events(request)):
            yield event

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
        async with stream:
            async for event in stream:
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
            return finish_of(response)
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
