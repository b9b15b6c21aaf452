"""`anthropic:<model>`: the Anthropic Messages API, streamed.

What each Claude generation accepts is in `perdure/domain/model_rules.py` (with its sources);
the worker refuses an agent option its model does not take before any turn runs.

**Continuing a partial answer.** Up to Claude 4.5 by **prefill**: a final assistant message the
model continues exactly. The API rejects one that ends in whitespace ("The prefill content
cannot end with trailing whitespace",
https://docs.claude.com/en/docs/build-with-claude/prompt-engineering/prefill-claudes-response),
so it is sent right-stripped and the whitespace the model repeats is dropped. From Claude 4.6
on, prefill is a 400, and with thinking on it is refused on every model ("Prefilling is only
available for non-extended thinking modes", same page): there the partial is continued by
**instruction** (`activities/providers/continuation_modes.py`), its repeat trimmed. A model the
rules do not know that answers a prefill with a 400 is continued by instruction too.

**Thinking.** `ThinkingOptions.budget_tokens` sends `{"type": "enabled", "budget_tokens": N}`;
`effort` sends `{"type": "adaptive"}` with `output_config.effort`; `display` is sent when the
agent sets it. The thinking streams as `ReasoningDelta`s, its signature as `ReasoningSigned`.

With thinking on, the API also requires the assistant message before a tool result to start
with its signed thinking block, passed back unmodified
(https://platform.claude.com/docs/build-with-claude/thinking-tool-workflows). Each thinking
block's signature (or a `redacted_thinking` block's data) is kept with the step's reasoning
part (`providerMetadata.anthropic`, as the AI SDK keeps it) and passed back, so a tool loop goes
on with thinking. Only an assistant message without one (streamed with thinking off, or stored
before signatures were kept) makes its tool loop go on without `thinking`, as the API's own
error advises ("To avoid this requirement, disable `thinking`").
"""

from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal

from anthropic import AsyncStream, omit
from anthropic.types import (
    AssistantMessageParam,
    MessageParam,
    OutputConfigParam,
    RawMessageStreamEvent,
    RedactedThinkingBlockParam,
    TextBlockParam,
    ThinkingBlockParam,
    ThinkingConfigParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
    UserMessageParam,
)

from activities.providers.base import ModelRequest, ProviderError
from activities.providers.clients import anthropic_client
from activities.providers.common import FinishReason, parse_arguments
from activities.providers.config import ProviderConfig
from activities.providers.continuation_modes import (
    CONTINUE_INSTRUCTION,
    INSTRUCTION,
    RELAY,
    Continuation,
)
from activities.providers.relayed import RelayedStream, cancel_relayed, relayed_events
from activities.providers.sse import json_events
from perdure.domain.conversation import AssistantItem, ToolResultItem, UserItem
from perdure.domain.model_rules import ModelRules, claude_rules
from perdure.domain.overlap import OverlapTrimmer
from perdure.domain.provider_events import (
    Finish,
    ProviderEvent,
    ReasoningDelta,
    ReasoningSigned,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)

Block = (
    TextBlockParam
    | ToolUseBlockParam
    | ToolResultBlockParam
    | ThinkingBlockParam
    | RedactedThinkingBlockParam
)
Role = Literal["user", "assistant"]
THINKING_BLOCKS = ("thinking", "redacted_thinking")
_MESSAGE_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    }
)
"""The events of a streamed message ("Streaming Messages", event types), as the SDK yields them."""

_STOP: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool-calls",
    "refusal": "content-filter",
}


def _thinking_blocks(item: AssistantItem) -> list[Block]:
    blocks: list[Block] = []
    for reasoning in item.reasoning:
        if reasoning.redacted_data is not None:
            blocks.append({"type": "redacted_thinking", "data": reasoning.redacted_data})
        elif reasoning.signature is not None:
            blocks.append(
                {"type": "thinking", "thinking": reasoning.text, "signature": reasoning.signature}
            )
    return blocks


