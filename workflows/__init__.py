"""Deterministic orchestration. Imports only `domain` and the Temporal SDK."""

from workflows.reconciler import ReconcilerWorkflow
from workflows.turn import TurnWorkflow

__all__ = ["ReconcilerWorkflow", "TurnWorkflow"]
