"""TurnWorkflow: one chat submission, from admission to its closed, stored answer."""

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from perdure.domain.names import (
        ADMIT_DEBOUNCED_ACTIVITY,
        ADMIT_SIGNAL,
        FINISH_TURN_ACTIVITY,
        MODEL_STEP_ACTIVITY,
        PARK_TURN_ACTIVITY,
        RELAY_SUB_TURN_ACTIVITY,
        RESUME_TURN_ACTIVITY,
        RUN_TOOL_ACTIVITY,
        SKIP_SIGNAL,
        START_SUB_TURN_ACTIVITY,
        SUB_TURN_RESUMED_SIGNAL,
        TURN_WORKFLOW,
        WAIT_ANSWERED_SIGNAL,
        turn_workflow_id,
    )
    from perdure.domain.payloads import (
        AdmitDebouncedInput,
        AdmitDebouncedResult,
        FinishTurnInput,
        FinishTurnResult,
        ModelStepInput,
        ModelStepResult,
        ParkTurnInput,
        ParkTurnResult,
        RelaySubTurnInput,
        RelaySubTurnResult,
        ResumeTurnInput,
        ResumeTurnResult,
        RunToolInput,
        RunToolResult,
        SubTurnInput,
        SubTurnStart,
        ToolCallRef,
        TurnInput,
        TurnResult,
        WaitRef,
    )
    from perdure.domain.turn_labels import STATUS, TurnLabels, TurnStatus, search_attributes
    from perdure.domain.usage import BUDGET
    from workflows import _policies as policies
    from workflows._endings import Ending, describe, was_cancelled


