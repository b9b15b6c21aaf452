"""TurnWorkflow: one chat submission, from admission to its closed, stored answer."""

import asyncio
import contextlib

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, RetryState

with workflow.unsafe.imports_passed_through():
    from domain.names import (
        ADMIT_SIGNAL,
        FINISH_TURN_ACTIVITY,
        MODEL_STEP_ACTIVITY,
        RECOVERY_EXHAUSTED,
        RECOVERY_SKIPPED,
        RUN_TOOL_ACTIVITY,
        SKIP_SIGNAL,
        TURN_WORKFLOW,
    )
    from domain.payloads import (
        FinishTurnInput,
        ModelStepInput,
        ModelStepResult,
        Outcome,
        RunToolInput,
        ToolCallRef,
        TurnInput,
        TurnResult,
    )
    from workflows import _policies as policies


FINISH_LOCALLY = "finish-as-local-activity"
"""The patch that made the finish a local activity (`workflow.patched`): part of history."""


def _root_cause(failure: ActivityError) -> BaseException | None:
    cause = failure.cause
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    return cause


def _describe(failure: ActivityError) -> str:
    cause = _root_cause(failure)
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(cause or failure)


def _cancelled(failure: ActivityError) -> bool:
    return isinstance(failure.cause, CancelledError)


_BACKSTOPS = (RetryState.MAXIMUM_ATTEMPTS_REACHED, RetryState.TIMEOUT)


class _Ending:
    """How the turn ends; filled in by whatever stops the agent loop."""

    def __init__(self) -> None:
        self.outcome: Outcome = "completed"
        self.finish_reason: str | None = None
        self.error_text: str | None = None
        self.exhausted = False
        self.persist_partial = True

    def failed(self, failure: ActivityError) -> None:
        if _cancelled(failure):
            self.outcome = "aborted"
            return
        self.outcome, self.error_text = "error", _describe(failure)[:4000]
        cause = _root_cause(failure)
        if isinstance(cause, ApplicationError) and cause.type == RECOVERY_EXHAUSTED:
            self.exhausted = True
        elif failure.retry_state in _BACKSTOPS:
            # Temporal's own bound on a model step was reached before the agent's budget.
            self.exhausted = True
            self.error_text = f"recovery backstop reached: {self.error_text}"[:4000]
        elif isinstance(cause, ApplicationError) and cause.type == RECOVERY_SKIPPED:
            details = cause.details[0] if cause.details else {}
            self.persist_partial = bool(details.get("persist", True))


# Outside the sandbox: it re-imported this module for every turn (~8 % of a busy worker's
# CPU). Determinism is kept by what the module may import (tests/unit/test_layers.py) and by
# replaying committed histories (tests/unit/test_workflow_replay.py).
@workflow.defn(name=TURN_WORKFLOW, sandboxed=False)
class TurnWorkflow:
    def __init__(self) -> None:
        self._admitted = False
        self._skipped = False
        self._steps = 0
        """Model steps in the answer's log: the index of the next one."""

    @workflow.signal(name=ADMIT_SIGNAL)
    def admit(self) -> None:
        self._admitted = True

    @workflow.signal(name=SKIP_SIGNAL)
    def skip(self) -> None:
        """A recovery-boot plan dropped this queued follow-up."""
        self._skipped = True

    @workflow.query
    def steps(self) -> int:
        return self._steps

    @workflow.run
    async def run(self, turn: TurnInput) -> TurnResult:
        ending = _Ending()
        try:
            if not turn.admitted:
                await workflow.wait_condition(lambda: self._admitted or self._skipped)
            if self._skipped and not self._admitted:
                ending.outcome = "skipped"
            else:
                ending.finish_reason = await self._agent_loop(turn)
        except asyncio.CancelledError:
            ending.outcome = "aborted"
        except ActivityError as failure:
            ending.failed(failure)
        await self._finish(turn, ending)
        if ending.outcome == "aborted":
            raise asyncio.CancelledError("stopped by the user")
        return TurnResult(outcome=ending.outcome, steps=self._steps)

    async def _finish(self, turn: TurnInput, ending: _Ending) -> None:
        """Shielded: a stop that lands while the turn finishes must not cancel the activity
        that releases the session (a session claimed forever)."""
        finishing = asyncio.ensure_future(self._run_finish(turn, ending))
        while not finishing.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(finishing)
        finishing.result()

    async def _run_finish(self, turn: TurnInput, ending: _Ending) -> None:
        finish = FinishTurnInput(
            submission_id=turn.submission_id,
            session_id=turn.session_id,
            assistant_message_id=turn.assistant_message_id,
            agent=turn.agent,
            outcome=ending.outcome,
            finish_reason=ending.finish_reason,
            error_text=ending.error_text,
            exhausted=ending.exhausted,
            persist_partial=ending.persist_partial,
        )
        summary = f"finish turn: {'exhausted' if ending.exhausted else ending.outcome}"
        # Since FINISH_LOCALLY a local activity: it runs in this workflow task on this worker,
        # with no activity task and no second workflow task through the server (~20 % of a
        # turn's cost there); a worker that dies meanwhile fails the workflow task and the
        # next worker finishes the turn (finishing is idempotent). Histories recorded before
        # the patch replay with the regular activity they ran.
        execute = (
            workflow.execute_local_activity
            if workflow.patched(FINISH_LOCALLY)
            else workflow.execute_activity
        )
        await execute(
            FINISH_TURN_ACTIVITY,
            finish,
            start_to_close_timeout=policies.FINISH_TIMEOUT,
            retry_policy=policies.FINISH_RETRY,
            summary=summary,
        )

    async def _agent_loop(self, turn: TurnInput) -> str:
        while True:
            result: ModelStepResult = await workflow.execute_activity(
                MODEL_STEP_ACTIVITY,
                ModelStepInput(
                    submission_id=turn.submission_id,
                    session_id=turn.session_id,
                    assistant_message_id=turn.assistant_message_id,
                    agent=turn.agent,
                    step=self._steps,
                ),
                result_type=ModelStepResult,
                start_to_close_timeout=policies.MODEL_STEP_TIMEOUT,
                heartbeat_timeout=policies.HEARTBEAT_TIMEOUT,
                retry_policy=policies.MODEL_RETRY,
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"model step {self._steps}",
            )
            self._steps = result.next_step
            if not result.tool_calls:
                return result.finish_reason
            # On a stop, gather cancels every tool activity and returns only once each has
            # acknowledged (WAIT_CANCELLATION_COMPLETED): nothing writes after `finish`.
            await asyncio.gather(*(self._run_tool(turn, call) for call in result.tool_calls))
            if self._steps >= result.max_steps:
                return "tool-calls"

    async def _run_tool(self, turn: TurnInput, call: ToolCallRef) -> None:
        retry: RetryPolicy = policies.IDEMPOTENT_TOOL_RETRY if call.idempotent else policies.ONCE
        try:
            await workflow.execute_activity(
                RUN_TOOL_ACTIVITY,
                RunToolInput(
                    submission_id=turn.submission_id,
                    session_id=turn.session_id,
                    assistant_message_id=turn.assistant_message_id,
                    agent=turn.agent,
                    tool_call_id=call.tool_call_id,
                ),
                start_to_close_timeout=policies.TOOL_TIMEOUT,
                heartbeat_timeout=policies.HEARTBEAT_TIMEOUT,
                retry_policy=retry,
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"tool {call.tool_name}",
            )
        except ActivityError as failure:
            if _cancelled(failure):
                raise
            # The next model step settles the call as interrupted and tells the model.
            workflow.logger.warning("tool %s failed: %s", call.tool_name, _describe(failure))
