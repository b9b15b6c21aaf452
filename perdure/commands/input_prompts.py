"""`perdure chat`: the questions an MCP server asks mid-call (`data-input-request` parts,
docs/mcp.md#input-required), asked at the terminal and answered through the inputs API."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.text import Text

import perdure.commands.line_editing as line_editing
from perdure.commands.gateway_client import Gateway, GatewayError

INPUT_CHUNK = "data-input-request"
ACTIONS = {"a": "accept", "accept": "accept", "d": "decline", "decline": "decline"}
ACTIONS |= {"c": "cancel", "cancel": "cancel"}


@dataclass(frozen=True)
class InputRequest:
    """One round of a server's questions, as the stream showed it."""

    wait_id: str
    tool_name: str
    questions: list[dict[str, Any]]


Responses = dict[str, dict[str, Any]]
InputAsker = Callable[[InputRequest, str | None], Responses]
"""Asks the user one round's questions (with why the last answer was refused, if it was);
may raise KeyboardInterrupt: the turn is stopped."""


@dataclass
class PendingInputs:
    """The rounds the turn waits on, kept from the stream."""

    waiting: dict[str, InputRequest] = field(default_factory=dict)

    def seen(self, chunk: dict[str, Any]) -> None:
        if chunk.get("type") != INPUT_CHUNK or not isinstance(chunk.get("data"), dict):
            return
        data = chunk["data"]
        wait_id = str(data.get("waitId"))
        if data.get("status") == "pending":
            questions = [q for q in data.get("questions", []) if isinstance(q, dict)]
            self.waiting[wait_id] = InputRequest(wait_id, str(data.get("toolName")), questions)
        else:
            self.waiting.pop(wait_id, None)

    def answer(self, gateway: Gateway, chat_id: str, ask: InputAsker) -> None:
        """Ask each round until the gateway takes the answer (a 422 says why it did not)."""
        for request in list(self.waiting.values()):
            refused: str | None = None
            while True:
                try:
                    gateway.request(
                        "POST",
                        f"/v1/sessions/{chat_id}/inputs/{request.wait_id}",
                        json={"responses": ask(request, refused)},
                    )
                    break
                except GatewayError as error:
                    if error.code == "invalid_input_answer":
                        refused = str(error)
                        continue
                    # Answered elsewhere, expired, or its turn ended: the stream says how.
                    if error.code != "wait_conflict":
                        raise
                    break
            self.waiting.pop(request.wait_id, None)

    def describe(self) -> str:
        return ", ".join(f"{r.tool_name} ({r.wait_id})" for r in self.waiting.values())


def _value(field_schema: dict[str, Any], text: str) -> Any:
    """The typed value of a field's answer, as its schema types it."""
    kind = field_schema.get("type")
    if kind == "boolean":
        return text.lower() in ("y", "yes", "true")
    if kind == "integer":
        return int(text) if text.lstrip("-").isdigit() else text
    if kind == "number":
        try:
            return float(text)
        except ValueError:
            return text
    if kind == "array":
        return [item.strip() for item in text.split(",") if item.strip()]
    return text


def _hint(field_schema: dict[str, Any]) -> str:
    choices = field_schema.get("enum") or (field_schema.get("items") or {}).get("enum")
    hint = str(field_schema.get("type", "text"))
    if field_schema.get("type") == "boolean":
        hint = "y/n"
    return f"{hint}, one of {', '.join(map(str, choices))}" if choices else hint


def ask_inputs_at(console: Console) -> InputAsker:
    """Ask at the terminal; Ctrl-C or Ctrl-D there stops the turn."""

    def read(prompt: str) -> str:
        answer = console.input(Text(prompt)).strip()
        line_editing.forget_last_line()
        return answer

    def ask(request: InputRequest, refused: str | None) -> Responses:
        if refused:
            console.print(f"  {refused}", style="red")
        responses: Responses = {}
        try:
            for question in request.questions:
                console.print(
                    Text.assemble(("? ", "bold yellow"), (request.tool_name, "bold"), " asks: ")
                    + Text(str(question.get("message", "")))
                )
                if question.get("url"):
                    console.print(f"  {question['url']}", style="underline")
                action = ""
                while action not in ACTIONS:
                    action = read("  [a]ccept, [d]ecline or [c]ancel? ").lower() or "a"
                responses[str(question["key"])] = {"action": ACTIONS[action]}
                schema = question.get("requestedSchema") or {}
                if ACTIONS[action] == "accept" and question.get("mode") == "form":
                    content: dict[str, Any] = {}
                    for name, field_schema in (schema.get("properties") or {}).items():
                        text = read(
                            f"  {field_schema.get('title', name)} ({_hint(field_schema)}): "
                        )
                        if text:
                            content[name] = _value(field_schema, text)
                    responses[str(question["key"])]["content"] = content
        except (KeyboardInterrupt, EOFError):
            console.print()
            raise KeyboardInterrupt from None
        return responses

    return ask
