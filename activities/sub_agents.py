"""Sub-agents: another agent answers a tool call in a child turn on a session of its own.

`start_sub_turn` records the child's session (linked to the parent's call) and its task as
the child's user message; the parent workflow runs the child as a child `TurnWorkflow`.
`relay_sub_turn` follows the child's log and writes its answer so far into the parent's log
as preliminary tool output (the AI SDK replaces the output each time), then the final answer
as the call's result. Those writes are progress in the parent's log, so a long child keeps the
parent's recovery budget fresh.
"""

import asyncio
import contextlib
import hashlib
import time
from dataclasses import dataclass
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities._support import current_writer, heartbeating
from activities.base import AgentActivity, fenced
from perdure.domain.names import RELAY_SUB_TURN_ACTIVITY, START_SUB_TURN_ACTIVITY
from perdure.domain.payloads import (
    RelaySubTurnInput,
    RelaySubTurnResult,
    SubTurnInput,
    SubTurnStart,
)
from perdure.domain.reducer import Reduction, reduce_chunks
from perdure.domain.repair import is_settled
from perdure.domain.turn_chunks import tool_error_chunk
from perdure.domain.ui import Chunk, UIMessage
from perdure.tools import capped_output
from perdure.turn_control.client import TurnStart
from perdure.turn_control.lifecycle import SubmissionLifecycle
from storage.bus import ChunkBus
from storage.chunks import (
    append_chunks,
    load_log,
    log_closed,
    read_chunks,
)
from storage.intake import NewSubmission
from storage.sessions import session_depth
from storage.submission_options import ParentCall, SubmissionOptions
from storage.submission_reads import get_submission
from storage.tables import SubmissionRow

RELAY_EVERY = 0.1
"""Seconds between reads of the child's log when no write in this process wakes the relay
(the child's model step runs on another worker)."""
PRELIMINARY_EVERY = 0.05
PRELIMINARY_CHARS_PER_SECOND = 40_000
MAX_DEPTH = 4
"""Sub-agents nest at most this deep: an agent that calls itself must end somewhere."""
SUB_AGENT_PART = "data-sub-agent"


def child_ids(parent_submission_id: str, tool_call_id: str) -> tuple[str, str]:
    """The child session's chat id (its key derives from it and the tenant) and its task
    message id: the same on every retry."""
    digest = hashlib.sha256(f"{parent_submission_id}\x00{tool_call_id}".encode()).hexdigest()
    return f"sub-{digest[:32]}", f"task-{digest[:32]}"


def _task_of(part: dict[str, Any]) -> str | None:
    raw = part.get("input")
    task = raw.get("task") if isinstance(raw, dict) else None
    return task if isinstance(task, str) and task.strip() else None


