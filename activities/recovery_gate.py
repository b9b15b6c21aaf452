"""The start of every retried model step: count the incident, ask the agent, or give up.

Temporal's retry policy re-runs a failed or timed-out model step (a dead worker is noticed by
its heartbeat timeout); this gate decides, from the incident record, whether the attempt may
go on, and raises a non-retryable failure when the budget is spent or the agent declines.
"""

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime

from temporalio.exceptions import ApplicationError

from activities._support import call_hook, current_writer
from activities.events import emit
from activities.step_run import StepRun
from perdure.agent import Agent
from perdure.domain.names import (
    RECOVERY_EXHAUSTED,
    RECOVERY_SKIPPED,
)
from perdure.domain.recovery import (
    Incident,
    IncidentDecision,
    RecoveryKind,
    aborted_by_predicate,
    evaluate_incident,
    progress_of,
    recovery_kind,
    recovery_notice,
)
from perdure.domain.recovery_boot import (
    FollowUp,
    RecoveryBoot,
    default_boot,
    skipped_follow_ups,
    synthesized_results,
    unanswered_calls,
)
from perdure.domain.ui import Chunk, UIMessage
from perdure.recovery import ChatRecoveryContext, RecoveryBootContext, RecoveryOptions
from perdure.telemetry import metrics
from perdure.turn_control.lifecycle import SubmissionLifecycle
from storage.admission import apply_recovery_plan, queued_after
from storage.db import Database
from storage.incidents import load_incident, save_incident
from storage.tables import SubmissionRow
from storage.timing import now
from storage.turn_keep import save_boot_history

log = logging.getLogger(__name__)


def turn_started_at(submission: SubmissionRow) -> float:
    """When the turn began to run (a queued one: when it was admitted)."""
    return submission.started_at or submission.created_at


@dataclass(frozen=True)
class BootDecision:
    """What `on_recovery_boot`'s plan changes for the recovered turn."""

    history: list[UIMessage] | None = None
    """Another conversation before the answer, replacing the active path."""
    drop_partial: bool = False
    """The plan left the partial out: the model answers afresh, never seeing it."""
    tool_results: list[Chunk] = field(default_factory=list)
    """Results the plan gave the partial's pending tool calls."""


@dataclass(frozen=True)
class RecoveryStart:
    notice: Chunk
    """The transient `data-recovery` chunk clients see."""
    boot: BootDecision = field(default_factory=BootDecision)


