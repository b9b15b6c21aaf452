"""The reconcile activity: repair submissions that no workflow is serving (DESIGN §3)."""

from temporalio import activity
from temporalio.client import Client

from activities.events import emit
from activities.finish import TurnFinisher
from domain.names import RECONCILE_ACTIVITY
from domain.payloads import FinishTurnInput, ReconcileInput, ReconcileReport
from storage.chunks import LogWriter
from storage.db import Database
from storage.submissions import stale_active
from turn_control.client import start_turn, turn_state

RECONCILER_WRITER = LogWriter(key="reconciler", attempt=1)


class ReconcileActivity:
    def __init__(
        self, *, db: Database, client: Client, task_queue: str, finisher: TurnFinisher
    ) -> None:
        self._db = db
        self._client = client
        self._task_queue = task_queue
        self._finisher = finisher

    @activity.defn(name=RECONCILE_ACTIVITY)
    async def reconcile(self, request: ReconcileInput) -> ReconcileReport:
        """Start the workflow of an active submission that has none (its gateway died between
        recording it and starting it); close one whose workflow ended without finishing it
        (terminated by an operator, say), so its session is released."""
        report = ReconcileReport()
        for submission in await stale_active(self._db, older_than=request.older_than_seconds):
            state = await turn_state(self._client, submission.id)
            if state == "missing":
                await start_turn(self._client, submission, task_queue=self._task_queue, eager=False)
                report.started.append(submission.id)
            elif state != "RUNNING":
                await self._finisher.finish(
                    FinishTurnInput(
                        submission_id=submission.id,
                        session_id=submission.session_id,
                        assistant_message_id=submission.assistant_message_id,
                        agent=submission.agent,
                        outcome="error",
                        error_text=f"The turn's workflow ended ({state}) before finishing it.",
                    ),
                    writer=RECONCILER_WRITER,
                )
                report.closed.append(submission.id)
            else:
                continue
            await emit(
                self._db,
                session_id=submission.session_id,
                submission_id=submission.id,
                type="submission.reconciled",
                action="started" if state == "missing" else "closed",
                workflowState=state,
            )
        return report
