"""The reconcile activity: repair submissions and fibers that no workflow is serving
(docs/architecture.md, "The reconciler"), prune closed chunk logs past the retention period,
and sweep workspace blobs no file names."""

import logging
from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity
from temporalio.client import Client

from activities.base import StoreActivity
from activities.events import emit
from activities.fiber_sweep import sweep_fibers
from activities.finish import TurnFinisher
from perdure.domain.names import RECONCILE_ACTIVITY
from perdure.domain.payloads import FinishTurnInput, ReconcileInput, ReconcileReport, TurnRef
from perdure.turn_control.client import turn_state
from perdure.turn_control.lifecycle import SubmissionLifecycle
from storage.chunks import LogWriter
from storage.hygiene import prune_closed_logs
from storage.submission_reads import stale_active
from storage.timing import now
from storage.workspace_blobs import BlobDirectory
from storage.workspaces import sweep_blobs

RECONCILER_WRITER = LogWriter(key="reconciler", attempt=1)
PRUNE_BATCHES = 50
"""Prune transactions per run at most (each bounded in logs and chunks): the rest waits for
the next run, 2 minutes later."""

log = logging.getLogger(__name__)


@dataclass(kw_only=True, eq=False)
class ReconcileActivity(StoreActivity):
    client: Client
    task_queue: str
    """Fibers' (the turns' is the lifecycle's)."""
    lifecycle: SubmissionLifecycle
    finisher: TurnFinisher
    chunk_retention: timedelta | None = None
    """None: closed chunk logs are kept forever."""
    blobs: BlobDirectory | None = None

    @activity.defn(name=RECONCILE_ACTIVITY)
    async def reconcile(self, request: ReconcileInput) -> ReconcileReport:
        """Start the workflow of an active submission that has none (its gateway died between
        recording it and starting it); close one whose workflow ended without finishing it
        (terminated by an operator, say), so its session is released."""
        report = ReconcileReport()
        for submission in await stale_active(self.db, older_than=request.older_than_seconds):
            state = await turn_state(self.client, submission.id)
            if state == "missing" and submission.cancel_requested_at is not None:
                state = "cancelled before it started"  # ended below, never run
            if state == "missing":
                await self.lifecycle.start(submission)
                report.started.append(submission.id)
                action = "started"
            elif state != "RUNNING":
                await self.finisher.finish(
                    FinishTurnInput(
                        turn=TurnRef(
                            submission_id=submission.id,
                            session_id=submission.session_id,
                            assistant_message_id=submission.assistant_message_id,
                            agent=submission.agent,
                        ),
                        outcome="aborted" if submission.cancel_requested_at else "error",
                        error_text=None
                        if submission.cancel_requested_at
                        else f"The turn's workflow ended ({state}) before finishing it.",
                    ),
                    writer=RECONCILER_WRITER,
                )
                report.closed.append(submission.id)
                action = "closed"
            elif submission.cancel_requested_at is not None and submission.ending is None:
                # A stop recorded while Temporal could not take its cancellation.
                await self.lifecycle.cancel(submission.id)
                report.stops_resent.append(submission.id)
                action = "stop resent"
            else:
                continue
            await emit(
                self.db,
                session_id=submission.session_id,
                submission_id=submission.id,
                type="submission.reconciled",
                action=action,
                workflowState=state,
            )
        fibers = await sweep_fibers(
            self.db,
            self.client,
            task_queue=self.task_queue,
            older_than=request.older_than_seconds,
        )
        report.fibers_started, report.fibers_settled = fibers.started, fibers.settled
        report.pruned_logs = await self._prune()
        report.swept_blobs = await self._sweep()
        return report

    async def _sweep(self) -> int:
        """Delete the workspace blobs no file names any more (storage/workspace_blobs.py). A
        failure is logged, not raised, as a prune's is."""
        if self.blobs is None:
            return 0
        try:
            return await sweep_blobs(self.db, self.blobs)
        except Exception:
            log.exception("sweeping the workspace blob directory failed; the next run goes on")
            return 0

    async def _prune(self) -> int:
        """Delete the chunks of logs closed longer ago than the retention period, in bounded
        batches. A failure is logged, not raised: the repairs above are done, and the next run
        prunes what this one could not."""
        if self.chunk_retention is None:
            return 0
        before = now() - self.chunk_retention.total_seconds()
        pruned = 0
        try:
            for _ in range(PRUNE_BATCHES):
                batch = await prune_closed_logs(self.db, closed_before=before)
                pruned += batch.logs
                if batch.logs == 0:
                    break
        except Exception:
            log.exception(
                "pruning closed chunk logs failed after %d logs; the next run goes on", pruned
            )
        return pruned
