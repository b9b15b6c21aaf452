"""Perdure: durable AI-chat agents on Temporal."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perdure.agent import Agent, TurnContext
    from perdure.domain.policy import RecoveryPolicy
    from perdure.domain.recovery_boot import RecoveryBoot
    from perdure.fibers import (
        FiberCancelled,
        FiberContext,
        FiberRecovery,
        FiberStart,
        FiberState,
        fiber,
        run_fiber,
        start_fiber,
    )
    from perdure.mcp_servers import McpServer
    from perdure.recovery import (
        ChatRecoveryContext,
        ExhaustedContext,
        RecoveryBootContext,
        RecoveryOptions,
        stash,
    )
    from perdure.schedules import PromptSchedule
    from perdure.sub_agents import SubAgent
    from perdure.tools import ClientTool, ToolContext, tool

_EXPORTS = {
    "Agent": "perdure.agent",
    "TurnContext": "perdure.agent",
    "RecoveryPolicy": "perdure.domain.policy",
    "RecoveryBoot": "perdure.domain.recovery_boot",
    "FiberCancelled": "perdure.fibers",
    "FiberContext": "perdure.fibers",
    "FiberRecovery": "perdure.fibers",
    "FiberStart": "perdure.fibers",
    "FiberState": "perdure.fibers",
    "fiber": "perdure.fibers",
    "run_fiber": "perdure.fibers",
    "start_fiber": "perdure.fibers",
    "McpServer": "perdure.mcp_servers",
    "ChatRecoveryContext": "perdure.recovery",
    "ExhaustedContext": "perdure.recovery",
    "RecoveryBootContext": "perdure.recovery",
    "RecoveryOptions": "perdure.recovery",
    "stash": "perdure.recovery",
    "PromptSchedule": "perdure.schedules",
    "SubAgent": "perdure.sub_agents",
    "ClientTool": "perdure.tools",
    "ToolContext": "perdure.tools",
    "tool": "perdure.tools",
}
"""Where each public name lives. They are imported at first use: `perdure chat` and the other
client commands load this package but none of the agent API (a third of their start)."""


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'perdure' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "McpServer",
    "Agent",
    "ChatRecoveryContext",
    "ClientTool",
    "ExhaustedContext",
    "FiberRecovery",
    "FiberCancelled",
    "FiberContext",
    "FiberStart",
    "FiberState",
    "RecoveryBoot",
    "RecoveryBootContext",
    "RecoveryOptions",
    "PromptSchedule",
    "RecoveryPolicy",
    "SubAgent",
    "ToolContext",
    "TurnContext",
    "fiber",
    "run_fiber",
    "start_fiber",
    "stash",
    "tool",
]
