"""The fire activity: one occurrence of a prompt schedule becomes a chat submission.

Exactly what a chat message does: the submission lifecycle (turn_control/lifecycle.py) records
the submission once per idempotency key, applies the session's concurrency strategy (an
`interrupt` session's running turn is stopped, as by a chat message), and starts its workflow
(idempotent by workflow id). The key and the user message's id come from the
schedule and the occurrence's time, so an occurrence that fires twice (a retried activity, a
backfill over a time that already ran) finds its first submission and runs once. The tenant's
allowed agents are checked at every occurrence, so narrowing them stops its schedules' turns;
rate limits count gateway requests only.
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from temporalio import activity

from activities.base import StoreActivity
from activities.events import emit
from perdure.domain.names import FIRE_SCHEDULE_ACTIVITY
from perdure.domain.prompt_schedules import (
    FireScheduleInput,
    FireScheduleResult,
    occurrence_key,
    occurrence_message_id,
    occurrence_text,
)
from perdure.domain.turn_priority import SCHEDULED_MESSAGE_SOURCE
from perdure.domain.ui import UIMessage
from perdure.turn_control.lifecycle import SubmissionLifecycle
from storage.busy_session import SessionBusy
from storage.errors import AgentNotAllowed
from storage.intake import NewSubmission
from storage.prompt_schedules import get_schedule, record_occurrence
from storage.schedule_tables import PromptScheduleRow
from storage.submission_options import SubmissionOptions
from storage.tenant_policies import agent_limits

log = logging.getLogger("perdure.schedules")  # operators filter logs by this name: it stays


def occurrence_message(schedule: PromptScheduleRow, occurrence: datetime) -> UIMessage:
    """The user message of one occurrence, its id made of the schedule's and the time's."""
    return UIMessage.model_validate(
        {
            "id": occurrence_message_id(schedule.id, occurrence),
            "role": "user",
            "parts": [{"type": "text", "text": schedule.prompt}],
            "metadata": {
                "source": SCHEDULED_MESSAGE_SOURCE,
                "scheduleId": schedule.id,
                "occurrence": occurrence_text(occurrence),
            },
        }
    )


@dataclass(kw_only=True, eq=False)
class PromptScheduleActivity(StoreActivity):
    lifecycle: SubmissionLifecycle
    task_queue: str

    @activity.defn(name=FIRE_SCHEDULE_ACTIVITY)
    async def fire_schedule(self, request: FireScheduleInput) -> FireScheduleResult:
        assert request.occurrence is not None, "the workflow always sets the occurrence"
        schedule = await get_schedule(
            self.db, tenant_id=request.tenant_id, schedule_id=request.schedule_id
        )
        if schedule is None:
            # Deleted after Temporal started this occurrence: nothing to submit.
            log.info("schedule %s (tenant %s) is gone", request.schedule_id, request.tenant_id)
            return FireScheduleResult(outcome="gone")
        occurrence = occurrence_text(request.occurrence)
        try:
            new = await self._submission_of(schedule, request.occurrence)
            outcome = await self.lifecycle.submit(new)
        except (SessionBusy, AgentNotAllowed) as refusal:  # the next occurrence tries again
            await self._recorded(schedule, occurrence, submission_id=None, error=str(refusal))
            return FireScheduleResult(outcome="refused")
        submission = outcome.submission
        await self._recorded(schedule, occurrence, submission_id=submission.id, error=None)
        # Every firing is recorded, a repeat too (`created: false`): at least once, so a
        # retry after a crash right before this line still records the first.
        await emit(
            self.db,
            session_id=submission.session_id,
            submission_id=submission.id,
            type="schedule.fired",
            scheduleId=schedule.id,
            occurrence=occurrence,
            created=outcome.created,
        )
        return FireScheduleResult(
            outcome="submitted", submission_id=submission.id, created=outcome.created
        )

    async def _submission_of(
        self, schedule: PromptScheduleRow, occurrence: datetime
    ) -> NewSubmission:
        """The occurrence's submission, made once per occurrence (its idempotency key)."""
        return NewSubmission(
            tenant_id=schedule.tenant_id,
            chat_id=schedule.session_id,
            agent=schedule.agent,
            message=occurrence_message(schedule, occurrence),
            idempotency_key=occurrence_key(schedule.id, occurrence),
            # The session agent's concurrency strategy applies, as to any message.
            options=SubmissionOptions(
                task_queue=self.task_queue,
                limits=await agent_limits(self.db, schedule.tenant_id),
            ),
        )

    async def _recorded(
        self,
        schedule: PromptScheduleRow,
        occurrence: str,
        *,
        submission_id: str | None,
        error: str | None,
    ) -> None:
        """The occurrence's outcome on the schedule (`GET /v1/schedules/{id}` shows it)."""
        await record_occurrence(
            self.db,
            tenant_id=schedule.tenant_id,
            schedule_id=schedule.id,
            occurrence=occurrence,
            submission_id=submission_id,
            error=error,
        )
