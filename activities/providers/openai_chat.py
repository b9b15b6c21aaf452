"""`openai:<model>`: OpenAI Chat Completions (and compatible servers: Ollama, vLLM, …), streamed.

Chat Completions never continues a trailing assistant message: it answers the conversation
afresh. A partial answer is therefore continued by **instruction** by default: the partial is
sent as an assistant message followed by a user message asking to continue exactly where it
stops (`CONTINUE_INSTRUCTION`), and what the model repeats of the partial is trimmed
(`domain.overlap`). Best effort.

Servers that really continue a final assistant message opt in with `PERDURE_OPENAI_CONTINUATION`
(`ProviderConfig.openai_continuation`, from the process's settings):

- `vllm`: vLLM's extra request parameters `continue_final_message: true` and
  `add_generation_prompt: false` (both needed: vLLM refuses `continue_final_message` together
  with the default `add_generation_prompt: true`).
  https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html (extra parameters for
  the Chat API, `vllm/entrypoints/openai/protocol.py` `check_generation_prompt`).
- `deepseek`: DeepSeek's chat prefix completion (beta): the last assistant message carries
  `"prefix": true`, with `OPENAI_BASE_URL=https://api.deepseek.com/beta`.
  https://api-docs.deepseek.com/guides/chat_prefix_completion

Both are exact. The real OpenAI API refuses either with HTTP 400 (`Unrecognized request argument
supplied: continue_final_message`), so they are never sent by default.
"""

from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, cast

import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionAssistantMessageParam,
    ChatCompletionChunk,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageParam,
)

from activities.providers.base import ModelRequest, ProviderError
from activities.providers.clients import openai_client
from activities.providers.common import (
    FinishReason,
    dump_arguments,
    parse_arguments,
)
from activities.providers.config import ProviderConfig
from activities.providers.continuation_modes import (
    CONTINUE_INSTRUCTION,
    INSTRUCTION,
    RELAY,
    ChatContinuation,
    Continuation,
)
from activities.providers.relayed import RelayedStream, cancel_relayed, relayed_events
from activities.providers.sse import json_events
from perdure.domain.conversation import AssistantItem, UserItem
from perdure.domain.overlap import OverlapTrimmer
from perdure.domain.provider_events import (
    Finish,
    ProviderEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
}

_DECLARED: dict[ChatContinuation, Continuation] = {
    "instruction": INSTRUCTION,
    "vllm": Continuation(mechanism="prefill", exact=True, via="vLLM continue_final_message"),
    "deepseek": Continuation(mechanism="prefill", exact=True, via="DeepSeek prefix (beta)"),
}

VLLM_CONTINUE: dict[str, object] = {"continue_final_message": True, "add_generation_prompt": False}
"""vLLM's extra body for a real continuation of the final assistant message."""


def chat_messages(
    request: ModelRequest, continuation: ChatContinuation = "instruction"
) -> list[ChatCompletionMessageParam]:
    """The conversation as Chat Completions messages, the prefill as `continuation` wants it:
    `instruction` adds the partial then the continue instruction; `vllm` ends with the partial;
    `deepseek` ends with the partial marked `prefix: true`."""
    messages: list[ChatCompletionMessageParam] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for item in request.conversation:
        if isinstance(item, UserItem):
            messages.append({"role": "user", "content": item.text})
        elif isinstance(item, AssistantItem):
            if not item.text and not item.tool_calls:
                continue
            message: ChatCompletionAssistantMessageParam = {"role": "assistant"}
            if item.text:
                message["content"] = item.text
            if item.tool_calls:
                message["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": dump_arguments(call.arguments),
                        },
                    }
                    for call in item.tool_calls
                ]
            messages.append(message)
        else:
            output = f"Error: {item.output}" if item.is_error else item.output
            messages.append({"role": "tool", "tool_call_id": item.tool_call_id, "content": output})
    if request.prefill:
        if continuation == "deepseek":
            prefix = {"role": "assistant", "content": request.prefill, "prefix": True}
            messages.append(cast(ChatCompletionMessageParam, prefix))
        else:
            messages.append({"role": "assistant", "content": request.prefill})
        if continuation == "instruction":
            messages.append({"role": "user", "content": CONTINUE_INSTRUCTION})
    return messages


def chat_tools(request: ModelRequest) -> list[ChatCompletionFunctionToolParam]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in request.tools
    ]


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    started: bool = False


class ToolCallAccumulator:
    """Turns Chat Completions tool-call fragments (`delta.tool_calls[]`, keyed by index) into
    start/delta/end events."""

    def __init__(self) -> None:
        self._calls: dict[int, _PendingCall] = {}

    def feed(self, fragment: Mapping[str, Any]) -> list[ProviderEvent]:
        call = self._calls.setdefault(int(fragment.get("index") or 0), _PendingCall())
        call.id = call.id or (fragment.get("id") or "")
        function = fragment.get("function") or {}
        if function.get("name") and not call.started:
            call.name += function["name"]
        piece: str = function.get("arguments") or ""
        if piece:
            call.arguments.append(piece)
        events: list[ProviderEvent] = []
        if not call.started and call.id and call.name:
            call.started = True
            events.append(ToolCallStart(id=call.id, name=call.name))
            if call.arguments:
                events.append(ToolCallDelta(id=call.id, arguments_delta="".join(call.arguments)))
        elif call.started and piece:
            events.append(ToolCallDelta(id=call.id, arguments_delta=piece))
        return events

    def finish(self) -> list[ProviderEvent]:
        events: list[ProviderEvent] = []
        for index, call in sorted(self._calls.items()):
            call_id = call.id or f"call_{index}"
            arguments = "".join(call.arguments)
            if not call.started:
                events.append(ToolCallStart(id=call_id, name=call.name))
                if arguments:
                    events.append(ToolCallDelta(id=call_id, arguments_delta=arguments))
            events.append(
                ToolCallEnd(id=call_id, name=call.name, arguments=parse_arguments(arguments))
            )
        return events


