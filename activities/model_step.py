"""The model step activity: recover if this is a retry, repair, stream the provider into the log."""

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
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
    submission_gone,
)
from activities.approval_gate import StepEnd, StepOffer, gate_calls, step_result
from activities.base import AgentActivity, fenced
from activities.client_tools import turn_client_tools
from activities.providers import Provider
from activities.recovery_gate import BootDecision, RecoveryGate, RecoveryStart
from activities.steering import Steering, at_boundary
from activities.step_call import StepCaller, cancel_at_provider
from activities.step_log import StepLog
from activities.step_request import StepPlan, conversation_before, resume_token
from activities.step_rounds import calls_for_the_step, run_round
from activities.step_run import StepRun
from activities.transcript_repair import repair_transcript
from activities.turn_tools import ToolSources, turn_tools
from perdure.agent import Agent, TurnContext
from perdure.agents_registry import UnknownAgent
from perdure.domain.compaction import Overlaid
from perdure.domain.names import MODEL_STEP_ACTIVITY
from perdure.domain.payloads import ModelStepInput, ModelStepResult
from perdure.domain.provider_events import Finish
from perdure.domain.recovery_boot import dropped_step_chunks
from perdure.domain.reducer import Reduction
from perdure.domain.relay_protocol import stream_id_of
from perdure.domain.step_state import StepState
from perdure.domain.turn_chunks import (
    close_open_text,
    pending_tool_calls,
    start_chunk,
)
from perdure.domain.ui import Chunk, UIMessage
from perdure.domain.usage import reported_usage
from perdure.recovery import bind_stash, unbind_stash
from perdure.telemetry.log_context import bind_ids
from perdure.turn_control.lifecycle import SubmissionLifecycle
from storage.chunks import load_log
from storage.db import Database
from storage.log_appender import BufferedLog, LogAppender
from storage.step_inputs import StepInputs, read_again, read_step_inputs
from storage.tables import SubmissionRow
from storage.tenant_policies import agent_limits
from storage.turn_keep import save_stash
from storage.usage import StepUsage, turn_usage

log = logging.getLogger(__name__)

STOP_RECHECK_SECONDS = 0.25
"""A step whose opening (recovery, `on_turn_start`) took longer reads its submission again
before the model is asked: the stop it read at its start may be out of date."""


