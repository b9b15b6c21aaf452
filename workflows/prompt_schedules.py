"""ScheduledPromptWorkflow: one occurrence of a scheduled prompt, started by its Temporal
Schedule. It only submits the prompt and starts the turn (one activity); the turn is its own
`TurnWorkflow`, queued in the session like any chat message."""

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from perdure.domain.names import FIRE_SCHEDULE_ACTIVITY, SCHEDULED_PROMPT_WORKFLOW
    from perdure.domain.prompt_schedules import FireScheduleInput, FireScheduleResult

SCHEDULED_START_TIME = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
"""Set by Temporal on every workflow a schedule starts (backfills included): the occurrence's
scheduled time, the same however often that occurrence is started."""

FIRE_TIMEOUT = timedelta(seconds=30)
FIRE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=12,
)
"""Submitting is idempotent, so it is retried through a short store or Temporal outage
(~4 minutes in all); then the occurrence fails, visibly, in the schedule's recent actions."""


# The class is named as the workflow Temporal knows (SCHEDULED_PROMPT_WORKFLOW), which stays.
@workflow.defn(name=SCHEDULED_PROMPT_WORKFLOW)
class ScheduledPromptWorkflow:
    @workflow.run
    async def run(self, request: FireScheduleInput) -> FireScheduleResult:
        occurrence = request.occurrence or workflow.info().typed_search_attributes.get(
            SCHEDULED_START_TIME
        )
        if occurrence is None:
            raise ApplicationError(
                "started without an occurrence time: give `occurrence` when starting it "
                "outside its schedule",
                type="MissingOccurrence",
                non_retryable=True,
            )
        result: FireScheduleResult = await workflow.execute_activity(
            FIRE_SCHEDULE_ACTIVITY,
            request.model_copy(update={"occurrence": occurrence}),
            result_type=FireScheduleResult,
            start_to_close_timeout=FIRE_TIMEOUT,
            retry_policy=FIRE_RETRY,
            summary=f"submit scheduled prompt {request.schedule_id}",
        )
        return result
