"""The turn workflow honours a stop whose cancellation reaches a step that completes anyway.

The root cause of the stops lost under load: the SDK hands the workflow an activity's result
when the activity completes after its cancellation was requested (a step that finishes before
its next heartbeat never learns of it). The workflow then went on as if nothing was asked.
These tests run the real `TurnWorkflow` with its activities replaced under their real names,
so the moment of the cancellation is exact.
"""

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from perdure.domain.names import (
    FINISH_TURN_ACTIVITY,
    MODEL_STEP_ACTIVITY,
    RUN_TOOL_ACTIVITY,
    TURN_STOPPED,
    TURN_WORKFLOW,
)
from perdure.domain.payloads import (
    FinishTurnInput,
    FinishTurnResult,
    ModelStepInput,
    ModelStepResult,
    RunToolInput,
    ToolCallRef,
    TurnInput,
    TurnRef,
)
from workflows.turn import TurnWorkflow


@dataclass
class Steps:
    """Stand-ins for the turn's activities: each model step waits until `release` is set,
    never heartbeating (so it never learns of a cancellation), and returns `result`."""

    results: list[ModelStepResult]
    release: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    model_steps: list[int] = field(default_factory=list)
    tools_run: list[str] = field(default_factory=list)
    finishes: list[FinishTurnInput] = field(default_factory=list)
    refuse_tools: bool = False

    def activities(self) -> list[Callable[..., object]]:
        @activity.defn(name=MODEL_STEP_ACTIVITY)
        async def model_step(step: ModelStepInput) -> ModelStepResult:
            self.model_steps.append(step.step)
            self.started.set()
            await self.release.wait()
            return self.results[len(self.model_steps) - 1]

        @activity.defn(name=RUN_TOOL_ACTIVITY)
        async def run_tool(call: RunToolInput) -> None:
            if self.refuse_tools:
                raise ApplicationError("stopped", type=TURN_STOPPED, non_retryable=True)
            self.tools_run.append(call.tool_call_id)

        @activity.defn(name=FINISH_TURN_ACTIVITY)
        async def finish_turn(turn: FinishTurnInput) -> FinishTurnResult:
            self.finishes.append(turn)
            return FinishTurnResult(outcome="error" if turn.exhausted else turn.outcome)

        return [model_step, run_tool, finish_turn]


def tool_step(step: int) -> ModelStepResult:
    call = ToolCallRef(tool_call_id=f"call-{step}", tool_name="lookup")
    return ModelStepResult(
        finish_reason="tool-calls", tool_calls=[call], max_steps=10, next_step=step + 1
    )


def last_step(step: int) -> ModelStepResult:
    return ModelStepResult(finish_reason="stop", max_steps=10, next_step=step + 1)


@pytest.fixture
async def worker_for(
    temporal_env: WorkflowEnvironment,
) -> AsyncIterator[Callable[[Steps], "asyncio.Future[tuple[Client, str]]"]]:
    workers: list[Worker] = []
    runs: list[asyncio.Task[None]] = []

    async def start(steps: Steps) -> tuple[Client, str]:
        queue = f"stops-{uuid.uuid4().hex[:8]}"
        worker = Worker(
            temporal_env.client,
            task_queue=queue,
            workflows=[TurnWorkflow],
            activities=steps.activities(),
        )
        workers.append(worker)
        runs.append(asyncio.create_task(worker.run()))
        return temporal_env.client, queue

    yield start  # type: ignore[misc]
    for worker in workers:
        await worker.shutdown()
    for run in runs:
        run.cancel()


async def start_turn(client: Client, queue: str) -> WorkflowHandle[TurnWorkflow, object]:
    submission = uuid.uuid4().hex
    return await client.start_workflow(
        TURN_WORKFLOW,
        TurnInput(
            turn=TurnRef(
                submission_id=submission,
                session_id=f"session-{submission[:8]}",
                assistant_message_id=f"msg_{submission[:24]}",
                agent="default",
            ),
            admitted=True,
        ),
        id=f"turn-{submission}",
        task_queue=queue,
    )


async def cancel_recorded(handle: WorkflowHandle[TurnWorkflow, object]) -> None:
    """Until the workflow has processed the cancellation (its activity cancel is in history)."""
    for _ in range(200):
        events = [event.event_type async for event in handle.fetch_history_events()]
        if EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in events:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the workflow never asked its model step to cancel")


async def stopped_while_the_step_completes(
    handle: WorkflowHandle[TurnWorkflow, object], steps: Steps
) -> None:
    await asyncio.wait_for(steps.started.wait(), 10)
    await handle.cancel()
    await cancel_recorded(handle)
    steps.release.set()  # the step completes after all, with its result


async def ended_outcome(steps: Steps) -> str:
    for _ in range(200):
        if steps.finishes:
            return steps.finishes[-1].outcome
        await asyncio.sleep(0.05)
    raise AssertionError("the turn never finished")


async def test_a_stop_reaching_a_model_step_that_completes_anyway_runs_no_tool_and_aborts(
    worker_for: Callable[[Steps], "asyncio.Future[tuple[Client, str]]"],
) -> None:
    steps = Steps(results=[tool_step(0), last_step(1)])
    client, queue = await worker_for(steps)
    handle = await start_turn(client, queue)

    await stopped_while_the_step_completes(handle, steps)

    assert await ended_outcome(steps) == "aborted"
    assert steps.tools_run == []
    assert steps.model_steps == [0]


async def test_a_stop_reaching_the_last_model_step_as_it_completes_ends_the_turn_aborted(
    worker_for: Callable[[Steps], "asyncio.Future[tuple[Client, str]]"],
) -> None:
    steps = Steps(results=[last_step(0)])
    client, queue = await worker_for(steps)
    handle = await start_turn(client, queue)

    await stopped_while_the_step_completes(handle, steps)

    assert await ended_outcome(steps) == "aborted"


async def test_a_tool_refused_because_of_a_recorded_stop_ends_the_turn_aborted(
    worker_for: Callable[[Steps], "asyncio.Future[tuple[Client, str]]"],
) -> None:
    steps = Steps(results=[tool_step(0), last_step(1)], refuse_tools=True)
    steps.release.set()
    client, queue = await worker_for(steps)
    handle = await start_turn(client, queue)

    result = await handle.result()

    assert await ended_outcome(steps) == "aborted"
    assert steps.model_steps == [0]
    assert result["outcome"] == "aborted"  # type: ignore[index]
