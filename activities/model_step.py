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
from activities.approval_gate import gate_calls, step_result
from activities.client_tools import turn_client_tools
from activities.compaction import Compactor
from activities.errors import provider_failure
from activities.events import emit
from activities.providers import ModelRequest, Provider, ProviderError
from activities.recovery_gate import BootDecision, RecoveryGate, RecoveryStart
from activities.step_log import StepLog
from activities.step_request import StepPlan, conversation_before, resume_token
from activities.transcript_repair import repair_transcript
from activities.turn_tools import ToolSources, turn_tools
from activities.watched_stream import ProviderStalled, StreamTarget, stream_into_log
from perdure.agent import Agent, TurnContext
from perdure.agents_registry import AgentRegistry, UnknownAgent
from perdure.domain.compaction import Overlaid, estimate_tokens
from perdure.domain.names import MODEL_STEP_ACTIVITY
from perdure.domain.payloads import ModelStepInput, ModelStepResult
from perdure.domain.provider_events import Finish
from perdure.domain.recovery_boot import dropped_step_chunks
from perdure.domain.reducer import Reduction, reduce_chunks
from perdure.domain.relay_protocol import stream_id_of
from perdure.domain.step_chunks import StepChunker
from perdure.domain.step_state import StepState, step_state
from perdure.domain.turn_chunks import (
    close_open_text,
    pending_tool_calls,
    start_chunk,
)
from perdure.domain.ui import Chunk, UIMessage
from perdure.domain.usage import reported_usage
from perdure.recovery import bind_stash, unbind_stash
from perdure.telemetry import genai_spans, metrics
from perdure.telemetry.log_context import bind_ids
from perdure.turn_control.lifecycle import SubmissionLifecycle
from storage.chunks import StaleWriter, claim_log, load_log
from storage.db import Database
from storage.log_appender import BufferedLog, LogAppender
from storage.step_inputs import StepInputs, read_step_inputs
from storage.submissions import save_stash
from storage.tables import SubmissionRow
from storage.tenant_policies import agent_limits
from storage.usage import StepUsage, turn_usage

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
        toolbox: ToolSources,
    ) -> None:
        self._db = db
        self._toolbox = toolbox
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

    async def _agent(self, name: str, tenant_id: str) -> Agent:
        """The turn's agent; an unknown one ends the turn naming only the served agents its
        tenant may use (the gateway admitted the name: it is allowed, but nobody serves it)."""
        try:
            return self._agents.resolve(name)
        except UnknownAgent:
            usable = (await agent_limits(self._db, tenant_id)).usable(self._agents.names())
            raise ApplicationError(
                f"unknown agent {name!r}; this worker serves: "
                f"{', '.join(usable) or 'none this tenant may use'}",
                type="UnknownAgent",
                non_retryable=True,
            ) from None

    def _provider(self, model: str) -> Provider:
        try:
            return self._provider_for(model)
        except ValueError as error:
            raise ApplicationError(str(error), type="BadModel", non_retryable=True) from error

    async def _run(
        self, agent: Agent, step: ModelStepInput, inputs: StepInputs, writer: BufferedLog
    ) -> ModelStepResult:
        """Open (or recover), repair, plan the request, stream it, gate its tool calls."""
        submission = inputs.submission
        context = turn_context(agent, submission)
        model = agent.model or self._default_model
        provider = self._provider(model)
        steplog = StepLog(inputs.log, writer)
        recovering = activity.info().attempt > 1
        boot = await self._open(agent, step, inputs, steplog, provider, context, recovering)
        tools = (await turn_tools(agent, self._toolbox)).tools
        client_tools = turn_client_tools(agent, submission, tools)
        state = steplog.state(step.step)
        if state.finished:
            # An earlier attempt streamed the whole step and died before returning it: its
            # calls never ran (the workflow runs them once it has the step's result).
            await writer.flush()
            if recovering:
                await self._recovery.completed(submission)
            pending = pending_tool_calls(state)
            reason = "tool-calls" if pending else "stop"
            return step_result(
                agent,
                model,
                tools,
                client_tools,
                pending,
                reason,
                steplog.reduction.steps,
                budget_reached=await self._over_budget(agent, submission.id),
            )
        state = await self._step_opened(agent, step, steplog)
        log_step = steplog.reduction.steps - 1
        plan = StepPlan(
            agent=agent,
            model=model,
            system=await self._instructions(agent, context),
            tools=tools,
            client_tools=client_tools,
            state=state,
            resume=resume_token(
                supports_resume=provider.supports_resume,
                cursor=submission.provider_cursor,
                log_step=log_step,
            ),
            stream_id=stream_id_of(step.assistant_message_id, log_step),
        )
        conversation = conversation_before(
            inputs.path,
            boot_history=_boot_history(boot, submission),
            state=state,
            message_id=step.assistant_message_id,
        )
        chunker = await self._call(
            plan, provider, Overlaid(inputs.summary, conversation), step, log_step, context, writer
        )
        made, approvals = await gate_calls(agent, tools, chunker.tool_calls, context)
        usage = _step_usage(
            chunker.finish, submission, step, log_step, model, activity.info().attempt
        )
        writer.add([*approvals, {"type": "finish-step"}], usage=usage)
        await writer.flush()
        if recovering:
            await self._recovery.completed(submission)
        reason = chunker.finish.reason if chunker.finish else "other"
        return step_result(
            agent,
            model,
            tools,
            client_tools,
            made,
            reason,
            log_step + 1,
            budget_reached=await self._over_budget(agent, submission.id),
        )

    async def _over_budget(self, agent: Agent, submission_id: str) -> bool:
        """Whether the turn's calls so far (this step's included: its usage went in with its
        last chunks) have used the agent's `max_turn_tokens`."""
        if agent.max_turn_tokens is None:
            return False
        used = await self._db.read_sync(lambda session: turn_usage(session, submission_id))
        return used is not None and used.total >= agent.max_turn_tokens

    async def _open(
        self,
        agent: Agent,
        step: ModelStepInput,
        inputs: StepInputs,
        steplog: StepLog,
        provider: Provider,
        context: TurnContext,
        recovering: bool,
    ) -> BootDecision | None:
        """Recover when this is a retry (judged on the log as the interrupted attempt left it),
        and open the log when no attempt wrote to it yet. The recovery's boot decision."""
        submission = inputs.submission
        first_attempt_wrote_nothing = not steplog.chunks
        start: RecoveryStart | None = None
        if recovering:
            try:
                start = await self._recovery.begin(
                    agent, step, submission, steplog.chunks, steplog.reduction, inputs.path
                )
            except ApplicationError:
                await cancel_at_provider(provider, submission.provider_cursor)
                raise
        if first_attempt_wrote_nothing:
            # `start` always opens the log, even when a recovery notice follows at once.
            steplog.add([start_chunk(step.assistant_message_id, step.submission_id)])
            await run_hook(
                "on_turn_start",
                lambda: agent.on_turn_start(context),
                limit=agent.hook_timeout.total_seconds(),
            )
        if start is None:
            return None
        steplog.add([start.notice, *start.boot.tool_results])
        if start.boot.drop_partial:
            steplog.add(_dropped(steplog.reduction, step))
        return start.boot

    async def _step_opened(self, agent: Agent, step: ModelStepInput, steplog: StepLog) -> StepState:
        """Repair the transcript, then open this step (or a fresh one after settled calls)."""
        steplog.add(
            await repair_transcript(
                agent,
                steplog.reduction,
                db=self._db,
                session_id=step.session_id,
                submission_id=step.submission_id,
            )
        )
        state = steplog.state(step.step)
        if state.started and state.has_tool_calls:
            # Its tool calls were settled above; the model goes on in a fresh step.
            steplog.add(close_open_text(state) + [{"type": "finish-step"}, {"type": "start-step"}])
            return steplog.state(step.step)
        if not state.started:
            steplog.add([{"type": "start-step"}])
        return state

    @staticmethod
    async def _instructions(agent: Agent, context: TurnContext) -> str:
        try:
            return await call_hook(
                "instructions",
                lambda: agent.instructions(context),
                limit=agent.hook_timeout.total_seconds(),
            )
        except Exception as error:
            raise required_hook_failure("instructions", error) from error

    async def _call(
        self,
        plan: StepPlan,
        provider: Provider,
        seen: Overlaid,
        step: ModelStepInput,
        log_step: int,
        context: TurnContext,
        writer: BufferedLog,
    ) -> StepChunker:
        """Compact when the request is over the agent's threshold (or the provider's window),
        and stream it into the log, traced and metered."""
        agent = plan.agent
        current = seen

        async def compacted(reason: str) -> ModelRequest | None:
            nonlocal current
            shorter = await self._compactor.compact(
                agent=agent,
                provider=provider,
                model=plan.provider_model,
                system=plan.system,
                current=current,
                session_id=step.session_id,
                submission_id=step.submission_id,
                reason=reason,
            )
            if shorter is None:
                return None
            current = shorter
            return plan.request(current)

        request = plan.request(current)
        threshold = agent.compact_after_tokens
        if (
            threshold is not None
            and estimate_tokens(request.system, request.conversation) > threshold
        ):
            request = await compacted("threshold") or request
        stall = await turn_stall_timeout(agent, context)
        model = plan.model
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
                plan.state,
                log_step,
                model,
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
        return chunker

    async def _stream(
        self,
        provider: Provider,
        request: ModelRequest,
        writer: BufferedLog,
        state: StepState,
        log_step: int,
        model: str,
        step: ModelStepInput,
        stall: float,
        on_overflow: Callable[[], Awaitable[ModelRequest | None]] | None = None,
    ) -> StepChunker:
        """Stream the step; fall back from a lost resumable response to a prefill, from a
        refused prefill to the continue instruction, and from a full context window to a
        compacted request (once)."""
        attempt = activity.info().attempt
        chunker = StepChunker(step.step, attempt=attempt, open_text_id=state.open_text_id)
        while True:
            target = StreamTarget(writer=writer, chunker=chunker, log_step=log_step)
            try:
                await stream_into_log(provider, request, target, stall_timeout=stall)
                return chunker
            except ProviderStalled:
                metrics.provider_stalled(model)
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
                metrics.provider_error(model, error)
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
                if error.prefill_rejected and request.prefill and not request.prefill_refused:
                    # A model whose rules were not known (PERDURE_MODEL_FAMILIES): the text
                    # goes on by instruction, never by answering the step again.
                    log.warning("%s refused a prefill; continuing by instruction", model)
                    request = request.model_copy(update={"prefill_refused": True})
                    continue
                raise provider_failure(error, label=provider.label) from error
            except asyncio.CancelledError:
                details = activity.cancellation_details()
                if details is None or (details.cancel_requested and not details.worker_shutdown):
                    # Stopped by the user: the background response must not run on at the
                    # provider. A worker shutdown, or an attempt Temporal timed out or no
                    # longer knows (heartbeats late on a busy machine), hands the step over
                    # instead: the response runs on and the next attempt re-attaches to it.
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