@dataclass(kw_only=True, eq=False)
class SubAgentActivities(AgentActivity):
    bus: ChunkBus
    lifecycle: SubmissionLifecycle

    async def _append(self, call: SubTurnInput, chunks: list[Chunk]) -> None:
        with fenced():
            await append_chunks(
                self.db,
                message_id=call.turn.assistant_message_id,
                chunks=chunks,
                writer=current_writer(),
            )
        self.bus.publish(call.turn.assistant_message_id)

    @activity.defn(name=START_SUB_TURN_ACTIVITY)
    async def start_sub_turn(self, call: SubTurnInput) -> SubTurnStart:
        async with heartbeating():
            agent = self.agent(call.turn.agent)
            sub_agent = agent.sub_agent(call.tool_name)
            if sub_agent is None:
                raise ApplicationError(
                    f"{call.tool_name} is not a sub-agent of {agent.name}", non_retryable=True
                )
            with fenced():
                await self.claim(call.turn.assistant_message_id)
            logged = await load_log(self.db, message_id=call.turn.assistant_message_id)
            reduction = reduce_chunks(logged)
            part = reduction.tool_part(call.tool_call_id)
            parent = await get_submission(self.db, call.turn.submission_id)
            if part is None or parent is None:
                raise ApplicationError(
                    f"tool call {call.tool_call_id} of {call.turn.submission_id} is gone",
                    non_retryable=True,
                )
            task = _task_of(part)
            refusal = await self._refusal(call, task)
            if refusal is not None or task is None:
                if not is_settled(part):
                    await self._append(call, [tool_error_chunk(call.tool_call_id, refusal or "")])
                return SubTurnStart()
            chat_id, message_id = child_ids(call.turn.submission_id, call.tool_call_id)
            child = await self.lifecycle.record(
                NewSubmission(
                    tenant_id=parent.tenant_id,
                    chat_id=chat_id,
                    agent=sub_agent.agent,
                    message=UIMessage.model_validate(
                        {
                            "id": message_id,
                            "role": "user",
                            "parts": [{"type": "text", "text": task}],
                        }
                    ),
                    idempotency_key=f"sub-agent:{call.turn.submission_id}:{call.tool_call_id}",
                    options=SubmissionOptions(
                        parent=ParentCall(
                            session_id=call.turn.session_id, tool_call_id=call.tool_call_id
                        )
                    ),
                )
            )
            if not any(
                p["type"] == SUB_AGENT_PART and p.get("id") == call.tool_call_id
                for p in reduction.parts
            ):
                await self._append(call, [_link(call.tool_call_id, child, chat_id)])
        turn = TurnStart.of(child)
        return SubTurnStart(
            # A child that has already ended (a retried activity) runs nothing when admitted.
            child=turn.input.model_copy(update={"admitted": child.status != "pending"}),
            labels=turn.labels,
        )

    async def _refusal(self, call: SubTurnInput, task: str | None) -> str | None:
        """Why the call cannot start a child (told to the model as the call's error)."""
        if task is None:
            return "the sub-agent needs a non-empty `task`"
        if await session_depth(self.db, session_id=call.turn.session_id) >= MAX_DEPTH:
            return f"sub-agents nest at most {MAX_DEPTH} deep"
        return None

    @activity.defn(name=RELAY_SUB_TURN_ACTIVITY)
    async def relay_sub_turn(self, relay: RelaySubTurnInput) -> RelaySubTurnResult:
        async with heartbeating():
            call = relay.call
            agent = self.agent(call.turn.agent)
            with fenced():
                await self.claim(call.turn.assistant_message_id)
            logged = await load_log(self.db, message_id=call.turn.assistant_message_id)
            part = reduce_chunks(logged).tool_part(call.tool_call_id)
            if part is None or is_settled(part):
                return RelaySubTurnResult(settled=True)
            grew = asyncio.Event()
            stop_listening = self.bus.listen(
                lambda grown: grew.set() if grown in (None, relay.child_message_id) else None
            )
            try:
                return await self._follow(relay, agent.max_tool_output_bytes, grew)
            finally:
                stop_listening()

    async def _follow(
        self, relay: RelaySubTurnInput, limit: int, grew: asyncio.Event
    ) -> RelaySubTurnResult:
        """Until the child's log closes (or it parks): its text so far as preliminary output,
        at most every `preliminary_gap`, woken by the bus when the child writes in this process
        and reading at least every RELAY_EVERY otherwise."""
        call = relay.call
        child_log: list[Chunk] = []
        child = reduce_chunks(child_log)
        sent, sent_at = "", 0.0
        while True:
            grew.clear()
            rows = await read_chunks(
                self.db, message_id=relay.child_message_id, after=len(child_log) - 1
            )
            if rows:
                child_log += [chunk for _, chunk in rows]
                child = reduce_chunks(child_log)
            if child.terminal is not None and await log_closed(
                self.db, message_id=relay.child_message_id
            ):
                await self._append(call, [_final(call.tool_call_id, child, limit)])
                return RelaySubTurnResult(settled=True)
            if child.parked and not relay.settle:
                return RelaySubTurnResult(settled=False)
            wait = RELAY_EVERY
            text = child.text()
            if text != sent and not relay.settle:
                due = sent_at + preliminary_gap(len(sent))
                if time.monotonic() >= due:
                    await self._append(call, [_preliminary(call.tool_call_id, text, limit)])
                    sent, sent_at = text, time.monotonic()
                else:
                    wait = min(wait, due - time.monotonic())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await grew.wait()


def preliminary_gap(chars: int) -> float:
    """Seconds between preliminary outputs: each repeats the whole answer so far (the AI SDK
    replaces the output), so a longer answer is sent less often and the parent's log grows
    about linearly with the child's answer, not with its square."""
    return PRELIMINARY_EVERY + chars / PRELIMINARY_CHARS_PER_SECOND


def _link(tool_call_id: str, child: SubmissionRow, chat_id: str) -> Chunk:
    """Where the call's answer comes from: the UI can open the child session through the API
    (by its chat id, not its storage key)."""
    return {
        "type": SUB_AGENT_PART,
        "id": tool_call_id,
        "data": {
            "toolCallId": tool_call_id,
            "agent": child.agent,
            "sessionId": chat_id,
            "submissionId": child.id,
        },
    }


def _preliminary(tool_call_id: str, text: str, limit: int) -> Chunk:
    return {
        "type": "tool-output-available",
        "toolCallId": tool_call_id,
        "output": capped_output(text, limit),
        "preliminary": True,
    }


def _final(tool_call_id: str, child: Reduction, limit: int) -> Chunk:
    """The call's result from the child's closed log: its answer, or why there is none."""
    if child.terminal == "finish":
        return {
            "type": "tool-output-available",
            "toolCallId": tool_call_id,
            "output": capped_output(child.text(), limit),
        }
    if child.terminal == "abort":
        return tool_error_chunk(tool_call_id, "The sub-agent was stopped before it answered.")
    reason = child.error_text or "it ended without an answer"
    return tool_error_chunk(tool_call_id, f"The sub-agent failed: {reason}")
