"""Perdure: durable AI-chat agents on Temporal."""

from domain.policy import RecoveryPolicy
from perdure.agent import Agent, TurnContext
from perdure.tools import tool

__all__ = ["Agent", "RecoveryPolicy", "TurnContext", "tool"]
