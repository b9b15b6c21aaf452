"""The model step activity: recover if this is a retry, repair, stream the provider into the log."""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities._support import (
    call_hook,
    current_writer,
    heartbeating,
    refuse_if_stopped,
    required_hook_failure,
    run_hook,
    superseded,
)
from activities.client_tools import turn_client_tools
from activities.compaction import Compactor
from activities.errors import provider_failure
from activities.events import emit
from activities.providers import ModelRequest, Provider, ProviderError, ResumeToken
from activities.recovery_gate import RecoveryGate
from activities.transcript_repair import repair_transcript
from activities.watched_stream import ProviderStalled, StreamTarget, stream_into_log
from domain.compaction import Overlaid, estimate_tokens, with_summary
from domain.continuation import StepState, step_state
from domain.conversation import to_conversation
from domain.names import MODEL_STEP_ACTIVITY
from domain.payloads import ModelStepInput, ModelStepResult, ToolCallRef, WaitKind
from domain.provider_events import ToolCallEnd
from domain.recovery_boot import dropped_step_chunks
from domain.reducer import reduce_chunks
from domain.step_chunks import StepChunker
from domain.turn_chunks import REGENERATE_NOTICE, close_open_text, pending_tool_calls, start_chunk
from domain.ui import Chunk, UIMessage
from perdure.agent import Agent, TurnContext
from perdure.agents_registry import AgentRegistry, UnknownAgent
from perdure.recovery import bind_stash, unbind_stash
from perdure.tools import ClientTool, ToolContext, ToolDefinition
from storage.chunks import StaleWriter, claim_log, load_log
from storage.db import Database
from storage.log_appender import BufferedLog, LogAppender
from storage.step_inputs import StepInputs, read_step_inputs
from storage.submissions import save_stash
from storage.tables import Submission
from storage.tenant_policies import agent_admission
from storage.tool_waits import new_approval_id
from telemetry import genai_spans, metrics
from telemetry.log_context import bind_ids
from turn_control.lifecycle import SubmissionLifecycle

log = logging.getLogger(__name__)


