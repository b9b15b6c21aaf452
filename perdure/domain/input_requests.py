"""What an MCP server asks a person mid-call (its `input_required` result, protocol
2026-07-28) and what the person answers, as Perdure shows and checks them (pure).

A question is an elicitation: a message and either a form (a flat JSON schema of primitive
fields) or a URL to visit. An answer is the elicitation result the server reads: `accept`
(with the form's content), `decline` or `cancel`. docs/mcp.md#input-required.
"""

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from perdure.domain.ui import Chunk

INPUT_REQUEST_CHUNK = "data-input-request"
"""The data part a question reaches clients as; the same id again replaces it (the AI SDK
keeps one data part per type and id), so its `status` follows the wait."""
MAX_QUESTIONS = 16
MAX_MESSAGE_CHARS = 4000
MAX_FIELDS = 64
MAX_TEXT_CHARS = 10_000
"""At most this many characters in one answered text field (or list item)."""
MAX_LIST_ITEMS = 256

Action = Literal["accept", "decline", "cancel"]
FieldValue = str | int | float | bool | list[str] | None


class InputQuestion(BaseModel):
    """One of the server's input requests: its key (the server's), and what it asks."""

    model_config = ConfigDict(frozen=True)

    key: str = Field(max_length=200)
    mode: Literal["form", "url"] = "form"
    message: str = Field(max_length=MAX_MESSAGE_CHARS)
    requested_schema: dict[str, Any] | None = None
    """`form`: the flat object schema the content must match."""
    url: str | None = None
    """`url`: where the person goes (the answer then carries no content)."""

    def public(self) -> dict[str, Any]:
        """As clients see it (camelCase, as the MCP wire and the AI SDK are)."""
        shown: dict[str, Any] = {"key": self.key, "mode": self.mode, "message": self.message}
        if self.requested_schema is not None:
            shown["requestedSchema"] = self.requested_schema
        if self.url is not None:
            shown["url"] = self.url
        return shown


class InputAnswer(BaseModel):
    """A person's answer to one question: an MCP `ElicitResult`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Action
    content: dict[str, FieldValue] | None = Field(default=None, max_length=MAX_FIELDS)
    """The form's fields, with `accept` only."""


def answer_problems(question: InputQuestion, answer: InputAnswer) -> list[str]:
    """Why `answer` cannot be sent for `question` (empty when it can): content goes with
    `accept` of a form only, and matches the form's schema."""
    if answer.action != "accept" or question.mode == "url":
        return ["content is sent only to accept a form"] if answer.content else []
    return content_problems(question.requested_schema or {}, answer.content or {})


def content_problems(schema: dict[str, Any], content: dict[str, FieldValue]) -> list[str]:
    """The ways `content` breaks the restricted schema elicitation forms use (a flat object of
    strings, numbers, integers, booleans and lists of strings); empty when it matches."""
    properties = schema.get("properties")
    fields: dict[str, Any] = properties if isinstance(properties, dict) else {}
    problems = [f"`{name}` is not a field of the form" for name in content if name not in fields]
    required = schema.get("required")
    for name in required if isinstance(required, list) else []:
        if content.get(str(name)) is None:
            problems.append(f"`{name}` is required")
    for name, value in content.items():
        definition = fields.get(name)
        if value is not None and isinstance(definition, dict):
            problems += [f"`{name}` {problem}" for problem in _value_problems(definition, value)]
    return problems


def _value_problems(definition: dict[str, Any], value: FieldValue) -> list[str]:
    kind = definition.get("type")
    if kind == "boolean":
        return [] if isinstance(value, bool) else ["must be true or false"]
    if kind in ("number", "integer"):
        return _number_problems(definition, value, whole=kind == "integer")
    if kind == "array":
        return _list_problems(definition, value)
    if kind == "string" or kind is None:
        return _text_problems(definition, value)
    return []  # a field type outside the restricted schema: the server checks it


def _number_problems(definition: dict[str, Any], value: FieldValue, *, whole: bool) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ["must be a number"]
    if whole and not float(value).is_integer():
        return ["must be a whole number"]
    low, high = definition.get("minimum"), definition.get("maximum")
    if isinstance(low, int | float) and value < low:
        return [f"must be at least {low}"]
    if isinstance(high, int | float) and value > high:
        return [f"must be at most {high}"]
    return []


def _text_problems(definition: dict[str, Any], value: FieldValue) -> list[str]:
    if not isinstance(value, str):
        return ["must be text"]
    allowed = _choices(definition)
    if allowed is not None and value not in allowed:
        return [f"must be one of {', '.join(sorted(allowed))}"]
    low, high = definition.get("minLength"), definition.get("maxLength")
    if len(value) > MAX_TEXT_CHARS:
        return [f"is longer than {MAX_TEXT_CHARS} characters"]
    if isinstance(low, int) and len(value) < low:
        return [f"must be at least {low} characters"]
    if isinstance(high, int) and len(value) > high:
        return [f"must be at most {high} characters"]
    if definition.get("format") == "email" and not re.fullmatch(r"[^@\s]+@[^@\s]+", value):
        return ["must be an email address"]
    return []


def _list_problems(definition: dict[str, Any], value: FieldValue) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return ["must be a list of text"]
    if len(value) > MAX_LIST_ITEMS:
        return [f"has more than {MAX_LIST_ITEMS} items"]
    items = definition.get("items")
    allowed = _choices(items) if isinstance(items, dict) else None
    if allowed is not None and any(item not in allowed for item in value):
        return [f"items must be among {', '.join(sorted(allowed))}"]
    low, high = definition.get("minItems"), definition.get("maxItems")
    if isinstance(low, int) and len(value) < low:
        return [f"must have at least {low} items"]
    if isinstance(high, int) and len(value) > high:
        return [f"must have at most {high} items"]
    return []


def _choices(definition: dict[str, Any]) -> set[str] | None:
    """The values an enum field allows: `enum`, or the `const` of each `oneOf`/`anyOf` arm."""
    if isinstance(definition.get("enum"), list):
        return {str(value) for value in definition["enum"]}
    for arms in (definition.get("oneOf"), definition.get("anyOf")):
        if isinstance(arms, list):
            return {str(arm.get("const")) for arm in arms if isinstance(arm, dict)}
    return None


InputStatus = Literal["pending", "answered", "expired"]


def input_request_chunk(
    *,
    wait_id: str,
    tool_call_id: str,
    tool_name: str,
    questions: list[InputQuestion],
    status: InputStatus = "pending",
    actions: dict[str, Action] | None = None,
) -> Chunk:
    """The data part that shows the questions of one round (and, once it is over, how it
    ended): what a client renders as a form to answer at the inputs API."""
    data: dict[str, Any] = {
        "waitId": wait_id,
        "toolCallId": tool_call_id,
        "toolName": tool_name,
        "questions": [question.public() for question in questions],
        "status": status,
    }
    if actions:
        data["actions"] = actions
    return {"type": INPUT_REQUEST_CHUNK, "id": wait_id, "data": data}