def _finish(reason: str, usage: Mapping[str, Any] | None) -> Finish:
    """The `Finish`, with the `usage` of the stream's last chunk (`stream_options.include_usage`:
    "an additional chunk will be streamed before the `data: [DONE]` message", its `choices`
    empty). `prompt_tokens` counts the cached tokens too (`prompt_tokens_details.cached_tokens`
    of them), `completion_tokens` the reasoning ones (`completion_tokens_details`'s
    `reasoning_tokens` of them); the chunk's `usage` in
    https://developers.openai.com/api/reference/resources/chat/subresources/completions/streaming-events
    and https://developers.openai.com/api/docs/guides/prompt-caching,
    https://developers.openai.com/api/docs/guides/reasoning. OpenAI-compatible servers may
    leave either details object out or null (vLLM does by default): its count is unknown."""
    usage = usage or {}
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return Finish(
        reason=_FINISH.get(reason, "other"),
        input_tokens=usage.get("prompt_tokens"),
        cached_input_tokens=prompt_details.get("cached_tokens"),
        output_tokens=usage.get("completion_tokens"),
        reasoning_tokens=completion_details.get("reasoning_tokens"),
    )


class OpenAIChatProvider:
    """Chat Completions streaming with usage; tool calls arrive as indexed fragments."""

    def __init__(self, model: str, *, config: ProviderConfig) -> None:
        self.model = model
        self.label = f"openai:{model}"
        self.config = config
        self.mode: ChatContinuation = config.openai_continuation
        self.continuation = _DECLARED[self.mode]
        # Through the provider relay, a step's stream outlives the worker (docs/relay.md).
        self.supports_resume = self.supports_cancel = self.relayed = config.relay_url is not None

    def continuation_for(self, request: ModelRequest) -> Continuation:
        if RelayedStream.of(request, self.config).attaching:
            return RELAY
        return self.continuation

    async def cancel(self, response_id: str) -> None:
        """A relayed stream is stopped at the relay; Chat Completions itself keeps nothing."""
        await cancel_relayed(self.config, response_id)

    def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        relayed = RelayedStream.of(request, self.config)
        return relayed_events(self.label, relayed, self._events(request, relayed))

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        """The request as Chat Completions' JSON body."""
        tools = chat_tools(request)
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": chat_messages(request, self.mode),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = tools
        if request.max_output_tokens is not None:
            body["max_completion_tokens"] = request.max_output_tokens
        if request.thinking.effort is not None:  # checked against the model at worker start
            body["reasoning_effort"] = request.thinking.effort
        if request.prefill and self.mode == "vllm":
            body.update(VLLM_CONTINUE)
        return body

    async def _events(
        self, request: ModelRequest, relayed: RelayedStream
    ) -> AsyncGenerator[ProviderEvent, None]:
        continuing = bool(request.prefill)
        body = self._body(request)
        # The client's own `post` (documented for requests the typed methods do not cover):
        # the typed `create` re-walks the whole request against its TypedDicts on every call
        # (the largest cost between a step's start and its request leaving), and its stream
        # builds a model object per chunk. The body is plain JSON already; the SDK still
        # sends it, authenticates, and raises its status errors before the body is read. The
        # stream object is only used to close the response.

        async def post(relayed: RelayedStream) -> openai.AsyncStream[ChatCompletionChunk]:
            client = openai_client(self.config, relayed=relayed.on)
            return await client.post(
                "/chat/completions",
                body=body,
                cast_to=ChatCompletion,
                options={"headers": relayed.headers()},
                stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
            )

        has_key = self.config.openai_api_key is not None
        stream, relayed = await relayed.open(post, label=self.label, has_key=has_key)
        by_instruction = continuing and self.mode == "instruction"
        trim = OverlapTrimmer(request.prefill or "" if by_instruction else "")
        calls = ToolCallAccumulator()
        reason: str | None = None
        usage: dict[str, Any] | None = None
        async with stream, aclosing(json_events(stream.response)) as chunks:
            async for chunk in chunks:
                usage = chunk.get("usage") or usage
                events: list[ProviderEvent] = []
                for choice in chunk.get("choices") or []:
                    events.extend(_choice_events(choice.get("delta") or {}, trim, calls))
                    reason = choice.get("finish_reason") or reason
                for event in relayed.passed(events):  # re-attached: what the log lacks
                    yield event
        if reason is None:
            raise ProviderError(
                f"{self.label}: the stream ended without a finish reason", retryable=True
            )
        rest = trim.flush()
        if rest:
            yield TextDelta(text=rest)
        for event in calls.finish():
            yield event
        yield _finish(reason, usage)


def _choice_events(
    delta: dict[str, Any], trim: OverlapTrimmer, calls: ToolCallAccumulator
) -> list[ProviderEvent]:
    """One choice's delta as events: its text (past what a continued answer repeats), then
    its tool call fragments (text held for overlap goes out before them)."""
    events: list[ProviderEvent] = []
    content = delta.get("content")
    text = trim(content) if content else ""
    if text:
        events.append(TextDelta(text=text))
    fragments = delta.get("tool_calls") or []
    if fragments and (held := trim.flush()):
        events.append(TextDelta(text=held))
    for fragment in fragments:
        events.extend(calls.feed(fragment))
    return events
