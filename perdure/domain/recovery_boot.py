"""What a recovered turn goes on from (Trigger.dev's recovery boot).

Perdure admits one submission per session at a time, so follow-ups wait as queued submissions
and are never spliced into the interrupted turn. The default chain the recovery continues is
`[…settled, first in-flight user, partial]`; the queued follow-ups then run as fresh turns in
the order they were sent. An agent's `on_recovery_boot` may change both: leave the partial out
of the chain to drop it (the model answers afresh), settle its pending tool calls in the
chain's partial to record their results, or give the model another history.
"""

from typing import Any

from pydantic import BaseModel, Field

from perdure.domain.reducer import Reduction
from perdure.domain.repair import is_settled, repair_chunks, unsettled_tool_parts
from perdure.domain.ui import DROPPED_STEP, Chunk, UIMessage


class FollowUp(BaseModel):
    submission_id: str
    message: UIMessage


class RecoveryBoot(BaseModel):
    chain: list[UIMessage]
    """The conversation the recovered turn continues from, oldest first, ending with the partial."""
    follow_ups: list[str] = Field(default_factory=list)
    """Queued submissions to run afterwards, in order; queued ones not listed are skipped."""


class PendingToolCall(BaseModel):
    """A tool call of the interrupted partial without a result (from the raw partial)."""

    tool_call_id: str
    tool_name: str
    input: Any = None
    part_index: int


def unanswered_calls(reduction: Reduction) -> list[PendingToolCall]:
    return [
        PendingToolCall(
            tool_call_id=str(part["toolCallId"]),
            tool_name=str(part.get("toolName") or str(part["type"]).removeprefix("tool-")),
            input=part.get("input"),
            part_index=reduction.parts.index(part),
        )
        for part in unsettled_tool_parts(reduction)
    ]


def synthesized_results(reduction: Reduction, partial: UIMessage | None) -> list[Chunk]:
    """The results a plan's partial gives calls that had none, logged as the calls' results
    (`output-available` or `output-error`) before any repair would settle them as
    interrupted."""
    if partial is None:
        return []
    given = {
        str(part.get("toolCallId")): part
        for part in (p.model_dump() for p in partial.parts)
        if part.get("toolCallId") is not None
    }
    chunks: list[Chunk] = []
    for part in unsettled_tool_parts(reduction):
        settled = given.get(str(part["toolCallId"]))
        if settled is not None and is_settled(settled):
            chunks += repair_chunks(part, settled)
    return chunks


def default_boot(
    settled: list[UIMessage],
    in_flight_user: UIMessage,
    partial: UIMessage | None,
    queued: list[FollowUp],
) -> RecoveryBoot:
    chain = [*settled, in_flight_user]
    if partial is not None and partial.parts:
        chain.append(partial)
    return RecoveryBoot(chain=chain, follow_ups=[f.submission_id for f in queued])


def skipped_follow_ups(queued: list[FollowUp], plan: RecoveryBoot) -> list[str]:
    keep = set(plan.follow_ups)
    return [f.submission_id for f in queued if f.submission_id not in keep]


def dropped_step_chunks(open_text_id: str | None, step: int) -> list[Chunk]:
    """Close the interrupted step, drop it from what the model is sent from now on, and open
    a fresh one (the model answers afresh: no prefill)."""
    closing: list[Chunk] = [{"type": "text-end", "id": open_text_id}] if open_text_id else []
    return [
        *closing,
        {"type": "finish-step"},
        {"type": DROPPED_STEP, "data": {"step": step}},
        {"type": "start-step"},
    ]
