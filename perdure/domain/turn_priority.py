"""How Temporal orders a turn's tasks (pure): interactive turns ahead of scheduled prompts and
fibers (task priority), and each tenant's share of a backlogged task queue (fairness).
docs/operations.md#priority-and-fairness."""

from typing import Any

INTERACTIVE_PRIORITY = 2
"""A person's message (and the sub-agent turns its tools open: children inherit it)."""
BACKGROUND_PRIORITY = 4
"""Scheduled prompts and fibers: nobody watches a spinner for them. Temporal's keys run from
1 (first) to 5, 3 being the default of a task that sets none."""
MIN_FAIRNESS_WEIGHT = 0.001
MAX_FAIRNESS_WEIGHT = 1000.0
"""Temporal's range for a fairness weight."""
SCHEDULED_MESSAGE_SOURCE = "schedule"
"""`metadata.source` of the user message a scheduled prompt's occurrence sends."""


def priority_key_of(user_message: dict[str, Any]) -> int:
    """A turn's priority, from the user message it answers."""
    metadata = user_message.get("metadata")
    scheduled = isinstance(metadata, dict) and metadata.get("source") == SCHEDULED_MESSAGE_SOURCE
    return BACKGROUND_PRIORITY if scheduled else INTERACTIVE_PRIORITY


def checked_weight(weight: float) -> float:
    if not MIN_FAIRNESS_WEIGHT <= weight <= MAX_FAIRNESS_WEIGHT:
        raise ValueError(
            f"a fairness weight is from {MIN_FAIRNESS_WEIGHT} to {MAX_FAIRNESS_WEIGHT:g}"
        )
    return weight
