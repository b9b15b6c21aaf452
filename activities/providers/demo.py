"""`demo`: an offline, deterministic stand-in model, so Perdure runs without any API key.

Every answer starts with "[demo model] ". It echoes the user, and when the agent offers a
`calculate` tool (and the user writes an expression like `12*7`) or a `current_time` tool
(and the user asks for the time), it calls the tool first and then reports the result.
"""

import asyncio
import hashlib
import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from activities.providers.base import ModelRequest
from activities.providers.common import dump_arguments
from activities.providers.continuation_modes import Continuation
from perdure.domain.conversation import ToolResultItem, UserItem
from perdure.domain.provider_events import (
    Finish,
    ProviderEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)

PREFIX = "[demo model] "
_EXPRESSION = re.compile(r"\d+(?:\.\d+)?(?:\s*[-+*/]\s*\d+(?:\.\d+)?)+")
_ASKS_TIME = re.compile(r"\btime\b", re.IGNORECASE)
_WORD = re.compile(r"\s*\S+")


@dataclass(frozen=True)
class _Call:
    name: str
    arguments: dict[str, Any]


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def remainder_chunks(answer: str, prefill: str | None) -> list[str]:
    """The answer's word chunks still to send after `prefill`, cut at the same boundaries."""
    chunks = _words(answer)
    if not prefill or not answer.startswith(prefill):
        return chunks
    out: list[str] = []
    position = 0
    for chunk in chunks:
        end = position + len(chunk)
        if end > len(prefill):
            out.append(chunk[max(0, len(prefill) - position) :])
        position = end
    return out


def _current_turn(request: ModelRequest) -> tuple[str, list[ToolResultItem]]:
    """The last user text and the tool results that followed it."""
    text = ""
    results: list[ToolResultItem] = []
    for item in request.conversation:
        if isinstance(item, UserItem):
            text, results = item.text, []
        elif isinstance(item, ToolResultItem):
            results.append(item)
    return text, results


def _wanted_calls(text: str, offered: set[str]) -> list[_Call]:
    calls: list[_Call] = []
    expression = _EXPRESSION.search(text)
    if "calculate" in offered and expression:
        calls.append(_Call("calculate", {"expression": expression.group(0)}))
    if "current_time" in offered and _ASKS_TIME.search(text):
        calls.append(_Call("current_time", {}))
    return calls


def _report(call: _Call, result: ToolResultItem) -> str:
    if result.is_error:
        return f"The {call.name} tool failed: {result.output}"
    if call.name == "calculate":
        return f"{call.arguments['expression']} = {result.output}"
    return f"The current time is {result.output}."


def plan_step(request: ModelRequest) -> _Call | str:
    """The next tool call to make, or the final answer text."""
    text, results = _current_turn(request)
    done = {result.tool_name: result for result in results}
    calls = _wanted_calls(text, {tool.name for tool in request.tools})
    for call in calls:
        if call.name not in done:
            return call
    if calls:
        return PREFIX + " ".join(_report(call, done[call.name]) for call in calls)
    return f"{PREFIX}You said: {' '.join(text.split())}".rstrip()


def _input_tokens(request: ModelRequest) -> int:
    texts = [request.system] + [
        item.output if isinstance(item, ToolResultItem) else item.text
        for item in request.conversation
    ]
    return sum(len(text.split()) for text in texts)


def _call_id(request: ModelRequest, name: str) -> str:
    text, _ = _current_turn(request)
    return "demo_" + hashlib.sha256(f"{text}\x00{name}".encode()).hexdigest()[:16]


class DemoProvider:
    """Deterministic and offline; streams word by word with a small delay."""

    label = "demo"
    supports_resume = False
    supports_cancel = False
    relayed = False
    continuation = Continuation(
        mechanism="prefill", exact=True, via="the demo continues its deterministic answer"
    )

    def __init__(self, delay: float = 0.02) -> None:
        self.delay = delay

    def continuation_for(self, request: ModelRequest) -> Continuation:
        return self.continuation

    async def cancel(self, response_id: str) -> None:
        """Nothing runs server-side: nothing to cancel."""

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        step = plan_step(request)
        if isinstance(step, _Call):
            call_id = _call_id(request, step.name)
            await asyncio.sleep(self.delay)
            yield ToolCallStart(id=call_id, name=step.name)
            yield ToolCallDelta(id=call_id, arguments_delta=dump_arguments(step.arguments))
            yield ToolCallEnd(id=call_id, name=step.name, arguments=step.arguments)
            yield Finish(reason="tool-calls", input_tokens=_input_tokens(request), output_tokens=1)
            return
        chunks = remainder_chunks(step, request.prefill)
        for chunk in chunks:
            await asyncio.sleep(self.delay)
            yield TextDelta(text=chunk)
        yield Finish(reason="stop", input_tokens=_input_tokens(request), output_tokens=len(chunks))
