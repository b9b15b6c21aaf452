"""Perdure: durable AI-chat agents on Temporal."""

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
