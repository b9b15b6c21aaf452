"""A provider-neutral conversation, built from the stored UI messages.

Provider adapters translate this into each API's own message format.
"""

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from perdure.domain.steering import STEER_PART, steer_text
from perdure.domain.ui import DROPPED_STEP, UIMessage


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class UserItem(BaseModel):
    role: Literal["user"] = "user"
    text: str


class SignedReasoning(BaseModel):
    """A reasoning block as the provider signed it (Anthropic `thinking` with its `signature`,
    or `redacted_thinking` with its `data`), or stored it (an OpenAI Responses reasoning item's
    id): passed back unmodified in tool loops."""

    text: str = ""
    signature: str | None = None
    redacted_data: str | None = None
    item_id: str | None = None


class AssistantItem(BaseModel):
    role: Literal["assistant"] = "assistant"
    reasoning: list[SignedReasoning] = Field(default_factory=list)
    """The step's signed reasoning, which comes before its text and tool calls."""
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ToolResultItem(BaseModel):
    role: Literal["tool"] = "tool"
    tool_call_id: str
    tool_name: str
    output: str
    """The result serialized as text (JSON for structured outputs)."""
    is_error: bool = False


ConversationItem = UserItem | AssistantItem | ToolResultItem


class ToolSpec(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments object."""


def _tool_name(part_type: str, part: dict[str, Any]) -> str:
    if part_type == "dynamic-tool":
        return str(part.get("toolName", "tool"))
    return part_type.removeprefix("tool-")


def _output_text(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output, separators=(",", ":"))


def _denial_text(part: dict[str, Any]) -> str:
    approval = part.get("approval")
    reason = approval.get("reason") if isinstance(approval, dict) else None
    if reason:
        return f"The tool call was not run: it was denied ({reason})."
    return "The tool call was not run: it was denied."


def _string(metadata: object, provider: str, key: str) -> str | None:
    by_provider = metadata.get(provider) if isinstance(metadata, dict) else None
    value = by_provider.get(key) if isinstance(by_provider, dict) else None
    return value if isinstance(value, str) else None


def _signed(part: dict[str, Any]) -> SignedReasoning | None:
    metadata = part.get("providerMetadata")
    signed = SignedReasoning(
        text=str(part.get("text", "")),
        signature=_string(metadata, "anthropic", "signature"),
        redacted_data=_string(metadata, "anthropic", "redactedData"),
        item_id=_string(metadata, "openai", "itemId"),
    )
    if signed.signature is None and signed.redacted_data is None and signed.item_id is None:
        return None
    return signed


def _assistant_items(message: UIMessage) -> list[ConversationItem]:
    """One assistant item per step, each followed by the results of its tool calls; a
    steering message that joined between two steps is a user turn there."""
    items: list[ConversationItem] = []
    current = AssistantItem()
    results: list[ToolResultItem] = []

    def close_step() -> None:
        nonlocal current, results
        if current.text or current.tool_calls:
            items.append(current)
            items.extend(results)
        current, results = AssistantItem(), []

    for part_model in message.parts:
        part = part_model.model_dump()
        part_type = part_model.type
        if part_type == "step-start":
            close_step()
        elif part_type == DROPPED_STEP:
            current, results = AssistantItem(), []
        elif part_type == STEER_PART:
            close_step()
            items.append(UserItem(text=steer_text(part)))
        elif part_type == "text":
            current.text += str(part.get("text", ""))
        elif part_type == "reasoning":
            signed = _signed(part)
            if signed is not None:
                current.reasoning.append(signed)
        elif part_type.startswith("tool-") or part_type == "dynamic-tool":
            state = part.get("state")
            if state in ("input-streaming", None):
                continue
            call = ToolCall(
                id=str(part["toolCallId"]),
                name=_tool_name(part_type, part),
                arguments=part.get("input") if isinstance(part.get("input"), dict) else {},
            )
            current.tool_calls.append(call)
            if state == "output-available":
                results.append(
                    ToolResultItem(
                        tool_call_id=call.id,
                        tool_name=call.name,
                        output=_output_text(part.get("output")),
                    )
                )
            elif state in ("output-error", "output-denied"):
                error = part.get("errorText") or _denial_text(part)
                results.append(
                    ToolResultItem(
                        tool_call_id=call.id, tool_name=call.name, output=str(error), is_error=True
                    )
                )
    close_step()
    return items


def to_conversation(messages: list[UIMessage]) -> list[ConversationItem]:
    """Translate the active path into neutral items; system messages are not included."""
    items: list[ConversationItem] = []
    for message in messages:
        if message.role == "user":
            items.append(UserItem(text=message.text()))
        elif message.role == "assistant":
            items.extend(_assistant_items(message))
    return items
