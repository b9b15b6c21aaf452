"""Transcript repair: tool calls that never got a result are settled as errors, not re-run."""

from typing import Any

from perdure.domain.reducer import Reduction
from perdure.domain.ui import Chunk

INTERRUPTED_TOOL_TEXT = "The tool call was interrupted before a result was recorded."
SETTLED_TOOL_STATES = frozenset({"output-available", "output-error", "output-denied"})
UNTOUCHED_TOOL_STATES = frozenset({"approval-responded"})
"""A client-side state; it never appears in a log. An `approval-requested` call still open
when a model step or the turn's end comes is settled like any other: its wait is over."""


def is_tool_part(part: dict[str, Any]) -> bool:
    part_type = str(part["type"])
    return part_type.startswith("tool-") or part_type == "dynamic-tool"


def is_settled(part: dict[str, Any]) -> bool:
    """The call has its result: a preliminary output (a sub-agent still answering) is not one."""
    return part.get("state") in SETTLED_TOOL_STATES and not part.get("preliminary")


def unsettled_tool_parts(reduction: Reduction) -> list[dict[str, Any]]:
    return [
        part
        for part in reduction.parts
        if is_tool_part(part)
        and not is_settled(part)
        and part.get("state") not in UNTOUCHED_TOOL_STATES
    ]


def default_repair(part: dict[str, Any]) -> dict[str, Any]:
    raw = part.get("input")
    return {
        **part,
        "input": raw if isinstance(raw, dict) else {},
        "state": "output-error",
        "errorText": INTERRUPTED_TOOL_TEXT,
    }


def repair_chunks(original: dict[str, Any], repaired: dict[str, Any]) -> list[Chunk]:
    """The log entries that turn `original` into `repaired` (the log is append-only):
    `repaired` is the tool part settled (`output-available` or `output-error`), or a text part
    (`{"type": "text", "text": …}`) that stands in for the call."""
    call_id = original["toolCallId"]
    name = original["type"].removeprefix("tool-")
    if original["type"] == "dynamic-tool":
        name = str(original.get("toolName", "tool"))
    chunks: list[Chunk] = []
    if original.get("state") == "input-streaming":
        chunks.append(
            {
                "type": "tool-input-available",
                "toolCallId": call_id,
                "toolName": name,
                "input": repaired.get("input") if isinstance(repaired.get("input"), dict) else {},
            }
        )
    if repaired.get("type") == "text":
        # The log is append-only and every provider needs each call answered, so the call
        # keeps an errored result carrying the text, and the text follows as a part of its own.
        text = str(repaired.get("text") or INTERRUPTED_TOOL_TEXT)
        text_id = f"repair-{call_id}"
        return [
            *chunks,
            {"type": "tool-output-error", "toolCallId": call_id, "errorText": text},
            {"type": "text-start", "id": text_id},
            {"type": "text-delta", "id": text_id, "delta": text},
            {"type": "text-end", "id": text_id},
        ]
    if repaired.get("state") == "output-available":
        chunks.append(
            {
                "type": "tool-output-available",
                "toolCallId": call_id,
                "output": repaired.get("output"),
            }
        )
    else:
        error = repaired.get("errorText") or INTERRUPTED_TOOL_TEXT
        chunks.append({"type": "tool-output-error", "toolCallId": call_id, "errorText": str(error)})
    return chunks


def settled_parts_only(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What is kept when a partial answer is not persisted: settled tool work, never dropped."""
    return [
        part
        for part in parts
        if part["type"] == "step-start" or (is_tool_part(part) and is_settled(part))
    ]