def _blocks(item: UserItem | AssistantItem | ToolResultItem, thinking: bool) -> list[Block]:
    if isinstance(item, UserItem):
        return [{"type": "text", "text": item.text}] if item.text else []
    if isinstance(item, ToolResultItem):
        return [
            {
                "type": "tool_result",
                "tool_use_id": item.tool_call_id,
                "content": item.output,
                "is_error": item.is_error,
            }
        ]
    blocks = _thinking_blocks(item) if thinking else []
    if item.text:
        blocks.append({"type": "text", "text": item.text})
    blocks.extend(
        {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}
        for call in item.tool_calls
    )
    return blocks


def _message(role: Role, blocks: list[Block]) -> MessageParam:
    if role == "user":
        return UserMessageParam(role="user", content=blocks)
    return AssistantMessageParam(role="assistant", content=blocks)


PREFILL = Continuation(mechanism="prefill", exact=True, via="final assistant message (prefill)")


def continues_by_instruction(request: ModelRequest, rules: ModelRules) -> bool:
    """A partial answer the model will not take as a prefill: the instruction is used."""
    return bool(request.prefill) and (
        request.prefill_refused or not rules.prefill or request.thinking.on
    )


def anthropic_messages(request: ModelRequest, rules: ModelRules) -> list[MessageParam]:
    """Alternating user/assistant messages: consecutive same-role items share one message.

    Tool results become `tool_result` blocks of a user message; the prefill becomes a final
    assistant message without trailing whitespace, or, under extended thinking, an assistant
    message followed by the continue instruction.
    """
    turns: list[tuple[Role, list[Block]]] = []

    def add(role: Role, blocks: list[Block]) -> None:
        if not blocks:
            return
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, list(blocks)))

    for item in request.conversation:
        role: Role = "assistant" if isinstance(item, AssistantItem) else "user"
        add(role, _blocks(item, request.thinking.on))
    if continues_by_instruction(request, rules):
        add("assistant", [{"type": "text", "text": request.prefill or ""}])
        add("user", [{"type": "text", "text": CONTINUE_INSTRUCTION}])
    elif prefill := (request.prefill or "").rstrip():
        add("assistant", [{"type": "text", "text": prefill}])
    return [_message(role, blocks) for role, blocks in turns]


def _unsigned_tool_loop(messages: list[MessageParam]) -> bool:
    """The request ends with tool results answering an assistant message that does not start
    with its signed thinking (one streamed without thinking, or before signatures were kept)."""
    if len(messages) < 2 or messages[-1]["role"] != "user":
        return False
    content = messages[-1]["content"]
    if isinstance(content, str) or not any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    ):
        return False
    answered = messages[-2]["content"]
    first = None if isinstance(answered, str) else next(iter(answered), None)
    return not (isinstance(first, dict) and first.get("type") in THINKING_BLOCKS)


def anthropic_thinking(
    request: ModelRequest, messages: list[MessageParam]
) -> ThinkingConfigParam | None:
    """`thinking` for this request: enabled with the budget, or adaptive, except when the
    request continues a tool-use loop whose assistant message has no signed thinking to pass
    back (the API would refuse it)."""
    options = request.thinking
    if not options.on or _unsigned_tool_loop(messages):
        return None
    config: ThinkingConfigParam
    if options.budget_tokens is not None:
        config = {"type": "enabled", "budget_tokens": options.budget_tokens}
    else:
        config = {"type": "adaptive"}
    if options.display is not None:
        config["display"] = options.display
    return config


def anthropic_output_config(
    request: ModelRequest, thinking: ThinkingConfigParam | None
) -> OutputConfigParam | None:
    """`output_config.effort`, which goes with adaptive thinking."""
    if thinking is None or thinking["type"] != "adaptive" or request.thinking.effort is None:
        return None
    return {"effort": request.thinking.effort}


def anthropic_tools(request: ModelRequest) -> list[ToolParam]:
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in request.tools
    ]