class ModelStepActivity:
    """`perdure.model_step`: one call of the model, streamed into the answer's log."""

    def __init__(
        self,
        *,
        db: Database,
        agents: AgentRegistry,
        lifecycle: SubmissionLifecycle,
        appender: LogAppender,
        default_model: str,
        provider_for: Callable[[str], Provider],
    ) -> None:
        self._db = db
        self._appender = appender
        self._agents = agents
        self._recovery = RecoveryGate(db=db, lifecycle=lifecycle)
        self._compactor = Compactor(db)
        self._default_model = default_model
        self._provider_for = provider_for

    @activity.defn(name=MODEL_STEP_ACTIVITY)
    async def model_step(self, step: ModelStepInput) -> ModelStepResult:
        # From the first line: a slow store or a slow hook must never look like a dead worker.
        async with heartbeating():
            writer = current_writer()
            inputs = await read_step_inputs(
                self._db,
                submission_id=step.submission_id,
                message_id=step.assistant_message_id,
                session_id=step.session_id,
                # A retry reads the log only once it has fenced off earlier attempts (below).
                with_log=writer.attempt == 1,
            )
            if inputs is None:
                raise ApplicationError(
                    f"submission {step.submission_id} is no longer stored (session deleted)",
                    non_retryable=True,
                )
            submission = inputs.submission
            refuse_if_stopped(submission)
            bind_ids(tenant_id=submission.tenant_id)
            agent = await self._agent(step.agent, submission.tenant_id)
            token = bind_stash(stash_writer(self._db, submission.id))
            try:
                # Fence off earlier attempts before reading the log they may still write to
                # (a first attempt has none, and its first write claims the log anyway).
                if writer.attempt > 1:
                    await claim_log(self._db, message_id=step.assistant_message_id, writer=writer)
                    inputs.log = await load_log(self._db, message_id=step.assistant_message_id)
                chunks = self._appender.writer(
                    message_id=step.assistant_message_id,
                    writer=writer,
                    submission_id=submission.id,
                )
                return await self._run(agent, step, inputs, chunks)
            except StaleWriter as error:
                raise superseded(error) from error
            finally:
                unbind_stash(token)

    @staticmethod
    def _dropped(log_so_far: list[Chunk], step: ModelStepInput) -> list[Chunk]:
        """The recovery boot plan left the partial out: drop the interrupted step, if it is
        still open."""
        reduction = reduce_chunks(log_so_far)
        if reduction.steps <= step.step:
            return []  # nothing of this step was streamed: nothing to drop
        if not reduction.step_open:
            log.warning("recovery boot: step %d finished already; it is not dropped", step.step)
            return []
        return dropped_step_chunks(reduction.open_text_id, step.step)

    async def _agent(self, name: str, tenant_id: str) -> Agent:
        """The turn's agent; an unknown one ends the turn naming only the served agents its
        tenant may use (the gateway admitted the name: it is allowed, but nobody serves it)."""
        try:
            return self._agents.resolve(name)
        except UnknownAgent:
            usable = (await agent_admission(self._db, tenant_id)).usable(self._agents.names())
            raise ApplicationError(
                f"unknown agent {name!r}; this worker serves: "
                f"{', '.join(usable) or 'none this tenant may use'}",
                type="UnknownAgent",
                non_retryable=True,
            ) from None

    async def _run(
        self, agent: Agent, step: ModelStepInput, inputs: StepInputs, writer: BufferedLog
    ) -> ModelStepResult:
        submission = inputs.submission
        context = turn_context(agent, submission)
        limit = agent.hook_timeout.total_seconds()
        model = agent.model or self._default_model
        try:
            provider = self._provider_for(model)
        except ValueError as error:
            raise ApplicationError(str(error), type="BadModel", non_retryable=True) from error
        log_so_far = inputs.log

        def add(chunks: list[Chunk]) -> None:
            writer.add(chunks)
            log_so_far.extend(chunks)

        recovering = activity.info().attempt > 1
        first_attempt_wrote_nothing = not log_so_far
        history: list[UIMessage] | None = None
        if recovering:
            # Judged on the log as the interrupted attempt left it.
            try:
                start = await self._recovery.begin(
                    agent, step, submission, log_so_far, reduce_chunks(log_so_far), inputs.path
                )
            except ApplicationError:
                await cancel_at_provider(provider, submission.provider_cursor)
                raise
            history = start.boot.history
        if first_attempt_wrote_nothing:
            # `start` always opens the log, even when a recovery notice follows at once.
            add([start_chunk(step.assistant_message_id, step.submission_id)])
            await run_hook("on_turn_start", lambda: agent.on_turn_start(context), limit=limit)
        if recovering:
            add([start.notice, *start.boot.tool_results])
            if start.boot.drop_partial:
                add(self._dropped(log_so_far, step))
        tools = agent.tools()
        client_tools = turn_client_tools(agent, submission)
        state = step_state(reduce_chunks(log_so_far), step.step)
        if state.finished:
            # An earlier attempt streamed the whole step and died before returning it: its
            # calls never ran (the workflow runs them once it has the step's result).
            await writer.flush()
            if recovering:
                await self._recovery.completed(submission)
            pending = pending_tool_calls(state)
            reason = "tool-calls" if pending else "stop"
            next_step = reduce_chunks(log_so_far).steps
            return step_result(agent, model, tools, client_tools, pending, reason, next_step)
        add(
            await repair_transcript(
                agent,
                reduce_chunks(log_so_far),
                db=self._db,
                session_id=step.session_id,
                submission_id=step.submission_id,
            )
        )
        state = step_state(reduce_chunks(log_so_far), step.step)
        if state.started and state.has_tool_calls:
            # Its tool calls were settled above; the model goes on in a fresh step.
            add(close_open_text(state) + [{"type": "finish-step"}, {"type": "start-step"}])
            state = step_state(reduce_chunks(log_so_far), step.step)
        elif not state.started:
            add([{"type": "start-step"}])
        log_step = reduce_chunks(log_so_far).steps - 1

        if history is None and submission.boot_history is not None:
            # A recovery boot plan's history holds for the rest of the turn.
            history = [UIMessage.model_validate(m) for m in submission.boot_history]
        if history is None:
            history = inputs.path
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
        try:
            system = await call_hook(
                "instructions", lambda: agent.instructions(context), limit=limit
            )
        except Exception as error:
            raise required_hook_failure("instructions", error) from error
        provider_model = model.split(":", 1)[-1]
        current = Overlaid(inputs.summary, history)

        def request_for(seen: Overlaid) -> ModelRequest:
            return ModelRequest(
                model=provider_model,
                system=with_summary(system, seen.summary),
                conversation=to_conversation(seen.recent),
                tools=[definition.spec for definition in tools.values()]
                + [client_tool.spec for client_tool in client_tools.values()]
                + [sub_agent.spec for sub_agent in agent.sub_agents],
                prefill=None if resume else state.prefill,
                resume=resume,
                max_output_tokens=agent.max_output_tokens,
                thinking_budget_tokens=agent.thinking_budget_tokens,
            )

        async def compacted(reason: str) -> ModelRequest | None:
            nonlocal current
            shorter = await self._compactor.compact(
                agent=agent,
                provider=provider,
                model=provider_model,
                system=system,
                current=current,
                session_id=step.session_id,
                submission_id=step.submission_id,
                reason=reason,
            )
            if shorter is None:
                return None
            current = shorter
            return request_for(current)

        request = request_for(current)
        threshold = agent.compact_after_tokens
        if (
            threshold is not None
            and estimate_tokens(request.system, request.conversation) > threshold
        ):
            request = await compacted("threshold") or request
        stall = await turn_stall_timeout(agent, context)
        with genai_spans.model_call(
            model,
            session_id=step.session_id,
            max_output_tokens=request.max_output_tokens,
            step=log_step,
            attempt=activity.info().attempt,
        ) as span:
            chunker = await self._stream(
                provider,
                request,
                writer,
                state,
                log_step,
                agent,
                step,
                stall,
                on_overflow=lambda: compacted("context_overflow"),
            )
            usage = chunker.finish
            span.finished(
                usage.reason if usage else None,
                usage.input_tokens if usage else None,
                usage.output_tokens if usage else None,
            )
        if usage is not None:
            metrics.model_tokens(model, usage.input_tokens, usage.output_tokens)
        writer.add(chunker.close())
        made: list[tuple[str, str, bool]] = []
        for call in chunker.tool_calls:
            gated = await approval_needed(agent, tools.get(call.name), call, context)
            if gated:
                writer.add([approval_request(call.id)])
            made.append((call.id, call.name, gated))
        writer.add([{"type": "finish-step"}])
        await writer.flush()
        if recovering:
            await self._recovery.completed(submission)
        reason = chunker.finish.reason if chunker.finish else "other"
        return step_result(agent, model, tools, client_tools, made, reason, log_step + 1)

    async def _stream(
        self,
        provider: Provider,
        request: ModelRequest,
        writer: BufferedLog,
        state: StepState,
        log_step: int,
        agent: Agent,
        step: ModelStepInput,
        stall: float,
        on_overflow: Callable[[], Awaitable[ModelRequest | None]] | None = None,
    ) -> StepChunker:
        """Stream the step; fall back from a lost resumable response to a prefill, from a
        refused prefill to regenerating the step, and from a full context window to a
        compacted request (once)."""
        attempt = activity.info().attempt
        chunker = StepChunker(step.step, attempt=attempt, open_text_id=state.open_text_id)
        while True:
            target = StreamTarget(writer=writer, chunker=chunker, log_step=log_step)
            try:
                await stream_into_log(provider, request, target, stall_timeout=stall)
                return chunker
            except ProviderStalled:
                metrics.provider_stalled(agent.model or self._default_model)
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
                metrics.provider_error(agent.model or self._default_model, error)
                await writer.flush()
                if request.resume is not None and not error.retryable:
                    # The failed re-attach may have streamed more of the step: continue from
                    # what the log holds now, not from where this attempt began.
                    logged = await load_log(self._db, message_id=step.assistant_message_id)
                    prefill = step_state(reduce_chunks(logged), step.step).prefill
                    request = request.model_copy(update={"resume": None, "prefill": prefill})
                    log.warning(
                        "cannot re-attach (%s); continuing by %s",
                        error,
                        provider.continuation_for(request).via,
                    )
                    continue
                if error.context_overflow and on_overflow is not None:
                    shorter, on_overflow = await on_overflow(), None
                    if shorter is not None:
                        request = shorter
                        continue
                if error.prefill_rejected and request.prefill:
                    writer.add(chunker.close() + [REGENERATE_NOTICE])
                    request = request.model_copy(update={"prefill": None})
                    chunker = StepChunker(step.step, attempt=attempt, variant="regen")
                    continue
                raise provider_failure(error, label=provider.label) from error
            except asyncio.CancelledError:
                details = activity.cancellation_details()
                if details is None or not details.worker_shutdown:
                    # Stopped by the user: the background response must not run on at the
                    # provider. A worker shutdown hands the step over instead: the response
                    # runs on and the next attempt re-attaches to it on another worker.
                    await asyncio.shield(cancel_at_provider(provider, target.last_cursor))
                await writer.flush()
                raise
            except BaseException:
                await writer.flush()
                raise


