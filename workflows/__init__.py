"""Deterministic orchestration. Imports only `domain` and the Temporal SDK."""

from workflows.turn import TurnWorkflow

__all__ = ["TurnWorkflow"]
