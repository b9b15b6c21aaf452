"""The activities of a chat turn: one model step, one tool call, finishing the turn."""

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities._support import heartbeating, run_hook
from activities.chunk_writer import ChunkWriter
from activities.events import emit
from activities.model_step import ModelStep
from activities.providers import Provider
from activities.recovery_gate import RecoveryGate
from domain.names import (
    ADMIT_SIGNAL,
    FINISH_TURN_ACTIVITY,
    MODEL_STEP_ACTIVITY,
    RECONCILE_ACTIVITY,
    RUN_TOOL_ACTIVITY,
)
from domain.payloads import (
    FinishTurnInput,
    ModelStepInput,
    ModelStepResult,
    ReconcileInput,
    ReconcileReport,
    RunToolInput,
)
from domain.policy import RecoveryPolicy
from domain.reducer import reduce_chunks
from domain.repair import SETTLED_TOOL_STATES, settled_parts_only
from domain.turn_chunks import (
    closing_chunks,
    tool_error_chunk,
)
from domain.ui import Chunk
from perdure.agent import Agent, TurnContext
from perdure.agents_registry import AgentRegistry, UnknownAgent
from perdure.recovery import ExhaustedContext, bind_stash, unbind_stash
from perdure.tools import ToolDefinition
from storage.bus import ChunkBus
from storage.chunks import append_chunks, load_log
from storage.db import Database
from storage.incidents import load_incident
from storage.submissions import finish, get_submission, save_stash, stale_active
from storage.tables import Submission
from turn_control.client import signal_turn, start_turn, turn_state

log = logging.getLogger(__name__)


