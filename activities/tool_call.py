"""The tool activity: run one tool call the model made, and log its result (or the question
its MCP server asks a person first: a wait the turn parks on, docs/mcp.md#input-required)."""

from dataclasses import dataclass

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities._support import heartbeating, refuse_if_stopped, submission_gone
from activities.base import AgentActivity, fenced
from activities.input_rounds import CallRounds, call_rounds, record_asked
from activities.mcp_input import InputAsked
from activities.mcp_tasks import TaskHost, hosting
from activities.mcp_toolbox import McpTool
from activities.model_step import stash_writer, turn_context
from activities.tool_invocation import invoke_tool, tool_context
from activities.turn_tools import ToolSources, turn_tools
from perdure.domain.mcp_tasks import TaskSeen, known_task
from perdure.domain.names import RUN_TOOL_ACTIVITY
from perdure.domain.payloads import RunToolInput, RunToolResult
from perdure.domain.reducer import reduce_chunks
from perdure.domain.repair import is_settled
from perdure.domain.turn_chunks import tool_error_chunk
from perdure.domain.ui import Chunk
from perdure.recovery import bind_stash, unbind_stash
from perdure.telemetry.log_context import bind_ids
from storage.bus import ChunkBus
from storage.chunks import LogWriter, append_chunks, load_log
from storage.submission_reads import get_submission


@dataclass(kw_only=True, eq=False)
class ToolCallActivity(AgentActivity):
    """`perdure.run_tool`: a settled call is never run again; a non-idempotent one runs once."""

    bus: ChunkBus
    toolbox: ToolSources

    @activity.defn(name=RUN_TOOL_ACTIVITY)
    async def run_tool(self, call: RunToolInput) -> RunToolResult:
        async with heartbeating():
            with fenced():
                writer = await self.claim(call.turn.assistant_message_id)
                rounds = await call_rounds(self.db, call)
                if rounds.waiting:
                    return RunToolResult(asked=True)  # an earlier attempt logged the question
                outcome = await self._run(call, rounds, writer)
                if outcome is None:
                    return RunToolResult()
                if isinstance(outcome, InputAsked):
                    await record_asked(
                        self.db, call, asked=outcome, round=rounds.asked + 1, writer=writer
                    )
                else:
                    await append_chunks(
                        self.db,
                        message_id=call.turn.assistant_message_id,
                        chunks=[outcome],
                        writer=writer,
                    )
            self.bus.publish(call.turn.assistant_message_id)
        return RunToolResult(asked=isinstance(outcome, InputAsked))

    async def _run(
        self, call: RunToolInput, rounds: CallRounds, writer: LogWriter
    ) -> Chunk | InputAsked | None:
        """The chunk that settles the call, what its server asks first, or None when an
        earlier attempt settled it. A call whose MCP server turned it into a task follows that
        task, whoever started it (activities/mcp_tasks.py)."""
        agent = self.agent(call.turn.agent)
        reduction = reduce_chunks(
            await load_log(self.db, message_id=call.turn.assistant_message_id)
        )
        part = reduction.tool_part(call.tool_call_id)
        if part is None:
            raise ApplicationError(
                f"tool call {call.tool_call_id} is not in the log", non_retryable=True
            )
        if is_settled(part):
            return None  # never run a tool twice for one call
        known = known_task(reduction.parts, call.tool_call_id)
        if call.follow_task and known is None:
            raise ApplicationError(
                f"tool call {call.tool_call_id} has no task to follow; it will be reported to "
                "the model as interrupted",
                type="NoTaskToFollow",
                non_retryable=True,
            )
        name = part["type"].removeprefix("tool-")
        offered = await turn_tools(agent, self.toolbox)
        definition = offered.tools.get(name)
        retried = activity.info().attempt > 1 or call.follow_task
        if definition is not None and not definition.idempotent and retried and known is None:
            raise ApplicationError(
                f"tool {name} is not idempotent and an earlier attempt may have run it; "
                "the call will be reported to the model as interrupted",
                type="NonIdempotentToolInterrupted",
                non_retryable=True,
            )
        submission = await get_submission(self.db, call.turn.submission_id)
        if submission is None:
            raise submission_gone(call.turn.submission_id)
        refuse_if_stopped(submission)
        bind_ids(tenant_id=submission.tenant_id)
        context = tool_context(turn_context(agent, submission), call.tool_call_id)
        if isinstance(definition, McpTool) and rounds.answers is not None:
            definition = definition.answering(rounds.answers)  # the person's, from the store
        token = bind_stash(stash_writer(self.db, call.turn.submission_id))
        try:
            if definition is None:
                return tool_error_chunk(call.tool_call_id, offered.missing(name))
            with hosting(self._task_host(call, known, writer)):
                return await invoke_tool(agent, definition, name, part, context)
        finally:
            unbind_stash(token)

    def _task_host(self, call: RunToolInput, known: TaskSeen | None, writer: LogWriter) -> TaskHost:
        message_id = call.turn.assistant_message_id

        async def record(chunks: list[Chunk]) -> None:
            await append_chunks(self.db, message_id=message_id, chunks=chunks, writer=writer)
            self.bus.publish(message_id)

        return TaskHost(call.tool_call_id, known, record)
