"""The activities of a chat turn: one model step, one tool call, finishing the turn."""

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError

from activities.chunk_writer import ChunkWriter
from activities.errors import provider_failure
from activities.providers import ModelRequest, Provider, ProviderError
from domain.continuation import step_state
from domain.conversation import to_conversation
from domain.names import (
    ADMIT_SIGNAL,
    FINISH_TURN_ACTIVITY,
    MODEL_STEP_ACTIVITY,
    RUN_TOOL_ACTIVITY,
    TURN_WORKFLOW,
    turn_workflow_id,
)
from domain.payloads import (
    FinishTurnInput,
    ModelStepInput,
    ModelStepResult,
    RunToolInput,
    ToolCallRef,
    TurnInput,
)
from domain.reducer import reduce_chunks
from domain.step_chunks import StepChunker
from domain.ui import Chunk, UIMessage
from perdure.agent import Agent, TurnContext
from perdure.agents_registry import AgentRegistry, UnknownAgent
from storage.bus import ChunkBus
from storage.chunks import append_chunks, load_log
from storage.db import Database
from storage.messages import active_path
from storage.submissions import finish
from storage.tables import Submission

log = logging.getLogger(__name__)

HEARTBEAT_EVERY = 1.0
"""Seconds between liveness heartbeats while a provider or a tool is quiet."""


@asynccontextmanager
async def _heartbeating() -> AsyncIterator[None]:
    """Keep heartbeating while the body waits, so a live worker is never taken for dead and
    cancellation (delivered with heartbeat responses) reaches the activity promptly."""

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(HEARTBEAT_EVERY)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


