"""Perdure: durable AI-chat agents on Temporal."""

from domain.policy import RecoveryPolicy
from domain.recovery_boot import RecoveryBoot
from perdure.agent import Agent, TurnContext
from perdure.recovery import (
    ChatRecoveryContext,
    ExhaustedContext,
    RecoveryBootContext,
    RecoveryOptions,
    stash,
)
from perdure.tools import ToolContext, tool

__all__ = [
    "Agent",
    "ChatRecoveryContext",
    "ExhaustedContext",
    "RecoveryBoot",
    "RecoveryBootContext",
    "RecoveryOptions",
    "RecoveryPolicy",
    "ToolContext",
    "TurnContext",
    "stash",
    "tool",
]
