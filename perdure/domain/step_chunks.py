"""Turn a provider's neutral events into AI SDK UI message chunks for one model step."""

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
    Unresumable,
)
from perdure.domain.ui import Chunk


class StepChunker:
    """Stateful translator for one step; part ids are unique within the assistant message."""

    def __init__(self, step: int, *, attempt: int = 1, open_text_id: str | None = None) -> None:
        self._prefix = f"s{step}a{attempt}"
        self._counter = 0
        self._text_id = open_text_id
        """A text part left open by an interrupted attempt is continued, not reopened."""
        self._continuing = open_text_id is not None
        """Until the continued text goes on, the model's reasoning is about how to continue
        (a continuation request with thinking on): not part of the answer, and logging it
        would split the answer's text in two."""
        self._reasoning_id: str | None = None
        self._started_tools: set[str] = set()
        self.finish: Finish | None = None
        self.tool_calls: list[ToolCallEnd] = []

    def _new_id(self, prefix: str) -> str:
        self._counter += 1
        return f"{self._prefix}-{prefix}{self._counter}"

    def _close_text(self) -> list[Chunk]:
        if self._text_id is None:
            return []
        closed, self._text_id = self._text_id, None
        return [{"type": "text-end", "id": closed}]

    def _close_reasoning(self) -> list[Chunk]:
        if self._reasoning_id is None:
            return []
        closed, self._reasoning_id = self._reasoning_id, None
        return [{"type": "reasoning-end", "id": closed}]

    def feed(self, event: ProviderEvent) -> list[Chunk]:
        if isinstance(event, TextDelta):
            return self._text(event)
        if isinstance(event, ReasoningDelta):
            return self._reasoning(event)
        if isinstance(event, ReasoningSigned):
            return self._signed(event)
        if isinstance(event, ToolCallStart):
            return self._tool_started(event)
        if isinstance(event, ToolCallDelta):
            return self._tool_arguments(event)
        if isinstance(event, ToolCallEnd):
            return self._tool_ended(event)
        if isinstance(event, Finish):
            self.finish = event
            return self.close()
        if isinstance(event, ResponseCursor | Unresumable):
            return []
        raise TypeError(f"unexpected provider event {event!r}")

    def _text(self, event: TextDelta) -> list[Chunk]:
        if not event.text:
            return []
        self._continuing = False
        out = self._close_reasoning()
        if self._text_id is None:
            self._text_id = self._new_id("t")
            out.append({"type": "text-start", "id": self._text_id})
        out.append({"type": "text-delta", "id": self._text_id, "delta": event.text})
        return out

    def _reasoning(self, event: ReasoningDelta) -> list[Chunk]:
        if not event.text or self._continuing:
            return []
        out = self._close_text()
        if self._reasoning_id is None:
            self._reasoning_id = self._new_id("r")
            out.append({"type": "reasoning-start", "id": self._reasoning_id})
        out.append({"type": "reasoning-delta", "id": self._reasoning_id, "delta": event.text})
        return out

    def _tool_started(self, event: ToolCallStart) -> list[Chunk]:
        self._continuing = False
        out = self._close_text() + self._close_reasoning()
        self._started_tools.add(event.id)
        out.append(_tool_input_start(event.id, event.name))
        return out

    def _tool_arguments(self, event: ToolCallDelta) -> list[Chunk]:
        if event.id not in self._started_tools or not event.arguments_delta:
            return []
        return [
            {
                "type": "tool-input-delta",
                "toolCallId": event.id,
                "inputTextDelta": event.arguments_delta,
            }
        ]

    def _tool_ended(self, event: ToolCallEnd) -> list[Chunk]:
        self._continuing = False
        out = self._close_text() + self._close_reasoning()
        if event.id not in self._started_tools:
            self._started_tools.add(event.id)
            out.append(_tool_input_start(event.id, event.name))
        self.tool_calls.append(event)
        out.append(
            {
                "type": "tool-input-available",
                "toolCallId": event.id,
                "toolName": event.name,
                "input": event.arguments,
            }
        )
        return out

    def _signed(self, event: ReasoningSigned) -> list[Chunk]:
        """Close the reasoning part with what the provider needs back (opening an empty one
        when the provider sent none of its text: an omitted display, a redacted block, an
        OpenAI reasoning item without a summary), kept as the AI SDK keeps it."""
        if self._continuing:
            return []
        metadata: dict[str, dict[str, str]] = {}
        anthropic = {
            key: value
            for key, value in (
                ("signature", event.signature),
                ("redactedData", event.redacted_data),
            )
            if value is not None
        }
        if anthropic:
            metadata["anthropic"] = anthropic
        if event.item_id is not None:
            metadata["openai"] = {"itemId": event.item_id}
        out = self._close_text()
        if self._reasoning_id is None or event.redacted_data is not None:
            out += self._close_reasoning()
            self._reasoning_id = self._new_id("r")
            out.append({"type": "reasoning-start", "id": self._reasoning_id})
        closed, self._reasoning_id = self._reasoning_id, None
        out.append({"type": "reasoning-end", "id": closed, "providerMetadata": metadata})
        return out

    def close(self) -> list[Chunk]:
        """Chunks that end every part still open (also used when an attempt is cut short)."""
        return self._close_text() + self._close_reasoning()


def _tool_input_start(tool_call_id: str, tool_name: str) -> Chunk:
    return {"type": "tool-input-start", "toolCallId": tool_call_id, "toolName": tool_name}