FINISH_LOCALLY = "finish-as-local-activity"
"""The patch that made the finish a local activity (`workflow.patched`): part of history."""
STATUS_ATTRIBUTE = "status-search-attribute"
"""The patch since which the turn upserts `PerdureStatus` as it goes: turns recorded before it
replay without those commands."""
STOP_AT_BOUNDARIES = "stop-at-step-boundaries"
"""The patch since which a cancellation that arrives while a step completes anyway (the SDK
then returns the step's result) still stops the turn at the next step boundary."""
FOLLOW_TASKS = "follow-mcp-tasks"
"""The patch since which a call that cannot run twice, whose attempt died, is followed once
more when its MCP server turned it into a task (the task id is in the log)."""


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
        self._answered: set[str] = set()
        self._children_resumed: dict[str, int] = {}
        """Per child turn (sub-agent): how often it went on after a park of its own."""
        """Tool waits (approvals, client outputs) the store has recorded answers for."""
        self._waiting: list[str] = []
        self._status: TurnStatus = "pending"
        """`PerdureStatus` as last set (at start by whoever started the workflow)."""
        self._model: str | None = None
        """The model the last step ran, for the next steps' summaries."""

    @workflow.signal(name=ADMIT_SIGNAL)
    def admit(self) -> None:
        self._admitted = True

    @workflow.signal(name=SKIP_SIGNAL)
    def skip(self) -> None:
        """A recovery-boot plan dropped this queued follow-up."""
        self._skipped = True

    @workflow.signal(name=WAIT_ANSWERED_SIGNAL)
    def wait_answered(self, wait_ids: list[str]) -> None:
        """Ids only: the answers themselves are in the store, checked there by the gateway."""
        self._answered.update(wait_ids)

    @workflow.signal(name=SUB_TURN_RESUMED_SIGNAL)
    def sub_turn_resumed(self, child_submission_id: str) -> None:
        """A sub-agent's turn went on after waiting: relay it live again."""
        count = self._children_resumed.get(child_submission_id, 0)
        self._children_resumed[child_submission_id] = count + 1

    @workflow.query
    def steps(self) -> int:
        return self._steps

    @workflow.query
    def waiting_for(self) -> list[str]:
        """The tool waits (approval ids, client waits) the parked turn still waits on."""
        return [wait_id for wait_id in self._waiting if wait_id not in self._answered]

    @workflow.run
    async def run(self, turn: TurnInput) -> TurnResult:
        ending = Ending()
        self._status = "running" if turn.admitted else "pending"
        try:
            if not turn.admitted:
                await self._wait_for_admission(turn)
            if self._skipped and not self._admitted:
                ending.outcome = "skipped"
            else:
                self._set_status("running")
                ending.finish_reason = await self._agent_loop(turn)
        except asyncio.CancelledError:
            ending.outcome = "aborted"
        except ActivityError as failure:
            ending.failed(failure)
        decided = await self._finish(turn, ending)
        if decided is not None and decided.outcome != ending.outcome:
            # A stop recorded in the store before the finish decided the ending.
            ending.outcome, ending.error_text = decided.outcome, None
        self._set_status(ending.outcome)
        if ending.outcome == "aborted" and workflow.cancellation_reason() is not None:
            raise asyncio.CancelledError("stopped by the user")
        return TurnResult(outcome=ending.outcome, steps=self._steps, error=ending.error_text)

    def _stop_at_boundary(self) -> None:
        """A cancellation that reached a step which completed anyway is not lost: the SDK
        hands the workflow the step's result, so the turn stops here, before the next one."""
        if workflow.cancellation_reason() is not None and workflow.patched(STOP_AT_BOUNDARIES):
            raise asyncio.CancelledError("stopped by the user")

    def _set_status(self, status: TurnStatus) -> None:
        """Upsert `PerdureStatus` when it changes: the Temporal UI lists turns by it."""
        if status != self._status and workflow.patched(STATUS_ATTRIBUTE):
            workflow.upsert_search_attributes([STATUS.value_set(status)])
        self._status = status

    async def _wait_for_admission(self, turn: TurnInput) -> None:
        """Until admitted (the gateway or the end of the turn ahead signals it) or skipped. A
        debounced turn waits out its quiet period first, then admits itself if it can."""

        def decided() -> bool:
            return self._admitted or self._skipped

        if turn.admit_at is not None:
            quiet = turn.admit_at - workflow.now().timestamp()
            with contextlib.suppress(asyncio.TimeoutError):
                await workflow.wait_condition(decided, timeout=max(quiet, 0.001))
            if not decided():
                admission: AdmitDebouncedResult = await workflow.execute_local_activity(
                    ADMIT_DEBOUNCED_ACTIVITY,
                    AdmitDebouncedInput(submission_id=turn.turn.submission_id),
                    result_type=AdmitDebouncedResult,
                    start_to_close_timeout=policies.PARKING_TIMEOUT,
                    retry_policy=policies.PARKING_RETRY,
                    summary="admit after the debounce period",
                )
                self._admitted = self._admitted or admission.admitted
        await workflow.wait_condition(decided)

    async def _finish(self, turn: TurnInput, ending: Ending) -> FinishTurnResult | None:
        """Shielded: a stop that lands while the turn finishes must not cancel the activity
        that releases the session (a session claimed forever)."""
        finishing = asyncio.ensure_future(self._run_finish(turn, ending))
        while not finishing.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(finishing)
        return finishing.result()

    async def _run_finish(self, turn: TurnInput, ending: Ending) -> FinishTurnResult | None:
        """None from turns recorded before the finish returned the store's outcome."""
        finish = FinishTurnInput(
            turn=turn.turn,
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
        decided = await execute(
            FINISH_TURN_ACTIVITY,
            finish,
            start_to_close_timeout=policies.FINISH_TIMEOUT,
            retry_policy=policies.FINISH_RETRY,
            summary=summary,
        )
        return FinishTurnResult.model_validate(decided) if decided else None

    async def _agent_loop(self, turn: TurnInput) -> str:
        while True:
            result: ModelStepResult = await workflow.execute_activity(
                MODEL_STEP_ACTIVITY,
                ModelStepInput(turn=turn.turn, step=self._steps),
                result_type=ModelStepResult,
                start_to_close_timeout=policies.MODEL_STEP_TIMEOUT,
                heartbeat_timeout=policies.HEARTBEAT_TIMEOUT,
                retry_policy=policies.MODEL_RETRY,
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=self._step_summary(turn),
            )
            self._steps = result.next_step
            self._model = result.model
            self._stop_at_boundary()
            if not result.tool_calls:
                return result.finish_reason
            if result.budget_reached:
                return BUDGET  # the calls stay unrun: no model would read their results
            # On a stop, gather cancels every tool activity and returns only once each has
            # acknowledged (WAIT_CANCELLATION_COMPLETED): nothing writes after `finish`.
            asked = await self._run_tools(
                turn, [call for call in result.tool_calls if not call.wait]
            )
            self._stop_at_boundary()
            waits = [call for call in result.tool_calls if call.wait] + asked
            # A call whose MCP server asks a person parks the turn as an approval does, then
            # runs again (and may ask again). A turn that never asks parks once, as before.
            while waits:
                waits = await self._run_tools(turn, await self._park(turn, waits))
                self._stop_at_boundary()
            if self._steps >= result.max_steps:
                return BUDGET

    def _step_summary(self, turn: TurnInput) -> str:
        """The model is known once a step has run (only the worker resolves an agent's)."""
        model = f" · {self._model}" if self._model else ""
        return f"model step {self._steps} · agent {turn.turn.agent}{model}"

    async def _run_tools(self, turn: TurnInput, calls: list[ToolCallRef]) -> list[ToolCallRef]:
        """Run `calls` at once; the calls whose MCP server asks a person first."""
        asked = await asyncio.gather(
            *(
                self._run_sub_agent(turn, call) if call.sub_agent else self._run_tool(turn, call)
                for call in calls
            )
        )
        return [call for call, asking in zip(calls, asked, strict=True) if asking]

    async def _run_sub_agent(self, turn: TurnInput, call: ToolCallRef) -> bool:
        """The call's agent answers in a child turn, visible as this turn's child in Temporal;
        its answer streams into the call's output as it comes and ends as the call's result.
        Stopping this turn stops the child (cancelling the child's handle cancels it)."""
        sub_call = SubTurnInput(
            turn=turn.turn,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
        )
        started: SubTurnStart = await workflow.execute_activity(
            START_SUB_TURN_ACTIVITY,
            sub_call,
            result_type=SubTurnStart,
            start_to_close_timeout=policies.PARKING_TIMEOUT,
            heartbeat_timeout=policies.HEARTBEAT_TIMEOUT,
            retry_policy=policies.PARKING_RETRY,
            summary=f"start sub-agent {call.sub_agent}",
        )
        child = started.child
        if child is None:
            return False
        handle = await self._start_child(call, child, started.labels)
        relay = RelaySubTurnInput(
            call=sub_call,
            child_submission_id=child.turn.submission_id,
            child_message_id=child.turn.assistant_message_id,
        )
        try:
            await self._follow_child(relay, handle)
            await handle
        except BaseException:
            # A stop reaches here as the relay's cancellation (an ActivityError), or as a
            # CancelledError while awaiting the child (which cancels it already).
            if not handle.done():
                handle.cancel()
                with contextlib.suppress(BaseException):
                    await handle  # the child ends (aborted) before this turn settles the call
            raise
        return False

    async def _start_child(
        self, call: ToolCallRef, child: TurnInput, labels: TurnLabels | None
    ) -> workflow.ChildWorkflowHandle[Any, TurnResult]:
        """`labels` is None when recorded before turns had them."""
        attributes = (
            search_attributes(labels, "running" if child.admitted else "pending")
            if labels
            else None
        )
        return await workflow.start_child_workflow(
            TURN_WORKFLOW,
            child,
            id=turn_workflow_id(child.turn.submission_id),
            result_type=TurnResult,
            run_timeout=policies.SUB_TURN_TIMEOUT,
            # However this turn ends, the child ends through its own finish (never terminated
            # with its session left claimed).
            parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
            static_summary=f"sub-agent {call.sub_agent}: "
            f"{labels.summary if labels else call.tool_call_id}",
            memo={"session_id": child.turn.session_id, "parent_tool_call_id": call.tool_call_id},
            search_attributes=attributes,
        )

    async def _follow_child(
        self, relay: RelaySubTurnInput, handle: workflow.ChildWorkflowHandle[Any, TurnResult]
    ) -> None:
        """Relay the child live until the call is settled; while the child is parked (its own
        approval), wait with no activity running until it goes on (then relay it live again)
        or ends (then settle the call)."""
        child_id = relay.child_submission_id
        while True:
            resumes = self._children_resumed.get(child_id, 0)
            if (await self._relay_sub_turn(relay)).settled:
                return

            def moved_on(resumes: int = resumes) -> bool:
                return handle.done() or self._children_resumed.get(child_id, 0) > resumes

            await workflow.wait_condition(moved_on)
            if handle.done():
                await self._relay_sub_turn(relay.model_copy(update={"settle": True}))
                return

    async def _relay_sub_turn(self, relay: RelaySubTurnInput) -> RelaySubTurnResult:
        result: RelaySubTurnResult = await workflow.execute_activity(
            RELAY_SUB_TURN_ACTIVITY,
            relay,
            result_type=RelaySubTurnResult,
            start_to_close_timeout=policies.SUB_TURN_RELAY_TIMEOUT,
            heartbeat_timeout=policies.HEARTBEAT_TIMEOUT,
            retry_policy=policies.IDEMPOTENT_TOOL_RETRY,
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary="settle sub-agent" if relay.settle else "relay sub-agent",
        )
        return result

    async def _park(self, turn: TurnInput, calls: list[ToolCallRef]) -> list[ToolCallRef]:
        """End the stream for now, wait in the workflow (no activity, no worker slot, no
        recovery budget) until each call is answered or out of time, and return the approved
        calls to run."""
        # Park and resume are local activities: a few store writes each, in the workflow
        # task itself (no activity task through the server: an answer reaches its tool sooner).
        parked: ParkTurnResult = await workflow.execute_local_activity(
            PARK_TURN_ACTIVITY,
            ParkTurnInput(turn=turn.turn, tool_call_ids=[call.tool_call_id for call in calls]),
            result_type=ParkTurnResult,
            start_to_close_timeout=policies.PARKING_TIMEOUT,
            retry_policy=policies.PARKING_RETRY,
            summary=f"park: waiting on {', '.join(sorted({call.tool_name for call in calls}))}",
        )
        self._waiting = [wait.wait_id for wait in parked.waits]
        self._set_status("waiting")
        await self._wait_for_answers(parked.waits)
        resumed: ResumeTurnResult = await workflow.execute_local_activity(
            RESUME_TURN_ACTIVITY,
            ResumeTurnInput(turn=turn.turn, wait_ids=self._waiting),
            result_type=ResumeTurnResult,
            start_to_close_timeout=policies.PARKING_TIMEOUT,
            retry_policy=policies.PARKING_RETRY,
            summary="resume",
        )
        self._waiting = []
        self._set_status("running")
        await self._tell_parent_resumed(turn)
        return resumed.run

    async def _tell_parent_resumed(self, turn: TurnInput) -> None:
        """A sub-agent's turn that waited: its parent relays it live again from here."""
        parent = workflow.info().parent
        if parent is None:
            return
        try:
            await workflow.get_external_workflow_handle(parent.workflow_id).signal(
                SUB_TURN_RESUMED_SIGNAL, turn.turn.submission_id
            )
        except Exception as error:  # noqa: BLE001 - the parent may have ended meanwhile
            workflow.logger.info("could not tell the parent turn: %s", error)

    async def _wait_for_answers(self, waits: list[WaitRef]) -> None:
        parked_at = workflow.now()

        def open_waits() -> list[WaitRef]:
            elapsed = (workflow.now() - parked_at).total_seconds()
            return [
                wait
                for wait in waits
                if wait.wait_id not in self._answered and elapsed < wait.timeout_seconds
            ]

        while pending := open_waits():
            elapsed = (workflow.now() - parked_at).total_seconds()
            soonest = min(wait.timeout_seconds for wait in pending) - elapsed
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: all(wait.wait_id in self._answered for wait in pending),
                    timeout=timedelta(seconds=max(soonest, 0.001)),
                )

    async def _run_tool(self, turn: TurnInput, call: ToolCallRef) -> bool:
        """True when the call's MCP server asks a person first (the turn parks on it)."""
        retry: RetryPolicy = policies.IDEMPOTENT_TOOL_RETRY if call.idempotent else policies.ONCE
        try:
            result = await self._tool_activity(turn, call, retry, follow_task=False)
        except ActivityError as failure:
            if was_cancelled(failure):
                raise
            if call.idempotent or not workflow.patched(FOLLOW_TASKS):
                # The next model step settles the call as interrupted and tells the model.
                workflow.logger.warning("tool %s failed: %s", call.tool_name, describe(failure))
                return False
            try:
                # Its MCP server may have made it a task: the task goes on, and is followed.
                retry = policies.IDEMPOTENT_TOOL_RETRY
                result = await self._tool_activity(turn, call, retry, follow_task=True)
            except ActivityError as following:
                if was_cancelled(following):
                    raise
                workflow.logger.warning("tool %s failed: %s", call.tool_name, describe(failure))
                return False
        return result is not None and result.asked

    async def _tool_activity(
        self, turn: TurnInput, call: ToolCallRef, retry: RetryPolicy, *, follow_task: bool
    ) -> RunToolResult | None:
        """None from histories recorded before the activity returned a result."""
        result: RunToolResult | None = await workflow.execute_activity(
            RUN_TOOL_ACTIVITY,
            RunToolInput(turn=turn.turn, tool_call_id=call.tool_call_id, follow_task=follow_task),
            result_type=RunToolResult,
            start_to_close_timeout=policies.TOOL_TIMEOUT,
            heartbeat_timeout=policies.HEARTBEAT_TIMEOUT,
            retry_policy=retry,
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary=f"tool {call.tool_name}" + (": follow its task" if follow_task else ""),
        )
        return result