class RecoveryGate:
    def __init__(self, *, db: Database, lifecycle: SubmissionLifecycle) -> None:
        self._db = db
        self._lifecycle = lifecycle

    async def begin(self, run: StepRun) -> RecoveryStart:
        """Count the incident, then let the agent stop the recovery or change what the model
        is shown. `run.inputs.path` is the active path after its newest summary, as the model
        step read it (a long chat's whole path would be megabytes per message, read for
        nothing)."""
        policy = run.agent.recovery
        kind = recovery_kind(run.steplog.reduction)
        decision = await self._decided(run, kind)
        incident = decision.incident
        await self._save(run.submission, incident)
        if decision.detected:
            metrics.recovery(kind, "detected")
            await self._emit(
                run, "chat.recovery.detected", incidentId=incident.incident_id, kind=kind
            )
        if decision.exhausted is not None:
            metrics.recovery(kind, "exhausted")
            raise ApplicationError(
                f"recovery exhausted ({decision.exhausted}): {incident.total_attempts - 1} "
                f"recovery attempts in this turn, {incident.attempt - 1} in a row without progress",
                {"reason": decision.exhausted, "incidentId": incident.incident_id},
                type=RECOVERY_EXHAUSTED,
                non_retryable=True,
            )
        await self._emit(
            run,
            "chat.recovery.attempt",
            incidentId=incident.incident_id,
            attempt=incident.attempt,
            maxAttempts=policy.max_attempts,
            kind=kind,
        )
        metrics.recovery_attempt(kind)
        options = await self._ask(run.agent, self._context(run, incident))
        if not options.continue_:
            await self._skip(run, incident, options)
        return RecoveryStart(
            notice=recovery_notice(incident, max_attempts=policy.max_attempts, action=kind),
            boot=await self._boot(run),
        )

    async def _decided(self, run: StepRun, kind: RecoveryKind) -> IncidentDecision:
        """The incident after this attempt, as the policy and `should_keep_recovering` judge."""
        submission = run.submission
        decision = evaluate_incident(
            await load_incident(self._db, submission_id=submission.id),
            incident_id=f"{submission.id}:{submission.user_message_id}",
            kind=kind,
            progress=progress_of(run.steplog.chunks),
            now=now(),
            policy=run.agent.recovery,
            turn_started_at=turn_started_at(submission),
        )
        if not decision.detected and decision.exhausted in (None, "max_attempts_exceeded"):
            context = self._context(run, decision.incident)
            if not await self._keep_recovering(run.agent, context):
                return aborted_by_predicate(decision)
        return decision

    async def _skip(self, run: StepRun, incident: Incident, options: RecoveryOptions) -> None:
        """`on_chat_recovery` declined: record it and end the turn."""
        await self._save(
            run.submission,
            incident.model_copy(update={"status": "skipped", "reason": "continue_disabled"}),
        )
        await self._emit(run, "chat.recovery.skipped", reason="continue_disabled")
        metrics.recovery(incident.kind, "skipped")
        raise ApplicationError(
            "recovery skipped: on_chat_recovery returned continue_=False",
            {"persist": options.persist},
            type=RECOVERY_SKIPPED,
            non_retryable=True,
        )

    async def _save(self, submission: SubmissionRow, incident: Incident) -> None:
        await save_incident(
            self._db,
            submission_id=submission.id,
            session_id=submission.session_id,
            incident=incident,
        )

    async def _emit(self, run: StepRun, type: str, **data: object) -> None:
        submission = run.submission
        await emit(
            self._db,
            session_id=submission.session_id,
            submission_id=submission.id,
            type=type,
            **data,
        )

    async def completed(self, submission: SubmissionRow) -> None:
        incident = await load_incident(self._db, submission_id=submission.id)
        if incident is None or incident.status != "attempting":
            return
        await save_incident(
            self._db,
            submission_id=submission.id,
            session_id=submission.session_id,
            incident=incident.model_copy(update={"status": "completed"}),
        )
        metrics.recovery(incident.kind, "completed")
        await emit(
            self._db,
            session_id=submission.session_id,
            submission_id=submission.id,
            type="chat.recovery.completed",
            incidentId=incident.incident_id,
            attempt=incident.attempt,
        )

    @staticmethod
    async def _ask(agent: Agent, context: ChatRecoveryContext) -> RecoveryOptions:
        try:
            return await call_hook(
                "on_chat_recovery",
                lambda: agent.on_chat_recovery(context),
                limit=agent.hook_timeout.total_seconds(),
            )
        except Exception:
            log.exception("on_chat_recovery failed; recovering by default")
            return RecoveryOptions()

    @staticmethod
    def _context(run: StepRun, incident: Incident) -> ChatRecoveryContext:
        submission, reduction = run.submission, run.steplog.reduction
        return ChatRecoveryContext(
            incident_id=incident.incident_id,
            attempt=incident.attempt,
            max_attempts=run.agent.recovery.max_attempts,
            kind=incident.kind,
            stream_id=run.step.turn.assistant_message_id,
            request_id=submission.id,
            session_id=submission.session_id,
            partial_text=reduction.text(),
            partial_parts=[dict(part) for part in reduction.parts],
            recovery_data=submission.stash,
            messages=run.inputs.path,
            last_body=dict(submission.user_message),
            created_at=datetime.fromtimestamp(turn_started_at(submission), UTC),
            incident_seen_at=datetime.fromtimestamp(incident.first_seen_at, UTC),
        )

    @staticmethod
    async def _keep_recovering(agent: Agent, context: ChatRecoveryContext) -> bool:
        try:
            return bool(
                await call_hook(
                    "should_keep_recovering",
                    lambda: agent.should_keep_recovering(context),
                    limit=agent.hook_timeout.total_seconds(),
                )
            )
        except Exception:
            log.exception("should_keep_recovering failed; recovering")
            return True

    async def _boot(self, run: StepRun) -> BootDecision:
        """Trigger.dev's recovery boot: asked when there is a partial to go on from or
        follow-ups queued behind the turn."""
        submission, history = run.submission, run.inputs.path
        queued = await queued_after(self._db, session_id=submission.session_id)
        partial = _partial(run)
        if not history or (not queued and partial is None):
            return BootDecision()
        follow_ups = [
            FollowUp(submission_id=q.id, message=UIMessage.model_validate(q.user_message))
            for q in queued
        ]
        default = default_boot(history[:-1], history[-1], partial, follow_ups)
        context = RecoveryBootContext(
            session_id=submission.session_id,
            request_id=submission.id,
            default=default,
            settled=history[:-1],
            in_flight_user=history[-1],
            partial=partial,
            queued=follow_ups,
            pending_tool_calls=unanswered_calls(run.steplog.reduction),
        )
        plan = await self._boot_plan(run.agent, context)
        if queued:
            await self._apply_follow_ups(submission, queued, follow_ups, plan)
        if plan.chain == default.chain:
            return BootDecision()
        return await self._planned(run, plan.chain, partial)

    @staticmethod
    async def _boot_plan(agent: Agent, context: RecoveryBootContext) -> RecoveryBoot:
        try:
            return await call_hook(
                "on_recovery_boot",
                lambda: agent.on_recovery_boot(context),
                limit=agent.hook_timeout.total_seconds(),
            )
        except Exception:
            log.exception("on_recovery_boot failed; using the default chain")
            return context.default

    async def _planned(
        self, run: StepRun, chain: list[UIMessage], partial: UIMessage | None
    ) -> BootDecision:
        """What a plan other than the default changes: the history (kept for the rest of the
        turn), the partial, the results of its pending calls."""
        message_id, history = run.step.turn.assistant_message_id, run.inputs.path
        planned_partial = chain[-1] if chain and chain[-1].id == message_id else None
        before = [m for m in chain if m.id != message_id]
        if before != history and not await save_boot_history(
            self._db,
            submission_id=run.submission.id,
            messages=[m.model_dump(mode="json") for m in before],
        ):
            log.warning("recovery boot history too large to keep: this model call only")
        return BootDecision(
            history=None if before == history else before,
            drop_partial=partial is not None and planned_partial is None,
            tool_results=synthesized_results(run.steplog.reduction, planned_partial),
        )

    async def _apply_follow_ups(
        self,
        submission: SubmissionRow,
        queued: list[SubmissionRow],
        follow_ups: list[FollowUp],
        plan: RecoveryBoot,
    ) -> None:
        skipped = set(skipped_follow_ups(follow_ups, plan))
        keep = [i for i in plan.follow_ups if i in {q.id for q in queued}]
        await apply_recovery_plan(
            self._db,
            session_id=submission.session_id,
            keep=keep,
            skip=sorted(skipped),
            writer=current_writer(),
        )
        # Already `skipped` in the store; the signals just let their workflows end.
        await self._lifecycle.skip([row for row in queued if row.id in skipped])


def _partial(run: StepRun) -> UIMessage | None:
    """The interrupted answer so far, as a message; None when nothing of it was streamed."""
    parts = run.steplog.reduction.parts
    if not parts:
        return None
    return UIMessage.model_validate(
        {"id": run.step.turn.assistant_message_id, "role": "assistant", "parts": parts}
    )
