"""The chunks that open, close and annotate a turn's log (pure)."""

from perdure.domain.payloads import FinishTurnInput
from perdure.domain.reducer import reduce_chunks
from perdure.domain.repair import default_repair, is_tool_part, repair_chunks, unsettled_tool_parts
from perdure.domain.step_state import StepState
from perdure.domain.ui import Chunk
from perdure.domain.usage import BUDGET, Usage


def start_chunk(message_id: str, submission_id: str) -> Chunk:
    return {
        "type": "start",
        "messageId": message_id,
        "messageMetadata": {"submissionId": submission_id},
    }


def tool_error_chunk(tool_call_id: str, text: str) -> Chunk:
    return {"type": "tool-output-error", "toolCallId": tool_call_id, "errorText": text}


def close_open_text(state: StepState) -> list[Chunk]:
    return [{"type": "text-end", "id": state.open_text_id}] if state.open_text_id else []


def pending_tool_calls(state: StepState) -> list[tuple[str, str, bool]]:
    """`(tool_call_id, tool_name, approval requested)` of the step's calls that still await
    their result."""
    return [
        (
            part["toolCallId"],
            part["type"].removeprefix("tool-"),
            part.get("state") == "approval-requested",
        )
        for part in state.current_parts
        if is_tool_part(part) and part.get("state") in ("input-available", "approval-requested")
    ]


def denied_chunk(tool_call_id: str, reason: str) -> Chunk:
    return {"type": "tool-output-denied", "toolCallId": tool_call_id, "reason": reason}


_UNSETTLED_BECAUSE = {
    "aborted": "The turn was stopped before the tool call returned a result.",
    "skipped": "The turn was skipped before the tool call returned a result.",
    "error": "The turn ended with an error before the tool call returned a result.",
    "exhausted": "The turn could not recover before the tool call returned a result.",
    BUDGET: "The turn reached its budget before the tool call ran.",
    "completed": "The turn ended before the tool call returned a result.",
}


def settle_open_tool_calls(logged: list[Chunk], reason: str) -> list[Chunk]:
    """An errored result, saying why, for every tool call the log leaves open: a stored answer
    with an unanswered call is a request every provider rejects (OpenAI: tool messages must
    answer each `tool_call_id`; Anthropic: each `tool_use` needs a `tool_result`)."""
    chunks: list[Chunk] = []
    for part in unsettled_tool_parts(reduce_chunks(logged)):
        if part.get("state") == "approval-requested":
            chunks.append(denied_chunk(part["toolCallId"], reason))
        else:
            chunks += repair_chunks(part, {**default_repair(part), "errorText": reason})
    return chunks


def closing_chunks(
    logged: list[Chunk], turn: FinishTurnInput, terminal_message: str, usage: Usage | None = None
) -> list[Chunk]:
    """The chunks that end the log, unless an earlier attempt already ended it.

    `terminal_message` ends the answer of a turn that could not recover, or that used its
    budget. `usage`, the turn's model calls' totals, goes in the message's metadata: on the
    `finish` chunk, or on a `message-metadata` chunk before any other ending."""
    reduction = reduce_chunks(logged)
    if reduction.terminal is not None and not reduction.parked:
        return []
    closing: list[Chunk] = []
    if not logged or reduction.parked:
        # A parked turn's stream ended at its park: the ending is a continuation of its own.
        closing.append(start_chunk(turn.turn.assistant_message_id, turn.turn.submission_id))
    completed = turn.outcome == "completed" and not turn.exhausted
    budget = completed and turn.finish_reason == BUDGET
    ending = "exhausted" if turn.exhausted else BUDGET if budget else turn.outcome
    closing += settle_open_tool_calls(logged, _UNSETTLED_BECAUSE[ending])
    if reduction.open_text_id is not None:
        closing.append({"type": "text-end", "id": reduction.open_text_id})
    if reduction.step_open:
        closing.append({"type": "finish-step"})
    metadata: dict[str, object] = {"usage": usage.metadata()} if usage is not None else {}
    if metadata and not completed:
        closing.append({"type": "message-metadata", "messageMetadata": metadata})
    if turn.exhausted or budget:
        closing += [
            {"type": "text-start", "id": "terminal"},
            {"type": "text-delta", "id": "terminal", "delta": terminal_message},
            {"type": "text-end", "id": "terminal"},
        ]
    if turn.exhausted:
        closing.append({"type": "error", "errorText": terminal_message})
    elif budget:
        # `budget` is no finish reason the AI SDK accepts on the chunk (perdure.domain.usage).
        metadata["finishReason"] = BUDGET
        closing.append({"type": "finish", "finishReason": "other", "messageMetadata": metadata})
    elif completed:
        finish: Chunk = {"type": "finish", "finishReason": turn.finish_reason or "stop"}
        if metadata:
            finish["messageMetadata"] = metadata
        closing.append(finish)
    elif turn.outcome == "aborted":
        closing.append({"type": "abort", "reason": "user-cancelled"})
    elif turn.outcome == "skipped":
        # Why it was skipped, when the store says (a later submission took it over).
        closing.append({"type": "abort", "reason": turn.error_text or "skipped-by-recovery"})
    else:
        closing.append({"type": "error", "errorText": turn.error_text or "The turn failed."})
    return closing
