"""Fold a message's chunk log into a UIMessage, the way the AI SDK client does.

The persisted assistant message, the partial shown while a turn runs and the partial a
recovery continues from are all this reduction of the same log, so they can never disagree
with what a client was streamed.
"""

import copy
from dataclasses import dataclass, field
from typing import Any

from perdure.domain.ui import TERMINAL_CHUNK_TYPES, Chunk


@dataclass
class Reduction:
    message_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    parts: list[dict[str, Any]] = field(default_factory=list)
    terminal: str | None = None
    """`finish`, `abort` or `error` once the log is closed."""
    finish_reason: str | None = None
    error_text: str | None = None
    steps: int = 0
    step_open: bool = False
    """The last `start-step` has no `finish-step` yet (an attempt was cut short)."""
    open_text_id: str | None = None
    """Chunk id of a text part the log left open (an interrupted attempt)."""

    def text(self) -> str:
        return "".join(str(p.get("text", "")) for p in self.parts if p["type"] == "text")

    @property
    def parked(self) -> bool:
        """The turn ended its stream to wait for approvals or client tool outputs: its last
        `finish` (tool-calls) left calls open, and a continuation (`start`) may follow."""
        return (
            self.terminal == "finish"
            and self.finish_reason == "tool-calls"
            and bool(self.awaiting_parts())
        )

    def awaiting_parts(self) -> list[dict[str, Any]]:
        """Tool parts waiting for an approval, or for a result nobody on the server makes."""
        return [
            part
            for part in self.parts
            if part.get("toolCallId") is not None
            and part.get("state") in ("approval-requested", "input-available")
        ]

    def tool_part(self, tool_call_id: str) -> dict[str, Any] | None:
        for part in self.parts:
            if part.get("toolCallId") == tool_call_id:
                return part
        return None


class _Reducer:
    def __init__(self) -> None:
        self.out = Reduction()
        self._open: dict[tuple[str, str], dict[str, Any]] = {}
        self._tool_input_text: dict[str, str] = {}

    def _tool(self, chunk: Chunk) -> dict[str, Any]:
        call_id = str(chunk["toolCallId"])
        part = self.out.tool_part(call_id)
        if part is None:
            name = str(chunk.get("toolName", "unknown"))
            dynamic = bool(chunk.get("dynamic"))
            part = {
                "type": "dynamic-tool" if dynamic else f"tool-{name}",
                "toolCallId": call_id,
                "state": "input-streaming",
                "input": None,
            }
            if dynamic:
                part["toolName"] = name
            self.out.parts.append(part)
        return part

    def apply(self, chunk: Chunk) -> None:
        kind = str(chunk.get("type", ""))
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, kind, chunk)
        elif kind.startswith("data-"):
            self._apply_data(chunk)

    def _start(self, kind: str, chunk: Chunk) -> None:
        # A `start` after a terminal chunk continues a parked turn: the message is open again.
        out = self.out
        out.terminal = out.finish_reason = out.error_text = None
        if chunk.get("messageId"):
            out.message_id = str(chunk["messageId"])
        self._merge_metadata(chunk)

    def _start_step(self, kind: str, chunk: Chunk) -> None:
        self.out.steps += 1
        self.out.step_open = True
        self.out.parts.append({"type": "step-start"})

    def _finish_step(self, kind: str, chunk: Chunk) -> None:
        self.out.step_open = False
        self._close_open()

    def _text_start(self, kind: str, chunk: Chunk) -> None:
        """`text-start` or `reasoning-start`."""
        part_type = kind.removesuffix("-start")
        opened: dict[str, Any] = {"type": part_type, "text": "", "state": "streaming"}
        if chunk.get("providerMetadata"):
            opened["providerMetadata"] = chunk["providerMetadata"]
        self.out.parts.append(opened)
        self._open[(part_type, str(chunk["id"]))] = opened

    def _text_delta(self, kind: str, chunk: Chunk) -> None:
        open_part = self._open.get((kind.removesuffix("-delta"), str(chunk["id"])))
        if open_part is not None:
            open_part["text"] += str(chunk.get("delta", ""))

    def _text_end(self, kind: str, chunk: Chunk) -> None:
        closed = self._open.pop((kind.removesuffix("-end"), str(chunk["id"])), None)
        if closed is not None:
            closed["state"] = "done"
            if chunk.get("providerMetadata"):  # a reasoning part's signature arrives last
                closed["providerMetadata"] = chunk["providerMetadata"]

    def _tool_input_start(self, kind: str, chunk: Chunk) -> None:
        self._tool(chunk)
        self._tool_input_text[str(chunk["toolCallId"])] = ""

    def _tool_input_delta(self, kind: str, chunk: Chunk) -> None:
        call_id = str(chunk["toolCallId"])
        self._tool_input_text[call_id] = self._tool_input_text.get(call_id, "") + str(
            chunk.get("inputTextDelta", "")
        )

    def _tool_input_available(self, kind: str, chunk: Chunk) -> None:
        self._tool(chunk).update(state="input-available", input=chunk.get("input"))

    def _tool_input_error(self, kind: str, chunk: Chunk) -> None:
        self._tool(chunk).update(
            state="output-error", input=chunk.get("input"), errorText=chunk.get("errorText")
        )

    def _tool_approval_request(self, kind: str, chunk: Chunk) -> None:
        self._tool(chunk).update(
            state="approval-requested", approval={"id": chunk.get("approvalId")}
        )

    def _tool_output_available(self, kind: str, chunk: Chunk) -> None:
        part = self._tool(chunk)
        part.update(state="output-available", output=chunk.get("output"))
        if chunk.get("preliminary"):
            part["preliminary"] = True
        else:
            part.pop("preliminary", None)
        if isinstance(part.get("approval"), dict):
            part["approval"].setdefault("approved", True)

    def _tool_output_error(self, kind: str, chunk: Chunk) -> None:
        part = self._tool(chunk)
        part.update(state="output-error", errorText=chunk.get("errorText"))
        part.pop("preliminary", None)
        part.pop("output", None)

    def _tool_output_denied(self, kind: str, chunk: Chunk) -> None:
        part = self._tool(chunk)
        part["state"] = "output-denied"
        # `reason` is Perdure's (the v6 chunk has only the call id; its schema is loose):
        # the stored part carries it as the AI SDK client's own part does after a denial.
        approval = part.get("approval")
        part["approval"] = {
            **(approval if isinstance(approval, dict) else {}),
            "approved": False,
        }
        if chunk.get("reason"):
            part["approval"]["reason"] = str(chunk["reason"])

    def _source(self, kind: str, chunk: Chunk) -> None:
        """`source-url`, `source-document` or `file`."""
        self.out.parts.append({k: v for k, v in chunk.items() if k != "providerMetadata"})

    def _message_metadata(self, kind: str, chunk: Chunk) -> None:
        self._merge_metadata(chunk)

    def _terminal(self, kind: str, chunk: Chunk) -> None:
        out = self.out
        out.terminal = kind
        self._merge_metadata(chunk)
        if kind == "finish":
            out.finish_reason = chunk.get("finishReason")
        elif kind == "error":
            out.error_text = chunk.get("errorText")
        self._close_open()

    def _close_open(self) -> None:
        for part in self._open.values():
            part["state"] = "done"
        self._open.clear()

    def open_keys(self) -> list[tuple[str, str]]:
        return list(self._open)

    def _apply_data(self, chunk: Chunk) -> None:
        if chunk.get("transient"):
            return
        part = {"type": chunk["type"], "data": chunk.get("data")}
        if chunk.get("id") is not None:
            part["id"] = chunk["id"]
            for i, existing in enumerate(self.out.parts):
                if existing["type"] == chunk["type"] and existing.get("id") == chunk["id"]:
                    self.out.parts[i] = part
                    return
        self.out.parts.append(part)

    def _merge_metadata(self, chunk: Chunk) -> None:
        metadata = chunk.get("messageMetadata")
        if isinstance(metadata, dict):
            self.out.metadata.update(metadata)


