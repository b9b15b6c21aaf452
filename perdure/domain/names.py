"""Stable names: task queue, workflow ids, activity names.

Activity and workflow names are recorded in Temporal history; renaming one breaks replay of
running turns, so change them only with a versioning plan.
"""

from typing import Final

DEFAULT_TASK_QUEUE: Final = "perdure"

TURN_WORKFLOW: Final = "TurnWorkflow"
ADMIT_SIGNAL: Final = "admit"
SKIP_SIGNAL: Final = "skip"
SUB_TURN_RESUMED_SIGNAL: Final = "sub-turn-resumed"
"""A sub-agent's turn tells its parent it went on after waiting (carries its submission id)."""
WAIT_ANSWERED_SIGNAL: Final = "tool-wait-answered"
"""Carries the ids of answered tool waits (approvals, client outputs): never the answers."""

MODEL_STEP_ACTIVITY: Final = "perdure.model_step"
RUN_TOOL_ACTIVITY: Final = "perdure.run_tool"
FINISH_TURN_ACTIVITY: Final = "perdure.finish_turn"
PARK_TURN_ACTIVITY: Final = "perdure.park_turn"
RESUME_TURN_ACTIVITY: Final = "perdure.resume_turn"
ADMIT_DEBOUNCED_ACTIVITY: Final = "perdure.admit_debounced"
START_SUB_TURN_ACTIVITY: Final = "perdure.start_sub_turn"
RELAY_SUB_TURN_ACTIVITY: Final = "perdure.relay_sub_turn"

RECONCILER_WORKFLOW: Final = "ReconcilerWorkflow"
RECONCILE_ACTIVITY: Final = "perdure.reconcile"


def turn_workflow_id(submission_id: str) -> str:
    return f"turn-{submission_id}"


# ApplicationError types the workflow tells apart (also shown in the Temporal UI).
RECOVERY_EXHAUSTED: Final = "RecoveryExhausted"
RECOVERY_SKIPPED: Final = "RecoverySkipped"
PROVIDER_STALLED: Final = "ProviderStalled"
HOOK_TIMED_OUT: Final = "HookTimedOut"
SUPERSEDED: Final = "AttemptSuperseded"
TURN_STOPPED: Final = "TurnStopped"
"""A step refused to start: a stop is recorded in the store (storage/stops.py)."""


def reconciler_schedule_id(task_queue: str) -> str:
    return f"perdure-reconciler-{task_queue}"


# Scheduled prompts (docs/schedules.md).
SCHEDULED_PROMPT_WORKFLOW: Final = "ScheduledPromptWorkflow"
FIRE_SCHEDULE_ACTIVITY: Final = "perdure.fire_schedule"


def prompt_schedule_id(task_queue: str, tenant_id: str, schedule_id: str) -> str:
    """The Temporal Schedule of a scheduled prompt. Neither a tenant nor a schedule id may
    contain `:`, so two schedules never share one; the task queue keeps deployments that
    share a namespace apart, as the reconciler's does."""
    return f"perdure-schedule:{task_queue}:{tenant_id}:{schedule_id}"


FIBER_WORKFLOW: Final = "FiberWorkflow"
RUN_FIBER_ACTIVITY: Final = "perdure.run_fiber"
FINISH_FIBER_ACTIVITY: Final = "perdure.finish_fiber"
FIBER_FAILED: Final = "FiberFailed"
"""The fiber ended in error (its function raised, its payload was invalid, it was too old to
recover…): settled in the store already, never retried."""


def fiber_workflow_id(fiber_id: str) -> str:
    return f"fiber-{fiber_id}"