class TurnActivities:
    def __init__(
        self,
        *,
        db: Database,
        bus: ChunkBus,
        agents: AgentRegistry,
        default_model: str,
        client: Client,
        task_queue: str,
        provider_for: Callable[[str], Provider],
    ) -> None:
        self._db = db
        self._bus = bus
        self._agents = agents
        self._default_model = default_model
        self._client = client
        self._task_queue = task_queue
        self._provider_for = provider_for
        self._model_step = ModelStep(
            db=db,
            recovery=RecoveryGate(db=db, client=client, task_queue=task_queue),
            default_model=default_model,
            provider_for=provider_for,
        )

    def _agent(self, name: str) -> Agent:
        try:
            return self._agents.resolve(name)
        except UnknownAgent as error:
            raise ApplicationError(str(error), type="UnknownAgent", non_retryable=True) from error

    def _stash_writer(self, submission_id: str) -> Callable[[Any], Awaitable[None]]:
        async def write(data: Any) -> None:
            await save_stash(self._db, submission_id=submission_id, data=data)

        return write

    def _writer(self, message_id: str, submission_id: str) -> ChunkWriter:
        return ChunkWriter(
            self._db,
            self._bus,
            message_id=message_id,
            attempt=activity.info().attempt,
            submission_id=submission_id,
        )

    @activity.defn(name=MODEL_STEP_ACTIVITY)
    async def model_step(self, step: ModelStepInput) -> ModelStepResult:
        agent = self._agent(step.agent)
        submission = await get_submission(self._db, step.submission_id)
        if submission is None:
            raise ApplicationError(f"submission {step.submission_id} is gone", non_retryable=True)
        token = bind_stash(self._stash_writer(submission.id))
        try:
            writer = self._writer(step.assistant_message_id, submission.id)
            return await self._model_step.run(agent, step, submission, writer)
        finally:
            unbind_stash(token)

    @activity.defn(name=RUN_TOOL_ACTIVITY)
    async def run_tool(self, call: RunToolInput) -> None:
        agent = self._agent(call.agent)
        reduction = reduce_chunks(await load_log(self._db, message_id=call.assistant_message_id))
        part = reduction.tool_part(call.tool_call_id)
        if part is None:
            raise ApplicationError(
                f"tool call {call.tool_call_id} is not in the log", non_retryable=True
            )
        if part["state"] in SETTLED_TOOL_STATES:
            return  # settled by an earlier attempt: never run a tool twice for one call
        name = part["type"].removeprefix("tool-")
        definition = agent.tools().get(name)
        if definition is not None and not definition.idempotent and activity.info().attempt > 1:
            raise ApplicationError(
                f"tool {name} is not idempotent and an earlier attempt may have run it; "
                "the call will be reported to the model as interrupted",
                type="NonIdempotentToolInterrupted",
                non_retryable=True,
            )
        token = bind_stash(self._stash_writer(call.submission_id))
        try:
            chunk = await self._invoke(agent, definition, name, part, call.tool_call_id)
        finally:
            unbind_stash(token)
        await append_chunks(
            self._db,
            message_id=call.assistant_message_id,
            chunks=[chunk],
            attempt=activity.info().attempt,
        )
        self._bus.publish(call.assistant_message_id)

    async def _invoke(
        self,
        agent: Agent,
        definition: ToolDefinition | None,
        name: str,
        part: dict[str, Any],
        tool_call_id: str,
    ) -> Chunk:
        if definition is None:
            return tool_error_chunk(tool_call_id, f"unknown tool {name!r}")
        raw_input = part.get("input")
        arguments: dict[str, Any] = raw_input if isinstance(raw_input, dict) else {}
        try:
            async with heartbeating():
                output = await definition.invoke(agent, arguments)
        except Exception as error:  # noqa: BLE001 - a tool's failure is told to the model
            return tool_error_chunk(tool_call_id, f"{type(error).__name__}: {error}")
        return {"type": "tool-output-available", "toolCallId": tool_call_id, "output": output}

    @activity.defn(name=FINISH_TURN_ACTIVITY)
    async def finish_turn(self, turn: FinishTurnInput) -> None:
        await self._finish(turn, attempt=activity.info().attempt)

    @activity.defn(name=RECONCILE_ACTIVITY)
    async def reconcile(self, request: ReconcileInput) -> ReconcileReport:
        """Start the workflow of an active submission that has none (its gateway died between
        recording it and starting it); close one whose workflow ended without finishing it
        (terminated by an operator, say), so its session is released."""
        report = ReconcileReport()
        for submission in await stale_active(self._db, older_than=request.older_than_seconds):
            state = await turn_state(self._client, submission.id)
            if state == "missing":
                await start_turn(self._client, submission, task_queue=self._task_queue, eager=False)
                report.started.append(submission.id)
            elif state != "RUNNING":
                await self._finish(
                    FinishTurnInput(
                        submission_id=submission.id,
                        session_id=submission.session_id,
                        assistant_message_id=submission.assistant_message_id,
                        agent=submission.agent,
                        outcome="error",
                        error_text=f"The turn's workflow ended ({state}) before finishing it.",
                    ),
                    attempt=1,
                )
                report.closed.append(submission.id)
            else:
                continue
            await emit(
                self._db,
                session_id=submission.session_id,
                submission_id=submission.id,
                type="submission.reconciled",
                action="started" if state == "missing" else "closed",
                workflowState=state,
            )
        return report

    async def _finish(self, turn: FinishTurnInput, *, attempt: int) -> None:
        message_id = turn.assistant_message_id
        agent = self._agents.resolve(turn.agent) if turn.agent in self._agents.names() else None
        terminal_message = (agent.recovery if agent else RecoveryPolicy()).terminal_message
        logged = await load_log(self._db, message_id=message_id)
        closing = closing_chunks(logged, turn, terminal_message)
        stored = reduce_chunks(logged + closing)
        if not turn.persist_partial:
            stored.parts = settled_parts_only(stored.parts)
        if closing and turn.exhausted:
            # Before the terminal answer is visible, as the seeds order it. At least once: a
            # crash between here and the commit below calls it again on the retry.
            await self._exhausted(agent, turn, reduce_chunks(logged).text(), terminal_message)
        following = await finish(
            self._db,
            submission_id=turn.submission_id,
            outcome="error" if turn.exhausted else turn.outcome,
            closing=closing,
            assistant=stored,
            error=turn.error_text,
            attempt=attempt,
        )
        self._bus.publish(message_id)
        if closing and agent is not None:
            context = TurnContext(
                session_id=turn.session_id,
                submission_id=turn.submission_id,
                assistant_message_id=message_id,
                agent=agent.name,
            )
            await run_hook("on_turn_end", lambda: agent.on_turn_end(context, turn.outcome))
        if following is not None:
            await self._admit(following)

    async def _exhausted(
        self, agent: Agent | None, turn: FinishTurnInput, partial_text: str, terminal_message: str
    ) -> None:
        incident = await load_incident(self._db, submission_id=turn.submission_id)
        reason = turn.error_text or "recovery exhausted"
        await emit(
            self._db,
            session_id=turn.session_id,
            submission_id=turn.submission_id,
            type="chat.recovery.exhausted",
            reason=reason,
        )
        if agent is None:
            return
        context = ExhaustedContext(
            incident_id=incident.incident_id if incident else turn.submission_id,
            request_id=turn.submission_id,
            stream_id=turn.assistant_message_id,
            session_id=turn.session_id,
            reason=reason,
            partial_text=partial_text,
            terminal_message=terminal_message,
        )
        await run_hook("on_exhausted", lambda: agent.on_exhausted(context))

    async def _admit(self, submission: Submission) -> None:
        await signal_turn(
            self._client, submission, task_queue=self._task_queue, signal=ADMIT_SIGNAL
        )