async def _run_hook(name: str, hook: Callable[[], Awaitable[None]]) -> None:
    try:
        await hook()
    except Exception:
        log.exception("agent hook %s failed; the turn goes on", name)


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

    def _agent(self, name: str) -> Agent:
        try:
            return self._agents.resolve(name)
        except UnknownAgent as error:
            raise ApplicationError(str(error), type="UnknownAgent", non_retryable=True) from error

    def _writer(self, message_id: str) -> ChunkWriter:
        return ChunkWriter(
            self._db, self._bus, message_id=message_id, attempt=activity.info().attempt
        )

    @activity.defn(name=MODEL_STEP_ACTIVITY)
    async def model_step(self, step: ModelStepInput) -> ModelStepResult:
        agent = self._agent(step.agent)
        context = TurnContext(
            session_id=step.session_id,
            submission_id=step.submission_id,
            assistant_message_id=step.assistant_message_id,
            agent=agent.name,
        )
        model = agent.model or self._default_model
        try:
            provider = self._provider_for(model)
        except ValueError as error:
            raise ApplicationError(str(error), type="BadModel", non_retryable=True) from error
        logged = await load_log(self._db, message_id=step.assistant_message_id)
        state = step_state(reduce_chunks(logged), step.step)
        writer = self._writer(step.assistant_message_id)
        if not logged:
            writer.add([_start_chunk(step.assistant_message_id, step.submission_id)])
            await _run_hook("on_turn_start", lambda: agent.on_turn_start(context))
        if not state.started:
            writer.add([{"type": "start-step"}])

        history = await active_path(self._db, session_id=step.session_id)
        if state.prior_parts:
            partial = UIMessage.model_validate(
                {"id": step.assistant_message_id, "role": "assistant", "parts": state.prior_parts}
            )
            history.append(partial)
        tools = agent.tools()
        request = ModelRequest(
            model=model.split(":", 1)[-1],
            system=await agent.instructions(context),
            conversation=to_conversation(history),
            tools=[definition.spec() for definition in tools.values()],
            prefill=state.prefill,
            max_output_tokens=agent.max_output_tokens,
        )
        chunker = StepChunker(step.step, open_text_id=state.open_text_id)
        try:
            async with _heartbeating():
                async for event in provider.stream(request):
                    writer.add(chunker.feed(event))
        except ProviderError as error:
            await writer.flush()
            raise provider_failure(error, label=provider.label) from error
        except BaseException:
            await writer.flush()
            raise
        writer.add(chunker.close() + [{"type": "finish-step"}])
        await writer.flush()
        finish_reason = chunker.finish.reason if chunker.finish else "other"
        calls = [
            ToolCallRef(
                tool_call_id=call.id,
                tool_name=call.name,
                idempotent=tools[call.name].idempotent if call.name in tools else True,
            )
            for call in chunker.tool_calls
        ]
        return ModelStepResult(
            finish_reason=finish_reason, tool_calls=calls, max_steps=agent.max_steps
        )

    @activity.defn(name=RUN_TOOL_ACTIVITY)
    async def run_tool(self, call: RunToolInput) -> None:
        agent = self._agent(call.agent)
        reduction = reduce_chunks(await load_log(self._db, message_id=call.assistant_message_id))
        part = reduction.tool_part(call.tool_call_id)
        if part is None:
            raise ApplicationError(
                f"tool call {call.tool_call_id} is not in the log", non_retryable=True
            )
        if part["state"] in ("output-available", "output-error", "output-denied"):
            return  # settled by an earlier attempt: never run a tool twice for one call
        name = part["type"].removeprefix("tool-")
        definition = agent.tools().get(name)
        chunk: Chunk
        if definition is None:
            chunk = _tool_error(call.tool_call_id, f"unknown tool {name!r}")
        else:
            raw_input = part.get("input")
            arguments: dict[str, Any] = raw_input if isinstance(raw_input, dict) else {}
            try:
                async with _heartbeating():
                    output = await definition.invoke(agent, arguments)
                chunk = {
                    "type": "tool-output-available",
                    "toolCallId": call.tool_call_id,
                    "output": output,
                }
            except Exception as error:  # noqa: BLE001 - a tool's failure is told to the model
                chunk = _tool_error(call.tool_call_id, f"{type(error).__name__}: {error}")
        await append_chunks(
            self._db,
            message_id=call.assistant_message_id,
            chunks=[chunk],
            attempt=activity.info().attempt,
        )
        self._bus.publish(call.assistant_message_id)

    @activity.defn(name=FINISH_TURN_ACTIVITY)
    async def finish_turn(self, turn: FinishTurnInput) -> None:
        message_id = turn.assistant_message_id
        logged = await load_log(self._db, message_id=message_id)
        closing = _closing_chunks(logged, turn)
        following = await finish(
            self._db,
            submission_id=turn.submission_id,
            outcome=turn.outcome,
            closing=closing,
            assistant=reduce_chunks(logged + closing),
            error=turn.error_text,
            attempt=activity.info().attempt,
        )
        self._bus.publish(message_id)
        if closing:
            agent = self._agents.resolve(turn.agent) if turn.agent in self._agents.names() else None
            if agent is not None:
                context = TurnContext(
                    session_id=turn.session_id,
                    submission_id=turn.submission_id,
                    assistant_message_id=message_id,
                    agent=agent.name,
                )
                await _run_hook("on_turn_end", lambda: agent.on_turn_end(context, turn.outcome))
        if following is not None:
            await self._admit(following)

    async def _admit(self, submission: Submission) -> None:
        """Signal-with-start: the next turn runs even if its gateway never started it."""
        await self._client.start_workflow(
            TURN_WORKFLOW,
            TurnInput(
                submission_id=submission.id,
                session_id=submission.session_id,
                assistant_message_id=submission.assistant_message_id,
                agent=submission.agent,
            ),
            id=turn_workflow_id(submission.id),
            task_queue=self._task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal=ADMIT_SIGNAL,
            memo={"session_id": submission.session_id},
            run_timeout=timedelta(days=7),
        )


def _start_chunk(message_id: str, submission_id: str) -> Chunk:
    return {
        "type": "start",
        "messageId": message_id,
        "messageMetadata": {"submissionId": submission_id},
    }


def _tool_error(tool_call_id: str, text: str) -> Chunk:
    return {"type": "tool-output-error", "toolCallId": tool_call_id, "errorText": text}


def _closing_chunks(logged: list[Chunk], turn: FinishTurnInput) -> list[Chunk]:
    """The chunks that end the log, unless an earlier attempt already ended it."""
    reduction = reduce_chunks(logged)
    if reduction.terminal is not None:
        return []
    closing: list[Chunk] = []
    if not logged:
        closing.append(_start_chunk(turn.assistant_message_id, turn.submission_id))
    if reduction.open_text_id is not None:
        closing.append({"type": "text-end", "id": reduction.open_text_id})
    terminal: dict[str, Any]
    if turn.outcome == "completed":
        terminal = {"type": "finish", "finishReason": turn.finish_reason or "stop"}
    elif turn.outcome == "aborted":
        terminal = {"type": "abort", "reason": "user-cancelled"}
    else:
        terminal = {"type": "error", "errorText": turn.error_text or "The turn failed."}
    closing.append(terminal)
    return closing
