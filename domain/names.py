"""Stable names: task queue, workflow ids, activity names.

Activity and workflow names are recorded in Temporal history; renaming one breaks replay of
running turns, so change them only with a versioning plan.
"""

from typing import Final

DEFAULT_TASK_QUEUE: Final = "perdure"

TURN_WORKFLOW: Final = "TurnWorkflow"
ADMIT_SIGNAL: Final = "admit"
SKIP_SIGNAL: Final = "skip"

MODEL_STEP_ACTIVITY: Final = "perdure.model_step"
RUN_TOOL_ACTIVITY: Final = "perdure.run_tool"
FINISH_TURN_ACTIVITY: Final = "perdure.finish_turn"

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


def reconciler_schedule_id(task_queue: str) -> str:
    return f"perdure-reconciler-{task_queue}"