@dataclass(kw_only=True, eq=False)
class ModelStepActivity(AgentActivity):
    """`perdure.model_step`: one call of the model, streamed into the answer's log."""

    lifecycle: SubmissionLifecycle
    appender: LogAppender
    default_model: str
    provider_for: Callable[[str], Provider]
    toolbox: ToolSources

    def __post_init__(self) -> None:
        self._recovery = RecoveryGate(db=self.db, lifecycle=self.lifecycle)
        self._caller = StepCaller(self.db)
        self._steering = Steering(self.db, self.appender, self.lifecycle)

    @activity.defn(name=MODEL_STEP_ACTIVITY)
    async def model_step(self, step: ModelStepInput) -> ModelStepResult:
        # From the first line: a slow store or a slow hook must never look like a dead worker.
        async with heartbeating():
            writer = current_writer()
            inputs = await read_step_inputs(
                self.db,
                submission_id=step.turn.submission_id,
                message_id=step.turn.assistant_message_id,
                session_id=step.turn.session_id,
                # A retry reads the log only once it has fenced off earlier attempts (below).
                with_log=writer.attempt == 1,
            )
            if inputs is None:
                raise submission_gone(step.turn.submission_id)
            submission = inputs.submission
            refuse_if_stopped(submission)
            bind_ids(tenant_id=submission.tenant_id)
            agent = await self._agent(step.turn.agent, submission.tenant_id)
            token = bind_stash(stash_writer(self.db, submission.id))
            try:
                with fenced():
                    # Fence off earlier attempts before reading the log they may still write to.
                    await self.claim(step.turn.assistant_message_id)
                    if writer.attempt > 1:
                        inputs.log = await load_log(
                            self.db, message_id=step.turn.assistant_message_id
                        )
                    chunks = self.appender.writer(
                        message_id=step.turn.assistant_message_id,
                        writer=writer,
                        submission_id=submission.id,
                    )
                    return await self._run(self._step_run(agent, step, inputs, chunks))
            finally:
                unbind_stash(token)

    async def _agent(self, name: str, tenant_id: str) -> Agent:
        """The turn's agent; an unknown one ends the turn naming only the served agents its
        tenant may use (the gateway admitted the name: it is allowed, but nobody serves it)."""
        try:
            return self.agents.resolve(name)
        except UnknownAgent:
            usable = (await agent_limits(self.db, tenant_id)).usable(self.agents.names())
            raise ApplicationError(
                f"unknown agent {name!r}; this worker serves: "
                f"{', '.join(usable) or 'none this tenant may use'}",
                type="UnknownAgent",
                non_retryable=True,
            ) from None

    def _provider(self, model: str) -> Provider:
        try:
            return self.provider_for(model)
        except ValueError as error:
            raise ApplicationError(str(error), type="BadModel", non_retryable=True) from error

    def _step_run(
        self, agent: Agent, step: ModelStepInput, inputs: StepInputs, writer: BufferedLog
    ) -> StepRun:
        model = agent.model or self.default_model
        return StepRun(
            agent=agent,
            step=step,
            inputs=inputs,
            steplog=StepLog(inputs.log, writer),
            provider=self._provider(model),
            model=model,
            context=turn_context(agent, inputs.submission),
            attempt=activity.info().attempt,
        )

    async def _run(self, run: StepRun) -> ModelStepResult:
        """Open (or recover), then call the model, and again after each tool round the step
        may run itself (activities/step_rounds.py)."""
        started = time.monotonic()
        boot = await self._open(run)
        if run.recovering:
            await self._steering.end_joined_turns(run)
        if time.monotonic() - started > STOP_RECHECK_SECONDS:
            # Its hooks took long: a stop recorded meanwhile ends the turn before a request
            # leaves, even when its cancellation has not reached Temporal (or this worker) yet.
            await self._refuse_if_stopped_meanwhile(run)
        offer, result = await self._call(run, boot)
        while (
            calls := calls_for_the_step(
                run.agent,
                offer.tools,
                result,
                rounds=run.round,
                elapsed=time.monotonic() - started,
            )
        ) is not None and await run_round(run, offer.tools, calls):
            await self._refuse_if_stopped_meanwhile(run)
            following = run.step.model_copy(update={"step": result.next_step})
            run = replace(run, step=following, round=run.round + 1)
            offer, result = await self._call(run, boot)
        return result.model_copy(update={"rounds_in_step": run.round})

    async def _refuse_if_stopped_meanwhile(self, run: StepRun) -> None:
        """As the next step would: a stop recorded while the round ran ends the turn here,
        even when its cancellation never reaches Temporal. The round's outputs are kept. The
        same read tells whether a steering message came meanwhile."""
        again = await read_again(
            self.db, submission_id=run.submission.id, session_id=run.step.turn.session_id
        )
        if again is None:
            raise submission_gone(run.submission.id)
        run.inputs.steering_waits = again.steering_waits
        try:
            refuse_if_stopped(again.submission)
        except ApplicationError:
            await run.writer.flush()
            raise

    async def _call(
        self, run: StepRun, boot: BootDecision | None
    ) -> tuple[StepOffer, ModelStepResult]:
        """Repair, plan the request, stream it, gate its tool calls."""
        tools = (await turn_tools(run.agent, self.toolbox)).tools
        offer = StepOffer(tools, turn_client_tools(run.agent, run.submission, tools))
        state = run.steplog.state(run.step.step)
        pending = pending_tool_calls(state)
        if state.finished and (pending or not state.has_tool_calls):
            # An earlier attempt streamed the whole step and died before returning it: its
            # calls never ran (the workflow runs them once it has the step's result). Calls
            # it ran itself are settled: the model goes on in a fresh step, below.
            reason = "tool-calls" if pending else "stop"
            end = StepEnd(pending, reason, run.steplog.reduction.steps)
            return offer, await self._ended(run, offer, end)
        if run.inputs.steering_waits and at_boundary(run, state):
            await self._steering.join(run)
            run.inputs.steering_waits = False
        state = await self._step_opened(run)
        log_step = run.steplog.reduction.steps - 1
        plan = await self._plan(run, offer, state, log_step)
        conversation = conversation_before(
            run.inputs.path,
            boot_history=_boot_history(boot, run.submission),
            state=state,
            message_id=run.step.turn.assistant_message_id,
        )
        seen = Overlaid(run.inputs.summary, conversation)
        chunker = await self._caller.call(run, plan, log_step, seen)
        made, approvals = await gate_calls(run.agent, tools, chunker.tool_calls, run.context)
        run.writer.add(
            [*approvals, {"type": "finish-step"}], usage=_step_usage(run, chunker.finish, log_step)
        )
        reason = chunker.finish.reason if chunker.finish else "other"
        return offer, await self._ended(run, offer, StepEnd(made, reason, log_step + 1))

    async def _ended(self, run: StepRun, offer: StepOffer, end: StepEnd) -> ModelStepResult:
        """Everything written, the recovery (if any) completed: the step's result."""
        await run.writer.flush()
        if run.recovering:
            await self._recovery.completed(run.submission)
        budget_reached = await self._over_budget(run.agent, run.submission.id)
        return step_result(run.agent, run.model, offer, replace(end, budget_reached=budget_reached))

    async def _plan(
        self, run: StepRun, offer: StepOffer, state: StepState, log_step: int
    ) -> StepPlan:
        return StepPlan(
            agent=run.agent,
            model=run.model,
            system=await self._instructions(run.agent, run.context),
            tools=offer.tools,
            client_tools=offer.client_tools,
            state=state,
            resume=resume_token(
                supports_resume=run.provider.supports_resume,
                cursor=run.submission.provider_cursor,
                log_step=log_step,
            ),
            stream_id=stream_id_of(run.step.turn.assistant_message_id, log_step),
        )

    async def _over_budget(self, agent: Agent, submission_id: str) -> bool:
        """Whether the turn's calls so far (this step's included: its usage went in with its
        last chunks) have used the agent's `max_turn_tokens`."""
        if agent.max_turn_tokens is None:
            return False
        used = await self.db.read_sync(lambda session: turn_usage(session, submission_id))
        return used is not None and used.total >= agent.max_turn_tokens

    async def _open(self, run: StepRun) -> BootDecision | None:
        """Recover when this is a retry (judged on the log as the interrupted attempt left it),
        and open the log when no attempt wrote to it yet. The recovery's boot decision."""
        steplog, step, agent = run.steplog, run.step, run.agent
        first_attempt_wrote_nothing = not steplog.chunks
        start: RecoveryStart | None = None
        if run.recovering:
            try:
                start = await self._recovery.begin(run)
            except ApplicationError:
                await cancel_at_provider(run.provider, run.submission.provider_cursor)
                raise
        if first_attempt_wrote_nothing:
            # `start` always opens the log, even when a recovery notice follows at once.
            steplog.add([start_chunk(step.turn.assistant_message_id, step.turn.submission_id)])
            await run_hook(
                "on_turn_start",
                lambda: agent.on_turn_start(run.context),
                limit=agent.hook_timeout.total_seconds(),
            )
        if start is None:
            return None
        steplog.add([start.notice, *start.boot.tool_results])
        if start.boot.drop_partial:
            steplog.add(_dropped(steplog.reduction, step))
        return start.boot

    async def _step_opened(self, run: StepRun) -> StepState:
        """Repair the transcript, then open this step (or a fresh one after settled calls)."""
        steplog, step = run.steplog, run.step
        steplog.add(
            await repair_transcript(
                run.agent,
                steplog.reduction,
                db=self.db,
                session_id=step.turn.session_id,
                submission_id=step.turn.submission_id,
            )
        )
        state = steplog.state(step.step)
        if state.started and state.has_tool_calls:
            # Its tool calls were settled above (or ran in the step); the model goes on in a
            # fresh step.
            closing = [] if state.finished else [*close_open_text(state), {"type": "finish-step"}]
            steplog.add([*closing, {"type": "start-step"}])
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


def _step_usage(run: StepRun, finish: Finish | None, log_step: int) -> StepUsage | None:
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
        submission_id=run.submission.id,
        step=log_step,
        attempt=run.attempt,
        tenant_id=run.submission.tenant_id,
        session_id=run.step.turn.session_id,
        chat_id=run.submission.chat_id,
        agent=run.step.turn.agent,
        model=run.model,
        usage=usage,
    )
