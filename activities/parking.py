"""Park and resume: a turn that waits for approvals, client tool outputs or a person's
answers to an MCP server's questions (`input`).

Parking ends the client's stream (`finish`, reason `tool-calls`) and records what the turn
waits on; the workflow then waits with no activity running. Resuming opens the same message
again (`start` with its id) and settles each call as its answer says.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities._support import submission_gone
from activities.base import AgentActivity, fenced
from activities.client_tools import turn_client_tools
from activities.events import emit
from activities.turn_tools import ToolSources, turn_tools
from perdure.agent import Agent
from perdure.domain.input_requests import input_request_chunk
from perdure.domain.names import PARK_TURN_ACTIVITY, RESUME_TURN_ACTIVITY
from perdure.domain.payloads import (
    ParkTurnInput,
    ParkTurnResult,
    ResumeTurnInput,
    ResumeTurnResult,
    ToolCallRef,
    WaitKind,
    WaitRef,
)
from perdure.domain.reducer import Reduction, reduce_chunks
from perdure.domain.repair import is_settled
from perdure.domain.turn_chunks import denied_chunk, start_chunk, tool_error_chunk
from perdure.domain.ui import Chunk
from perdure.tools import ClientTool, Tool, capped_output
from storage.bus import ChunkBus
from storage.chunks import append_chunks, load_log
from storage.input_waits import last_inputs, questions_of
from storage.submission_reads import get_submission
from storage.tables import ToolWaitRow
from storage.timing import now
from storage.tool_waits import (
    WaitRequest,
    expire_waits,
    new_client_wait_id,
    park,
    waits_by_id,
)

PARK_FINISH: Chunk = {"type": "finish", "finishReason": "tool-calls"}
EXPIRED_REASON = "no answer came in time"


def _request(
    agent: Agent,
    offered: Mapping[str, Tool],
    client_tools: dict[str, ClientTool],
    part: dict[str, Any],
    asked: Mapping[str, ToolWaitRow],
) -> WaitRequest:
    call_id = str(part["toolCallId"])
    name = str(part["type"]).removeprefix("tool-")
    kind: WaitKind
    question = asked.get(call_id)
    if question is not None:
        # Recorded with its question by the tool activity (an approved call's part still
        # reads `approval-requested`, so this comes first).
        return WaitRequest(
            wait_id=question.id,
            kind="input",
            tool_call_id=call_id,
            tool_name=question.tool_name,
            input=question.input,
            timeout_seconds=question.expires_at - question.requested_at,
            round=question.round,
        )
    if part.get("state") == "approval-requested":
        kind, wait_id = "approval", str(part["approval"]["id"])
        definition = offered.get(name)
        if definition is None:
            raise ApplicationError(
                f"tool {name} is gone from agent {agent.name}", non_retryable=True
            )
        timeout = definition.approval_timeout
    else:
        client_tool = client_tools.get(name)
        if client_tool is None:
            raise ApplicationError(
                f"{name} is not a client tool of {agent.name}", non_retryable=True
            )
        kind, wait_id, timeout = "client", new_client_wait_id(), client_tool.timeout
    return WaitRequest(
        wait_id=wait_id,
        kind=kind,
        tool_call_id=call_id,
        tool_name=name,
        input=part.get("input"),
        timeout_seconds=timeout.total_seconds(),
    )


@dataclass(kw_only=True, eq=False)
class ParkTurnActivity(AgentActivity):
    """`perdure.park_turn`: end the stream for now and record the waits, in one transaction."""

    bus: ChunkBus
    toolbox: ToolSources

    @activity.defn(name=PARK_TURN_ACTIVITY)
    async def park_turn(self, turn: ParkTurnInput) -> ParkTurnResult:
        # A local activity (a few store writes): no heartbeat, and a dead worker fails the
        # workflow task, so the next worker parks the turn again (idempotent).
        agent = self.agent(turn.turn.agent)
        with fenced():
            writer = await self.claim(turn.turn.assistant_message_id)
            reduction = reduce_chunks(
                await load_log(self.db, message_id=turn.turn.assistant_message_id)
            )
            submission = await get_submission(self.db, turn.turn.submission_id)
            if submission is None:
                raise submission_gone(turn.turn.submission_id)
            offered = (await turn_tools(agent, self.toolbox)).tools
            client_tools = turn_client_tools(agent, submission, offered)
            asked = await last_inputs(self.db, submission_id=turn.turn.submission_id)
            requests = [
                _request(agent, offered, client_tools, part, asked)
                for part in reduction.awaiting_parts()
                if part["toolCallId"] in turn.tool_call_ids
            ]
            rows = await park(
                self.db,
                submission_id=turn.turn.submission_id,
                message_id=turn.turn.assistant_message_id,
                requests=requests,
                finish=None if reduction.parked else PARK_FINISH,
                writer=writer,
            )
        self.bus.publish(turn.turn.assistant_message_id)
        at = now()
        await emit(
            self.db,
            session_id=turn.turn.session_id,
            submission_id=turn.turn.submission_id,
            type="chat.turn.waiting",
            waits=[
                {"kind": row.kind, "id": row.id, "toolCallId": row.tool_call_id} for row in rows
            ],
        )
        return ParkTurnResult(
            waits=[
                WaitRef(
                    wait_id=row.id,
                    tool_call_id=row.tool_call_id,
                    timeout_seconds=max(0.0, row.expires_at - at),
                )
                for row in rows
            ]
        )


def _settling(row: ToolWaitRow, part: dict[str, Any], agent: Agent) -> Chunk | None:
    """The chunk an answer writes into the log; None for an approved call, or an answered
    question (its tool runs, sending the answer)."""
    call_id = row.tool_call_id
    if row.status == "approved" or (row.kind == "input" and row.status == "answered"):
        return None
    if row.status == "answered":
        if row.error_text is not None:
            return tool_error_chunk(call_id, row.error_text)
        return {
            "type": "tool-output-available",
            "toolCallId": call_id,
            "output": capped_output(row.output, agent.max_tool_output_bytes),
        }
    reason = row.reason or EXPIRED_REASON
    if row.kind == "client":
        return tool_error_chunk(call_id, f"The client sent no output: {reason}.")
    if row.kind == "input":
        return tool_error_chunk(call_id, f"Nobody answered the MCP server's question: {reason}.")
    return denied_chunk(call_id, reason)


def _question_ended(row: ToolWaitRow) -> Chunk:
    """The question's data part again, saying how its wait ended (a client stops asking)."""
    answers = row.output if row.status == "answered" and isinstance(row.output, dict) else {}
    return input_request_chunk(
        wait_id=row.id,
        tool_call_id=row.tool_call_id,
        tool_name=row.tool_name,
        questions=questions_of(row),
        status="answered" if row.status == "answered" else "expired",
        actions={key: answer.get("action") for key, answer in answers.items()},
    )


