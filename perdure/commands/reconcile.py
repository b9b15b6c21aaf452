"""`perdure reconcile`: run the reconciler once now, and print what it did.

The reconciler runs by itself every two minutes (its Temporal Schedule); an operator who has just
terminated a turn by hand, or lowered `PERDURE_CHUNK_RETENTION_HOURS`, need not wait for it. The
run is the same `ReconcilerWorkflow` the schedule starts, on the configured task queue, so a
worker of that queue carries it out; two operators running it at once share one run.
"""

import argparse
import json
from datetime import timedelta

from temporalio.client import WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import TimeoutError as TimeoutError_

from perdure.domain.names import RECONCILER_WORKFLOW, reconciler_schedule_id
from perdure.domain.payloads import ReconcileInput, ReconcileReport
from perdure.runtime.services import connect_temporal
from perdure.runtime.settings import Settings

RUN_TIMEOUT = timedelta(minutes=5)
"""The scheduled runs' own bound, and the command's default: a run that has not ended by then
is given up."""


def run_seconds(text: str) -> float:
    """`--timeout`: seconds, more than 0 and at most a day."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < seconds <= 86_400:
        raise argparse.ArgumentTypeError("seconds between 0 (excluded) and 86400")
    return seconds


class ReconcileFailed(RuntimeError):
    """The run did not end with a report: no worker took it in time, or it failed."""


async def reconcile_now(settings: Settings, *, within_seconds: float) -> str:
    """The run's report as indented JSON, once a worker has run it; `ReconcileFailed` when the
    run failed or did not end within `within_seconds` (Temporal then ends it)."""
    client = await connect_temporal(settings)
    task_queue = settings.task_queue
    try:
        report: ReconcileReport = await client.execute_workflow(
            RECONCILER_WORKFLOW,
            ReconcileInput(),
            id=f"{reconciler_schedule_id(task_queue)}-now",
            task_queue=task_queue,
            result_type=ReconcileReport,
            execution_timeout=timedelta(seconds=within_seconds),
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary="reconcile now (perdure reconcile)",
        )
    except WorkflowFailureError as error:
        if isinstance(error.cause, TimeoutError_):
            raise ReconcileFailed(
                f"the reconciler run did not end within {within_seconds:g} s: is a worker of task "
                f"queue {task_queue!r} running?"
            ) from None
        raise ReconcileFailed(f"the reconciler run failed: {error.cause or error}") from None
    return json.dumps(report.model_dump(), indent=2)