_HANDLERS = {
    "start": _Reducer._start,
    "start-step": _Reducer._start_step,
    "finish-step": _Reducer._finish_step,
    "text-start": _Reducer._text_start,
    "reasoning-start": _Reducer._text_start,
    "text-delta": _Reducer._text_delta,
    "reasoning-delta": _Reducer._text_delta,
    "text-end": _Reducer._text_end,
    "reasoning-end": _Reducer._text_end,
    "tool-input-start": _Reducer._tool_input_start,
    "tool-input-delta": _Reducer._tool_input_delta,
    "tool-input-available": _Reducer._tool_input_available,
    "tool-input-error": _Reducer._tool_input_error,
    "tool-approval-request": _Reducer._tool_approval_request,
    "tool-output-available": _Reducer._tool_output_available,
    "tool-output-error": _Reducer._tool_output_error,
    "tool-output-denied": _Reducer._tool_output_denied,
    "source-url": _Reducer._source,
    "source-document": _Reducer._source,
    "file": _Reducer._source,
    "message-metadata": _Reducer._message_metadata,
    **dict.fromkeys(TERMINAL_CHUNK_TYPES, _Reducer._terminal),
}
"""One handler per chunk type (a `data-*` chunk, whatever its name, is a data part)."""


class Reducer:
    """A log's reduction kept up to date as chunks are added: each chunk is applied once,
    however often the reduction is read."""

    def __init__(self, chunks: list[Chunk] | None = None) -> None:
        self._reducer = _Reducer()
        self.add(chunks or [])

    def add(self, chunks: list[Chunk]) -> None:
        for chunk in chunks:
            self._reducer.apply(chunk)

    def snapshot(self) -> Reduction:
        """The reduction so far, a copy: later chunks change the reducer's parts in place
        (a text delta, a step that finishes), never a snapshot taken before them."""
        return _finished(copy.deepcopy(self._reducer.out), self._reducer)


def _finished(out: Reduction, reducer: _Reducer) -> Reduction:
    open_text = [chunk_id for (part_type, chunk_id) in reducer.open_keys() if part_type == "text"]
    out.open_text_id = open_text[-1] if open_text else None
    return out


def reduce_chunks(chunks: list[Chunk]) -> Reduction:
    reducer = _Reducer()
    for chunk in chunks:
        reducer.apply(chunk)
    return _finished(reducer.out, reducer)
