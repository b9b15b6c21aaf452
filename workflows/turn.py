"""TurnWorkflow: one chat submission, from admission to its closed, stored answer."""

import asyncio

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from domain.names import (
        ADMIT_SIGNAL,
        FINISH_TURN_ACTIVITY,
        MODEL_STEP_ACTIVITY,
        RUN_TOOL_ACTIVITY,
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


def _describe(failure: ActivityError) -> str:
    cause = failure.cause
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(cause or failure)


def _cancelled(failure: ActivityError) -> bool:
    return isinstance(failure.cause, CancelledError)


@workflow.defn(name=TURN_WORKFLOW)
class TurnWorkflow:
    def __init__(self) -> None:
        self._admitted = False
        self._steps = 0

    @workflow.signal(name=ADMIT_SIGNAL)
    def admit(self) -> None:
        self._admitted = True

    @workflow.query
    def steps(self) -> int:
        return self._steps

    @workflow.run
    async def run(self, turn: TurnInput) -> TurnResult:
        outcome: Outcome = "completed"
        finish_reason: str | None = None
        error_text: str | None = None
        try:
            if not turn.admitted:
                await workflow.wait_condition(lambda: self._admitted)
            finish_reason = await self._agent_loop(turn)
        except asyncio.CancelledError:
            outcome = "aborted"
        except ActivityError as failure:
            if _cancelled(failure):
                outcome = "aborted"
            else:
                outcome, error_text = "error", _describe(failure)
        await workflow.execute_activity(
            FINISH_TURN_ACTIVITY,
            FinishTurnInput(
                submission_id=turn.submission_id,
                session_id=turn.session_id,
                assistant_message_id=turn.assistant_message_id,
                agent=turn.agent,
                outcome=outcome,
                finish_reason=finish_reason,
                error_text=error_text[:4000] if error_text else None,
            ),
            start_to_close_timeout=policies.FINISH_TIMEOUT,
            retry_policy=policies.FINISH_RETRY,
            summary=f"finish turn: {outcome}",
        )
        if outcome == "aborted":
            raise asyncio.CancelledError("stopped by the user")
        return TurnResult(outcome=outcome, steps=self._steps)

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
            self._steps += 1
            if not result.tool_calls:
                return result.finish_reason
            await asyncio.gather(*(self._run_tool(turn, call) for call in result.tool_calls))
            if self._steps >= result.max_steps:
                return "tool-calls"

    async def _run_tool(self, turn: TurnInput, call: ToolCallRef) -> None:
        retry: RetryPolicy = policies.IDEMPOTENT_TOOL_RETRY if call.idempotent else policies.ONCE
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
