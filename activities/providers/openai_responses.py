"""`openai-responses:<model>`: the OpenAI Responses API in background mode, resumable.

Every response is created with `background=True, store=True`, so it keeps generating
server-side if we lose the stream. Each event's `sequence_number` is reported as a
`ResponseCursor`; given `request.resume`, we re-attach with
`responses.retrieve(id, stream=True, starting_after=N)` and continue exactly after N.
"""

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

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
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
)

from activities.providers.base import ModelRequest, ProviderError
from activities.providers.clients import openai_client
from activities.providers.common import (
    FinishReason,
    dump_arguments,
    parse_arguments,
    translate_errors,
)
from activities.providers.errors import from_status
from domain.conversation import AssistantItem, UserItem
from domain.provider_events import (
    Finish,
    ProviderEvent,
    ReasoningDelta,
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


def response_input(request: ModelRequest) -> list[ResponseInputItemParam]:
    """The conversation as input items; a prefill is a trailing assistant message item."""
    items: list[ResponseInputItemParam] = []
    for item in request.conversation:
        if isinstance(item, UserItem):
            items.append({"type": "message", "role": "user", "content": item.text})
        elif isinstance(item, AssistantItem):
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
    response_id: str = ""
    calls: dict[str, _Call] = field(default_factory=dict)
    orphans: dict[str, list[str]] = field(default_factory=dict)
    """Argument deltas of calls that started before we re-attached; held until their item ends."""
    finish: Finish | None = None

    def read(self, event: ResponseStreamEvent) -> list[ProviderEvent]:
        if isinstance(event, ResponseTextDeltaEvent):
            return [TextDelta(text=event.delta)]
        if isinstance(
            event, ResponseReasoningSummaryTextDeltaEvent | ResponseReasoningTextDeltaEvent
        ):
            return [ReasoningDelta(text=event.delta)]
        if isinstance(event, ResponseFunctionCallArgumentsDeltaEvent):
            return self._arguments(event.item_id, event.delta)
        if isinstance(event, ResponseOutputItemAddedEvent | ResponseOutputItemDoneEvent):
            return self._item(event)
        if isinstance(event, ResponseCreatedEvent | ResponseInProgressEvent | ResponseQueuedEvent):
            self.response_id = event.response.id
        elif isinstance(event, ResponseCompletedEvent | ResponseIncompleteEvent):
            self.response_id = event.response.id
            self.finish = finish_of(event.response)
        elif isinstance(event, ResponseFailedEvent):
            error = event.response.error
            message = error.message if error else "the response failed"
            raise from_status(self.label, 200, message, error_type=error.code if error else None)
        elif isinstance(event, ResponseErrorEvent):
            raise from_status(self.label, 200, event.message, error_type=event.code or None)
        return []

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
        """A cursor only once everything up to this event has been yielded."""
        if not self.response_id or self.orphans:
            return None
        return ResponseCursor(response_id=self.response_id, sequence_number=event.sequence_number)


class OpenAIResponsesProvider:
    """Background-mode Responses streaming that can re-attach after a lost connection."""

    supports_resume = True

    def __init__(self, model: str) -> None:
        self.model = model
        self.label = f"openai-responses:{model}"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        async for event in translate_errors(self.label, self._events(request)):
            yield event

    async def _events(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        client = openai_client()
        reader = _Reader(label=self.label)
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
