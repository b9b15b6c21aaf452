"""Running one tool call the model made: its output, or the error the model is told, as the
chunk that settles the call (or the questions its MCP server asks a person first). One owner
for the tool activity and the rounds a step runs."""

from typing import Any

from activities.mcp_input import InputAsked
from perdure.agent import Agent, TurnContext
from perdure.domain.turn_chunks import tool_error_chunk
from perdure.domain.ui import Chunk
from perdure.telemetry import genai_spans
from perdure.tools import Tool, ToolContext, capped_output


def tool_context(turn: TurnContext, tool_call_id: str) -> ToolContext:
    """What a tool (or its `needs_approval` check) is told of the call it answers."""
    return ToolContext(
        tenant_id=turn.tenant_id,
        session_id=turn.session_id,
        submission_id=turn.submission_id,
        tool_call_id=tool_call_id,
        agent=turn.agent,
    )


async def invoke_tool(
    agent: Agent,
    definition: Tool,
    name: str,
    part: dict[str, Any],
    context: ToolContext,
) -> Chunk | InputAsked:
    """The chunk that settles the call `part` (its tool part in the log), or what its MCP
    server asks before it answers (nothing settles the call yet)."""
    call_id = context.tool_call_id
    raw_input = part.get("input")
    arguments: dict[str, Any] = raw_input if isinstance(raw_input, dict) else {}
    with genai_spans.tool_call(name, call_id) as span:
        try:
            output = await definition.invoke(agent, arguments, context)
        except Exception as error:  # noqa: BLE001 - a tool's failure is told to the model
            span.failed(error)
            return tool_error_chunk(call_id, f"{type(error).__name__}: {error}")
    if isinstance(output, InputAsked):
        return output
    return {
        "type": "tool-output-available",
        "toolCallId": call_id,
        "output": capped_output(output, agent.max_tool_output_bytes),
    }