class WhitespaceDeduper:
    """Drops, from the start of the continuation, the whitespace stripped off the prefill."""

    def __init__(self, prefill: str | None) -> None:
        text = prefill or ""
        self._pending = text[len(text.rstrip()) :]

    def __call__(self, delta: str) -> str:
        while self._pending and delta and delta[0] == self._pending[0]:
            delta, self._pending = delta[1:], self._pending[1:]
        if delta:
            self._pending = ""
        return delta


@dataclass
class _ToolUse:
    id: str
    name: str
    json_parts: list[str] = field(default_factory=list)


_COUNTS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)


@dataclass
class _Usage:
    """A streamed message's usage, as Anthropic reports it.

    `message_start`'s `message.usage` has the first counts; a `message_delta`'s `usage` has
    cumulative ones ("The token counts shown in the `usage` field of the `message_delta` event
    are cumulative", https://platform.claude.com/docs/en/build-with-claude/streaming; the API
    reference's `MessageDeltaUsage`: "The cumulative number of …"), `output_tokens` always and
    the input and cache counts when it has them: a count it has replaces the earlier one, one it
    leaves out keeps it (as the SDK's own message accumulator does).

    `input_tokens` leaves out what was read from or written to the prompt cache: "Total input
    tokens in a request is the summation of `input_tokens`, `cache_creation_input_tokens`, and
    `cache_read_input_tokens`" (the API reference's `Usage`;
    https://platform.claude.com/docs/en/build-with-claude/prompt-caching#tracking-cache-performance);
    either cache count may be absent or null. `output_tokens` includes the thinking; the
    reference's `output_tokens_details.thinking_tokens` ("Number of output tokens the model
    generated as internal reasoning … Always ≤ `output_tokens`") tells them apart when present."""

    input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    output_tokens: int | None = None
    thinking_tokens: int | None = None

    def update(self, usage: Mapping[str, Any] | None) -> None:
        counts = usage or {}
        for name in _COUNTS:
            if counts.get(name) is not None:
                setattr(self, name, counts[name])
        thinking = (counts.get("output_tokens_details") or {}).get("thinking_tokens")
        if thinking is not None:
            self.thinking_tokens = thinking

    def total_input_tokens(self) -> int | None:
        """Every input token the model read: uncached, written to the cache, read from it."""
        if self.input_tokens is None:
            return None
        cache_writes = self.cache_creation_input_tokens or 0
        return self.input_tokens + cache_writes + (self.cache_read_input_tokens or 0)


