"""The activities of a chat turn: one model step, one tool call, finishing the turn."""

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities._support import heartbeating, run_hook
from activities.chunk_writer import ChunkWriter
from activities.errors import provider_failure
from activities.events import emit
from activities.providers import ModelRequest, Provider, ProviderError, ResumeToken
from activities.recovery_gate import RecoveryGate
from activities.transcript_repair import repair_transcript
from activities.watched_stream import ProviderStalled, StreamTarget, stream_into_log
from domain.continuation import StepState, step_state
from domain.conversation import to_conversation
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
    ToolCallRef,
)
from domain.policy import RecoveryPolicy
from domain.reducer import reduce_chunks
from domain.repair import SETTLED_TOOL_STATES, settled_parts_only
from domain.step_chunks import StepChunker
from domain.turn_chunks import (
    close_open_text,
    closing_chunks,
    pending_tool_calls,
    start_chunk,
    tool_error_chunk,
)
from domain.ui import Chunk, UIMessage
from perdure.agent import Agent, TurnContext
from perdure.agents_registry import AgentRegistry, UnknownAgent
from perdure.recovery import ExhaustedContext, bind_stash, unbind_stash
from perdure.tools import ToolDefinition
from perdure.turn_client import signal_turn, start_turn, turn_state
from storage.bus import ChunkBus
from storage.chunks import append_chunks, load_log
from storage.db import Database
from storage.incidents import load_incident
from storage.messages import active_path
from storage.submissions import finish, get_submission, save_stash, stale_active
from storage.tables import Submission

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
        self._recovery = RecoveryGate(db=db, client=client, task_queue=task_queue)

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
            return await self._model_step(agent, step, submission)
        finally:
            unbind_stash(token)

    async def _model_step(
        self, agent: Agent, step: ModelStepInput, submission: Submission
    ) -> ModelStepResult:
        context = _turn_context(step, agent)
        model = agent.model or self._default_model
        try:
            provider = self._provider_for(model)
        except ValueError as error:
            raise ApplicationError(str(error), type="BadModel", non_retryable=True) from error
        log_so_far = await load_log(self._db, message_id=step.assistant_message_id)
        writer = self._writer(step.assistant_message_id, submission.id)

        def add(chunks: list[Chunk]) -> None:
            writer.add(chunks)
            log_so_far.extend(chunks)

        recovering = activity.info().attempt > 1
        history: list[UIMessage] | None = None
        if recovering:
            start = await self._recovery.begin(
                agent, step, submission, log_so_far, reduce_chunks(log_so_far)
            )
            add([start.notice])
            history = start.history
        if not any(chunk.get("type") == "start" for chunk in log_so_far):
            add([start_chunk(step.assistant_message_id, step.submission_id)])
            await run_hook("on_turn_start", lambda: agent.on_turn_start(context))
        add(
            await repair_transcript(
                agent,
                reduce_chunks(log_so_far),
                db=self._db,
                session_id=step.session_id,
                submission_id=step.submission_id,
            )
        )
        tools = agent.tools()
        state = step_state(reduce_chunks(log_so_far), step.step)
        if state.finished:
            # An earlier attempt streamed the whole step and died before returning it.
            await writer.flush()
            if recovering:
                await self._recovery.completed(submission)
            calls = [
                ToolCallRef(tool_call_id=i, tool_name=n, idempotent=_idempotent(tools, n))
                for i, n in pending_tool_calls(state)
            ]
            return ModelStepResult(
                finish_reason="tool-calls" if calls else "stop",
                tool_calls=calls,
                max_steps=agent.max_steps,
                log_steps=reduce_chunks(log_so_far).steps,
            )
        if state.started and state.has_tool_calls:
            # Its tool calls were settled above; the model goes on in a fresh step.
            add(close_open_text(state) + [{"type": "finish-step"}, {"type": "start-step"}])
            state = step_state(reduce_chunks(log_so_far), step.step)
        elif not state.started:
            add([{"type": "start-step"}])
        log_step = reduce_chunks(log_so_far).steps - 1

        if history is None:
            history = await active_path(self._db, session_id=step.session_id)
        if state.prior_parts:
            history.append(
                UIMessage.model_validate(
                    {
                        "id": step.assistant_message_id,
                        "role": "assistant",
                        "parts": state.prior_parts,
                    }
                )
            )
        cursor = submission.provider_cursor
        resume = (
            ResumeToken(
                response_id=cursor["response_id"], sequence_number=cursor["sequence_number"]
            )
            if provider.supports_resume and cursor and cursor.get("step") == log_step
            else None
        )
        request = ModelRequest(
            model=model.split(":", 1)[-1],
            system=await agent.instructions(context),
            conversation=to_conversation(history),
            tools=[definition.spec() for definition in tools.values()],
            prefill=None if resume else state.prefill,
            resume=resume,
            max_output_tokens=agent.max_output_tokens,
        )
        chunker = await self._stream_step(
            provider, request, writer, state, log_step, agent, step, submission
        )
        writer.add(chunker.close() + [{"type": "finish-step"}])
        await writer.flush()
        if recovering:
            await self._recovery.completed(submission)
        calls = [
            ToolCallRef(
                tool_call_id=call.id,
                tool_name=call.name,
                idempotent=_idempotent(tools, call.name),
            )
            for call in chunker.tool_calls
        ]
        return ModelStepResult(
            finish_reason=chunker.finish.reason if chunker.finish else "other",
            tool_calls=calls,
            max_steps=agent.max_steps,
            log_steps=log_step + 1,
        )

    async def _stream_step(
        self,
        provider: Provider,
        request: ModelRequest,
        writer: ChunkWriter,
        state: StepState,
        log_step: int,
        agent: Agent,
        step: ModelStepInput,
        submission: Submission,
    ) -> StepChunker:
        """Stream the step; fall back from a lost resumable response to a prefill, and from a
        refused prefill to regenerating the step."""
        attempt = activity.info().attempt
        chunker = StepChunker(step.step, attempt=attempt, open_text_id=state.open_text_id)
        stall = agent.recovery.stall_timeout.total_seconds()
        while True:
            target = StreamTarget(writer=writer, chunker=chunker, log_step=log_step)
            try:
                async with heartbeating():
                    await stream_into_log(provider, request, target, stall_timeout=stall)
                return chunker
            except ProviderStalled:
                await writer.flush()
                await emit(
                    self._db,
                    session_id=step.session_id,
                    submission_id=step.submission_id,
                    type="chat.stream.stalled",
                    stallTimeoutSeconds=stall,
                    step=log_step,
                )
                raise
            except ProviderError as error:
                await writer.flush()
                if request.resume is not None and not error.retryable:
                    log.warning("cannot re-attach (%s); continuing by prefill", error)
                    prefill = state.prefill
                    request = request.model_copy(update={"resume": None, "prefill": prefill})
                    continue
                if error.prefill_rejected and request.prefill:
                    writer.add(
                        chunker.close()
                        + [
                            {
                                "type": "data-recovery",
                                "data": {"action": "regenerate"},
                                "transient": True,
                            }
                        ]
                    )
                    request = request.model_copy(update={"prefill": None})
                    chunker = StepChunker(step.step, attempt=attempt, variant="regen")
                    continue
                raise provider_failure(error, label=provider.label) from error
            except BaseException:
                await writer.flush()
                raise

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


def _turn_context(step: ModelStepInput, agent: Agent) -> TurnContext:
    return TurnContext(
        session_id=step.session_id,
        submission_id=step.submission_id,
        assistant_message_id=step.assistant_message_id,
        agent=agent.name,
    )


def _idempotent(tools: dict[str, ToolDefinition], name: str) -> bool:
    return tools[name].idempotent if name in tools else True
