"""Tool rounds a model step runs itself.

When every call a step made is to a tool of the turn that is idempotent and waits for nobody
(no approval, no client, no sub-agent), the step runs the calls, logs their outputs and asks the
model again at once: no activity and no workflow task between two model requests, which are
most of a round's time when the tool answers at once. The outputs go into the log like any
tool activity's, so the client, the store and a recovery see the same chunks.

Bounded three ways: the agent's `step_tool_rounds` per step, `ROUND_TOOL_SECONDS` for one
round's calls (past it they are cancelled and handed to the workflow, which runs each as its
own activity: they are idempotent; so is a call whose MCP server asks a person first, as only
the workflow can wait for the answer), and `STEP_ROUNDS_SECONDS` for a step's rounds in all, so a
step stays well within its activity's timeout. A worker that dies meanwhile loses nothing: the
step's next attempt goes on from the log (a call without its output is run again as an
activity, as after any crash).
"""

import asyncio
from collections.abc import Awaitable, Mapping

from activities.mcp_input import InputAsked
from activities.mcp_tasks import TaskHost, hosting
from activities.step_run import StepRun
from activities.tool_invocation import invoke_tool, tool_context
from perdure.agent import Agent
from perdure.domain.mcp_tasks import known_task
from perdure.domain.payloads import ModelStepResult, ToolCallRef
from perdure.domain.ui import Chunk
from perdure.tools import Tool

ROUND_TOOL_SECONDS = 30.0
STEP_ROUNDS_SECONDS = 120.0
_Running = asyncio.Task[Chunk | InputAsked]
CANCEL_SECONDS = 5.0
"""How long cancelled calls get to end (a tool that ignores its cancellation is left)."""


def calls_for_the_step(
    agent: Agent,
    tools: Mapping[str, Tool],
    result: ModelStepResult,
    *,
    rounds: int,
    elapsed: float,
) -> list[ToolCallRef] | None:
    """The step's calls when the step may run them itself; None when the workflow runs them."""
    if not result.tool_calls or result.budget_reached or rounds >= agent.step_tool_rounds:
        return None
    if result.next_step >= result.max_steps or elapsed >= STEP_ROUNDS_SECONDS:
        return None  # the workflow runs the last step's calls, then ends the turn
    for call in result.tool_calls:
        if call.wait or call.sub_agent or not call.idempotent or call.tool_name not in tools:
            return None
    return result.tool_calls


async def run_round(run: StepRun, tools: Mapping[str, Tool], calls: list[ToolCallRef]) -> bool:
    """Run `calls` at once and log each output; False when some did not end within
    `ROUND_TOOL_SECONDS` (they are cancelled) or ask a person first: their calls are left for
    the workflow."""
    reduction = run.steplog.reduction
    running: list[_Running] = []
    handover = False

    async def record(chunks: list[Chunk]) -> None:
        run.steplog.add(chunks)
        await run.writer.flush()

    for call in calls:
        part = reduction.tool_part(call.tool_call_id)
        if part is None:
            raise RuntimeError(f"tool call {call.tool_call_id} of this step is not in its log")
        context = tool_context(run.context, call.tool_call_id)
        tool = tools[call.tool_name]
        host = TaskHost(
            call.tool_call_id,
            known_task(reduction.parts, call.tool_call_id),
            record,
            lambda: handover,
        )
        invoked = invoke_tool(run.agent, tool, call.tool_name, part, context)
        running.append(asyncio.ensure_future(_hosted(host, invoked)))
    try:
        _, late = await asyncio.wait(running, timeout=ROUND_TOOL_SECONDS)
    except BaseException:
        await _cancelled(running)  # a stop: no tool of the step goes on after it
        raise
    handover = True  # what is still running goes on as the workflow's (an MCP task too)
    await _cancelled(late)
    ended = [task.result() for task in running if task.done() and not task.cancelled()]
    settled = [chunk for chunk in ended if not isinstance(chunk, InputAsked)]
    run.steplog.add(settled)
    return not late and len(settled) == len(ended)


async def _hosted(host: TaskHost, call: Awaitable[Chunk | InputAsked]) -> Chunk | InputAsked:
    with hosting(host):
        return await call


async def _cancelled(tasks: "list[_Running] | set[_Running]") -> None:
    """Cancel `tasks` and wait, bounded, until they have ended."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=CANCEL_SECONDS)