@dataclass(kw_only=True, eq=False)
class ResumeTurnActivity(AgentActivity):
    """`perdure.resume_turn`: open the message again and settle what the answers settle."""

    bus: ChunkBus
    toolbox: ToolSources

    @activity.defn(name=RESUME_TURN_ACTIVITY)
    async def resume_turn(self, turn: ResumeTurnInput) -> ResumeTurnResult:
        # A local activity, as the park is.
        agent = self.agent(turn.turn.agent)
        with fenced():
            writer = await self.claim(turn.turn.assistant_message_id)
            # The workflow resumes once each wait is answered or out of time: those still
            # pending are out of time (an answer stored meanwhile wins: it is not pending).
            await expire_waits(self.db, wait_ids=turn.wait_ids, reason=EXPIRED_REASON)
            rows = await waits_by_id(self.db, turn.wait_ids)
            reduction = reduce_chunks(
                await load_log(self.db, message_id=turn.turn.assistant_message_id)
            )
            offered = (await turn_tools(agent, self.toolbox)).tools
            chunks, run = _resumption(agent, offered, turn, reduction, rows)
            if chunks:
                await append_chunks(
                    self.db,
                    message_id=turn.turn.assistant_message_id,
                    chunks=chunks,
                    writer=writer,
                )
        self.bus.publish(turn.turn.assistant_message_id)
        return ResumeTurnResult(run=run)


def _resumption(
    agent: Agent,
    offered: Mapping[str, Tool],
    turn: ResumeTurnInput,
    reduction: Reduction,
    rows: list[ToolWaitRow],
) -> tuple[list[Chunk], list[ToolCallRef]]:
    """The continuation's first chunks (none again on a retry) and the approved calls to run."""
    chunks: list[Chunk] = []
    if reduction.terminal is not None:
        chunks.append(start_chunk(turn.turn.assistant_message_id, turn.turn.submission_id))
    run: list[ToolCallRef] = []
    for row in rows:
        part = reduction.tool_part(row.tool_call_id)
        if part is None or is_settled(part):
            continue
        if row.kind == "input":
            chunks.append(_question_ended(row))
        settling = _settling(row, part, agent)
        if settling is not None:
            chunks.append(settling)
        else:
            definition = offered.get(row.tool_name)
            run.append(
                ToolCallRef(
                    tool_call_id=row.tool_call_id,
                    tool_name=row.tool_name,
                    idempotent=definition.idempotent if definition else True,
                )
            )
    return chunks, run