PROVIDER_CANCEL_TIMEOUT = 5.0


async def cancel_at_provider(provider: Provider, cursor: dict[str, Any] | None) -> None:
    """Best effort, bounded: stop a server-side response nobody will read any more."""
    if not provider.supports_cancel or not cursor or "response_id" not in cursor:
        return
    try:
        async with asyncio.timeout(PROVIDER_CANCEL_TIMEOUT):
            await provider.cancel(str(cursor["response_id"]))
    except Exception as error:  # noqa: BLE001 - the turn ends either way
        log.warning("could not cancel response %s at %s: %s", cursor, provider.label, error)


async def turn_stall_timeout(agent: Agent, context: TurnContext) -> float:
    """The agent's stall timeout for this turn, in seconds (the policy's if its hook fails)."""
    try:
        chosen = await call_hook(
            "stall_timeout",
            lambda: agent.stall_timeout(context),
            limit=agent.hook_timeout.total_seconds(),
        )
        seconds = chosen.total_seconds()
        if seconds <= 0:
            raise ValueError(f"stall_timeout must be positive, not {chosen}")
        return seconds
    except Exception:
        log.exception("stall_timeout failed; using the recovery policy's")
        return agent.recovery.stall_timeout.total_seconds()


def stash_writer(db: Database, submission_id: str) -> Callable[[Any], Awaitable[None]]:
    async def write(data: Any) -> None:
        await save_stash(db, submission_id=submission_id, data=data)

    return write


