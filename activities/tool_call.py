"""The tool activity: run one tool call the model made, and log its result."""

from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities._support import (
    current_writer,
    heartbeating,
    refuse_if_stopped,
    resolve_agent,
    superseded,
)
from activities.model_step import stash_writer
from activities.turn_tools import ToolSources, turn_tools
from perdure.agent import Agent
from perdure.agents_registry import AgentRegistry
from perdure.domain.names import RUN_TOOL_ACTIVITY
from perdure.domain.payloads import RunToolInput
from perdure.domain.reducer import reduce_chunks
from perdure.domain.repair import is_settled
from perdure.domain.turn_chunks import tool_error_chunk
from perdure.domain.ui import Chunk
from perdure.recovery import bind_stash, unbind_stash
from perdure.telemetry import genai_spans
from perdure.telemetry.log_context import bind_ids
from perdure.tools import Tool, ToolContext, capped_output
from storage.bus import ChunkBus
from storage.chunks import StaleWriter, append_chunks, claim_log, load_log
from storage.db import Database
from storage.submissions import get_submission


class ToolCallActivity:
    """`perdure.run_tool`: a settled call is never run again; a non-idempotent one runs once."""

    def __init__(
        self, *, db: Database, bus: ChunkBus, agents: AgentRegistry, toolbox: ToolSources
    ) -> None:
        self._db = db
        self._bus = bus
        self._agents = agents
        self._toolbox = toolbox

    @activity.defn(name=RUN_TOOL_ACTIVITY)
    async def run_tool(self, call: RunToolInput) -> None:
        async with heartbeating():
            writer = current_writer()
            try:
                if writer.attempt > 1:  # fence off the earlier attempts (a first has none)
                    await claim_log(self._db, message_id=call.assistant_message_id, writer=writer)
                chunk = await self._run(call)
                if chunk is None:
                    return
                await append_chunks(
                    self._db, message_id=call.assistant_message_id, chunks=[chunk], writer=writer
                )
            except StaleWriter as error:
                raise superseded(error) from error
            self._bus.publish(call.assistant_message_id)

    async def _run(self, call: RunToolInput) -> Chunk | None:
        """The chunk that settles the call, or None when an earlier attempt settled it."""
        agent = resolve_agent(self._agents, call.agent)
        reduction = reduce_chunks(await load_log(self._db, message_id=call.assistant_message_id))
        part = reduction.tool_part(call.tool_call_id)
        if part is None:
            raise ApplicationError(
                f"tool call {call.tool_call_id} is not in the log", non_retryable=True
            )
        if is_settled(part):
            return None  # never run a tool twice for one call
        name = part["type"].removeprefix("tool-")
        offered = await turn_tools(agent, self._toolbox)
        definition = offered.tools.get(name)
        if definition is not None and not definition.idempotent and activity.info().attempt > 1:
            raise ApplicationError(
                f"tool {name} is not idempotent and an earlier attempt may have run it; "
                "the call will be reported to the model as interrupted",
                type="NonIdempotentToolInterrupted",
                non_retryable=True,
            )
        submission = await get_submission(self._db, call.submission_id)
        if submission is None:
            raise ApplicationError(
                f"submission {call.submission_id} is no longer stored (session deleted)",
                non_retryable=True,
            )
        refuse_if_stopped(submission)
        bind_ids(tenant_id=submission.tenant_id)
        context = ToolContext(
            tenant_id=submission.tenant_id,
            session_id=submission.session_id,
            submission_id=submission.id,
            tool_call_id=call.tool_call_id,
            agent=agent.name,
        )
        token = bind_stash(stash_writer(self._db, call.submission_id))
        try:
            if definition is None:
                return tool_error_chunk(call.tool_call_id, offered.missing(name))
            return await _invoke(agent, definition, name, part, context)
        finally:
            unbind_stash(token)


async def _invoke(
    agent: Agent,
    definition: Tool,
    name: str,
    part: dict[str, Any],
    context: ToolContext,
) -> Chunk:
    call_id = context.tool_call_id
    raw_input = part.get("input")
    arguments: dict[str, Any] = raw_input if isinstance(raw_input, dict) else {}
    with genai_spans.tool_call(name, call_id) as span:
        try:
            output = await definition.invoke(agent, arguments, context)
        except Exception as error:  # noqa: BLE001 - a tool's failure is told to the model
            span.failed(error)
            return tool_error_chunk(call_id, f"{type(error).__name__}: {error}")
    return {
        "type": "tool-output-available",
        "toolCallId": call_id,
        "output": capped_output(output, agent.max_tool_output_bytes),
    }
