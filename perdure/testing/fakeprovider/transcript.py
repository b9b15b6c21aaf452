"""Read the three wire request formats into one neutral view of what the fake must answer.

A request may end with a partial answer in two ways: a trailing assistant message (`prefill`:
only some APIs continue it) or the partial followed by the adapters' continue instruction
(`partial`: the fake then plays a model that follows the instruction). The directives are read
from the last user message that is not the instruction.
"""

from dataclasses import dataclass, field
from typing import Any

from activities.providers.continuation_modes import CONTINUE_INSTRUCTION


@dataclass(frozen=True)
class ToolResult:
    name: str
    output: str


@dataclass(frozen=True)
class Transcript:
    user_text: str
    """The text of the last user message, directives included."""
    prefill: str | None = None
    """The text of a trailing assistant message, if the request ends with one."""
    partial: str | None = None
    """The partial answer the request asks to continue: the assistant text right before a
    final user message that is exactly `CONTINUE_INSTRUCTION`."""
    tool_results: list[ToolResult] = field(default_factory=list)
    """Tool results that came after the last user message, in order."""
    input_tokens: int = 0
    max_tokens: int | None = None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text")
        )
    return ""


_TEXT_KEYS = frozenset({"content", "text", "output", "arguments", "input"})


def _words(value: Any, textual: bool = True) -> int:
    """Words in the textual parts of a request (not roles, ids or types): the input tokens."""
    if isinstance(value, str):
        return len(value.split()) if textual else 0
    if isinstance(value, dict):
        return sum(_words(item, key in _TEXT_KEYS) for key, item in value.items())
    if isinstance(value, list):
        return sum(_words(item, textual) for item in value)
    return 0


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) else None


def _last_index(items: list[dict[str, Any]], predicate: Any) -> int:
    for index in range(len(items) - 1, -1, -1):
        if predicate(items[index]):
            return index
    return -1


def _trailing_prefill(items: list[dict[str, Any]], after: int, is_prefill: Any) -> str | None:
    if items and len(items) - 1 > after and is_prefill(items[-1]):
        return _text(items[-1].get("content")) or None
    return None


def is_instruction(text: str) -> bool:
    return text == CONTINUE_INSTRUCTION


def _partial(items: list[dict[str, Any]], after: int, is_text_answer: Any, text: Any) -> str | None:
    """The partial answer of a request ending `[…, assistant partial, user instruction]`."""
    if len(items) >= 2 and len(items) - 2 > after and is_text_answer(items[-2]):
        last = items[-1]
        if last.get("role") == "user" and is_instruction(text(last)):
            return text(items[-2]) or None
    return None


def _chat_text(message: dict[str, Any]) -> str:
    return _text(message.get("content"))


def from_chat(body: dict[str, Any]) -> Transcript:
    messages: list[dict[str, Any]] = list(body.get("messages") or [])
    last_user = _last_index(
        messages, lambda m: m.get("role") == "user" and not is_instruction(_chat_text(m))
    )
    names = {
        str(call.get("id")): str((call.get("function") or {}).get("name", ""))
        for message in messages
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or []
    }
    results = [
        ToolResult(names.get(str(m.get("tool_call_id")), ""), _text(m.get("content")))
        for m in messages[last_user + 1 :]
        if m.get("role") == "tool"
    ]
    return Transcript(
        user_text=_text(messages[last_user].get("content")) if last_user >= 0 else "",
        prefill=_trailing_prefill(messages, last_user, _is_chat_answer),
        partial=_partial(messages, last_user, _is_chat_answer, _chat_text),
        tool_results=results,
        input_tokens=_words(messages),
        max_tokens=_int(body.get("max_completion_tokens")) or _int(body.get("max_tokens")),
    )


def _is_chat_answer(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant" and not message.get("tool_calls")


def _is_message(item: dict[str, Any], role: str) -> bool:
    return item.get("type", "message") == "message" and item.get("role") == role


def from_responses(body: dict[str, Any]) -> Transcript:
    raw = body.get("input")
    items: list[dict[str, Any]] = (
        [{"type": "message", "role": "user", "content": raw}] if isinstance(raw, str) else raw or []
    )
    last_user = _last_index(
        items,
        lambda item: _is_message(item, "user") and not is_instruction(_text(item.get("content"))),
    )
    names = {
        str(item.get("call_id")): str(item.get("name", ""))
        for item in items
        if item.get("type") == "function_call"
    }
    results = [
        ToolResult(names.get(str(item.get("call_id")), ""), _text(item.get("output")))
        for item in items[last_user + 1 :]
        if item.get("type") == "function_call_output"
    ]
    return Transcript(
        user_text=_text(items[last_user].get("content")) if last_user >= 0 else "",
        prefill=_trailing_prefill(items, last_user, lambda item: _is_message(item, "assistant")),
        partial=_partial(
            items,
            last_user,
            lambda item: _is_message(item, "assistant"),
            lambda item: _text(item.get("content")),
        ),
        tool_results=results,
        input_tokens=_words(items) + _words(body.get("instructions")),
        max_tokens=_int(body.get("max_output_tokens")),
    )


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def _has_text(message: dict[str, Any]) -> bool:
    return any(block.get("type") == "text" for block in _blocks(message))


def _anthropic_text(message: dict[str, Any]) -> str:
    return _text(_blocks(message))


def _is_anthropic_answer(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant" and not any(
        block.get("type") == "tool_use" for block in _blocks(message)
    )


def from_anthropic(body: dict[str, Any]) -> Transcript:
    messages: list[dict[str, Any]] = list(body.get("messages") or [])
    last_user = _last_index(
        messages,
        lambda m: (
            m.get("role") == "user" and _has_text(m) and not is_instruction(_anthropic_text(m))
        ),
    )
    names = {
        str(block.get("id")): str(block.get("name", ""))
        for message in messages
        if message.get("role") == "assistant"
        for block in _blocks(message)
        if block.get("type") == "tool_use"
    }
    results = [
        ToolResult(names.get(str(block.get("tool_use_id")), ""), _text(block.get("content")))
        for message in messages[last_user + 1 :]
        if message.get("role") == "user"
        for block in _blocks(message)
        if block.get("type") == "tool_result"
    ]
    user_text = ""
    if last_user >= 0:
        user_text = _text(_blocks(messages[last_user]))
    return Transcript(
        user_text=user_text,
        prefill=_trailing_prefill(messages, last_user, _is_anthropic_answer),
        partial=_partial(messages, last_user, _is_anthropic_answer, _anthropic_text),
        tool_results=results,
        input_tokens=_words(messages) + _words(body.get("system")),
        max_tokens=_int(body.get("max_tokens")),
    )
