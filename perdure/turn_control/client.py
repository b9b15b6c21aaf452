"""Start, signal and cancel turn workflows: used by the gateway and by the activities."""

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.common import Priority, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from perdure.domain.names import TURN_WORKFLOW, WAIT_ANSWERED_SIGNAL, turn_workflow_id
from perdure.domain.payloads import TurnInput, TurnRef
from perdure.domain.turn_labels import TurnLabels, TurnStatus, message_summary, search_attributes
from perdure.domain.turn_priority import priority_key_of
from perdure.turn_control.fairness_keys import fairness_key
from storage.tables import SubmissionRow

RUN_TIMEOUT = timedelta(days=7)


@dataclass(frozen=True)
class TurnStart:
    """A submission's turn as Temporal starts or signals it, taken from its row once: the
    workflow's input, the labels it is found by, and the status it starts in."""

    input: TurnInput
    labels: TurnLabels
    status: TurnStatus
    priority: Priority
    """Interactive before scheduled; the tenant's fairness key and weight. Its activities and
    sub-agent turns inherit it."""

    @classmethod
    def of(cls, submission: SubmissionRow) -> "TurnStart":
        return cls(
            input=TurnInput(
                turn=TurnRef(
                    submission_id=submission.id,
                    session_id=submission.session_id,
                    assistant_message_id=submission.assistant_message_id,
                    agent=submission.agent,
                ),
                admitted=submission.status == "running",
                admit_at=submission.not_before if submission.status == "pending" else None,
            ),
            labels=TurnLabels(
                # A row a migration found without its session is named by its storage key.
                chat_id=submission.chat_id or submission.session_id,
                tenant_id=submission.tenant_id,
                agent=submission.agent,
                summary=message_summary(submission.user_message),
            ),
            status="running" if submission.status == "running" else "pending",
            priority=Priority(
                priority_key=priority_key_of(submission.user_message),
                fairness_key=fairness_key(submission.tenant_id),
                fairness_weight=submission.fairness_weight,
            ),
        )


def _start_options(turn: TurnStart, task_queue: str) -> dict[str, Any]:
    """What every start of a turn's workflow shares, by gateway or by signal-with-start."""
    return {
        "id": turn_workflow_id(turn.input.turn.submission_id),
        "task_queue": task_queue,
        "id_conflict_policy": WorkflowIDConflictPolicy.USE_EXISTING,
        "memo": {"session_id": turn.input.turn.session_id},
        "static_summary": turn.labels.summary,
        "search_attributes": search_attributes(turn.labels, turn.status),
        "run_timeout": RUN_TIMEOUT,
        "priority": turn.priority,
    }


async def start_turn(client: Client, turn: TurnStart, *, task_queue: str, eager: bool) -> None:
    """Idempotent: attaches to a running workflow and never restarts a finished one."""
    with contextlib.suppress(WorkflowAlreadyStartedError):
        await client.start_workflow(
            TURN_WORKFLOW,
            turn.input,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            request_eager_start=eager,
            **_start_options(turn, task_queue),
        )


async def signal_turn(client: Client, turn: TurnStart, *, task_queue: str, signal: str) -> None:
    """Signal-with-start: reaches the turn even if its gateway never started its workflow."""
    await client.start_workflow(
        TURN_WORKFLOW,
        turn.input,
        start_signal=signal,
        **_start_options(turn, task_queue),
    )


async def signal_answered(client: Client, submission_id: str, wait_ids: list[str]) -> None:
    """Tell a parked turn which of its waits have answers in the store. A turn that has ended
    meanwhile has nothing left to wait for."""
    try:
        await client.get_workflow_handle(turn_workflow_id(submission_id)).signal(
            WAIT_ANSWERED_SIGNAL, wait_ids
        )
    except RPCError as error:
        if error.status != RPCStatusCode.NOT_FOUND:
            raise


async def turn_state(client: Client, submission_id: str) -> str:
    return await workflow_state(client, turn_workflow_id(submission_id))


async def workflow_state(client: Client, workflow_id: str) -> str:
    """`missing`, or the workflow's status name (`RUNNING`, `COMPLETED`, `TERMINATED`, …)."""
    try:
        description = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return "missing"
        raise
    return description.status.name if description.status is not None else "UNKNOWN"


async def cancel_turn(client: Client, submission_id: str) -> None:
    try:
        await client.get_workflow_handle(turn_workflow_id(submission_id)).cancel()
    except RPCError as error:
        if error.status != RPCStatusCode.NOT_FOUND:
            raise


async def wait_turn_ended(client: Client, submission_id: str, *, grace_seconds: float) -> None:
    """Wait (bounded) until the turn's workflow has closed, however it ended."""
    handle = client.get_workflow_handle(turn_workflow_id(submission_id))
    with contextlib.suppress(Exception):
        async with asyncio.timeout(grace_seconds):
            await handle.result()
