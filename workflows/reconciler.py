"""ReconcilerWorkflow: run by a Temporal Schedule, repairs submissions no workflow is serving."""

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from perdure.domain.names import RECONCILE_ACTIVITY, RECONCILER_WORKFLOW
    from perdure.domain.payloads import ReconcileInput, ReconcileReport


@workflow.defn(name=RECONCILER_WORKFLOW)
class ReconcilerWorkflow:
    @workflow.run
    async def run(self, request: ReconcileInput) -> ReconcileReport:
        report: ReconcileReport = await workflow.execute_activity(
            RECONCILE_ACTIVITY,
            request,
            result_type=ReconcileReport,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RetryPolicy(maximum_attempts=3),
            summary="reconcile submissions",
        )
        return report
