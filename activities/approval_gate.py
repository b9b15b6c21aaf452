"""After the stream: which of the step's tool calls wait for a person before they run."""

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from activities._support import call_hook
from activities.tool_invocation import tool_context
from perdure.agent import Agent, TurnContext
from perdure.domain.payloads import ModelStepResult, ToolCallRef, WaitKind
from perdure.domain.provider_events import ToolCallEnd
from perdure.domain.ui import Chunk
from perdure.tools import ClientTool, Tool
from storage.tool_waits import new_approval_id

log = logging.getLogger(__name__)

MadeCall = tuple[str, str, bool]
"""A call the step made: `(tool_call_id, tool_name, approval requested)`."""


async def gate_calls(
    agent: Agent,
    tools: Mapping[str, Tool],
    calls: list[ToolCallEnd],
    context: TurnContext,
) -> tuple[list[MadeCall], list[Chunk]]:
    """The calls, each marked when it needs an approval, and the approval requests to log."""
    made: list[MadeCall] = []
    requests: list[Chunk] = []
    for call in calls:
        gated = await approval_needed(agent, tools.get(call.name), call, context)
        if gated:
            requests.append(approval_request(call.id))
        made.append((call.id, call.name, gated))
    return made, requests


async def approval_needed(
    agent: Agent, definition: Tool | None, call: ToolCallEnd, context: TurnContext
) -> bool:
    """Whether the call waits for a person: fail closed, so a broken or slow `needs_approval`
    function never lets a call run unapproved."""
    if definition is None or definition.needs_approval is False:
        return False
    asked = tool_context(context, call.id)
    try:
        return await call_hook(
            f"needs_approval of {definition.name}",
            lambda: definition.approval_needed(dict(call.arguments), asked),
            limit=agent.hook_timeout.total_seconds(),
        )
    except Exception:
        log.exception("needs_approval of tool %s failed; approval is required", definition.name)
        return True


def approval_request(tool_call_id: str) -> Chunk:
    return {
        "type": "tool-approval-request",
        "approvalId": new_approval_id(),
        "toolCallId": tool_call_id,
    }


@dataclass(frozen=True)
class StepOffer:
    """The tools the step offers the model: the agent's (and its MCP servers'), the client's."""

    tools: Mapping[str, Tool]
    client_tools: dict[str, ClientTool]


@dataclass(frozen=True)
class StepEnd:
    """How the step ended: its calls, the provider's finish reason, the next step's index."""

    calls: list[MadeCall]
    finish_reason: str
    next_step: int
    budget_reached: bool = False


def step_result(agent: Agent, model: str, offer: StepOffer, end: StepEnd) -> ModelStepResult:
    """The step's result: what the workflow runs next (each call, and how it waits)."""
    refs: list[ToolCallRef] = []
    for call_id, name, gated in end.calls:
        wait: WaitKind | None = None
        if gated:
            wait = "approval"
        elif name in offer.client_tools:
            wait = "client"
        sub_agent = agent.sub_agent(name)
        refs.append(
            ToolCallRef(
                tool_call_id=call_id,
                tool_name=name,
                idempotent=offer.tools[name].idempotent if name in offer.tools else True,
                wait=wait,
                sub_agent=sub_agent.agent if sub_agent else None,
            )
        )
    return ModelStepResult(
        finish_reason=end.finish_reason,
        tool_calls=refs,
        max_steps=agent.max_steps,
        next_step=end.next_step,
        model=model,
        budget_reached=end.budget_reached,
    )
