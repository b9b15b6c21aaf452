"""FiberWorkflow: one durable fiber, from its first run through its recoveries to its end."""

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, RetryState

with workflow.unsafe.imports_passed_through():
    from perdure.domain.fiber_payloads import (
        FiberInput,
        FiberOutcome,
        FiberResult,
        FinishFiberInput,
        RunFiberInput,
    )
    from perdure.domain.names import (
        FIBER_FAILED,
        FIBER_WORKFLOW,
        FINISH_FIBER_ACTIVITY,
        RUN_FIBER_ACTIVITY,
    )
    from workflows._policies import HEARTBEAT_TIMEOUT


FINISH_TIMEOUT_BEYOND_HOOK = timedelta(seconds=30)
FINISH_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=20,
)
"""Settling is idempotent; a store down for minutes leaves the fiber to the workflow's end."""


def run_retry(max_attempts: int) -> RetryPolicy:
    """Retries are recoveries after a crash (a dead worker misses its heartbeats): bounded by
    the fiber's attempts, and a short first interval keeps a recovery near the heartbeat
    timeout. A fiber that fails on its own is settled by its activity and never retried."""
    return RetryPolicy(
        initial_interval=timedelta(milliseconds=200),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=10),
        maximum_attempts=max_attempts,
        non_retryable_error_types=[FIBER_FAILED],
    )


def _root_cause(failure: ActivityError) -> BaseException | None:
    cause = failure.cause
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    return cause


def _ending(failure: ActivityError) -> tuple[FiberOutcome, str | None, str | None]:
    """(outcome, error text, reason) of a run that did not return."""
    cause = _root_cause(failure)
    if isinstance(cause, CancelledError):
        return "cancelled", None, None
    text = cause.message if isinstance(cause, ApplicationError) else str(cause or failure)
    if failure.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED:
        return "error", f"gave up after its last allowed attempt: {text}"[:4000], "attempts"
    if failure.retry_state == RetryState.TIMEOUT:
        return "error", f"ran out of time: {text}"[:4000], "timeout"
    return "error", text[:4000], "failed"


# Outside the sandbox, as TurnWorkflow: what this module may import is guarded by
# tests/unit/test_layers.py.
@workflow.defn(name=FIBER_WORKFLOW, sandboxed=False)
class FiberWorkflow:
    @workflow.run
    async def run(self, fiber: FiberInput) -> FiberResult:
        kind = fiber.kind
        outcome: FiberOutcome = "completed"
        error_text: str | None = None
        reason: str | None = None
        try:
            await workflow.execute_activity(
                RUN_FIBER_ACTIVITY,
                RunFiberInput(fiber_id=fiber.fiber_id, agent=kind.agent, name=kind.name),
                start_to_close_timeout=timedelta(seconds=kind.max_run_seconds),
                # A fiber is recovered until its maximum age; the last attempt may run its
                # full time: nothing waits for a worker beyond that.
                schedule_to_close_timeout=timedelta(
                    seconds=kind.max_age_seconds + kind.max_run_seconds
                ),
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=run_retry(kind.max_attempts),
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"fiber {kind.agent}.{kind.name}",
            )
        except asyncio.CancelledError:
            outcome = "cancelled"
        except ActivityError as failure:
            outcome, error_text, reason = _ending(failure)
        finish = FinishFiberInput(
            fiber_id=fiber.fiber_id,
            agent=kind.agent,
            name=kind.name,
            outcome=outcome,
            error_text=error_text,
            reason=reason,
        )
        result = await self._finish(finish, timedelta(seconds=kind.hook_timeout_seconds))
        if result.status == "cancelled":
            raise asyncio.CancelledError("the fiber was cancelled")
        return result

    async def _finish(self, finish: FinishFiberInput, hook_timeout: timedelta) -> FiberResult:
        """Shielded: a cancel that lands while the fiber finishes must not leave it unsettled."""
        finishing = asyncio.ensure_future(
            workflow.execute_activity(
                FINISH_FIBER_ACTIVITY,
                finish,
                result_type=FiberResult,
                start_to_close_timeout=hook_timeout + FINISH_TIMEOUT_BEYOND_HOOK,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=FINISH_RETRY,
                summary=f"finish fiber: {finish.outcome}",
            )
        )
        while not finishing.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(finishing)
        result: FiberResult = finishing.result()
        return result