def turn_context(agent: Agent, submission: Submission) -> TurnContext:
    return TurnContext(
        tenant_id=submission.tenant_id,
        session_id=submission.session_id,
        submission_id=submission.id,
        assistant_message_id=submission.assistant_message_id,
        agent=agent.name,
    )


async def approval_needed(
    agent: Agent, definition: ToolDefinition | None, call: ToolCallEnd, context: TurnContext
) -> bool:
    """Whether the call waits for a person: fail closed, so a broken or slow `needs_approval`
    function never lets a call run unapproved."""
    if definition is None or definition.needs_approval is False:
        return False
    tool_context = ToolContext(
        tenant_id=context.tenant_id,
        session_id=context.session_id,
        submission_id=context.submission_id,
        tool_call_id=call.id,
        agent=agent.name,
    )
    try:
        return await call_hook(
            f"needs_approval of {definition.name}",
            lambda: definition.approval_needed(dict(call.arguments), tool_context),
            limit=agent.hook_timeout.total_seconds(),
        )
    except Exception:
        log.exception("needs_approval of tool %s failed; approval is required", definition.name)
        return True


def approval_request(tool_call_id: str) -> Chunk:
    return {
        "type": "tool-approval-request",
        "approvalId": new_approval_id(),
        "toolCallId": tool_call_id,
    }


def step_result(
    agent: Agent,
    model: str,
    tools: dict[str, ToolDefinition],
    client_tools: dict[str, ClientTool],
    calls: list[tuple[str, str, bool]],
    finish_reason: str,
    next_step: int,
) -> ModelStepResult:
    """The step's result; `calls` are `(tool_call_id, tool_name, approval requested)`."""
    refs: list[ToolCallRef] = []
    for call_id, name, gated in calls:
        wait: WaitKind | None = None
        if gated:
            wait = "approval"
        elif name in client_tools:
            wait = "client"
        sub_agent = agent.sub_agent(name)
        refs.append(
            ToolCallRef(
                tool_call_id=call_id,
                tool_name=name,
                idempotent=tools[name].idempotent if name in tools else True,
                wait=wait,
                sub_agent=sub_agent.agent if sub_agent else None,
            )
        )
    return ModelStepResult(
        finish_reason=finish_reason,
        tool_calls=refs,
        max_steps=agent.max_steps,
        next_step=next_step,
        model=model,
    )