def turn_context(agent: Agent, submission: SubmissionRow) -> TurnContext:
    return TurnContext(
        tenant_id=submission.tenant_id,
        session_id=submission.session_id,
        submission_id=submission.id,
        assistant_message_id=submission.assistant_message_id,
        agent=agent.name,
    )


def _dropped(reduction: Reduction, step: ModelStepInput) -> list[Chunk]:
    """The recovery boot plan left the partial out: drop the interrupted step, if it is still
    open."""
    if reduction.steps <= step.step:
        return []  # nothing of this step was streamed: nothing to drop
    if not reduction.step_open:
        log.warning("recovery boot: step %d finished already; it is not dropped", step.step)
        return []
    return dropped_step_chunks(reduction.open_text_id, step.step)


def _boot_history(boot: BootDecision | None, submission: SubmissionRow) -> list[UIMessage] | None:
    """The conversation a recovery boot plan chose: this recovery's, else the one an earlier
    recovery of the turn chose (it holds for the rest of the turn)."""
    if boot is not None and boot.history is not None:
        return boot.history
    if submission.boot_history is not None:
        return [UIMessage.model_validate(m) for m in submission.boot_history]
    return None


def _step_usage(
    finish: Finish | None,
    submission: SubmissionRow,
    step: ModelStepInput,
    log_step: int,
    model: str,
    attempt: int,
) -> StepUsage | None:
    """The call's usage as its provider reported it, for the store; None if it reported none."""
    if finish is None:
        return None
    usage = reported_usage(
        finish.input_tokens,
        finish.cached_input_tokens,
        finish.output_tokens,
        finish.reasoning_tokens,
    )
    if usage is None:
        return None
    return StepUsage(
        submission_id=submission.id,
        step=log_step,
        attempt=attempt,
        tenant_id=submission.tenant_id,
        session_id=step.session_id,
        chat_id=submission.chat_id,
        agent=step.agent,
        model=model,
        usage=usage,
    )