@dataclass
class _Reader:
    """Translates Anthropic stream events; remembers tool-use blocks, usage and stop reason."""

    dedupe: WhitespaceDeduper
    trim: OverlapTrimmer
    tools: dict[int, _ToolUse] = field(default_factory=dict)
    usage: _Usage = field(default_factory=_Usage)
    stop_reason: str | None = None
    stopped: bool = False

    def read(self, event: Mapping[str, Any]) -> list[ProviderEvent]:
        kind = event["type"]
        if kind == "message_start":
            self.usage.update(event["message"].get("usage"))
        elif kind == "content_block_start":
            block = event["content_block"]
            if block["type"] == "tool_use":
                self.tools[event["index"]] = _ToolUse(id=block["id"], name=block["name"])
                return [*self.flush(), ToolCallStart(id=block["id"], name=block["name"])]
            if block["type"] == "redacted_thinking":
                return [ReasoningSigned(redacted_data=block["data"])]
        elif kind == "content_block_delta":
            return self._delta(event["index"], event["delta"])
        elif kind == "content_block_stop":
            tool = self.tools.pop(event["index"], None)
            if tool is not None:
                arguments = parse_arguments("".join(tool.json_parts))
                return [ToolCallEnd(id=tool.id, name=tool.name, arguments=arguments)]
        elif kind == "message_delta":
            self.stop_reason = event["delta"].get("stop_reason") or self.stop_reason
            self.usage.update(event.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[ProviderEvent]:
        kind = delta["type"]
        if kind == "text_delta":
            text = self.trim(self.dedupe(delta["text"]))
            return [TextDelta(text=text)] if text else []
        if kind == "thinking_delta":
            return [ReasoningDelta(text=delta["thinking"])] if delta["thinking"] else []
        if kind == "signature_delta":
            return [ReasoningSigned(signature=delta["signature"])]
        if kind == "input_json_delta":
            tool = self.tools.get(index)
            if tool is not None and delta["partial_json"]:
                tool.json_parts.append(delta["partial_json"])
                return [ToolCallDelta(id=tool.id, arguments_delta=delta["partial_json"])]
        return []

    def flush(self) -> list[ProviderEvent]:
        """Text the overlap trimmer still holds (an instruction continuation)."""
        text = self.trim.flush()
        return [TextDelta(text=text)] if text else []

    def finish(self) -> Finish:
        return Finish(
            reason=_STOP.get(self.stop_reason or "", "other"),
            input_tokens=self.usage.total_input_tokens(),
            cached_input_tokens=self.usage.cache_read_input_tokens,
            output_tokens=self.usage.output_tokens,
            reasoning_tokens=self.usage.thinking_tokens,
        )


class AnthropicMessagesProvider:
    """Messages streaming; mid-stream `error` events surface as (retryable) ProviderErrors."""

    continuation = PREFILL

    def __init__(self, model: str, *, config: ProviderConfig) -> None:
        self.model = model
        self.label = f"anthropic:{model}"
        self.config = config
        # Through the provider relay, a step's stream outlives the worker (docs/relay.md).
        self.supports_resume = self.supports_cancel = self.relayed = config.relay_url is not None

    def rules(self, request: ModelRequest) -> ModelRules:
        return claude_rules(request.model or self.model, self.config.model_families)

    def continuation_for(self, request: ModelRequest) -> Continuation:
        if RelayedStream.of(request, self.config).attaching:
            return RELAY
        return INSTRUCTION if continues_by_instruction(request, self.rules(request)) else PREFILL

    async def cancel(self, response_id: str) -> None:
        """A relayed stream is stopped at the relay; the Messages API itself keeps nothing."""
        await cancel_relayed(self.config, response_id)

    def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        relayed = RelayedStream.of(request, self.config)
        return relayed_events(self.label, relayed, self._events(request, relayed))

    async def _events(
        self, request: ModelRequest, relayed: RelayedStream
    ) -> AsyncGenerator[ProviderEvent, None]:
        rules = self.rules(request)
        tools = anthropic_tools(request)
        messages = anthropic_messages(request, rules)
        thinking = anthropic_thinking(request, messages)
        output_config = anthropic_output_config(request, thinking)

        async def create(relayed: RelayedStream) -> AsyncStream[RawMessageStreamEvent]:
            client = anthropic_client(self.config, relayed=relayed.on)
            return await client.messages.create(
                model=request.model or self.model,
                max_tokens=request.max_output_tokens,
                messages=messages,
                system=request.system or omit,
                tools=tools or omit,
                thinking=thinking if thinking is not None else omit,
                output_config=output_config if output_config is not None else omit,
                extra_headers=relayed.headers() or None,
                stream=True,
            )

        has_key = self.config.anthropic_api_key is not None
        stream, relayed = await relayed.open(create, label=self.label, has_key=has_key)
        by_instruction = continues_by_instruction(request, rules)
        reader = _Reader(
            dedupe=WhitespaceDeduper(None if by_instruction else request.prefill),
            trim=OverlapTrimmer(request.prefill or "" if by_instruction else ""),
        )
        # The events are read off the response as JSON (`activities/providers/sse.py` says
        # why). Only the events the SDK's stream yields are read and counted (a relay cursor
        # counts them): `ping` and event types it does not know are skipped.
        async with stream, aclosing(json_events(stream.response)) as events:
            async for event in events:
                if event.get("type") not in _MESSAGE_EVENTS:
                    continue
                for new in relayed.passed(reader.read(event)):
                    yield new
                if reader.stopped:
                    break
        if not reader.stopped:
            message = f"{self.label}: the stream ended before message_stop"
            raise ProviderError(message, retryable=True)
        for held_back in reader.flush():
            yield held_back
        yield reader.finish()
